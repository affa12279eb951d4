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
//! A third test puts a node's whole dataDir on the small filesystem, fills it to the last
//! byte and forces an election: the epoch file write fails, with the same exit and line.
//! A fourth test embeds one server in the test process (`Server::start_with`, as a library
//! user would) to watch the moment itself: once the node reports the error its client port
//! refuses connections and a connection opened earlier gets no read or STATUS answered.
//!
//! Without the right to mount a tmpfs (not root, or a sandbox) the test prints a SKIP line
//! and passes. The mount is undone also when the test fails (`SmallFs` drops after the
//! cluster, whose drop kills the nodes).
//!
//! Needs the `fe-meta` binary: `cargo build --release -p fe-meta-cli` (the workspace's
//! `cargo test --release` builds it) or `FE_META_BIN`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fe_meta::client::{four_letter_word, Client, ClientOptions};
use fe_meta::server::{Server, ServerConfig};
use tests::proc::{fill, ClusterSpec, Load, ProcCluster, ProcError, SmallFs};

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
    ..ClientOptions::DEFAULT
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_log_disk_exits_the_node_and_it_catches_up_after_space_is_freed() {
    disk_full("disk_full_leader", 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_log_disk_of_a_follower_exits_it_and_it_catches_up_after_space_is_freed() {
    disk_full("disk_full_follower", 1).await;
}

/// A small filesystem of `FS_BYTES` (dropped: unmounted); `None`, after a printed SKIP, where
/// the machine does not allow the mount.
fn small_fs(name: &str) -> Option<SmallFs> {
    match SmallFs::mount(name, FS_BYTES).unwrap() {
        Ok(fs) => Some(fs),
        Err(why) => {
            println!("SKIP {name}: {why}");
            None
        }
    }
}

/// A small filesystem (dropped: unmounted) with a `log` folder and `FREE_KIB` left free;
/// `None`, after a printed SKIP, where the machine does not allow the mount.
fn small_log_fs(name: &str) -> Option<(SmallFs, PathBuf)> {
    let small = small_fs(name)?;
    let log_dir = small.path().join("log");
    std::fs::create_dir(&log_dir).unwrap();
    small.leave_free(FREE_KIB << 10).unwrap();
    Some((small, log_dir))
}

/// The scenario of the module docs, with node `full`'s log on the small filesystem.
async fn disk_full(name: &str, full: u64) {
    let Some((small, log_dir)) = small_log_fs(name) else {
        return;
    };
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
    exited_fatally(&mut c, full, code, "its log disk full");
    // One clear line: what failed, which file, what to do.
    log_full_line_is_clear(&c, full, &log_dir);

    // The two others keep serving writes and reads while node 3 is down.
    let others: Vec<u64> = c.sids().into_iter().filter(|s| *s != full).collect();
    let leader_after = c.leader(Duration::from_secs(30)).await.unwrap();
    assert_ne!(leader_after, full);
    keep_taking_writes_and_reads(&c, &others).await;
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
    answers_ruok_within(&c, full, restarted, Duration::from_secs(30)).await;
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

/// An epoch file that cannot be written is fatal too. Node 1's whole dataDir (epoch files,
/// log, snapshots) sits on the small filesystem, which is filled to the last byte once some
/// writes are acknowledged (its current log segment is preallocated, so nothing fails yet);
/// the two other nodes are then killed and started again, and node 1's epoch file write in
/// the new election fails: it exits with status 4 and one line naming the epoch file and its
/// dir. The two others elect and serve; after the filler is deleted and node 1 started again
/// the cluster converges with every acknowledged write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_data_dir_makes_the_next_epoch_file_write_fatal() {
    let (name, full) = ("disk_full_epoch", 1);
    let Some(small) = small_fs(name) else {
        return;
    };
    let data_dir = small.path().join("data");
    let spec = ClusterSpec {
        pre_alloc_kib: SEGMENT_KIB,
        extra: vec!["leader_wait_ms=2000".into(), "write_timeout_ms=5000".into()],
        data_dirs: BTreeMap::from([(full, data_dir.clone())]),
        ..ClusterSpec::default()
    };
    let mut c = ProcCluster::start(name, spec).await.unwrap();
    let leader = c.leader(Duration::from_secs(20)).await.unwrap();
    let n = fill(&c, leader, "before-", 100, 200, 8, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(n, 100);
    small.leave_free(0).unwrap();

    let others: Vec<u64> = c.sids().into_iter().filter(|s| *s != full).collect();
    for sid in &others {
        c.kill(*sid).unwrap();
    }
    let killed = Instant::now();
    for sid in &others {
        c.restart(*sid).unwrap();
    }
    let code = c.node_mut(full).unwrap().wait_exit(EXIT_WITHIN).await;
    let exited_after = killed.elapsed();
    exited_fatally(&mut c, full, code, "its data dir full");
    epoch_full_line_is_clear(&c, full, &data_dir);

    let leader_after = c.leader(Duration::from_secs(30)).await.unwrap();
    let n = fill(
        &c,
        leader_after,
        "while-down-",
        50,
        64,
        8,
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert_eq!(n, 50, "the two others must keep taking writes");

    small.free_space().unwrap();
    c.restart(full).unwrap();
    let restarted = Instant::now();
    let end = c.finish().await.unwrap();
    println!(
        "RECOVERY scenario={name} full_node={full} leader_before={leader} \
         leader_after={leader_after} exit_after_restart_of_others_ms={} caught_up_ms={} \
         journal_id={:#x} acked_checked={}",
        exited_after.as_millis(),
        restarted.elapsed().as_millis(),
        end.journal_id,
        end.acked_writes
    );
}

/// The same stop seen from inside a process that embeds the server (`Server::start_with`): once
/// the node reports the fatal error, the client port closes (new connections are refused) and
/// a connection opened before gets no answer from the catalog, while the `Server` value still
/// exists; `Server::shutdown` then completes. One voter, its log on the small filesystem.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_server_closes_its_client_port_when_its_log_disk_fills() {
    let name = "disk_full_embedded";
    let Some((_small, log_dir)) = small_log_fs(name) else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let cfg_path = write_single_voter_config(root.path(), &log_dir);
    let mut cfg = ServerConfig::load(&cfg_path).unwrap();
    cfg.bootstrap = true;
    let server = Server::start_with(cfg, zab_net::NodeOptions::default())
        .await
        .unwrap();
    let addr = server.client_addr().to_string();

    // A connection opened before the disk fills, and a writer until the node stops.
    let before = Client::connect_with(&addr, READ).await.unwrap();
    let writer = Client::connect_with(&addr, READ).await.unwrap();
    let written = write_until_fatal(&server, &writer).await;
    let fatal = server.node_status().fatal;
    let fatal = fatal.unwrap_or_else(|| panic!("no fatal error after {written} writes"));
    assert!(fatal.contains("No space left on device"), "{fatal}");
    assert!(fatal.contains(&log_dir.display().to_string()), "{fatal}");

    // The port closes at once: new connections are refused.
    let closing = Instant::now();
    while tokio::net::TcpStream::connect(&addr).await.is_ok() {
        assert!(
            closing.elapsed() < Duration::from_secs(2),
            "the client port still accepts connections {:?} after the fatal error",
            closing.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The old connection answers no read (closed, or refused naming the error).
    let read = before.get_var("fill-0", false).await;
    assert!(
        read.is_err(),
        "a plain read was answered after the fatal error: {read:?}"
    );
    let status = before.status().await;
    assert!(
        status.is_err(),
        "STATUS was answered after the fatal error: {status:?}"
    );
    tokio::time::timeout(Duration::from_secs(10), server.shutdown())
        .await
        .expect("shutdown after the fatal error took over 10 s");
    println!(
        "RECOVERY scenario={name} writes_before_fatal={written} port_closed_after_ms={}",
        closing.elapsed().as_millis()
    );
}

/// Node `full` exited (`code`, from waiting for its exit) with status 4, a fatal node error;
/// if it did not exit, the cluster's dir is kept and the test fails naming `why` ("its log
/// disk full").
fn exited_fatally(c: &mut ProcCluster, full: u64, code: Result<Option<i32>, ProcError>, why: &str) {
    let code = match code {
        Ok(code) => code,
        Err(e) => {
            c.keep_dir();
            panic!("node {full} did not exit with {why}: {e}");
        }
    };
    assert_eq!(
        code,
        Some(4),
        "node {full} must exit with status 4 (fatal node error)"
    );
}

/// The one fatal line in node `full`'s log (exactly one).
fn the_fatal_line(c: &ProcCluster, full: u64) -> String {
    let log = std::fs::read_to_string(c.node(full).unwrap().log_path()).unwrap();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(FATAL_LINE)).collect();
    assert_eq!(lines.len(), 1, "one fatal line expected, found {lines:?}");
    lines[0].to_string()
}

/// The fatal line tells the operator to free space on the filesystem of `dir`.
fn says_free_space_in(line: &str, dir: &str) {
    assert!(
        line.contains(&format!(
            "free space on the filesystem of {dir}, then start it again"
        )),
        "{line}"
    );
}

/// Node `full`'s fatal line is an ERROR that says the disk is full, names a log file of
/// `log_dir` and says to free space there.
fn log_full_line_is_clear(c: &ProcCluster, full: u64, log_dir: &Path) {
    let line = the_fatal_line(c, full);
    let dir = log_dir.display().to_string();
    assert!(line.contains("ERROR"), "{line}");
    assert!(line.contains("No space left on device"), "{line}");
    assert!(
        line.contains(&format!("{dir}/log.")),
        "names no log file: {line}"
    );
    says_free_space_in(&line, &dir);
}

/// Node `full`'s fatal line says the disk is full, names an epoch file of `data_dir` and says
/// to free space there.
fn epoch_full_line_is_clear(c: &ProcCluster, full: u64, data_dir: &Path) {
    let line = the_fatal_line(c, full);
    let dir = data_dir.display().to_string();
    assert!(line.contains("No space left on device"), "{line}");
    assert!(
        line.contains(&format!("{dir}/acceptedEpoch"))
            || line.contains(&format!("{dir}/currentEpoch")),
        "names no epoch file: {line}"
    );
    says_free_space_in(&line, &dir);
}

/// Each of `sids` takes 50 writes and reads the last one back (a sync read).
async fn keep_taking_writes_and_reads(c: &ProcCluster, sids: &[u64]) {
    for sid in sids {
        let n = fill(
            c,
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
}

/// Node `full`, restarted at `restarted`, answers `ruok` with `imok` within `within`.
async fn answers_ruok_within(c: &ProcCluster, full: u64, restarted: Instant, within: Duration) {
    let addr = c.client_addr(full);
    let mut answered = false;
    while restarted.elapsed() < within && !answered {
        answered = four_letter_word(&addr, "ruok", Duration::from_secs(1))
            .await
            .is_ok_and(|t| t == "imok");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        answered,
        "node {full} restarted on freed space does not answer ruok"
    );
}

/// The zoo.cfg of the embedded test's single voter, under `root` (with its `data/myid`): its
/// log in `log_dir`, segments of `SEGMENT_KIB`, free ports. Returns the config's path.
fn write_single_voter_config(root: &Path, log_dir: &Path) -> PathBuf {
    let data_dir = root.join("data");
    std::fs::create_dir(&data_dir).unwrap();
    std::fs::write(data_dir.join("myid"), "1\n").unwrap();
    let base = tests::proc::ports::free_block().unwrap();
    let (client_port, quorum, election) = (base, base + 1, base + 2);
    let cfg_path = root.join("zoo.cfg");
    std::fs::write(
        &cfg_path,
        format!(
            "tickTime=100\ninitLimit=20\nsyncLimit=5\nforceSync=yes\npreAllocSize={SEGMENT_KIB}\n\
             dataDir={}\ndataLogDir={}\nclientPort={client_port}\nclusterId=0xd15cf011\n\
             server.1=127.0.0.1:{quorum}:{election};127.0.0.1:{client_port}\n",
            data_dir.display(),
            log_dir.display()
        ),
    )
    .unwrap();
    cfg_path
}

/// Writes `fill-<n>` values of `VALUE_LEN` bytes through `writer` until `server` reports a
/// fatal error or `EXIT_WITHIN` passes; the number of writes acknowledged.
async fn write_until_fatal(server: &Server, writer: &Client) -> u64 {
    let value = tests::proc::load::value_of("fill", VALUE_LEN);
    let start = Instant::now();
    let mut written = 0u64;
    while server.node_status().fatal.is_none() && start.elapsed() < EXIT_WITHIN {
        if writer
            .set_var(&format!("fill-{written}"), &value)
            .await
            .is_ok()
        {
            written += 1;
        }
    }
    written
}
