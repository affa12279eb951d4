//! Joining a running cluster: `fe-meta server --config zoo.cfg --helper HOST:CLIENT_PORT`.
//!
//! ```text
//! zoo.cfg text ──▶ belongs? (dataDir/VERSION exists) and parses alone ──yes──▶ start as is
//!      │ no
//!      ▼
//! GET_CONFIG to the helper (cluster id, committed configuration, tickTime/initLimit/syncLimit)
//!      │  helper unreachable: WARN, retry every RETRY_EVERY
//!      ▼
//! zoo.cfg text + the keys it does not set (timing keys, clusterId, the other members' server.N
//! lines) ──▶ parse ──▶ own sid in the configuration?
//!      │ no: INFO "not a member yet" with the add-follower command; retry every RETRY_EVERY
//!      │ listed with another address: refuse (JoinError::AddressMismatch)
//!      ▼
//! start the node with join_membership = the helper's configuration (a data dir that already
//! holds a configuration ignores it: the data dir's wins), then write VERSION and ROLE
//! ```
//!
//! INV-1: the zoo.cfg file is never changed; the keys it sets are never overridden: a key the
//! helper also gives is taken from the file, except `clusterId`, which must then equal the
//! helper's (else [`JoinError::ClusterIdMismatch`]).
//! INV-2: a data dir whose VERSION exists belongs to its cluster; its configuration (in the
//! engine's snapshot) wins over the helper's, which is then only used to complete what zoo.cfg
//! lacks.
//! INV-3: the wait for membership and for a reachable helper is bounded only by the caller
//! (the process's shutdown); each retry logs one line.
//!
//! Asking the helper (GET_CONFIG, retried until it answers) is the `helper` module's job.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use thiserror::Error;
use tracing::info;
use zab_net::config::{parse_with, read_myid, ConfigError, ServerAddr};
use zab_net::{Membership, ServerId};

mod helper;

pub(crate) use helper::point_to_helper;

use helper::ask_until_answered;
pub use helper::{client_helper, view_of, ClientHelper, Helper};

use super::config::{ServerConfig, EXTRA_KEYS};
use super::meta_dir::MetaDir;
use super::ServerError;

/// How often a joining node asks the helper again.
pub const RETRY_EVERY: Duration = Duration::from_secs(2);

/// The zoo.cfg keys a joining node takes from the helper when its file does not set them.
pub const HELPER_KEYS: [&str; 4] = ["tickTime", "initLimit", "syncLimit", "clusterId"];

/// What a member of the cluster told about it (GET_CONFIG).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterView {
    /// The cluster's id.
    pub cluster_id: u64,
    /// The committed configuration, with its version.
    pub membership: Membership,
    /// `tickTime`, ms.
    pub tick_ms: u64,
    /// `initLimit`, ticks.
    pub init_limit: u32,
    /// `syncLimit`, ticks.
    pub sync_limit: u32,
}

/// Why a node cannot join.
#[derive(Debug, Error)]
pub enum JoinError {
    /// The configuration lists this sid with another address than its `server.N` line.
    #[error(
        "refusing to join: the cluster's configuration (version {version}) lists server {sid} \
         as `server.{sid}={listed}`, but this node's zoo.cfg says `server.{sid}={own}`; fix \
         the zoo.cfg line, or drop server {sid} on a member (`fe-meta drop-frontend {sid}`) and \
         add it again with this node's address"
    )]
    AddressMismatch {
        /// This node's sid.
        sid: u64,
        /// The configuration's version.
        version: zab_net::Zxid,
        /// The address text the configuration holds.
        listed: String,
        /// The canonical value of this node's own line.
        own: String,
    },
    /// zoo.cfg names another cluster than the helper's.
    #[error(
        "refusing to join: zoo.cfg says clusterId={configured}, but the helper {helper} belongs \
         to cluster {helper_id}; point --helper at a member of this node's cluster, or fix \
         (or remove) clusterId"
    )]
    ClusterIdMismatch {
        /// zoo.cfg's value.
        configured: u64,
        /// The helper's address.
        helper: String,
        /// The helper's cluster id.
        helper_id: u64,
    },
    /// The helper's configuration holds an address that does not parse.
    #[error("the helper's configuration lists server {sid} with a bad address: {reason}")]
    BadMemberAddress {
        /// The member.
        sid: u64,
        /// The parse error.
        reason: String,
    },
    /// zoo.cfg could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// What the node starts with.
