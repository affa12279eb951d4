//! A disk that returns I/O errors, and a slow disk, under real `fe-meta server` processes.
//!
//! Every node runs with the `LD_PRELOAD` shim of `tests::proc::DiskFault` (a fault-injecting
//! layer between the server and libc, not the kernel's: see that module for what it cannot
//! model), its dataDir under the shim's prefix and its own control file, so a test picks the
//! faulty node (a follower, or the leader) after the cluster elected one:
//!
//! - `eio`: a sync (fdatasync of the txn log) fails with EIO on a follower, once, or on the
//!   leader, for good; a write(2) fails with EIO on a follower at its next log append (the
//!   txn log's records are written with pwrite64, segments are preallocated with write(2),
//!   and so are epoch files and snapshots). The node must
//!   exit with status 4 and one ERROR line naming the failed call, the file and the advice,
//!   never sync that file again (the shim's RETRY line), and the others go on; after the
//!   fault is cleared the node starts again and the end checks hold (equal digests at the
//!   same journal id, every acknowledged write on every node).
//! - `writeback`: `sync_file_range`, the incremental writeback of a snapshot larger than one
//!   8 MiB window, fails with EIO on a follower: the snapshot is abandoned (no file left for
//!   it, its file never synced again), the node goes on serving and committing, and its next
//!   snapshot once the disk works is valid (`fe-meta verify-image`).
//! - `slow`: every sync of one node takes 300 ms longer; the write rate through each node is
//!   measured without the delay, with a slow follower and with a slow leader, and printed as
//!   `SLOWDISK` lines (run with `-- --nocapture`); the slow node catches up once the delay
//!   is removed.
//!
//! Without a C compiler the tests print a SKIP line and pass. Needs the `fe-meta` binary:
//! `cargo build --release -p fe-meta-cli` (the workspace's `cargo test --release` builds it)
//! or `FE_META_BIN`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod process_disk_faults {
    pub mod eio;
    pub mod slow;
    pub mod writeback;
}

use std::time::Duration;

use tests::proc::{ClusterSpec, DiskFault, ProcCluster, ProcError};

/// The one line a fatal stop logs (fe-meta `server::fatal`).
pub const FATAL_LINE: &str =
    "the node stopped on a fatal error and the process exits with status 4";

/// Bytes per value of the write load.
pub const VALUE_LEN: usize = 200;

/// The shim, and a spec whose three nodes run with it (all faults off), segments of
/// `pre_alloc_kib`; `None` after a SKIP line when no C compiler runs here.
pub fn with_shim(name: &str, pre_alloc_kib: u64) -> Option<(DiskFault, ClusterSpec)> {
    let df = DiskFault::build(name).unwrap()?;
    let mut spec = ClusterSpec {
        pre_alloc_kib,
        extra: vec!["leader_wait_ms=2000".into(), "write_timeout_ms=5000".into()],
        ..ClusterSpec::default()
    };
    df.apply(&mut spec, &[1, 2, 3]);
    Some((df, spec))
}

/// A node other than `leader`.
pub fn a_follower(c: &ProcCluster, leader: u64) -> u64 {
    c.sids().into_iter().find(|s| *s != leader).unwrap()
}

/// Node `sid` exited (`code`, from waiting for its exit) with status 4, a fatal node error;
/// if it did not exit, the cluster's dir is kept and the test fails naming `why`.
pub fn exited_fatally(
    c: &mut ProcCluster,
    sid: u64,
    code: Result<Option<i32>, ProcError>,
    why: &str,
) {
    let code = match code {
        Ok(code) => code,
        Err(e) => {
            c.keep_dir();
            panic!("node {sid} did not exit after {why}: {e}");
        }
    };
    if code != Some(4) {
        c.keep_dir();
        panic!("node {sid} must exit with status 4 (fatal node error) after {why}, got {code:?}");
    }
}

/// What node `sid` logged since its last start.
pub fn last_incarnation(c: &ProcCluster, sid: u64) -> String {
    let log = std::fs::read_to_string(c.node(sid).unwrap().log_path()).unwrap();
    match log.rfind("=== harness: start") {
        Some(at) => log[at..].to_owned(),
        None => log,
    }
}

/// The one fatal line node `sid` logged in its last incarnation (exactly one), which must be
/// the only ERROR line of the incarnation.
pub fn the_fatal_line(c: &ProcCluster, sid: u64) -> String {
    let log = last_incarnation(c, sid);
    let fatal: Vec<&str> = log.lines().filter(|l| l.contains(FATAL_LINE)).collect();
    assert_eq!(fatal.len(), 1, "one fatal line expected, found {fatal:?}");
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("Z ERROR ")).collect();
    assert_eq!(
        errors, fatal,
        "the fatal line must be the only ERROR line of node {sid}"
    );
    fatal[0].to_owned()
}

/// The shim's lines in node `sid`'s last incarnation: it injected at least one error, and no
/// file whose sync failed was synced again (fsyncgate: a retried fsync may "succeed" without
/// the data).
pub fn injected_without_retry(c: &ProcCluster, sid: u64) -> Vec<String> {
    let log = last_incarnation(c, sid);
    let injected = tests::proc::disk_fault::injected(&log);
    assert!(
        !injected.is_empty(),
        "the shim injected nothing into node {sid}"
    );
    let retries = tests::proc::disk_fault::retries(&log);
    assert!(
        retries.is_empty(),
        "node {sid} synced a failed file again: {retries:?}"
    );
    injected.into_iter().map(str::to_owned).collect()
}

/// Milliseconds of `d`, for result lines.
pub fn ms(d: Duration) -> u128 {
    d.as_millis()
}
