//! [`ClientPortTls`]: the client port's TLS (`client.secure=true`), and the TLS this node
//! uses when it forwards a request to another member's client port.
//!
//! INV-1: with TLS on, nothing is read from a client (not even a four-letter word) before the
//! TLS handshake completed; with `ssl.clientAuth=need` that includes a client certificate
//! chaining to `ssl.trustStore.location`. A failed handshake closes the connection, is
//! counted (`fe_meta_client_tls_refused_total`, by the caller), and warned about at most once per address every [`zab_net::tls::WARN_EVERY`].
//! INV-2: the connection's identity ([`super::super::stats::ConnStats::identity`]) is the
//! verified client certificate's subject CN, or its first DNS SAN; `None` without
//! `ssl.clientAuth=need` (or for a certificate with neither).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tracing::warn;
use zab_net::config::{ClientAuth, ClientTlsSettings, NodeConfig};
use zab_net::tls::{self, identity::cert_identity, pem, Stream, TlsError, WarnLimit};

use super::super::ServerError;
use crate::client::ClientTls;

/// The client port's TLS of zoo.cfg (`client.secure=true`), its files read now: a missing or
/// bad file refuses the start, naming the key and the file, before anything is written. The
/// quorum TLS files (`sslQuorum=true`) are checked here too (the node loads them again when it
/// starts its transport).
pub fn load(node: &NodeConfig) -> Result<Option<ClientPortTls>, ServerError> {
    let invalid = |e: TlsError| ServerError::Invalid(e.to_string());
    if let Some(q) = &node.tls.quorum {
        tls::PeerTls::load(q).map_err(invalid)?;
    }
    node.tls
        .client
        .as_ref()
        .map(ClientPortTls::load)
        .transpose()
        .map_err(invalid)
}

/// The TLS a joining node uses to reach its helper (`--helper`), from the `client.secure`,
/// `ssl.keyStore.location`, `ssl.trustStore.location` and `ssl.hostnameVerification` lines of
/// its zoo.cfg `text`, which may not parse yet (the helper completes it). `None` without
/// `client.secure=true`.
pub fn joining_tls(text: &str) -> Result<Option<ClientTls>, ServerError> {
    let value = |key: &str| crate::server::join::value_of(text, key);
    if value("client.secure").as_deref() != Some("true") {
        return Ok(None);
    }
    let invalid = |e: TlsError| ServerError::Invalid(e.to_string());
    let path = |key: &'static str| {
        value(key).map(std::path::PathBuf::from).ok_or_else(|| {
            invalid(TlsError::Missing {
                key: key.to_owned(),
                because: "client.secure=true".to_owned(),
            })
        })
    };
    let (ks, ts) = (ClientTlsSettings::KEY_STORE, ClientTlsSettings::TRUST_STORE);
    let identity = pem::key_store(ks, &path(ks)?).map_err(invalid)?;
    let roots = pem::trust_store(ts, &path(ts)?).map_err(invalid)?;
    let names = value("ssl.hostnameVerification").as_deref() != Some("false");
    let config = tls::client_config(roots, Some(identity), names).map_err(ServerError::Invalid)?;
    Ok(Some(ClientTls::from_config(config)))
}

/// How long a client may take over its TLS handshake.
const HANDSHAKE_LIMIT: Duration = Duration::from_secs(10);

/// The client port's TLS (see the module docs).
#[derive(Clone)]
pub struct ClientPortTls {
    acceptor: TlsAcceptor,
    need_client_cert: bool,
    forwarding: ClientTls,
    /// The rate limit of the refusal warnings.
    limit: Arc<WarnLimit>,
}

impl std::fmt::Debug for ClientPortTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientPortTls")
            .field("need_client_cert", &self.need_client_cert)
            .finish_non_exhaustive()
    }
}

impl ClientPortTls {
    /// Loads the files zoo.cfg names; errors name the key and the file.
    pub fn load(s: &ClientTlsSettings) -> Result<ClientPortTls, TlsError> {
        let identity = pem::key_store(ClientTlsSettings::KEY_STORE, &s.key_store)?;
        let roots = pem::trust_store(ClientTlsSettings::TRUST_STORE, &s.trust_store)?;
        let need = s.client_auth == ClientAuth::Need;
        let rejected = |reason| TlsError::Rejected {
            key: ClientTlsSettings::KEY_STORE.to_owned(),
            path: s.key_store.clone(),
            reason,
        };
        let server =
            tls::server_config(identity.clone(), need.then(|| roots.clone())).map_err(rejected)?;
        let client =
            tls::client_config(roots, Some(identity), s.hostname_verification).map_err(rejected)?;
        Ok(ClientPortTls {
            acceptor: TlsAcceptor::from(server),
            need_client_cert: need,
            forwarding: ClientTls::from_config(client),
            limit: Arc::default(),
        })
    }

    /// The TLS a node uses to reach another member's client port (forwarded requests, peer
    /// status, a joining node's helper): the trust store as CA, the key store as client
    /// certificate.
    pub fn forwarding(&self) -> ClientTls {
        self.forwarding.clone()
    }

    /// The server's TLS handshake with a new client (INV-1): the stream and the client's
    /// identity (INV-2). `None`: refused (logged).
    pub(in crate::server) async fn accept(
        &self,
        tcp: TcpStream,
        peer: SocketAddr,
    ) -> Option<(Stream, Option<String>)> {
        let why = match tokio::time::timeout(HANDSHAKE_LIMIT, self.acceptor.accept(tcp)).await {
            Ok(Ok(tls)) => {
                let stream = Stream::Tls(Box::new(tls.into()));
                let identity = match self.need_client_cert {
                    true => stream
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .and_then(cert_identity),
                    false => None,
                };
                return Some((stream, identity));
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no TLS handshake within {HANDSHAKE_LIMIT:?}"),
        };
        if let Some(quiet) = self.limit.due(peer.ip()) {
            warn!(
                %peer,
                reason = %why,
                repeats = quiet,
                "refusing client: TLS handshake failed (the client port is TLS only{})",
                if self.need_client_cert {
                    ", with a client certificate from ssl.trustStore.location"
                } else {
                    ""
                }
            );
        }
        None
    }
}
