//! Real nodes on loopback (see `common`): how a learner that fell behind is brought back (DIFF,
//! DIFF from the on-disk log, TRUNC, SNAP, the snapshot-size rule), how background snapshots
//! are triggered and purged, and SNAP streams through small outboxes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{retryable, Cluster, STABLE};
use zab_core::{Role, ServerId, Zxid};

/// How a follower that missed `n` txns while down was brought back, and how long it took.
struct CatchUp {
    follower: zab_net::NodeStatus,
    leader: zab_net::NodeStatus,
}

/// Stops a follower, writes `n` txns (background snapshots every n/3), restarts it and waits
/// until it applied them all, with the leader's `snapshotSizeFactor` set to `factor`.
async fn catch_up_after(n: usize, factor: Option<f64>) -> CatchUp {
    let mut c = Cluster::new(3, 0);
    // Three background snapshots at most while the follower is down: purge (which keeps 3)
    // removes nothing, so the follower's position stays in the leader's log.
    c.snap_count = (n as u64 / 3).max(100);
    c.snapshot_size_factor = factor;
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    c.put_many(leader, "a", 10, 10).await;
    let lag = c.followers(leader)[0];
    c.stop(lag).await;
    let last = c.put_many(leader, "b", n, 250).await;
    // The leader knows its snapshot's size (for `snapshotSizeFactor`) once one is written.
    // Snapshots are due every n/3 applied txns, but one due while the previous is still being
    // written waits for it: on a loaded machine the writes can outrun all but the first.
    let snapshot = |s: &zab_net::NodeStatus| s.snapshots_taken >= 1;
    c.wait_status(leader, "a background snapshot", snapshot, STABLE)
        .await;
    let t0 = Instant::now();
    c.start(lag).await;
    let restarted = c.status(lag);
    if !restarted.serving {
        // Until it serves, its state machine is its newest local snapshot's.
        assert_eq!(
            restarted.restored_snapshot,
            Some(restarted.last_applied),
            "{restarted:?}"
        );
    }
    let mut w = c.node(lag).watch();
    w.wait_for(|s| s.role == Role::Following).await.unwrap();
    let joined = t0.elapsed();
    c.wait_applied(lag, last, Duration::from_secs(30)).await;
    // `is_ok` at once: the watch's `Ref` must not be held on, or the node's next status
    // publish blocks its driver (and a runtime worker) until it is dropped.
    let serving = tokio::time::timeout(Duration::from_secs(30), w.wait_for(|s| s.serving))
        .await
        .is_ok();
    assert!(serving, "{:?}", c.status(lag));
    assert_eq!(c.status(lag).restored_snapshot, None);
    let done = t0.elapsed();
    let sync = done.saturating_sub(joined).as_secs_f64().max(1e-6);
    println!(
        "catch-up (snapshotSizeFactor {factor:?}): {n} txns; restart to FOLLOWING {joined:?}, \
         restart to applied {done:?}; {:.0} txns/s over the sync ({:.0} txns/s including the \
         restart)",
        n as f64 / sync,
        n as f64 / done.as_secs_f64()
    );
    assert_eq!(c.kvs[&lag].state().applied, c.kvs[&leader].state().applied);
    assert_eq!(c.kvs[&lag].state().map, c.kvs[&leader].state().map);
    let out = CatchUp {
        follower: c.status(lag),
        leader: c.status(leader),
    };
    c.shutdown().await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_follower_catches_up_by_diff() {
    // ZAB_CATCHUP_TXNS=50000 for a longer measurement (the default keeps the suite quick).
    let n: usize = std::env::var("ZAB_CATCHUP_TXNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    // The snapshot-size rule off: the DIFF streams from the leader's on-disk log.
    let CatchUp { follower, leader } = catch_up_after(n, Some(-1.0)).await;
    assert!(follower.syncs_received.diff >= 1, "{follower:?}");
    let (snap, trunc) = (follower.syncs_received.snap, follower.syncs_received.trunc);
    assert_eq!((snap, trunc), (0, 0));
    assert!(
        leader.syncs_sent.diff_from_log >= 1,
        "window is 500 txns: {leader:?}"
    );
    assert!(leader.snapshots_taken >= 1, "snapCount n/3: {leader:?}");
}

/// `snapshotSizeFactor` (default 0.33) on real nodes: the same lag, where the DIFF from the
/// log would carry nearly the whole state (every write is a new key) and so weigh more than a
/// third of the leader's newest snapshot, is served by SNAP; the leader knows its snapshot's
/// size from the background snapshots it wrote while the follower was down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_whose_diff_outweighs_the_snapshot_gets_a_snap() {
    let CatchUp { follower, leader } = catch_up_after(5000, None).await;
    assert_eq!(follower.syncs_received.snap, 1, "{follower:?}");
    assert_eq!(leader.syncs_sent.diff_from_log, 0, "{leader:?}");
    assert!(leader.snapshots_taken >= 1, "snapCount n/3: {leader:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_old_leader_catches_up_by_trunc() {
    let mut c = Cluster::new(3, 0);
    c.start_all().await;
    let old = c.wait_stable(STABLE).await;
    let committed = c.put_many(old, "a", 5, 5).await;
    for f in c.followers(old) {
        c.stop(f).await;
    }
    // The leader still leads for syncLimit ticks: these are logged there, never committed.
    let keys: Vec<String> = (0..5).map(|i| format!("u{i}")).collect();
    let futs = keys.iter().map(|k| c.put(old, k, "lost"));
    for r in futures::future::join_all(futs).await {
        let e = r.unwrap_err();
        assert!(retryable(&e), "{e}");
    }
    let st = c.status(old);
    assert!(
        st.last_logged > committed,
        "uncommitted proposals logged: {st:?}"
    );
    c.stop(old).await;
    let others: Vec<ServerId> = c.sids().into_iter().filter(|s| *s != old).collect();
    for s in &others {
        c.start(*s).await;
    }
    let new_leader = c.wait_stable(STABLE).await;
    let last = c.put_many(new_leader, "b", 5, 5).await;
    c.start(old).await;
    c.wait_applied(old, last, STABLE).await;
    let st = c.status(old);
    assert!(st.syncs_received.trunc >= 1, "{st:?}");
    assert_eq!(st.syncs_received.snap, 0);
    assert!(c.status(new_leader).syncs_sent.trunc >= 1);
    assert_eq!(c.kvs[&old].get("u0"), None);
    assert_eq!(c.kvs[&old].state().map, c.kvs[&new_leader].state().map);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_follower_catches_up_by_snap() {
    let mut c = Cluster::new(3, 0);
    c.opts.committed_log_window = Some(10);
    c.opts.diff_from_log_limit = Some(20);
    c.opts.snap_chunk_bytes = 4096;
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    c.put_many(leader, "a", 5, 5).await;
    let lag = c.followers(leader)[0];
    c.stop(lag).await;
    let big = "x".repeat(1000);
    for i in 0..300 {
        c.put(leader, &format!("b{i}"), &big).await.unwrap();
    }
    let last = c.node(leader).sync().await.unwrap();
    c.start(lag).await;
    c.wait_applied(lag, last, STABLE).await;
    let st = c.status(lag);
    assert!(st.syncs_received.snap >= 1, "{st:?}");
    assert!(c.status(leader).syncs_sent.snap >= 1);
    assert_eq!(c.kvs[&lag].state().map, c.kvs[&leader].state().map);
    // The installed snapshot and the log after it are durable: writes go on, and a restart
    // of the learner reloads both.
    let z = c.put(lag, "after-snap", "1").await.unwrap();
    c.stop(lag).await;
    c.start(lag).await;
    c.wait_applied(lag, z, STABLE).await;
    assert_eq!(c.kvs[&lag].get("after-snap").as_deref(), Some("1"));
    assert_eq!(c.kvs[&lag].state().map.len(), 306);
    c.shutdown().await;
}

/// PITFALLS E6, E10: the purge policy is snapRetainCount snapshots after every background
/// snapshot, whatever members are down; a member down across several purges is brought back
/// by SNAP (its needed log is gone) and ends with the leader's state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_behind_the_purged_log_gets_a_snap() {
    let mut c = Cluster::new(3, 0);
    c.snap_count = 100;
    c.pre_alloc_kib = 16;
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    c.put_many(leader, "a", 5, 5).await;
    let lag = c.followers(leader)[0];
    let lag_last = c.status(lag).last_logged;
    c.stop(lag).await;
    // Background snapshots every 50–100 txns, purge keeping 3, 16 KiB segments: writes go on
    // until a purge has removed the segment holding the lag's last zxid. Snapshots are taken
    // only as txns apply and each purge reaches the disk after its snapshot is reported, so
    // neither a fixed number of writes nor of snapshots is enough on a slow machine.
    let t0 = Instant::now();
    let mut last = Zxid::ZERO;
    let mut batch = 0;
    while !purged_past(&c, leader, lag_last) {
        assert!(
            t0.elapsed() < STABLE,
            "the leader's log still holds {lag_last} after {batch} batches: {:?}",
            c.status(leader)
        );
        last = c.put_many(leader, &format!("b{batch}-"), 100, 100).await;
        batch += 1;
        if batch >= 10 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert!(c.status(leader).snapshots_taken >= 3);
    c.start(lag).await;
    c.wait_applied(lag, last, STABLE).await;
    let st = c.status(lag);
    assert!(st.syncs_received.snap >= 1, "{st:?}");
    assert_eq!(c.kvs[&lag].state().map, c.kvs[&leader].state().map);
    let snaps = snapshot_files(&c, leader);
    assert!(
        snaps <= 4,
        "purge keeps 3 snapshots (one more may be in flight): {snaps}"
    );
    c.shutdown().await;
}

/// True when `sid`'s oldest log segment starts past the txn after `z`: the record `z` and the
/// one before the segment were purged, so no DIFF can start from `z`.
fn purged_past(c: &Cluster, sid: ServerId, z: Zxid) -> bool {
    let first_segment = std::fs::read_dir(c.root.path().join(format!("n{}", sid.0)))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            let hex = name.strip_prefix("log.")?;
            u64::from_str_radix(hex, 16).ok()
        })
        .min();
    first_segment.is_some_and(|first| first > z.0.saturating_add(1))
}

/// Snapshot files (not temp files) in `sid`'s data dir.
fn snapshot_files(c: &Cluster, sid: ServerId) -> usize {
    std::fs::read_dir(c.root.path().join(format!("n{}", sid.0)))
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            let name = name.to_string_lossy();
            name.starts_with("snapshot.") && !name.ends_with(".tmp")
        })
        .count()
}

