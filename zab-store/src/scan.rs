//! Recovery scan of one segment: validate every record, find where the log ends, and decide
//! whether a bad record is a torn tail (cut it) or corruption (refuse to start).
//!
//! Rules, applied at the first position `X` of a segment that does not hold a valid record:
//! - a zero header with only zeros after it, or too few bytes left for a header: clean end;
//! - in any segment but the last: an error naming the file and `X` (earlier segments were
//!   fsynced before the next one was created, so they cannot hold a torn write);
//! - in the last segment, a zero header with non-zero bytes after it: torn tail (a header is
//!   never zeroed by a bit flip), cut at `X`;
//! - in the last segment, a bad header or payload: if no valid record with a greater zxid
//!   follows, torn tail, cut at `X`; if one follows at `Y` and `[X, Y)` contains an unwritten
//!   page (a 4 KiB page whose part in that range is 32 or more zero bytes: free space is
//!   zero-filled, so a page the disk never received reads as zeros), torn tail as well (pages of
//!   an unsynced batch reached the disk out of order); otherwise corruption: an error naming the
//!   file and `X`.
//!
//! INV-1: the scan never skips a record: records are accepted in file order and the first
//! non-record ends the scan.
//! INV-2: accepted zxids are strictly increasing and the first one equals the segment's base.

use std::path::Path;

use zab_core::{TxnKind, Zxid};

use crate::error::{Result, StoreError};
use crate::record::{self, Decoded, HEADER_LEN};
use crate::segment::{Segment, SEGMENT_HEADER_LEN};

const PAGE: usize = 4096;
const UNWRITTEN_MIN: usize = 32;

/// A torn tail found in the last segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// Where the valid records end (the cut).
    pub offset: usize,
    /// One past the last non-zero byte after the cut; `[offset, dirty_end)` must be zeroed.
    pub dirty_end: usize,
    /// What was found at `offset`.
    pub reason: String,
}

/// One valid record found by the scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScannedRecord {
    /// Its zxid.
    pub zxid: Zxid,
    /// What its payload is.
    pub kind: TxnKind,
    /// Offset of its header in the segment.
    pub offset: usize,
    /// Header plus payload length.
    pub len: usize,
}

/// The outcome of scanning one segment.
#[derive(Debug, Default)]
pub struct Scanned {
    /// Each valid record, in file order.
    pub records: Vec<ScannedRecord>,
    /// Offset just after the last valid record.
    pub end: usize,
    /// Set when the segment ends in a torn write (last segment only).
    pub torn: Option<TornTail>,
}

/// A segment's bytes with the name they are checked against: a mapped [`Segment`] during
/// recovery, or a file read into memory by the offline reader (`offline`), which never writes.
#[derive(Clone, Copy, Debug)]
pub struct SegmentBytes<'a> {
    /// The file.
    pub path: &'a Path,
    /// The zxid its name promises for the first record.
    pub base: Zxid,
    /// The whole file (header included).
    pub bytes: &'a [u8],
}

