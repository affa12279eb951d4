//! Files damaged on a killed follower: its newest log segment cut mid-record, a byte of its
//! newest snapshot flipped. It recovers from the leader, or refuses to start naming the file.

use std::time::{Duration, Instant};

use tests::damage::files::{self, RecordPos};
use tests::proc::{fill, ClusterSpec, Load, ProcCluster};

use crate::{a_follower, caught_up, leader_applied, ms};

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

/// A byte of a record halfway through a killed follower's log is flipped, so valid records
/// follow it (corruption, not a torn tail): the node refuses to start with exit status 7 (a
/// damaged data dir: a supervisor must not restart it) and a message that names the segment
/// and says to resync; emptied but for myid and started again, it catches up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_record_before_valid_ones_exits_7_and_resyncs() {
    let mut c = ProcCluster::start("log_corrupt", ClusterSpec::default())
        .await
        .unwrap();
    let victim = a_follower(&mut c).await;
    let leader = c.leader(Duration::from_secs(10)).await.unwrap();
    let n = fill(&c, leader, "k", 200, 64, 8, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(n, 200);
    c.kill(victim).unwrap();
    let (segment, recs) = files::newest_segment(&c.node(victim).unwrap().data_dir()).unwrap();
    assert!(recs.len() >= 10, "{} records", recs.len());
    let r = &recs[recs.len() / 2];
    files::flip_byte(&segment, r.offset + r.len - 1, 0xff).unwrap();
    c.restart(victim).unwrap();
    let code = c
        .node_mut(victim)
        .unwrap()
        .wait_exit(Duration::from_secs(20))
        .await
        .unwrap();
    let log = std::fs::read_to_string(c.node(victim).unwrap().log_path()).unwrap();
    let log_since = &log[log.rfind("=== harness: start").unwrap_or(0)..];
    assert_eq!(code, Some(7), "{log_since}");
    let name = segment.file_name().unwrap().to_string_lossy().into_owned();
    assert!(log_since.contains(&name), "{log_since}");
    assert!(log_since.contains("resync this node"), "{log_since}");
    c.wipe(victim).unwrap();
    c.restart(victim).unwrap();
    let (_, target) = leader_applied(&mut c).await;
    caught_up(&c.client_addr(victim), target, Duration::from_secs(30)).await;
    c.finish().await.unwrap();
}