/// PITFALLS E8: snapshots are taken by bytes of log as well as by txn count. With snapCount
/// 100 000 and `snapSizeLimitInKb=64`, 200 writes of ~1 KiB (~200 KiB of log) take at least
/// two snapshots on every node, more than 400 times sooner than snapCount would (a snapshot due
/// while one is still being written waits for it, so on a loaded machine the writes go on, up
/// to 1,000, until every node took two); with the byte trigger disabled
/// (`snapSizeLimitInKb=0`) 200 writes take none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_snap_size_limit_snapshots_long_before_snap_count() {
    const WRITES: usize = 200;
    let big = "s".repeat(1000);
    for (kib, expect_snaps) in [(64, true), (0, false)] {
        let mut c = Cluster::new(3, 0);
        c.snap_size_limit_kib = Some(kib);
        c.start_all().await;
        let leader = c.wait_stable(STABLE).await;
        let mut last = Zxid::ZERO;
        let snapshotted = |c: &Cluster| c.sids().iter().all(|s| c.status(*s).snapshots_taken >= 2);
        let mut i = 0;
        while i < WRITES || (expect_snaps && i < 5 * WRITES && !snapshotted(&c)) {
            last = c.put(leader, &format!("k{i}"), &big).await.unwrap();
            i += 1;
        }
        for sid in c.sids() {
            c.wait_applied(sid, last, STABLE).await;
        }
        // Background snapshots finish on a blocking thread: give them a moment.
        let t0 = Instant::now();
        while expect_snaps && !snapshotted(&c) && t0.elapsed() < STABLE {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for sid in c.sids() {
            let st = c.status(sid);
            if expect_snaps {
                assert!(st.snapshots_taken >= 2, "limit {kib} KiB: {st:?}");
                assert!(snapshot_files(&c, sid) >= 2, "limit {kib} KiB on {sid}");
            } else {
                assert_eq!(st.snapshots_taken, 0, "limit disabled: {st:?}");
            }
        }
        c.shutdown().await;
    }
}

