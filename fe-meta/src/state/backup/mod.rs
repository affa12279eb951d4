//! Backup files: one catalog image (`image`) at a committed journal id, with the facts needed
//! to check it and to restore it into a new cluster (`fe-meta backup`, `fe-meta restore`).
//!
//! ```text
//! header   magic "FEMETABK" (8) | format version u32 (1) | source cluster id u64
//!          | journal_id u64 | entry_count u64 | digest [32] | image_len u64
//!          | created_ms u64 | CRC32C u32 of the header bytes before it      (88 bytes)
//! body     the catalog image, exactly image_len bytes (`image` format)
//! trailer  CRC32C u32 of every byte before it (header and body)
//! ```
//! The digest is the SHA-256 of the body (`image` INV-2: the catalog's digest, as DIGEST
//! reports it), so a backup compares with a running cluster's `fe-meta digest`.
//!
//! INV-1 (whole file first): [`verify_backup`] accepts a file only if magic, version, header
//! CRC, total length (header + image_len + trailer, nothing more or less), trailer CRC, the
//! image's own checks (`image` INV-3), the recomputed digest and the header's journal id and
//! entry count all agree. Every failure is one [`BackupError`] variant naming what is wrong;
//! nothing panics on any input.
//! INV-2 (bounded memory): writing holds the image encoder's buffers only (the image is
//! encoded twice: once to learn its digest and length for the header, once into the file);
//! verifying reads the file twice (CRC pass, then decode) and holds the decoded catalog.

use std::io::{self, Read, Seek, SeekFrom, Write};

use sha2::{Digest, Sha256};
use thiserror::Error;
use zab_net::Zxid;

use crate::state::catalog::Catalog;
use crate::state::image::{digest_hex, read_image, write_image, ImageError};

#[cfg(test)]
mod tests;

/// The backup magic.
pub const BACKUP_MAGIC: &[u8; 8] = b"FEMETABK";
/// The format version written and read.
pub const BACKUP_VERSION: u32 = 1;
/// Bytes before the body.
pub const HEADER_LEN: u64 = 88;
/// Bytes after the body.
pub const TRAILER_LEN: u64 = 4;
const COPY_BUF: usize = 64 * 1024;

/// What a backup file's header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackupHeader {
    /// The cluster the image was taken from.
    pub cluster_id: u64,
    /// The committed journal id (zxid) the image is at.
    pub journal_id: Zxid,
    /// Entries in the catalog.
    pub entry_count: u64,
    /// SHA-256 of the image: the catalog digest at `journal_id`.
    pub digest: [u8; 32],
    /// Length of the image.
    pub image_len: u64,
    /// When the backup was taken (ms since the Unix epoch, the server's clock).
    pub created_ms: u64,
}

impl BackupHeader {
    /// The whole file's length.
    pub fn file_len(&self) -> u64 {
        self.image_len.saturating_add(HEADER_LEN + TRAILER_LEN)
    }

    /// The digest in lowercase hex.
    pub fn digest_hex(&self) -> String {
        digest_hex(&self.digest)
    }

    fn encode(&self) -> [u8; HEADER_LEN as usize] {
        let mut h = [0u8; HEADER_LEN as usize];
        h[0..8].copy_from_slice(BACKUP_MAGIC);
        h[8..12].copy_from_slice(&BACKUP_VERSION.to_be_bytes());
        h[12..20].copy_from_slice(&self.cluster_id.to_be_bytes());
        h[20..28].copy_from_slice(&self.journal_id.0.to_be_bytes());
        h[28..36].copy_from_slice(&self.entry_count.to_be_bytes());
        h[36..68].copy_from_slice(&self.digest);
        h[68..76].copy_from_slice(&self.image_len.to_be_bytes());
        h[76..84].copy_from_slice(&self.created_ms.to_be_bytes());
        let crc = crc32c::crc32c(&h[0..84]);
        h[84..88].copy_from_slice(&crc.to_be_bytes());
        h
    }

