//! The epoch files `acceptedEpoch` and `currentEpoch`, and the `needsInitialSync` marker.
//!
//! `needsInitialSync` (PITFALLS B9): present while the data dir was emptied and has not yet
//! completed a sync from a leader; the node does not vote then. It is created when a node
//! starts on an empty data dir without bootstrap and removed by `PersistInitialized`. A data
//! dir without it is initialized: a brand-new member (bootstrap) or any older data dir.
//!
//! Format, as ZooKeeper's: the epoch in decimal ASCII followed by a newline (surrounding ASCII
//! whitespace is accepted when reading). A missing file reads as `None` (the caller treats it
//! as epoch 0, as a fresh peer).
//!
//! INV-1: a write replaces the file atomically and durably (temp `<name>.tmp`, fsync, rename,
//! fsync directory), so a reader sees the old or the new epoch, never a torn one.
//! INV-2: a leftover `<name>.tmp` (crash or failure mid-write) is ignored by reads and
//! overwritten by the next write; [`EpochFiles::remove_temp`] (run by `DataDir::open` at
//! start-up) deletes it, so the node starts with the last completed write. A directory under
//! such a name was not written by this store and would make every later write fail: start-up
//! refuses it with an error naming it rather than failing at the first election.
//! INV-4: a failed write returns an error naming the file and leaves the previous epoch in
//! place; nothing here caches an epoch, and the driver treats the error as fatal, so no
//! in-memory epoch can run ahead of the file (ZOOKEEPER-2307).
//! INV-3: content that is not a decimal u32 is an error naming the file and showing the content.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use zab_core::Epoch;

use crate::error::{Result, StoreError};
use crate::fsutil;

/// Which epoch file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EpochKind {
    /// `acceptedEpoch`: the last epoch promised in ACKEPOCH.
    Accepted,
    /// `currentEpoch`: the epoch of the last NEWLEADER accepted.
    Current,
}

impl EpochKind {
    /// The file name.
    pub fn file_name(self) -> &'static str {
        match self {
            EpochKind::Accepted => "acceptedEpoch",
            EpochKind::Current => "currentEpoch",
        }
    }
}

/// The marker file of a data dir that needs its initial sync.
pub const NEEDS_INITIAL_SYNC_FILE: &str = "needsInitialSync";

/// The epoch files of one data directory.
#[derive(Clone, Debug)]
pub struct EpochFiles {
    dir: PathBuf,
    force_sync: bool,
}

impl EpochFiles {
    /// Epoch files in `dir` (created if missing). `force_sync = false` is for tests only.
    pub fn open(dir: impl AsRef<Path>, force_sync: bool) -> Result<EpochFiles> {
        let dir = dir.as_ref().to_path_buf();
        fsutil::ensure_dir(&dir)?;
        Ok(EpochFiles { dir, force_sync })
    }

    /// The path of one file.
    pub fn path(&self, kind: EpochKind) -> PathBuf {
        self.dir.join(kind.file_name())
    }

    /// Deletes leftover temporary files of the epoch files and the marker (INV-2); returns the
    /// paths removed. For start-up only, when nothing is being written.
    pub fn remove_temp(&self) -> Result<Vec<PathBuf>> {
        let mut removed = Vec::new();
        let names = [
            EpochKind::Accepted.file_name(),
            EpochKind::Current.file_name(),
            NEEDS_INITIAL_SYNC_FILE,
        ];
        for name in names {
            let tmp = fsutil::temp_path(&self.dir.join(name));
            let meta = match fs::symlink_metadata(&tmp) {
                Ok(m) => m,
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(StoreError::io("stat", &tmp, e)),
            };
            if meta.is_dir() {
                return Err(StoreError::BadEpochFile {
                    path: tmp,
                    reason: "a directory stands where the temporary file of an epoch write goes; \
                             every epoch write would fail: remove it"
                        .to_string(),
                });
            }
            tracing::warn!(file = %tmp.display(), "removing an unfinished epoch file write");
            fs::remove_file(&tmp).map_err(|e| StoreError::io("remove", &tmp, e))?;
            removed.push(tmp);
        }
        if !removed.is_empty() {
            fsutil::sync_dir(&self.dir, self.force_sync)?;
        }
        Ok(removed)
    }

