//! [`TxnLog`]: the writer side of the txn log. Appends are written to the segment files
//! (`segment` INV-3); `sync` makes them durable; `truncate`, `reset` and `purge` remove records durably.
//!
//! Normally a `TxnLog` is moved into the sync thread (`crate::LogWriter`), which calls these
//! methods in command order and syncs once per batch; tests may call them directly.
//!
//! INV-1: appended zxids strictly increase (above the last record, or the floor of an empty
//! log); a smaller or equal one is refused with [`StoreError::NotIncreasing`].
//! INV-2: before a new segment is created, every record of the previous one is durable, so only
//! the last segment can ever hold a torn write.
//! INV-3: truncation keeps the disk a prefix of the old log at every instant: later segments
//! are removed newest first (directory fsynced after each), then the first dropped record's
//! header is zeroed and synced, and only then the rest of the dropped bytes.
//! INV-5 (resident size): once records are durable their pages are released from the process's
//! resident set (`segment` INV-4): a whole segment when a later one exists, else in steps of
//! [`RELEASE_STEP`]; recovery's reads are released when the log is opened, after a sync of the
//! recovered bytes. Released bytes are unchanged and read back on the next access.
//! INV-4: with `force_sync = false` nothing is ever fsynced: **for tests only**.
//! A process crash loses nothing in that mode (the page cache survives), a power loss or
//! kernel crash can lose anything, including records reported persisted.
//! INV-6: records appended together ([`TxnLog::append_all`]) are written with one `pwrite` per
//! run of them in one segment (at most [`WRITE_RUN_MAX`] bytes), and readers see a run's
//! records only once it is written, all at once; a crash may tear a run as it may tear a
//! record (recovery keeps the valid prefix).
//! INV-7: a segment leaving the log (purge, truncate, reset) is durably gone from it when the
//! call returns — renamed to `discarded.<name>.<n>`, directory fsynced — and freed later, a step at
//! a time, by a background thread (`discard`): freeing a segment's blocks stalls the
//! filesystem's syncs, and on the sync thread it stalled every append.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use zab_core::{Txn, Zxid};

use crate::discard::Discarder;
use crate::error::{Result, StoreError};
use crate::log_state::{IndexEntry, SegEntry};
use crate::reader::{LogReader, Shared};
use crate::record::{self, HEADER_LEN, MAX_PAYLOAD_LEN};
use crate::recovery::{self, Recovery};
use crate::segment::{Segment, SEGMENT_HEADER_LEN};
use crate::spare::Spare;

/// Options of a txn log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogOptions {
    /// Size of a new segment file (ZooKeeper's `preAllocSize`); a record larger than this gets
    /// a segment of its own size.
    pub prealloc_bytes: usize,
    /// Make writes durable (`forceSync`). `false` skips every fsync: tests only, see
    /// INV-4.
    pub force_sync: bool,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            prealloc_bytes: 64 << 20,
            force_sync: true,
        }
    }
}

/// The txn log of one peer (see the module docs).
#[derive(Debug)]
pub struct TxnLog {
    shared: Arc<Shared>,
    opts: LogOptions,
    /// Written but not yet synced byte ranges: (segment base, lo, hi).
    dirty: Vec<(Zxid, usize, usize)>,
    /// The next segment, being preallocated in the background.
    spare: Option<Spare>,
    /// The run of records being appended, encoded (INV-6).
    scratch: Vec<u8>,
    /// Their index entries, published once the run is written.
    run: Vec<IndexEntry>,
    /// Runs written since the log was opened (`pwrite` calls of appends).
    runs_written: u64,
    /// Frees the segments that left the log, off this thread (INV-7).
    discarder: Discarder,
}

impl TxnLog {
    /// Opens (creating if needed) the log in `dir`, recovering it (see `recovery`).
    pub fn open(dir: impl AsRef<Path>, opts: LogOptions) -> Result<(TxnLog, Recovery)> {
        let dir = dir.as_ref().to_path_buf();
        let (mut state, report) = recovery::recover(&dir, opts.force_sync)?;
        for s in &state.segs {
            s.seg.sync_range(0, s.end, opts.force_sync)?;
        }
        release_durable(&mut state.segs, true);
        let shared = Arc::new(Shared {
            dir,
            state: RwLock::new(state),
        });
        let log = TxnLog {
            shared,
            opts,
            dirty: Vec::new(),
            spare: None,
            scratch: Vec::new(),
            run: Vec::new(),
            runs_written: 0,
            discarder: Discarder::default(),
        };
        Ok((log, report))
    }

