//! Opening a log directory: list segments, scan each (see `scan`), check that they chain, cut a
//! torn tail, and build the [`LogState`].
//!
//! INV-1: open either returns a state whose records are exactly the valid prefix of the files,
//! or an error naming a file (and offset); it never skips a record and never panics.
//! INV-2: consecutive segments chain: the later one's `prev` equals the last zxid of the earlier
//! one; otherwise records are missing (for example a deleted segment) and open fails naming the
//! missing range. A missing *last* segment cannot be detected (nothing refers to it).
//! INV-3: after a torn tail is cut, the bytes after the cut are zero again and durable, so the
//! next recovery sees a clean end there.
//! INV-4: leftover `log.*.tmp` files (segments whose creation did not finish, spares),
//! `discarded.*` files (segments that left the log but were not yet freed: `discard` INV-1) and
//! an empty last segment are removed; none holds a record of the log.

use std::path::{Path, PathBuf};

use tracing::{info, warn};
use zab_core::Zxid;

use crate::discard;
use crate::error::{Result, StoreError};
use crate::fsutil;
use crate::log_state::{IndexEntry, LogState, SegEntry};
use crate::scan::{self, TornTail};
use crate::segment::{self, Segment};

/// What opening the log found and repaired.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// The torn tail that was cut, if any.
    pub cut: Option<CutTail>,
    /// Files removed because they held no record (temp files, an empty last segment).
    pub removed: Vec<PathBuf>,
    /// Segments in the log after recovery.
    pub segments: usize,
    /// Records in the log after recovery.
    pub records: usize,
}

/// A torn tail that recovery cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CutTail {
    /// The segment.
    pub file: PathBuf,
    /// The offset where the log now ends.
    pub offset: u64,
    /// What was found there.
    pub reason: String,
}

/// Scans `dir` and returns the recovered state (see the module docs).
pub(crate) fn recover(dir: &Path, force_sync: bool) -> Result<(LogState, Recovery)> {
    fsutil::ensure_dir(dir)?;
    let mut report = Recovery::default();
    let bases = list_segments(dir, force_sync, &mut report)?;
    let mut st = LogState::default();
    let n = bases.len();
    for (i, base) in bases.into_iter().enumerate() {
        let path = dir.join(segment::segment_name(base));
        let seg = Segment::open(&path, base)?;
        let is_last = i + 1 == n;
        let after = match st.segs.last() {
            None => {
                st.floor = seg.prev();
                seg.prev()
            }
            Some(prev) => check_chain(&st, prev, &seg)?,
        };
        let scanned = scan::scan(&seg, after, is_last)?;
        if scanned.records.is_empty() && !is_last {
            return Err(StoreError::corrupt(
                &path,
                segment::SEGMENT_HEADER_LEN as u64,
                "segment holds no record but later segments exist",
            ));
        }
        let mut entry = SegEntry {
            seg,
            end: scanned.end,
            released: 0,
        };
        if let Some(t) = &scanned.torn {
            report.cut = Some(cut_tail(&mut entry, t, force_sync)?);
        }
        for r in &scanned.records {
            let e = IndexEntry::new(r.zxid, r.kind, base, r.offset, r.len).ok_or_else(|| {
                StoreError::corrupt(
                    &path,
                    r.offset as u64,
                    "record beyond 4 GiB into its segment",
                )
            })?;
            st.index.push_back(e);
        }
        if scanned.records.is_empty() {
            // Only possible for the last segment: created, but its first batch never landed.
            let p = entry.seg.path().to_path_buf();
            info!(file = %p.display(), "removing txn log segment that holds no record");
            drop(entry);
            fsutil::remove_durably(&p, force_sync)?;
            report.removed.push(p);
        } else {
            st.segs.push(entry);
        }
    }
    st.durable = st.index.len();
    report.segments = st.segs.len();
    report.records = st.index.len();
    Ok((st, report))
}

/// The base zxids of the segments in `dir`, ascending; removes unfinished (`.tmp`) and
/// discarded ones (INV-4).
fn list_segments(dir: &Path, force_sync: bool, report: &mut Recovery) -> Result<Vec<Zxid>> {
    let mut bases = Vec::new();
    for name in fsutil::list_names(dir)? {
        if discard::is_discarded_name(&name) {
            let p = dir.join(&name);
            info!(file = %p.display(), "removing a discarded file");
            fsutil::remove_durably(&p, force_sync)?;
            report.removed.push(p);
        } else if name.starts_with("log.") && fsutil::is_temp_name(&name) {
            let p = dir.join(&name);
            if name.starts_with("log.spare.") {
                info!(file = %p.display(), "removing preallocated spare segment");
            } else {
                warn!(file = %p.display(), "removing unfinished txn log segment");
            }
            fsutil::remove_durably(&p, force_sync)?;
            report.removed.push(p);
        } else if let Some(base) = segment::parse_segment_name(&name) {
            bases.push(base);
        }
    }
    bases.sort();
    Ok(bases)
}

fn check_chain(st: &LogState, prev: &SegEntry, seg: &Segment) -> Result<Zxid> {
    let last = st.index.back().map_or(st.floor, |e| e.zxid);
    if seg.prev() == last {
        return Ok(last);
    }
    if seg.prev() > last {
        return Err(StoreError::LogGap {
            prev_file: prev.seg.path().to_path_buf(),
            end_offset: prev.end as u64,
            after: last,
            next_file: seg.path().to_path_buf(),
            before: seg.prev(),
        });
    }
    Err(StoreError::corrupt(
        seg.path(),
        16,
        format!(
            "segment says it follows zxid {} but {} already holds records up to {last}",
            seg.prev(),
            prev.seg.path().display()
        ),
    ))
}

fn cut_tail(entry: &mut SegEntry, t: &TornTail, force_sync: bool) -> Result<CutTail> {
    let file = entry.seg.path().to_path_buf();
    warn!(
        file = %file.display(),
        offset = t.offset,
        reason = %t.reason,
        "txn log ends in a torn write; cutting it there"
    );
    entry.seg.zero(t.offset, t.dirty_end)?;
    entry.seg.sync_range(t.offset, t.dirty_end, force_sync)?;
    Ok(CutTail {
        file,
        offset: t.offset as u64,
        reason: t.reason.clone(),
    })
}
