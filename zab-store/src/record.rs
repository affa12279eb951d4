//! The txn log record codec: pure functions over byte slices, no I/O.
//!
//! ```text
//! offset  size  field
//!      0     4  len        payload length in bytes (big-endian, like every integer here)
//!      4     4  head_crc   CRC32C of bytes 0..4 and 8..20 (len, data_crc, zxid)
//!      8     4  data_crc   CRC32C of the payload
//!     12     8  zxid       the txn's zxid, never 0
//!     20   len  payload
//! ```
//! Two checksums instead of one: a valid `head_crc` means the length can be trusted even when
//! the payload is damaged, so recovery can look past a bad payload and tell a torn tail (nothing
//! valid after it) from corruption in the middle (valid records after it).
//!
//! INV-1: a 20-byte all-zero header never decodes as a record (its `head_crc` would have to be
//! CRC32C of twelve zero bytes, which is not zero), so zero-filled preallocated space reads as
//! "end of log" and never as a record.
//! INV-2: `decode` never reads outside the slice it is given and never panics.

use byteorder::{BigEndian, ByteOrder};
use zab_core::Zxid;

/// Size of a record header.
pub const HEADER_LEN: usize = 20;

/// The largest payload the format can describe.
pub const MAX_PAYLOAD_LEN: usize = u32::MAX as usize - HEADER_LEN;

/// What the bytes at some offset of a segment are.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A valid record.
    Record {
        /// Its zxid.
        zxid: Zxid,
        /// Its payload.
        payload: &'a [u8],
    },
    /// A zero-filled header: the end of the written part of the segment.
    Zero,
    /// Fewer than [`HEADER_LEN`] bytes are left: the segment is full.
    Full,
    /// The header's checksum does not match (a torn or damaged header).
    BadHeader,
    /// The header is valid but the record does not fit in what is left of the segment.
    Overflow {
        /// The header's zxid.
        zxid: Zxid,
        /// Total record length the header claims.
        total_len: usize,
    },
    /// The header is valid but the payload's checksum does not match.
    BadPayload {
        /// The header's zxid.
        zxid: Zxid,
        /// Total record length (header included), trusted because the header is valid.
        total_len: usize,
    },
}

/// Total on-disk size of a record with a `payload_len`-byte payload.
pub fn encoded_len(payload_len: usize) -> usize {
    HEADER_LEN + payload_len
}

fn head_crc(header: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&header[0..4]);
    crc32c::crc32c_append(crc, &header[8..HEADER_LEN])
}

/// Writes the record into `out`, which must be exactly `encoded_len(payload.len())` long and
/// the payload no longer than [`MAX_PAYLOAD_LEN`] (the caller checks both).
pub fn encode_into(out: &mut [u8], zxid: Zxid, payload: &[u8]) {
    let (header, body) = out.split_at_mut(HEADER_LEN);
    BigEndian::write_u32(&mut header[0..4], payload.len() as u32);
    BigEndian::write_u32(&mut header[8..12], crc32c::crc32c(payload));
    BigEndian::write_u64(&mut header[12..20], zxid.0);
    let crc = head_crc(header);
    BigEndian::write_u32(&mut header[4..8], crc);
    body.copy_from_slice(payload);
}

/// Decodes the record at the start of `buf` (the rest of a segment).
pub fn decode(buf: &[u8]) -> Decoded<'_> {
    if buf.len() < HEADER_LEN {
        return Decoded::Full;
    }
    let header = &buf[..HEADER_LEN];
    if header.iter().all(|&b| b == 0) {
        return Decoded::Zero;
    }
    if BigEndian::read_u32(&header[4..8]) != head_crc(header) {
        return Decoded::BadHeader;
    }
    let len = BigEndian::read_u32(&header[0..4]) as usize;
    let zxid = Zxid(BigEndian::read_u64(&header[12..20]));
    if zxid == Zxid::ZERO {
        return Decoded::BadHeader;
    }
    let total_len = HEADER_LEN.saturating_add(len);
    let Some(payload) = buf.get(HEADER_LEN..total_len) else {
        return Decoded::Overflow { zxid, total_len };
    };
    if crc32c::crc32c(payload) != BigEndian::read_u32(&header[8..12]) {
        return Decoded::BadPayload { zxid, total_len };
    }
    Decoded::Record { zxid, payload }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(zxid: u64, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0; encoded_len(payload.len())];
        encode_into(&mut v, Zxid(zxid), payload);
        v
    }

    #[test]
    fn round_trip() {
        let v = enc(7, b"hello");
        assert_eq!(
            decode(&v),
            Decoded::Record {
                zxid: Zxid(7),
                payload: b"hello"
            }
        );
        let e = enc(8, b"");
        assert_eq!(
            decode(&e),
            Decoded::Record {
                zxid: Zxid(8),
                payload: b""
            }
        );
    }

    #[test]
    fn zero_header_is_end_and_short_is_full() {
        assert_eq!(decode(&[0u8; 64]), Decoded::Zero);
        assert_eq!(decode(&[0u8; 19]), Decoded::Full);
    }

    #[test]
    fn every_single_bit_flip_is_detected() {
        let v = enc(0x1_0000_0003, b"payload bytes");
        for i in 0..v.len() * 8 {
            let mut w = v.clone();
            w[i / 8] ^= 1 << (i % 8);
            assert!(
                !matches!(decode(&w), Decoded::Record { .. }),
                "flip of bit {i} went unnoticed"
            );
        }
    }

    #[test]
    fn bad_payload_keeps_trusted_length() {
        let mut v = enc(5, b"abcdef");
        v[HEADER_LEN + 2] ^= 0xff;
        assert_eq!(
            decode(&v),
            Decoded::BadPayload {
                zxid: Zxid(5),
                total_len: HEADER_LEN + 6
            }
        );
        assert_eq!(
            decode(&v[..HEADER_LEN + 3]),
            Decoded::Overflow {
                zxid: Zxid(5),
                total_len: HEADER_LEN + 6
            }
        );
    }
}
