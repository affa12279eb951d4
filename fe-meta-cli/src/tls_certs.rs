//! `fe-meta tls-certs`: a cluster CA and certificates for its nodes and clients, as PEM files
//! the zoo.cfg TLS keys and the client's `--tls-*` options read (for tests, benchmarks and
//! small deployments; a site with its own PKI uses that instead).
//!
//! Files: `CA_DIR/ca.pem` (the CA certificate: the trust store) and `CA_DIR/ca-key.pem` (its
//! private key, mode 0600; keep it off the nodes). In `OUT`: `ca.pem` (a copy), `node<N>.pem`
//! for the N-th host of `--hosts` (certificate + private key: a key store, valid as server and
//! as client certificate, naming its host as IP or DNS SAN and CN), and `client-<NAME>.pem`
//! for each `--client` (CN and DNS SAN `NAME`).
//!
//! INV-1: an existing CA in `CA_DIR` is reused (its key and subject), so certificates issued in
//! later runs chain to the same `ca.pem`: that is how a node's certificate is rotated. A new
//! `CA_DIR` makes a new CA (a rollover: trust both `ca.pem` files during the change).
//! INV-2: no existing file in `OUT` is overwritten; the CA key is never written to `OUT`.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use clap::Args;
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};

use super::{ExitCode, Failure};

/// `fe-meta tls-certs`.
#[derive(Clone, Debug, Args)]
pub struct TlsCertsArgs {
    /// Where the CA lives (`ca.pem`, `ca-key.pem`): reused if present, created otherwise.
    #[arg(long, value_name = "DIR")]
    pub ca_dir: PathBuf,
    /// Where the certificates go (created if missing; existing files are not overwritten).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Node hosts, comma-separated, in `server.N` order: `node1.pem` names the first.
    #[arg(long, value_delimiter = ',', value_name = "HOST[,HOST...]")]
    pub hosts: Vec<String>,
    /// Client certificates to issue (`client-NAME.pem`, identity NAME); repeatable.
    #[arg(long = "client", value_name = "NAME")]
    pub clients: Vec<String>,
}

/// A CA able to issue certificates.
pub struct Ca {
    cert: Certificate,
    key: KeyPair,
}

fn fail(message: String) -> Failure {
    Failure {
        code: ExitCode::Other,
        message,
    }
}

fn write_new(path: &Path, text: &str) -> Result<(), Failure> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| fail(format!("cannot create {}: {e}", path.display())))?;
    f.write_all(text.as_bytes())
        .map_err(|e| fail(format!("cannot write {}: {e}", path.display())))
}

fn ca_params(name: &str) -> CertificateParams {
    let mut p = CertificateParams::default();
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name.push(DnType::CommonName, name);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    p
}

impl Ca {
    /// A new CA named `name` (in memory).
    pub fn new(name: &str) -> Result<Ca, Failure> {
        let key = KeyPair::generate().map_err(|e| fail(format!("CA key: {e}")))?;
        let cert = ca_params(name)
            .self_signed(&key)
            .map_err(|e| fail(format!("CA certificate: {e}")))?;
        Ok(Ca { cert, key })
    }

