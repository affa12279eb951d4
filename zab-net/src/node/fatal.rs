//! Why the driver stops (driver INV-3): one variant per thing that can fail for good — the
//! protocol core, the txn log thread, an epoch file, the state machine, a SNAP being received
//! or installed — each with its source.
//!
//! INV-1: the `Display` of a [`Fatal`] is the whole story (what failed, on which zxid or file,
//! and the source's own message: a zab-store error names its file), because it is what
//! [`super::NodeStatus::fatal`] publishes and the embedder shows the operator (fe-meta sorts
//! the advice it gives by the words of this text: "txn log", "cannot persist", "epoch file",
//! "SNAP", "snapshot", "No space left on device"). The source is also kept as `source()`.

use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;
use tokio::task::JoinError;
use zab_core::{StepError, Zxid};
use zab_store::StoreError;

use super::api::ApplyError;

/// A condition that stops the node (driver INV-3).
#[derive(Debug, Error)]
pub(crate) enum Fatal {
    /// The protocol core refused an input.
    #[error("protocol core: {0}")]
    Core(#[from] StepError),
    /// The log thread reported a failure and stopped (a write or an fsync failed).
    #[error("txn log failed: {0}")]
    LogFailed(#[source] StoreError),
    /// A command could not be handed to the log thread.
    #[error("txn log: {0}")]
    LogCommand(#[source] StoreError),
    /// The log thread did not confirm a synchronous command (truncate, reset) in time.
    #[error("txn log did not answer in {0:?}")]
    LogTimeout(Duration),
    /// The log thread is gone (its event channel closed).
    #[error("txn log thread is gone")]
    LogGone,
    /// The blocking task writing an epoch file or the initial-sync marker died.
    #[error("epoch file writer: {0}")]
    EpochWriter(#[source] JoinError),
    /// An epoch file (acceptedEpoch, currentEpoch) could not be made durable.
    #[error("cannot persist {file}: {source}")]
    EpochFile {
        /// The file's name.
        file: &'static str,
        /// Why.
        #[source]
        source: StoreError,
    },
    /// The `needsInitialSync` marker could not be removed durably.
    #[error("cannot record the initial sync as done: {0}")]
    InitialSyncMarker(#[source] StoreError),
    /// The state machine failed to apply a committed txn.
    #[error("state machine failed to apply {zxid}: {source}")]
    Apply {
        /// The txn.
        zxid: Zxid,
        /// The state machine's error.
        #[source]
        source: ApplyError,
    },
    /// The state machine was not given back by a restore task that died.
    #[error("state machine lost during a restore")]
    StateMachineLost,
    /// The temp file of a SNAP from the leader could not be created.
    #[error("cannot create the SNAP's snapshot file: {0}")]
    SnapCreate(#[source] StoreError),
    /// A chunk of a SNAP from the leader could not be written to its temp file.
    #[error("writing the SNAP's snapshot file: {0}")]
    SnapWrite(#[source] std::io::Error),
    /// A received snapshot file has no configuration (a leader always sends one).
    #[error("the installed SNAP at {0} carries no configuration (a leader always sends one)")]
    InstalledWithoutMembership(Zxid),
    /// A committed configuration txn does not decode.
    #[error("the configuration txn {zxid} does not decode: {reason}")]
    BadMembershipTxn {
        /// The txn.
        zxid: Zxid,
        /// Why.
        reason: String,
    },
    /// The state machine failed to apply a committed configuration.
    #[error("state machine failed to apply the configuration {zxid}: {source}")]
    ApplyMembership {
        /// The txn.
        zxid: Zxid,
        /// The state machine's error.
        #[source]
        source: ApplyError,
    },
    /// The core sent snapshot bytes while no SNAP was being received.
    #[error("snapshot chunk without BeginSnapshot")]
    ChunkWithoutSnap,
    /// The core ended a SNAP that was not being received.
    #[error("EndSnapshot {0} without a SNAP in progress")]
    EndWithoutSnap(Zxid),
    /// The core ended a SNAP at another zxid than the one being received.
    #[error("EndSnapshot {ended} but the SNAP in progress is at {receiving}")]
    EndMismatch {
        /// The zxid the core ended.
        ended: Zxid,
        /// The zxid being received.
        receiving: Zxid,
    },
    /// The blocking task restoring a SNAP died.
    #[error("restoring the SNAP at {zxid}: {source}")]
    RestoreTask {
        /// The SNAP's zxid.
        zxid: Zxid,
        /// Why the task ended.
        #[source]
        source: JoinError,
    },
    /// A received SNAP could not be installed (made durable, reopened, restored, verified).
    #[error(transparent)]
    Install(#[from] InstallError),
}

/// Why a received SNAP was not installed (install INV-1).
#[derive(Debug, Error)]
pub(crate) enum InstallError {
    /// The snapshot file could not be made durable.
    #[error("making the SNAP at {zxid} durable: {source}")]
    Durable {
        /// The SNAP's zxid.
        zxid: Zxid,
        /// Why.
        #[source]
        source: StoreError,
    },
    /// The durable snapshot file could not be opened again to restore from it.
    #[error("reopening {}: {source}", path.display())]
    Reopen {
        /// The snapshot file.
        path: PathBuf,
        /// Why.
        #[source]
        source: StoreError,
    },
    /// The state machine failed to restore from the snapshot.
    #[error("state machine failed to restore the SNAP at {zxid}: {source}")]
    Restore {
        /// The SNAP's zxid.
        zxid: Zxid,
        /// The state machine's error.
        #[source]
        source: ApplyError,
    },
    /// The snapshot file's checksum or length did not verify after the restore read it.
    #[error("verifying {}: {source}", path.display())]
    Verify {
        /// The snapshot file.
        path: PathBuf,
        /// Why.
        #[source]
        source: StoreError,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// INV-1: the published text names what failed and carries the source's message.
    #[test]
    fn the_display_carries_what_failed_and_the_source() {
        let e = Fatal::Apply {
            zxid: Zxid(0x1_0000_0002),
            source: ApplyError::new("asked to fail"),
        };
        let text = e.to_string();
        assert!(text.starts_with("state machine failed to apply"), "{text}");
        assert!(text.contains("asked to fail"), "{text}");
        assert!(std::error::Error::source(&e).is_some());
        let e = Fatal::LogFailed(StoreError::Io {
            op: "fsync".to_string(),
            path: PathBuf::from("/d/log.1"),
            source: std::io::Error::other("No space left on device"),
        });
        let text = e.to_string();
        assert!(text.starts_with("txn log failed: fsync /d/log.1"), "{text}");
        assert!(text.contains("No space left on device"), "{text}");
    }
}
