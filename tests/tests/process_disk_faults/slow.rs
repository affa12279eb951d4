//! A slow disk: every sync (fsync, fdatasync, msync) of one node takes a delay longer
//! (module docs of the test binary). The write rate through each node is measured over a
//! phase without the delay, with a slow follower and with a slow leader, and printed as one
//! `SLOWDISK` line per phase; after each phase the delay is removed and the time until every
//! node has the same digest again is printed as `caught_up_ms`.
//!
//! What this implementation does (and the test pins, loosely, on a shared 2-core machine):
//! a commit needs a quorum of durable acks, and the leader's own ack is one vote like the
//! others, so neither a slow follower nor a slow leader stalls commits: the two other nodes
//! form the quorum. Each node answers its clients once the write is committed and applied,
//! without waiting for its own sync, so even the slow node's clients are served at the
//! cluster's pace. What a slow node costs is the spare vote: every commit then waits for both
//! other nodes (the slower of two instead of the faster two of three). Two slow nodes of three
//! do stall commits (a quorum needs one of them): the ignored benchmark shows it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tests::proc::{DiskFault, Load, ProcCluster};

use crate::{a_follower, last_incarnation, ms, with_shim, VALUE_LEN};

/// What a node logs (at WARN, `zab_store::writer`) when a sync of its txn log took a second or
/// more.
const SLOW_WARN: &str = "the disk is slow; this node's acks wait for it";

/// Sequential writers on each node (one write in flight each).
const WRITERS_PER_NODE: usize = 2;

/// One phase's result: acknowledged writes per second through each node.
type Rates = BTreeMap<u64, f64>;

/// Acknowledged writes per second through each node over `phase`, with
/// [`WRITERS_PER_NODE`] writers on each.
async fn rates(c: &ProcCluster, phase: Duration) -> Rates {
    let loads: Vec<(u64, Load)> = c
        .sids()
        .into_iter()
        .map(|sid| {
            let load = Load::start_on(c, &[sid], WRITERS_PER_NODE, VALUE_LEN, phase * 4);
            (sid, load)
        })
        .collect();
    let from = Instant::now();
    tokio::time::sleep(phase).await;
    let to = Instant::now();
    let mut out = BTreeMap::new();
    for (sid, load) in loads {
        let report = load.stop().await;
        let n = report.acked_between(from, to) as f64;
        out.insert(sid, n / (to - from).as_secs_f64());
    }
    out
}

/// Runs one phase: `slow` nodes get `delay_ms` on every sync, the rates are measured over
/// `phase` and printed, the delay is removed and the catch-up timed (all equal digests).
async fn phase(
    c: &mut ProcCluster,
    df: &DiskFault,
    (label, slow, delay_ms): (&str, &[u64], u64),
    leader: u64,
    phase: Duration,
) -> Rates {
    for sid in slow {
        df.set(*sid, &format!("delay-sync-ms={delay_ms}")).unwrap();
    }
    let r = rates(c, phase).await;
    for sid in slow {
        assert!(
            last_incarnation(c, *sid).contains("diskfault: delaying"),
            "the shim delayed no sync of node {sid}"
        );
        df.set(*sid, "ok").unwrap();
    }
    let fast_again = Instant::now();
    c.wait_converged(Duration::from_secs(60)).await.unwrap();
    let caught_up = fast_again.elapsed();
    let role = |sid: u64| if sid == leader { "leader" } else { "follower" };
    let per_node = r
        .iter()
        .map(|(sid, rate)| format!("node{sid}({})={rate:.0}/s", role(*sid)))
        .collect::<Vec<_>>()
        .join(" ");
    let slow = match slow {
        [] => "none".to_owned(),
        s => s
            .iter()
            .map(|sid| format!("node{sid}({})", role(*sid)))
            .collect::<Vec<_>>()
            .join(","),
    };
    let total: f64 = r.values().sum();
    println!(
        "SLOWDISK phase={label} delay_sync_ms={delay_ms} slow={slow} \
         writers_per_node={WRITERS_PER_NODE} value_bytes={VALUE_LEN} phase_ms={} \
         total={total:.0}/s {per_node} caught_up_ms={}",
        ms(phase),
        ms(caught_up)
    );
    r
}

