//! Frames and the start of a connection.
//!
//! A frame is `length u32 (big-endian) | payload`, `length` counting the payload only and at
//! most [`FRAME_LEN_MAX`]. The first four bytes a client sends on a connection are either a
//! frame's length or a four-letter word: four lowercase ASCII letters, answered in text if it is
//! one of `ruok`, `srvr`, `stat`, `mntr` and refused in text otherwise (as ZooKeeper refuses a
//! word off its whitelist). Since `FRAME_LEN_MAX < 0x0500_0000`, a length's first byte is
//! 0x00..=0x04 and never an ASCII letter, so [`classify_start`] is unambiguous.
//!
//! INV-1: [`FrameDecoder::decode`] never panics, never buffers more than one frame plus what
//! the caller handed it, and rejects a length over the limit before reading the payload.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use thiserror::Error;

use super::fourlw::FourLetterWord;

/// Largest frame payload, in bytes (64 MiB).
pub const FRAME_LEN_MAX: usize = 64 * 1024 * 1024;

/// A frame that cannot be accepted; the connection is answered with an error frame and closed.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("frame length {len} is over the limit of {max} bytes")]
pub struct FrameTooLong {
    /// The declared length.
    pub len: u64,
    /// The limit.
    pub max: usize,
}

/// What a connection's first four bytes say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectionStart {
    /// A four-letter word: answer it in text and close the connection.
    FourLetterWord(FourLetterWord),
    /// Four lowercase letters that are no word this server answers: refuse it in text and
    /// close the connection.
    UnknownWord([u8; 4]),
    /// A framed session; the four bytes are the first frame's length.
    Frames,
}

/// Classifies a connection by its first four bytes (see the module docs).
pub fn classify_start(first: [u8; 4]) -> ConnectionStart {
    match FourLetterWord::parse(first) {
        Some(word) => ConnectionStart::FourLetterWord(word),
        None if first.iter().all(u8::is_ascii_lowercase) => ConnectionStart::UnknownWord(first),
        None => ConnectionStart::Frames,
    }
}

/// Appends `payload` as one frame to `out`.
pub fn encode_frame(payload: &[u8], out: &mut Vec<u8>) {
    out.put_u32(u32::try_from(payload.len()).unwrap_or(u32::MAX));
    out.extend_from_slice(payload);
}

/// Splits a byte stream into frame payloads.
#[derive(Clone, Debug)]
pub struct FrameDecoder {
    max: usize,
}

impl Default for FrameDecoder {
    fn default() -> FrameDecoder {
        FrameDecoder::new(FRAME_LEN_MAX)
    }
}

impl FrameDecoder {
    /// A decoder accepting payloads of at most `max` bytes.
    pub fn new(max: usize) -> FrameDecoder {
        FrameDecoder { max }
    }

    /// Takes one whole frame's payload off the front of `buf`; `Ok(None)` if more bytes are
    /// needed (nothing consumed). A length over the limit is an error (nothing consumed).
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Bytes>, FrameTooLong> {
        if buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        if len > self.max {
            return Err(FrameTooLong {
                len: len as u64,
                max: self.max,
            });
        }
        if buf.len() < 4 + len {
            // No reserve for the declared length: four bytes must not make us allocate 64 MiB.
            return Ok(None);
        }
        buf.advance(4);
        Ok(Some(buf.split_to(len).freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_and_limits_hold() {
        let mut out = Vec::new();
        encode_frame(b"abc", &mut out);
        encode_frame(b"", &mut out);
        let mut buf = BytesMut::from(&out[..5]);
        let d = FrameDecoder::new(8);
        assert_eq!(d.decode(&mut buf).unwrap(), None);
        buf.extend_from_slice(&out[5..]);
        assert_eq!(d.decode(&mut buf).unwrap().unwrap(), &b"abc"[..]);
        assert_eq!(d.decode(&mut buf).unwrap().unwrap(), &b""[..]);
        assert_eq!(d.decode(&mut buf).unwrap(), None);
        let mut big = BytesMut::from(&[0u8, 0, 0, 9][..]);
        assert_eq!(d.decode(&mut big), Err(FrameTooLong { len: 9, max: 8 }));
    }

    #[test]
    fn four_letter_words_are_told_from_lengths() {
        assert_eq!(
            classify_start(*b"ruok"),
            ConnectionStart::FourLetterWord(FourLetterWord::Ruok)
        );
        assert_eq!(
            classify_start(*b"mntr"),
            ConnectionStart::FourLetterWord(FourLetterWord::Mntr)
        );
        assert_eq!(classify_start([0, 0, 0, 12]), ConnectionStart::Frames);
        assert_eq!(
            classify_start(*b"kill"),
            ConnectionStart::UnknownWord(*b"kill")
        );
        assert_eq!(classify_start(*b"Envi"), ConnectionStart::Frames);
        let max = (FRAME_LEN_MAX as u32).to_be_bytes();
        assert!(max[0] < b'a');
    }
}
