//! The crate's one error type.
//!
//! INV-1: every variant names the file it is about (and the byte offset when one applies), so an
//! operator can find the bad bytes without a debugger.
//! INV-2: nothing in this crate panics on bad input; every bad file becomes one of these values.

use std::io;
use std::path::PathBuf;

use zab_core::Zxid;

/// Everything that can go wrong in `zab-store`.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An operating-system call on `path` failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done ("open", "fsync", "rename to ...", ...).
        op: String,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A file's bytes do not follow the on-disk format and cannot be explained as a torn write.
    #[error("corrupt {path} at offset {offset}: {reason}")]
    Corrupt {
        /// The bad file.
        path: PathBuf,
        /// Byte offset of the first bad byte or of the record that is bad.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// Log segments do not chain: records between two segments are missing.
    #[error(
        "txn log gap: records after {after} up to {before} are missing: {prev_file} ends at \
         offset {end_offset} with zxid {after}, but {next_file} says it follows {before}"
    )]
    LogGap {
        /// The segment before the gap.
        prev_file: PathBuf,
        /// Where its valid records end.
        end_offset: u64,
        /// The last zxid found before the gap.
        after: Zxid,
        /// The segment after the gap.
        next_file: PathBuf,
        /// The last zxid the later segment says preceded it.
        before: Zxid,
    },
    /// An append whose zxid is not greater than the last zxid in the log.
    #[error("append of zxid {zxid} to {path}: not greater than the last logged zxid {last}")]
    NotIncreasing {
        /// The segment that would have received it.
        path: PathBuf,
        /// The rejected zxid.
        zxid: Zxid,
        /// The last zxid in the log.
        last: Zxid,
    },
    /// A record too large for the on-disk format (31-bit length: the top bit is the kind).
    #[error("record of zxid {zxid} for {path} is {len} bytes, larger than the format allows")]
    RecordTooLarge {
        /// The log directory.
        path: PathBuf,
        /// The txn's zxid.
        zxid: Zxid,
        /// Its payload length.
        len: usize,
    },
    /// A read asked for records the log no longer (or never) held.
    #[error("txn log {path}: zxid {zxid} is not on disk ({reason})")]
    NotOnDisk {
        /// The log directory.
        path: PathBuf,
        /// The zxid asked for.
        zxid: Zxid,
        /// Why (purged, truncated, beyond the end).
        reason: String,
    },
    /// A snapshot that failed verification while being read.
    #[error("bad snapshot {path} at offset {offset}: {reason}")]
    BadSnapshot {
        /// The snapshot file.
        path: PathBuf,
        /// Where the problem was found.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// An epoch file whose content is not an epoch.
    #[error("corrupt epoch file {path}: {reason}")]
    BadEpochFile {
        /// The epoch file.
        path: PathBuf,
        /// What is wrong, with the offending content.
        reason: String,
    },
    /// The log's sync thread has stopped (after an error or because every handle was dropped).
    #[error("txn log writer for {path} has stopped")]
    WriterStopped {
        /// The log directory.
        path: PathBuf,
    },
}

/// The crate's result type.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

impl StoreError {
    /// Wraps an I/O error with the operation and the path it was about.
    pub fn io(op: impl Into<String>, path: impl Into<PathBuf>, source: io::Error) -> StoreError {
        StoreError::Io {
            op: op.into(),
            path: path.into(),
            source,
        }
    }

    /// A corruption at `offset` of `path`.
    pub fn corrupt(path: impl Into<PathBuf>, offset: u64, reason: impl Into<String>) -> StoreError {
        StoreError::Corrupt {
            path: path.into(),
            offset,
            reason: reason.into(),
        }
    }
}

impl From<StoreError> for io::Error {
    /// Lets a [`StoreError`] travel through `io::Read`/`io::Write` (snapshot streams); get it
    /// back with [`StoreError::from_io`].
    fn from(e: StoreError) -> io::Error {
        let kind = match &e {
            StoreError::Io { source, .. } => source.kind(),
            _ => io::ErrorKind::InvalidData,
        };
        io::Error::new(kind, e)
    }
}

impl StoreError {
    /// Unwraps a [`StoreError`] carried inside an `io::Error`, or wraps a plain one with `op`
    /// and `path`.
    pub fn from_io(op: &str, path: impl Into<PathBuf>, e: io::Error) -> StoreError {
        if e.get_ref().is_some_and(|inner| inner.is::<StoreError>()) {
            if let Some(inner) = e.into_inner() {
                if let Ok(store) = inner.downcast::<StoreError>() {
                    return *store;
                }
            }
            return StoreError::io(op, path, io::Error::other("unreadable inner error"));
        }
        StoreError::io(op, path, e)
    }
}
