//! The peer's view of its own txn log: which zxids it logged, which of them it holds in memory
//! with their data, and how far the disk has confirmed them.
//!
//! INV-1: `index` is strictly ascending and holds every logged zxid above `base` (the snapshot
//! point) with no gap the log does not have; entries at or below `base` may be missing (purged).
//! A log that ends before the snapshot point is refused: the store resets such a log (a crash
//! lost appends a newer local snapshot covers), so entries below `base` never hide a hole.
//! INV-2: `txns` is a suffix of `index` (same zxids, same order), and it holds every zxid above
//! `min(applied, persisted)`: data needed to apply, to DIFF from memory or to re-propose is never
//! dropped; only entries the disk holds and the state machine applied are trimmed, keeping at
//! most `window` of them.
//! INV-3: `persisted` only names a zxid this log holds (or `base`), so a stale `LogPersisted` for
//! a record a truncation removed never counts as durable. A truncation makes every kept record
//! durable (io contract L2): `persisted` is then the last kept zxid.
//! INV-4: `last()` is the last appended zxid (durable or in flight). Appends are never
//! reordered, so a vote or an ACKEPOCH may use it; every ACK waits for `persisted`.
//! INV-5: `sizes` is parallel to `index` (same length): the payload bytes of each logged zxid,
//! so the bytes a DIFF from the log would stream are known without reading the disk.

use std::collections::VecDeque;

use crate::durable::DurableState;
use crate::error::StepError;
use crate::types::{Txn, Zxid};

/// The peer's log view. See the module docs for its invariants.
#[derive(Clone, Debug)]
pub(crate) struct History {
    index: Vec<Zxid>,
    sizes: Vec<u32>,
    base: Zxid,
    txns: VecDeque<Txn>,
    persisted: Zxid,
    /// The newest snapshot on disk this peer knows of: its zxid and size in bytes.
    snapshot: Option<(Zxid, u64)>,
}

fn payload_bytes(txn: &Txn) -> u32 {
    u32::try_from(txn.data.len()).unwrap_or(u32::MAX)
}

impl History {
    /// Builds the view from what the driver loaded, checking INV-1 and INV-2.
    pub(crate) fn from_durable(d: &DurableState) -> Result<History, StepError> {
        let bad = |m: String| Err(StepError::InconsistentDurableState(m));
        if d.log_index.windows(2).any(|w| w[0] >= w[1]) {
            return bad("log index is not strictly ascending".into());
        }
        if d.log_bytes.len() != d.log_index.len() {
            return bad(format!(
                "log index has {} zxids but {} record sizes",
                d.log_index.len(),
                d.log_bytes.len()
            ));
        }
        if d.log_index
            .last()
            .is_some_and(|last| *last < d.snapshot_zxid)
        {
            return bad(format!(
                "the log ends at {} before the snapshot at {}: the store must restart the log \
                 at the snapshot, or records after it would follow a hole",
                d.log_index.last().copied().unwrap_or(Zxid::ZERO),
                d.snapshot_zxid
            ));
        }
        let above: Vec<Zxid> = d
            .log_index
            .iter()
            .copied()
            .filter(|z| *z > d.snapshot_zxid)
            .collect();
        let tail: Vec<Zxid> = d.log_tail.iter().map(|t| t.zxid).collect();
        if above != tail {
            return bad(format!(
                "log tail ({} txns) is not the log index above snapshot {} ({} zxids)",
                tail.len(),
                d.snapshot_zxid,
                above.len()
            ));
        }
        let last = d
            .log_index
            .last()
            .copied()
            .unwrap_or(Zxid::ZERO)
            .max(d.snapshot_zxid);
        Ok(History {
            index: d.log_index.clone(),
            sizes: d.log_bytes.clone(),
            base: d.snapshot_zxid,
            txns: d.log_tail.iter().cloned().collect(),
            persisted: last,
            snapshot: (d.snapshot_bytes > 0).then_some((d.snapshot_zxid, d.snapshot_bytes)),
        })
    }

