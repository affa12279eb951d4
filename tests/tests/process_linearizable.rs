//! Linearizability of `SET_VAR` / `GET_VAR --sync` on real `fe-meta server` processes while the
//! leader is killed -9 and restarted, twice.
//!
//! Six clients, two per node, each one request at a time, pick one of four keys and either
//! write a value no one else writes or read with `sync` (a linearizable read, DESIGN §6). Every
//! operation is recorded with its invocation and return times; a write that failed with an
//! outcome the client cannot know (timeout, connection lost, quorum lost after the proposal)
//! is recorded as unknown, a definite refusal as failed. At the end the history goes through
//! `tests::lincheck` and the cluster through the harness's shared end checks.
//!
//! Needs the `fe-meta` binary: `cargo build --release -p fe-meta-cli` (the workspace's
//! `cargo test --release` builds it) or `FE_META_BIN`. Prints `LINCHECK` and `RECOVERY` lines
//! with `-- --nocapture`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::time::{Duration, Instant};

use tests::proc::lin_load::LinLoad;
use tests::proc::{ClusterSpec, ProcCluster};

const CLIENTS: usize = 6;

/// kill -9 the leader, wait for the next one, restart the old one and wait until it follows;
/// returns (new leader, election time).
async fn kill_leader(c: &mut ProcCluster, round: u32) -> (u64, Duration) {
    let old = c.leader(Duration::from_secs(15)).await.unwrap();
    let killed_at = Instant::now();
    c.kill(old).unwrap();
    let new = c.leader(Duration::from_secs(15)).await.unwrap();
    let elected = killed_at.elapsed();
    assert_ne!(new, old);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let restarted_at = Instant::now();
    c.restart(old).unwrap();
    c.leader(Duration::from_secs(20)).await.unwrap();
    println!(
        "RECOVERY scenario=lin_kill_leader_{round} killed={old} new_leader={new} election_ms={} \
         rejoin_ms={}",
        elected.as_millis(),
        restarted_at.elapsed().as_millis()
    );
    (new, elected)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_and_synced_get_stay_linearizable_across_leader_kills() {
    let mut c = ProcCluster::start("linearizable", ClusterSpec::default())
        .await
        .unwrap();
    let addrs: Vec<String> = c.sids().iter().map(|s| c.client_addr(*s)).collect();
    let load = LinLoad::start(&addrs, CLIENTS, Duration::from_secs(60));
    tokio::time::sleep(Duration::from_secs(2)).await;
    for round in 1..=2 {
        kill_leader(&mut c, round).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let report = load.stop(Duration::from_secs(30)).await;
    println!("{}", report.line());
    if let Some(why) = report.failure() {
        c.keep_dir();
        panic!("{why}");
    }
    let tally = report.tally;
    assert!(
        tally.writes_ok > 100 && tally.reads_ok > 100,
        "too little load to prove anything: {tally:?}"
    );
    c.finish().await.unwrap();
}