/// `snapCpuPercent` paces background snapshots but never stops them: with the least share
/// (1% of a core) and `snapSizeLimitInKb=2048`, ~4 KiB writes to distinct keys make every
/// node take and finish background snapshots of 2 MiB and more (so the pacing checks its
/// clocks at least twice in each), and the files are there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_the_least_snap_cpu_share_still_snapshots() {
    let big = "s".repeat(4000);
    let mut c = Cluster::new(3, 0);
    c.snap_size_limit_kib = Some(2048);
    c.snap_cpu_percent = Some(1);
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    let snapshotted = |c: &Cluster| c.sids().iter().all(|s| c.status(*s).snapshots_taken >= 1);
    let mut last = Zxid::ZERO;
    let mut i = 0;
    while i < 600 || (i < 2000 && !snapshotted(&c)) {
        last = c.put(leader, &format!("k{i}"), &big).await.unwrap();
        i += 1;
    }
    for sid in c.sids() {
        c.wait_applied(sid, last, STABLE).await;
    }
    let t0 = Instant::now();
    while !snapshotted(&c) && t0.elapsed() < STABLE {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for sid in c.sids() {
        let st = c.status(sid);
        assert!(st.snapshots_taken >= 1, "snapCpuPercent=1: {st:?}");
        assert!(snapshot_files(&c, sid) >= 1, "snapCpuPercent=1 on {sid}");
    }
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_snap_streams_through_a_small_outbox() {
    let mut c = Cluster::new(3, 0);
    c.opts.committed_log_window = Some(10);
    c.opts.diff_from_log_limit = Some(10);
    c.opts.snap_chunk_bytes = 16 * 1024;
    // 64 messages per link: a plain send of the SNAP's ~1000 chunks would overflow it.
    c.opts.outbox_len = Some(64);
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    let lag = c.followers(leader)[0];
    c.stop(lag).await;
    let big = "v".repeat(64 * 1024);
    for round in 0..16 {
        let keys: Vec<String> = (0..16).map(|i| format!("k{round}-{i}")).collect();
        let futs = keys.iter().map(|k| c.put(leader, k, &big));
        for r in futures::future::join_all(futs).await {
            r.unwrap();
        }
    }
    let last = c.node(leader).sync().await.unwrap();
    let t0 = Instant::now();
    c.start(lag).await;
    c.wait_applied(lag, last, Duration::from_secs(20)).await;
    println!(
        "SNAP of ~16 MiB in 16 KiB chunks through a 64-message outbox: {:?}",
        t0.elapsed()
    );
    assert!(c.status(lag).syncs_received.snap >= 1);
    assert_eq!(c.kvs[&lag].state().map, c.kvs[&leader].state().map);
    c.shutdown().await;
}

/// A learner that lacks many times more txns than its outbox holds, all of them in the
/// leader's memory (a restarted leader applies nothing before its NEWLEADER quorum, so it
/// keeps every txn above its snapshot), and that the leader needs for that quorum: its sync
/// waits for room in the outbox like a stream, and it catches up — instead of overflowing
/// the outbox, being dropped and getting the same DIFF again, for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_diff_from_memory_longer_than_the_outbox_is_flow_controlled() {
    const OUTBOX: usize = 32;
    const TXNS: usize = 64 * OUTBOX;
    let mut c = Cluster::new(3, 0);
    // The smallest outbox the start check allows for this window (2 × 8 + 16).
    c.opts.committed_log_window = Some(8);
    c.opts.outbox_len = Some(OUTBOX);
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    let (lag, other) = (c.followers(leader)[0], c.followers(leader)[1]);
    c.stop(lag).await;
    let value = "v".repeat(1024);
    let mut last = Zxid::ZERO;
    for round in 0..TXNS / 32 {
        let keys: Vec<String> = (0..32).map(|i| format!("k{round}-{i}")).collect();
        for r in futures::future::join_all(keys.iter().map(|k| c.put(leader, k, &value))).await {
            last = last.max(r.unwrap());
        }
    }
    c.wait_applied(other, last, STABLE).await;
    c.stop(leader).await;
    c.stop(other).await;
    // Only the old leader (longest log: it leads again) and the lagging follower: the
    // leader's NEWLEADER quorum needs the follower, whose DIFF from memory is 128 × the outbox
    // (messages) and megabytes long.
    c.start(leader).await;
    c.start(lag).await;
    let t0 = Instant::now();
    c.wait_applied(lag, last, Duration::from_secs(30)).await;
    let st = c.status(lag);
    println!(
        "lagging follower caught up {} txns in {:?} (DIFFs received: {})",
        TXNS,
        t0.elapsed(),
        st.syncs_received.diff
    );
    assert_eq!(c.kvs[&lag].state().map, c.kvs[&leader].state().map);
    // Without flow control each attempt delivers about one outbox of the DIFF before the
    // overflow drops the follower (it keeps what it logged and asks again from there): some
    // hundred syncs instead of one.
    let s = st.syncs_received;
    assert_eq!(s.diff + s.snap, 1, "synced more than once: {s:?}");
    c.shutdown().await;
}
