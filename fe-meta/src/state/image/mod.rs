//! Images: a catalog version streamed to bytes and back (the body of a ZAB snapshot), and the
//! state digest derived from it.
//!
//! ```text
//! header   magic "FEMETAIM" (8) | format version u32 (2) | journal_id u64 | next_id u64
//!          | last_timestamp_ms u64
//! section  tag u8 | record count u64 | count × (record length u32 | record)
//!          tags in this order, each exactly once: 1 databases, 2 tables, 3 backends,
//!          4 frontends, 5 variables (record = name str | value str), 6 client sessions
//!          (record = client_id u64 | floor u64 | last_active_ms u64 | outcome count u32 |
//!          count × (seq u64 | journal_id u64 | created_id opt<u64>)); entity records as in
//!          `catalog::codec`, in ascending key order (id, sid, name, client id or seq)
//! end      tag u8 0xFF | total records u64 | CRC32C u32 of every byte before it
//! ```
//! Compatibility: this build writes version 2 and reads versions 1 and 2; a version-1 image
//! (written before client sessions existed) has no section 6 and restores with no sessions.
//! INV-1 (bounded memory): writing holds one encoded record and a 64 KiB buffer; reading holds
//! the catalog being built plus one record (at most [`RECORD_LEN_MAX`]) and a 64 KiB buffer —
//! never the whole image, whatever its size.
//! INV-2 (canonical): equal catalogs give identical bytes, so [`digest`] (SHA-256 of the image)
//! compares replicas.
//! INV-3 (strict restore): [`read_image`] returns a catalog only if every byte checks out:
//! magic, version, section order, record bounds, CRC, nothing after the end, and the rebuilt
//! catalog's invariants (no duplicate ids or names, tables in existing databases, ids below
//! next_id). Any failure names the section and record index; it never panics.

use std::io::{self, BufReader, BufWriter, Read, Write};
use zab_net::Zxid;

use bytes::BufMut;
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::state::catalog::{
    Backend, Catalog, Change, Codec, Database, Frontend, Outcome, SessionRecord, Table,
    NAME_LEN_MAX, OUTCOMES_MAX, VALUE_LEN_MAX,
};
use crate::state::journal::ENTRY_LEN_MAX;
use crate::wire::{Put, Reader, WireError};

mod checked_io;

use checked_io::{CrcReader, CrcWriter, HashWriter};

/// The image magic.
pub const IMAGE_MAGIC: &[u8; 8] = b"FEMETAIM";
/// The format version written (and the newest read).
pub const IMAGE_VERSION: u32 = 2;
/// The oldest format version read (no client sessions section).
pub const IMAGE_VERSION_OLDEST: u32 = 1;
/// Largest record.
pub const RECORD_LEN_MAX: usize = ENTRY_LEN_MAX;
const END_TAG: u8 = 0xFF;
const BUF_LEN: usize = 64 * 1024;
const SECTIONS: [(u8, &str); 6] = [
    (1, "databases"),
    (2, "tables"),
    (3, "backends"),
    (4, "frontends"),
    (5, "variables"),
    (6, "client sessions"),
];
const SESSIONS_TAG: u8 = 6;

