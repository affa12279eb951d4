//! The snapshot directory: listing, creating, loading the newest valid snapshot, purging.
//!
//! INV-1: listing ignores `*.tmp` files (unfinished snapshots) and `discarded.*` files (purged
//! snapshots being freed); [`SnapDir::remove_temp`] deletes both and is meant for start-up
//! only, when no snapshot is being written.
//! INV-2: [`SnapDir::load_newest`] hands the consumer a verifying stream, newest snapshot first;
//! a snapshot counts as loaded only if the consumer succeeded *and* the whole file verified.
//! Otherwise it logs a warning naming the file and offers the next older one; if snapshots
//! exist but none is valid, that is an error (starting empty would silently drop committed
//! state).
//! INV-3: purge never removes the newest `retain` snapshots, and never runs with `retain == 0`.
//! A purged snapshot is durably out of the listing when purge returns (renamed to
//! `discarded.<name>.<n>`, directory fsynced); purge then frees it a step at a time on the calling
//! (snapshot) thread, so that a large image's blocks do not stall the log's syncs
//! (`discard`).

use std::io;
use std::path::{Path, PathBuf};

use tracing::{info, warn};
use zab_core::{Membership, Zxid};

use crate::discard;
use crate::error::{Result, StoreError};
use crate::fsutil;
use crate::snapshot::{
    parse_snapshot_name, snapshot_name, SnapshotInfo, SnapshotReader, SnapshotWriter,
};

/// A directory of snapshot files.
#[derive(Clone, Debug)]
pub struct SnapDir {
    dir: PathBuf,
    force_sync: bool,
}

impl SnapDir {
    /// Snapshots in `dir` (created if missing). `force_sync = false` is for tests only.
    pub fn open(dir: impl AsRef<Path>, force_sync: bool) -> Result<SnapDir> {
        let dir = dir.as_ref().to_path_buf();
        fsutil::ensure_dir(&dir)?;
        Ok(SnapDir { dir, force_sync })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The zxids of the snapshots present, ascending (temp files ignored).
    pub fn list(&self) -> Result<Vec<Zxid>> {
        let mut zxids: Vec<Zxid> = fsutil::list_names(&self.dir)?
            .iter()
            .filter_map(|n| parse_snapshot_name(n))
            .collect();
        zxids.sort();
        Ok(zxids)
    }

    /// The path of the snapshot at `zxid`.
    pub fn path(&self, zxid: Zxid) -> PathBuf {
        self.dir.join(snapshot_name(zxid))
    }

    /// Removes leftover `snapshot.*.tmp` files and discarded files (`discard` INV-1); call at
    /// start-up only (INV-1).
    pub fn remove_temp(&self) -> Result<Vec<PathBuf>> {
        let mut removed = Vec::new();
        for name in fsutil::list_names(&self.dir)? {
            let p = self.dir.join(&name);
            if name.starts_with("snapshot.") && fsutil::is_temp_name(&name) {
                warn!(file = %p.display(), "removing unfinished snapshot");
            } else if discard::is_discarded_name(&name) {
                info!(file = %p.display(), "removing a discarded file");
            } else {
                continue;
            }
            std::fs::remove_file(&p).map_err(|e| StoreError::io("remove", &p, e))?;
            removed.push(p);
        }
        if !removed.is_empty() {
            fsutil::sync_dir(&self.dir, self.force_sync)?;
        }
        Ok(removed)
    }

    /// Starts writing the snapshot at `zxid`, under the committed configuration `membership`
    /// (`None`: none known); see [`SnapshotWriter::create`].
    pub fn create(
        &self,
        zxid: Zxid,
        cluster_id: u64,
        membership: Option<&Membership>,
    ) -> Result<SnapshotWriter> {
        SnapshotWriter::create(&self.dir, zxid, cluster_id, membership, self.force_sync)
    }

    /// Opens the snapshot at `zxid` for streamed, verified reading.
    pub fn open_reader(&self, zxid: Zxid) -> Result<SnapshotReader> {
        SnapshotReader::open(&self.path(zxid), Some(zxid))
    }

    /// Loads the newest valid snapshot through `load` (INV-2). `Ok(None)`: no snapshot at all.
    pub fn load_newest<T, F>(&self, mut load: F) -> Result<Option<(SnapshotInfo, T)>>
    where
        F: FnMut(&mut SnapshotReader) -> io::Result<T>,
    {
        let zxids = self.list()?;
        let mut first_error = None;
        for &zxid in zxids.iter().rev() {
            match self.try_load(zxid, &mut load) {
                Ok(done) => return Ok(Some(done)),
                Err(e) => {
                    warn!(file = %self.path(zxid).display(), error = %e, "snapshot is bad; trying an older one");
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            None => Ok(None),
            Some(e) => Err(StoreError::BadSnapshot {
                path: self.dir.clone(),
                offset: 0,
                reason: format!(
                    "none of the {} snapshots is valid; newest: {e}",
                    zxids.len()
                ),
            }),
        }
    }

    fn try_load<T, F>(&self, zxid: Zxid, load: &mut F) -> Result<(SnapshotInfo, T)>
    where
        F: FnMut(&mut SnapshotReader) -> io::Result<T>,
    {
        let path = self.path(zxid);
        let mut reader = SnapshotReader::open(&path, Some(zxid))?;
        let value = load(&mut reader).map_err(|e| StoreError::from_io("load", &path, e))?;
        let info = reader.finish()?;
        Ok((info, value))
    }

    /// Removes all but the newest `retain` snapshots (INV-3); returns the oldest kept zxid.
    pub fn purge(&self, retain: usize) -> Result<Option<Zxid>> {
        let zxids = self.list()?;
        if retain == 0 || zxids.len() <= retain {
            return Ok(zxids.first().copied());
        }
        let (old, kept) = zxids.split_at(zxids.len() - retain);
        let mut discarded = Vec::with_capacity(old.len());
        for &z in old {
            discarded.push(discard::rename_out(&self.path(z))?);
        }
        fsutil::sync_dir(&self.dir, self.force_sync)?;
        for p in &discarded {
            discard::free_logged(p);
        }
        Ok(kept.first().copied())
    }
}
