//! The server's configuration: zoo.cfg (zab-net's parser) plus fe-meta's own keys, the node's
//! id from `dataDir/myid`, and what the server derives from them.
//!
//! fe-meta keys (all optional):
//!
//! | key | meaning | default |
//! |-----|---------|---------|
//! | `meta_delay_toleration_second` | staleness tolerance of non-leader reads, s (≥ 1); the leader logs a TIMESTAMP every min(10 s, half of it) (Doris' FE: every 10 s) | 300 |
//! | `write_timeout_ms` | bound on a write: submit, forwarding, read-your-writes wait | 10000 |
//! | `leader_wait_ms` | how long a write or sync waits for a leader before failing with QUORUM_UNAVAILABLE | 2000 |
//! | `peer_status_timeout_ms` | SHOW FRONTENDS and `mntr`: how long each member's STATUS call may take (asked fresh on every request) | 500 |
//! | `client_session_expiry_s` | a client session idle this long (by the leader's logged clock) is forgotten; 0: never. The leader logs it in every TIMESTAMP, so the leader's value is the one in force | 600 |
//! | `admin.enableServer` | serve the admin HTTP port (`/metrics`, `/health`, `/ready`, `/commands`), `true` or `false` (ZooKeeper's key) | true |
//! | `admin.serverAddress` | the admin port's listen address (ZooKeeper's key) | 0.0.0.0 |
//! | `admin.serverPort` | the admin port; 0: one the OS chooses (ZooKeeper's key) | 8080 |
//! | `auth.identitiesFile` | the identities (name, role, SHA-256 of the secret or `cert`) allowed on the client port; set: every session must authenticate (`auth`) | none: open |
//! | `auth.nodeCredentialsFile` | `IDENTITY:SECRET` this node uses when it calls other nodes (an admin identity); required with `auth.identitiesFile` | none |
//! | `server_threads` | threads that run the server's network, request and replication tasks (1..=[`SERVER_THREADS_MAX`]); 1: one thread for all of them, the fewest cross-thread wake-ups per write (docs/BENCHMARKS.md, "One server thread"); raise it when that thread is saturated (many clients, heavy reads) on a machine with cores to spare. The txn log's sync thread and snapshots have threads of their own either way | [`SERVER_THREADS_DEFAULT`] |
//! | `4lw.commands.whitelist` | the four-letter words answered on the client port: `*` or a comma-separated list (ZooKeeper's key; ZooKeeper's default is `srvr` only) | `*` |
//!
//! Required by fe-meta (zab-net keys): `clusterId` (the cluster's identity, the same on every
//! node; `local-cluster` generates one) and a client port: `clientPort` (this node's listen
//! port) and/or ZooKeeper 3.5's `server.N=host:q:e[:observer];[clientHost:]clientPort` (how
//! the other nodes reach it — needed to forward writes and for SHOW FRONTENDS).
//!
//! INV-1: a [`ServerConfig`] that loaded names its own member line, a non-zero cluster id and a
//! client listen address; every error names the key (and line, when it has one).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use zab_net::config::{load, read_myid, ConfigError, NodeConfig, ServerAddr};
use zab_net::{LearnerType, Membership, ServerId};

use super::auth::AuthConfig;
use super::ServerError;
use crate::protocol::FourLetterWord;
use crate::state::catalog::FrontendRole;

/// The keys fe-meta adds to zoo.cfg.
pub const EXTRA_KEYS: &[&str] = &[
    "meta_delay_toleration_second",
    "write_timeout_ms",
    "leader_wait_ms",
    "peer_status_timeout_ms",
    "client_session_expiry_s",
    "admin.enableServer",
    "admin.serverAddress",
    "admin.serverPort",
    "server_threads",
    "4lw.commands.whitelist",
    "auth.identitiesFile",
    "auth.nodeCredentialsFile",
];

/// `server_threads`' default: one thread runs every task of the server.
pub const SERVER_THREADS_DEFAULT: usize = 1;

/// The most `server_threads` accepted.
pub const SERVER_THREADS_MAX: usize = 256;