    /// The last appended zxid (INV-4), or the snapshot point for an empty log.
    pub(crate) fn last(&self) -> Zxid {
        self.index
            .last()
            .copied()
            .unwrap_or(Zxid::ZERO)
            .max(self.base)
    }

    /// The highest zxid known durable.
    pub(crate) fn persisted(&self) -> Zxid {
        self.persisted
    }

    /// True when everything appended is durable.
    pub(crate) fn all_persisted(&self) -> bool {
        self.persisted >= self.last()
    }

    /// The snapshot point.
    pub(crate) fn base(&self) -> Zxid {
        self.base
    }

    /// Every logged zxid, ascending.
    pub(crate) fn index(&self) -> &[Zxid] {
        &self.index
    }

    /// The first zxid held in memory with its data.
    pub(crate) fn memory_first(&self) -> Option<Zxid> {
        self.txns.front().map(|t| t.zxid)
    }

    /// True when `z` is the snapshot point or a logged zxid.
    pub(crate) fn contains(&self, z: Zxid) -> bool {
        z == self.base || self.index.binary_search(&z).is_ok()
    }

    /// Appends a txn after the last one.
    pub(crate) fn append(&mut self, txn: Txn) -> Result<(), StepError> {
        if txn.zxid <= self.last() {
            return Err(StepError::Invariant(format!(
                "append of {} after {}",
                txn.zxid,
                self.last()
            )));
        }
        self.index.push(txn.zxid);
        self.sizes.push(payload_bytes(&txn));
        self.txns.push_back(txn);
        Ok(())
    }

    /// Records that the disk holds everything up to `upto` (ignored when stale, INV-3).
    pub(crate) fn on_persisted(&mut self, upto: Zxid) {
        if upto > self.persisted && upto <= self.last() && self.contains(upto) {
            self.persisted = upto;
        }
    }

    /// Drops every record after `zxid`. The completed `TruncateLog` leaves every kept record
    /// durable (io contract L2), so no later report is needed for them (INV-3).
    pub(crate) fn truncate(&mut self, zxid: Zxid) {
        let keep = self.index.partition_point(|z| *z <= zxid);
        self.index.truncate(keep);
        self.sizes.truncate(keep);
        while self.txns.back().is_some_and(|t| t.zxid > zxid) {
            self.txns.pop_back();
        }
        self.persisted = self.last();
    }

    /// The log was reset to a snapshot at `zxid` (SNAP sync); nothing is durable until the
    /// snapshot is installed.
    pub(crate) fn reset_to_snapshot(&mut self, zxid: Zxid) {
        self.index.clear();
        self.sizes.clear();
        self.txns.clear();
        self.base = zxid;
        self.persisted = Zxid::ZERO;
    }

    /// A snapshot at `zxid` of `bytes` bytes is on disk; the newest one counts.
    pub(crate) fn on_snapshot_saved(&mut self, zxid: Zxid, bytes: u64) {
        if self.snapshot.is_none_or(|(z, _)| zxid >= z) {
            self.snapshot = Some((zxid, bytes));
        }
    }

    /// The size in bytes of the newest snapshot on disk, when known.
    pub(crate) fn snapshot_bytes(&self) -> Option<u64> {
        self.snapshot.map(|(_, b)| b).filter(|b| *b > 0)
    }

    /// The payload size of each logged zxid, parallel to `index()` (INV-5).
    pub(crate) fn sizes(&self) -> &[u32] {
        &self.sizes
    }

    /// The snapshot at `zxid` is durable.
    pub(crate) fn snapshot_installed(&mut self, zxid: Zxid) {
        if zxid == self.base && self.persisted < zxid {
            self.persisted = zxid;
        }
    }

