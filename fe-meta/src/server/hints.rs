//! Hints for the operator, logged while the server runs: where zoo.cfg's `server.N` lines
//! are stale, a data dir awaiting its first sync that finds no leader, and an initialized
//! node that finds none for long.
//!
//! INV-1: a hint only logs; it never changes what the node does.
//! INV-2: each hint task ends on stop, and no later than the node stopping or (for the
//! initial-sync hint) being initialized; it logs at most one line per period.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tracing::warn;
use zab_net::Node;

use super::config;
use super::ServerConfig;

/// How often a node whose data dir awaits its first sync repeats the hint while it finds
/// no leader.
const INITIAL_SYNC_HINT_EVERY: std::time::Duration = std::time::Duration::from_secs(15);

/// How long an initialized node may find no leader before [`hint_no_leader`] says what
/// that may mean, and how often it repeats it.
const NO_LEADER_HINT_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// While an initialized node finds no leader, logs every [`NO_LEADER_HINT_EVERY`] what that
/// may mean: a quorum is down, or this server was dropped while it was down (the members then
/// ignore it, and nothing tells it). Ends on stop.
pub(super) async fn hint_no_leader(node: Arc<Node>, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(NO_LEADER_HINT_EVERY) => {}
        }
        let st = node.status();
        if st.stopped || st.removed {
            return;
        }
        if st.initialized && st.leader.is_none() {
            warn!(
                "no leader found for {NO_LEADER_HINT_EVERY:?}: a quorum of the members may be \
                 down, or this server was dropped from the cluster while it was down (the \
                 members then ignore it): check with `fe-meta show-frontends` on a member; a \
                 dropped server is added again with an empty data dir and --helper"
            );
        }
    }
}

/// Server INV-5: where zoo.cfg's `server.N` lines differ from the configuration the node runs with
/// (the one in force: the data dir's committed configuration and any newer one in its log),
/// one WARN line names the servers. The engine logs a line of its own only when a snapshot
/// holds the configuration; this one is logged whatever holds it.
pub(super) fn warn_stale_zoo_cfg(node: &Node, cfg: &ServerConfig) {
    let in_force = node.status().membership;
    let zoo_cfg = config::bootstrap_membership(&cfg.node);
    if let Some(diff) = zoo_cfg.differences(&in_force) {
        warn!(
            "zoo.cfg's server.N lines differ from the cluster's configuration in the data dir \
             ({diff}): running with the data dir's configuration version {} (zoo.cfg's server \
             lines only seed a brand-new cluster; membership changes with add-follower, \
             add-observer and drop-frontend)",
            in_force.version
        );
    }
}

/// While the data dir awaits its first sync (it was empty and the node was started without
/// `--bootstrap`) and no leader is found, logs a hint every [`INITIAL_SYNC_HINT_EVERY`]: a
/// brand-new cluster started that way never elects (PITFALLS B9). Ends once initialized, or
/// on stop.
pub(super) async fn hint_initial_sync(node: Arc<Node>, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(INITIAL_SYNC_HINT_EVERY) => {}
        }
        let st = node.status();
        if st.initialized || st.stopped {
            return;
        }
        if st.leader.is_none() {
            warn!(
                "no leader found to sync from; data dir was empty; if this is a brand-new \
                 cluster start every node once with --bootstrap"
            );
        }
    }
}