impl<'a> SegmentBytes<'a> {
    /// The bytes of a mapped segment.
    pub fn of(seg: &'a Segment) -> SegmentBytes<'a> {
        SegmentBytes {
            path: seg.path(),
            base: seg.base(),
            bytes: seg.bytes(),
        }
    }
}

/// Scans `seg`, whose records must all be greater than `after`.
pub fn scan(seg: &Segment, after: Zxid, is_last: bool) -> Result<Scanned> {
    let mut out = Scanned::default();
    scan_into(&SegmentBytes::of(seg), after, is_last, &mut out)?;
    Ok(out)
}

/// [`scan`] over any segment bytes, filling `out`; on an error `out.records` still holds every
/// valid record before the bad position (the offline reader lists them).
pub fn scan_into(
    seg: &SegmentBytes<'_>,
    after: Zxid,
    is_last: bool,
    out: &mut Scanned,
) -> Result<()> {
    let bytes = seg.bytes;
    let mut off = SEGMENT_HEADER_LEN;
    let mut last = after;
    loop {
        let rest = bytes.get(off..).unwrap_or_default();
        let (reason, hint) = match record::decode(rest) {
            Decoded::Record {
                zxid,
                kind,
                payload,
            } => {
                check_order(seg, off, zxid, last, out.records.is_empty())?;
                let len = HEADER_LEN + payload.len();
                out.records.push(ScannedRecord {
                    zxid,
                    kind,
                    offset: off,
                    len,
                });
                last = zxid;
                off += len;
                continue;
            }
            Decoded::Full => break,
            // Earlier segments end at their first zero header; a record lost behind one is
            // caught by the segment chain check (`prev` of the next segment).
            Decoded::Zero if !is_last => break,
            Decoded::Zero => match first_nonzero(bytes, off) {
                None => break,
                Some(nz) => {
                    out.torn = Some(torn(
                        bytes,
                        off,
                        format!("zero header followed by data at offset {nz}"),
                    ));
                    break;
                }
            },
            Decoded::BadHeader => ("record header checksum mismatch".to_string(), None),
            Decoded::Overflow { zxid, total_len } => (
                format!("record of zxid {zxid} claims {total_len} bytes, past the end of the file"),
                None,
            ),
            Decoded::BadPayload { zxid, total_len } => (
                format!("payload checksum mismatch in record of zxid {zxid}"),
                Some(off + total_len),
            ),
        };
        out.end = off;
        out.torn = Some(torn_or_corrupt(seg, off, reason, hint, last, is_last)?);
        break;
    }
    out.end = off;
    Ok(())
}

/// At `off`, the first position of `seg` that holds no valid record (for `reason`; `hint` is
/// where the bad record claims to end, `last` the zxid of the record before it): the torn tail
/// to cut, or the corruption error, by the module's rules.
fn torn_or_corrupt(
    seg: &SegmentBytes<'_>,
    off: usize,
    reason: String,
    hint: Option<usize>,
    last: Zxid,
    is_last: bool,
) -> Result<TornTail> {
    if !is_last {
        return Err(StoreError::corrupt(
            seg.path,
            off as u64,
            format!("{reason} (not the last segment, so not a torn write)"),
        ));
    }
    let bytes = seg.bytes;
    if let Some(next) = find_valid_after(bytes, off, hint, last) {
        if !has_unwritten_page(bytes, off, next) {
            return Err(StoreError::corrupt(
                seg.path,
                off as u64,
                format!(
                    "{reason}; a valid record follows at offset {next}, so this is not a torn tail"
                ),
            ));
        }
    }
    Ok(torn(bytes, off, reason))
}

fn check_order(
    seg: &SegmentBytes<'_>,
    off: usize,
    zxid: Zxid,
    last: Zxid,
    first: bool,
) -> Result<()> {
    if first && zxid != seg.base {
        return Err(StoreError::corrupt(
            seg.path,
            off as u64,
            format!(
                "first record has zxid {zxid} but the file is named for {}",
                seg.base
            ),
        ));
    }
    if zxid <= last {
        return Err(StoreError::corrupt(
            seg.path,
            off as u64,
            format!("record zxid {zxid} is not greater than the previous zxid {last}"),
        ));
    }
    Ok(())
}

fn torn(bytes: &[u8], off: usize, reason: String) -> TornTail {
    let dirty_end = last_nonzero(bytes, off).map_or(off, |p| p + 1);
    TornTail {
        offset: off,
        dirty_end,
        reason,
    }
}

/// The offset of the first valid record after a bad one at `off` whose zxid is above `last`:
/// first where the bad record's trusted length points (`hint`), else by trying every offset.
fn find_valid_after(bytes: &[u8], off: usize, hint: Option<usize>, last: Zxid) -> Option<usize> {
    let valid_at = |p: usize| match record::decode(bytes.get(p..).unwrap_or_default()) {
        Decoded::Record { zxid, .. } => zxid > last,
        _ => false,
    };
    if let Some(h) = hint {
        if valid_at(h) {
            return Some(h);
        }
    }
    let end = last_nonzero(bytes, off)?;
    (off + 1..=end).find(|&p| valid_at(p))
}

/// Whether some 4 KiB page's part of `[lo, hi)` is at least 32 zero bytes.
fn has_unwritten_page(bytes: &[u8], lo: usize, hi: usize) -> bool {
    let mut p = lo - lo % PAGE;
    while p < hi {
        let a = p.max(lo);
        let b = (p + PAGE).min(hi).min(bytes.len());
        if b >= a + UNWRITTEN_MIN && bytes[a..b].iter().all(|&x| x == 0) {
            return true;
        }
        p += PAGE;
    }
    false
}

fn first_nonzero(bytes: &[u8], from: usize) -> Option<usize> {
    bytes
        .get(from..)?
        .iter()
        .position(|&b| b != 0)
        .map(|p| p + from)
}

fn last_nonzero(bytes: &[u8], from: usize) -> Option<usize> {
    bytes
        .get(from..)?
        .iter()
        .rposition(|&b| b != 0)
        .map(|p| p + from)
}
