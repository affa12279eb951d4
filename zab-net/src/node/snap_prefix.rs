//! A configuration as a length-prefixed byte section, in the layout of a snapshot file's
//! configuration section (zab-store `snapshot`); the join file (`join_file`) stores a joining
//! node's configuration this way:
//!
//! ```text
//! len:u32            length of what follows (at most MAX_MEMBERSHIP_SECTION_LEN)
//! version:u64        the configuration's version (the zxid that committed it)
//! Membership::encode()
//! ```
//! A [`PrefixReader`] reads the section from bytes that arrive in pieces and says where it
//! ended.
//!
//! INV-1: `encode` then a `PrefixReader` fed the bytes cut anywhere gives back the same
//! configuration and exactly the bytes after the prefix.
//! INV-2: a `PrefixReader` never panics and never buffers more than `4 +
//! MAX_MEMBERSHIP_SECTION_LEN` bytes: a longer length, an empty section or a configuration
//! that does not decode is a [`PrefixError`].

use thiserror::Error;
use zab_core::{Membership, Zxid};
use zab_store::MAX_MEMBERSHIP_SECTION_LEN;

/// Bytes of the length field.
const LEN_BYTES: usize = 4;
/// Bytes of the version field.
const VERSION_BYTES: usize = 8;

/// Why a SNAP's configuration prefix is unusable.
#[derive(Debug, Error, PartialEq, Eq)]
pub(crate) enum PrefixError {
    /// The length field is larger than a configuration section may be.
    #[error("the SNAP's configuration is {len} bytes long, more than the limit of {max}")]
    TooLong {
        /// The announced length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The section is too short to hold a version.
    #[error("the SNAP carries no configuration ({0} bytes; a leader always sends one)")]
    Missing(usize),
    /// The configuration does not decode.
    #[error("the SNAP's configuration does not decode: {0}")]
    Decode(String),
}

/// The prefix for `membership`.
pub(crate) fn encode(membership: &Membership) -> Vec<u8> {
    let body = membership.encode();
    let len = VERSION_BYTES + body.len();
    let mut out = Vec::with_capacity(LEN_BYTES + len);
    // A configuration's encoding is bounded far below u32::MAX (zab-core MAX_ADDRESS_LEN).
    out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(&membership.version.0.to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Reads the prefix from the stream's first chunks (INV-1, INV-2).
#[derive(Debug, Default)]
pub(crate) struct PrefixReader {
    buf: Vec<u8>,
}

impl PrefixReader {
    /// Takes the next chunk. `Ok(None)`: the prefix is not complete yet (the whole chunk was
    /// taken). `Ok(Some((membership, used)))`: the prefix is complete; the chunk's bytes
    /// from `used` on are the state machine's.
    pub(crate) fn feed(
        &mut self,
        chunk: &[u8],
    ) -> Result<Option<(Membership, usize)>, PrefixError> {
        let mut used = 0;
        if self.buf.len() < LEN_BYTES {
            let n = (LEN_BYTES - self.buf.len()).min(chunk.len());
            self.buf.extend_from_slice(&chunk[..n]);
            used = n;
            if self.buf.len() < LEN_BYTES {
                return Ok(None);
            }
        }
        let len = self.section_len()?;
        let have = self.buf.len() - LEN_BYTES;
        let n = (len - have).min(chunk.len() - used);
        self.buf.extend_from_slice(&chunk[used..used + n]);
        used += n;
        if self.buf.len() < LEN_BYTES + len {
            return Ok(None);
        }
        let section = &self.buf[LEN_BYTES..];
        let (version, body) = section.split_at(VERSION_BYTES);
        let mut v = [0u8; VERSION_BYTES];
        v.copy_from_slice(version);
        let membership = Membership::decode(Zxid(u64::from_be_bytes(v)), body)
            .map_err(|e| PrefixError::Decode(e.to_string()))?;
        Ok(Some((membership, used)))
    }

    /// The announced section length, checked (INV-2).
    fn section_len(&self) -> Result<usize, PrefixError> {
        let mut l = [0u8; LEN_BYTES];
        l.copy_from_slice(&self.buf[..LEN_BYTES]);
        let len = usize::try_from(u32::from_be_bytes(l)).unwrap_or(usize::MAX);
        if len > MAX_MEMBERSHIP_SECTION_LEN {
            return Err(PrefixError::TooLong {
                len,
                max: MAX_MEMBERSHIP_SECTION_LEN,
            });
        }
        if len < VERSION_BYTES {
            return Err(PrefixError::Missing(len));
        }
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use zab_core::{LearnerType, ServerId};

    use super::*;

    fn three() -> Membership {
        let types: BTreeMap<ServerId, LearnerType> = (1..=3)
            .map(|s| (ServerId(s), LearnerType::Participant))
            .collect();
        let addresses = (1..=3)
            .map(|s| (ServerId(s), format!("127.0.0.1:{}:{}", 2000 + s, 3000 + s)))
            .collect();
        let mut m = Membership::bootstrap(&types, &addresses);
        m.version = Zxid(0x5_0000_0007);
        m
    }

    /// Feeds `bytes` cut into pieces of `step` bytes; returns the configuration and the body.
    fn read_cut(bytes: &[u8], step: usize) -> Result<(Membership, Vec<u8>), PrefixError> {
        let mut r = PrefixReader::default();
        let mut found = None;
        let mut body = Vec::new();
        for chunk in bytes.chunks(step.max(1)) {
            match &found {
                Some(_) => body.extend_from_slice(chunk),
                None => {
                    if let Some((m, used)) = r.feed(chunk)? {
                        body.extend_from_slice(&chunk[used..]);
                        found = Some(m);
                    }
                }
            }
        }
        found.map(|m| (m, body)).ok_or(PrefixError::Missing(0))
    }

    #[test]
    fn the_prefix_round_trips_whatever_the_chunk_size() {
        let m = three();
        let mut stream = encode(&m);
        stream.extend_from_slice(b"state machine bytes");
        for step in [1, 2, 3, 5, 11, 64, stream.len()] {
            let (back, body) = read_cut(&stream, step).unwrap();
            assert_eq!(back, m, "step {step}");
            assert_eq!(body, b"state machine bytes", "step {step}");
        }
    }

    #[test]
    fn a_prefix_alone_leaves_no_body() {
        let m = three();
        let (back, body) = read_cut(&encode(&m), 7).unwrap();
        assert_eq!(back, m);
        assert!(body.is_empty());
    }

    #[test]
    fn bad_prefixes_are_errors() {
        let mut r = PrefixReader::default();
        let too_long = u32::try_from(MAX_MEMBERSHIP_SECTION_LEN + 1).unwrap();
        assert!(matches!(
            r.feed(&too_long.to_be_bytes()),
            Err(PrefixError::TooLong { .. })
        ));
        let mut r = PrefixReader::default();
        assert_eq!(r.feed(&0u32.to_be_bytes()), Err(PrefixError::Missing(0)));
        let mut garbage = 12u32.to_be_bytes().to_vec();
        garbage.extend_from_slice(&[0; 8]);
        garbage.extend_from_slice(&[9, 9, 9, 9]);
        let mut r = PrefixReader::default();
        assert!(matches!(r.feed(&garbage), Err(PrefixError::Decode(_))));
    }

    proptest! {
        /// INV-2: random bytes never panic the reader.
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64),
                                    step in 1usize..9) {
            let _ = read_cut(&bytes, step);
        }
    }
}
