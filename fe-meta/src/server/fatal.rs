//! A node that cannot go on stops serving at once and ends the process.
//!
//! The ZAB node reports a fatal error (its txn log failed: disk full on a segment's
//! preallocation, an fsync/fdatasync error; an epoch file not written; a SNAP not installed; the
//! state machine failed to apply a txn; the protocol core refused an input) in
//! [`NodeStatus::fatal`](zab_net::NodeStatus) and stops. From then on this node's catalog
//! is frozen while the cluster moves on, so the server must not answer from it:
//!
//! ```text
//!  driver stops ─▶ NodeStatus.fatal = reason ─┬▶ every request: INTERNAL "stopped on a fatal error"
//!                                              ├▶ ruok: no imok; srvr/stat/mntr: "not serving: ..."
//!                                              ├▶ close_on_fatal: closes the listener and
//!                                              │  every connection
//!                                              └▶ `run` logs ONE error line (what failed, the
//!                                                 file, what to do), stops the server and
//!                                                 returns Stopped::Fatal ─▶ exit status 4
//! ```
//!
//! INV-1: once the node's status carries `fatal`, no read, write, STATUS or DIGEST is answered
//! from the catalog (`handle` checks the status before it reads), `ruok` gets no `imok`,
//! and the client listener closes as soon as the watch reports it.
//! INV-2: the error line names the reason as the node reported it (zab-store errors name the
//! file), the data directories, and what the operator does next; it is logged once.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use zab_net::Node;

/// The exit status of `fe-meta server` after a fatal node error (`fe-meta --help`).
pub const FATAL_EXIT_STATUS: u8 = 4;

/// A fatal node error, as told to the operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FatalStop {
    /// What failed, as the node reported it (a zab-store error names its file).
    pub reason: String,
    /// What the operator does next.
    pub advice: String,
}

impl FatalStop {
    /// The stop for `reason`, with advice for a node whose txn log is in `data_log_dir` and
    /// whose snapshots and epoch files are in `data_dir`.
    pub fn new(reason: String, data_dir: &Path, data_log_dir: &Path) -> FatalStop {
        let advice = advice(&reason, data_dir, data_log_dir);
        FatalStop { reason, advice }
    }
}

impl fmt::Display for FatalStop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the node stopped on a fatal error and the process exits with status \
             {FATAL_EXIT_STATUS}: {}; {}",
            self.reason, self.advice
        )
    }
}

/// What a failure of this kind asks of the operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `ENOSPC`: a filesystem is full.
    DiskFull,
    /// `EIO`: the disk reported an I/O error (a failed write or sync).
    IoError,
    /// Another failure of the txn log, the epoch files or a snapshot.
    Storage,
    /// The state machine or the protocol core refused what it was given.
    Logic,
}

fn kind_of(reason: &str) -> Kind {
    if reason.contains("No space left on device") || reason.contains("os error 28") {
        return Kind::DiskFull;
    }
    if reason.contains("Input/output error") || reason.contains("os error 5)") {
        return Kind::IoError;
    }
    let storage = [
        "txn log",
        "cannot persist",
        "epoch file",
        "cannot record the initial sync",
        "SNAP",
        "snapshot",
    ];
    if storage.iter().any(|s| reason.contains(s)) {
        Kind::Storage
    } else {
        Kind::Logic
    }
}

/// The directories `reason` is about: the txn log's, the data dir, or both when it names
/// neither.
fn dirs_named(reason: &str, data_dir: &Path, data_log_dir: &Path) -> Vec<PathBuf> {
    let named = |d: &Path| reason.contains(&*d.to_string_lossy());
    // The log dir first: it is often inside the data dir, whose path is then its prefix.
    if data_log_dir != data_dir && named(data_log_dir) {
        return vec![data_log_dir.to_path_buf()];
    }
    if named(data_dir) || data_log_dir == data_dir {
        return vec![data_dir.to_path_buf()];
    }
    vec![data_dir.to_path_buf(), data_log_dir.to_path_buf()]
}

fn advice(reason: &str, data_dir: &Path, data_log_dir: &Path) -> String {
    let dirs = dirs_named(reason, data_dir, data_log_dir)
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(" and ");
    let rejoin = "start it again: it rejoins the cluster and catches up from the leader";
    match kind_of(reason) {
        Kind::DiskFull => format!("free space on the filesystem of {dirs}, then {rejoin}"),
        Kind::IoError => format!(
            "the disk of {dirs} reported an I/O error, so what this node wrote since its last \
             successful sync may not be on disk (it is never synced again): check the kernel log \
             (dmesg) for that disk; if it is failing, replace it and resync the node from an \
             empty data dir (docs/OPERATIONS.md section 6.1), otherwise {rejoin}"
        ),
        Kind::Storage => format!(
            "check the disk and filesystem of {dirs} (kernel log, permissions, free space), \
             then {rejoin}"
        ),
        Kind::Logic => format!(
            "{rejoin}; if it stops again with the same error, keep its data dir {} and this \
             log for a bug report, and resync the node from an empty data dir",
            data_dir.display()
        ),
    }
}