    /// A read handle for other threads.
    pub fn reader(&self) -> LogReader {
        LogReader {
            shared: Arc::clone(&self.shared),
        }
    }

    /// The log directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The options the log was opened with.
    pub fn options(&self) -> &LogOptions {
        &self.opts
    }

    /// The last record's zxid, durable or not.
    pub fn last_zxid(&self) -> Option<Zxid> {
        self.shared.state.read().index.back().map(|e| e.zxid)
    }

    /// How many `pwrite` calls wrote appended records since the log was opened (INV-6).
    pub fn runs_written(&self) -> u64 {
        self.runs_written
    }

    /// Verifies the in-memory invariants (`log_state` INV-1, INV-2, INV-4); O(records).
    pub fn check(&self) -> std::result::Result<(), String> {
        self.shared.state.read().check()
    }

    /// Appends `txn` to the last segment; durable only after the next [`TxnLog::sync`].
    pub fn append(&mut self, txn: &Txn) -> Result<()> {
        self.append_all(std::slice::from_ref(txn))
    }

    /// Appends `txns` in order, as [`TxnLog::append`] would one by one, with one `pwrite` per
    /// run of records that share a segment (at most [`WRITE_RUN_MAX`] bytes each, INV-6);
    /// durable only after the next [`TxnLog::sync`]. When one is refused, the records before
    /// it are appended and the rest are not.
    pub fn append_all(&mut self, txns: &[Txn]) -> Result<()> {
        let mut last = self.shared.state.read().last_or_floor();
        for txn in txns {
            if let Err(e) = self.stage(txn, last) {
                self.write_run()?;
                return Err(e);
            }
            last = txn.zxid;
        }
        self.write_run()
    }

    /// Encodes `txn` (following `last`) at the end of the run, after rolling to a new segment
    /// if it does not fit in the last one.
    fn stage(&mut self, txn: &Txn, last: Zxid) -> Result<()> {
        let len = txn.data.len();
        if len > MAX_PAYLOAD_LEN {
            return Err(StoreError::RecordTooLarge {
                path: self.shared.dir.clone(),
                zxid: txn.zxid,
                len,
            });
        }
        let need = record::encoded_len(len);
        if txn.zxid <= last {
            let st = self.shared.state.read();
            return Err(StoreError::NotIncreasing {
                path: st.current_path(&self.shared.dir),
                zxid: txn.zxid,
                last,
            });
        }
        let entry = match self.place(txn, need)? {
            Some(entry) => entry,
            None => {
                self.write_run()?;
                self.roll(txn.zxid, last, need)?;
                // A new segment holds at least one record of any size.
                self.place(txn, need)?
                    .ok_or_else(|| self.missing_segment())?
            }
        };
        let at = self.scratch.len();
        self.scratch.resize(at + need, 0);
        record::encode_into(&mut self.scratch[at..], txn.zxid, txn.kind, &txn.data);
        self.run.push(entry);
        if self.scratch.len() >= WRITE_RUN_MAX {
            self.write_run()?;
        }
        Ok(())
    }

    /// The index entry of `txn` (`need` bytes encoded) right after the run in the last
    /// segment; `None` when it does not fit there.
    fn place(&self, txn: &Txn, need: usize) -> Result<Option<IndexEntry>> {
        let st = self.shared.state.read();
        let Some(seg) = st.segs.last() else {
            return Ok(None);
        };
        let off = seg.end + self.scratch.len();
        if off + need > seg.seg.size() {
            return Ok(None);
        }
        IndexEntry::new(txn.zxid, txn.kind, seg.seg.base(), off, need)
            .map(Some)
            .ok_or_else(|| {
                StoreError::corrupt(
                    seg.seg.path(),
                    off as u64,
                    "record beyond 4 GiB into its segment: lower the preallocation size",
                )
            })
    }