fn total(r: &Rates) -> f64 {
    r.values().sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_follower_or_leader_does_not_stall_commits_and_catches_up_once_fast_again() {
    let name = "slow_disk";
    let (delay, len) = (300, Duration::from_millis(2500));
    let Some((df, spec)) = with_shim(name, 4096) else {
        return;
    };
    let mut c = ProcCluster::start(name, spec).await.unwrap();
    let leader = c.leader(Duration::from_secs(20)).await.unwrap();
    let follower = a_follower(&c, leader);

    let healthy = phase(&mut c, &df, ("healthy", &[], 0), leader, len).await;
    let slow_f = phase(
        &mut c,
        &df,
        ("slow-follower", &[follower], delay),
        leader,
        len,
    )
    .await;
    let slow_l = phase(&mut c, &df, ("slow-leader", &[leader], delay), leader, len).await;
    // A stall would allow each sequential writer one write per delay: 2 writers x 3 nodes
    // x (1000 / 300) = 20/s in all. Far above it, with a wide margin for a busy machine.
    let stalled = (WRITERS_PER_NODE * 3) as f64 * 1000.0 / delay as f64;
    for (what, r) in [("follower", &slow_f), ("leader", &slow_l)] {
        assert!(
            total(r) > 10.0 * stalled && total(r) > 0.1 * total(&healthy),
            "a slow {what} stalled the commits: {:.0}/s, healthy {:.0}/s",
            total(r),
            total(&healthy)
        );
    }
    // The slow node's own clients are served at the cluster's pace, not its disk's.
    assert!(slow_f[&follower] > 10.0 * stalled / 3.0, "{slow_f:?}");
    // A sync of a second or more is logged, once per 10 s at most.
    phase(
        &mut c,
        &df,
        ("very-slow-follower", &[follower], 1100),
        leader,
        len,
    )
    .await;
    let log = last_incarnation(&c, follower);
    let warned: Vec<&str> = log.lines().filter(|l| l.contains(SLOW_WARN)).collect();
    assert_eq!(warned.len(), 1, "one slow-sync WARN expected: {warned:?}");
    assert!(warned[0].contains(" WARN "), "{}", warned[0]);
    let leader_after = c.leader(Duration::from_secs(20)).await.unwrap();
    let end = c.finish().await.unwrap();
    println!(
        "RESULT scenario={name} leader={leader} slow_follower={follower} \
         leader_after_slow_phase={leader_after} journal_id={:#x} acked_checked={}",
        end.journal_id, end.acked_writes
    );
}

/// The figures of docs/BENCHMARKS.md ("Slow and failing disks"): 5 s phases, delays of 100,
/// 300 and 1000 ms on a follower, on the leader, and on both followers (a quorum needs one of
/// them: commits stall).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: about 2 minutes"]
async fn slow_disk_benchmark() {
    let name = "slow_disk_bench";
    let len = Duration::from_secs(5);
    let Some((df, spec)) = with_shim(name, 65536) else {
        return;
    };
    let mut c = ProcCluster::start(name, spec).await.unwrap();
    let leader = c.leader(Duration::from_secs(20)).await.unwrap();
    let followers: Vec<u64> = c.sids().into_iter().filter(|s| *s != leader).collect();
    phase(&mut c, &df, ("healthy", &[], 0), leader, len).await;
    for delay in [100, 300, 1000] {
        let f = &followers[..1];
        phase(&mut c, &df, ("slow-follower", f, delay), leader, len).await;
        phase(&mut c, &df, ("slow-leader", &[leader], delay), leader, len).await;
        phase(
            &mut c,
            &df,
            ("slow-followers", &followers, delay),
            leader,
            len,
        )
        .await;
    }
    phase(&mut c, &df, ("healthy", &[], 0), leader, len).await;
    c.finish().await.unwrap();
}
