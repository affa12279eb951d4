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
//! Needs the `fe-meta` binary: `cargo build --release -p fe-meta-cli` (the workspace's
//! `cargo test --release` builds it) or `FE_META_BIN`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::time::{Duration, Instant};

use fe_meta::client::{Client, ClientOptions};
use fe_meta::protocol::Mode;
use tests::damage::files::{self, RecordPos};
use tests::damage::observer::Observer;
use tests::proc::{binary, fill, ports, ClusterSpec, Load, ProcCluster};

const PROBE: ClientOptions = ClientOptions {
    connect_timeout: Duration::from_millis(500),
    request_timeout: Duration::from_secs(2),
};

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

/// The leader's applied journal id (waiting for a leader first).
async fn leader_applied(c: &mut ProcCluster) -> (u64, u64) {
    let leader = c.leader(Duration::from_secs(20)).await.unwrap();
    let applied = c.status(leader).await.unwrap().applied_journal_id.0;
    (leader, applied)
}

/// Waits until node `sid` follows (or observes) a leader and has applied at least `target`;
/// returns how long that took.
async fn caught_up(addr: &str, target: u64, within: Duration) -> Duration {
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
async fn a_follower(c: &mut ProcCluster) -> u64 {
    let leader = c.leader(Duration::from_secs(20)).await.unwrap();
    *c.sids().iter().find(|s| **s != leader).unwrap()
}

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
    let mut trigger = "none";
    while started.elapsed() < Duration::from_secs(5) {
        if files::has_snapshot_tmp(&dir) || !files::files_with_prefix(&dir, "snapshot.").is_empty()
        {
            trigger = "snapshot_file";
            break;
        }
        if let Ok((sent, _)) = c.sync_counts(leader).await {
            if sent.snap > sent_before.snap {
                trigger = "leader_sent_snap";
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
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

/// Where to cut a segment whose records are `recs`: the middle of the last record's payload,
/// inside the header of the fifth-last record, and the middle of the record halfway through.
fn cut_points(recs: &[RecordPos]) -> Vec<(&'static str, u64)> {
    let mid_payload = |r: &RecordPos| r.offset + 20 + (r.len - 20) / 2;
    let mut v = Vec::new();
    if let Some(last) = recs.last() {
        v.push((
            "last_record_payload",
            mid_payload(last).min(last.offset + last.len - 1),
        ));
    }
    if recs.len() >= 5 {
        v.push(("fifth_last_record_header", recs[recs.len() - 5].offset + 7));
    }
    if recs.len() >= 2 {
        let r = &recs[recs.len() / 2];
        v.push(("halfway_record", mid_payload(r).min(r.offset + r.len - 1)));
    }
    v
}

/// A killed follower's newest log segment loses its tail from the middle of a record (three
/// cut points, one per kill): it restarts, cutting the torn tail, and gets the lost txns back
/// from the leader; every acknowledged write is still everywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_tail_cut_mid_record_is_recovered_from_the_leader() {
    let mut c = ProcCluster::start("log_tail_cut", ClusterSpec::default())
        .await
        .unwrap();
    let load = Load::start(&c, 3, 64, Duration::from_secs(40));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let victim = a_follower(&mut c).await;
    for round in 0..3 {
        c.kill(victim).unwrap();
        let dir = c.node(victim).unwrap().data_dir();
        let (segment, recs) = files::newest_segment(&dir).unwrap();
        let points = cut_points(&recs);
        let Some(&(kind, at)) = points.get(round % points.len()) else {
            panic!("{} has no records to cut", segment.display())
        };
        let lost_records = recs.iter().filter(|r| r.offset + r.len > at).count();
        let zeroed = files::cut_tail(&segment, &recs, at).unwrap();
        let (_, target) = leader_applied(&mut c).await;
        c.restart(victim).unwrap();
        let took = caught_up(&c.client_addr(victim), target, Duration::from_secs(30)).await;
        println!(
            "RECOVERY scenario=log_tail_cut cut={kind} node={victim} segment={} offset={at} \
             zeroed_bytes={zeroed} records_cut={lost_records} restart_to_caught_up_ms={}",
            segment.file_name().unwrap().to_string_lossy(),
            ms(took)
        );
        assert!(lost_records >= 1);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let report = load.stop().await;
    assert!(report.acked > 50, "load too small: {report:?}");
    c.finish().await.unwrap();
}

/// A byte of a killed follower's newest snapshot is damaged, twice: inverted (the value no
/// longer decodes) and XORed with 1 (still a valid value: only the snapshot's CRC can tell).
/// On restart the node either falls back to an older snapshot plus the log and converges, or
/// refuses to start with an error naming the file (then an operator wipes it and it resyncs).
/// It never serves data that differs: the end checks compare digests and read every
/// acknowledged write back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flipped_byte_in_newest_snapshot_falls_back_or_refuses() {
    let spec = ClusterSpec {
        snap_count: Some(40),
        ..ClusterSpec::default()
    };
    let mut c = ProcCluster::start("snapshot_flip", spec).await.unwrap();
    let leader = c.leader(Duration::from_secs(10)).await.unwrap();
    fill(&c, leader, "snap-", 1000, 128, 32, Duration::from_secs(30))
        .await
        .unwrap();
    let load = Load::start(&c, 2, 64, Duration::from_secs(40));
    let victim = a_follower(&mut c).await;
    for mask in [0xFF_u8, 0x01] {
        flip_newest_snapshot(&mut c, victim, mask).await;
    }
    load.stop().await;
    c.finish().await.unwrap();
}

/// One round of [`flipped_byte_in_newest_snapshot_falls_back_or_refuses`].
async fn flip_newest_snapshot(c: &mut ProcCluster, victim: u64, mask: u8) {
    // Wait for at least two snapshots on the victim, so a fallback is possible.
    let start = Instant::now();
    while c.node(victim).unwrap().snapshot_files().len() < 2
        && start.elapsed() < Duration::from_secs(15)
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    c.kill(victim).unwrap();
    let snaps = c.node(victim).unwrap().snapshot_files();
    assert!(
        snaps.len() >= 2,
        "only {} snapshots on node {victim}",
        snaps.len()
    );
    let newest = snaps.last().unwrap().clone();
    let size = std::fs::metadata(&newest).unwrap().len();
    let at = 32 + (size - 48) / 2;
    files::flip_byte(&newest, at, mask).unwrap();
    let name = newest.file_name().unwrap().to_string_lossy().into_owned();
    let (_, target) = leader_applied(c).await;
    let restarted = Instant::now();
    c.restart(victim).unwrap();
    // Either it catches up, or its process exits.
    let outcome = loop {
        if !c.node_mut(victim).unwrap().is_running() {
            break "refused";
        }
        if let Some(s) = c.status(victim).await {
            if s.leader_sid.is_some() && s.applied_journal_id.0 >= target {
                break "fell_back";
            }
        }
        assert!(
            restarted.elapsed() < Duration::from_secs(30),
            "neither caught up nor exited"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let took = restarted.elapsed();
    let log = std::fs::read_to_string(c.node(victim).unwrap().log_path()).unwrap();
    let log_since = &log[log.rfind("=== harness: start").unwrap_or(0)..];
    if outcome == "refused" {
        assert!(
            log_since.contains(&name),
            "the refusal does not name {name}:\n{log_since}"
        );
        c.wipe(victim).unwrap();
        c.restart(victim).unwrap();
    }
    let (_, target) = leader_applied(c).await;
    let resync = caught_up(&c.client_addr(victim), target, Duration::from_secs(30)).await;
    println!(
        "RECOVERY scenario=snapshot_flip mask={mask:#04x} node={victim} file={name} offset={at} \
         outcome={outcome} log_names_file={} outcome_ms={} caught_up_after_ms={}",
        log_since.contains(&name),
        ms(took),
        ms(resync)
    );
}

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
    let voter = c.node(1).unwrap();
    let mut obs = Observer::create(
        c.dir(),
        &voter.config_path(),
        &binary::fe_meta_bin().unwrap(),
        obs_sid,
        obs_base,
    )
    .unwrap();
    obs.start().unwrap();
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
    assert!(
        down_rate > 0.5 * up_rate,
        "writes slowed while the observer was down: {down_rate:.0}/s vs {up_rate:.0}/s"
    );
    let done = c.finish().await.unwrap();
    // The observer holds the same catalog as the voters.
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
