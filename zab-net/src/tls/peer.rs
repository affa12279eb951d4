//! [`PeerTls`]: mutual TLS between members on the quorum and election ports, and the rustls
//! configurations an application's client port uses ([`server_config`], [`client_config`]).
//!
//! INV-1: both sides present a certificate and check the other's against the same trust store
//! (the cluster CA or CAs): the dialer verifies the acceptor's server certificate, the
//! acceptor requires and verifies the dialer's client certificate. A peer without one that
//! chains to a trusted CA never completes the handshake.
//! INV-2: with hostname verification (the default), the dialer requires the acceptor's
//! certificate to name the host it dialed (`server.N`'s host: an IP SAN for an IP literal, a
//! DNS SAN otherwise), and the acceptor requires the dialer's certificate to name the host of
//! the `server.N` line of the sid its hello claims ([`PeerTls::check_name`]), so a member's
//! certificate cannot speak for another member.

use std::io;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::pem::{self, Identity};
use super::{provider, Stream, TlsError};
use crate::config::QuorumTlsSettings;

/// The quorum/election TLS of one member (see the module docs).
#[derive(Clone)]
pub struct PeerTls {
    connector: TlsConnector,
    acceptor: TlsAcceptor,
    hostname_verification: bool,
}

impl std::fmt::Debug for PeerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerTls")
            .field("hostname_verification", &self.hostname_verification)
            .finish_non_exhaustive()
    }
}

impl PeerTls {
    /// Loads the files zoo.cfg names (tls INV-1).
    pub fn load(settings: &QuorumTlsSettings) -> Result<PeerTls, TlsError> {
        let identity = pem::key_store(QuorumTlsSettings::KEY_STORE, &settings.key_store)?;
        let roots = pem::trust_store(QuorumTlsSettings::TRUST_STORE, &settings.trust_store)?;
        PeerTls::new(identity, roots, settings.hostname_verification).map_err(|e| {
            TlsError::Rejected {
                key: QuorumTlsSettings::KEY_STORE.to_owned(),
                path: settings.key_store.clone(),
                reason: e,
            }
        })
    }

    /// From a loaded identity and trust store.
    pub fn new(
        identity: Identity,
        roots: Arc<RootCertStore>,
        hostname_verification: bool,
    ) -> Result<PeerTls, String> {
        let server = server_config(identity.clone(), Some(roots.clone()))?;
        let client = client_config(roots, Some(identity), hostname_verification)?;
        Ok(PeerTls {
            connector: TlsConnector::from(client),
            acceptor: TlsAcceptor::from(server),
            hostname_verification,
        })
    }

    /// The dialer's handshake with the member whose `server.N` host is `host` (INV-1, INV-2).
    pub async fn connect(&self, host: &str, tcp: TcpStream) -> io::Result<Stream> {
        let name = server_name(host)?;
        let tls = self.connector.connect(name, tcp).await?;
        Ok(Stream::Tls(Box::new(tls.into())))
    }

    /// The acceptor's handshake: requires a client certificate from a trusted CA (INV-1).
    pub async fn accept(&self, tcp: TcpStream) -> io::Result<Stream> {
        let tls = self.acceptor.accept(tcp).await?;
        Ok(Stream::Tls(Box::new(tls.into())))
    }

    /// Whether the peer certificate of an accepted `stream` names `host` (INV-2); always Ok
    /// without hostname verification. The error says why not.
    pub fn check_name(&self, stream: &Stream, host: &str) -> Result<(), String> {
        if !self.hostname_verification {
            return Ok(());
        }
        let Some(cert) = stream.peer_certificates().and_then(|c| c.first()) else {
            return Err("no peer certificate".to_owned());
        };
        names_host(cert, host)
    }
}

/// Whether `cert` names `host` (an IP SAN for an IP literal, a DNS SAN otherwise).
pub fn names_host(cert: &CertificateDer<'_>, host: &str) -> Result<(), String> {
    let name = server_name(host).map_err(|e| e.to_string())?;
    let parsed = rustls::server::ParsedCertificate::try_from(cert).map_err(|e| e.to_string())?;
    rustls::client::verify_server_name(&parsed, &name)
        .map_err(|_| format!("its certificate does not name {host} (no matching IP or DNS SAN)"))
}

/// `host` as a TLS server name: an IP address for an IP literal, a DNS name otherwise.
pub fn server_name(host: &str) -> io::Result<ServerName<'static>> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_owned()).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{host}` is not a valid TLS server name: {e}"),
        )
    })
}

/// A server configuration presenting `identity`; with `client_roots`, a client certificate
/// chaining to one of them is required.
pub fn server_config(
    identity: Identity,
    client_roots: Option<Arc<RootCertStore>>,
) -> Result<Arc<ServerConfig>, String> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match client_roots {
        Some(roots) => {
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider())
                .build()
                .map_err(|e| e.to_string())?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let config = builder
        .with_single_cert(identity.chain, identity.key)
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(config))
}

/// A client configuration trusting `roots`, presenting `identity` if given; without
/// `hostname_verification` the server's certificate must chain to `roots` but need not name
/// the host dialed.
pub fn client_config(
    roots: Arc<RootCertStore>,
    identity: Option<Identity>,
    hostname_verification: bool,
) -> Result<Arc<ClientConfig>, String> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = if hostname_verification {
        builder.with_root_certificates(roots)
    } else {
        let inner = WebPkiServerVerifier::builder_with_provider(roots, provider())
            .build()
            .map_err(|e| e.to_string())?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyName(inner)))
    };
    let config = match identity {
        Some(id) => builder
            .with_client_auth_cert(id.chain, id.key)
            .map_err(|e| e.to_string())?,
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// The WebPKI server verifier without the name check (`hostnameVerification=false`): the
/// chain, validity and signatures are still checked.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
