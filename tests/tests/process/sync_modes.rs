//! A node rejoins and is brought in sync by each mode, asserted through the sync counters of
//! `mntr` (`fe_meta_sync_received_*`): DIFF after a kill -9, TRUNC after it diverged, SNAP
//! after its data dir was wiped (100+ MB catalog) and after it fell behind the purged logs.

use std::time::{Duration, Instant};

use fe_meta::client::{Client, ClientError, ClientOptions, Written};
use tests::proc::{fill, ClusterSpec, Load, ProcCluster};
use tokio::task::{JoinHandle, JoinSet};

use crate::{ms, other_than, write_ok};

/// Polls node `sid` until it serves with an applied journal id of at least `jid`.
async fn caught_up(c: &ProcCluster, sid: u64, jid: u64, within: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if let Some(st) = c.status(sid).await {
            if st.applied_journal_id.0 >= jid && st.leader_sid.is_some() {
                return start.elapsed();
            }
        }
        assert!(
            start.elapsed() < within,
            "node {sid} not at {jid:#x} within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// kill -9 a follower, write on, restart it: it catches up by DIFF (no TRUNC, no SNAP).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_follower_catches_up_by_diff() {
    let mut c = ProcCluster::start("follower_diff", ClusterSpec::default())
        .await
        .unwrap();
    let leader = c.leader(Duration::from_secs(10)).await.unwrap();
    let f = other_than(&c, &[leader]);
    let load = Load::start(&c, 3, 64, Duration::from_secs(20));
    tokio::time::sleep(Duration::from_secs(1)).await;
    c.kill(f).unwrap();
    let killed_at = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let missed = c.ledger().len();
    c.restart(f).unwrap();
    let restarted_at = Instant::now();
    let target = c.ledger().max_journal_id();
    let catchup = caught_up(&c, f, target, Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let report = load.stop().await;
    let (_, received) = c.sync_counts(f).await.unwrap();
    let (sent, _) = c.sync_counts(leader).await.unwrap();
    println!(
        "RECOVERY scenario=follower_diff down_ms={} catchup_ms={catchup_ms} acked={} \
         follower_received={received:?} leader_sent={sent:?}",
        ms(restarted_at - killed_at),
        report.acked,
        catchup_ms = ms(catchup),
    );
    assert!(missed > 0);
    assert!(received.diff >= 1, "{received:?}");
    assert_eq!((received.trunc, received.snap), (0, 0), "{received:?}");
    assert!(sent.diff >= 1, "{sent:?}");
    c.finish().await.unwrap();
}

/// The leader logs proposals that never commit: both followers are frozen (SIGSTOP) when it
/// proposes, then all three die (kill -9; the frozen followers never read the proposals).
/// The followers restart, elect a leader and write on; the old leader restarts and is
/// brought in sync by TRUNC (+ DIFF); the uncommitted writes are nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diverged_old_leader_is_truncated() {
    let spec = ClusterSpec {
        sync_limit: 10,
        ..ClusterSpec::default()
    };
    let mut c = ProcCluster::start("diverged_trunc", spec).await.unwrap();
    let old = c.leader(Duration::from_secs(10)).await.unwrap();
    fill(&c, old, "before-", 100, 64, 16, Duration::from_secs(20))
        .await
        .unwrap();
    let followers: Vec<u64> = c.sids().into_iter().filter(|s| *s != old).collect();
    let opts = ClientOptions {
        connect_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(10),
        ..ClientOptions::DEFAULT
    };
    let doomed_client = c.client(old, Some(opts)).await.unwrap();

    for f in &followers {
        c.pause(*f).unwrap();
    }
    let doomed = spawn_doomed_writes(doomed_client);
    // The leader logs (fsyncs) the proposals well within syncLimit × tickTime = 1 s.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for f in &followers {
        c.kill(*f).unwrap();
    }
    c.kill(old).unwrap();
    let outcomes = doomed.await.unwrap();
    assert!(
        outcomes.iter().all(Result::is_err),
        "a doomed write was acknowledged: {outcomes:?}"
    );

    for f in &followers {
        c.restart(*f).unwrap();
    }
    let new = c.leader(Duration::from_secs(20)).await.unwrap();
    assert_ne!(new, old);
    fill(&c, new, "after-", 100, 64, 16, Duration::from_secs(20))
        .await
        .unwrap();
    c.restart(old).unwrap();
    let restarted_at = Instant::now();
    let target = c.ledger().max_journal_id();
    let rejoin = caught_up(&c, old, target, Duration::from_secs(20)).await;
    let (_, received) = c.sync_counts(old).await.unwrap();
    println!(
        "RECOVERY scenario=diverged_trunc rejoin_ms={} old_leader_received={received:?}",
        ms(rejoin)
    );
    assert!(
        received.trunc >= 1,
        "the diverged node got no TRUNC: {received:?}"
    );
    assert_eq!(received.snap, 0, "{received:?}");
    let converged = c.finish().await.unwrap();
    doomed_writes_are_nowhere(&c).await;
    let _ = (restarted_at, converged);
}

