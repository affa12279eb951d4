//! A server removed from the cluster stops, and its data dir never starts again.
//!
//! ```text
//! running: NodeStatus.removed ─▶ REMOVED written (meta_dir INV-4) ─▶ one WARN line ─▶
//!          grace for the answers in flight ─▶ listener and connections closed ─▶
//!          `run` returns Stopped::Removed ─▶ exit status REMOVED_EXIT_STATUS
//! start:   REMOVED in the data dir, or the engine's StepError::Removed (a snapshot carries
//!          the removal) ─▶ ServerError::Removed: how to add the server again ─▶ same status
//! ```
//!
//! INV-1: a removed server answers nothing after [`ANSWER_GRACE`] (the drop-frontend that
//! removed a leader is answered by that leader first) and its process exits with
//! [`REMOVED_EXIT_STATUS`], distinct from the fatal-error status: a supervisor must not
//! restart it with this data dir.
//! INV-2: the refusal names the configuration version that removed the server and the three
//! steps that add it back (wipe the data dir, add it on a member, start with `--helper`).

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::warn;
use zab_net::{Node, ServerId, Zxid};

use super::ServerConfig;

/// The exit status of `fe-meta server` when this server is not a member any more: it was
/// removed while running, or its data dir is that of a removed server (`fe-meta --help`).
pub const REMOVED_EXIT_STATUS: u8 = 6;

/// How long a removed server still lets the answers in flight reach their clients.
pub const ANSWER_GRACE: Duration = Duration::from_millis(500);

/// A removed server's refusal to start (INV-2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Removal {
    /// This server.
    pub sid: u64,
    /// The configuration version that removed it.
    pub version: zab_net::Zxid,
    /// Its data dir.
    pub data_dir: PathBuf,
    /// Its own `server.N` value (canonical).
    pub server_value: String,
}

impl fmt::Display for Removal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Removal {
            sid,
            version,
            data_dir,
            server_value,
        } = self;
        write!(
            f,
            "refusing to start: server {sid} was removed from the cluster by configuration \
             version {version}, and its data dir {} cannot rejoin. To add it again: (1) wipe \
             {} (keep only myid), (2) on a member run `fe-meta add-follower \
             \"server.{sid}={server_value}\"` (add-observer for an observer), (3) start it with \
             `fe-meta server --config <zoo.cfg> --helper <member host:client port>`",
            data_dir.display(),
            data_dir.display()
        )
    }
}

/// How often the removal is checked besides role changes (the status watch wakes on every
/// applied write; the role watch does not, and a removed node leaves its role).
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Waits until `node` applied a configuration without this server; returns that
/// configuration's version. `None` when the node stopped first.
pub(super) async fn wait_removed(node: &Node) -> Option<zab_net::Zxid> {
    let mut role = node.watch_role();
    loop {
        let st = node.status();
        if st.removed {
            return Some(st.committed_membership.version);
        }
        if st.stopped {
            return None;
        }
        tokio::select! {
            changed = role.changed() => if changed.is_err() { return None },
            () = tokio::time::sleep(CHECK_EVERY) => {}
        }
    }
}

/// Once `node` reports its removal: records it in the data dir (meta_dir INV-4), waits
/// [`ANSWER_GRACE`], and closes the listener and every connection (cancels `stop`); ends when
/// `stop` is cancelled otherwise.
pub(super) async fn close_on_removed(
    node: Arc<Node>,
    meta: super::meta_dir::MetaDir,
    stop: CancellationToken,
) {
    let version = tokio::select! {
        () = stop.cancelled() => return,
        v = wait_removed(&node) => v,
    };
    let Some(version) = version else { return };
    if let Err(e) = meta.write_removed(version.0) {
        warn!("cannot record the removal in the data dir: {e}");
    }
    tokio::select! {
        () = stop.cancelled() => return,
        () = tokio::time::sleep(ANSWER_GRACE) => {}
    }
    stop.cancel();
}

/// The version of the configuration in this node's log (in force, maybe not committed) that
/// does not list it, if any: a removal it logged before it stopped (the REMOVED record is
/// written when a removal is applied; a crash can come first). Such a node never serves: the
/// members ignore it.
pub(super) fn removed_by_log(node: &Node) -> Option<Zxid> {
    let st = node.status();
    let in_force = &st.membership;
    (in_force.version != Zxid::ZERO && !in_force.members.contains_key(&st.sid))
        .then_some(in_force.version)
}

/// How a removed server is described to its operator.
pub(super) fn removal_of(cfg: &ServerConfig, version: Zxid) -> Removal {
    let server_value = cfg.node.servers.get(&ServerId(cfg.sid)).map_or_else(
        || "HOST:QUORUM_PORT:ELECTION_PORT;CLIENT_PORT".to_string(),
        |s| {
            let mut plain = s.clone();
            plain.learner_type = zab_net::LearnerType::Participant;
            plain.to_value()
        },
    );
    Removal {
        sid: cfg.sid,
        version,
        data_dir: cfg.node.data_dir.clone(),
        server_value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_says_how_to_add_the_server_again() {
        let r = Removal {
            sid: 4,
            version: zab_net::Zxid(0x2_0000_0005),
            data_dir: PathBuf::from("/var/lib/fe4"),
            server_value: "h4:2888:3888;9030".into(),
        };
        let text = r.to_string();
        for part in [
            "server 4 was removed",
            "version 0x200000005",
            "wipe /var/lib/fe4",
            "fe-meta add-follower \"server.4=h4:2888:3888;9030\"",
            "--helper",
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
    }
}
