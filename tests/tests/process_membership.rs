//! Membership changes on real `fe-meta server` processes under a write load: grow 3 → 5 and
//! lose two of the original three; shrink back; replace a dead server by a new one on an empty
//! disk (`--helper`); drop the leader; kill the leader in the middle of a change; restart a
//! server over a stale zoo.cfg.
//!
//! Every test writes throughout with the harness's load (each acknowledged write recorded in the
//! ledger) and with linearizability clients (`tests::proc::lin_load`: their history must pass
//! `tests::lincheck`), and ends with the shared checks of `ProcCluster::finish`: every
//! acknowledged write is on every remaining server, all at one journal id and digest, no read
//! went back in time.
//!
//! Needs the `fe-meta` binary: `cargo build --release -p fe-meta-cli` (the workspace's
//! `cargo test --release` builds it) or `FE_META_BIN`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::time::{Duration, Instant};

use fe_meta::protocol::MemberState;
use tests::proc::lin_load::LinLoad;
use tests::proc::{ClusterSpec, Load, ProcCluster};

/// How long a change, a promotion or an election may take here.
const WAIT: Duration = Duration::from_secs(30);

/// Linearizability clients over servers 1..=5 (those not running yet are skipped until they
/// answer), beside the ledger's load.
fn lin_load(c: &ProcCluster) -> LinLoad {
    let addrs: Vec<String> = (1..=5)
        .map(|sid| format!("127.0.0.1:{}", c.ports_of(sid).unwrap().client))
        .collect();
    LinLoad::start(&addrs, 4, Duration::from_secs(60))
}

/// Stops the linearizability clients and fails the test if their history is not
/// linearizable.
async fn check_linearizable(c: &mut ProcCluster, lin: LinLoad) {
    let report = lin.stop(Duration::from_secs(30)).await;
    println!("{}", report.line());
    if let Some(why) = report.failure() {
        c.keep_dir();
        panic!("{why}");
    }
    assert!(
        report.tally.writes_ok > 10,
        "too little load: {:?}",
        report.tally
    );
}

