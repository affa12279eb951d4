//! Incremental writeback of a snapshot file while it is written: the file under a snapshot
//! writer's buffer.
//!
//! Without it, a snapshot's hundreds of MB stay dirty in the page cache until its final fsync
//! (far below the kernel's dirty thresholds on a machine with RAM to spare), and that fsync
//! then writes them all at once: the txn log's `fdatasync`, which every write batch waits for,
//! queues behind the whole image. Here the file asks the kernel to start writing each
//! [`WINDOW`] as soon as it is complete (`sync_file_range(WRITE)`) and waits for the window
//! before it (`WAIT_BEFORE | WRITE | WAIT_AFTER`), so the disk sees the image as a steady
//! stream of window-sized writes and the final fsync finds little left to do.
//!
//! INV-1: durability is unchanged: `sync_file_range` is only a hint here (it neither flushes
//! the device's cache nor writes metadata); the image is durable only by the writer's final
//! fsync (snapshot INV-1), which still runs.
//! INV-2: a failed `sync_file_range` is a failed write. Its wait consumes a writeback error
//! for this file descriptor, so the final fsync might not report it again; the snapshot is
//! abandoned instead of ever being synced and published. The file stays failed: every later
//! write (such as the buffer a `BufWriter` flushes when it is dropped) and
//! [`WritebackFile::into_file`] return the error again without touching the file, so it is
//! neither asked to write back again nor handed on for its fsync.
//! INV-3: where the call is not supported (another OS; a file system or file type that
//! refuses it with `EINVAL`, `ESPIPE` or `ENOSYS`) writeback is left to the kernel and the
//! final fsync, as without this module; with `force_sync = false` (tests only) it is never
//! asked for.
//! INV-4: at most two windows of the image are in flight or dirty beyond what the writer's
//! buffer holds, whatever the image's size.

use std::fs::File;
use std::io::{self, Write};

/// Bytes after which the written part of the image is handed to the disk.
pub(crate) const WINDOW: u64 = 8 * 1024 * 1024;

/// A snapshot's temp file that writes itself back window by window (module docs).
#[derive(Debug)]
pub(crate) struct WritebackFile {
    file: File,
    /// Whether `sync_file_range` is asked for (INV-3).
    enabled: bool,
    /// Bytes written.
    written: u64,
    /// Bytes whose writeback was started.
    started: u64,
    /// Bytes whose writeback was waited for.
    waited: u64,
    /// A failed writeback's kind and message: the file is done for (INV-2).
    failed: Option<(io::ErrorKind, String)>,
}

impl WritebackFile {
    /// Wraps `file`, written from offset 0; `enabled = false` leaves writeback to the kernel.
    pub(crate) fn new(file: File, enabled: bool) -> WritebackFile {
        WritebackFile {
            file,
            enabled,
            written: 0,
            started: 0,
            waited: 0,
            failed: None,
        }
    }

    /// The file, for its final fsync; the writeback's error if one failed (INV-2).
    pub(crate) fn into_file(self) -> io::Result<File> {
        self.healthy()?;
        Ok(self.file)
    }

    /// Fails once a writeback failed (INV-2).
    fn healthy(&self) -> io::Result<()> {
        match &self.failed {
            None => Ok(()),
            Some((kind, message)) => Err(io::Error::new(
                *kind,
                format!("the file's writeback failed earlier, it is abandoned: {message}"),
            )),
        }
    }

    /// Starts the writeback of what was written since the last window and waits for the
    /// window before it (INV-2, INV-4).
    fn write_back(&mut self) -> io::Result<()> {
        let end = self.written;
        let outcome = range(&self.file, self.started, end - self.started, START)
            .and_then(|()| range(&self.file, self.waited, self.started - self.waited, WAIT));
        match outcome {
            Ok(()) => {
                self.waited = self.started;
                self.started = end;
                Ok(())
            }
            Err(e) if unsupported(&e) => {
                self.enabled = false;
                Ok(())
            }
            Err(e) => {
                let message = format!(
                    "writeback (sync_file_range) of bytes {}..{end}: {e}",
                    self.waited
                );
                self.failed = Some((e.kind(), message.clone()));
                Err(io::Error::new(e.kind(), message))
            }
        }
    }
}