#[derive(Clone, Debug)]
pub struct JoinStart {
    /// The completed configuration.
    pub cfg: ServerConfig,
    /// The configuration to join with, when the data dir does not belong to the cluster yet.
    pub join_membership: Option<Membership>,
}

/// Where this node stands in a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// Listed with this node's own address.
    Member,
    /// Not listed (yet).
    NotYet,
    /// Listed with another address (canonical values).
    OtherAddress {
        /// The configuration's text for it.
        listed: String,
    },
}

/// Where server `sid`, whose own `server.N` value is `own`, stands in `membership`.
pub fn standing(membership: &Membership, sid: u64, own: &ServerAddr) -> Standing {
    let Some(member) = membership.members.get(&ServerId(sid)) else {
        return Standing::NotYet;
    };
    let same = ServerAddr::parse_value(&member.address)
        .is_ok_and(|listed| listed.to_value() == own.to_value());
    if same {
        Standing::Member
    } else {
        Standing::OtherAddress {
            listed: member.address.clone(),
        }
    }
}

/// The command an operator runs on a member to add this node.
pub fn add_command(sid: u64, own: &ServerAddr) -> String {
    let verb = match own.learner_type {
        zab_net::LearnerType::Observer => "add-observer",
        _ => "add-follower",
    };
    // The value without `:observer`: the command says the role.
    let mut plain = own.clone();
    plain.learner_type = zab_net::LearnerType::Participant;
    format!("fe-meta {verb} \"server.{sid}={}\"", plain.to_value())
}

/// The keys set in zoo.cfg text, as its parser reads them (trimmed `key` of `key=value`
/// lines, comments skipped).
pub fn keys_set(text: &str) -> BTreeSet<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k.trim().to_string())
        .collect()
}

/// The value of `key` in zoo.cfg text, if set.
pub fn value_of(text: &str, key: &str) -> Option<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.starts_with('!'))
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().to_string())
}

/// zoo.cfg `text` with the lines `view` gives for what it does not set (INV-1): the timing
/// keys, `clusterId`, and a `server.N` line for every member it does not list.
pub fn completed_text(text: &str, view: &ClusterView) -> String {
    let set = keys_set(text);
    let mut out = text.to_string();
    if !out.ends_with('\n') && !out.is_empty() {
        out.push('\n');
    }
    out.push_str("# completed from the cluster's configuration (fe-meta --helper)\n");
    let given = [
        ("tickTime", view.tick_ms.to_string()),
        ("initLimit", view.init_limit.to_string()),
        ("syncLimit", view.sync_limit.to_string()),
        ("clusterId", view.cluster_id.to_string()),
    ];
    for (key, value) in given {
        if !set.contains(key) {
            out.push_str(&format!("{key}={value}\n"));
        }
    }
    for (sid, m) in &view.membership.members {
        let key = format!("server.{}", sid.0);
        if !set.contains(&key) {
            out.push_str(&format!("{key}={}\n", m.address));
        }
    }
    out
}

