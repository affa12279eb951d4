//! What a peer knows about its own disk when it starts.

use crate::types::{Epoch, Txn, Zxid};

/// The durable state a driver loaded before starting a peer. The state machine already holds
/// the snapshot at `snapshot_zxid`; nothing after it has been applied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DurableState {
    /// Content of the acceptedEpoch file (0 when absent).
    pub accepted_epoch: Epoch,
    /// Content of the currentEpoch file (0 when absent).
    pub current_epoch: Epoch,
    /// The zxid of the loaded snapshot (`Zxid::ZERO` for the empty initial state).
    pub snapshot_zxid: Zxid,
    /// The zxid of every record in the on-disk log, ascending. May start before
    /// `snapshot_zxid` (segments kept for DIFF) but never has a gap the log does not have.
    pub log_index: Vec<Zxid>,
    /// The records after `snapshot_zxid`, with their data, ascending: logged, not yet applied,
    /// not known to be committed.
    pub log_tail: Vec<Txn>,
}