    fn decode(h: &[u8; HEADER_LEN as usize]) -> Result<BackupHeader, BackupError> {
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[at..at + 8]);
            u64::from_be_bytes(b)
        };
        if &h[0..8] != BACKUP_MAGIC {
            let mut found = [0u8; 8];
            found.copy_from_slice(&h[0..8]);
            return Err(BackupError::BadMagic { found });
        }
        let version = u32::from_be_bytes([h[8], h[9], h[10], h[11]]);
        if version != BACKUP_VERSION {
            return Err(BackupError::UnsupportedVersion { found: version });
        }
        let stored = u32::from_be_bytes([h[84], h[85], h[86], h[87]]);
        let computed = crc32c::crc32c(&h[0..84]);
        if stored != computed {
            return Err(BackupError::HeaderCrc { stored, computed });
        }
        let mut digest = [0u8; 32];
        digest.copy_from_slice(&h[36..68]);
        Ok(BackupHeader {
            cluster_id: u64_at(12),
            journal_id: Zxid(u64_at(20)),
            entry_count: u64_at(28),
            digest,
            image_len: u64_at(68),
            created_ms: u64_at(76),
        })
    }
}

/// Why a backup could not be written or is refused.
#[derive(Debug, Error)]
pub enum BackupError {
    /// Reading or writing the file failed.
    #[error("backup I/O error: {0}")]
    Io(#[from] io::Error),
    /// Not a backup file.
    #[error("not an fe-meta backup file: bad magic {found:?} (expected \"FEMETABK\")")]
    BadMagic {
        /// The first bytes.
        found: [u8; 8],
    },
    /// A format this build does not read.
    #[error(
        "backup format version {found} is not supported (this build reads version \
         {BACKUP_VERSION}); use the fe-meta release that wrote it"
    )]
    UnsupportedVersion {
        /// The version found.
        found: u32,
    },
    /// The header is damaged.
    #[error(
        "backup header is damaged: CRC32C {stored:#010x} stored, {computed:#010x} computed; \
         the file cannot be used, take a new backup"
    )]
    HeaderCrc {
        /// As stored.
        stored: u32,
        /// As computed.
        computed: u32,
    },
    /// The file is shorter than its header says.
    #[error(
        "backup file is truncated: {found} bytes, the header says {expected}; the copy is \
         incomplete, copy it again or take a new backup"
    )]
    Truncated {
        /// Bytes the header implies.
        expected: u64,
        /// Bytes found.
        found: u64,
    },
    /// The file is longer than its header says.
    #[error(
        "backup file has {found} bytes, the header says {expected}: something was appended; \
         the file cannot be trusted"
    )]
    TrailingBytes {
        /// Bytes the header implies.
        expected: u64,
        /// Bytes found.
        found: u64,
    },
    /// The body or the trailer is damaged.
    #[error(
        "backup file is damaged: CRC32C {stored:#010x} stored in the trailer, {computed:#010x} \
         computed over the file; take a new backup or use another copy"
    )]
    CrcMismatch {
        /// As stored.
        stored: u32,
        /// As computed.
        computed: u32,
    },
    /// The image does not decode.
    #[error("backup image is invalid: {0}")]
    Image(#[from] ImageError),
    /// The image's digest is not the header's.
    #[error(
        "backup digest mismatch: the header says {expected}, the image digests to {found}; \
         the file cannot be trusted"
    )]
    DigestMismatch {
        /// The header's digest, hex.
        expected: String,
        /// The recomputed digest, hex.
        found: String,
    },
    /// The image is not at the header's journal id or entry count.
    #[error("backup header says {what} {expected}, the image has {found}")]
    HeaderMismatch {
        /// Which field.
        what: &'static str,
        /// The header's value.
        expected: String,
        /// The image's value.
        found: String,
    },
}

/// The header `catalog`'s backup gets (encodes the image once to learn its digest and length).
pub fn header_of(
    catalog: &Catalog,
    cluster_id: u64,
    created_ms: u64,
) -> Result<BackupHeader, BackupError> {
    let mut sink = Counted {
        hash: Sha256::new(),
        len: 0,
    };
    write_image(catalog, &mut sink)?;
    Ok(BackupHeader {
        cluster_id,
        journal_id: catalog.journal_id(),
        entry_count: catalog.entry_count(),
        digest: sink.hash.finalize().into(),
        image_len: sink.len,
        created_ms,
    })
}

/// Writes `catalog`'s backup file, taken from cluster `cluster_id`, to `out`; its header.
pub fn write_backup<W: Write>(
    catalog: &Catalog,
    cluster_id: u64,
    created_ms: u64,
    out: W,
) -> Result<BackupHeader, BackupError> {
    let header = header_of(catalog, cluster_id, created_ms)?;
    write_with_header(catalog, &header, out)?;
    Ok(header)
}

