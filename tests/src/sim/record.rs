//! What the leader did, recorded for scenario assertions: the sync mode it chose for each
//! learner (observed from its actions, never from its internals) and, optionally, every
//! message sent and every epoch file written, in one order.
//!
//! A sync starts at the leader's first `Diff`/`Trunc`/`Snap` send, `SendLogRange` or
//! `SendSnapshot` to a learner and ends at its `NewLeader` send to that learner:
//! - `Snap` header or `SendSnapshot` ⇒ [`SyncMode::Snap`];
//! - `Trunc` ⇒ [`SyncMode::Trunc`], or [`SyncMode::TruncDiff`] when proposals followed;
//! - `Diff` with a `SendLogRange` ⇒ [`SyncMode::DiffFromLog`];
//! - `Diff` with proposals ⇒ [`SyncMode::Diff`], without ⇒ [`SyncMode::EmptyDiff`].

use std::collections::BTreeMap;

use zab_core::{Epoch, Message, ServerId};

/// The sync modes of the decision table (seed 004 §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SyncMode {
    /// DIFF with nothing to send.
    EmptyDiff,
    /// DIFF from the in-memory committed log.
    Diff,
    /// DIFF reading the on-disk log (`SendLogRange`).
    DiffFromLog,
    /// TRUNC alone.
    Trunc,
    /// TRUNC followed by proposals.
    TruncDiff,
    /// A full snapshot.
    Snap,
}

/// One completed sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncRecord {
    /// The leader.
    pub leader: ServerId,
    /// The learner.
    pub learner: ServerId,
    /// The mode chosen.
    pub mode: SyncMode,
    /// Proposals sent during the sync.
    pub proposals: usize,
    /// The step at which NEWLEADER was sent.
    pub step: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Open {
    diff: bool,
    trunc: bool,
    snap: bool,
    from_log: bool,
    proposals: usize,
}

/// Tracks syncs in progress and completed.
#[derive(Debug, Default)]
pub struct SyncRecorder {
    open: BTreeMap<(ServerId, ServerId), Open>,
    /// Completed syncs, in order.
    pub done: Vec<SyncRecord>,
}

impl SyncRecorder {
    /// `leader` sends `msg` to `learner` at `step`.
    pub fn on_send(&mut self, leader: ServerId, learner: ServerId, msg: &Message, step: u64) {
        let key = (leader, learner);
        match msg {
            Message::Diff { .. } => self.open.entry(key).or_default().diff = true,
            Message::Trunc { .. } => self.open.entry(key).or_default().trunc = true,
            Message::Snap { .. } => self.open.entry(key).or_default().snap = true,
            Message::Proposal(_) => {
                if let Some(o) = self.open.get_mut(&key) {
                    o.proposals += 1;
                }
            }
            Message::NewLeader { .. } => {
                if let Some(o) = self.open.remove(&key) {
                    let mode = if o.snap {
                        SyncMode::Snap
                    } else if o.trunc && o.proposals > 0 {
                        SyncMode::TruncDiff
                    } else if o.trunc {
                        SyncMode::Trunc
                    } else if o.from_log {
                        SyncMode::DiffFromLog
                    } else if o.proposals > 0 {
                        SyncMode::Diff
                    } else {
                        SyncMode::EmptyDiff
                    };
                    self.done.push(SyncRecord {
                        leader,
                        learner,
                        mode,
                        proposals: o.proposals,
                        step,
                    });
                }
            }
            Message::LeaderInfo { .. } => {
                self.open.remove(&key);
            }
            _ => {}
        }
    }

    /// `leader` reads its on-disk log for `learner` (`count` txns).
    pub fn on_log_range(&mut self, leader: ServerId, learner: ServerId) {
        self.open.entry((leader, learner)).or_default().from_log = true;
    }

    /// `leader` streams a snapshot to `learner`.
    pub fn on_snapshot(&mut self, leader: ServerId, learner: ServerId) {
        self.open.entry((leader, learner)).or_default().snap = true;
    }
}

/// One message sent, when events are recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Step number.
    pub step: u64,
    /// Sender.
    pub from: ServerId,
    /// Receiver.
    pub to: ServerId,
    /// The message.
    pub msg: Message,
}

/// One epoch file written, when events are recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochWrite {
    /// Step number.
    pub step: u64,
    /// The node.
    pub node: ServerId,
    /// `acceptedEpoch` (true) or `currentEpoch` (false).
    pub accepted: bool,
    /// The epoch written.
    pub epoch: Epoch,
    /// How many messages had been sent (`Cluster::events`) when the file was written: the write
    /// precedes exactly the events at this index and later.
    pub before_event: usize,
}