    /// Writes the records staged at the end of the last segment with one `pwrite`, then
    /// makes them visible to readers (INV-6).
    fn write_run(&mut self) -> Result<()> {
        if self.run.is_empty() {
            return Ok(());
        }
        let (base, off) = {
            // Only this writer changes the segments, so the last one stays the last while the
            // run is written under the read lock (readers go on reading meanwhile).
            let st = self.shared.state.read();
            let seg = st.segs.last().ok_or_else(|| self.missing_segment())?;
            let (base, off) = (seg.seg.base(), seg.end);
            seg.seg.write_at(off, &self.scratch)?;
            (base, off)
        };
        let len = self.scratch.len();
        {
            let mut st = self.shared.state.write();
            let seg = st.segs.last_mut().ok_or_else(|| self.missing_segment())?;
            seg.end += len;
            st.index.extend(self.run.drain(..));
        }
        self.scratch.clear();
        self.runs_written += 1;
        self.mark_dirty(base, off, off + len);
        Ok(())
    }

    /// Makes every appended record durable (one fdatasync per touched segment) and returns the last
    /// zxid, which is now durable.
    pub fn sync(&mut self) -> Result<Option<Zxid>> {
        {
            let st = self.shared.state.read();
            for (base, lo, hi) in self.dirty.drain(..) {
                if let Some(s) = st.seg(base) {
                    s.seg.sync_range(lo, hi, self.opts.force_sync)?;
                }
            }
        }
        let mut st = self.shared.state.write();
        st.durable = st.index.len();
        release_durable(&mut st.segs, false);
        Ok(st.last_durable())
    }

    /// Durably drops every record after `to` (see INV-3); returns the new last zxid.
    pub fn truncate(&mut self, to: Zxid) -> Result<Option<Zxid>> {
        self.sync()?;
        let cut = {
            let mut st = self.shared.state.write();
            let keep = st.index.partition_point(|e| e.zxid <= to);
            let Some(first_dropped) = st.index.get(keep).copied() else {
                return Ok(st.last_durable());
            };
            st.generation += 1;
            st.index.truncate(keep);
            st.durable = keep;
            if keep == 0 {
                st.floor = to.min(first_dropped.zxid);
            }
            (first_dropped.base <= to).then_some((first_dropped.base, first_dropped.offset()))
        };
        self.remove_segments_after(to)?;
        if let Some((base, offset)) = cut {
            self.zero_tail(base, offset)?;
        }
        Ok(self.shared.state.read().last_durable())
    }

    /// Durably removes every record; the log then follows `after` (a snapshot's zxid), so the
    /// next append must be greater.
    pub fn reset(&mut self, after: Zxid) -> Result<()> {
        self.dirty.clear();
        {
            let mut st = self.shared.state.write();
            st.generation += 1;
            st.index.clear();
            st.durable = 0;
            st.floor = after;
        }
        self.remove_segments_after(Zxid::ZERO)?;
        self.shared.state.write().floor = after;
        Ok(())
    }

    /// Durably removes the oldest segments whose records are all `<= upto`, never the last
    /// one; returns the first zxid left on disk.
    pub fn purge(&mut self, upto: Zxid) -> Result<Option<Zxid>> {
        loop {
            let path = {
                let mut st = self.shared.state.write();
                if st.segs.len() < 2 {
                    break;
                }
                let base0 = st.segs[0].seg.base();
                let n = st.index.partition_point(|e| e.base == base0);
                let last0 = match n.checked_sub(1) {
                    Some(i) => st.index[i].zxid,
                    None => base0,
                };
                if last0 > upto || n > st.durable {
                    break;
                }
                let removed = st.segs.remove(0);
                st.index.drain(..n);
                st.durable -= n;
                st.floor = st.segs[0].seg.prev();
                removed.seg.path().to_path_buf()
            };
            self.discarder.discard(&path, self.opts.force_sync)?;
        }
        Ok(self.shared.state.read().index.front().map(|e| e.zxid))
    }

