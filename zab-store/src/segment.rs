//! One txn log segment file: `log.<first zxid, 16 hex digits>`, preallocated and memory-mapped.
//!
//! ```text
//! offset  size  field
//!      0     4  magic "ZLOG"
//!      4     4  format version (1)
//!      8     8  base: the zxid of the first record, equal to the name's zxid
//!     16     8  prev: the last zxid of the log when the segment was created (0 = none); lets
//!               recovery prove that no segment between two files is missing
//!     24     4  reserved (0)
//!     28     4  CRC32C of bytes 0..28
//!     32        records (see `record`), then zeros to the end of the file
//! ```
//! INV-1: a segment file appears under its final name only complete: header written, the rest
//! zero-filled, fsynced, renamed from `log.<zxid>.tmp`, directory fsynced. A half-created segment
//! is a `.tmp` file, which recovery deletes.
//! INV-2: every byte after the last record of a segment is zero, except in the last segment
//! while a batch is being synced (recovery restores the zeros there).
//! INV-3: the mapping is only written by the log's single writer; readers copy bytes out under
//! the log's lock.
//! INV-4 (resident size): [`Segment::release`] drops pages from the process's resident set
//! (`MADV_DONTNEED` on the shared file mapping) without changing a byte: the page cache and the
//! file keep them and a later access reads them back. The log releases only bytes it has made
//! durable, so a written log costs the page cache, not the process's RSS.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use byteorder::{BigEndian, ByteOrder};
use memmap2::{MmapMut, MmapOptions, UncheckedAdvice};
use zab_core::Zxid;

use crate::error::{Result, StoreError};
use crate::fsutil;

/// Size of the segment header; the first record starts here.
pub const SEGMENT_HEADER_LEN: usize = 32;
const MAGIC: &[u8; 4] = b"ZLOG";
const VERSION: u32 = 1;
const PAGE: usize = 4096;

/// The file name of the segment whose first record is `base`.
pub fn segment_name(base: Zxid) -> String {
    format!("log.{:016x}", base.0)
}

/// The base zxid of a segment file name, if `name` is one.
pub fn parse_segment_name(name: &str) -> Option<Zxid> {
    fsutil::parse_hex_suffix(name, "log.").map(Zxid)
}

/// An open, mapped segment.
#[derive(Debug)]
pub struct Segment {
    path: PathBuf,
    base: Zxid,
    prev: Zxid,
    map: MmapMut,
}