    /// Reads an epoch file; `None` when it does not exist.
    pub fn read(&self, kind: EpochKind) -> Result<Option<Epoch>> {
        let path = self.path(kind);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StoreError::io("read", &path, e)),
        };
        parse_epoch(&bytes, &path).map(Some)
    }

    /// Durably replaces an epoch file (INV-1); on error the previous content stays (INV-4).
    pub fn write(&self, kind: EpochKind, epoch: Epoch) -> Result<()> {
        let content = format!("{}\n", epoch.0);
        fsutil::replace_atomically(&self.path(kind), content.as_bytes(), self.force_sync)
    }

    /// True when the `needsInitialSync` marker exists (the node must not vote yet).
    pub fn needs_initial_sync(&self) -> Result<bool> {
        let path = self.dir.join(NEEDS_INITIAL_SYNC_FILE);
        match fs::metadata(&path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(StoreError::io("stat", &path, e)),
        }
    }

    /// Durably creates (`true`) or removes (`false`) the `needsInitialSync` marker: after a
    /// crash the marker is either there or not, as last written.
    pub fn set_needs_initial_sync(&self, needed: bool) -> Result<()> {
        let path = self.dir.join(NEEDS_INITIAL_SYNC_FILE);
        if needed {
            let content = b"# this data dir must sync from a leader before it may vote\n";
            return fsutil::replace_atomically(&path, content, self.force_sync);
        }
        if !self.needs_initial_sync()? {
            return Ok(());
        }
        fsutil::remove_durably(&path, self.force_sync)
    }
}

fn parse_epoch(bytes: &[u8], path: &Path) -> Result<Epoch> {
    let bad = |reason: String| StoreError::BadEpochFile {
        path: path.to_path_buf(),
        reason,
    };
    let text = std::str::from_utf8(bytes)
        .map_err(|_| bad(format!("not text: {:?}", String::from_utf8_lossy(bytes))))?;
    let t = text.trim_matches(|c: char| c.is_ascii_whitespace());
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(format!("expected a decimal epoch, found {t:?}")));
    }
    t.parse::<u32>()
        .map(Epoch)
        .map_err(|e| bad(format!("{t:?} is not a 32-bit epoch: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_replace_and_tolerate_tmp() {
        let d = tempfile::tempdir().unwrap();
        let f = EpochFiles::open(d.path(), true).unwrap();
        assert_eq!(f.read(EpochKind::Accepted).unwrap(), None);
        f.write(EpochKind::Accepted, Epoch(5)).unwrap();
        f.write(EpochKind::Current, Epoch(4)).unwrap();
        fs::write(d.path().join("acceptedEpoch.tmp"), b"garbage").unwrap();
        assert_eq!(f.read(EpochKind::Accepted).unwrap(), Some(Epoch(5)));
        f.write(EpochKind::Accepted, Epoch(6)).unwrap();
        assert_eq!(f.read(EpochKind::Accepted).unwrap(), Some(Epoch(6)));
        assert_eq!(f.read(EpochKind::Current).unwrap(), Some(Epoch(4)));
        assert_eq!(
            fs::read_to_string(f.path(EpochKind::Accepted)).unwrap(),
            "6\n"
        );
    }

    #[test]
    fn needs_initial_sync_marker_is_created_and_removed() {
        let d = tempfile::tempdir().unwrap();
        let f = EpochFiles::open(d.path(), true).unwrap();
        assert!(!f.needs_initial_sync().unwrap());
        f.set_needs_initial_sync(true).unwrap();
        assert!(f.needs_initial_sync().unwrap());
        assert!(d.path().join(NEEDS_INITIAL_SYNC_FILE).exists());
        f.set_needs_initial_sync(false).unwrap();
        assert!(!f.needs_initial_sync().unwrap());
        f.set_needs_initial_sync(false).unwrap();
    }

    #[test]
    fn zookeeper_style_content_without_newline_is_accepted() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("currentEpoch"), b"12").unwrap();
        let f = EpochFiles::open(d.path(), false).unwrap();
        assert_eq!(f.read(EpochKind::Current).unwrap(), Some(Epoch(12)));
    }

    #[test]
    fn corrupt_file_is_a_clear_error() {
        let d = tempfile::tempdir().unwrap();
        let f = EpochFiles::open(d.path(), false).unwrap();
        for content in [&b""[..], b"x12", b"-1", b"99999999999", b"\xff\xfe"] {
            fs::write(f.path(EpochKind::Current), content).unwrap();
            let e = f.read(EpochKind::Current).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains("currentEpoch"), "{msg}");
            assert!(matches!(e, StoreError::BadEpochFile { .. }), "{msg}");
        }
    }
}