/// Why an image could not be written or read.
#[derive(Debug, Error)]
pub enum ImageError {
    /// The underlying stream failed.
    #[error("image I/O error at byte {offset}: {source}")]
    Io {
        /// Bytes transferred before the failure.
        offset: u64,
        /// The error.
        source: io::Error,
    },
    /// The stream ended early.
    #[error("image truncated at byte {offset} (in {section})")]
    Truncated {
        /// Bytes read.
        offset: u64,
        /// Where.
        section: &'static str,
    },
    /// Not an image.
    #[error("not a fe-meta image: bad magic {found:?}")]
    BadMagic {
        /// The first bytes.
        found: [u8; 8],
    },
    /// An image format this build does not read.
    #[error(
        "image format version {found} is not supported (this build reads \
         {IMAGE_VERSION_OLDEST} to {IMAGE_VERSION})"
    )]
    UnsupportedVersion {
        /// The version found.
        found: u32,
    },
    /// A section tag out of order.
    #[error("image section {index}: expected tag {expected}, found {found}")]
    BadSection {
        /// Position of the section.
        index: usize,
        /// The tag expected.
        expected: u8,
        /// The tag found.
        found: u8,
    },
    /// A record over the length limit.
    #[error("image {section} record {index}: length {len} over the limit of {RECORD_LEN_MAX}")]
    RecordTooLong {
        /// Section.
        section: &'static str,
        /// Record index in the section.
        index: u64,
        /// Declared length.
        len: usize,
    },
    /// A record that does not decode.
    #[error("image {section} record {index}: {source}")]
    Record {
        /// Section.
        section: &'static str,
        /// Record index in the section.
        index: u64,
        /// What is wrong.
        source: WireError,
    },
    /// A record that contradicts the ones before it.
    #[error("image {section} record {index} is inconsistent: {why}")]
    Inconsistent {
        /// Section.
        section: &'static str,
        /// Record index in the section.
        index: u64,
        /// What is wrong.
        why: String,
    },
    /// The end marker or totals are wrong.
    #[error("image end: {0}")]
    BadEnd(String),
    /// The checksum does not match.
    #[error("image checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// In the image.
        stored: u32,
        /// Over the bytes read.
        computed: u32,
    },
}

/// Writes `catalog` as an image to `out` (buffered internally); returns the bytes written.
pub fn write_image<W: Write>(catalog: &Catalog, out: W) -> Result<u64, ImageError> {
    let mut w = CrcWriter {
        inner: BufWriter::with_capacity(BUF_LEN, out),
        crc: 0,
        offset: 0,
    };
    let mut head = Vec::with_capacity(40);
    head.extend_from_slice(IMAGE_MAGIC);
    head.extend_from_slice(&IMAGE_VERSION.to_be_bytes());
    head.extend_from_slice(&catalog.journal_id().0.to_be_bytes());
    head.extend_from_slice(&catalog.next_id().to_be_bytes());
    head.extend_from_slice(&catalog.last_timestamp_ms().to_be_bytes());
    w.put(&head)?;

    let mut rec = Vec::with_capacity(256);
    let mut total = 0u64;
    let c = catalog;
    let [dbs, tables, backends, frontends, vars] = c.counts();
    total += write_section(&mut w, &mut rec, 1, dbs, c.databases())?;
    total += write_section(&mut w, &mut rec, 2, tables, c.tables())?;
    total += write_section(&mut w, &mut rec, 3, backends, c.backends())?;
    total += write_section(&mut w, &mut rec, 4, frontends, c.frontends())?;
    let var_items = c.vars().map(|(name, value)| Var(name, value));
    total += write_section(&mut w, &mut rec, 5, vars, var_items)?;
    let sessions = c.sessions();
    let session_items = sessions.iter().map(|(id, r)| SessionItem(id, r));
    total += write_section(
        &mut w,
        &mut rec,
        SESSIONS_TAG,
        sessions.len(),
        session_items,
    )?;
    w.put(&[END_TAG])?;
    w.put(&total.to_be_bytes())?;
    let crc = w.crc;
    w.put(&crc.to_be_bytes())?;
    w.inner.flush().map_err(|source| ImageError::Io {
        offset: w.offset,
        source,
    })?;
    Ok(w.offset)
}