/// `admin.serverPort`'s default (ZooKeeper's).
pub const ADMIN_PORT_DEFAULT: u16 = 8080;

/// One member as the server sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Its host (from `server.N`).
    pub host: String,
    /// Its client address `host:port`, if the config gives one.
    pub client_addr: Option<String>,
    /// Its client port (0: unknown).
    pub client_port: u16,
    /// Follower (votes) or observer.
    pub role: FrontendRole,
}

/// A loaded server configuration (INV-1).
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The zoo.cfg as parsed.
    pub node: NodeConfig,
    /// This node's server id (`dataDir/myid`).
    pub sid: u64,
    /// The cluster id (`clusterId`).
    pub cluster_id: u64,
    /// This node's role (from its `server.N` line).
    pub role: FrontendRole,
    /// Where the client listener binds, `host:port`.
    pub client_listen: String,
    /// Every member, by sid.
    pub members: BTreeMap<u64, Member>,
    /// `meta_delay_toleration_second`, in ms.
    pub tolerance_ms: u64,
    /// `write_timeout_ms`.
    pub write_timeout: Duration,
    /// `leader_wait_ms`.
    pub leader_wait: Duration,
    /// `peer_status_timeout_ms`.
    pub peer_timeout: Duration,
    /// `client_session_expiry_s`, in ms (0: sessions never expire by time).
    pub session_expiry_ms: u64,
    /// Where the admin HTTP port listens, `host:port` (`None`: `admin.enableServer=false`).
    pub admin_listen: Option<String>,
    /// `server_threads`: how many threads run the server's tasks.
    pub server_threads: usize,
    /// The four-letter words answered on the client port (`4lw.commands.whitelist`).
    pub four_letter_words: Vec<FourLetterWord>,
    /// The client port's TLS (`client.secure=true`, files loaded); `None`: plain TCP.
    pub client_tls: Option<super::conn::tls::ClientPortTls>,
    /// `fe-meta server --bootstrap`: an empty data dir is a new cluster member that votes at
    /// once; without it an empty dir first syncs from a leader as a non-voting learner.
    pub bootstrap: bool,
    /// `auth.identitiesFile` and `auth.nodeCredentialsFile`, loaded.
    pub auth: AuthConfig,
}

impl ServerConfig {
    /// Reads `path` (zoo.cfg with fe-meta's keys) and `dataDir/myid`.
    pub fn load(path: &Path) -> Result<ServerConfig, ServerError> {
        let node = load(path, EXTRA_KEYS)?;
        let sid = read_myid(&node.data_dir)?;
        ServerConfig::from_node(node, sid.0)
    }

    /// Derives the server configuration of member `sid` from a parsed zoo.cfg.
    pub fn from_node(node: NodeConfig, sid: u64) -> Result<ServerConfig, ServerError> {
        let own = node
            .servers
            .get(&ServerId(sid))
            .ok_or(ConfigError::NotAMember { sid })?
            .clone();
        let cluster_id = cluster_id(&node)?;
        let members = node
            .servers
            .iter()
            .map(|(id, s)| (id.0, member(s)))
            .collect::<BTreeMap<_, _>>();
        let client_listen = client_listen(&node, &own, sid)?;
        let tolerance_s: u64 = node
            .extra_value("meta_delay_toleration_second")?
            .unwrap_or(300);
        if tolerance_s == 0 {
            return Err(bad(&node, "meta_delay_toleration_second", "must be ≥ 1"));
        }
        let ms = |key: &str, default: u64| -> Result<Duration, ServerError> {
            let v: u64 = node.extra_value(key)?.unwrap_or(default);
            if v == 0 {
                return Err(bad(&node, key, "must be > 0"));
            }
            Ok(Duration::from_millis(v))
        };
        Ok(ServerConfig {
            sid,
            cluster_id,
            role: role_of(own.learner_type),
            client_listen,
            members,
            tolerance_ms: tolerance_s.saturating_mul(1000),
            write_timeout: ms("write_timeout_ms", 10_000)?,
            leader_wait: ms("leader_wait_ms", 2_000)?,
            peer_timeout: ms("peer_status_timeout_ms", 500)?,
            session_expiry_ms: node
                .extra_value::<u64>("client_session_expiry_s")?
                .unwrap_or(600)
                .saturating_mul(1000),
            admin_listen: admin_listen(&node)?,
            server_threads: server_threads(&node)?,
            four_letter_words: four_letter_words(&node)?,
            client_tls: super::conn::tls::load(&node)?,
            bootstrap: false,
            auth: AuthConfig::from_node(&node)?,
            node,
        })
    }

