//! The in-memory view of the txn log shared by its writer and its readers: the mapped segments,
//! an index of every record, and how much of it is durable.
//!
//! INV-1: `index` lists every record of every segment, in file order, with strictly increasing
//! zxids; `segs` are in ascending base order and each index entry's `base` names one of them.
//! INV-2: `durable <= index.len()`; readers ([`crate::LogReader`]) see only `index[..durable]`.
//! INV-3: `generation` changes whenever records are removed from the end (truncate, reset), so a
//! reader iterating across such a change stops with an error instead of mixing two histories.
//! INV-4: `floor` is the zxid the first record follows (the first segment's `prev`, or the
//! truncate/reset point when the log is empty); every record is greater than it.

use std::collections::VecDeque;
use std::path::PathBuf;

use zab_core::{TxnKind, Zxid};

use crate::segment::Segment;

/// A mapped segment and where its written part ends.
#[derive(Debug)]
pub(crate) struct SegEntry {
    /// The file.
    pub seg: Segment,
    /// Offset just after its last record.
    pub end: usize,
    /// The bytes below this were last released from the resident set (`Segment::release`).
    pub released: usize,
}

/// Where one record is (32 bytes: the log keeps one per record in memory).
#[derive(Clone, Copy, Debug)]
pub(crate) struct IndexEntry {
    /// Its zxid.
    pub zxid: Zxid,
    /// The base zxid of its segment.
    pub base: Zxid,
    /// Offset of its header in the segment.
    offset: u32,
    /// Header plus payload length.
    len: u32,
    /// What its payload is (as its record header says).
    pub kind: TxnKind,
}

impl IndexEntry {
    /// The entry of a record at `offset`, `len` bytes long; `None` when either is 4 GiB or
    /// more (a record is at most 2 GiB, a segment larger than 4 GiB is refused).
    pub fn new(zxid: Zxid, kind: TxnKind, base: Zxid, offset: usize, len: usize) -> Option<Self> {
        Some(IndexEntry {
            zxid,
            base,
            offset: u32::try_from(offset).ok()?,
            len: u32::try_from(len).ok()?,
            kind,
        })
    }

    /// Offset of its header in the segment.
    pub fn offset(&self) -> usize {
        self.offset as usize
    }

    /// Header plus payload length.
    pub fn len(&self) -> usize {
        self.len as usize
    }
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct LogState {
    pub segs: Vec<SegEntry>,
    pub index: VecDeque<IndexEntry>,
    pub durable: usize,
    pub floor: Zxid,
    pub generation: u64,
}

impl LogState {
    /// The last record's zxid, or the floor when there is none: appends must exceed it.
    pub fn last_or_floor(&self) -> Zxid {
        self.index.back().map_or(self.floor, |e| e.zxid)
    }

    /// The last durable record's zxid.
    pub fn last_durable(&self) -> Option<Zxid> {
        self.durable.checked_sub(1).map(|i| self.index[i].zxid)
    }

    /// The segment with this base.
    pub fn seg(&self, base: Zxid) -> Option<&SegEntry> {
        let i = self
            .segs
            .binary_search_by_key(&base, |s| s.seg.base())
            .ok()?;
        self.segs.get(i)
    }

    /// The path of the last segment, or the directory when there is none (for error messages).
    pub fn current_path(&self, dir: &std::path::Path) -> PathBuf {
        self.segs
            .last()
            .map_or_else(|| dir.to_path_buf(), |s| s.seg.path().to_path_buf())
    }

    /// Checks INV-1, INV-2 and INV-4 (used by tests; O(n)).
    pub fn check(&self) -> Result<(), String> {
        if self.durable > self.index.len() {
            return Err(format!(
                "durable {} > {} records",
                self.durable,
                self.index.len()
            ));
        }
        let mut last = self.floor;
        for e in &self.index {
            if e.zxid <= last {
                return Err(format!("zxid {} not above {}", e.zxid, last));
            }
            if self.seg(e.base).is_none() {
                return Err(format!("zxid {} in missing segment {}", e.zxid, e.base));
            }
            last = e.zxid;
        }
        if self
            .segs
            .windows(2)
            .any(|w| w[0].seg.base() >= w[1].seg.base())
        {
            return Err("segments out of order".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The log keeps one entry per record in memory: guard its size.
    #[test]
    fn an_index_entry_takes_32_bytes_and_refuses_offsets_past_4_gib() {
        assert!(std::mem::size_of::<IndexEntry>() <= 32);
        let e = IndexEntry::new(Zxid(5), TxnKind::App, Zxid(1), 4096, 100).unwrap();
        assert_eq!((e.offset(), e.len()), (4096, 100));
        assert!(IndexEntry::new(Zxid(5), TxnKind::App, Zxid(1), 1 << 32, 100).is_none());
    }
}