impl Write for WritebackFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.healthy()?;
        let n = self.file.write(buf)?;
        self.written += n as u64;
        if self.enabled && self.written - self.started >= WINDOW {
            self.write_back()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.healthy()?;
        self.file.flush()
    }
}

/// Whether `e` says the call is not available for this file (INV-3).
fn unsupported(e: &io::Error) -> bool {
    #[cfg(target_os = "linux")]
    {
        matches!(
            e.raw_os_error(),
            Some(libc::EINVAL | libc::ESPIPE | libc::ENOSYS)
        )
    }
    #[cfg(not(target_os = "linux"))]
    {
        e.kind() == io::ErrorKind::Unsupported
    }
}

#[cfg(target_os = "linux")]
const START: u32 = libc::SYNC_FILE_RANGE_WRITE;
#[cfg(target_os = "linux")]
const WAIT: u32 = libc::SYNC_FILE_RANGE_WAIT_BEFORE
    | libc::SYNC_FILE_RANGE_WRITE
    | libc::SYNC_FILE_RANGE_WAIT_AFTER;
#[cfg(not(target_os = "linux"))]
const START: u32 = 0;
#[cfg(not(target_os = "linux"))]
const WAIT: u32 = 0;

/// `sync_file_range(file, offset, len, flags)`; an empty range is a no-op.
#[cfg(target_os = "linux")]
fn range(file: &File, offset: u64, len: u64, flags: u32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    if len == 0 {
        return Ok(());
    }
    #[cfg(test)]
    if let Some(errno) = tests::INJECT.with(std::cell::Cell::get) {
        return Err(io::Error::from_raw_os_error(errno));
    }
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    // SAFETY: the descriptor is open for the call's duration (borrowed from `file`); no
    // pointers are passed.
    let r = unsafe { libc::sync_file_range(file.as_raw_fd(), offset, len, flags) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Other systems: not available (INV-3).
#[cfg(not(target_os = "linux"))]
fn range(_file: &File, _offset: u64, len: u64, _flags: u32) -> io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    thread_local! {
        /// An errno every `sync_file_range` of this thread fails with (Linux), instead of
        /// calling the kernel: the disk errors a test cannot get from a real file.
        pub(super) static INJECT: Cell<Option<i32>> = const { Cell::new(None) };
    }

    /// The file gets every byte, in order, and the windows are written back as they fill:
    /// all but the last two are waited for (INV-4).
    #[test]
    fn windows_are_written_back_while_the_file_grows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("img");
        let mut w = WritebackFile::new(File::create(&path).unwrap(), true);
        let chunk: Vec<u8> = (0..=255u8).cycle().take(1 << 20).collect();
        let chunks = 4 * WINDOW / (1 << 20) + 3;
        for _ in 0..chunks {
            w.write_all(&chunk).unwrap();
        }
        w.flush().unwrap();
        assert!(w.enabled, "sync_file_range works on a regular file here");
        assert_eq!(w.waited, 3 * WINDOW);
        let f = w.into_file().unwrap();
        f.sync_all().unwrap();
        let back = std::fs::read(&path).unwrap();
        assert_eq!(back.len() as u64, chunks << 20);
        assert!(back.chunks(1 << 20).all(|c| c == chunk.as_slice()));
    }

    /// A file the call does not apply to (a character device) is written all the same, with
    /// writeback left to the kernel (INV-3).
    #[test]
    fn an_unsupported_file_falls_back_to_plain_writes() {
        let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") else {
            println!("SKIP an_unsupported_file_falls_back_to_plain_writes: no /dev/null");
            return;
        };
        let mut w = WritebackFile::new(null, true);
        w.write_all(&vec![7u8; (WINDOW + 1) as usize]).unwrap();
        w.write_all(&[1, 2, 3]).unwrap();
        assert_eq!(w.written, WINDOW + 4);
        assert_eq!(w.waited, 0);
    }

    /// Disabled (`force_sync = false`), nothing is asked of the kernel.
    #[test]
    fn disabled_writeback_only_writes() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = WritebackFile::new(File::create(dir.path().join("img")).unwrap(), false);
        w.write_all(&vec![1u8; (2 * WINDOW) as usize]).unwrap();
        assert_eq!((w.started, w.waited), (0, 0));
    }
}

