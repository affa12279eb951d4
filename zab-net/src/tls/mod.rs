//! TLS for every port: the quorum and election ports between members (`sslQuorum`, mutual TLS)
//! and, for the embedding application, its client port. rustls with the `ring` provider only.
//!
//! - [`Stream`]: a connection that is plain TCP or TLS over TCP; its halves
//!   ([`Stream::into_split`]) are tokio's owned TCP halves when plain, so a plaintext
//!   connection costs exactly what a bare `TcpStream` does.
//! - [`PeerTls`]: the quorum/election TLS of one member (built from
//!   [`crate::config::QuorumTlsSettings`]): every member presents its certificate and checks
//!   the other side's against the cluster CA, in both directions.
//! - [`pem`]: loading PEM certificate chains, private keys and CA bundles, each error naming
//!   the zoo.cfg key and the file.
//! - [`identity`]: the name a verified client certificate carries (subject CN, or first DNS
//!   SAN), for an application's authorisation.
//!
//! INV-1: configuration errors (missing or unreadable file, no PEM item, a key that does not
//! match its certificate, a CA file without a certificate) are found when the configuration is
//! built, before any port is bound, and name the key and the file ([`TlsError`]).
//! INV-2: with TLS on, no byte of the peer protocol (the hello included) is read or written
//! before the TLS handshake completed and the peer's certificate chained to a trusted CA.

pub mod identity;
mod limit;
mod peer;
pub mod pem;
mod stream;

use std::path::PathBuf;
use std::sync::Arc;

use thiserror::Error;

pub use limit::{WarnLimit, WARN_EVERY};
pub use peer::{client_config, names_host, server_config, server_name, PeerTls};
pub use stream::{ReadHalf, Stream, WriteHalf};

/// The one crypto provider every TLS configuration uses (`ring`: no aws-lc-rs, so no C
/// toolchain beyond `cc` at build time). rustls 0.23.48 deprecates it for lacking post-quantum
/// key exchange; the classical X25519/P-256 groups it offers are what this project needs.
#[allow(deprecated)]
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Why a TLS configuration could not be built (INV-1).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file named by a key could not be read.
    #[error("`{key}`: cannot read {path}: {source}")]
    Read {
        /// The zoo.cfg key (or option) that names the file.
        key: String,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file holds no usable PEM item of the kind the key needs, or bad PEM.
    #[error("`{key}`: {path}: {reason}")]
    BadPem {
        /// The key.
        key: String,
        /// The file.
        path: PathBuf,
        /// What is missing or wrong.
        reason: String,
    },
    /// The private key does not belong to the certificate.
    #[error(
        "`{key}`: the private key in {path} does not match its certificate (the first \
         certificate of the chain must be the one the key was issued for)"
    )]
    KeyMismatch {
        /// The key.
        key: String,
        /// The file holding the key.
        path: PathBuf,
    },
    /// A key that another key requires is absent.
    #[error("`{key}` is required when {because}")]
    Missing {
        /// The missing key.
        key: String,
        /// Which setting needs it.
        because: String,
    },
    /// rustls refused the configuration (a certificate it cannot use).
    #[error("`{key}`: {path}: {reason}")]
    Rejected {
        /// The key.
        key: String,
        /// The file.
        path: PathBuf,
        /// rustls' reason.
        reason: String,
    },
}
