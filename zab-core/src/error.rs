//! The one error type of the core: fatal local conditions.
//!
//! A peer's bad or out-of-phase message is never an error: it is logged and dropped (or makes
//! this peer leave its role). `StepError` means the local state cannot be trusted any more and
//! the driver must stop the peer.
//!
//! INV-1: every `StepError` names the values that broke the invariant.

use crate::types::{ServerId, Zxid};

/// A fatal local condition; the driver must stop the peer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    /// The durable state handed to `Peer::new` contradicts itself.
    #[error("inconsistent durable state: {0}")]
    InconsistentDurableState(String),
    /// The configuration does not list this server.
    #[error("server {0} is not a member of its own configuration")]
    NotAMember(ServerId),
    /// This server applied a configuration without itself: it was removed from the cluster.
    #[error("server {sid} was removed from the cluster by configuration version {version}")]
    Removed {
        /// This server.
        sid: ServerId,
        /// The configuration that removed it.
        version: Zxid,
    },
    /// A configuration txn does not decode.
    #[error("bad configuration txn: {0}")]
    BadMembership(String),
    /// A leader asked this learner to drop a txn it already committed.
    #[error("asked to truncate the log to {target}, below the last committed zxid {committed}")]
    TruncateBelowCommitted {
        /// The requested truncation point.
        target: Zxid,
        /// This peer's last committed zxid.
        committed: Zxid,
    },
    /// No epoch is left after `u32::MAX`.
    #[error("the epoch space is exhausted")]
    EpochSpaceExhausted,
    /// A local invariant broke (a bug in the core or its driver).
    #[error("local invariant broken: {0}")]
    Invariant(String),
}
