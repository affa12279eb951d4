//! The spare segment: while the log fills one segment, a background thread zero-fills and
//! fsyncs the next one under a temp name, so a rollover costs a header write, a rename and two
//! syncs instead of writing the whole preallocation on the sync thread.
//!
//! INV-1: a spare is a `log.*.tmp` file: recovery deletes it like any unfinished segment, so a
//! crash at any point leaves no trace of it under a segment name.
//! INV-2: at most one spare exists per log; it is only used if it is at least as large as the
//! segment needed, otherwise (or if preparing it failed) the rollover creates the segment
//! itself, as without a spare.
//! INV-3: dropping the log waits for the preparing thread, so no thread outlives its log.
//! Spares are used only with `force_sync = true`; without it, creating a segment is instant.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;

use tracing::warn;

use crate::error::{Result, StoreError};
use crate::segment;

static SEQ: AtomicU64 = AtomicU64::new(0);

/// A spare being prepared (or ready).
#[derive(Debug)]
pub(crate) struct Spare {
    path: PathBuf,
    handle: Option<JoinHandle<Result<usize>>>,
}

impl Spare {
    /// Starts preparing a spare of `size` bytes in `dir`.
    pub fn start(dir: &Path, size: usize) -> Option<Spare> {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("log.spare.{}.{n}.tmp", std::process::id()));
        let p = path.clone();
        let spawned = std::thread::Builder::new()
            .name("zab-log-prealloc".into())
            .spawn(move || segment::prepare_spare(&p, size));
        match spawned {
            Ok(handle) => Some(Spare {
                path,
                handle: Some(handle),
            }),
            Err(e) => {
                warn!(dir = %dir.display(), error = %e, "cannot start segment preallocation thread");
                None
            }
        }
    }

    /// Waits for the spare; returns its path if it is ready and holds `need` bytes (INV-2).
    pub fn take(mut self, need: usize) -> Option<PathBuf> {
        match self.wait() {
            Ok(size) if size >= need => Some(self.path.clone()),
            Ok(_) => {
                self.discard();
                None
            }
            Err(e) => {
                warn!(file = %self.path.display(), error = %e, "spare segment unusable");
                self.discard();
                None
            }
        }
    }

    fn wait(&mut self) -> Result<usize> {
        match self.handle.take() {
            Some(h) => h.join().unwrap_or_else(|_| {
                Err(StoreError::io(
                    "prepare spare",
                    &self.path,
                    std::io::Error::other("preallocation thread panicked"),
                ))
            }),
            None => Err(StoreError::io(
                "prepare spare",
                &self.path,
                std::io::Error::other("already taken"),
            )),
        }
    }

    fn discard(&self) {
        // A leftover spare is a temp file: harmless, and removed at the next open (INV-1).
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for Spare {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