    /// How often the leader logs a TIMESTAMP: half the tolerance.
    pub fn timestamp_interval(&self) -> Duration {
        Duration::from_millis((self.tolerance_ms / 2).max(1))
    }
}

/// zoo.cfg's `server.N` lines as a configuration (version 0: the bootstrap one).
pub fn bootstrap_membership(node: &NodeConfig) -> Membership {
    let types = node
        .servers
        .iter()
        .map(|(sid, s)| (*sid, s.learner_type))
        .collect();
    Membership::bootstrap(&types, &node.bootstrap_addresses())
}

/// The configured `clusterId`, which must be there and non-zero.
fn cluster_id(node: &NodeConfig) -> Result<u64, ServerError> {
    match node.cluster_id {
        Some(id) if id != 0 => Ok(id),
        _ => Err(ServerError::Invalid(
            "missing or zero `clusterId`: every fe-meta node of a cluster must carry \
             the same non-zero clusterId (local-cluster generates one)"
                .to_string(),
        )),
    }
}

impl ServerConfig {
    /// fe-meta's own settings as (key, effective value), in [`EXTRA_KEYS`]' order: what the
    /// `conf` word and `fe-meta check-config` print after the ZAB node's keys. The admin
    /// port shows as `admin.enableServer` and the address it binds (`admin.listen`).
    pub fn fe_meta_settings(&self) -> Vec<(String, String)> {
        let whitelist: Vec<&str> = self.four_letter_words.iter().map(|w| w.word()).collect();
        [
            (
                "meta_delay_toleration_second",
                (self.tolerance_ms / 1000).to_string(),
            ),
            (
                "write_timeout_ms",
                self.write_timeout.as_millis().to_string(),
            ),
            ("leader_wait_ms", self.leader_wait.as_millis().to_string()),
            (
                "peer_status_timeout_ms",
                self.peer_timeout.as_millis().to_string(),
            ),
            (
                "client_session_expiry_s",
                (self.session_expiry_ms / 1000).to_string(),
            ),
            (
                "admin.enableServer",
                self.admin_listen.is_some().to_string(),
            ),
            (
                "admin.listen",
                self.admin_listen.clone().unwrap_or_default(),
            ),
            ("server_threads", self.server_threads.to_string()),
            ("4lw.commands.whitelist", whitelist.join(",")),
            ("auth.identitiesFile", self.auth.identities_path()),
            ("auth.nodeCredentialsFile", self.auth.credentials_path()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }
}

/// `server_threads`, in 1..=[`SERVER_THREADS_MAX`].
fn server_threads(node: &NodeConfig) -> Result<usize, ServerError> {
    let n: usize = node
        .extra_value("server_threads")?
        .unwrap_or(SERVER_THREADS_DEFAULT);
    if !(1..=SERVER_THREADS_MAX).contains(&n) {
        return Err(bad(
            node,
            "server_threads",
            &format!("must be 1 to {SERVER_THREADS_MAX}"),
        ));
    }
    Ok(n)
}

/// The `server_threads` of the zoo.cfg at `path`, read before the server starts (the runtime
/// that will run it is sized by it); `None` when the file or the key's value is unusable, which
/// the server's start then reports with the reason.
pub fn server_threads_of(path: &Path) -> Option<usize> {
    let node = load(path, EXTRA_KEYS).ok()?;
    server_threads(&node).ok()
}

/// `admin.enableServer`, `admin.serverAddress` and `admin.serverPort` as the admin port's
/// listen address.
fn admin_listen(node: &NodeConfig) -> Result<Option<String>, ServerError> {
    let enabled = match node
        .extra
        .get("admin.enableServer")
        .map(|v| v.value.as_str())
    {
        None | Some("true") => true,
        Some("false") => false,
        Some(_) => return Err(bad(node, "admin.enableServer", "must be `true` or `false`")),
    };
    let host = node
        .extra
        .get("admin.serverAddress")
        .map_or("0.0.0.0", |v| v.value.as_str());
    let host_ok = !host.is_empty()
        && (host.parse::<std::net::IpAddr>().is_ok()
            || host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-'));
    if !host_ok {
        return Err(bad(
            node,
            "admin.serverAddress",
            "must be an IP address or a host name",
        ));
    }
    let port: u16 = node
        .extra_value("admin.serverPort")?
        .unwrap_or(ADMIN_PORT_DEFAULT);
    if !enabled {
        return Ok(None);
    }
    Ok(Some(if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }))
}

/// `4lw.commands.whitelist`: `*` (the default) or a comma-separated list of words.
fn four_letter_words(node: &NodeConfig) -> Result<Vec<FourLetterWord>, ServerError> {
    let Some(v) = node.extra.get("4lw.commands.whitelist") else {
        return Ok(FourLetterWord::ALL.to_vec());
    };
    let mut words = Vec::new();
    for item in v.value.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        if item == "*" {
            return Ok(FourLetterWord::ALL.to_vec());
        }
        match FourLetterWord::ALL.into_iter().find(|w| w.word() == item) {
            Some(w) if !words.contains(&w) => words.push(w),
            Some(_) => {}
            None => {
                let known: Vec<&str> = FourLetterWord::ALL.iter().map(|w| w.word()).collect();
                return Err(bad(
                    node,
                    "4lw.commands.whitelist",
                    &format!(
                        "`{item}` is no four-letter word of this server (`*` or some of: {})",
                        known.join(", ")
                    ),
                ));
            }
        }
    }
    Ok(words)
}

/// A `server.N` line as a frontend member.
fn member(s: &ServerAddr) -> Member {
    Member {
        host: s.host.clone(),
        client_addr: s.client_endpoint(),
        client_port: s.client.as_ref().map_or(0, |c| c.port),
        role: role_of(s.learner_type),
    }
}

/// Where server `sid` of `node` (a parsed zoo.cfg) listens for clients, as its server derives
/// it ([`client_listen`]); for tools that read a zoo.cfg without starting a server.
pub fn client_listen_of(node: &NodeConfig, sid: u64) -> Result<String, ServerError> {
    let own = node
        .servers
        .get(&ServerId(sid))
        .ok_or(ConfigError::NotAMember { sid })?;
    client_listen(node, own, sid)
}

/// Where this server's client port listens: `clientPort` or its `server.N` line's client
/// part for the port, the client host or else the quorum host for the address.
fn client_listen(node: &NodeConfig, own: &ServerAddr, sid: u64) -> Result<String, ServerError> {
    let listen_port = match (node.client_port, own.client.as_ref()) {
        (Some(p), _) => p,
        (None, Some(c)) => c.port,
        (None, None) => {
            return Err(ServerError::Invalid(format!(
                "no client port for server {sid}: set `clientPort`, or give \
                 `server.{sid}=host:quorumPort:electionPort;clientPort`"
            )))
        }
    };
    let listen_host = own
        .client
        .as_ref()
        .and_then(|c| c.host.clone())
        .unwrap_or_else(|| own.host.clone());
    Ok(if listen_host.contains(':') {
        format!("[{listen_host}]:{listen_port}")
    } else {
        format!("{listen_host}:{listen_port}")
    })
}

fn role_of(t: LearnerType) -> FrontendRole {
    match t {
        LearnerType::Observer => FrontendRole::Observer,
        _ => FrontendRole::Follower,
    }
}

fn bad(node: &NodeConfig, key: &str, reason: &str) -> ServerError {
    let (line, value) = node
        .extra
        .get(key)
        .map_or((0, String::new()), |v| (v.line, v.value.clone()));
    ServerError::Config(ConfigError::BadValue {
        key: key.to_string(),
        line,
        value,
        reason: reason.to_string(),
    })
}

#[cfg(test)]
mod tests;
