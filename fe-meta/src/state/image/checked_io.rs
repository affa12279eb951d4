//! The image's checked I/O: a writer and a reader that keep the CRC32C and the offset of
//! every byte (errors name the offset), and a sink that hashes an image for its digest.

use std::io::{self, BufReader, BufWriter, Read, Write};

use sha2::{Digest, Sha256};

use super::ImageError;

/// Writes through a buffer, keeping the CRC32C of everything written and the offset.
pub(super) struct CrcWriter<W: Write> {
    pub(super) inner: BufWriter<W>,
    pub(super) crc: u32,
    pub(super) offset: u64,
}

impl<W: Write> CrcWriter<W> {
    pub(super) fn put(&mut self, bytes: &[u8]) -> Result<(), ImageError> {
        self.inner
            .write_all(bytes)
            .map_err(|source| ImageError::Io {
                offset: self.offset,
                source,
            })?;
        self.crc = crc32c::crc32c_append(self.crc, bytes);
        self.offset += bytes.len() as u64;
        Ok(())
    }
}

/// Reads exactly, keeping the CRC32C of everything read and the offset.
pub(super) struct CrcReader<R: Read> {
    pub(super) inner: BufReader<R>,
    pub(super) crc: u32,
    pub(super) offset: u64,
}

impl<R: Read> CrcReader<R> {
    pub(super) fn fill(&mut self, out: &mut [u8], section: &'static str) -> Result<(), ImageError> {
        self.inner.read_exact(out).map_err(|source| {
            if source.kind() == io::ErrorKind::UnexpectedEof {
                ImageError::Truncated {
                    offset: self.offset,
                    section,
                }
            } else {
                ImageError::Io {
                    offset: self.offset,
                    source,
                }
            }
        })?;
        self.crc = crc32c::crc32c_append(self.crc, out);
        self.offset += out.len() as u64;
        Ok(())
    }
}

/// A sink that hashes what is written (SHA-256), for the digest.
pub(super) struct HashWriter(pub(super) Sha256);

impl Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
