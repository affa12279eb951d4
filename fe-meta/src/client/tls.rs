//! [`ClientTls`]: TLS to a node's client port (`client.secure=true` on the server).
//!
//! INV-1: the node's certificate must chain to the CA given and name the host of the endpoint
//! dialed (an IP SAN when the endpoint is an IP literal, a DNS SAN otherwise).
//! INV-2: a client certificate is presented only when both a certificate and its key are given
//! (and they are checked to match when loaded).

use std::path::Path;
use std::sync::Arc;

use tokio::net::TcpStream;
use zab_net::tls::{self, pem, Stream, TlsError};

/// A client's TLS settings; cheap to clone (one shared rustls configuration).
#[derive(Clone)]
pub struct ClientTls {
    config: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientTls")
    }
}

/// Two settings are equal when they share one configuration.
impl PartialEq for ClientTls {
    fn eq(&self, other: &ClientTls) -> bool {
        Arc::ptr_eq(&self.config, &other.config)
    }
}

impl Eq for ClientTls {}

impl ClientTls {
    /// From PEM files: the CA bundle the node's certificate must chain to, and optionally a
    /// client certificate (chain) and its private key. Errors name the option
    /// (`--tls-ca`, `--tls-cert`, `--tls-key`) and the file.
    pub fn load(ca: &Path, cert: Option<&Path>, key: Option<&Path>) -> Result<ClientTls, TlsError> {
        let roots = pem::trust_store("--tls-ca", ca)?;
        let identity = match (cert, key) {
            (Some(cert), Some(key)) => Some(pem::identity("--tls-cert", cert, "--tls-key", key)?),
            (None, None) => None,
            (Some(_), None) => return Err(missing("--tls-key", "--tls-cert is given")),
            (None, Some(_)) => return Err(missing("--tls-cert", "--tls-key is given")),
        };
        let config =
            tls::client_config(roots, identity, true).map_err(|reason| TlsError::Rejected {
                key: "--tls-cert".to_owned(),
                path: cert.unwrap_or(ca).to_path_buf(),
                reason,
            })?;
        Ok(ClientTls { config })
    }

    /// From a rustls configuration built elsewhere (a node forwarding to another node).
    pub fn from_config(config: Arc<rustls::ClientConfig>) -> ClientTls {
        ClientTls { config }
    }

    /// The TLS handshake on `tcp`, dialed to `addr` (`host:port`), INV-1.
    pub(super) async fn connect(&self, addr: &str, tcp: TcpStream) -> std::io::Result<Stream> {
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
        let name = tls::server_name(host)?;
        let connector = tokio_rustls::TlsConnector::from(self.config.clone());
        let stream = connector.connect(name, tcp).await?;
        Ok(Stream::Tls(Box::new(stream.into())))
    }
}

fn missing(key: &str, because: &str) -> TlsError {
    TlsError::Missing {
        key: key.to_owned(),
        because: because.to_owned(),
    }
}