/// Writes `header` then `catalog`'s image then the trailer (the header is not checked: tests
/// use this to make files whose header lies).
pub fn write_with_header<W: Write>(
    catalog: &Catalog,
    header: &BackupHeader,
    out: W,
) -> Result<(), BackupError> {
    let mut w = CrcOut { inner: out, crc: 0 };
    w.write_all(&header.encode())?;
    write_image(catalog, &mut w)?;
    let crc = w.crc;
    w.inner.write_all(&crc.to_be_bytes())?;
    w.inner.flush()?;
    Ok(())
}

/// Reads and checks only the header of the backup in `input` (magic, version, header CRC).
pub fn read_header<R: Read>(mut input: R) -> Result<BackupHeader, BackupError> {
    let mut h = [0u8; HEADER_LEN as usize];
    let mut got = 0;
    while got < h.len() {
        match input.read(&mut h[got..])? {
            0 => break,
            n => got += n,
        }
    }
    if got >= 8 && &h[0..8] != BACKUP_MAGIC {
        let mut found = [0u8; 8];
        found.copy_from_slice(&h[0..8]);
        return Err(BackupError::BadMagic { found });
    }
    if got < h.len() {
        return Err(BackupError::Truncated {
            expected: HEADER_LEN + TRAILER_LEN,
            found: got as u64,
        });
    }
    BackupHeader::decode(&h)
}

/// Verifies the whole backup in `input` (INV-1) and returns its header and catalog.
pub fn verify_backup<R: Read + Seek>(mut input: R) -> Result<(BackupHeader, Catalog), BackupError> {
    let found = input.seek(SeekFrom::End(0))?;
    input.seek(SeekFrom::Start(0))?;
    let header = read_header(&mut input)?;
    let expected = header.image_len.saturating_add(HEADER_LEN + TRAILER_LEN);
    if found < expected {
        return Err(BackupError::Truncated { expected, found });
    }
    if found > expected {
        return Err(BackupError::TrailingBytes { expected, found });
    }
    check_crc(&mut input, &header)?;
    input.seek(SeekFrom::Start(HEADER_LEN))?;
    let catalog = read_image((&mut input).take(header.image_len))?;
    check_catalog(&header, &catalog)?;
    Ok((header, catalog))
}

/// The CRC pass: every byte before the trailer against the trailer.
fn check_crc<R: Read + Seek>(input: &mut R, header: &BackupHeader) -> Result<(), BackupError> {
    input.seek(SeekFrom::Start(0))?;
    let mut left = HEADER_LEN + header.image_len;
    let mut buf = vec![0u8; COPY_BUF];
    let mut crc = 0u32;
    while left > 0 {
        let want = usize::try_from(left.min(COPY_BUF as u64)).unwrap_or(COPY_BUF);
        input.read_exact(&mut buf[..want])?;
        crc = crc32c::crc32c_append(crc, &buf[..want]);
        left -= want as u64;
    }
    let mut t = [0u8; 4];
    input.read_exact(&mut t)?;
    let stored = u32::from_be_bytes(t);
    if stored != crc {
        return Err(BackupError::CrcMismatch {
            stored,
            computed: crc,
        });
    }
    Ok(())
}

/// The decoded catalog against the header: digest, journal id, entry count.
fn check_catalog(header: &BackupHeader, catalog: &Catalog) -> Result<(), BackupError> {
    let digest = crate::state::image::digest(catalog)?;
    if digest != header.digest {
        return Err(BackupError::DigestMismatch {
            expected: header.digest_hex(),
            found: digest_hex(&digest),
        });
    }
    if catalog.journal_id() != header.journal_id {
        return Err(BackupError::HeaderMismatch {
            what: "journal id",
            expected: header.journal_id.to_string(),
            found: catalog.journal_id().to_string(),
        });
    }
    if catalog.entry_count() != header.entry_count {
        return Err(BackupError::HeaderMismatch {
            what: "entry count",
            expected: header.entry_count.to_string(),
            found: catalog.entry_count().to_string(),
        });
    }
    Ok(())
}

/// A sink that hashes and counts.
struct Counted {
    hash: Sha256,
    len: u64,
}

impl Write for Counted {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.hash.update(buf);
        self.len += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A writer keeping the CRC32C of what passed.
struct CrcOut<W: Write> {
    inner: W,
    crc: u32,
}

impl<W: Write> Write for CrcOut<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}
