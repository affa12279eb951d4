//! The configuration section of a snapshot file (format version 2, see the parent module's
//! format table): a 4-byte length `m`, then, when `m > 0`, the configuration's version zxid
//! (u64) and `Membership::encode()`.
//!
//! INV-1: a section read is never longer than [`MAX_MEMBERSHIP_SECTION_LEN`] nor than what
//! the file has room for before its trailer; the length is checked before any allocation.
//! INV-2: a decoded configuration is never newer than the snapshot's zxid, and bytes that do
//! not decode are an error (the reason string), never a panic.

use std::io::Read;
use std::path::Path;

use byteorder::{BigEndian, ByteOrder};
use zab_core::{Membership, Zxid};

use super::{SNAP_HEADER_LEN, SNAP_TRAILER_LEN};
use crate::error::{Result, StoreError};

/// Size of the configuration section's length field (format version 2).
pub(super) const MEMBERSHIP_LEN_FIELD: usize = 4;
/// Size of the configuration's version field at the start of a non-empty section.
pub(super) const MEMBERSHIP_VERSION_LEN: usize = 8;
/// The longest configuration section accepted (snapshot INV-2, INV-4): about a thousand members with
/// the longest addresses.
pub const MAX_MEMBERSHIP_SECTION_LEN: usize = 1024 * 1024;

/// The configuration section's bytes (without the length field): empty for `None`.
pub(super) fn encode_membership(membership: Option<&Membership>) -> Vec<u8> {
    match membership {
        None => Vec::new(),
        Some(m) => {
            let encoded = m.encode();
            let mut section = Vec::with_capacity(MEMBERSHIP_VERSION_LEN + encoded.len());
            section.extend_from_slice(&m.version.0.to_be_bytes());
            section.extend_from_slice(&encoded);
            section
        }
    }
}

/// Decodes a configuration section (without its length field) of the snapshot at `zxid`;
/// the error is the reason, for [`StoreError::BadSnapshot`] (snapshot INV-4).
pub(super) fn decode_membership(
    zxid: Zxid,
    section: &[u8],
) -> std::result::Result<Option<Membership>, String> {
    if section.is_empty() {
        return Ok(None);
    }
    if section.len() < MEMBERSHIP_VERSION_LEN {
        return Err(format!(
            "configuration section of {} bytes, shorter than its version field",
            section.len()
        ));
    }
    let (version, encoded) = section.split_at(MEMBERSHIP_VERSION_LEN);
    let version = Zxid(BigEndian::read_u64(version));
    if version > zxid {
        return Err(format!(
            "configuration version {version} is newer than the snapshot's zxid {zxid}"
        ));
    }
    Membership::decode(version, encoded)
        .map(Some)
        .map_err(|e| format!("configuration section: {e}"))
}

/// Reads the configuration section of a version-2 file of `size` bytes whose header was read
/// (snapshot INV-4); returns its bytes (without the length field) and `crc` extended over it.
pub(super) fn read_membership_section(
    input: &mut impl Read,
    path: &Path,
    size: u64,
    crc: u32,
) -> Result<(Vec<u8>, u32)> {
    let bad = |offset: u64, reason: String| StoreError::BadSnapshot {
        path: path.to_path_buf(),
        offset,
        reason,
    };
    let field_offset = SNAP_HEADER_LEN as u64;
    let room = size - (SNAP_HEADER_LEN + SNAP_TRAILER_LEN) as u64;
    if room < MEMBERSHIP_LEN_FIELD as u64 {
        return Err(bad(
            field_offset,
            format!("truncated: {size} bytes, no room for the configuration length"),
        ));
    }
    let mut len_field = [0u8; MEMBERSHIP_LEN_FIELD];
    input
        .read_exact(&mut len_field)
        .map_err(|e| StoreError::io("read configuration length", path, e))?;
    let len = BigEndian::read_u32(&len_field);
    if len as usize > MAX_MEMBERSHIP_SECTION_LEN {
        return Err(bad(
            field_offset,
            format!(
                "configuration section of {len} bytes, more than the \
                 {MAX_MEMBERSHIP_SECTION_LEN} allowed"
            ),
        ));
    }
    if u64::from(len) > room - MEMBERSHIP_LEN_FIELD as u64 {
        return Err(bad(
            field_offset,
            format!("truncated: a configuration section of {len} bytes does not fit in {size}"),
        ));
    }
    let mut section = vec![0u8; len as usize];
    input
        .read_exact(&mut section)
        .map_err(|e| StoreError::io("read configuration", path, e))?;
    let crc = crc32c::crc32c_append(crc32c::crc32c_append(crc, &len_field), &section);
    Ok((section, crc))
}
