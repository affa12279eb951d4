//! Authentication and authorisation on the client port (`docs/PROTOCOL.md` §11).
//!
//! With `auth.identitiesFile` in zoo.cfg, a session must authenticate before anything else:
//! its first request is AUTH (identity and secret, checked against the file), or its TLS
//! client certificate names an identity the file lists with proof `cert`. Each identity has
//! a role: `read` (reads, STATUS, SYNC, GET_CONFIG, RECOVERY_INFO), `write` (and catalog
//! writes) or `admin` (everything: membership changes, leader transfer, backups).
//! `auth.nodeCredentialsFile` is the identity this node itself uses when it calls another
//! node (forwarded writes, STATUS polls, joining); it must be an admin of this node's file.
//!
//! INV-1: on a node that requires authentication, no request but AUTH runs before the
//! session has an identity: any other request is answered UNAUTHENTICATED and the connection
//! is closed; so is a failed AUTH. A request the identity's role does not allow is answered
//! PERMISSION_DENIED and never runs; the session goes on.
//! INV-2: every refusal is counted (`fe_meta_auth_refusals_total{reason}`, and as its status
//! in `fe_meta_requests_total`) and logged at WARN, at most one line per reason per
//! [`WARN_EVERY`] (the lines in between are counted in the next one).
//! INV-3: a node without `auth.identitiesFile` runs every request, as before; AUTH there
//! succeeds with role admin, so clients can be given credentials before the nodes require
//! them.

mod identities;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use identities::{secret_digest, AuthFileError, Identities};

use zab_net::config::NodeConfig;

use super::ServerError;
use crate::client::Credentials;
use crate::protocol::{
    AuthRequest, ErrorReply, RequestBody, RequestKind, ResponseBody, Role, Status,
};

/// The authentication settings of zoo.cfg (module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthConfig {
    /// `auth.identitiesFile` and what it holds (`None`: the client port is open to all).
    pub identities: Option<(PathBuf, Arc<Identities>)>,
    /// `auth.nodeCredentialsFile` and what it holds.
    pub node_credentials: Option<(PathBuf, Arc<Credentials>)>,
}

impl AuthConfig {
    /// Loads the two files (each optional); refuses identities without node credentials and
    /// node credentials that are not an admin of this node's identities.
    pub fn load(
        identities_file: Option<&Path>,
        credentials_file: Option<&Path>,
    ) -> Result<AuthConfig, String> {
        let identities = match identities_file {
            Some(p) => Some((
                p.to_owned(),
                Arc::new(Identities::load(p).map_err(|e| format!("auth.identitiesFile: {e}"))?),
            )),
            None => None,
        };
        let node_credentials = match credentials_file {
            Some(p) => Some((
                p.to_owned(),
                Arc::new(
                    Credentials::load(p).map_err(|e| format!("auth.nodeCredentialsFile: {e}"))?,
                ),
            )),
            None => None,
        };
        if let Some((ids_path, ids)) = &identities {
            let Some((_, creds)) = &node_credentials else {
                return Err(format!(
                    "auth.identitiesFile is set ({}) but auth.nodeCredentialsFile is not: nodes \
                     forward writes to the leader and poll each other over the client port, \
                     so each needs the IDENTITY:SECRET of an admin identity",
                    ids_path.display()
                ));
            };
            if ids.authenticate(&creds.auth_request()) != Some(Role::Admin) {
                return Err(format!(
                    "auth.nodeCredentialsFile: identity `{}` is not an admin with that secret in \
                     {} (the node's own identity must be listed there with role admin)",
                    creds.identity,
                    ids_path.display()
                ));
            }
        }
        Ok(AuthConfig {
            identities,
            node_credentials,
        })
    }

    /// Loads the files zoo.cfg's `auth.*` keys name.
    pub fn from_node(node: &NodeConfig) -> Result<AuthConfig, ServerError> {
        let path = |key: &str| node.extra.get(key).map(|v| PathBuf::from(&v.value));
        AuthConfig::load(
            path("auth.identitiesFile").as_deref(),
            path("auth.nodeCredentialsFile").as_deref(),
        )
        .map_err(ServerError::Invalid)
    }

