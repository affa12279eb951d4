//! EIO from the disk: a failed sync on a follower (once) and on the leader (for good), a failed
//! write(2) on a follower at its next log append (module docs of the test binary).

use std::time::{Duration, Instant};

use tests::proc::{fill, DiskFault, Load, LoadReport, ProcCluster};

use crate::{a_follower, exited_fatally, injected_without_retry, ms, the_fatal_line, with_shim};

/// How long the faulty node may take to exit once the fault is set.
const EXIT_WITHIN: Duration = Duration::from_secs(30);
/// How long the load runs on after the faulty node exited (the others must commit).
const AFTER_EXIT: Duration = Duration::from_millis(2500);

/// The node's sync of its txn log fails once (the next one would succeed: a node that retried
/// would go on). It must exit anyway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_whose_log_sync_fails_once_exits_and_catches_up_once_the_disk_is_fixed() {
    let name = "eio_sync_follower";
    let Some((df, spec)) = with_shim(name, 4096) else {
        return;
    };
    let mut c = ProcCluster::start(name, spec).await.unwrap();
    let leader = c.leader(Duration::from_secs(20)).await.unwrap();
    let faulty = a_follower(&c, leader);
    let load = Load::start(&c, 3, crate::VALUE_LEN, Duration::from_secs(60));
    tokio::time::sleep(Duration::from_secs(1)).await;

    let (_, exited_after, line) = fail_until_exit(
        &mut c,
        &df,
        faulty,
        "eio-sync-once",
        "an EIO from fdatasync",
    )
    .await;
    names_the_failed_sync(&line, &df.data_dir(faulty).display().to_string());
    let injected = injected_without_retry(&c, faulty);

    let report = others_keep_committing(&mut c, load, faulty, leader).await;
    let (caught_up, end) = heal_and_finish(&mut c, &df, faulty).await;
    println!(
        "RESULT scenario={name} faulty={faulty} leader={leader} exit_after_ms={} injected={} \
         load_acked={} load_failed={} caught_up_ms={} journal_id={:#x} acked_checked={}\n  {line}",
        ms(exited_after),
        injected.len(),
        report.acked,
        report.failed,
        ms(caught_up),
        end.journal_id,
        end.acked_writes
    );
}

/// The leader's syncs fail for good: it exits, a new leader is elected among the two others,
/// started again before the disk is fixed it exits with the same status, and every write a client saw acknowledged (some by the old leader, on its followers'
/// durable acks only) is there after recovery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_log_sync_fails_exits_and_a_new_leader_takes_over() {
    let name = "eio_sync_leader";
    let Some((df, spec)) = with_shim(name, 4096) else {
        return;
    };
    let mut c = ProcCluster::start(name, spec).await.unwrap();
    let leader = c.leader(Duration::from_secs(20)).await.unwrap();
    let load = Load::start(&c, 3, crate::VALUE_LEN, Duration::from_secs(60));
    tokio::time::sleep(Duration::from_secs(1)).await;

    let (set_at, exited_after, line) =
        fail_until_exit(&mut c, &df, leader, "eio-sync", "EIO from every sync").await;
    names_the_failed_sync(&line, &df.data_dir(leader).display().to_string());
    let injected = injected_without_retry(&c, leader);

    let new_leader = c.leader(Duration::from_secs(30)).await.unwrap();
    assert_ne!(new_leader, leader);
    let elected_after = set_at.elapsed();
    let report = others_keep_committing(&mut c, load, leader, new_leader).await;
    // Started again on the disk that still fails, it exits with the same status, at its start
    // or at its first sync (systemd treats both alike).
    c.restart(leader).unwrap();
    let code = c.node_mut(leader).unwrap().wait_exit(EXIT_WITHIN).await;
    exited_fatally(&mut c, leader, code, "a start on a disk that still fails");
    let (caught_up, end) = heal_and_finish(&mut c, &df, leader).await;
    println!(
        "RESULT scenario={name} old_leader={leader} new_leader={new_leader} exit_after_ms={} \
         elected_after_ms={} injected={} load_acked={} load_failed={} caught_up_ms={} \
         journal_id={:#x} acked_checked={}\n  {line}",
        ms(exited_after),
        ms(elected_after),
        injected.len(),
        report.acked,
        report.failed,
        ms(caught_up),
        end.journal_id,
        end.acked_writes
    );
}

