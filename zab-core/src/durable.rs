//! What a peer knows about its own disk when it starts.
//!
//! INV-1 (PITFALLS B9): a peer whose `needs_initial_sync` is set never votes and is never
//! counted in a quorum; it only learns from a leader (as a non-voting learner). The flag is
//! cleared only through `Action::PersistInitialized`, emitted once a sync from a leader is
//! complete and durable, so a data dir emptied by an operator cannot vote with a history that
//! lost txns its earlier acks helped commit.

use crate::membership::Membership;
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
    /// The payload size in bytes of each record of `log_index` (same length, same order): what
    /// a DIFF from the log would send, for the snapshot-size rule of the leader's sync plan.
    pub log_bytes: Vec<u32>,
    /// The size in bytes of the newest snapshot on disk (0 when there is none): what a SNAP
    /// would roughly send.
    pub snapshot_bytes: u64,
    /// The records after `snapshot_zxid`, with their data, ascending: logged, not yet applied,
    /// not known to be committed.
    pub log_tail: Vec<Txn>,
    /// The data dir was emptied (or never held this cluster's data) and the node was not told
    /// to bootstrap a new cluster: it must sync from a leader before it may vote (INV-1).
    /// `false` for an initialized node, including a brand-new cluster member at zxid 0.
    pub needs_initial_sync: bool,
    /// The committed configuration the loaded snapshot carries (`None` when no snapshot
    /// carries one: the configuration is the bootstrap one of `Config`).
    pub membership: Option<Membership>,
}