    /// `auth.identitiesFile` as configured (empty: none).
    pub fn identities_path(&self) -> String {
        self.identities
            .as_ref()
            .map_or(String::new(), |(p, _)| p.display().to_string())
    }

    /// `auth.nodeCredentialsFile` as configured (empty: none).
    pub fn credentials_path(&self) -> String {
        self.node_credentials
            .as_ref()
            .map_or(String::new(), |(p, _)| p.display().to_string())
    }

    /// Whether sessions must authenticate.
    pub fn required(&self) -> bool {
        self.identities.is_some()
    }

    /// The credentials this node calls other nodes with.
    pub fn credentials(&self) -> Option<Arc<Credentials>> {
        self.node_credentials.as_ref().map(|(_, c)| Arc::clone(c))
    }
}

/// The credentials `auth.nodeCredentialsFile` names in the text of a zoo.cfg that may not
/// load yet (a joining node's, which its helper completes).
pub fn node_credentials_in(zoo_cfg: &str) -> Result<Option<Arc<Credentials>>, ServerError> {
    match super::join::value_of(zoo_cfg, "auth.nodeCredentialsFile") {
        None => Ok(None),
        Some(path) => Credentials::load(Path::new(&path))
            .map(|c| Some(Arc::new(c)))
            .map_err(|e| ServerError::Invalid(format!("auth.nodeCredentialsFile: {e}"))),
    }
}

/// The role a request needs.
pub fn required_role(body: &RequestBody) -> Role {
    let kind = body.kind();
    if kind.is_membership_change() || kind == RequestKind::TRANSFER_LEADER {
        Role::Admin
    } else if let RequestBody::Backup(_) = body {
        Role::Admin
    } else if kind.is_write() {
        Role::Write
    } else {
        Role::Read
    }
}

/// Why a request was refused (the `reason` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A request other than AUTH before the session had an identity.
    NoIdentity,
    /// AUTH with an unknown identity or a wrong secret.
    BadCredentials,
    /// The identity's role does not allow the request.
    PermissionDenied,
}

impl Refusal {
    /// Every reason, in label order.
    pub const ALL: [Refusal; 3] = [
        Refusal::NoIdentity,
        Refusal::BadCredentials,
        Refusal::PermissionDenied,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Refusal::NoIdentity => "no_identity",
            Refusal::BadCredentials => "bad_credentials",
            Refusal::PermissionDenied => "permission_denied",
        }
    }
}

/// What the session does with a decoded request.
#[derive(Debug)]
pub enum Decision {
    /// Run it.
    Run,
    /// Answer it with this, without running it; `close`: then end the session (INV-1).
    Answer {
        /// The answer.
        result: Result<ResponseBody, ErrorReply>,
        /// Whether the session ends after it.
        close: bool,
        /// The refusal, if it is one (counted and logged by the caller).
        refusal: Option<Refusal>,
    },
}

/// One session's identity (module docs).
#[derive(Debug)]
pub struct SessionAuth {
    identities: Option<Arc<Identities>>,
    who: Option<(String, Role)>,
}

impl SessionAuth {
    /// A new session under `cfg`; `certificate` is the name a verified client certificate
    /// gives, if the TLS layer verified one.
    pub fn new(cfg: &AuthConfig, certificate: Option<&str>) -> SessionAuth {
        let identities = cfg.identities.as_ref().map(|(_, ids)| Arc::clone(ids));
        let who = match (&identities, certificate) {
            (Some(ids), Some(name)) => ids.certificate(name).map(|r| (name.to_owned(), r)),
            _ => None,
        };
        SessionAuth { identities, who }
    }

    /// The session's identity, if it has one.
    pub fn identity(&self) -> Option<&str> {
        self.who.as_ref().map(|(name, _)| name.as_str())
    }