/// write(2) fails with EIO on a follower. The txn log's records are written with pwrite64, so
/// the node meets the fault at its next append, or first at the zero-fill of a spare segment
/// (write; small segments: 256 KiB, 1000-byte values). It must exit as for a failed sync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_whose_disk_refuses_writes_exits_at_its_next_log_append() {
    let name = "eio_write_follower";
    let Some((df, spec)) = with_shim(name, 256) else {
        return;
    };
    let mut c = ProcCluster::start(name, spec).await.unwrap();
    let leader = c.leader(Duration::from_secs(20)).await.unwrap();
    let faulty = a_follower(&c, leader);
    let segments_before = c.node(faulty).unwrap().txn_log_files().len();
    let load = Load::start(&c, 3, 1000, Duration::from_secs(60));
    tokio::time::sleep(Duration::from_millis(500)).await;

    let (_, exited_after, line) =
        fail_until_exit(&mut c, &df, faulty, "eio-write", "EIO from write(2)").await;
    let dir = df.data_dir(faulty).display().to_string();
    assert!(line.contains("Input/output error"), "{line}");
    assert!(
        line.contains(&format!("{dir}/")),
        "names no file of {dir}: {line}"
    );
    assert!(line.contains("txn log failed"), "{line}");
    let injected = crate::last_incarnation(&c, faulty);
    let injected = tests::proc::disk_fault::injected(&injected).len();
    assert!(injected > 0, "the shim injected nothing");

    let report = others_keep_committing(&mut c, load, faulty, leader).await;
    let (caught_up, end) = heal_and_finish(&mut c, &df, faulty).await;
    println!(
        "RESULT scenario={name} faulty={faulty} leader={leader} exit_after_ms={} injected={injected} \
         segments_before={segments_before} load_acked={} load_failed={} caught_up_ms={} \
         journal_id={:#x} acked_checked={}\n  {line}",
        ms(exited_after),
        report.acked,
        report.failed,
        ms(caught_up),
        end.journal_id,
        end.acked_writes
    );
}

/// Sets `fault` on node `sid` and waits until it exits with the fatal status (`why` names the
/// fault in the failure message); returns when the fault was set, how long the node took to
/// exit, and its fatal log line.
async fn fail_until_exit(
    c: &mut ProcCluster,
    df: &DiskFault,
    sid: u64,
    fault: &str,
    why: &str,
) -> (Instant, Duration, String) {
    df.set(sid, fault).unwrap();
    let set_at = Instant::now();
    let code = c.node_mut(sid).unwrap().wait_exit(EXIT_WITHIN).await;
    let exited_after = set_at.elapsed();
    exited_fatally(c, sid, code, why);
    (set_at, exited_after, the_fatal_line(c, sid))
}

/// Clears node `sid`'s fault, restarts it and runs the end checks (it must catch up with every
/// acknowledged write); returns how long that took and what the checks found.
async fn heal_and_finish(
    c: &mut ProcCluster,
    df: &DiskFault,
    sid: u64,
) -> (Duration, tests::proc::checks::Converged) {
    df.set(sid, "ok").unwrap();
    c.restart(sid).unwrap();
    let restarted = Instant::now();
    let end = c.finish().await.unwrap();
    (restarted.elapsed(), end)
}

/// The fatal line of a failed sync: the call, the txn log file under `dir`, the OS error, and
/// the advice for an I/O error.
fn names_the_failed_sync(line: &str, dir: &str) {
    assert!(line.contains("txn log failed"), "{line}");
    assert!(
        ["msync", "fsync", "fdatasync"]
            .iter()
            .any(|call| line.contains(call)),
        "names no sync call: {line}"
    );
    assert!(
        line.contains(&format!("{dir}/")),
        "names no file of {dir}: {line}"
    );
    assert!(line.contains("Input/output error"), "{line}");
    assert!(
        line.contains("reported an I/O error"),
        "no advice for an I/O error: {line}"
    );
}

/// With node `down` gone, the load goes on for [`AFTER_EXIT`]: writes through the two others
/// must be acknowledged (by `leader`, the one serving now). Stops the load and returns its
/// report.
async fn others_keep_committing(
    c: &mut ProcCluster,
    load: Load,
    down: u64,
    leader: u64,
) -> LoadReport {
    let from = Instant::now();
    tokio::time::sleep(AFTER_EXIT).await;
    let to = Instant::now();
    let report = load.stop().await;
    let acked = report.acked_between(from, to);
    if acked == 0 {
        c.keep_dir();
        panic!(
            "no write acknowledged in {AFTER_EXIT:?} after node {down} exited (leader {leader}): \
             {} acked and {} failed in all, errors {:?}",
            report.acked, report.failed, report.errors
        );
    }
    report
}

