//! Reading and damaging a stopped node's txn log segments and snapshots (formats: zab-store's
//! `segment`, `record` and `snapshot` module docs).
//!
//! - A segment: 32-byte header, then records `len u32 | head_crc u32 | data_crc u32 | zxid u64 |
//!   payload[len]` (big-endian), then zeros. [`records`] walks the headers until a zero or
//!   implausible one; it does not verify CRCs (the store does that on recovery).
//! - [`cut_tail`] zero-fills a segment from an offset to the end of its last record: what a
//!   crash leaves when the pages after that offset never reached the disk (a torn tail). The
//!   store must cut the damaged record and everything after it and start.
//! - [`flip_byte`] XORs one byte in place with a mask (`0xFF` inverts it; `0x01` keeps an ASCII
//!   byte ASCII, so a decoder may accept the damaged value and only the CRC can tell).

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::DamageError;

const SEGMENT_HEADER_LEN: u64 = 32;
const RECORD_HEADER_LEN: u64 = 20;

/// One record of a segment: where it starts and how long it is (header included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordPos {
    /// Offset of its header in the file.
    pub offset: u64,
    /// Header plus payload bytes.
    pub len: u64,
    /// Its zxid.
    pub zxid: u64,
}

pub use crate::proc::node::files_with_prefix;

/// Whether `dir` holds a `snapshot.*.tmp` (a snapshot being written when the node died).
pub fn has_snapshot_tmp(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("snapshot.") && name.ends_with(".tmp")
        })
}

/// The records of segment `path`, in file order.
pub fn records(path: &Path) -> Result<Vec<RecordPos>, DamageError> {
    let bytes = std::fs::read(path).map_err(DamageError::io(format!("read {}", path.display())))?;
    if bytes.len() < SEGMENT_HEADER_LEN as usize || &bytes[..4] != b"ZLOG" {
        return Err(DamageError::Format(format!(
            "{} is not a log segment",
            path.display()
        )));
    }
    let mut out = Vec::new();
    let mut at = SEGMENT_HEADER_LEN as usize;
    while at + RECORD_HEADER_LEN as usize <= bytes.len() {
        let head = &bytes[at..at + RECORD_HEADER_LEN as usize];
        if head.iter().all(|b| *b == 0) {
            break;
        }
        let len = u64::from(u32::from_be_bytes([head[0], head[1], head[2], head[3]]));
        let mut zxid = [0u8; 8];
        zxid.copy_from_slice(&head[12..20]);
        let total = RECORD_HEADER_LEN + len;
        if at as u64 + total > bytes.len() as u64 {
            break;
        }
        out.push(RecordPos {
            offset: at as u64,
            len: total,
            zxid: u64::from_be_bytes(zxid),
        });
        at += total as usize;
    }
    Ok(out)
}

/// The newest (last by name) txn log segment of `dir` and its records.
pub fn newest_segment(dir: &Path) -> Result<(PathBuf, Vec<RecordPos>), DamageError> {
    let path = files_with_prefix(dir, "log.")
        .pop()
        .ok_or_else(|| DamageError::Missing(format!("no log segment in {}", dir.display())))?;
    let recs = records(&path)?;
    Ok((path, recs))
}

/// Zero-fills `path` from `from` to the end of its last record (in `recs`); returns how many
/// bytes were zeroed.
pub fn cut_tail(path: &Path, recs: &[RecordPos], from: u64) -> Result<u64, DamageError> {
    let end = recs.last().map_or(SEGMENT_HEADER_LEN, |r| r.offset + r.len);
    if from < SEGMENT_HEADER_LEN || from >= end {
        return Err(DamageError::Missing(format!(
            "offset {from} is outside the records of {} (32..{end})",
            path.display()
        )));
    }
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(DamageError::io(format!("open {}", path.display())))?;
    let zeros = vec![0u8; (end - from) as usize];
    file.write_all_at(&zeros, from)
        .map_err(DamageError::io(format!("zero {}", path.display())))?;
    file.sync_all()
        .map_err(DamageError::io(format!("sync {}", path.display())))?;
    Ok(end - from)
}

/// XORs the byte at `offset` of `path` with `mask`.
pub fn flip_byte(path: &Path, offset: u64, mask: u8) -> Result<(), DamageError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(DamageError::io(format!("open {}", path.display())))?;
    let mut b = [0u8; 1];
    file.read_exact_at(&mut b, offset)
        .map_err(DamageError::io(format!(
            "read {} at {offset}",
            path.display()
        )))?;
    b[0] ^= mask;
    file.write_all_at(&b, offset)
        .map_err(DamageError::io(format!(
            "write {} at {offset}",
            path.display()
        )))?;
    file.sync_all()
        .map_err(DamageError::io(format!("sync {}", path.display())))
}
