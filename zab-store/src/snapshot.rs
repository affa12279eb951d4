//! Snapshot files `snapshot.<zxid, 16 hex>`: a streamed writer and a streamed, verifying reader.
//!
//! Format version 2 (written); m is the length of the configuration section, n the body's:
//! ```text
//! offset  size  field
//!      0     4  magic "ZSNP"
//!      4     4  format version (2)
//!      8     8  zxid (equal to the name's)
//!     16     8  cluster id
//!     24     4  reserved (0)
//!     28     4  CRC32C of bytes 0..28
//!     32     4  m, the configuration section's length (0: no configuration known)
//!     36     m  configuration: its version zxid (u64) then `Membership::encode()`
//!   36+m     n  body: the state machine's bytes, opaque here
//! 36+m+n     8  n, the body length
//! 44+m+n     4  CRC32C of everything before the trailer (bytes 0..36+m+n)
//! 48+m+n     4  end magic "ZEND"
//! ```
//! Format version 1 (still read) has no configuration section: the body starts at 32 and the
//! CRC covers bytes 0..32+n; it reads as "no configuration".
//!
//! INV-1: a snapshot appears under its final name only complete and durable: written to
//! `snapshot.<zxid>.tmp`, fsynced, renamed, directory fsynced ([`SnapshotWriter::finish`]).
//! A writer dropped without `finish` removes its temp file.
//! INV-2: neither side holds more than a fixed-size buffer (64 KiB) of the body in memory; the
//! configuration section is bounded by [`MAX_MEMBERSHIP_SECTION_LEN`].
//! INV-3: [`SnapshotReader`] never reports the end of the body as success unless the trailer
//! matches: the `read` that returns the last body bytes fails instead if the CRC, the length or
//! the end magic is wrong, or the file is truncated.
//! INV-4: [`SnapshotReader::open`] refuses (as [`StoreError::BadSnapshot`], never a panic) a
//! configuration section that is longer than the file, longer than
//! [`MAX_MEMBERSHIP_SECTION_LEN`], or that does not decode. Its bytes are covered by the
//! whole-file CRC only, so the configuration in [`SnapshotReader::info`] is known intact once
//! the reader reached the end ([`SnapshotReader::finish`], as `SnapDir::load_newest` does).
//!
//! INV-5: the temp file is written back to the disk window by window while it grows
//! (`writeback`), so the final fsync of INV-1 does not flush the whole image at once in front
//! of the txn log's syncs; that fsync still makes it durable.
//!
//! The configuration section's encoding and its bounds are `membership_section`'s job.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use byteorder::{BigEndian, ByteOrder};
use zab_core::{Membership, Zxid};

use crate::error::{Result, StoreError};
use crate::fsutil;

mod membership_section;
mod writeback;

pub use membership_section::MAX_MEMBERSHIP_SECTION_LEN;
use membership_section::{
    decode_membership, encode_membership, read_membership_section, MEMBERSHIP_LEN_FIELD,
};
use writeback::WritebackFile;

const MAGIC: &[u8; 4] = b"ZSNP";
const END_MAGIC: &[u8; 4] = b"ZEND";
/// The format version written.
const VERSION: u32 = 2;
/// The format version before the configuration section; still read.
const VERSION_WITHOUT_MEMBERSHIP: u32 = 1;
/// Size of the snapshot header (the fixed part, before the configuration section).
pub const SNAP_HEADER_LEN: usize = 32;
/// Size of the snapshot trailer.
pub const SNAP_TRAILER_LEN: usize = 16;
const BUF_LEN: usize = 64 * 1024;

/// The file name of the snapshot at `zxid`.
pub fn snapshot_name(zxid: Zxid) -> String {
    format!("snapshot.{:016x}", zxid.0)
}

/// The zxid of a snapshot file name, if `name` is one.
pub fn parse_snapshot_name(name: &str) -> Option<Zxid> {
    fsutil::parse_hex_suffix(name, "snapshot.").map(Zxid)
}

/// What a snapshot's header says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// The file.
    pub path: PathBuf,
    /// The last zxid the snapshot includes.
    pub zxid: Zxid,
    /// The cluster it belongs to.
    pub cluster_id: u64,
    /// The committed configuration the snapshot's state is under; `None` when none was
    /// known (format version 1, or a state from before any configuration).
    pub membership: Option<Membership>,
}

