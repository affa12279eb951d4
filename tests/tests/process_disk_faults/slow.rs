//! A slow disk: every sync of one node takes [`DELAY_MS`] longer (module docs of the test
//! binary). The write rate through each node is measured for [`PHASE`] without the delay,
//! with a slow follower and with a slow leader, and printed as one `SLOWDISK` line per phase.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tests::proc::{Load, ProcCluster};

use crate::{a_follower, last_incarnation, ms, with_shim, VALUE_LEN};

/// The delay added to every sync (msync, fsync, fdatasync) of the slow node.
const DELAY_MS: u64 = 300;
/// How long each phase measures.
const PHASE: Duration = Duration::from_millis(2500);
/// Sequential writers on each node (one write in flight each).
const WRITERS_PER_NODE: usize = 2;

/// Acknowledged writes per second through each node over one [`PHASE`], with
/// [`WRITERS_PER_NODE`] writers on each.
async fn rates(c: &ProcCluster) -> BTreeMap<u64, f64> {
    let loads: Vec<(u64, Load)> = c
        .sids()
        .into_iter()
        .map(|sid| {
            let load = Load::start_on(c, &[sid], WRITERS_PER_NODE, VALUE_LEN, PHASE * 4);
            (sid, load)
        })
        .collect();
    let from = Instant::now();
    tokio::time::sleep(PHASE).await;
    let to = Instant::now();
    let mut out = BTreeMap::new();
    for (sid, load) in loads {
        let report = load.stop().await;
        let n = report.acked_between(from, to) as f64;
        out.insert(sid, n / (to - from).as_secs_f64());
    }
    out
}

/// One `SLOWDISK` line: the phase, the slow node and its role, the rate through each node.
fn print_phase(phase: &str, slow: Option<(u64, &str)>, leader: u64, r: &BTreeMap<u64, f64>) {
    let per_node = r
        .iter()
        .map(|(sid, rate)| {
            let role = if *sid == leader { "leader" } else { "follower" };
            format!("node{sid}({role})={rate:.0}/s")
        })
        .collect::<Vec<_>>()
        .join(" ");
    let slow = slow.map_or("none".to_owned(), |(sid, role)| format!("node{sid}({role})"));
    let total: f64 = r.values().sum();
    println!(
        "SLOWDISK phase={phase} delay_sync_ms={DELAY_MS} slow={slow} writers_per_node={WRITERS_PER_NODE} \
         value_bytes={VALUE_LEN} total={total:.0}/s {per_node}"
    );
}

/// The summed rate of every node but `except`.
fn others(r: &BTreeMap<u64, f64>, except: u64) -> f64 {
    r.iter().filter(|(s, _)| **s != except).map(|(_, v)| v).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_disk_slows_only_its_own_node_and_it_catches_up_once_fast_again() {
    let name = "slow_disk";
    let Some((df, spec)) = with_shim(name, 4096) else {
        return;
    };
    let mut c = ProcCluster::start(name, spec).await.unwrap();
    let leader = c.leader(Duration::from_secs(20)).await.unwrap();
    let follower = a_follower(&c, leader);

    let base = rates(&c).await;
    print_phase("healthy", None, leader, &base);

    df.set(follower, &format!("delay-sync-ms={DELAY_MS}")).unwrap();
    let slow_f = rates(&c).await;
    print_phase("slow-follower", Some((follower, "follower")), leader, &slow_f);
    assert!(
        last_incarnation(&c, follower).contains("diskfault: delaying"),
        "the shim delayed no sync of node {follower}"
    );
    df.set(follower, "ok").unwrap();
    let fast_again = Instant::now();
    c.wait_converged(Duration::from_secs(30)).await.unwrap();
    let caught_up = fast_again.elapsed();
    let (base_others, slow_others) = (others(&base, follower), others(&slow_f, follower));
    assert!(
        slow_others >= base_others * 0.3,
        "a slow follower slowed the writes through the two others from {base_others:.0}/s \
         to {slow_others:.0}/s"
    );

    df.set(leader, &format!("delay-sync-ms={DELAY_MS}")).unwrap();
    let slow_l = rates(&c).await;
    print_phase("slow-leader", Some((leader, "leader")), leader, &slow_l);
    df.set(leader, "ok").unwrap();
    let leader_after = c.leader(Duration::from_secs(20)).await.unwrap();
    let end = c.finish().await.unwrap();
    println!(
        "RESULT scenario={name} leader={leader} slow_follower={follower} \
         follower_caught_up_ms={} leader_after_slow_phase={leader_after} journal_id={:#x} \
         acked_checked={}",
        ms(caught_up),
        end.journal_id,
        end.acked_writes
    );
}
