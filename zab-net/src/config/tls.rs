//! zoo.cfg's TLS keys, in ZooKeeper's names (files are PEM only: the `*.type` keys, if given,
//! must say `PEM`):
//!
//! | key | meaning | default |
//! |-----|---------|---------|
//! | `sslQuorum` | mutual TLS on the quorum and election ports | `false` |
//! | `ssl.quorum.keyStore.location` | PEM file: this member's certificate chain (end entity first) and its private key | required with `sslQuorum=true` |
//! | `ssl.quorum.trustStore.location` | PEM file: the cluster CA certificate(s) every member's certificate must chain to | required with `sslQuorum=true` |
//! | `ssl.quorum.hostnameVerification` | a member's certificate must name the host of its `server.N` line (IP or DNS SAN) | `true` |
//! | `client.secure` | the client port (`clientPort`) speaks TLS only | `false` |
//! | `ssl.keyStore.location` | PEM file: the client port's certificate chain and private key | required with `client.secure=true` |
//! | `ssl.trustStore.location` | PEM file: the CA(s) client certificates must chain to, and that other members' client-port certificates are checked against when this node forwards to them | required with `client.secure=true` |
//! | `ssl.clientAuth` | `none`, or `need`: clients must present a certificate from `ssl.trustStore.location` | `none` |
//! | `ssl.hostnameVerification` | when this node forwards to another member's client port, that member's certificate must name its host | `true` |
//!
//! INV-1: a parsed [`TlsSettings`] is complete: with `sslQuorum=true` both quorum files are
//! named, with `client.secure=true` both client-port files are; each missing key is an error
//! naming it ([`ConfigError::Needs`]). The files themselves are read when the node starts
//! ([`crate::tls`]).

use std::path::PathBuf;

use super::{ConfigError, Entry};

/// The TLS settings of a zoo.cfg.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TlsSettings {
    /// Quorum and election ports (`sslQuorum=true`).
    pub quorum: Option<QuorumTlsSettings>,
    /// The client port (`client.secure=true`).
    pub client: Option<ClientTlsSettings>,
}

/// `sslQuorum=true` and its files.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct QuorumTlsSettings {
    /// `ssl.quorum.keyStore.location`.
    pub key_store: PathBuf,
    /// `ssl.quorum.trustStore.location`.
    pub trust_store: PathBuf,
    /// `ssl.quorum.hostnameVerification`.
    pub hostname_verification: bool,
}

impl QuorumTlsSettings {
    /// The key of the key store file.
    pub const KEY_STORE: &'static str = "ssl.quorum.keyStore.location";
    /// The key of the trust store file.
    pub const TRUST_STORE: &'static str = "ssl.quorum.trustStore.location";

    /// Settings built by hand (tests, tools).
    pub fn new(key_store: PathBuf, trust_store: PathBuf) -> QuorumTlsSettings {
        QuorumTlsSettings {
            key_store,
            trust_store,
            hostname_verification: true,
        }
    }
}

/// Whether the client port asks for client certificates (`ssl.clientAuth`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificate asked for.
    #[default]
    None,
    /// A client certificate chaining to `ssl.trustStore.location` is required.
    Need,
}

/// `client.secure=true` and its files.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientTlsSettings {
    /// `ssl.keyStore.location`.
    pub key_store: PathBuf,
    /// `ssl.trustStore.location`.
    pub trust_store: PathBuf,
    /// `ssl.clientAuth`.
    pub client_auth: ClientAuth,
    /// `ssl.hostnameVerification`.
    pub hostname_verification: bool,
}

impl ClientTlsSettings {
    /// The key of the key store file.
    pub const KEY_STORE: &'static str = "ssl.keyStore.location";
    /// The key of the trust store file.
    pub const TRUST_STORE: &'static str = "ssl.trustStore.location";
}

/// The TLS keys seen while parsing.
#[derive(Default)]
pub(super) struct TlsKeys {
    ssl_quorum: Option<(bool, usize)>,
    quorum_key_store: Option<PathBuf>,
    quorum_trust_store: Option<PathBuf>,
    quorum_hostname: Option<bool>,
    client_secure: Option<(bool, usize)>,
    key_store: Option<PathBuf>,
    trust_store: Option<PathBuf>,
    client_auth: Option<ClientAuth>,
    hostname: Option<bool>,
}

fn boolean(e: &Entry<'_>) -> Result<bool, ConfigError> {
    match e.value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(e.bad("expected `true` or `false`")),
    }
}

impl TlsKeys {
    /// Takes `e` if it is a TLS key; false when it is not.
    pub(super) fn set(&mut self, e: &Entry<'_>) -> Result<bool, ConfigError> {
        match e.key {
            "sslQuorum" => self.ssl_quorum = Some((boolean(e)?, e.line)),
            "ssl.quorum.keyStore.location" => self.quorum_key_store = Some(e.path()?),
            "ssl.quorum.trustStore.location" => self.quorum_trust_store = Some(e.path()?),
            "ssl.quorum.hostnameVerification" => self.quorum_hostname = Some(boolean(e)?),
            "client.secure" => self.client_secure = Some((boolean(e)?, e.line)),
            "ssl.keyStore.location" => self.key_store = Some(e.path()?),
            "ssl.trustStore.location" => self.trust_store = Some(e.path()?),
            "ssl.hostnameVerification" => self.hostname = Some(boolean(e)?),
            "ssl.clientAuth" => {
                self.client_auth = Some(match e.value {
                    "none" => ClientAuth::None,
                    "need" => ClientAuth::Need,
                    _ => return Err(e.bad("expected `none` or `need` (`want` is not supported)")),
                })
            }
            "ssl.quorum.keyStore.type"
            | "ssl.quorum.trustStore.type"
            | "ssl.keyStore.type"
            | "ssl.trustStore.type" => {
                if !e.value.eq_ignore_ascii_case("PEM") {
                    return Err(e.bad("only `PEM` files are supported"));
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The settings (INV-1).
    pub(super) fn finish(self) -> Result<TlsSettings, ConfigError> {
        let needs = |key: &'static str, by: &str, line: usize| ConfigError::Needs {
            key,
            by: by.to_owned(),
            line,
        };
        let quorum = match self.ssl_quorum {
            Some((true, line)) => Some(QuorumTlsSettings {
                key_store: self
                    .quorum_key_store
                    .ok_or_else(|| needs(QuorumTlsSettings::KEY_STORE, "sslQuorum=true", line))?,
                trust_store: self
                    .quorum_trust_store
                    .ok_or_else(|| needs(QuorumTlsSettings::TRUST_STORE, "sslQuorum=true", line))?,
                hostname_verification: self.quorum_hostname.unwrap_or(true),
            }),
            _ => None,
        };
        let client = match self.client_secure {
            Some((true, line)) => Some(ClientTlsSettings {
                key_store: self.key_store.ok_or_else(|| {
                    needs(ClientTlsSettings::KEY_STORE, "client.secure=true", line)
                })?,
                trust_store: self.trust_store.ok_or_else(|| {
                    needs(ClientTlsSettings::TRUST_STORE, "client.secure=true", line)
                })?,
                client_auth: self.client_auth.unwrap_or_default(),
                hostname_verification: self.hostname.unwrap_or(true),
            }),
            _ => None,
        };
        Ok(TlsSettings { quorum, client })
    }
}
