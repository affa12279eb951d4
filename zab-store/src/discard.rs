//! Discarding files: a log segment leaving the log (purged, or dropped by a truncate or reset)
//! or a purged snapshot is renamed out of its directory's namespace, the directory fsynced, and
//! the file is then freed gradually, away from the log's sync thread.
//!
//! Why: on the reference VM (ext4 mounted with `discard`) freeing a file's blocks holds up every
//! `fdatasync` of the same filesystem while it runs (`scripts/free_stall.py`): a plain unlink
//! of a 64 MiB segment took 13–15 ms on its own thread and stalled a concurrent 4 KiB write +
//! `fdatasync` loop for up to 11–14 ms, of a 350 MB snapshot (a 5M-entry catalog's) 80–87 ms
//! and 15–47 ms. Shrinking the file [`FREE_STEP`] at a time with a [`FREE_PAUSE`] between
//! steps kept that loop's worst sync under 2 ms, for 50 ms (64 MiB) and 265–275 ms (350 MB) of
//! background work. And on the sync thread itself the unlink stalled every append of the node.
//!
//! INV-1: when [`discard_durably`] (or [`Discarder::discard`]) returns, the file's name is
//! durably gone: it was renamed to `discarded.<name>.<n>` (`n` unique in the process, so two
//! discarded files never share a name) and its directory fsynced, so a crash at
//! any later point cannot bring a segment's records back into the log or a snapshot back into
//! the listing — neither lists `discarded.*` names, and opening the log or the snapshot
//! directory removes them (`recovery` INV-4, [`crate::SnapDir::remove_temp`]).
//! INV-2: a [`Discarder`] has at most one background thread, started on the first discard; it
//! frees files in the order they were discarded. Dropping the [`Discarder`] (with its log)
//! waits for it to finish, so no thread outlives its log and a cleanly closed log leaves no
//! discarded file behind.
//! INV-3: a failure to free a discarded file only leaves it for the next open to remove; it is
//! logged and never fails the log or the purge (the file is already out of them). If the
//! thread cannot be started, the file is freed on the calling thread.

use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use tracing::warn;

use crate::error::{Result, StoreError};
use crate::fsutil;

/// The name prefix of a discarded file.
pub(crate) const DISCARDED_PREFIX: &str = "discarded.";
/// How much of a discarded file is freed at a time.
pub(crate) const FREE_STEP: u64 = 4 << 20;
/// The pause between two steps, which lets the syncs queued meanwhile through.
pub(crate) const FREE_PAUSE: Duration = Duration::from_millis(2);

/// Numbers the discarded names of this process.
static DISCARDS: AtomicU64 = AtomicU64::new(0);

/// Whether a directory entry is a discarded file (removed when its directory is opened).
pub(crate) fn is_discarded_name(name: &str) -> bool {
    name.starts_with(DISCARDED_PREFIX)
}

/// Renames `path` to its discarded name and fsyncs its directory (INV-1); returns the new path.
pub(crate) fn discard_durably(path: &Path, force_sync: bool) -> Result<PathBuf> {
    let discarded = rename_out(path)?;
    fsutil::sync_dir(fsutil::parent_of(path), force_sync)?;
    Ok(discarded)
}

/// Renames `path` to its discarded name, not yet durably: the caller fsyncs the directory
/// (once for several files) before it counts them gone (INV-1).
pub(crate) fn rename_out(path: &Path) -> Result<PathBuf> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = DISCARDS.fetch_add(1, Ordering::Relaxed);
    let discarded = path.with_file_name(format!("{DISCARDED_PREFIX}{name}.{n}"));
    std::fs::rename(path, &discarded)
        .map_err(|e| StoreError::io(format!("rename to {}", discarded.display()), path, e))?;
    Ok(discarded)
}

/// Frees `path` [`FREE_STEP`] at a time, pausing between steps, then unlinks it.
pub(crate) fn remove_gradually(path: &Path) -> io::Result<()> {
    let file = OpenOptions::new().write(true).open(path)?;
    let mut len = file.metadata()?.len();
    while len > FREE_STEP {
        len -= FREE_STEP;
        file.set_len(len)?;
        std::thread::sleep(FREE_PAUSE);
    }
    drop(file);
    std::fs::remove_file(path)
}

/// Frees a discarded file, logging a failure (INV-3).
pub(crate) fn free_logged(path: &Path) {
    if let Err(e) = remove_gradually(path) {
        warn!(
            file = %path.display(),
            error = %e,
            "cannot remove a discarded file; the next open of its directory removes it"
        );
    }
}

/// Frees discarded log segments on a background thread (see the module docs).
#[derive(Debug)]
pub(crate) struct Discarder {
    queue: Option<mpsc::Sender<PathBuf>>,
    thread: Option<JoinHandle<()>>,
    free: fn(&Path),
}

impl Default for Discarder {
    fn default() -> Self {
        Discarder::with_free(free_logged)
    }
}

impl Discarder {
    fn with_free(free: fn(&Path)) -> Discarder {
        Discarder {
            queue: None,
            thread: None,
            free,
        }
    }