/// Sends `doomed-0` .. `doomed-4` through `client` at once, each on its own task; the task
/// returned yields their outcomes.
fn spawn_doomed_writes(client: Client) -> JoinHandle<Vec<Result<Written, ClientError>>> {
    tokio::spawn(async move {
        let mut tasks = JoinSet::new();
        let client = std::sync::Arc::new(client);
        for k in 0..5 {
            let client = client.clone();
            tasks.spawn(async move { client.set_var(&format!("doomed-{k}"), "x").await });
        }
        let mut out = Vec::new();
        while let Some(r) = tasks.join_next().await {
            out.push(r.unwrap());
        }
        out
    })
}

/// None of `doomed-0` .. `doomed-4` is on any node.
async fn doomed_writes_are_nowhere(c: &ProcCluster) {
    for k in 0..5 {
        for sid in c.sids() {
            let client = c.client(sid, None).await.unwrap();
            let v = client.get_var(&format!("doomed-{k}"), false).await.unwrap();
            assert_eq!(v.value, None, "uncommitted doomed-{k} is on node {sid}");
        }
    }
}

/// A follower's data dir is wiped and it restarts without `--bootstrap`: it rejoins by SNAP of
/// a catalog of over 100 MB. The leader DIFFs from its log whenever that log reaches back to
/// the learner and holds at most `diff_from_log_limit` (100 000) txns, so the history is made
/// longer than that: 1 650 values of 64 KB, then 100 500 small overwrites of 256 variables
/// (not in the ledger; the digest comparison covers them). The bulk load runs with
/// forceSync=no (this test is about the SNAP transfer, not about durability of the load).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wiped_follower_rejoins_by_snap_of_100_mb() {
    let spec = ClusterSpec {
        force_sync: false,
        init_limit: 300,
        pre_alloc_kib: 65536,
        ..ClusterSpec::default()
    };
    let mut c = ProcCluster::start("wiped_snap", spec).await.unwrap();
    let leader = c.leader(Duration::from_secs(10)).await.unwrap();
    let loaded_at = Instant::now();
    let n = fill(
        &c,
        leader,
        "bulk-",
        1650,
        64_000,
        32,
        Duration::from_secs(90),
    )
    .await
    .unwrap();
    let bytes = c.ledger().value_bytes();
    assert!(n == 1650 && bytes >= 100 << 20, "{n} writes, {bytes} bytes");
    overwrite(&c, leader, 256, 100_500, Duration::from_secs(120)).await;
    let load_time = loaded_at.elapsed();

    let f = other_than(&c, &[leader]);
    c.kill(f).unwrap();
    c.wipe(f).unwrap();
    c.restart(f).unwrap();
    let target = c
        .client(leader, None)
        .await
        .unwrap()
        .sync()
        .await
        .unwrap()
        .0;
    let snap = caught_up(&c, f, target, Duration::from_secs(90)).await;
    let (_, received) = c.sync_counts(f).await.unwrap();
    println!(
        "RECOVERY scenario=wiped_snap catalog_mb={} txns={} load_ms={} snap_catchup_ms={} \
         follower_received={received:?}",
        bytes >> 20,
        n + 100_500,
        ms(load_time),
        ms(snap)
    );
    assert!(received.snap >= 1, "{received:?}");
    write_ok(&c, f, "after-snap", "y", Duration::from_secs(10))
        .await
        .unwrap();
    c.finish().await.unwrap();
}