/// Waits until node `via` reports `sid` a participant of its committed configuration.
async fn wait_participant(c: &ProcCluster, via: u64, sid: u64) {
    let start = Instant::now();
    loop {
        if let Ok(client) = c.client(via, None).await {
            if let Ok(cfg) = client.get_config().await {
                if cfg
                    .members
                    .iter()
                    .any(|m| m.sid == sid && m.state == MemberState::Participant)
                {
                    return;
                }
            }
        }
        assert!(
            start.elapsed() < WAIT,
            "server {sid} not promoted within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Adds `sid` through `via` (the server is started first with `--helper`, as an operator
/// would, and waits until it is added) and waits for its promotion.
async fn grow(c: &mut ProcCluster, via: u64, sid: u64) {
    c.start_joiner(sid, via).unwrap();
    let answer = c.add_follower(via, sid).await.unwrap();
    assert!(answer.version.0 > 0);
    wait_participant(c, via, sid).await;
}

/// Retries a change answered with a retryable status (a leader change, a change in flight).
async fn drop_retrying(c: &ProcCluster, via: &[u64], sid: u64) {
    let start = Instant::now();
    let mut last = String::new();
    while start.elapsed() < WAIT {
        for v in via {
            match c.drop_frontend(*v, sid).await {
                Ok(_) => return,
                Err(e) => last = e.to_string(),
            }
            // An earlier attempt may have committed although its answer was lost.
            if let Ok(client) = c.client(*v, None).await {
                if let Ok(cfg) = client.get_config().await {
                    if cfg.members.iter().all(|m| m.sid != sid) {
                        return;
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("drop of {sid} failed for {WAIT:?}: {last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grow_to_five_lose_two_originals_then_shrink_to_three() {
    let mut c = ProcCluster::start("grow_shrink", ClusterSpec::default())
        .await
        .unwrap();
    let load = Load::start(&c, 2, 100, Duration::from_secs(60));
    let lin = lin_load(&c);
    grow(&mut c, 1, 4).await;
    grow(&mut c, 2, 5).await;
    // Five voters: two of the original three may go, the leader first.
    let leader = c.leader(WAIT).await.unwrap();
    let other = [1, 2, 3].into_iter().find(|s| *s != leader).unwrap();
    c.kill(leader).unwrap();
    c.kill(other).unwrap();
    let killed = Instant::now();
    let survivor = [1, 2, 3]
        .into_iter()
        .find(|s| *s != leader && *s != other)
        .unwrap();
    c.leader_among(&[survivor, 4, 5], WAIT).await.unwrap();
    // Shrink to the three that run: drop the two dead ones.
    drop_retrying(&c, &[4, 5, survivor], leader).await;
    drop_retrying(&c, &[4, 5, survivor], other).await;
    c.forget(leader, Duration::ZERO).await.unwrap();
    c.forget(other, Duration::ZERO).await.unwrap();
    // The three that are left commit a write through each of them.
    for sid in [survivor, 4, 5] {
        let client = c.client(sid, None).await.unwrap();
        let value = format!("via-{sid}");
        client.set_var("after-shrink", &value).await.unwrap();
    }
    let report = load.stop().await;
    let after = report.acked_between(killed, Instant::now());
    check_linearizable(&mut c, lin).await;
    c.finish().await.unwrap();
    println!(
        "MEMBERSHIP scenario=grow_shrink acked={} acked_after_kill={after}",
        report.acked
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_a_dead_server_with_a_new_one_on_an_empty_disk() {
    let mut c = ProcCluster::start("replace", ClusterSpec::default())
        .await
        .unwrap();
    let load = Load::start(&c, 2, 100, Duration::from_secs(60));
    let lin = lin_load(&c);
    let leader = c.leader(WAIT).await.unwrap();
    let dead = [1, 2, 3].into_iter().find(|s| *s != leader).unwrap();
    c.kill(dead).unwrap();
    drop_retrying(&c, &[leader], dead).await;
    c.forget(dead, Duration::ZERO).await.unwrap();
    grow(&mut c, leader, 4).await;
    let report = load.stop().await;
    check_linearizable(&mut c, lin).await;
    c.finish().await.unwrap();
    println!("MEMBERSHIP scenario=replace acked={}", report.acked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_the_leader_under_load() {
    let mut c = ProcCluster::start("drop_leader", ClusterSpec::default())
        .await
        .unwrap();
    let load = Load::start(&c, 2, 100, Duration::from_secs(60));
    let lin = lin_load(&c);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let leader = c.leader(WAIT).await.unwrap();
    let rest: Vec<u64> = [1, 2, 3].into_iter().filter(|s| *s != leader).collect();
    drop_retrying(&c, &[leader], leader).await;
    // The dropped leader exits by itself (status 6), the two others elect and take writes.
    let status = c.forget(leader, WAIT).await.unwrap();
    assert_eq!(status, Some(6), "a dropped server exits with status 6");
    let new = c.leader_among(&rest, WAIT).await.unwrap();
    assert_ne!(new, leader);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let report = load.stop().await;
    check_linearizable(&mut c, lin).await;
    c.finish().await.unwrap();
    println!("MEMBERSHIP scenario=drop_leader acked={}", report.acked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_the_leader_in_the_middle_of_a_change() {
    let mut c = ProcCluster::start("kill_mid_change", ClusterSpec::default())
        .await
        .unwrap();
    let load = Load::start(&c, 2, 100, Duration::from_secs(60));
    let lin = lin_load(&c);
    let leader = c.leader(WAIT).await.unwrap();
    c.start_joiner(4, leader).unwrap();
    // The add and the kill race: the change may commit or not; either way the cluster must
    // agree on one configuration and lose no acknowledged write.
    let add = {
        let value = c.server_value(4).unwrap();
        let client = c.client(leader, None).await.unwrap();
        tokio::spawn(async move {
            client
                .add_frontend(4, fe_meta::state::catalog::FrontendRole::Follower, &value)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(2)).await;
    c.kill(leader).unwrap();
    let _ = add.await;
    c.restart(leader).unwrap();
    let survivors: Vec<u64> = [1, 2, 3].into_iter().collect();
    c.leader_among(&survivors, WAIT).await.unwrap();
    // Whether or not the add survived, an operator retries it until 4 is a member.
    let start = Instant::now();
    loop {
        let via = c.leader(WAIT).await.unwrap();
        match c.add_follower(via, 4).await {
            Ok(_) => break,
            Err(e) if e.to_string().contains("already a member") => break,
            Err(e) => assert!(start.elapsed() < WAIT, "add of 4 never went through: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let via = c.leader(WAIT).await.unwrap();
    wait_participant(&c, via, 4).await;
    let report = load.stop().await;
    check_linearizable(&mut c, lin).await;
    c.finish().await.unwrap();
    println!("MEMBERSHIP scenario=kill_mid_change acked={}", report.acked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restarted_over_a_stale_zoo_cfg_runs_with_the_committed_configuration() {
    let mut c = ProcCluster::start("stale_cfg", ClusterSpec::default())
        .await
        .unwrap();
    let load = Load::start(&c, 2, 100, Duration::from_secs(60));
    let lin = lin_load(&c);
    grow(&mut c, 1, 4).await;
    // Server 1's zoo.cfg still lists only the original three; restart it over that file.
    let leader = c.leader(WAIT).await.unwrap();
    let restarted = if leader == 1 { 2 } else { 1 };
    c.kill(restarted).unwrap();
    c.restart(restarted).unwrap();
    let start = Instant::now();
    loop {
        if let Ok(client) = c.client(restarted, None).await {
            if let Ok(cfg) = client.get_config().await {
                if cfg.members.iter().any(|m| m.sid == 4) {
                    break;
                }
            }
        }
        assert!(start.elapsed() < WAIT, "server {restarted} forgot server 4");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // With 4 voters, the restarted server and server 4 both count: stop another original
    // and the cluster still commits only if the restarted server votes with 4.
    let third = [1, 2, 3]
        .into_iter()
        .find(|s| *s != leader && *s != restarted)
        .unwrap();
    c.kill(third).unwrap();
    let killed = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    c.restart(third).unwrap();
    let report = load.stop().await;
    assert!(report.acked_between(killed, Instant::now()) > 0);
    let log = std::fs::read_to_string(c.node(restarted).unwrap().log_path()).unwrap();
    assert!(
        log.contains("zoo.cfg"),
        "the restarted server names its stale zoo.cfg in its log"
    );
    check_linearizable(&mut c, lin).await;
    c.finish().await.unwrap();
    println!("MEMBERSHIP scenario=stale_cfg acked={}", report.acked);
}