    /// Durably takes `path` out of its directory (INV-1) and queues it to be freed.
    pub(crate) fn discard(&mut self, path: &Path, force_sync: bool) -> Result<()> {
        let discarded = discard_durably(path, force_sync)?;
        self.free_later(discarded);
        Ok(())
    }

    fn free_later(&mut self, path: PathBuf) {
        let path = match &self.queue {
            Some(queue) => match queue.send(path) {
                Ok(()) => return,
                Err(mpsc::SendError(path)) => path,
            },
            None => path,
        };
        let (queue, jobs) = mpsc::channel::<PathBuf>();
        let free = self.free;
        let spawned = std::thread::Builder::new()
            .name("zab-discard".into())
            .spawn(move || jobs.iter().for_each(|p| free(&p)));
        match spawned {
            Ok(thread) => {
                // The receiver lives as long as the thread, which ends only once this sender
                // is dropped: the send cannot fail.
                let _ = queue.send(path);
                self.queue = Some(queue);
                self.thread = Some(thread);
            }
            Err(e) => {
                warn!(error = %e, "cannot start the discard thread; freeing the file here");
                (self.free)(&path);
            }
        }
    }
}

impl Drop for Discarder {
    fn drop(&mut self) {
        drop(self.queue.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::time::Duration;

    /// Unlinks wait for this gate (a test runs alone with it: see `GATE_USER`).
    static GATE: Mutex<Option<mpsc::Receiver<()>>> = Mutex::new(None);
    static GATE_USER: Mutex<()> = Mutex::new(());

    fn gated_free(path: &Path) {
        let opened = GATE
            .lock()
            .unwrap()
            .as_ref()
            .map(|gate| gate.recv_timeout(Duration::from_secs(10)));
        assert!(matches!(opened, Some(Ok(()))), "the gate was never opened");
        remove_gradually(path).unwrap();
    }

    /// The one discarded file in `dir`.
    fn only_discarded(dir: &Path) -> PathBuf {
        let found: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| is_discarded_name(&p.file_name().unwrap().to_string_lossy()))
            .collect();
        assert_eq!(found.len(), 1, "{found:?}");
        found[0].clone()
    }

    #[test]
    fn a_discard_returns_with_the_name_gone_before_the_file_is_unlinked() {
        let _alone = GATE_USER.lock().unwrap();
        let (open, gate) = mpsc::channel();
        *GATE.lock().unwrap() = Some(gate);
        let dir = tempfile::tempdir().unwrap();
        let seg = dir.path().join("log.0000000100000001");
        std::fs::write(&seg, b"records").unwrap();

        let mut discarder = Discarder::with_free(gated_free);
        discarder.discard(&seg, true).unwrap();
        let trash = only_discarded(dir.path());
        assert!(
            !seg.exists(),
            "the segment's name is gone when discard returns"
        );
        assert!(
            trash.exists(),
            "freeing waits for the gate, off this thread"
        );

        open.send(()).unwrap();
        drop(discarder);
        assert!(
            !trash.exists(),
            "dropping the discarder waits until its files are freed"
        );
        *GATE.lock().unwrap() = None;
    }

    #[test]
    fn discarded_segments_are_all_freed_by_the_time_the_discarder_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let mut discarder = Discarder::default();
        for i in 1..=5u64 {
            let seg = dir.path().join(format!("log.{i:016x}"));
            std::fs::write(&seg, b"r").unwrap();
            discarder.discard(&seg, false).unwrap();
        }
        drop(discarder);
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(
            left.is_empty(),
            "every discarded segment was freed: {left:?}"
        );
    }

    #[test]
    fn a_file_freed_gradually_is_gone_whatever_its_size() {
        let dir = tempfile::tempdir().unwrap();
        for len in [
            0,
            1,
            FREE_STEP - 1,
            FREE_STEP,
            FREE_STEP + 1,
            3 * FREE_STEP + 7,
        ] {
            let p = dir.path().join(format!("discarded.f{len}"));
            std::fs::File::create(&p).unwrap().set_len(len).unwrap();
            remove_gradually(&p).unwrap();
            assert!(!p.exists(), "{len} bytes");
        }
        assert!(remove_gradually(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn the_discarded_name_keeps_the_file_name_under_its_own_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("snapshot.0000000200000003");
        std::fs::write(&p, b"image").unwrap();
        let d = discard_durably(&p, true).unwrap();
        let name = d.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("discarded.snapshot.0000000200000003."),
            "{name}"
        );
        assert_eq!(d, only_discarded(dir.path()));
        std::fs::write(&p, b"again").unwrap();
        let again = discard_durably(&p, true).unwrap();
        assert_ne!(again, d, "a second discard of the same name gets its own");
        assert!(is_discarded_name("discarded.snapshot.0000000200000003"));
        assert!(!is_discarded_name("snapshot.0000000200000003"));
        assert_eq!(std::fs::read(&d).unwrap(), b"image");
    }
}