/// Waits until `node` reports a fatal error and returns it; `None` if the node stopped
/// without one (a requested shutdown).
pub(super) async fn wait_fatal(node: &Node) -> Option<String> {
    let mut role = node.watch_role();
    let seen = role.wait_for(|r| r.fatal.is_some() || r.stopped).await;
    seen.ok().and_then(|r| r.fatal.clone())
}

/// Closes the client listener and every connection (cancels `stop`) as soon as `node`
/// reports a fatal error (INV-1); ends when `stop` is cancelled otherwise.
pub(super) async fn close_on_fatal(node: Arc<Node>, stop: CancellationToken) {
    let fatal = tokio::select! {
        () = stop.cancelled() => return,
        fatal = wait_fatal(&node) => fatal,
    };
    if fatal.is_some() {
        stop.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATA: &str = "/var/lib/fe-meta/data";
    const LOG: &str = "/fast/fe-meta-log";

    fn stop(reason: &str) -> FatalStop {
        FatalStop::new(reason.to_owned(), Path::new(DATA), Path::new(LOG))
    }

    #[test]
    fn disk_full_names_the_log_filesystem_and_says_free_space() {
        let s = stop(
            "txn log failed: preallocate /fast/fe-meta-log/log.0000000100000001.tmp: No space \
             left on device (os error 28)",
        );
        let line = s.to_string();
        assert!(
            line.contains("/fast/fe-meta-log/log.0000000100000001.tmp"),
            "{line}"
        );
        assert!(
            line.contains(&format!("free space on the filesystem of {LOG},")),
            "{line}"
        );
        assert!(!line.contains(DATA), "{line}");
        assert!(line.contains("exits with status 4"), "{line}");
        assert!(
            line.contains("rejoins the cluster and catches up"),
            "{line}"
        );
    }

    #[test]
    fn epoch_file_failure_points_at_the_data_dir() {
        let s = stop(&format!(
            "cannot persist currentEpoch: create {DATA}/currentEpoch.tmp: Permission denied \
             (os error 13)"
        ));
        assert!(
            s.advice
                .starts_with(&format!("check the disk and filesystem of {DATA} (")),
            "{}",
            s.advice
        );
    }

    #[test]
    fn an_io_error_of_a_sync_names_the_disk_and_says_check_or_replace_it() {
        let s = stop(
            "txn log failed: fdatasync (bytes 4096..8192) of /fast/fe-meta-log/log.0000000100000001: \
             Input/output error (os error 5)",
        );
        let line = s.to_string();
        assert!(
            line.contains("fdatasync (bytes 4096..8192) of /fast/fe-meta-log/log.0000000100000001"),
            "{line}"
        );
        assert!(
            s.advice
                .starts_with(&format!("the disk of {LOG} reported an I/O error")),
            "{}",
            s.advice
        );
        assert!(s.advice.contains("dmesg"), "{}", s.advice);
        assert!(
            s.advice.contains("resync the node from an empty data dir"),
            "{}",
            s.advice
        );
        assert!(!s.advice.contains(DATA), "{}", s.advice);
    }

    #[test]
    fn a_failure_naming_no_dir_names_both() {
        let s = stop("txn log did not answer in 60s");
        assert!(
            s.advice.contains(&format!("{DATA} and {LOG}")),
            "{}",
            s.advice
        );
    }

    #[test]
    fn an_apply_error_asks_for_a_restart_and_a_report_if_it_repeats() {
        let s = stop("state machine failed to apply 0x100000007: journal entry does not decode");
        assert!(s.advice.starts_with("start it again"), "{}", s.advice);
        assert!(s.advice.contains("bug report"), "{}", s.advice);
    }

    #[test]
    fn one_dir_for_log_and_data_is_named_once() {
        let s = FatalStop::new(
            "txn log failed: fdatasync (bytes 0..4096) of /d/log.1: Input/output error".into(),
            Path::new("/d"),
            Path::new("/d"),
        );
        assert!(s.advice.contains("the disk of /d reported"), "{}", s.advice);
    }
}
