//! kill -9 while snapshots are written (followers, then the leader as the last victim) and
//! while a wiped follower receives a SNAP: each victim restarts and catches up.

use std::path::Path;
use std::time::{Duration, Instant};

use tests::damage::files;
use tests::proc::{fill, ClusterSpec, Load, ProcCluster};

use crate::{a_follower, caught_up, leader_applied, ms};

/// kill -9 followers while snapshots are taken all the time (snapCount 40 under load, on a
/// catalog of a few thousand entries), each as soon as a snapshot of it is being written: each
/// restarts and catches up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_during_snapshots_restarts_and_converges() {
    kill_during_snapshots("kill_during_snapshot", [false, false, false]).await;
}

/// The same with the leader as the last victim: its own log may end before what it had
/// applied (a leader commits on a quorum of followers before its own fsync), so the restarted
/// old leader must answer no plain read until its sync (it failed 4 runs of 4 before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_killed_during_snapshot_never_serves_older_reads() {
    kill_during_snapshots("kill_leader_during_snapshot", [false, false, true]).await;
}

/// Kills one node per round (a follower, or the leader where `leader` says so).
async fn kill_during_snapshots(name: &str, kill_leader_in_round: [bool; 3]) {
    let spec = ClusterSpec {
        snap_count: Some(40),
        ..ClusterSpec::default()
    };
    let mut c = ProcCluster::start(name, spec).await.unwrap();
    let leader = c.leader(Duration::from_secs(10)).await.unwrap();
    let n = fill(&c, leader, "bulk-", 3000, 256, 64, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(n, 3000);
    let load = Load::start(&c, 3, 64, Duration::from_secs(40));
    let mut hits = 0;
    // Each victim is killed as soon as a snapshot of it is being written (a `snapshot.*.tmp`
    // in its dir), or after 3 s.
    for (round, kill_leader) in kill_leader_in_round.into_iter().enumerate() {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let victim = if kill_leader {
            c.leader(Duration::from_secs(20)).await.unwrap()
        } else {
            a_follower(&mut c).await
        };
        let snaps_before = c.node(victim).unwrap().snapshot_files().len();
        let dir = c.node(victim).unwrap().data_dir();
        let watching = Instant::now();
        while !files::has_snapshot_tmp(&dir) && watching.elapsed() < Duration::from_secs(3) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        c.kill(victim).unwrap();
        let mid_snapshot = files::has_snapshot_tmp(&dir);
        hits += usize::from(mid_snapshot);
        let (_, target) = leader_applied(&mut c).await;
        let restarted = Instant::now();
        c.restart(victim).unwrap();
        let took = caught_up(&c.client_addr(victim), target, Duration::from_secs(30)).await;
        println!(
            "RECOVERY scenario={name} round={round} node={victim} \
             snapshots_on_disk={snaps_before} snapshot_tmp_at_kill={mid_snapshot} \
             restart_to_caught_up_ms={}",
            ms(took)
        );
        assert!(restarted.elapsed() < Duration::from_secs(30));
    }
    let report = load.stop().await;
    assert!(report.acked > 50, "load too small: {report:?}");
    let snaps = c.node(1).unwrap().snapshot_files().len();
    assert!(snaps >= 1, "no snapshot was ever taken");
    println!(
        "RECOVERY scenario={name} kills_with_snapshot_tmp={hits}/3 acked={}",
        report.acked
    );
    assert!(
        hits >= 1,
        "no kill landed while a snapshot was being written"
    );
    c.finish().await.unwrap();
}

/// A wiped follower resyncs a catalog of ~4 MB by SNAP (the leader snapshots every 200 txns
/// and purges its old logs, so a DIFF from zero is impossible); it is killed -9 as soon as the
/// transfer shows (the leader counts a SNAP sent, or a snapshot file appears in the follower's
/// dir), restarted on whatever it had written, and converges by a new SNAP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_during_snap_transfer_restarts_and_converges() {
    let spec = ClusterSpec {
        snap_count: Some(200),
        pre_alloc_kib: 1024,
        extra: vec!["autopurge.snapRetainCount=3".into()],
        ..ClusterSpec::default()
    };
    let mut c = ProcCluster::start("kill_during_snap_transfer", spec)
        .await
        .unwrap();
    let leader = c.leader(Duration::from_secs(10)).await.unwrap();
    let n = fill(&c, leader, "big-", 2000, 2000, 32, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(n, 2000);
    let victim = a_follower(&mut c).await;
    c.kill(victim).unwrap();
    c.wipe(victim).unwrap();
    let (leader, target) = leader_applied(&mut c).await;
    let (sent_before, _) = c.sync_counts(leader).await.unwrap();
    let dir = c.node(victim).unwrap().data_dir();
    c.restart(victim).unwrap();
    let started = Instant::now();
    let trigger = snap_transfer_shows(&c, leader, &dir, sent_before.snap, started).await;
    let synced_at_kill = c
        .status(victim)
        .await
        .is_some_and(|s| s.applied_journal_id.0 >= target && s.leader_sid.is_some());
    c.kill(victim).unwrap();
    let killed_after = started.elapsed();
    let restarted = Instant::now();
    c.restart(victim).unwrap();
    let took = caught_up(&c.client_addr(victim), target, Duration::from_secs(40)).await;
    let (_, received) = c.sync_counts(victim).await.unwrap();
    println!(
        "RECOVERY scenario=kill_during_snap_transfer node={victim} catalog_entries={n} \
         catalog_bytes={} trigger={trigger} killed_after_ms={} synced_at_kill={synced_at_kill} \
         restart_to_caught_up_ms={} received_after_restart={received:?}",
        c.ledger().value_bytes(),
        ms(killed_after),
        ms(took),
    );
    assert_ne!(
        trigger, "none",
        "no sign of a SNAP to the wiped follower within 5 s"
    );
    assert!(
        !synced_at_kill,
        "the follower had finished its sync before the kill"
    );
    assert!(
        received.snap >= 1,
        "no SNAP after the restart: {received:?}"
    );
    assert!(restarted.elapsed() < Duration::from_secs(40));
    c.finish().await.unwrap();
}

/// Polls, for 5 s from `started`, for the first sign of a SNAP to the follower whose data dir
/// is `dir`: a snapshot file there (`"snapshot_file"`) or `leader` counting more than
/// `snaps_sent_before` SNAPs sent (`"leader_sent_snap"`); `"none"` if neither shows.
async fn snap_transfer_shows(
    c: &ProcCluster,
    leader: u64,
    dir: &Path,
    snaps_sent_before: u64,
    started: Instant,
) -> &'static str {
    while started.elapsed() < Duration::from_secs(5) {
        if files::has_snapshot_tmp(dir) || !files::files_with_prefix(dir, "snapshot.").is_empty() {
            return "snapshot_file";
        }
        if let Ok((sent, _)) = c.sync_counts(leader).await {
            if sent.snap > snaps_sent_before {
                return "leader_sent_snap";
            }
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    "none"
}