    /// Creates the segment that starts with `zxid` after making the current one durable, from
    /// the spare when one is ready (see `spare`), and starts preparing the next spare.
    fn roll(&mut self, zxid: Zxid, prev: Zxid, need: usize) -> Result<()> {
        self.sync()?;
        let size = self.opts.prealloc_bytes.max(SEGMENT_HEADER_LEN + need);
        let dir = &self.shared.dir;
        let seg = match self.spare.take().and_then(|s| s.take(size)) {
            Some(spare) => Segment::adopt(&spare, dir, zxid, prev)?,
            None => Segment::create(dir, zxid, prev, size, self.opts.force_sync)?,
        };
        if self.opts.force_sync {
            self.spare = Spare::start(dir, self.opts.prealloc_bytes);
        }
        let mut st = self.shared.state.write();
        if st.segs.is_empty() {
            st.floor = prev;
        }
        st.segs.push(SegEntry {
            seg,
            end: SEGMENT_HEADER_LEN,
            released: 0,
        });
        Ok(())
    }

    /// Removes, newest first, every segment whose base is above `to`.
    fn remove_segments_after(&mut self, to: Zxid) -> Result<()> {
        loop {
            let path: PathBuf = {
                let mut st = self.shared.state.write();
                match st.segs.last() {
                    Some(s) if s.seg.base() > to => {}
                    _ => return Ok(()),
                }
                match st.segs.pop() {
                    Some(s) => s.seg.path().to_path_buf(),
                    None => return Ok(()),
                }
            };
            self.discarder.discard(&path, self.opts.force_sync)?;
        }
    }

    /// Zeroes the segment from `offset` (a record header) to its old end: header first.
    fn zero_tail(&mut self, base: Zxid, offset: usize) -> Result<()> {
        let force = self.opts.force_sync;
        let end = {
            let mut st = self.shared.state.write();
            let Some(s) = st.segs.iter_mut().find(|s| s.seg.base() == base) else {
                return Err(self.missing_segment());
            };
            let end = s.end;
            s.seg.zero(offset, offset + HEADER_LEN)?;
            s.end = offset;
            end
        };
        let sync = |lo: usize, hi: usize| -> Result<()> {
            let st = self.shared.state.read();
            match st.seg(base) {
                Some(s) => s.seg.sync_range(lo, hi, force),
                None => Ok(()),
            }
        };
        sync(offset, offset + HEADER_LEN)?;
        if let Some(s) = self
            .shared
            .state
            .write()
            .segs
            .iter_mut()
            .find(|s| s.seg.base() == base)
        {
            s.seg.zero(offset + HEADER_LEN, end)?;
        }
        sync(offset + HEADER_LEN, end)
    }

    fn mark_dirty(&mut self, base: Zxid, lo: usize, hi: usize) {
        match self.dirty.last_mut() {
            Some((b, _, h)) if *b == base && *h == lo => *h = hi,
            _ => self.dirty.push((base, lo, hi)),
        }
    }

    fn missing_segment(&self) -> StoreError {
        StoreError::corrupt(
            self.shared.dir.clone(),
            0,
            "internal: no segment to write to",
        )
    }
}

/// The most bytes of records written with one `pwrite` (INV-6).
pub const WRITE_RUN_MAX: usize = 1 << 20;

/// Bytes of durable records the last segment gathers before they are released (INV-5).
pub const RELEASE_STEP: usize = 4 << 20;

/// Releases the durable bytes of `segs` from the resident set (INV-5): every segment but the
/// last whole (its records are all durable), the last one up to its end once that is
/// [`RELEASE_STEP`] past what was released, or at once with `all` (also dropping the pages
/// recovery read beyond the end). The caller has made every record of `segs` durable.
fn release_durable(segs: &mut [crate::log_state::SegEntry], all: bool) {
    let last = segs.len().saturating_sub(1);
    for (i, s) in segs.iter_mut().enumerate() {
        let hi = if all || i < last { s.seg.size() } else { s.end };
        if hi > s.released && (all || i < last || hi - s.released >= RELEASE_STEP) {
            s.seg.release(s.released.min(s.end) / 4096 * 4096, hi);
            // The last segment grows from its end: later releases start there.
            s.released = if i < last { hi } else { s.end };
        }
    }
}
