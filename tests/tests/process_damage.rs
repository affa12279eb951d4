//! Disk damage and restarts on real `fe-meta server` processes (DESIGN §4 recovery rules, §7):
//! kill -9 during snapshots and during a SNAP transfer, a log tail cut mid-record, a flipped
//! byte in the newest snapshot, an observer that dies and comes back, and a rolling restart of
//! every node under load.
//!
//! Every scenario ends with the harness's shared checks (`ProcCluster::finish`: acknowledged
//! writes on every node, equal digests, journal ids never backwards, no panics) and prints
//! its measured times as `RECOVERY scenario=<name> ...` lines (`-- --nocapture`). Clusters run
//! one at a time (the harness's slot).
//!
//! A node killed -9 (or whose log lost its tail) may restart with a catalog older than what it
//! answered before (it applied COMMITs for txns a quorum persisted before its own fsync; a cut
//! log loses records). It answers no plain read until it has synced with a leader once
//! (fe-meta staleness INV-3), which the harness's journal-ids-never-backwards monitor checks
//! here: the snapshot, leader-kill, log-cut and snapshot-flip scenarios failed on it before.
//!
//! The scenarios by topic: `process_damage/snapshots.rs` (kills during snapshots and a SNAP
//! transfer), `process_damage/damaged_files.rs` (a cut log tail, a flipped snapshot byte),
//! `process_damage/restarts.rs` (an observer, a rolling restart); the shared probes are here.
//!
//! Needs the `fe-meta` binary: `cargo build --release -p fe-meta-cli` (the workspace's
//! `cargo test --release` builds it) or `FE_META_BIN`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod process_damage {
    pub mod damaged_files;
    pub mod restarts;
    pub mod snapshots;
}

use std::time::{Duration, Instant};

use fe_meta::client::{Client, ClientOptions};
use fe_meta::protocol::Mode;
use tests::proc::ProcCluster;

/// The options of a status probe or a measuring writer: short timeouts.
pub const PROBE: ClientOptions = ClientOptions {
    connect_timeout: Duration::from_millis(500),
    request_timeout: Duration::from_secs(2),
    ..ClientOptions::DEFAULT
};

/// Milliseconds of `d`, for RECOVERY lines.
pub fn ms(d: Duration) -> u128 {
    d.as_millis()
}

/// The leader's applied journal id (waiting for a leader first).
pub async fn leader_applied(c: &mut ProcCluster) -> (u64, u64) {
    let leader = c.leader(Duration::from_secs(20)).await.unwrap();
    let applied = c.status(leader).await.unwrap().applied_journal_id.0;
    (leader, applied)
}

/// Waits until the node serving clients at `addr` follows (or observes) a leader and has applied at least `target`;
/// returns how long that took.
pub async fn caught_up(addr: &str, target: u64, within: Duration) -> Duration {
    let start = Instant::now();
    let mut last = String::from("no answer");
    while start.elapsed() < within {
        if let Ok(client) = Client::connect_with(addr, PROBE).await {
            if let Ok(s) = client.status().await {
                if matches!(s.mode, Mode::Follower | Mode::Observer | Mode::Leader)
                    && s.leader_sid.is_some()
                    && s.applied_journal_id.0 >= target
                {
                    return start.elapsed();
                }
                last = format!("{} applied {}", s.mode.name(), s.applied_journal_id);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{addr} did not reach journal id {target:#x} within {within:?}: {last}");
}

/// Some follower of the current leader.
pub async fn a_follower(c: &mut ProcCluster) -> u64 {
    let leader = c.leader(Duration::from_secs(20)).await.unwrap();
    *c.sids().iter().find(|s| **s != leader).unwrap()
}
