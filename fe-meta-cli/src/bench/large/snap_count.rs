//! The large workload's `snapCount` from its W2 phase on. Under W2 (10-40k writes/s) the
//! default 100,000 starts a snapshot every 1-3 s on each node, less than one snapshot of
//! millions of entries takes (3-15 s with 5M), so every node snapshots back to back and
//! there is no time without a snapshot to compare with.
//!
//! With a `snapCpuPercent` given (`--snap-cpu-percent`), that key is appended as well.
//!
//! INV: every node's zoo.cfg gets `snapCount=`[`W2_SNAP_COUNT`] appended and the node is
//! restarted (SIGTERM) in turn, each back within 300 s before the next one stops: every node
//! then counts its txns towards the next snapshot from zero, so W2 has at least
//! `W2_SNAP_COUNT / 2` txns to go before any node snapshots.

use std::io::Write as _;
use std::time::Duration;

use nix::sys::signal::Signal;

use super::super::cluster::Cluster;
use super::super::progress;
use crate::Failure;

/// `snapCount` from the W2 phase on.
pub const W2_SNAP_COUNT: u64 = 1_000_000;

/// Appends the keys to every node's zoo.cfg and restarts each in turn; the leader afterwards.
pub async fn reset(cluster: &mut Cluster, cpu_percent: Option<u8>) -> Result<u64, Failure> {
    let mut keys = format!("snapCount={W2_SNAP_COUNT}\n");
    if let Some(p) = cpu_percent {
        keys += &format!("snapCpuPercent={p}\n");
    }
    let wait = Duration::from_secs(300);
    cluster.wait_healthy(wait).await?;
    let dir = cluster
        .dir()
        .map(std::path::Path::to_path_buf)
        .ok_or_else(|| Failure::other("the large workload needs a launched cluster"))?;
    for sid in cluster.sids.clone() {
        let cfg = dir.join(format!("node{sid}")).join("zoo.cfg");
        std::fs::OpenOptions::new()
            .append(true)
            .open(&cfg)
            .and_then(|mut f| f.write_all(keys.as_bytes()))
            .map_err(|e| {
                Failure::other(format!("cannot set snapCount in {}: {e}", cfg.display()))
            })?;
        progress(&format!(
            "large W2: restarting node {sid} with {}",
            keys.trim_end().replace('\n', ", ")
        ));
        cluster.stop_node(sid, Signal::SIGTERM).await?;
        cluster.restart_node(sid)?;
        cluster.wait_healthy(wait).await?;
    }
    cluster.wait_healthy(wait).await
}