#[cfg(all(test, target_os = "linux"))]
mod failure_tests {
    use std::io::Write;

    use zab_core::Zxid;

    use super::tests::INJECT;
    use super::*;
    use crate::snapshot::SnapshotWriter;

    /// A writeback that fails with EIO fails the write that reached the window, names the
    /// call, and leaves the file failed: later writes and `into_file` fail without touching
    /// it, even once the disk works again (INV-2). EINVAL is not a failure but a fallback
    /// (INV-3).
    #[test]
    fn a_failed_writeback_fails_the_write_and_every_later_use_of_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("img");
        let mut w = WritebackFile::new(File::create(&path).unwrap(), true);
        INJECT.with(|i| i.set(Some(libc::EIO)));
        let e = w.write_all(&vec![1u8; WINDOW as usize]).unwrap_err();
        INJECT.with(|i| i.set(None));
        let text = e.to_string();
        assert!(text.contains("sync_file_range"), "{text}");
        assert!(text.contains("Input/output error"), "{text}");
        let len = std::fs::metadata(&path).unwrap().len();
        let later = w.write(&[2u8; 10]).unwrap_err().to_string();
        assert!(later.contains("writeback failed earlier"), "{later}");
        assert!(w.flush().is_err());
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            len,
            "written after a failure"
        );
        assert!(
            w.into_file().is_err(),
            "a failed file must not be handed on for its fsync"
        );

        let mut w = WritebackFile::new(File::create(&path).unwrap(), true);
        INJECT.with(|i| i.set(Some(libc::EINVAL)));
        let fell_back = w.write_all(&vec![1u8; WINDOW as usize]);
        INJECT.with(|i| i.set(None));
        fell_back.unwrap();
        assert!(!w.enabled);
        assert!(w.into_file().is_ok());
    }

    /// A snapshot whose writeback fails is abandoned whether its writer is finished anyway or
    /// dropped (as a background snapshot's is): no file under the final name, no temp file,
    /// and the error names the temp file and the call (INV-2; snapshot INV-1).
    #[test]
    fn a_snapshot_whose_writeback_fails_is_not_published() {
        let dir = tempfile::tempdir().unwrap();
        for finish in [true, false] {
            let zxid = Zxid(if finish { 7 } else { 8 });
            let mut w = SnapshotWriter::create(dir.path(), zxid, 1, None, true).unwrap();
            let (tmp, path) = (w.tmp.clone(), w.info.path.clone());
            INJECT.with(|i| i.set(Some(libc::EIO)));
            let e = w.write_all(&vec![3u8; 2 * WINDOW as usize]).unwrap_err();
            INJECT.with(|i| i.set(None));
            let text = e.to_string();
            assert!(text.contains(&tmp.display().to_string()), "{text}");
            assert!(text.contains("sync_file_range"), "{text}");
            if finish {
                let e = w.finish().unwrap_err().to_string();
                assert!(e.contains("writeback failed earlier"), "{e}");
            } else {
                drop(w);
            }
            assert!(!tmp.exists(), "{} left behind", tmp.display());
            assert!(!path.exists(), "{} published", path.display());
        }
    }
}