impl Segment {
    /// Creates `log.<base>` in `dir`, at least `size` bytes long, durably (INV-1).
    ///
    /// With `force_sync` the file is filled with real zeros and fsynced, so later syncs of
    /// records only overwrite allocated blocks; without it the file is sparse (tests only).
    pub fn create(
        dir: &Path,
        base: Zxid,
        prev: Zxid,
        size: usize,
        force_sync: bool,
    ) -> Result<Segment> {
        let path = dir.join(segment_name(base));
        let tmp = fsutil::temp_path(&path);
        let size = size.max(SEGMENT_HEADER_LEN + 1).div_ceil(PAGE) * PAGE;
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| StoreError::io("create", &tmp, e))?;
        let mut header = [0u8; SEGMENT_HEADER_LEN];
        encode_header(&mut header, base, prev);
        f.write_all(&header)
            .map_err(|e| StoreError::io("write header", &tmp, e))?;
        if force_sync {
            zero_fill(&mut f, &tmp, size - SEGMENT_HEADER_LEN)?;
        } else {
            f.set_len(size as u64)
                .map_err(|e| StoreError::io("set length", &tmp, e))?;
        }
        fsutil::sync_file(&f, &tmp, force_sync)?;
        drop(f);
        fsutil::rename_durably(&tmp, &path, force_sync)?;
        Segment::open(&path, base)
    }

    /// Turns a prepared spare file (zero-filled and fsynced by [`prepare_spare`]) into
    /// `log.<base>` in `dir`: header written and synced *before* the rename, so the final name
    /// never shows a headerless file (INV-1).
    pub fn adopt(spare: &Path, dir: &Path, base: Zxid, prev: Zxid) -> Result<Segment> {
        let path = dir.join(segment_name(base));
        let f = OpenOptions::new()
            .write(true)
            .open(spare)
            .map_err(|e| StoreError::io("open spare", spare, e))?;
        let mut header = [0u8; SEGMENT_HEADER_LEN];
        encode_header(&mut header, base, prev);
        f.write_all_at(&header, 0)
            .map_err(|e| StoreError::io("write header", spare, e))?;
        f.sync_data()
            .map_err(|e| StoreError::io("fdatasync", spare, e))?;
        drop(f);
        fsutil::rename_durably(spare, &path, true)?;
        Segment::open(&path, base)
    }

    /// Opens and maps an existing segment, validating its header.
    pub fn open(path: &Path, base: Zxid) -> Result<Segment> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| StoreError::io("open", path, e))?;
        let len = file
            .metadata()
            .map_err(|e| StoreError::io("stat", path, e))?
            .len();
        if len < (SEGMENT_HEADER_LEN as u64) {
            return Err(StoreError::corrupt(
                path,
                len,
                "file shorter than a segment header",
            ));
        }
        // SAFETY: the mapping is of a file this process owns exclusively by convention (one peer
        // per data directory); nothing else truncates or writes it while mapped. Writes go only
        // through `bytes_mut` on the single writer (INV-3).
        let map = unsafe { MmapOptions::new().map_mut(&file) }
            .map_err(|e| StoreError::io("mmap", path, e))?;
        let (hbase, prev) = decode_header(&map[..SEGMENT_HEADER_LEN], path)?;
        if hbase != base {
            return Err(StoreError::corrupt(
                path,
                8,
                format!("header says first zxid {hbase} but the file name says {base}"),
            ));
        }
        Ok(Segment {
            path: path.to_path_buf(),
            base,
            prev,
            map,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The first zxid (the name's).
    pub fn base(&self) -> Zxid {
        self.base
    }

    /// The last zxid of the log before this segment was created (0 = none).
    pub fn prev(&self) -> Zxid {
        self.prev
    }

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// The whole file, for the writer.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.map
    }

    /// The file's size.
    pub fn size(&self) -> usize {
        self.map.len()
    }

    /// Makes bytes `[lo, hi)` durable (msync with MS_SYNC, an fdatasync of that range).
    pub fn sync_range(&self, lo: usize, hi: usize, force_sync: bool) -> Result<()> {
        if !force_sync || hi <= lo {
            return Ok(());
        }
        self.map
            .flush_range(lo, hi - lo)
            .map_err(|e| StoreError::io(format!("msync bytes {lo}..{hi} of"), &self.path, e))
    }

    /// Drops the whole pages inside `[lo, hi)` from the resident set (INV-4); the bytes stay
    /// what they were. Best effort: a refused advice only leaves the pages resident.
    pub fn release(&self, lo: usize, hi: usize) {
        let lo = lo.div_ceil(PAGE) * PAGE;
        let hi = hi.min(self.map.len()) / PAGE * PAGE;
        if lo < hi {
            // SAFETY: MADV_DONTNEED on a MAP_SHARED file mapping only unmaps the pages from this
            // process: their contents stay in the page cache and the file (dirty ones included),
            // and the next access maps them again, so no byte any reference can see changes.
            let _ = unsafe {
                self.map
                    .unchecked_advise_range(UncheckedAdvice::DontNeed, lo, hi - lo)
            };
        }
    }

    /// Zeroes `[lo, hi)` in the mapping (not yet durable).
    pub fn zero(&mut self, lo: usize, hi: usize) {
        if let Some(s) = self.map.get_mut(lo..hi) {
            s.fill(0);
        }
    }
}

/// Creates `path` (a `log.*.tmp` name) of `size` bytes (page-rounded), zero-filled and fsynced,
/// to be adopted by a later rollover; returns its size.
pub fn prepare_spare(path: &Path, size: usize) -> Result<usize> {
    let size = size.max(SEGMENT_HEADER_LEN + 1).div_ceil(PAGE) * PAGE;
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(|e| StoreError::io("create spare", path, e))?;
    // In 4 MiB steps, each made durable, so the sync thread's own syncs never queue behind
    // one large flush of this file.
    let mut left = size;
    while left > 0 {
        let n = left.min(SPARE_STEP);
        zero_fill(&mut f, path, n)?;
        f.sync_data()
            .map_err(|e| StoreError::io("fdatasync", path, e))?;
        left -= n;
    }
    fsutil::sync_file(&f, path, true)?;
    Ok(size)
}

const SPARE_STEP: usize = 4 << 20;

fn zero_fill(f: &mut File, path: &Path, mut left: usize) -> Result<()> {
    let zeros = vec![0u8; 1 << 20];
    while left > 0 {
        let n = left.min(zeros.len());
        f.write_all(&zeros[..n])
            .map_err(|e| StoreError::io("preallocate", path, e))?;
        left -= n;
    }
    Ok(())
}

fn encode_header(out: &mut [u8; SEGMENT_HEADER_LEN], base: Zxid, prev: Zxid) {
    out[0..4].copy_from_slice(MAGIC);
    BigEndian::write_u32(&mut out[4..8], VERSION);
    BigEndian::write_u64(&mut out[8..16], base.0);
    BigEndian::write_u64(&mut out[16..24], prev.0);
    BigEndian::write_u32(&mut out[24..28], 0);
    let crc = crc32c::crc32c(&out[0..28]);
    BigEndian::write_u32(&mut out[28..32], crc);
}

pub(crate) fn decode_header(h: &[u8], path: &Path) -> Result<(Zxid, Zxid)> {
    if &h[0..4] != MAGIC {
        return Err(StoreError::corrupt(
            path,
            0,
            "not a txn log segment (bad magic)",
        ));
    }
    if BigEndian::read_u32(&h[28..32]) != crc32c::crc32c(&h[0..28]) {
        return Err(StoreError::corrupt(
            path,
            28,
            "segment header checksum mismatch",
        ));
    }
    let version = BigEndian::read_u32(&h[4..8]);
    if version != VERSION {
        return Err(StoreError::corrupt(
            path,
            4,
            format!("unsupported segment format version {version}"),
        ));
    }
    Ok((
        Zxid(BigEndian::read_u64(&h[8..16])),
        Zxid(BigEndian::read_u64(&h[16..24])),
    ))
}