    /// The CA of `dir`, created there if it has none (INV-1).
    pub fn open_or_create(dir: &Path) -> Result<Ca, Failure> {
        let (cert_path, key_path) = (dir.join("ca.pem"), dir.join("ca-key.pem"));
        if !cert_path.exists() {
            std::fs::create_dir_all(dir)
                .map_err(|e| fail(format!("cannot create {}: {e}", dir.display())))?;
            let ca = Ca::new(&format!("fe-meta cluster CA {}", unique_suffix()))?;
            write_new(&key_path, &ca.key.serialize_pem())?;
            restrict(&key_path)?;
            write_new(&cert_path, &ca.cert.pem())?;
            return Ok(ca);
        }
        let read = |p: &Path| {
            std::fs::read_to_string(p)
                .map_err(|e| fail(format!("cannot read {}: {e}", p.display())))
        };
        let key = KeyPair::from_pem(&read(&key_path)?)
            .map_err(|e| fail(format!("{}: not a usable key: {e}", key_path.display())))?;
        let der = zab_net::tls::pem::certificates("--ca-dir", &cert_path)
            .map_err(|e| fail(e.to_string()))?;
        let name = der
            .first()
            .and_then(zab_net::tls::identity::cert_identity)
            .ok_or_else(|| {
                fail(format!(
                    "{}: the CA certificate has no CN",
                    cert_path.display()
                ))
            })?;
        // The same subject and key: what this issues chains to the ca.pem on disk.
        let cert = ca_params(&name)
            .self_signed(&key)
            .map_err(|e| fail(format!("CA certificate: {e}")))?;
        Ok(Ca { cert, key })
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// A certificate and key (PEM, certificate first) naming `name` as CN and SAN (an IP SAN
    /// for an IP literal), usable as server and client certificate.
    pub fn issue(&self, name: &str) -> Result<String, Failure> {
        let mut p = CertificateParams::default();
        p.distinguished_name = DistinguishedName::new();
        p.distinguished_name.push(DnType::CommonName, name);
        let san = match name.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName(
                name.to_owned()
                    .try_into()
                    .map_err(|e| fail(format!("`{name}` is not a DNS name: {e}")))?,
            ),
        };
        p.subject_alt_names = vec![san];
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate().map_err(|e| fail(format!("key for {name}: {e}")))?;
        let cert = p
            .signed_by(&key, &self.cert, &self.key)
            .map_err(|e| fail(format!("certificate for {name}: {e}")))?;
        Ok(format!("{}{}", cert.pem(), key.serialize_pem()))
    }
}

/// A suffix that makes a new CA's name its own (two CAs of one name would be confused with
/// each other by a verifier that finds the issuer by name).
fn unique_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:x}-{:x}", nanos, rand::random::<u32>())
}

#[cfg(unix)]
fn restrict(path: &Path) -> Result<(), Failure> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| fail(format!("chmod 600 {}: {e}", path.display())))
}

#[cfg(not(unix))]
fn restrict(_: &Path) -> Result<(), Failure> {
    Ok(())
}

/// Writes `ca.pem`, one `node<N>.pem` per host and one `client-<NAME>.pem` per client in
/// `out` (INV-2).
pub fn write_all(ca: &Ca, out: &Path, hosts: &[String], clients: &[String]) -> Result<(), Failure> {
    std::fs::create_dir_all(out)
        .map_err(|e| fail(format!("cannot create {}: {e}", out.display())))?;
    let ca_copy = out.join("ca.pem");
    if !ca_copy.exists() {
        write_new(&ca_copy, &ca.pem())?;
    }
    for (i, host) in hosts.iter().enumerate() {
        let path = out.join(format!("node{}.pem", i + 1));
        write_new(&path, &ca.issue(host)?)?;
        restrict(&path)?;
    }
    for name in clients {
        let path = out.join(format!("client-{name}.pem"));
        write_new(&path, &ca.issue(name)?)?;
        restrict(&path)?;
    }
    Ok(())
}

/// Runs `fe-meta tls-certs`.
pub fn run(args: &TlsCertsArgs) -> Result<(), Failure> {
    if args.hosts.is_empty() && args.clients.is_empty() {
        return Err(Failure {
            code: ExitCode::Usage,
            message: "nothing to issue: give --hosts and/or --client".to_owned(),
        });
    }
    let ca = Ca::open_or_create(&args.ca_dir)?;
    write_all(&ca, &args.out, &args.hosts, &args.clients)?;
    println!(
        "CA {}; certificates in {}: ca.pem{}{}",
        args.ca_dir.join("ca.pem").display(),
        args.out.display(),
        (1..=args.hosts.len())
            .map(|i| format!(", node{i}.pem"))
            .collect::<String>(),
        args.clients
            .iter()
            .map(|c| format!(", client-{c}.pem"))
            .collect::<String>(),
    );
    Ok(())
}
