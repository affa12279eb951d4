//! Disk damage and extra processes for the multi-process fault tests (`tests/process_damage.rs`),
//! beside the harness of [`crate::proc`]:
//! - [`files`]: find the records of a txn log segment and the newest snapshot, cut a segment's
//!   tail in the middle of a record, flip a byte — on a node that is not running;
//! - [`observer`]: a non-voting `fe-meta server` (`server.N=host:q:e:observer`) started and
//!   killed by the test itself, since the harness's clusters are voters only.
//!
//! INV-1: files are only damaged while their node is down (the caller kills it first); the
//! helpers never touch a file outside the data dir they are given.
//! INV-2: an [`observer::Observer`] is killed (SIGKILL to its own child pid) and reaped when it
//! drops, also when the test panics.

pub mod files;
pub mod observer;

use thiserror::Error;

/// Why a damage helper failed.
#[derive(Debug, Error)]
pub enum DamageError {
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// A file is not what its format says.
    #[error("{0}")]
    Format(String),
    /// Nothing to damage (no segment, no record, no snapshot).
    #[error("nothing to damage: {0}")]
    Missing(String),
}

impl DamageError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> DamageError {
        let what = what.into();
        move |source| DamageError::Io { what, source }
    }
}
