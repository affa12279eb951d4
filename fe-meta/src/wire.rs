//! Big-endian primitive encoding shared by journal payloads, image records and the client
//! protocol.
//!
//! ```text
//! u8 / u16 / u32 / u64   big-endian, fixed width
//! bool                   u8, 0 or 1 (anything else is an error)
//! str                    u32 length, then that many UTF-8 bytes
//! opt<T>                 u8 presence flag (0 or 1), then T when 1
//! ```
//! INV-1: decoding never panics and never allocates more than the bytes it was given: every
//! length is checked against both a field limit and the bytes that remain before it is used.
//! INV-2: every error names the field that was being read.

use bytes::BufMut;
use thiserror::Error;

/// What is wrong with an encoded value; always names the field.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum WireError {
    /// The input ended inside a field.
    #[error("truncated in {field}: needs {needed} bytes at offset {offset}, {left} left")]
    Truncated {
        /// The field being read.
        field: &'static str,
        /// Where it starts.
        offset: usize,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes that were left.
        left: usize,
    },
    /// A length is over its limit.
    #[error("{field} is {len} long, over the limit of {max}")]
    TooLong {
        /// The field.
        field: &'static str,
        /// Its declared length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// A string is not UTF-8.
    #[error("{field} is not valid UTF-8")]
    BadUtf8 {
        /// The field.
        field: &'static str,
    },
    /// A field holds a value outside its domain (an unknown enum tag, a bool that is not 0/1).
    #[error("{field} has invalid value {value}")]
    BadValue {
        /// The field.
        field: &'static str,
        /// The value found.
        value: u64,
    },
    /// Bytes follow the last field.
    #[error("{count} unexpected trailing bytes")]
    Trailing {
        /// How many.
        count: usize,
    },
    /// The payload's format version is not one this build reads.
    #[error("unsupported format version {found} (this build reads {supported})")]
    Version {
        /// The version found.
        found: u8,
        /// The version this build reads.
        supported: u8,
    },
}

/// A checked cursor over encoded bytes.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Takes the next `n` bytes.
    pub fn take(&mut self, field: &'static str, n: usize) -> Result<&'a [u8], WireError> {
        if self.remaining() < n {
            return Err(WireError::Truncated {
                field,
                offset: self.pos,
                needed: n,
                left: self.remaining(),
            });
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], WireError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(field, N)?);
        Ok(out)
    }

    /// A u8.
    pub fn u8(&mut self, field: &'static str) -> Result<u8, WireError> {
        Ok(self.array::<1>(field)?[0])
    }

    /// A big-endian u16.
    pub fn u16(&mut self, field: &'static str) -> Result<u16, WireError> {
        Ok(u16::from_be_bytes(self.array(field)?))
    }

    /// A big-endian u32.
    pub fn u32(&mut self, field: &'static str) -> Result<u32, WireError> {
        Ok(u32::from_be_bytes(self.array(field)?))
    }

    /// A big-endian u64.
    pub fn u64(&mut self, field: &'static str) -> Result<u64, WireError> {
        Ok(u64::from_be_bytes(self.array(field)?))
    }

    /// A bool: 0 or 1.
    pub fn bool(&mut self, field: &'static str) -> Result<bool, WireError> {
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(WireError::BadValue {
                field,
                value: u64::from(v),
            }),
        }
    }

    /// A length (u32) checked against `max`.
    pub fn len(&mut self, field: &'static str, max: usize) -> Result<usize, WireError> {
        let len = self.u32(field)? as usize;
        if len > max {
            return Err(WireError::TooLong {
                field,
                len: len as u64,
                max: max as u64,
            });
        }
        Ok(len)
    }

    /// A string of at most `max` bytes.
    pub fn str(&mut self, field: &'static str, max: usize) -> Result<String, WireError> {
        let len = self.len(field, max)?;
        let bytes = self.take(field, len)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| WireError::BadUtf8 { field })
    }

    /// An optional u64.
    pub fn opt_u64(&mut self, field: &'static str) -> Result<Option<u64>, WireError> {
        if self.bool(field)? {
            Ok(Some(self.u64(field)?))
        } else {
            Ok(None)
        }
    }

    /// An optional string of at most `max` bytes.
    pub fn opt_str(
        &mut self,
        field: &'static str,
        max: usize,
    ) -> Result<Option<String>, WireError> {
        if self.bool(field)? {
            Ok(Some(self.str(field, max)?))
        } else {
            Ok(None)
        }
    }

    /// A format version byte, which must equal `supported`.
    pub fn version(&mut self, supported: u8) -> Result<(), WireError> {
        let found = self.u8("format version")?;
        if found != supported {
            return Err(WireError::Version { found, supported });
        }
        Ok(())
    }

    /// Fails if bytes are left.
    pub fn finish(self) -> Result<(), WireError> {
        match self.remaining() {
            0 => Ok(()),
            count => Err(WireError::Trailing { count }),
        }
    }
}

/// Appends encoded primitives; the counterpart of [`Reader`].
pub trait Put {
    /// A length-prefixed string. Callers keep strings within the limits they are decoded with.
    fn put_str(&mut self, s: &str);
    /// An optional u64.
    fn put_opt_u64(&mut self, v: Option<u64>);
    /// An optional string.
    fn put_opt_str(&mut self, v: Option<&str>);
    /// A bool as 0 or 1.
    fn put_bool(&mut self, v: bool);
    /// A length as u32 (saturating; limits keep real lengths far below).
    fn put_len(&mut self, len: usize);
}

impl Put for Vec<u8> {
    fn put_str(&mut self, s: &str) {
        self.put_len(s.len());
        self.extend_from_slice(s.as_bytes());
    }

    fn put_opt_u64(&mut self, v: Option<u64>) {
        match v {
            Some(v) => {
                self.put_u8(1);
                self.put_u64(v);
            }
            None => self.put_u8(0),
        }
    }

    fn put_opt_str(&mut self, v: Option<&str>) {
        match v {
            Some(v) => {
                self.put_u8(1);
                self.put_str(v);
            }
            None => self.put_u8(0),
        }
    }

    fn put_bool(&mut self, v: bool) {
        self.put_u8(u8::from(v));
    }

    fn put_len(&mut self, len: usize) {
        self.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let mut buf = Vec::new();
        buf.put_u16(7);
        buf.put_str("héllo");
        buf.put_opt_u64(Some(9));
        buf.put_bool(true);
        let mut r = Reader::new(&buf);
        assert_eq!(r.u16("a").unwrap(), 7);
        assert_eq!(r.str("b", 16).unwrap(), "héllo");
        assert_eq!(r.opt_u64("c").unwrap(), Some(9));
        assert!(r.bool("d").unwrap());
        r.finish().unwrap();

        let mut r = Reader::new(&buf);
        r.u16("a").unwrap();
        assert!(matches!(
            r.str("b", 2),
            Err(WireError::TooLong { field: "b", .. })
        ));
        let mut r = Reader::new(&buf[..4]);
        r.u16("a").unwrap();
        assert!(matches!(
            r.u32("len"),
            Err(WireError::Truncated { field: "len", .. })
        ));
        assert!(matches!(
            Reader::new(&[2]).bool("flag"),
            Err(WireError::BadValue {
                field: "flag",
                value: 2
            })
        ));
    }
}
