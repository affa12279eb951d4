//! The txn log record codec: pure functions over byte slices, no I/O.
//!
//! ```text
//! offset  size  field
//!      0     4  kind|len   top bit: the txn's kind (1: membership, 0: app); the other 31 bits:
//!                          len, the payload length in bytes (big-endian, like every integer)
//!      4     4  head_crc   CRC32C of bytes 0..4 and 8..20 (kind|len, data_crc, zxid)
//!      8     4  data_crc   CRC32C of the payload
//!     12     8  zxid       the txn's zxid, never 0
//!     20   len  payload
//! ```
//! Records written before the kind existed have the top bit clear (their length never reached
//! 2^31) and read as app txns, unchanged.
//! Two checksums instead of one: a valid `head_crc` means the length can be trusted even when
//! the payload is damaged, so recovery can look past a bad payload and tell a torn tail (nothing
//! valid after it) from corruption in the middle (valid records after it).
//!
//! INV-1: a 20-byte all-zero header never decodes as a record (its `head_crc` would have to be
//! CRC32C of twelve zero bytes, which is not zero), so zero-filled preallocated space reads as
//! "end of log" and never as a record.
//! INV-2: `decode` never reads outside the slice it is given and never panics.
//! INV-3: the kind is covered by `head_crc`: a flipped kind bit is a bad header, never a txn
//! of the other kind.

use byteorder::{BigEndian, ByteOrder};
use zab_core::{TxnKind, Zxid};

/// Size of a record header.
pub const HEADER_LEN: usize = 20;

/// The bit of the `kind|len` field that marks a membership txn.
const MEMBERSHIP_FLAG: u32 = 1 << 31;

/// The largest payload the format can describe: a record (header included) fits in the 31
/// length bits.
pub const MAX_PAYLOAD_LEN: usize = (1 << 31) - 1 - HEADER_LEN;

/// What the bytes at some offset of a segment are.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A valid record.
    Record {
        /// Its zxid.
        zxid: Zxid,
        /// What its payload is.
        kind: TxnKind,
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
/// the payload no longer than [`MAX_PAYLOAD_LEN`] (the caller checks both; a longer payload's
/// length would spill into the kind bit).
pub fn encode_into(out: &mut [u8], zxid: Zxid, kind: TxnKind, payload: &[u8]) {
    let (header, body) = out.split_at_mut(HEADER_LEN);
    let flag = match kind {
        TxnKind::App => 0,
        TxnKind::Membership => MEMBERSHIP_FLAG,
    };
    BigEndian::write_u32(&mut header[0..4], flag | payload.len() as u32);
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
    let kind_and_len = BigEndian::read_u32(&header[0..4]);
    let kind = if kind_and_len & MEMBERSHIP_FLAG == 0 {
        TxnKind::App
    } else {
        TxnKind::Membership
    };
    let len = (kind_and_len & !MEMBERSHIP_FLAG) as usize;
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
    Decoded::Record {
        zxid,
        kind,
        payload,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(zxid: u64, kind: TxnKind, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0; encoded_len(payload.len())];
        encode_into(&mut v, Zxid(zxid), kind, payload);
        v
    }

    /// A record laid out by hand, field by field, independent of `encode_into`.
    fn by_hand(kind_and_len: u32, zxid: u64, payload: &[u8]) -> Vec<u8> {
        let mut v = kind_and_len.to_be_bytes().to_vec();
        v.extend_from_slice(&[0; 4]);
        v.extend_from_slice(&crc32c::crc32c(payload).to_be_bytes());
        v.extend_from_slice(&zxid.to_be_bytes());
        let head = crc32c::crc32c_append(crc32c::crc32c(&v[0..4]), &v[8..20]);
        v[4..8].copy_from_slice(&head.to_be_bytes());
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn round_trip_of_both_kinds() {
        for kind in [TxnKind::App, TxnKind::Membership] {
            for payload in [&b"hello"[..], b""] {
                let v = enc(7, kind, payload);
                assert_eq!(
                    decode(&v),
                    Decoded::Record {
                        zxid: Zxid(7),
                        kind,
                        payload
                    }
                );
            }
        }
    }

    /// A record written before the kind existed (top bit clear) reads as an app txn, and an
    /// app record is still written byte for byte as before.
    #[test]
    fn a_record_from_before_the_kind_reads_as_app() {
        let old = by_hand(5, 0x1_0000_0003, b"hello");
        assert_eq!(
            decode(&old),
            Decoded::Record {
                zxid: Zxid(0x1_0000_0003),
                kind: TxnKind::App,
                payload: b"hello"
            }
        );
        assert_eq!(enc(0x1_0000_0003, TxnKind::App, b"hello"), old);
    }

    #[test]
    fn a_membership_record_sets_the_top_bit_of_the_length() {
        let v = enc(9, TxnKind::Membership, b"config");
        assert_eq!(&v[0..4], &[0x80, 0, 0, 6]);
        assert_eq!(v, by_hand(0x8000_0006, 9, b"config"));
    }

    #[test]
    fn the_largest_record_fits_the_31_length_bits() {
        assert_eq!(encoded_len(MAX_PAYLOAD_LEN), (1 << 31) - 1);
        assert_eq!(encoded_len(MAX_PAYLOAD_LEN) as u32 & MEMBERSHIP_FLAG, 0);
    }

    /// A header claiming the longest length, of either kind, is an overflow of the slice,
    /// never a panic (INV-2).
    #[test]
    fn the_longest_claimed_length_is_an_overflow() {
        for flag in [0, MEMBERSHIP_FLAG] {
            let v = by_hand(flag | 0x7fff_ffff, 3, b"");
            assert_eq!(
                decode(&v),
                Decoded::Overflow {
                    zxid: Zxid(3),
                    total_len: HEADER_LEN + 0x7fff_ffff
                }
            );
        }
    }

    #[test]
    fn zero_header_is_end_and_short_is_full() {
        assert_eq!(decode(&[0u8; 64]), Decoded::Zero);
        assert_eq!(decode(&[0u8; 19]), Decoded::Full);
    }

    #[test]
    fn every_single_bit_flip_is_detected() {
        for kind in [TxnKind::App, TxnKind::Membership] {
            let v = enc(0x1_0000_0003, kind, b"payload bytes");
            for i in 0..v.len() * 8 {
                let mut w = v.clone();
                w[i / 8] ^= 1 << (i % 8);
                assert!(
                    !matches!(decode(&w), Decoded::Record { .. }),
                    "{kind:?}: flip of bit {i} went unnoticed"
                );
            }
            // In particular the kind bit (INV-3).
            let mut w = v.clone();
            w[0] ^= 0x80;
            assert_eq!(decode(&w), Decoded::BadHeader, "{kind:?}");
        }
    }

    #[test]
    fn bad_payload_keeps_trusted_length() {
        for kind in [TxnKind::App, TxnKind::Membership] {
            let mut v = enc(5, kind, b"abcdef");
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
}