/// The other files write(2) reaches, on a follower: a background snapshot that cannot be
/// written or synced is not fatal (the txn log still holds every txn; the next snapshot is
/// tried later, in a new file), the node goes on serving and no temp file of a failed snapshot
/// stays behind; an epoch file that cannot be written (the next election) is fatal, with the
/// same exit and one line naming the epoch file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_that_cannot_write_a_snapshot_goes_on_but_one_that_cannot_write_an_epoch_file_exits(
) {
    let name = "eio_write_snapshot_epoch";
    let Some((df, mut spec)) = with_shim(name, 4096) else {
        return;
    };
    spec.snap_count = Some(100);
    let mut c = ProcCluster::start(name, spec).await.unwrap();
    let leader = c.leader(Duration::from_secs(20)).await.unwrap();
    let faulty = a_follower(&c, leader);

    let failed_snapshots = failed_snapshots_are_not_fatal(&mut c, &df, leader, faulty).await;

    // Epoch files: the next election writes acceptedEpoch, which fails.
    df.set(faulty, "eio-write match=Epoch").unwrap();
    c.kill(leader).unwrap();
    let killed = Instant::now();
    let code = c.node_mut(faulty).unwrap().wait_exit(EXIT_WITHIN).await;
    let exited_after = killed.elapsed();
    exited_fatally(&mut c, faulty, code, "EIO from write(2) of an epoch file");
    let line = the_fatal_line(&c, faulty);
    let dir = df.data_dir(faulty).display().to_string();
    assert!(line.contains("cannot persist"), "{line}");
    assert!(
        line.contains(&format!("{dir}/acceptedEpoch.tmp"))
            || line.contains(&format!("{dir}/currentEpoch.tmp")),
        "names no epoch file: {line}"
    );
    assert!(line.contains("reported an I/O error"), "{line}");

    c.restart(leader).unwrap();
    let (caught_up, end) = heal_and_finish(&mut c, &df, faulty).await;
    let snapshots_after = c.node(faulty).unwrap().snapshot_files().len();
    println!(
        "RESULT scenario={name} faulty={faulty} old_leader={leader} \
         failed_snapshots={failed_snapshots} epoch_exit_after_kill_ms={} caught_up_ms={} \
         journal_id={:#x} acked_checked={} snapshots_after={snapshots_after}\n  {line}",
        ms(exited_after),
        ms(caught_up),
        end.journal_id,
        end.acked_writes
    );
}

/// Waits (up to 20 s) until node `sid`'s last incarnation logged `text` more than `seen`
/// times; how many times.
async fn wait_for_log(c: &ProcCluster, sid: u64, text: &str, seen: usize) -> usize {
    let start = Instant::now();
    loop {
        let n = crate::last_incarnation(c, sid).matches(text).count();
        if n > seen {
            return n;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "node {sid} never logged {text:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every write, then every sync, of node `faulty`'s snapshot files fails while `leader` takes
/// writes: the node logs each failed background snapshot and goes on serving, and leaves no
/// snapshot file (temp or not) behind, nor syncs a failed one again. Returns how many failed.
async fn failed_snapshots_are_not_fatal(
    c: &mut ProcCluster,
    df: &DiskFault,
    leader: u64,
    faulty: u64,
) -> usize {
    let dir = df.data_dir(faulty);
    let snapshots = |dir: &std::path::Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("snapshot."))
            .collect()
    };
    // A snapshot the node completed before the faults (e.g. at its first sync) may stay.
    let before = snapshots(&dir);
    let mut failed_snapshots = 0;
    for (round, fault) in ["eio-write", "eio-sync"].into_iter().enumerate() {
        df.set(faulty, &format!("{fault} match=/snapshot."))
            .unwrap();
        let prefix = format!("snap-{round}-");
        let n = fill(c, leader, &prefix, 300, 64, 8, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(n, 300);
        failed_snapshots =
            wait_for_log(c, faulty, "background snapshot failed", failed_snapshots).await;
        assert!(
            c.node_mut(faulty).unwrap().is_running(),
            "a failed snapshot ({fault}) stopped node {faulty}"
        );
        let read = c.client(faulty, None).await.unwrap();
        let read = read.get_var(&format!("{prefix}299"), true).await.unwrap();
        assert!(read.value.is_some(), "node {faulty} must still serve reads");
    }
    // A snapshot the last writes started may still be failing: its temp file goes with it.
    let left_behind = || -> Vec<String> {
        snapshots(&dir)
            .into_iter()
            .filter(|n| !before.contains(n))
            .collect()
    };
    let waited = Instant::now();
    let mut left = left_behind();
    while !left.is_empty() && waited.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        left = left_behind();
    }
    assert!(
        left.is_empty(),
        "failed snapshots left {left:?} in {} for 10 s",
        dir.display()
    );
    let retries = tests::proc::disk_fault::retries(&crate::last_incarnation(c, faulty)).len();
    assert_eq!(
        retries, 0,
        "a snapshot file whose sync failed was synced again"
    );
    failed_snapshots
}
