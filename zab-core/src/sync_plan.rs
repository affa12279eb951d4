//! The leader's sync decision for one learner (seed 004's table, PITFALLS C1, C16–C18), as a
//! pure function of the leader's log view and the learner's last zxid.
//!
//! "Member of the history" means: the leader's snapshot point (`base`) or a zxid in its log
//! index. Zxids are unique across leaders and logs are prefix-closed, so a learner whose last
//! zxid is a member holds exactly the leader's history up to it.
//!
//! INV-1: a DIFF starts only from a zxid that is an exact member of the leader's history (C1).
//! INV-2: a TRUNC targets the largest member ≤ the learner's last zxid, and only when that point
//! is provably in the learner's log: it is `Zxid::ZERO`, or it has the same epoch as the
//! learner's last zxid (a log's entries of one epoch are a prefix of that epoch's proposals);
//! otherwise SNAP (C18).
//! INV-3: a DIFF from the on-disk log names a range of logged zxids that ends right before the
//! in-memory window (so every zxid of the DIFF is in the range or in memory, C16), holds at
//! most `diff_from_log_limit` txns and, when the newest snapshot's size is known and
//! `snapshot_size_factor` is not negative, at most that fraction of the snapshot's bytes
//! (ZooKeeper's `snapshotSizeFactor`); otherwise SNAP. A DIFF from memory is never weighed,
//! and its length is not bounded by the committed-log window: right after a leader's restart
//! it holds every txn above the snapshot. The driver sends every message of a sync with flow
//! control (zab-net `node::out` INV-5), so no length of DIFF overflows a learner's link.

use std::fmt;

use crate::types::Zxid;

/// What the leader knows about its own log when it plans a sync.
#[derive(Clone, Copy, Debug)]
pub struct LeaderLog<'a> {
    /// Every logged zxid, ascending, with no gap above `base`.
    pub index: &'a [Zxid],
    /// The snapshot point: every history zxid above it is in `index`.
    pub base: Zxid,
    /// The first zxid held in memory with its data; every logged zxid from it on is in memory.
    pub memory_first: Option<Zxid>,
    /// The payload bytes of each zxid of `index` (same length).
    pub sizes: &'a [u32],
    /// The largest DIFF the leader streams from its on-disk log, in txns.
    pub diff_from_log_limit: u64,
    /// The size of the newest snapshot on disk, when known.
    pub snapshot_bytes: Option<u64>,
    /// A DIFF from the log may stream at most this fraction of `snapshot_bytes`; negative
    /// disables the rule.
    pub snapshot_size_factor: f64,
}

/// Where the txns of a DIFF come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiffSource {
    /// Every txn to send is in memory.
    Memory,
    /// `(after, upto]` comes from the on-disk log (`Action::SendLogRange`), the rest from
    /// memory.
    Log {
        /// Inclusive end of the on-disk range.
        upto: Zxid,
        /// How many txns the range holds.
        count: u64,
    },
}

/// How the leader brings one learner to its history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPlan {
    /// Send what follows `after` (the learner's last zxid); empty when nothing follows.
    Diff {
        /// The learner's last zxid, a member of the leader's history.
        after: Zxid,
        /// Where the txns come from.
        source: DiffSource,
    },
    /// Truncate the learner's log to `to`, then send what follows it.
    TruncDiff {
        /// The last common zxid.
        to: Zxid,
        /// Where the txns come from.
        source: DiffSource,
    },
    /// Send the leader's snapshot, then what follows it.
    Snap,
}

impl SyncPlan {
    /// The plan's mode, as reported in `Action::SyncChosen`.
    pub fn mode(&self) -> SyncMode {
        match self {
            SyncPlan::Diff { .. } => SyncMode::Diff,
            SyncPlan::TruncDiff { .. } => SyncMode::TruncDiff,
            SyncPlan::Snap => SyncMode::Snap,
        }
    }
}

/// How a learner is brought to the leader's history, as the leader reports it
/// (`Action::SyncChosen`) and the learner reports what it received (`Action::SyncReceived`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SyncMode {
    /// A DIFF header, then the txns the learner lacks (possibly none).
    Diff,
    /// A TRUNC header (the learner cuts its log), then a DIFF.
    TruncDiff,
    /// A SNAP header and the leader's snapshot, then the txns that follow it.
    Snap,
}

impl fmt::Display for SyncMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SyncMode::Diff => "DIFF",
            SyncMode::TruncDiff => "TRUNC+DIFF",
            SyncMode::Snap => "SNAP",
        })
    }
}

impl<'a> LeaderLog<'a> {
    /// True when `z` is the snapshot point or a logged zxid.
    pub fn is_member(&self, z: Zxid) -> bool {
        z == self.base || self.index.binary_search(&z).is_ok()
    }

    /// The largest member of the history that is ≤ `z`.
    pub fn last_member_at_or_below(&self, z: Zxid) -> Option<Zxid> {
        let i = self.index.partition_point(|x| *x <= z);
        let from_index = i.checked_sub(1).and_then(|i| self.index.get(i)).copied();
        let from_base = (self.base <= z).then_some(self.base);
        from_index.max(from_base)
    }

    /// Where a DIFF from the member `after` would take its txns, or `None` when it cannot.
    pub fn diff_source(&self, after: Zxid) -> Option<DiffSource> {
        let lo = self.index.partition_point(|x| *x <= after);
        let Some(first_needed) = self.index.get(lo).copied() else {
            return Some(DiffSource::Memory);
        };
        if self.memory_first.is_some_and(|m| m <= first_needed) {
            return Some(DiffSource::Memory);
        }
        // Everything from `first_needed` up to just before the memory window is on disk.
        let hi = match self.memory_first {
            Some(m) => self.index.partition_point(|x| *x < m),
            None => self.index.len(),
        };
        let upto = *self.index.get(hi.checked_sub(1)?)?;
        let count = (hi - lo) as u64;
        let within_count = count <= self.diff_from_log_limit;
        (within_count && self.log_bytes_fit(lo, hi)).then_some(DiffSource::Log { upto, count })
    }

    /// True when the log records `index[lo..hi]` weigh no more than the snapshot-size rule
    /// allows (always, when the rule is off or the snapshot's size unknown).
    fn log_bytes_fit(&self, lo: usize, hi: usize) -> bool {
        let Some(snapshot) = self.snapshot_bytes else {
            return true;
        };
        if self.snapshot_size_factor < 0.0 {
            return true;
        }
        let bytes: u64 = self
            .sizes
            .get(lo..hi)
            .map_or(0, |s| s.iter().map(|b| u64::from(*b)).sum());
        bytes as f64 <= self.snapshot_size_factor * snapshot as f64
    }
}

/// Decides how to sync a learner whose last logged zxid is `peer_last`.
pub fn plan_sync(log: &LeaderLog<'_>, peer_last: Zxid) -> SyncPlan {
    if log.is_member(peer_last) {
        return match log.diff_source(peer_last) {
            Some(source) => SyncPlan::Diff {
                after: peer_last,
                source,
            },
            None => SyncPlan::Snap,
        };
    }
    let Some(to) = log.last_member_at_or_below(peer_last) else {
        return SyncPlan::Snap;
    };
    if to != Zxid::ZERO && to.epoch() != peer_last.epoch() {
        return SyncPlan::Snap;
    }
    match log.diff_source(to) {
        Some(source) => SyncPlan::TruncDiff { to, source },
        None => SyncPlan::Snap,
    }
}

#[cfg(test)]
mod tests;
