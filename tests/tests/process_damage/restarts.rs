//! Nodes that go away and come back whole: an observer killed -9 (the voters' writes do not
//! slow down), and every node restarted in turn under load.

use std::time::{Duration, Instant};

use fe_meta::client::Client;
use fe_meta::protocol::Mode;
use tests::damage::observer::Observer;
use tests::proc::checks::Converged;
use tests::proc::{binary, ports, ClusterSpec, Load, ProcCluster};

use crate::{caught_up, leader_applied, ms, PROBE};

/// Sequential writers through the voters for `secs`: (writes per second, p50, p99 latency).
async fn write_rate(c: &ProcCluster, tag: &str, secs: f64) -> (f64, Duration, Duration) {
    let mut tasks = tokio::task::JoinSet::new();
    for (i, sid) in c.sids().into_iter().enumerate() {
        let addr = c.client_addr(sid);
        let ledger = c.ledger().clone();
        let tag = format!("{tag}-{i}-");
        tasks.spawn(async move {
            let client = Client::connect_with(&addr, PROBE).await.unwrap();
            let end = Instant::now() + Duration::from_secs_f64(secs);
            let mut lat = Vec::new();
            let mut k = 0;
            while Instant::now() < end {
                let name = format!("{tag}{k}");
                let t = Instant::now();
                let w = client.set_var(&name, "x").await.unwrap();
                lat.push(t.elapsed());
                ledger.record(&name, "x", w.journal_id.0);
                k += 1;
            }
            lat
        });
    }
    let mut all = Vec::new();
    while let Some(l) = tasks.join_next().await {
        all.extend(l.unwrap());
    }
    all.sort();
    let p = |q: f64| all[((all.len() - 1) as f64 * q) as usize];
    (all.len() as f64 / secs, p(0.5), p(0.99))
}

/// An observer (non-voting) dies and comes back: the voters' write rate and latency while it
/// is down stay close to those with it up, and it catches up on return.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observer_down_does_not_slow_writes_and_catches_up() {
    let obs_base = ports::free_block().unwrap();
    let obs_sid = 4;
    let spec = ClusterSpec {
        extra: vec![Observer::line(obs_sid, obs_base)],
        ..ClusterSpec::default()
    };
    let mut c = ProcCluster::start("observer", spec).await.unwrap();
    let mut obs = start_observer(&c, obs_sid, obs_base);
    let (_, target) = leader_applied(&mut c).await;
    let joined = caught_up(&obs.client_addr(), target, Duration::from_secs(30)).await;
    let mode = Client::connect_with(&obs.client_addr(), PROBE)
        .await
        .unwrap()
        .status()
        .await
        .unwrap()
        .mode;
    assert_eq!(mode, Mode::Observer, "node {obs_sid} is not an observer");

    let (up_rate, up_p50, up_p99) = write_rate(&c, "obs-up", 2.0).await;
    obs.kill9();
    let (down_rate, down_p50, down_p99) = write_rate(&c, "obs-down", 2.0).await;
    let (_, target) = leader_applied(&mut c).await;
    let restarted = Instant::now();
    obs.start().unwrap();
    let back = caught_up(&obs.client_addr(), target, Duration::from_secs(30)).await;
    println!(
        "RECOVERY scenario=observer_restart first_join_ms={} restart_to_caught_up_ms={} \
         writes_per_s_up={up_rate:.0} writes_per_s_down={down_rate:.0} \
         p50_up_ms={:.2} p50_down_ms={:.2} p99_up_ms={:.2} p99_down_ms={:.2}",
        ms(joined),
        ms(back),
        up_p50.as_secs_f64() * 1e3,
        down_p50.as_secs_f64() * 1e3,
        up_p99.as_secs_f64() * 1e3,
        down_p99.as_secs_f64() * 1e3,
    );
    assert!(restarted.elapsed() < Duration::from_secs(30));
    // A leader that waited for the dead observer (an ack counted, an outbox it held writes
    // for) stalls writes to a trickle; a quarter of the rate keeps that visible while the
    // noise of a loaded machine between two 2 s windows (a half failed once at load 10) does
    // not trip it.
    assert!(
        down_rate > 0.25 * up_rate,
        "writes slowed while the observer was down: {down_rate:.0}/s vs {up_rate:.0}/s"
    );
    let done = c.finish().await.unwrap();
    observer_holds_the_voters_catalog(&mut c, &obs, &done).await;
}

/// Creates observer `sid` (client and quorum ports from `base`) beside the cluster, from node
/// 1's config, and starts it.
fn start_observer(c: &ProcCluster, sid: u64, base: u16) -> Observer {
    let voter = c.node(1).unwrap();
    let mut obs = Observer::create(
        c.dir(),
        &voter.config_path(),
        &binary::fe_meta_bin().unwrap(),
        sid,
        base,
    )
    .unwrap();
    obs.start().unwrap();
    obs
}

/// Within 20 s the observer's digest equals the voters' at their final journal id (else the
/// cluster's dir is kept and the observer's log tail shown).
async fn observer_holds_the_voters_catalog(c: &mut ProcCluster, obs: &Observer, done: &Converged) {
    let start = Instant::now();
    loop {
        let d = match Client::connect_with(&obs.client_addr(), PROBE).await {
            Ok(client) => client.digest(false).await.ok(),
            Err(_) => None,
        };
        if d.is_some_and(|(jid, digest, _)| jid.0 == done.journal_id && digest == done.digest) {
            break;
        }
        if start.elapsed() > Duration::from_secs(20) {
            c.keep_dir();
            panic!(
                "observer digest {d:?} != voters' {:#x}\n{}",
                done.journal_id,
                obs.log_tail(30)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every node is restarted in turn (SIGTERM, start, wait until it follows and caught up) while
/// three clients write: no acknowledged write is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_restart_under_load_loses_no_acked_write() {
    let mut c = ProcCluster::start("rolling_restart", ClusterSpec::default())
        .await
        .unwrap();
    let load = Load::start(&c, 3, 64, Duration::from_secs(60));
    tokio::time::sleep(Duration::from_secs(1)).await;
    for sid in c.sids() {
        let was_leader = c.leader(Duration::from_secs(20)).await.unwrap() == sid;
        let code = c.terminate(sid).unwrap();
        let down_at = Instant::now();
        tokio::time::sleep(Duration::from_millis(300)).await;
        c.restart(sid).unwrap();
        let (_, target) = leader_applied(&mut c).await;
        let took = caught_up(&c.client_addr(sid), target, Duration::from_secs(30)).await;
        println!(
            "RECOVERY scenario=rolling_restart node={sid} was_leader={was_leader} exit={code:?} \
             down_to_caught_up_ms={}",
            ms(down_at.elapsed())
        );
        assert!(took < Duration::from_secs(30));
    }
    let report = load.stop().await;
    println!(
        "RECOVERY scenario=rolling_restart acked={} failed={} errors={:?}",
        report.acked, report.failed, report.errors
    );
    assert!(report.acked > 50, "load too small: {report:?}");
    let done = c.finish().await.unwrap();
    assert!(done.acked_writes as u64 >= report.acked);
}