    /// Segments before `first` were purged from disk (the driver purges only what a local
    /// snapshot covers, so the state machine applied it). The last purged zxid becomes the
    /// base: everything logged above it is still in the index (INV-1).
    pub(crate) fn purge(&mut self, first: Zxid) {
        let cut = self.index.partition_point(|z| *z < first);
        if cut == 0 {
            return;
        }
        if let Some(last_purged) = self.index.get(cut - 1).copied() {
            self.base = self.base.max(last_purged);
        }
        self.index.drain(..cut);
        self.sizes.drain(..cut);
        while self.txns.front().is_some_and(|t| t.zxid < first) {
            self.txns.pop_front();
        }
    }

    /// Checks INV-1, INV-2 (suffix part), INV-3 and INV-5 on the current state (the
    /// simulation calls it after every step through `Peer::check_invariants`). `applied` is the
    /// peer's applied point, for INV-2's "every zxid above min(applied, persisted) is held".
    pub(crate) fn check(&self, applied: Zxid) -> Result<(), String> {
        if self.index.windows(2).any(|w| w[0] >= w[1]) {
            return Err("history INV-1: the index is not strictly ascending".into());
        }
        if self.sizes.len() != self.index.len() {
            return Err(format!(
                "history INV-5: {} sizes for {} logged zxids",
                self.sizes.len(),
                self.index.len()
            ));
        }
        let held: Vec<Zxid> = self.txns.iter().map(|t| t.zxid).collect();
        if !self.index.ends_with(&held) {
            return Err("history INV-2: the txns in memory are not a suffix of the index".into());
        }
        let done = applied.min(self.persisted);
        let above = self.index.partition_point(|z| *z <= done);
        if self.index.len() - above > held.len() {
            return Err(format!(
                "history INV-2: a logged zxid above {done} (applied/persisted) is not in memory"
            ));
        }
        if !self.contains(self.persisted) && self.persisted != Zxid::ZERO {
            return Err(format!(
                "history INV-3: persisted {} is not a zxid of this log (base {})",
                self.persisted, self.base
            ));
        }
        if self.persisted > self.last() {
            return Err(format!(
                "history INV-3: persisted {} beyond the last appended {}",
                self.persisted,
                self.last()
            ));
        }
        Ok(())
    }

    /// The txn with zxid `z`, when held in memory.
    pub(crate) fn txn(&self, z: Zxid) -> Option<&Txn> {
        let i = self.txns.binary_search_by(|t| t.zxid.cmp(&z)).ok()?;
        self.txns.get(i)
    }

    /// The txns in `(after, upto]` from memory, or `None` when one of the logged zxids in that
    /// range is not held in memory.
    pub(crate) fn txns_in(&self, after: Zxid, upto: Zxid) -> Option<Vec<Txn>> {
        let lo = self.index.partition_point(|z| *z <= after);
        let hi = self.index.partition_point(|z| *z <= upto);
        let wanted = hi.saturating_sub(lo);
        let from = self.txns.partition_point(|t| t.zxid <= after);
        let to = self.txns.partition_point(|t| t.zxid <= upto).max(from);
        let out: Vec<Txn> = self.txns.range(from..to).cloned().collect();
        (out.len() == wanted).then_some(out)
    }