/// The cluster id zoo.cfg `text` sets, if it sets one that parses (the parser reports a bad
/// one later, with its line).
fn configured_cluster_id(text: &str) -> Option<u64> {
    let v = value_of(text, "clusterId")?;
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

/// The server configuration from the completed text; the data dir's `myid` names the sid.
fn load_completed(text: &str) -> Result<ServerConfig, ServerError> {
    let node = parse_with(text, EXTRA_KEYS)?;
    let sid = read_myid(&node.data_dir)?;
    ServerConfig::from_node(node, sid.0)
}

/// Reads zoo.cfg text.
pub fn read_text(path: &Path) -> Result<String, JoinError> {
    std::fs::read_to_string(path).map_err(|source| JoinError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Settles how the node of zoo.cfg `text` starts with `helper` (see the module docs): returns
/// once the node may start, or with the reason it must not.
pub async fn prepare(text: &str, helper: &impl Helper) -> Result<JoinStart, ServerError> {
    if let Some(cfg) = belonging_config(text)? {
        info!(
            "the data dir already belongs to cluster {:#018x}: starting from it (the helper {} \
             is not needed)",
            cfg.cluster_id,
            helper.addr()
        );
        return Ok(JoinStart {
            cfg,
            join_membership: None,
        });
    }
    loop {
        let view = ask_until_answered(helper).await;
        check_cluster_id(text, helper.addr(), &view)?;
        check_addresses(&view.membership)?;
        let cfg = load_completed(&completed_text(text, &view))?;
        let own = own_line(&cfg)?;
        let meta = MetaDir::new(cfg.node.data_dir.clone());
        let belongs = meta.read_cluster_id()?.is_some();
        if belongs {
            // zoo.cfg alone did not parse; the helper completed it, the data dir's
            // configuration wins in the node.
            return Ok(JoinStart {
                cfg,
                join_membership: None,
            });
        }
        match standing(&view.membership, cfg.sid, &own) {
            Standing::Member => {
                info!(
                    "server {} is in the cluster's configuration version {} (servers {:?}): \
                     joining cluster {:#018x}",
                    cfg.sid,
                    view.membership.version,
                    view.membership
                        .members
                        .keys()
                        .map(|s| s.0)
                        .collect::<Vec<_>>(),
                    view.cluster_id
                );
                return Ok(JoinStart {
                    cfg,
                    join_membership: Some(view.membership),
                });
            }
            Standing::OtherAddress { listed } => {
                return Err(JoinError::AddressMismatch {
                    sid: cfg.sid,
                    version: view.membership.version,
                    listed,
                    own: own.to_value(),
                }
                .into())
            }
            Standing::NotYet => info!(
                "server {} is not a member of cluster {} yet (configuration version {}); \
                 waiting: add it on a member with `{}` (retrying every {RETRY_EVERY:?})",
                cfg.sid,
                view.cluster_id,
                view.membership.version,
                add_command(cfg.sid, &own)
            ),
        }
        tokio::time::sleep(RETRY_EVERY).await;
    }
}

/// The cluster id zoo.cfg `text` sets, if any, is the helper's (INV-1).
fn check_cluster_id(text: &str, helper: &str, view: &ClusterView) -> Result<(), JoinError> {
    match configured_cluster_id(text) {
        Some(configured) if configured != view.cluster_id => Err(JoinError::ClusterIdMismatch {
            configured,
            helper: helper.to_string(),
            helper_id: view.cluster_id,
        }),
        _ => Ok(()),
    }
}

/// The configuration of zoo.cfg `text` alone, when its data dir already belongs to a cluster
/// (VERSION exists) and the text parses without the helper's keys (`clusterId` may come from
/// VERSION); `None` otherwise.
fn belonging_config(text: &str) -> Result<Option<ServerConfig>, ServerError> {
    let Some(data_dir) = value_of(text, "dataDir") else {
        return Ok(None);
    };
    let Some(cluster_id) = MetaDir::new(PathBuf::from(data_dir)).read_cluster_id()? else {
        return Ok(None);
    };
    let mut text = text.to_string();
    if !keys_set(&text).contains("clusterId") {
        text.push_str(&format!("\nclusterId={cluster_id}\n"));
    }
    match parse_with(&text, EXTRA_KEYS) {
        Ok(node) => {
            let sid = read_myid(&node.data_dir)?;
            Ok(Some(ServerConfig::from_node(node, sid.0)?))
        }
        Err(ConfigError::Missing { .. } | ConfigError::NoParticipants) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// This node's own `server.N` value.
fn own_line(cfg: &ServerConfig) -> Result<ServerAddr, ServerError> {
    cfg.node
        .servers
        .get(&ServerId(cfg.sid))
        .cloned()
        .ok_or_else(|| ConfigError::NotAMember { sid: cfg.sid }.into())
}

/// Every member's address in the helper's configuration parses.
fn check_addresses(m: &Membership) -> Result<(), JoinError> {
    for (sid, member) in &m.members {
        ServerAddr::parse_value(&member.address).map_err(|e| JoinError::BadMemberAddress {
            sid: sid.0,
            reason: e.to_string(),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::protocol::{ClusterConfig, ConfigMember, MemberState};
    use zab_net::MemberRole;
    use zab_net::Zxid;

    fn view() -> ClusterView {
        let member = |sid, state, address: &str| ConfigMember {
            sid,
            state,
            address: address.to_string(),
        };
        view_of(ClusterConfig {
            cluster_id: 77,
            version: Zxid(0x1_0000_0003),
            in_force_version: Zxid(0x1_0000_0003),
            members: vec![
                member(
                    1,
                    MemberState::Participant,
                    "10.0.0.1:2888:3888;10.0.0.1:9030",
                ),
                member(
                    2,
                    MemberState::Participant,
                    "10.0.0.2:2888:3888;10.0.0.2:9030",
                ),
                member(4, MemberState::Joining, "10.0.0.4:2888:3888;10.0.0.4:9030"),
            ],
            tick_time_ms: 200,
            init_limit: 10,
            sync_limit: 5,
        })
    }

    #[test]
    fn a_get_config_answer_is_the_view() {
        let v = view();
        assert_eq!(v.membership.version, Zxid(0x1_0000_0003));
        assert_eq!(v.membership.role_of(ServerId(4)), Some(MemberRole::Joining));
        assert_eq!(
            (v.cluster_id, v.tick_ms, v.init_limit, v.sync_limit),
            (77, 200, 10, 5)
        );
    }

    #[test]
    fn the_text_is_completed_only_where_it_is_silent() {
        let text = "dataDir=/d\nclientPort=9030\ntickTime=100\nserver.4=10.0.0.4:2888:3888;9030";
        let out = completed_text(text, &view());
        let node = parse_with(&out, EXTRA_KEYS).unwrap();
        assert_eq!(node.tick_ms, 100, "the file's tickTime wins");
        assert_eq!((node.init_limit_ticks, node.sync_limit_ticks), (10, 5));
        assert_eq!(node.cluster_id, Some(77));
        assert_eq!(
            node.servers.keys().map(|s| s.0).collect::<Vec<_>>(),
            vec![1, 2, 4]
        );
        assert_eq!(
            node.servers[&ServerId(4)].to_value(),
            "10.0.0.4:2888:3888;9030",
            "the file's own line wins"
        );
    }

    #[test]
    fn standing_compares_canonical_values() {
        let v = view();
        let same = ServerAddr::parse_value(" 10.0.0.4:2888:3888 ; 10.0.0.4:9030").unwrap();
        assert_eq!(standing(&v.membership, 4, &same), Standing::Member);
        let other = ServerAddr::parse_value("10.0.0.5:2888:3888;10.0.0.4:9030").unwrap();
        assert_eq!(
            standing(&v.membership, 4, &other),
            Standing::OtherAddress {
                listed: "10.0.0.4:2888:3888;10.0.0.4:9030".into()
            }
        );
        assert_eq!(standing(&v.membership, 5, &same), Standing::NotYet);
    }

    #[test]
    fn the_add_command_names_the_role() {
        let f = ServerAddr::parse_value("h:1:2;9030").unwrap();
        assert_eq!(
            add_command(5, &f),
            "fe-meta add-follower \"server.5=h:1:2;9030\""
        );
        let o = ServerAddr::parse_value("h:1:2:observer;9030").unwrap();
        assert_eq!(
            add_command(6, &o),
            "fe-meta add-observer \"server.6=h:1:2;9030\""
        );
    }

    #[test]
    fn keys_and_values_are_read_as_the_parser_reads_them() {
        let text = "# tickTime=5\n tickTime = 7 \n!x=1\nserver.1=a:1:2\n";
        assert!(keys_set(text).contains("tickTime"));
        assert_eq!(value_of(text, "tickTime").as_deref(), Some("7"));
        assert_eq!(configured_cluster_id("clusterId=0x10\n"), Some(16));
        assert_eq!(configured_cluster_id("clusterId=12\n"), Some(12));
    }
}