/// `count` small writes through node `sid`, cycling over `keys` variables `filler-<k>`, 256 in
/// flight; every one must be acknowledged within `within`.
async fn overwrite(c: &ProcCluster, sid: u64, keys: usize, count: usize, within: Duration) {
    let opts = ClientOptions {
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(30),
        ..ClientOptions::DEFAULT
    };
    let client = std::sync::Arc::new(c.client(sid, Some(opts)).await.unwrap());
    let deadline = Instant::now() + within;
    let mut tasks: JoinSet<Result<Written, ClientError>> = JoinSet::new();
    for k in 0..count {
        if tasks.len() >= 256 {
            tasks.join_next().await.unwrap().unwrap().unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "only {k} of {count} writes within {within:?}"
        );
        let client = client.clone();
        tasks.spawn(async move {
            client
                .set_var(&format!("filler-{}", k % keys), &k.to_string())
                .await
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap().unwrap();
    }
}

/// A follower stopped (SIGTERM) while the leader snapshots every ~100 txns and purges the
/// logs it no longer needs: its last txn is older than every log the leader kept, so it
/// rejoins by SNAP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_behind_the_purged_logs_rejoins_by_snap() {
    let spec = ClusterSpec {
        snap_count: Some(100),
        pre_alloc_kib: 64,
        extra: vec!["autopurge.snapRetainCount=3".into()],
        ..ClusterSpec::default()
    };
    let mut c = ProcCluster::start("purged_snap", spec).await.unwrap();
    let leader = c.leader(Duration::from_secs(10)).await.unwrap();
    fill(&c, leader, "early-", 50, 64, 16, Duration::from_secs(20))
        .await
        .unwrap();
    let f = other_than(&c, &[leader]);
    let f_last = c.status(f).await.unwrap().applied_journal_id.0;
    assert_eq!(c.terminate(f).unwrap(), Some(0));
    fill(&c, leader, "late-", 1500, 64, 32, Duration::from_secs(60))
        .await
        .unwrap();
    // The leader's background snapshots purge the logs that hold f_last.
    let start = Instant::now();
    let first_log = loop {
        let logs = c.node(leader).unwrap().txn_log_files();
        let first = logs.first().and_then(|p| zxid_of(p));
        if first.is_some_and(|z| z > f_last) || start.elapsed() > Duration::from_secs(20) {
            break first;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        first_log.is_some_and(|z| z > f_last),
        "the leader kept a log from {first_log:x?} (follower at {f_last:#x})"
    );
    c.restart(f).unwrap();
    let target = c.ledger().max_journal_id();
    let catchup = caught_up(&c, f, target, Duration::from_secs(30)).await;
    let (_, received) = c.sync_counts(f).await.unwrap();
    println!(
        "RECOVERY scenario=purged_snap catchup_ms={} follower_received={received:?} leader_first_log={first_log:x?}",
        ms(catchup)
    );
    assert!(received.snap >= 1, "{received:?}");
    c.finish().await.unwrap();
}

/// The first zxid of a `log.<16 hex>` segment.
fn zxid_of(path: &std::path::Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    u64::from_str_radix(name.strip_prefix("log.")?, 16).ok()
}