    /// What to do with `body` (INV-1, INV-3).
    pub fn decide(&mut self, body: &RequestBody) -> Decision {
        if let RequestBody::Auth(req) = body {
            return self.authenticate(req);
        }
        let Some(_) = &self.identities else {
            return Decision::Run;
        };
        let Some((name, role)) = &self.who else {
            return refuse(
                Refusal::NoIdentity,
                Status::Unauthenticated,
                format!(
                    "{} needs an authenticated session: send AUTH first (fe-meta \
                     --credentials FILE) or connect with a client certificate the node knows",
                    body.kind()
                ),
                true,
            );
        };
        let needed = required_role(body);
        if *role >= needed {
            return Decision::Run;
        }
        refuse(
            Refusal::PermissionDenied,
            Status::PermissionDenied,
            format!(
                "identity `{name}` has role {role}; {} needs role {needed}",
                body.kind()
            ),
            false,
        )
    }

    fn authenticate(&mut self, req: &AuthRequest) -> Decision {
        let Some(ids) = &self.identities else {
            return Decision::Answer {
                result: Ok(ResponseBody::Authenticated {
                    identity: req.identity.clone(),
                    role: Role::Admin,
                }),
                close: false,
                refusal: None,
            };
        };
        match ids.authenticate(req) {
            Some(role) => {
                self.who = Some((req.identity.clone(), role));
                Decision::Answer {
                    result: Ok(ResponseBody::Authenticated {
                        identity: req.identity.clone(),
                        role,
                    }),
                    close: false,
                    refusal: None,
                }
            }
            None => {
                self.who = None;
                refuse(
                    Refusal::BadCredentials,
                    Status::Unauthenticated,
                    format!(
                        "AUTH as `{}` refused: unknown identity or wrong secret",
                        req.identity
                    ),
                    true,
                )
            }
        }
    }
}

fn refuse(refusal: Refusal, status: Status, message: String, close: bool) -> Decision {
    Decision::Answer {
        result: Err(ErrorReply::new(status, message)),
        close,
        refusal: Some(refusal),
    }
}

impl super::Shared {
    /// Counts and logs a refused request from `peer` (INV-2).
    pub(super) fn auth_refused(&self, refusal: Refusal, peer: SocketAddr, message: &str) {
        self.stats.metrics().auth_refused(refusal);
        self.refusals.refused(refusal, peer, message);
    }
}

/// At most one WARN line per reason per this long (INV-2).
pub const WARN_EVERY: Duration = Duration::from_secs(5);

/// Rate-limits the refusal WARN lines (INV-2).
#[derive(Debug)]
pub struct RefusalLog {
    started: Instant,
    /// Per reason: when the last line was written (ms since `started`, +1; 0: never) and the
    /// refusals not logged since.
    last: [(AtomicU64, AtomicU64); 3],
    lock: Mutex<()>,
}

impl Default for RefusalLog {
    fn default() -> RefusalLog {
        RefusalLog {
            started: Instant::now(),
            last: Default::default(),
            lock: Mutex::new(()),
        }
    }
}

impl RefusalLog {
    /// Logs `refusal` of a request from `peer` (INV-2).
    pub fn refused(&self, refusal: Refusal, peer: SocketAddr, message: &str) {
        let Some((last, unlogged)) = Refusal::ALL
            .iter()
            .position(|r| *r == refusal)
            .and_then(|i| self.last.get(i))
        else {
            return;
        };
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX) + 1;
        let _one_at_a_time = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let previous = last.load(Ordering::Relaxed);
        let every = u64::try_from(WARN_EVERY.as_millis()).unwrap_or(u64::MAX);
        if previous != 0 && now.saturating_sub(previous) < every {
            unlogged.fetch_add(1, Ordering::Relaxed);
            return;
        }
        last.store(now, Ordering::Relaxed);
        let more = unlogged.swap(0, Ordering::Relaxed);
        tracing::warn!(
            %peer,
            reason = refusal.label(),
            refused_since_last_line = more,
            "client request refused: {message}"
        );
    }
}

#[cfg(test)]
mod tests;