/// Restores a catalog from an image read from `input` (buffered internally), checking INV-3.
pub fn read_image<R: Read>(input: R) -> Result<Catalog, ImageError> {
    let mut r = CrcReader {
        inner: BufReader::with_capacity(BUF_LEN, input),
        crc: 0,
        offset: 0,
    };
    let mut head = [0u8; 36];
    r.fill(&mut head, "header")?;
    let mut magic = [0u8; 8];
    magic.copy_from_slice(&head[..8]);
    if &magic != IMAGE_MAGIC {
        return Err(ImageError::BadMagic { found: magic });
    }
    let be64 = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&head[at..at + 8]);
        u64::from_be_bytes(b)
    };
    let version = u32::from_be_bytes([head[8], head[9], head[10], head[11]]);
    if !(IMAGE_VERSION_OLDEST..=IMAGE_VERSION).contains(&version) {
        return Err(ImageError::UnsupportedVersion { found: version });
    }
    let sections = match version {
        1 => &SECTIONS[..5],
        _ => &SECTIONS[..],
    };
    let (journal_id, next_id, timestamp_ms) = (be64(12), be64(20), be64(28));
    let mut cat = Catalog::new();
    cat.set_journal_id(Zxid(journal_id));
    cat.set_last_timestamp_ms(timestamp_ms);
    cat.raise_next_id(next_id);
    let mut total = 0u64;
    for (index, &(tag, section)) in sections.iter().enumerate() {
        total += read_section(&mut r, &mut cat, index, tag, section)?;
    }
    read_end(&mut r, total)?;
    if cat.next_id() != next_id.max(crate::state::catalog::FIRST_ID) {
        return Err(ImageError::Inconsistent {
            section: "header",
            index: 0,
            why: format!("next_id {next_id} is not above every id in the image"),
        });
    }
    Ok(cat)
}

/// Reads section `index` (its tag, its count, its records) into `cat`; the number of records.
fn read_section<R: Read>(
    r: &mut CrcReader<R>,
    cat: &mut Catalog,
    index: usize,
    tag: u8,
    section: &'static str,
) -> Result<u64, ImageError> {
    let mut t = [0u8; 9];
    r.fill(&mut t, section)?;
    if t[0] != tag {
        return Err(ImageError::BadSection {
            index,
            expected: tag,
            found: t[0],
        });
    }
    let mut count = [0u8; 8];
    count.copy_from_slice(&t[1..]);
    let count = u64::from_be_bytes(count);
    let mut buf = Vec::new();
    for i in 0..count {
        read_record(r, &mut buf, section, i)?;
        let change = restore_record(cat, tag, &buf).map_err(|source| ImageError::Record {
            section,
            index: i,
            source,
        })?;
        if let Change::Ignored(why) = change {
            return Err(ImageError::Inconsistent {
                section,
                index: i,
                why: why.to_owned(),
            });
        }
    }
    Ok(count)
}

/// The SHA-256 of `catalog`'s image (INV-2): equal on replicas that applied the same journal.
pub fn digest(catalog: &Catalog) -> Result<[u8; 32], ImageError> {
    let mut h = HashWriter(Sha256::new());
    write_image(catalog, &mut h)?;
    Ok(h.0.finalize().into())
}

/// `digest` as lowercase hex.
pub fn digest_hex(digest: &[u8; 32]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

trait Enc {
    fn enc(&self, out: &mut Vec<u8>);
}

impl<T: Codec> Enc for &T {
    fn enc(&self, out: &mut Vec<u8>) {
        self.encode(out);
    }
}

struct SessionItem<'a>(u64, &'a SessionRecord);

impl Enc for SessionItem<'_> {
    fn enc(&self, out: &mut Vec<u8>) {
        let SessionItem(client_id, rec) = self;
        out.put_u64(*client_id);
        out.put_u64(rec.floor);
        out.put_u64(rec.last_active_ms);
        out.put_len(rec.outcomes.len());
        for (seq, o) in &rec.outcomes {
            out.put_u64(*seq);
            out.put_u64(o.journal_id.0);
            out.put_opt_u64(o.created_id);
        }
    }
}

fn restore_session(cat: &mut Catalog, r: &mut Reader<'_>) -> Result<Change, WireError> {
    let client_id = r.u64("client id")?;
    let mut rec = SessionRecord {
        floor: r.u64("session floor")?,
        last_active_ms: r.u64("session last_active_ms")?,
        ..SessionRecord::default()
    };
    let count = r.len("outcome count", OUTCOMES_MAX)?;
    for _ in 0..count {
        let seq = r.u64("outcome seq")?;
        let outcome = Outcome {
            journal_id: Zxid(r.u64("outcome journal id")?),
            created_id: r.opt_u64("outcome created id")?,
        };
        if rec.outcomes.insert(seq, outcome).is_some() {
            return Ok(Change::Ignored("a session outcome appears twice"));
        }
    }
    Ok(match cat.sessions_mut().restore(client_id, rec) {
        Ok(()) => Change::Applied,
        Err(_) => Change::Ignored(
            "session record repeats a client, has an outcome below its floor, or is over a limit",
        ),
    })
}

