//! A node whose disk fills up stops, and exits (real `fe-meta server` processes).
//!
//! One node's txn log (`dataLogDir`) sits on a small tmpfs the test mounts, with a filler file
//! that leaves a little more than one log segment (`preAllocSize`) free: node 3 (the first
//! leader of a new cluster: equal zxids, highest sid) in one test, node 1 (a follower) in the
//! other. Under write load the
//! node's log fills its first segment, cannot preallocate the next one (`No space left on
//! device`) and the node must: exit with status 4 within a bound, leaving one ERROR line that
//! names the file and says to free space there; the two other nodes keep serving writes and
//! reads; once the filler is deleted and the node started again it catches up, and the
//! harness's end checks hold (equal digests, every acknowledged write readable on every node,
//! no journal id answered backwards, no panic).
//!
//! Without the right to mount a tmpfs (not root, or a sandbox) the test prints a SKIP line
//! and passes. The mount is undone also when the test fails (`SmallFs` drops after the
//! cluster, whose drop kills the nodes).
//!
//! Needs the `fe-meta` binary: `cargo build --release -p fe-meta` (the workspace's
//! `cargo test --release` builds it) or `FE_META_BIN`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fe_meta::client::{four_letter_word, ClientOptions};
use tests::proc::{fill, ClusterSpec, Load, ProcCluster, SmallFs};

/// `preAllocSize`, KiB: each log segment's size.
const SEGMENT_KIB: u64 = 256;
/// Free space left on the small filesystem: the first segment fits, the next does not.
const FREE_KIB: u64 = SEGMENT_KIB + 48;
/// The small filesystem's size.
const FS_BYTES: u64 = 8 << 20;
/// Bytes per written value: a few hundred writes fill a segment.
const VALUE_LEN: usize = 1000;
/// How long the full node may take to exit once the load started.
const EXIT_WITHIN: Duration = Duration::from_secs(60);
/// The one line a fatal stop logs (fe-meta `server::fatal`).
const FATAL_LINE: &str = "the node stopped on a fatal error and the process exits with status 4";

const READ: ClientOptions = ClientOptions {
    connect_timeout: Duration::from_millis(500),
    request_timeout: Duration::from_secs(5),
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_log_disk_exits_the_node_and_it_catches_up_after_space_is_freed() {
    disk_full("disk_full_leader", 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_log_disk_of_a_follower_exits_it_and_it_catches_up_after_space_is_freed() {
    disk_full("disk_full_follower", 1).await;
}

/// The scenario of the module docs, with node `full`'s log on the small filesystem.
async fn disk_full(name: &str, full: u64) {
    let small = match SmallFs::mount(name, FS_BYTES).unwrap() {
        Ok(fs) => fs,
        Err(why) => {
            println!("SKIP {name}: {why}");
            return;
        }
    };
    let log_dir = small.path().join("log");
    std::fs::create_dir(&log_dir).unwrap();
    small.leave_free(FREE_KIB << 10).unwrap();
    let spec = ClusterSpec {
        pre_alloc_kib: SEGMENT_KIB,
        extra: vec!["leader_wait_ms=2000".into(), "write_timeout_ms=5000".into()],
        node_extra: BTreeMap::from([(full, vec![format!("dataLogDir={}", log_dir.display())])]),
        ..ClusterSpec::default()
    };
    let mut c = ProcCluster::start(name, spec).await.unwrap();
    let leader_before = c.leader(Duration::from_secs(20)).await.unwrap();

    // Fill it: 3 writers, one per node, until node 3 exits.
    let load = Load::start(&c, 3, VALUE_LEN, EXIT_WITHIN);
    let started = Instant::now();
    let code = c.node_mut(full).unwrap().wait_exit(EXIT_WITHIN).await;
    let exited_after = started.elapsed();
    let code = match code {
        Ok(code) => code,
        Err(e) => {
            c.keep_dir();
            panic!("node {full} did not exit with its log disk full: {e}");
        }
    };
    assert_eq!(
        code,
        Some(4),
        "node {full} must exit with status 4 (fatal node error)"
    );

    // One clear line: what failed, which file, what to do.
    let log = std::fs::read_to_string(c.node(full).unwrap().log_path()).unwrap();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(FATAL_LINE)).collect();
    assert_eq!(lines.len(), 1, "one fatal line expected, found {lines:?}");
    let line = lines[0];
    let dir = log_dir.display().to_string();
    assert!(line.contains("ERROR"), "{line}");
    assert!(line.contains("No space left on device"), "{line}");
    assert!(
        line.contains(&format!("{dir}/log.")),
        "names no log file: {line}"
    );
    assert!(
        line.contains(&format!(
            "free space on the filesystem of {dir}, then start it again"
        )),
        "{line}"
    );

    // The two others keep serving writes and reads while node 3 is down.
    let others: Vec<u64> = c.sids().into_iter().filter(|s| *s != full).collect();
    let leader_after = c.leader(Duration::from_secs(30)).await.unwrap();
    assert_ne!(leader_after, full);
    for sid in &others {
        let n = fill(
            &c,
            *sid,
            &format!("while-down-{sid}-"),
            50,
            64,
            8,
            Duration::from_secs(30),
        )
        .await
        .unwrap();
        assert_eq!(n, 50, "node {sid} must keep taking writes");
        let read = c
            .client(*sid, Some(READ))
            .await
            .unwrap()
            .get_var(&format!("while-down-{sid}-49"), true)
            .await
            .unwrap();
        assert!(read.value.is_some(), "node {sid} must read its write back");
    }
    let report = load.stop().await;
    assert!(
        report.acked > 0,
        "the load got nothing acknowledged: {report:?}"
    );

    // Free the space, start node 3 again: it rejoins and catches up with nothing lost.
    let filler = small.filler_len();
    small.free_space().unwrap();
    c.restart(full).unwrap();
    let restarted = Instant::now();
    let addr = c.client_addr(full);
    let mut answered = false;
    while restarted.elapsed() < Duration::from_secs(30) && !answered {
        answered = four_letter_word(&addr, "ruok", Duration::from_secs(1))
            .await
            .is_ok_and(|t| t == "imok");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        answered,
        "node {full} restarted on freed space does not answer ruok"
    );
    let end = c.finish().await.unwrap();
    println!(
        "RECOVERY scenario={name} full_node={full} leader_before={leader_before} leader_after={leader_after} \
         exit_after_load_ms={} load_acked={} load_failed={} filler_bytes={filler} \
         caught_up_ms={} journal_id={:#x} acked_checked={}",
        exited_after.as_millis(),
        report.acked,
        report.failed,
        restarted.elapsed().as_millis(),
        end.journal_id,
        end.acked_writes
    );
}
