//! Length-prefixed framing of [`Message`]s for tokio-util's `Framed`.
//!
//! ```text
//! frame = len:u32 (big-endian) body[len]      body = zab_core::codec encoding of one Message
//! ```
//!
//! INV-1: the decoder never buffers more than `4 + max_frame_len` bytes of one frame: the length
//! is checked before any body byte is awaited, so a peer cannot make us allocate by lying.
//! INV-2: every error is fatal for the connection it came from and for nothing else: after an
//! `Err` the stream is out of sync and the caller must drop the connection (tokio-util's
//! `FramedRead` ends the stream after an error); the codec holds no state shared between
//! connections.
//! INV-3: the encoder refuses (rather than writes) a message whose frame would exceed
//! `max_frame_len`, so we never send what a peer configured like us would reject.

use byteorder::{BigEndian, ByteOrder};
use bytes::{Buf, BufMut, BytesMut};
use thiserror::Error;
use tokio_util::codec::{Decoder, Encoder};
use zab_core::codec::{self, DecodeError, EncodeError, MAX_MESSAGE_LEN};
use zab_core::Message;

/// The length prefix's size.
pub const LEN_PREFIX: usize = 4;

/// Why a frame could not be read or written. Every variant closes the connection.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The socket failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// A length prefix of zero: no message encodes to nothing.
    #[error("empty frame (length 0)")]
    Empty,
    /// A length prefix above the maximum.
    #[error("frame of {len} bytes exceeds the maximum of {max}")]
    TooLarge {
        /// The declared or actual length.
        len: usize,
        /// The configured maximum.
        max: usize,
    },
    /// The body is not a valid message.
    #[error("undecodable frame: {0}")]
    Decode(#[from] DecodeError),
    /// The message cannot be encoded.
    #[error("unencodable message: {0}")]
    Encode(#[from] EncodeError),
}

/// A codec of [`Message`] frames with an explicit maximum body length.
#[derive(Clone, Copy, Debug)]
pub struct FrameCodec {
    max_frame_len: usize,
}

impl FrameCodec {
    /// A codec that accepts bodies of up to `max_frame_len` bytes (capped at `u32::MAX`).
    pub fn new(max_frame_len: usize) -> FrameCodec {
        FrameCodec {
            max_frame_len: max_frame_len.min(u32::MAX as usize),
        }
    }

    /// The largest body this codec reads or writes.
    pub fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }
}

impl Default for FrameCodec {
    /// Room for the largest message the codec can encode.
    fn default() -> FrameCodec {
        FrameCodec::new(MAX_MESSAGE_LEN)
    }
}

impl Decoder for FrameCodec {
    type Item = Message;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Message>, FrameError> {
        let Some(prefix) = src.get(..LEN_PREFIX) else {
            return Ok(None);
        };
        let len = BigEndian::read_u32(prefix) as usize;
        if len == 0 {
            return Err(FrameError::Empty);
        }
        if len > self.max_frame_len {
            return Err(FrameError::TooLarge {
                len,
                max: self.max_frame_len,
            });
        }
        let total = LEN_PREFIX + len;
        if src.len() < total {
            src.reserve(total - src.len());
            return Ok(None);
        }
        src.advance(LEN_PREFIX);
        let body = src.split_to(len).freeze();
        Ok(Some(codec::decode_shared(&body)?))
    }
}

impl Encoder<Message> for FrameCodec {
    type Error = FrameError;

