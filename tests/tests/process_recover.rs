//! Recovery from a lost majority with the `fe-meta recover` binary on real processes: a 3-node
//! cluster loses two nodes for good (one of them the leader); `recover` run for the newest
//! survivor makes it a one-member cluster with all acknowledged writes, and two members are
//! then added back from wiped data dirs (`add-follower` + `--helper`) until three agree on one
//! digest. Run for a survivor that is behind, `recover` refuses, naming the one ahead, and
//! `--force-lose-data` makes it go on (losing what only the other held).
//!
//! Needs the `fe-meta` binary: `cargo build --release -p fe-meta-cli` or `FE_META_BIN`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::process::Output;
use std::time::{Duration, Instant};

use fe_meta::protocol::MemberState;
use tests::proc::{binary, ClusterSpec, ProcCluster};

/// How long an election, a promotion or a command may take here.
const WAIT: Duration = Duration::from_secs(20);

/// `n` SET_VARs `{prefix}-{i}` through node `via`, each recorded in the ledger once acked;
/// returns the last one's journal id.
async fn write(c: &ProcCluster, via: u64, prefix: &str, n: usize) -> u64 {
    let client = c.client(via, None).await.unwrap();
    let mut last = 0;
    for i in 0..n {
        let (name, value) = (format!("{prefix}-{i}"), format!("v-{prefix}-{i}"));
        let w = client.set_var(&name, &value).await.unwrap();
        c.ledger().record(&name, &value, w.journal_id.0);
        last = w.journal_id.0;
    }
    last
}

