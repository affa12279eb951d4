//! A read-only view of a txn log directory for offline tools (`fe-meta dump-log`,
//! `fe-meta inspect`): the segments, every valid record, and the log's state as recovery would
//! judge it (`recovery`, `scan`: the same scan and chain rules), without a running node.
//!
//! Recovery repairs what it finds (cuts a torn tail, removes temp files and an empty last
//! segment); this reader only reports it, so it can be pointed at the data dir of a node that
//! crashed, or of a running one, without changing what that node will see.
//!
//! INV-1: nothing under the directory is created, modified or removed (files are read, never
//! mapped writable or opened for writing).
//! INV-2: every valid record before the first damage is reported once, in log order; the damage
//! itself (torn tail, corruption, missing records between segments, unreadable file) is
//! returned as data in [`OfflineLog::damage`], never as a panic.
//! INV-3: the damage is classified exactly as recovery classifies it: a [`LogDamage::TornTail`]
//! is what recovery would cut, anything else would stop the node from starting.

use std::fs;
use std::path::{Path, PathBuf};

use zab_core::{TxnKind, Zxid};

use crate::error::{Result, StoreError};
use crate::fsutil;
use crate::record::HEADER_LEN;
use crate::scan::{self, Scanned, SegmentBytes};
use crate::segment::{self, SEGMENT_HEADER_LEN};

/// One valid record, borrowed from the segment being read.
#[derive(Clone, Copy, Debug)]
pub struct OfflineRecord<'a> {
    /// Its zxid.
    pub zxid: Zxid,
    /// What its payload is.
    pub kind: TxnKind,
    /// The segment file holding it.
    pub file: &'a Path,
    /// Offset of its header in that file.
    pub offset: u64,
    /// Its payload.
    pub payload: &'a [u8],
}

/// One segment file as found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OfflineSegment {
    /// The file.
    pub path: PathBuf,
    /// The zxid its name (and header) promise for the first record.
    pub base: Zxid,
    /// The last zxid of the log when it was created (0: none); `None` if the header is bad.
    pub prev: Option<Zxid>,
    /// The file's size in bytes (preallocated: not the size of its records).
    pub size: u64,
    /// Valid records read from it.
    pub records: usize,
    /// Offset just after its last valid record.
    pub end: u64,
}

/// What keeps the log from being a clean sequence of records (see INV-3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogDamage {
    /// The last segment ends in a torn write (or the file was cut inside a record): recovery
    /// ends the log there and starts.
    TornTail {
        /// The segment.
        path: PathBuf,
        /// Where the valid records end.
        offset: u64,
        /// Non-zero bytes from `offset` on that recovery would zero.
        bytes: u64,
        /// What was found at `offset`.
        reason: String,
    },
    /// A bad record or header where a torn write is impossible: recovery refuses to start.
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The offset of the bad record or field.
        offset: u64,
        /// What is wrong (a bad record names its zxid when the header is intact).
        reason: String,
    },
    /// Records are missing between two segments (for example a deleted file).
    Gap {
        /// The last zxid before the hole.
        after: Zxid,
        /// The segment after the hole.
        next_file: PathBuf,
        /// What that segment says it follows.
        before: Zxid,
    },
    /// Any other failure to read the log (a file that cannot be read).
    Unreadable {
        /// What failed.
        reason: String,
    },
}

/// The log directory as found (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OfflineLog {
    /// The directory.
    pub dir: PathBuf,
    /// Every `log.<zxid>` file, ascending, up to the first damage (included).
    pub segments: Vec<OfflineSegment>,
    /// Unfinished or spare `log.*.tmp` files and discarded files (`discarded.*`, being freed):
    /// recovery removes them; they hold no record.
    pub temp_files: Vec<PathBuf>,
    /// The zxid the first segment follows (records up to it were purged or are in a snapshot).
    pub floor: Zxid,
    /// Valid records.
    pub records: usize,
    /// The first valid record's zxid.
    pub first_zxid: Option<Zxid>,
    /// The last valid record's zxid.
    pub last_zxid: Option<Zxid>,
    /// The first damage, if any; reading stops there.
    pub damage: Option<LogDamage>,
}

impl OfflineLog {
    /// Whether recovery would start from this log (no damage, or only a torn tail).
    pub fn would_start(&self) -> bool {
        matches!(self.damage, None | Some(LogDamage::TornTail { .. }))
    }
}