/// Writes one snapshot as a stream (see the module docs); implements [`Write`].
#[derive(Debug)]
pub struct SnapshotWriter {
    info: SnapshotInfo,
    tmp: PathBuf,
    out: Option<BufWriter<WritebackFile>>,
    crc: u32,
    body_len: u64,
    force_sync: bool,
}

impl SnapshotWriter {
    /// Starts `snapshot.<zxid>` in `dir` under its temp name, with `membership`, the
    /// committed configuration the state is under (`None`: none known). A configuration
    /// newer than `zxid`, or one whose encoding exceeds [`MAX_MEMBERSHIP_SECTION_LEN`], is
    /// refused before any file is created.
    pub fn create(
        dir: &Path,
        zxid: Zxid,
        cluster_id: u64,
        membership: Option<&Membership>,
        force_sync: bool,
    ) -> Result<SnapshotWriter> {
        let path = dir.join(snapshot_name(zxid));
        let tmp = fsutil::temp_path(&path);
        let refuse = |reason: String| {
            StoreError::io(
                "create",
                &tmp,
                io::Error::new(io::ErrorKind::InvalidInput, reason),
            )
        };
        if let Some(m) = membership.filter(|m| m.version > zxid) {
            return Err(refuse(format!(
                "configuration version {} is newer than the snapshot's zxid {zxid}",
                m.version
            )));
        }
        let section = encode_membership(membership);
        if section.len() > MAX_MEMBERSHIP_SECTION_LEN {
            return Err(refuse(format!(
                "configuration of {} bytes, more than the {MAX_MEMBERSHIP_SECTION_LEN} a \
                 snapshot holds",
                section.len()
            )));
        }
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| StoreError::io("create", &tmp, e))?;
        let mut out = BufWriter::with_capacity(BUF_LEN, WritebackFile::new(file, force_sync));
        let mut header = [0u8; SNAP_HEADER_LEN];
        header[0..4].copy_from_slice(MAGIC);
        BigEndian::write_u32(&mut header[4..8], VERSION);
        BigEndian::write_u64(&mut header[8..16], zxid.0);
        BigEndian::write_u64(&mut header[16..24], cluster_id);
        let hcrc = crc32c::crc32c(&header[0..28]);
        BigEndian::write_u32(&mut header[28..32], hcrc);
        // The length fits: it is at most MAX_MEMBERSHIP_SECTION_LEN, checked above.
        let section_len = (section.len() as u32).to_be_bytes();
        let mut crc = crc32c::crc32c(&header);
        out.write_all(&header)
            .map_err(|e| StoreError::io("write header", &tmp, e))?;
        for part in [&section_len[..], &section[..]] {
            out.write_all(part)
                .map_err(|e| StoreError::io("write configuration", &tmp, e))?;
            crc = crc32c::crc32c_append(crc, part);
        }
        Ok(SnapshotWriter {
            info: SnapshotInfo {
                path,
                zxid,
                cluster_id,
                membership: membership.cloned(),
            },
            tmp,
            out: Some(out),
            crc,
            body_len: 0,
            force_sync,
        })
    }

    /// Body bytes written so far.
    pub fn body_len(&self) -> u64 {
        self.body_len
    }

    /// Writes the trailer and makes the snapshot durable under its final name (INV-1). On an
    /// error the temp file is removed, as by a drop: a snapshot whose write or sync failed is
    /// never synced again (a retried fsync may "succeed" without the data), and a disk that
    /// keeps failing does not collect one dead temp file per attempt.
    pub fn finish(mut self) -> Result<SnapshotInfo> {
        let Some(out) = self.out.take() else {
            return Err(StoreError::io(
                "finish",
                &self.tmp,
                io::Error::other("already finished"),
            ));
        };
        let done = self.complete(out);
        if done.is_err() {
            // Gone already if the rename succeeded and only the directory's fsync failed.
            let _ = std::fs::remove_file(&self.tmp);
        }
        done
    }

    fn complete(&self, mut out: BufWriter<WritebackFile>) -> Result<SnapshotInfo> {
        let mut trailer = [0u8; SNAP_TRAILER_LEN];
        BigEndian::write_u64(&mut trailer[0..8], self.body_len);
        BigEndian::write_u32(&mut trailer[8..12], self.crc);
        trailer[12..16].copy_from_slice(END_MAGIC);
        out.write_all(&trailer)
            .map_err(|e| StoreError::io("write trailer", &self.tmp, e))?;
        let file = out
            .into_inner()
            .map_err(|e| StoreError::io("flush", &self.tmp, e.into_error()))?
            .into_file()
            .map_err(|e| StoreError::io("write", &self.tmp, e))?;
        fsutil::sync_file(&file, &self.tmp, self.force_sync)?;
        drop(file);
        fsutil::rename_durably(&self.tmp, &self.info.path, self.force_sync)?;
        Ok(self.info.clone())
    }
}