    /// Trims applied and durable txns beyond the `window` most recent of them (INV-2).
    pub(crate) fn trim(&mut self, applied: Zxid, window: usize) {
        let done = applied.min(self.persisted);
        let n_done = self.txns.partition_point(|t| t.zxid <= done);
        let excess = n_done.saturating_sub(window);
        self.txns.drain(..excess);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Epoch;
    use bytes::Bytes;

    fn z(e: u32, c: u32) -> Zxid {
        Zxid::new(Epoch(e), c)
    }
    fn t(e: u32, c: u32) -> Txn {
        Txn::app(z(e, c), Bytes::from_static(b"x"))
    }

    #[test]
    fn rejects_tail_that_does_not_match_index() {
        let d = DurableState {
            log_index: vec![z(1, 1), z(1, 2)],
            log_bytes: vec![8, 8],
            log_tail: vec![t(1, 2)],
            ..DurableState::default()
        };
        assert!(History::from_durable(&d).is_err());
    }

    #[test]
    fn rejects_a_log_that_ends_before_the_snapshot() {
        let d = DurableState {
            snapshot_zxid: z(1, 8),
            log_index: vec![z(1, 4), z(1, 5)],
            log_bytes: vec![8, 8],
            ..DurableState::default()
        };
        assert!(History::from_durable(&d).is_err());
        let reset = DurableState {
            snapshot_zxid: z(1, 8),
            ..DurableState::default()
        };
        assert_eq!(History::from_durable(&reset).unwrap().last(), z(1, 8));
    }

    #[test]
    fn stale_persisted_report_after_truncate_is_ignored() {
        let mut h = History::from_durable(&DurableState::default()).unwrap();
        h.append(t(1, 1)).unwrap();
        h.append(t(3, 1)).unwrap();
        h.truncate(z(1, 1));
        assert_eq!(
            h.persisted(),
            z(1, 1),
            "a completed truncate leaves the kept log durable"
        );
        h.append(t(2, 1)).unwrap();
        h.on_persisted(z(3, 1));
        assert_eq!(h.persisted(), z(1, 1));
        assert!(!h.all_persisted());
        h.on_persisted(z(2, 1));
        assert_eq!(h.persisted(), z(2, 1));
    }

    #[test]
    fn trim_keeps_unapplied_and_window() {
        let mut h = History::from_durable(&DurableState::default()).unwrap();
        for c in 1..=10 {
            h.append(t(1, c)).unwrap();
        }
        h.on_persisted(z(1, 10));
        h.trim(z(1, 8), 3);
        assert_eq!(h.memory_first(), Some(z(1, 6)));
        assert!(h.txns_in(z(1, 5), z(1, 10)).is_some());
        assert!(h.txns_in(z(1, 4), z(1, 10)).is_none());
        h.purge(z(1, 7));
        assert_eq!((h.base(), h.index().first()), (z(1, 6), Some(&z(1, 7))));
        assert!(h.contains(z(1, 6)) && !h.contains(z(1, 5)));
    }

    /// INV-5: the record sizes follow the index through appends, truncation, purge and a SNAP
    /// reset; the newest snapshot's size wins.
    #[test]
    fn sizes_follow_the_index() {
        let d = DurableState {
            log_index: vec![z(1, 1), z(1, 2)],
            log_bytes: vec![40, 50],
            snapshot_zxid: z(1, 2),
            snapshot_bytes: 700,
            ..DurableState::default()
        };
        let mut h = History::from_durable(&d).unwrap();
        assert_eq!(h.snapshot_bytes(), Some(700));
        let sized = |c: u32, n: usize| Txn::app(z(1, c), Bytes::from(vec![0; n]));
        for (c, n) in [(3, 3), (4, 4), (5, 5)] {
            h.append(sized(c, n)).unwrap();
        }
        assert_eq!(h.sizes(), &[40, 50, 3, 4, 5]);
        h.truncate(z(1, 4));
        assert_eq!(h.sizes(), &[40, 50, 3, 4]);
        h.purge(z(1, 2));
        assert_eq!((h.index().len(), h.sizes()), (3, &[50, 3, 4][..]));
        h.on_snapshot_saved(z(1, 3), 900);
        h.on_snapshot_saved(z(1, 2), 10);
        assert_eq!(h.snapshot_bytes(), Some(900));
        h.reset_to_snapshot(z(2, 9));
        assert!(h.sizes().is_empty() && h.index().is_empty());
        let bad = DurableState {
            log_index: vec![z(1, 1)],
            ..DurableState::default()
        };
        assert!(History::from_durable(&bad).is_err());
    }
}