struct Var<'a>(&'a str, &'a str);

impl Enc for Var<'_> {
    fn enc(&self, out: &mut Vec<u8>) {
        out.put_str(self.0);
        out.put_str(self.1);
    }
}

fn write_section<W: Write, T: Enc>(
    w: &mut CrcWriter<W>,
    rec: &mut Vec<u8>,
    tag: u8,
    count: usize,
    items: impl Iterator<Item = T>,
) -> Result<u64, ImageError> {
    w.put(&[tag])?;
    w.put(&(count as u64).to_be_bytes())?;
    let mut written = 0u64;
    for item in items {
        rec.clear();
        item.enc(rec);
        w.put(&u32::try_from(rec.len()).unwrap_or(u32::MAX).to_be_bytes())?;
        w.put(rec)?;
        written += 1;
    }
    Ok(written)
}

fn restore_record(cat: &mut Catalog, tag: u8, rec: &[u8]) -> Result<Change, WireError> {
    let mut r = Reader::new(rec);
    let change = match tag {
        1 => cat.create_db(Database::decode(&mut r)?),
        2 => cat.create_table(Table::decode(&mut r)?),
        3 => cat.add_backend(Backend::decode(&mut r)?),
        4 => {
            let fe = Frontend::decode(&mut r)?;
            if cat.frontend(fe.sid).is_some() {
                Change::Ignored("frontend sid appears twice")
            } else {
                cat.put_frontend(fe)
            }
        }
        SESSIONS_TAG => restore_session(cat, &mut r)?,
        _ => {
            let name = r.str("variable name", NAME_LEN_MAX)?;
            let value = r.str("variable value", VALUE_LEN_MAX)?;
            if cat.var(&name).is_some() {
                Change::Ignored("variable appears twice")
            } else {
                cat.set_var(&name, &value)
            }
        }
    };
    r.finish()?;
    Ok(change)
}

fn read_record<R: Read>(
    r: &mut CrcReader<R>,
    buf: &mut Vec<u8>,
    section: &'static str,
    index: u64,
) -> Result<(), ImageError> {
    let mut len = [0u8; 4];
    r.fill(&mut len, section)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > RECORD_LEN_MAX {
        return Err(ImageError::RecordTooLong {
            section,
            index,
            len,
        });
    }
    buf.resize(len, 0);
    r.fill(buf, section)
}

fn read_end<R: Read>(r: &mut CrcReader<R>, total: u64) -> Result<(), ImageError> {
    let mut end = [0u8; 9];
    r.fill(&mut end, "end")?;
    if end[0] != END_TAG {
        return Err(ImageError::BadEnd(format!(
            "expected tag 0xff, found {:#04x}",
            end[0]
        )));
    }
    let mut n = [0u8; 8];
    n.copy_from_slice(&end[1..]);
    let stated = u64::from_be_bytes(n);
    if stated != total {
        return Err(ImageError::BadEnd(format!(
            "states {stated} records, {total} were read"
        )));
    }
    let computed = r.crc;
    let mut crc = [0u8; 4];
    r.fill(&mut crc, "end")?;
    let stored = u32::from_be_bytes(crc);
    if stored != computed {
        return Err(ImageError::Checksum { stored, computed });
    }
    let mut extra = [0u8; 1];
    match r.inner.read(&mut extra) {
        Ok(0) => Ok(()),
        Ok(_) => Err(ImageError::BadEnd(
            "bytes follow the end of the image".into(),
        )),
        Err(source) => Err(ImageError::Io {
            offset: r.offset,
            source,
        }),
    }
}