impl Write for SnapshotWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let out = self
            .out
            .as_mut()
            .ok_or_else(|| io::Error::other("snapshot already finished"))?;
        // The error names the file (crate INV-1): a full disk while a SNAP or a background
        // snapshot is written must say where.
        let n = out
            .write(buf)
            .map_err(|e| io::Error::from(StoreError::io("write", &self.tmp, e)))?;
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        self.body_len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.out.as_mut() {
            Some(out) => out
                .flush()
                .map_err(|e| io::Error::from(StoreError::io("write", &self.tmp, e))),
            None => Ok(()),
        }
    }
}

impl Drop for SnapshotWriter {
    fn drop(&mut self) {
        if self.out.take().is_some() {
            // Abandoned before `finish`: the temp file is garbage. A failure to remove it is
            // harmless (it is ignored and cleaned at the next start).
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Reads one snapshot's body as a stream, verifying it (INV-3); implements [`Read`].
#[derive(Debug)]
pub struct SnapshotReader {
    info: SnapshotInfo,
    input: BufReader<File>,
    crc: u32,
    /// Offset of the body's first byte.
    body_start: u64,
    body_len: u64,
    remaining: u64,
    verified: bool,
}

impl SnapshotReader {
    /// Opens `path` and validates its header; `expect` is the zxid its name promises.
    pub fn open(path: &Path, expect: Option<Zxid>) -> Result<SnapshotReader> {
        let file = File::open(path).map_err(|e| StoreError::io("open", path, e))?;
        let size = file
            .metadata()
            .map_err(|e| StoreError::io("stat", path, e))?
            .len();
        let bad = |offset: u64, reason: String| StoreError::BadSnapshot {
            path: path.to_path_buf(),
            offset,
            reason,
        };
        let overhead = (SNAP_HEADER_LEN + SNAP_TRAILER_LEN) as u64;
        if size < overhead {
            return Err(bad(
                size,
                format!("truncated: {size} bytes, less than header and trailer"),
            ));
        }
        let mut input = BufReader::with_capacity(BUF_LEN, file);
        let mut h = [0u8; SNAP_HEADER_LEN];
        input
            .read_exact(&mut h)
            .map_err(|e| StoreError::io("read header", path, e))?;
        if &h[0..4] != MAGIC {
            return Err(bad(0, "not a snapshot (bad magic)".into()));
        }
        if BigEndian::read_u32(&h[28..32]) != crc32c::crc32c(&h[0..28]) {
            return Err(bad(28, "header checksum mismatch".into()));
        }
        let version = BigEndian::read_u32(&h[4..8]);
        if version != VERSION && version != VERSION_WITHOUT_MEMBERSHIP {
            return Err(bad(
                4,
                format!("unsupported snapshot format version {version}"),
            ));
        }
        let zxid = Zxid(BigEndian::read_u64(&h[8..16]));
        if let Some(want) = expect.filter(|w| *w != zxid) {
            return Err(bad(
                8,
                format!("header says zxid {zxid} but the name says {want}"),
            ));
        }
        let mut crc = crc32c::crc32c(&h);
        let mut body_start = SNAP_HEADER_LEN as u64;
        let mut membership = None;
        if version == VERSION {
            let (section, section_crc) = read_membership_section(&mut input, path, size, crc)?;
            crc = section_crc;
            body_start += (MEMBERSHIP_LEN_FIELD + section.len()) as u64;
            membership = decode_membership(zxid, &section)
                .map_err(|reason| bad((SNAP_HEADER_LEN + MEMBERSHIP_LEN_FIELD) as u64, reason))?;
        }
        let body_len = size - body_start - SNAP_TRAILER_LEN as u64;
        Ok(SnapshotReader {
            info: SnapshotInfo {
                path: path.to_path_buf(),
                zxid,
                cluster_id: BigEndian::read_u64(&h[16..24]),
                membership,
            },
            input,
            crc,
            body_start,
            body_len,
            remaining: body_len,
            verified: false,
        })
    }

    /// The header's content.
    pub fn info(&self) -> &SnapshotInfo {
        &self.info
    }

    /// The body's length.
    pub fn body_len(&self) -> u64 {
        self.body_len
    }

    /// Offset of the body's first byte in the file (after the header and, from format
    /// version 2 on, the configuration section).
    pub fn body_start(&self) -> u64 {
        self.body_start
    }

    /// Reads (and discards) whatever the consumer left and verifies the trailer.
    pub fn finish(mut self) -> Result<SnapshotInfo> {
        let mut sink = io::sink();
        io::copy(&mut self, &mut sink)
            .map_err(|e| StoreError::from_io("read", self.info.path.clone(), e))?;
        Ok(self.info)
    }

    fn verify(&mut self) -> Result<()> {
        if self.verified {
            return Ok(());
        }
        let path = &self.info.path;
        let offset = self.body_start + self.body_len;
        let bad = |reason: String| StoreError::BadSnapshot {
            path: path.clone(),
            offset,
            reason,
        };
        let mut t = [0u8; SNAP_TRAILER_LEN];
        self.input
            .read_exact(&mut t)
            .map_err(|e| bad(format!("trailer unreadable: {e}")))?;
        if &t[12..16] != END_MAGIC {
            return Err(bad("bad end magic (truncated or not a snapshot)".into()));
        }
        let len = BigEndian::read_u64(&t[0..8]);
        if len != self.body_len {
            return Err(bad(format!(
                "trailer says {len} body bytes, file has {}",
                self.body_len
            )));
        }
        let crc = BigEndian::read_u32(&t[8..12]);
        if crc != self.crc {
            return Err(bad(format!(
                "checksum mismatch: stored {crc:#010x}, computed {:#010x}",
                self.crc
            )));
        }
        self.verified = true;
        Ok(())
    }
}

impl Read for SnapshotReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.remaining == 0 {
            self.verify()?;
            return Ok(0);
        }
        let want = buf
            .len()
            .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        let n = self.input.read(&mut buf[..want])?;
        if n == 0 && want > 0 {
            let offset = self.body_start + self.body_len - self.remaining;
            return Err(StoreError::BadSnapshot {
                path: self.info.path.clone(),
                offset,
                reason: "file ended inside the body".into(),
            }
            .into());
        }
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        self.remaining -= n as u64;
        if self.remaining == 0 {
            self.verify()?;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full disk while a snapshot is written (a SNAP received, a background snapshot) is
    /// reported with the file's path (crate INV-1), and keeps its kind for callers.
    #[test]
    fn a_write_error_names_the_snapshot_file() {
        let Ok(full) = OpenOptions::new().write(true).open("/dev/full") else {
            println!("SKIP a_write_error_names_the_snapshot_file: no /dev/full");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let mut w = SnapshotWriter::create(dir.path(), Zxid(7), 1, None, true).unwrap();
        let tmp = w.tmp.clone();
        w.out = Some(BufWriter::with_capacity(
            BUF_LEN,
            WritebackFile::new(full, true),
        ));
        let e = w
            .write_all(&vec![0u8; BUF_LEN + 1])
            .and_then(|()| w.flush())
            .unwrap_err();
        let text = e.to_string();
        assert!(text.contains(&tmp.display().to_string()), "{text}");
        assert!(text.contains("No space left on device"), "{text}");
        assert_eq!(e.kind(), io::Error::from_raw_os_error(28).kind());
    }

    /// A snapshot that cannot be finished (its last bytes or its sync fail) leaves no temp
    /// file behind: each failed background snapshot would otherwise keep a full copy of the
    /// state on a disk that is already in trouble.
    #[test]
    fn a_failed_finish_removes_the_temp_file() {
        let Ok(full) = OpenOptions::new().write(true).open("/dev/full") else {
            println!("SKIP a_failed_finish_removes_the_temp_file: no /dev/full");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let mut w = SnapshotWriter::create(dir.path(), Zxid(7), 1, None, true).unwrap();
        let (tmp, path) = (w.tmp.clone(), w.info.path.clone());
        assert!(tmp.exists());
        w.out = Some(BufWriter::with_capacity(
            BUF_LEN,
            WritebackFile::new(full, true),
        ));
        let e = w.finish().unwrap_err();
        assert!(e.to_string().contains("No space left on device"), "{e}");
        assert!(!tmp.exists(), "{} left behind", tmp.display());
        assert!(!path.exists());
    }
}