/// Reads the txn log in `dir`, calling `on_record` for every valid record in log order
/// (INV-2). Fails only when the directory cannot be listed.
pub fn read_log(dir: &Path, mut on_record: impl FnMut(&OfflineRecord<'_>)) -> Result<OfflineLog> {
    let mut log = OfflineLog {
        dir: dir.to_path_buf(),
        ..OfflineLog::default()
    };
    let mut bases = Vec::new();
    for name in fsutil::list_names(dir)? {
        if (name.starts_with("log.") && fsutil::is_temp_name(&name))
            || crate::discard::is_discarded_name(&name)
        {
            log.temp_files.push(dir.join(&name));
        } else if let Some(base) = segment::parse_segment_name(&name) {
            bases.push(base);
        }
    }
    bases.sort();
    let n = bases.len();
    for (i, base) in bases.into_iter().enumerate() {
        let path = dir.join(segment::segment_name(base));
        let is_last = i + 1 == n;
        if let Err(damage) = read_segment(&mut log, &path, base, is_last, &mut on_record) {
            log.damage = Some(damage);
            break;
        }
        if log.damage.is_some() {
            break;
        }
    }
    Ok(log)
}

/// Reads one segment into `log`; `Err` is the damage that ends the log.
fn read_segment(
    log: &mut OfflineLog,
    path: &Path,
    base: Zxid,
    is_last: bool,
    on_record: &mut impl FnMut(&OfflineRecord<'_>),
) -> std::result::Result<(), LogDamage> {
    let bytes = fs::read(path).map_err(|e| LogDamage::Unreadable {
        reason: format!("read {}: {e}", path.display()),
    })?;
    let mut seg = OfflineSegment {
        path: path.to_path_buf(),
        base,
        prev: None,
        size: bytes.len() as u64,
        records: 0,
        end: 0,
    };
    let prev = match checked_header(&bytes, path, base) {
        Ok(prev) => prev,
        Err(e) => {
            log.segments.push(seg);
            return Err(damage_of(e));
        }
    };
    seg.prev = Some(prev);
    let after = match chain_start(log, path, prev) {
        Ok(after) => after,
        Err(damage) => {
            log.segments.push(seg);
            return Err(damage);
        }
    };
    let view = SegmentBytes {
        path,
        base,
        bytes: &bytes,
    };
    let mut scanned = Scanned::default();
    let result = scan::scan_into(&view, after, is_last, &mut scanned);
    report_records(log, path, &bytes, &scanned, on_record);
    seg.records = scanned.records.len();
    seg.end = scanned.end as u64;
    log.segments.push(seg);
    result.map_err(damage_of)?;
    if scanned.records.is_empty() && !is_last {
        return Err(LogDamage::Corrupt {
            path: path.to_path_buf(),
            offset: SEGMENT_HEADER_LEN as u64,
            reason: "segment holds no record but later segments exist".to_string(),
        });
    }
    if let Some(damage) = tail_damage(path, &bytes, scanned, is_last) {
        log.damage = Some(damage);
    }
    Ok(())
}

/// The segment header's `prev` zxid, after checking that the header decodes and names the
/// same first zxid as the file name.
fn checked_header(bytes: &[u8], path: &Path, base: Zxid) -> Result<Zxid> {
    let (hbase, prev) = match bytes.get(..SEGMENT_HEADER_LEN) {
        Some(h) => segment::decode_header(h, path)?,
        None => {
            return Err(StoreError::corrupt(
                path,
                bytes.len() as u64,
                "file shorter than a segment header",
            ))
        }
    };
    if hbase == base {
        Ok(prev)
    } else {
        Err(StoreError::corrupt(
            path,
            8,
            format!("header says first zxid {hbase} but the file name says {base}"),
        ))
    }
}

/// The zxid the segment's first record must follow: its `prev` for the first segment (which
/// also sets the log's floor), else the last record so far, which `prev` must equal.
fn chain_start(
    log: &mut OfflineLog,
    path: &Path,
    prev: Zxid,
) -> std::result::Result<Zxid, LogDamage> {
    if log.segments.is_empty() {
        log.floor = prev;
        return Ok(prev);
    }
    let last = log.last_zxid.unwrap_or(log.floor);
    if prev > last {
        return Err(LogDamage::Gap {
            after: last,
            next_file: path.to_path_buf(),
            before: prev,
        });
    }
    if prev < last {
        return Err(LogDamage::Corrupt {
            path: path.to_path_buf(),
            offset: 16,
            reason: format!(
                "segment says it follows zxid {prev} but earlier segments hold records up to \
                 {last}"
            ),
        });
    }
    Ok(last)
}

/// Hands every scanned record to `on_record` and counts it in `log`.
fn report_records(
    log: &mut OfflineLog,
    path: &Path,
    bytes: &[u8],
    scanned: &Scanned,
    on_record: &mut impl FnMut(&OfflineRecord<'_>),
) {
    for r in &scanned.records {
        let payload = bytes
            .get(r.offset + HEADER_LEN..r.offset + r.len)
            .unwrap_or_default();
        on_record(&OfflineRecord {
            zxid: r.zxid,
            kind: r.kind,
            file: path,
            offset: r.offset as u64,
            payload,
        });
        log.first_zxid.get_or_insert(r.zxid);
        log.last_zxid = Some(r.zxid);
    }
    log.records += scanned.records.len();
}

/// The torn tail recovery would cut after a clean scan: the torn write the scan found, or, in
/// the last segment, non-zero bytes too short for a record header.
fn tail_damage(path: &Path, bytes: &[u8], scanned: Scanned, is_last: bool) -> Option<LogDamage> {
    if let Some(t) = scanned.torn {
        return Some(LogDamage::TornTail {
            path: path.to_path_buf(),
            offset: t.offset as u64,
            bytes: t.dirty_end.saturating_sub(t.offset) as u64,
            reason: t.reason,
        });
    }
    let rest = bytes.get(scanned.end..).unwrap_or_default();
    if !is_last || rest.len() >= HEADER_LEN {
        return None;
    }
    // Too short for a header: recovery takes the segment as full and ends the log here;
    // non-zero bytes mean the file was cut inside a record.
    let last_nonzero = rest.iter().rposition(|&b| b != 0)?;
    Some(LogDamage::TornTail {
        path: path.to_path_buf(),
        offset: scanned.end as u64,
        bytes: last_nonzero as u64 + 1,
        reason: format!(
            "the file ends {} bytes into a record header (cut short)",
            rest.len()
        ),
    })
}

fn damage_of(e: StoreError) -> LogDamage {
    match e {
        StoreError::Corrupt {
            path,
            offset,
            reason,
        } => LogDamage::Corrupt {
            path,
            offset,
            reason,
        },
        other => LogDamage::Unreadable {
            reason: other.to_string(),
        },
    }
}
