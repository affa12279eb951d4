//! PEM files: certificate chains, private keys and CA bundles. Every error names the key (a
//! zoo.cfg key or a command-line option) and the file (tls INV-1).
//!
//! A *key store* here is one PEM file holding the certificate chain (end entity first, then
//! any intermediates) and the private key (PKCS#8, PKCS#1 or SEC1), in any order. A *trust
//! store* is a PEM file of one or more CA certificates (several during a CA rollover).

use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::{provider, TlsError};

/// A certificate chain and its private key, checked to belong together.
#[derive(Debug)]
pub struct Identity {
    /// The chain, end entity first.
    pub chain: Vec<CertificateDer<'static>>,
    /// The private key of `chain[0]`.
    pub key: PrivateKeyDer<'static>,
}

impl Clone for Identity {
    fn clone(&self) -> Identity {
        Identity {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

fn read(key: &str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        key: key.to_owned(),
        path: path.to_path_buf(),
        source,
    })
}

fn bad(key: &str, path: &Path, reason: impl Into<String>) -> TlsError {
    TlsError::BadPem {
        key: key.to_owned(),
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// The certificates of a PEM file (at least one).
pub fn certificates(key: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let text = read(key, path)?;
    let certs = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(key, path, format!("not valid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(bad(
            key,
            path,
            "no `BEGIN CERTIFICATE` block (expected PEM certificates)",
        ));
    }
    Ok(certs)
}

/// The private key of a PEM file (the first one).
pub fn private_key(key: &str, path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let text = read(key, path)?;
    PrivateKeyDer::from_pem_slice(&text).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => bad(
            key,
            path,
            "no private key block (expected `BEGIN PRIVATE KEY`, `BEGIN RSA PRIVATE KEY` or \
             `BEGIN EC PRIVATE KEY`)",
        ),
        e => bad(key, path, format!("not valid PEM: {e}")),
    })
}

/// A certificate chain from `cert_path` and its key from `key_path` (the same file for a key
/// store), checked to match.
pub fn identity(
    cert_key: &str,
    cert_path: &Path,
    key_key: &str,
    key_path: &Path,
) -> Result<Identity, TlsError> {
    let chain = certificates(cert_key, cert_path)?;
    let key = private_key(key_key, key_path)?;
    let id = Identity { chain, key };
    check_match(&id, key_key, key_path)?;
    Ok(id)
}

/// A key store: one file with the chain and the key.
pub fn key_store(key: &str, path: &Path) -> Result<Identity, TlsError> {
    identity(key, path, key, path)
}

fn check_match(id: &Identity, key: &str, path: &Path) -> Result<(), TlsError> {
    match rustls::sign::CertifiedKey::from_der(id.chain.clone(), id.key.clone_key(), &provider()) {
        Ok(_) => Ok(()),
        Err(rustls::Error::InconsistentKeys(_)) => Err(TlsError::KeyMismatch {
            key: key.to_owned(),
            path: path.to_path_buf(),
        }),
        Err(e) => Err(TlsError::Rejected {
            key: key.to_owned(),
            path: path.to_path_buf(),
            reason: e.to_string(),
        }),
    }
}

/// A trust store: every CA certificate of the file.
pub fn trust_store(key: &str, path: &Path) -> Result<Arc<RootCertStore>, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(key, path)? {
        roots.add(cert).map_err(|e| TlsError::Rejected {
            key: key.to_owned(),
            path: path.to_path_buf(),
            reason: format!("not a usable CA certificate: {e}"),
        })?;
    }
    Ok(Arc::new(roots))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issue(dir: &Path, name: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let _ = dir;
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn a_key_store_loads_and_every_fault_names_the_key_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (cert, key) = issue(d, "127.0.0.1");
        let (_, other_key) = issue(d, "127.0.0.2");
        std::fs::write(d.join("good.pem"), format!("{cert}{key}")).unwrap();
        std::fs::write(d.join("key-first.pem"), format!("{key}{cert}")).unwrap();
        std::fs::write(d.join("mismatch.pem"), format!("{cert}{other_key}")).unwrap();
        std::fs::write(d.join("no-key.pem"), &cert).unwrap();
        std::fs::write(d.join("no-cert.pem"), &key).unwrap();
        std::fs::write(d.join("junk.pem"), "not pem at all\n").unwrap();
        let k = "ssl.quorum.keyStore.location";
        assert_eq!(key_store(k, &d.join("good.pem")).unwrap().chain.len(), 1);
        assert!(key_store(k, &d.join("key-first.pem")).is_ok(), "any order");
        let err = |file: &str| key_store(k, &d.join(file)).unwrap_err();
        assert!(matches!(err("mismatch.pem"), TlsError::KeyMismatch { .. }));
        assert!(matches!(err("missing.pem"), TlsError::Read { .. }));
        for file in ["no-key.pem", "no-cert.pem", "junk.pem"] {
            assert!(matches!(err(file), TlsError::BadPem { .. }), "{file}");
        }
        for file in ["mismatch.pem", "missing.pem", "no-key.pem", "junk.pem"] {
            let text = err(file).to_string();
            assert!(text.contains(k) && text.contains(file), "{text}");
        }
        let t = "ssl.quorum.trustStore.location";
        assert_eq!(trust_store(t, &d.join("good.pem")).unwrap().len(), 1);
        let text = trust_store(t, &d.join("no-cert.pem"))
            .unwrap_err()
            .to_string();
        assert!(text.contains(t) && text.contains("no-cert.pem"), "{text}");
    }
}