/// Waits until node `sid` applied journal id `jid` (an acked write is on a quorum, not yet
/// on every follower).
async fn wait_applied(c: &ProcCluster, sid: u64, jid: u64) {
    let start = Instant::now();
    loop {
        let st = c.status(sid).await;
        if st.is_some_and(|st| st.applied_journal_id.0 >= jid) {
            return;
        }
        assert!(start.elapsed() < WAIT, "node {sid} did not apply {jid:#x}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until node `sid` answers STATUS (it runs, with or without a quorum).
async fn wait_answers(c: &ProcCluster, sid: u64) {
    let start = Instant::now();
    while c.status(sid).await.is_none() {
        assert!(start.elapsed() < WAIT, "node {sid} does not answer");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs `fe-meta recover` with node `sid`'s zoo.cfg, naming the client ports of `survivors`.
async fn recover(c: &ProcCluster, sid: u64, survivors: &[u64], extra: &[&str]) -> Output {
    let cfg = c.node(sid).unwrap().config_path();
    let list: Vec<String> = survivors.iter().map(|s| c.client_addr(*s)).collect();
    let mut args: Vec<String> = vec![
        "recover".into(),
        "--config".into(),
        cfg.display().to_string(),
        "--survivors".into(),
        list.join(","),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let bin = binary::fe_meta_bin().unwrap();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(bin)
            .args(&args)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    println!(
        "=== recover on server {sid} {extra:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Waits until node `via` reports `sid` a participant of its committed configuration.
async fn wait_participant(c: &ProcCluster, via: u64, sid: u64) {
    let start = Instant::now();
    loop {
        if let Ok(client) = c.client(via, None).await {
            if let Ok(cfg) = client.get_config().await {
                let m = cfg.members.iter().find(|m| m.sid == sid);
                if m.is_some_and(|m| m.state == MemberState::Participant) {
                    return;
                }
            }
        }
        assert!(start.elapsed() < WAIT, "server {sid} not promoted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A 3-node cluster whose follower `behind` misses the writes `after-*` that the leader and
/// `newest` acked; then the leader and `newest` are killed: (cluster, leader, behind, newest).
async fn lose_the_majority(name: &str, spec: ClusterSpec) -> (ProcCluster, u64, u64, u64) {
    let mut c = ProcCluster::start(name, spec).await.unwrap();
    let leader = c.leader(WAIT).await.unwrap();
    let f: Vec<u64> = [1, 2, 3].into_iter().filter(|s| *s != leader).collect();
    let (behind, newest) = (f[0], f[1]);
    let jid = write(&c, leader, "before", 5).await;
    wait_applied(&c, behind, jid).await;
    c.kill(behind).unwrap();
    let jid = write(&c, leader, "after", 5).await;
    wait_applied(&c, newest, jid).await;
    c.kill(leader).unwrap();
    c.kill(newest).unwrap();
    (c, leader, behind, newest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_the_newest_survivor_then_add_two_members_back() {
    let started = Instant::now();
    // Snapshots every few txns: the recovered node's committed configuration comes from one,
    // and the members added back take a SNAP.
    let spec = ClusterSpec {
        snap_count: Some(4),
        ..ClusterSpec::default()
    };
    let (mut c, lost, behind, newest) = lose_the_majority("recover_newest", spec).await;
    // The other survivor runs (without a quorum) and answers RECOVERY_INFO; the local one
    // is stopped and read from its data dir.
    c.restart(behind).unwrap();
    wait_answers(&c, behind).await;
    let plan = recover(&c, newest, &[behind, newest], &["--plan"]).await;
    assert!(plan.status.success());
    let out = recover(&c, newest, &[behind, newest], &[]).await;
    assert!(out.status.success(), "recover failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("LAST_ZXID") && stdout.contains("recover-"));
    assert!(stdout.contains(&format!("add-follower \"server.{lost}=")));
    // The others may not run with their old data: stop, wipe; start the recovered node.
    c.kill(behind).unwrap();
    c.wipe(behind).unwrap();
    c.wipe(lost).unwrap();
    c.restart(newest).unwrap();
    c.leader_among(&[newest], WAIT).await.unwrap();
    write(&c, newest, "alone", 3).await;
    // Two members added back, one at a time, from empty data dirs.
    for sid in [behind, lost] {
        c.forget(sid, Duration::ZERO).await.unwrap();
        c.start_joiner(sid, newest).unwrap();
        c.add_follower(newest, sid).await.unwrap();
        wait_participant(&c, newest, sid).await;
    }
    write(&c, newest, "three", 3).await;
    let done = c.finish().await.unwrap();
    assert_eq!(done.acked_writes, 16);
    println!(
        "RECOVER scenario=newest acked={} took_ms={}",
        done.acked_writes,
        started.elapsed().as_millis()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_refuses_a_survivor_that_is_behind_unless_forced() {
    let (mut c, _lost, behind, newest) =
        lose_the_majority("recover_behind", ClusterSpec::default()).await;
    c.restart(newest).unwrap();
    wait_answers(&c, newest).await;
    // Run for the survivor that runs: refused, nothing written.
    let running = recover(&c, newest, &[newest, behind], &[]).await;
    assert_eq!(running.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&running.stderr).contains("is running"));
    let out = recover(&c, behind, &[newest, behind], &[]).await;
    assert_eq!(out.status.code(), Some(1), "refused with status 1");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("(server {newest}) is ")) && stderr.contains("txns ahead"),
        "the refusal names the survivor ahead and by how much: {stderr}"
    );
    assert!(stderr.contains("--force-lose-data"));
    let forced = recover(&c, behind, &[newest, behind], &["--force-lose-data"]).await;
    assert!(forced.status.success(), "forced recovery failed");
    assert!(String::from_utf8_lossy(&forced.stdout).contains("DATA WILL BE LOST"));
    c.kill(newest).unwrap();
    c.restart(behind).unwrap();
    c.leader_among(&[behind], WAIT).await.unwrap();
    let client = c.client(behind, None).await.unwrap();
    client.set_var("forced", "yes").await.unwrap();
    assert_eq!(
        client.get_var("before-4", false).await.unwrap().value,
        Some("v-before-4".to_string())
    );
    assert_eq!(client.get_var("after-0", false).await.unwrap().value, None);
}