    fn encode(&mut self, msg: Message, dst: &mut BytesMut) -> Result<(), FrameError> {
        let len = codec::encoded_len(&msg);
        if len > self.max_frame_len {
            return Err(FrameError::TooLarge {
                len,
                max: self.max_frame_len,
            });
        }
        let start = dst.len();
        dst.reserve(LEN_PREFIX + len);
        dst.put_u32(len as u32);
        if let Err(e) = codec::encode(&msg, dst) {
            dst.truncate(start);
            return Err(e.into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use proptest::prelude::*;
    use zab_core::{Txn, Zxid};

    use super::*;

    fn sample() -> Vec<Message> {
        vec![
            Message::Ping { round: 3 },
            Message::Proposal(Txn::app(Zxid(0x1_0000_0001), Bytes::from_static(b"hello"))),
            Message::UpToDate,
            Message::Commit { zxid: Zxid(9) },
        ]
    }

    fn encode_all(msgs: &[Message]) -> BytesMut {
        let mut buf = BytesMut::new();
        let mut c = FrameCodec::default();
        for m in msgs {
            c.encode(m.clone(), &mut buf).unwrap();
        }
        buf
    }

    /// Feeds `bytes` to a decoder `chunk` bytes at a time; stops at the first error.
    fn decode_stream(bytes: &[u8], chunk: usize, max: usize) -> (Vec<Message>, Option<FrameError>) {
        let mut c = FrameCodec::new(max);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for piece in bytes.chunks(chunk.max(1)) {
            buf.extend_from_slice(piece);
            loop {
                match c.decode(&mut buf) {
                    Ok(Some(m)) => out.push(m),
                    Ok(None) => break,
                    Err(e) => return (out, Some(e)),
                }
            }
        }
        (out, None)
    }

    #[test]
    fn frames_round_trip_in_any_chunking() {
        let msgs = sample();
        let bytes = encode_all(&msgs);
        for chunk in [1, 2, 3, 7, 64, 4096] {
            let (out, err) = decode_stream(&bytes, chunk, MAX_MESSAGE_LEN);
            assert!(err.is_none());
            assert_eq!(out, msgs, "chunk {chunk}");
        }
    }

    #[test]
    fn oversized_length_fails_before_the_body_arrives() {
        let mut buf = BytesMut::from(&[0u8, 0, 1, 0][..]);
        let err = FrameCodec::new(100).decode(&mut buf).unwrap_err();
        assert!(matches!(err, FrameError::TooLarge { len: 256, max: 100 }));
        assert_eq!(
            err.to_string(),
            "frame of 256 bytes exceeds the maximum of 100"
        );
    }

    #[test]
    fn zero_length_is_an_error() {
        let mut buf = BytesMut::from(&[0u8, 0, 0, 0][..]);
        assert!(matches!(
            FrameCodec::default().decode(&mut buf),
            Err(FrameError::Empty)
        ));
    }

    #[test]
    fn undecodable_body_is_an_error() {
        let mut buf = BytesMut::from(&[0u8, 0, 0, 2, 1, 250][..]);
        let err = FrameCodec::default().decode(&mut buf).unwrap_err();
        assert!(matches!(
            err,
            FrameError::Decode(DecodeError::UnknownTag { tag: 250 })
        ));
    }

    #[test]
    fn encoder_refuses_frames_over_the_maximum() {
        let msg = Message::Request {
            request_id: zab_core::RequestId(1),
            payload: Bytes::from(vec![0u8; 200]),
        };
        let mut buf = BytesMut::from(&b"x"[..]);
        let err = FrameCodec::new(100).encode(msg, &mut buf);
        assert!(matches!(err, Err(FrameError::TooLarge { .. })));
        assert_eq!(&buf[..], b"x");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        #[test]
        fn random_streams_never_panic(
            bytes in prop::collection::vec(any::<u8>(), 0..512),
            chunk in 1usize..64,
            max in 0usize..1024,
        ) {
            let _ = decode_stream(&bytes, chunk, max);
        }

        #[test]
        fn mutated_streams_never_panic(
            flips in prop::collection::vec((any::<usize>(), 0u8..8), 1..6),
            cut in any::<usize>(),
            chunk in 1usize..32,
        ) {
            let mut bytes = encode_all(&sample()).to_vec();
            for (at, bit) in flips {
                let len = bytes.len();
                bytes[at % len] ^= 1 << bit;
            }
            bytes.truncate(cut % (bytes.len() + 1));
            let (out, _) = decode_stream(&bytes, chunk, 64);
            prop_assert!(out.len() <= sample().len() + bytes.len() / 6);
        }

        #[test]
        fn random_frames_with_valid_lengths_never_panic(
            bodies in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..40), 1..8),
        ) {
            let mut bytes = Vec::new();
            for b in &bodies {
                bytes.extend_from_slice(&(b.len() as u32).to_be_bytes());
                bytes.extend_from_slice(b);
            }
            let (out, err) = decode_stream(&bytes, 5, 1024);
            prop_assert!(out.len() + usize::from(err.is_some()) <= bodies.len());
        }
    }
}
