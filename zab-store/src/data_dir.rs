//! [`DataDir`]: the convenience a driver uses at start-up: open the snapshot directory (with the
//! epoch files, like ZooKeeper's `dataDir`) and the log directory (`dataLogDir`, may be the
//! same), recover the log, load the newest valid snapshot, and assemble the core's
//! [`DurableState`] (with the committed configuration the loaded snapshot carries). Also the
//! purge that keeps snapshots and logs consistent.
//!
//! INV-1: the durable state handed to the core has no hole: the log tail starts right after the
//! loaded snapshot, or loading fails naming the log directory (for instance after falling back
//! to an older snapshot whose following records were already purged).
//! INV-3: the log never ends before the loaded snapshot: when it does (the node applied txns a
//! quorum had made durable before its own log reached them, snapshotted them, and crashed
//! before those appends were synced), loading resets the log to the snapshot. Appending the
//! next epoch after the old, shorter log would leave a hole that a later DIFF from the log
//! would silently skip.
//! INV-4 (PITFALLS B5): the epoch files are taken as they are, even when the data is of a later
//! epoch than `currentEpoch` (a crash after a sync's snapshot or txns reached the disk but
//! before its NEWLEADER wrote `currentEpoch`, the order B3 requires). `currentEpoch` names the
//! last NEWLEADER this node accepted, and it did not accept that one: adopting the data's epoch
//! would claim a promise never made. Keeping the older value only ranks the node lower in
//! elections (votes order by `(currentEpoch, lastZxid)`) until its next sync writes the new
//! epoch, so loading neither refuses to start (ZOOKEEPER-1653) nor picks an epoch; it logs a
//! warning naming the files.
//! INV-2: purge removes log segments only up to the oldest *kept* snapshot, and nothing at all
//! while no snapshot exists.

use std::io;
use std::path::Path;

use zab_core::{DurableState, Zxid};

use crate::epoch_file::{EpochFiles, EpochKind};
use crate::error::{Result, StoreError};
use crate::log::{LogOptions, TxnLog};
use crate::recovery::Recovery;
use crate::snap_dir::SnapDir;
use crate::snapshot::SnapshotReader;
use crate::writer::LogWriter;

/// The opened durable state of one peer.
#[derive(Debug)]
pub struct DataDir {
    /// Snapshots.
    pub snaps: SnapDir,
    /// `acceptedEpoch` / `currentEpoch`, in the snapshot directory.
    pub epochs: EpochFiles,
    /// The recovered txn log (move it into [`LogWriter::spawn`] after [`DataDir::load`]).
    pub log: TxnLog,
    /// What log recovery found.
    pub recovery: Recovery,
}

impl DataDir {
    /// Opens both directories (creating them), removing unfinished snapshot and epoch file
    /// writes and recovering the log.
    pub fn open(
        snap_dir: impl AsRef<Path>,
        log_dir: impl AsRef<Path>,
        opts: LogOptions,
    ) -> Result<DataDir> {
        let snaps = SnapDir::open(snap_dir.as_ref(), opts.force_sync)?;
        snaps.remove_temp()?;
        let epochs = EpochFiles::open(snap_dir.as_ref(), opts.force_sync)?;
        epochs.remove_temp()?;
        let (log, recovery) = TxnLog::open(log_dir, opts)?;
        Ok(DataDir {
            snaps,
            epochs,
            log,
            recovery,
        })
    }

    /// Loads the newest valid snapshot through `restore` and returns the core's durable state
    /// (resetting a log that ends before that snapshot, INV-3).
    pub fn load<F>(&mut self, restore: F) -> Result<DurableState>
    where
        F: FnMut(&mut SnapshotReader) -> io::Result<()>,
    {
        let newest = self.snaps.load_newest(restore)?.map(|(info, ())| info);
        let snapshot_zxid = newest.as_ref().map_or(Zxid::ZERO, |info| info.zxid);
        // Only a hint for the leader's DIFF-or-SNAP choice: unknown (0) if unreadable.
        let snapshot_bytes = newest
            .as_ref()
            .and_then(|info| std::fs::metadata(&info.path).ok())
            .map_or(0, |m| m.len());
        let membership = newest.and_then(|info| info.membership);
        self.reset_log_behind(snapshot_zxid)?;
        let reader = self.log.reader();
        let last = reader.last_zxid().unwrap_or(reader.floor());
        let log_tail = if last <= snapshot_zxid {
            Vec::new()
        } else if snapshot_zxid < reader.floor() {
            return Err(StoreError::NotOnDisk {
                path: reader.dir().to_path_buf(),
                zxid: snapshot_zxid,
                reason: format!(
                    "the log starts after {} but the loaded snapshot is at {snapshot_zxid}",
                    reader.floor()
                ),
            });
        } else {
            reader.read_range(snapshot_zxid, last)?
        };
        let (log_index, log_bytes) = reader.zxids_and_sizes();
        let accepted_epoch = self.epochs.read(EpochKind::Accepted)?.unwrap_or_default();
        let current_epoch = self.epochs.read(EpochKind::Current)?.unwrap_or_default();
        let data_epoch = last.max(snapshot_zxid).epoch();
        if data_epoch > current_epoch {
            tracing::warn!(
                current_epoch_file = %self.epochs.path(EpochKind::Current).display(),
                %current_epoch,
                snapshot_dir = %self.snaps.dir().display(),
                log_dir = %reader.dir().display(),
                last_zxid = %last.max(snapshot_zxid),
                "the data ends in a later epoch than currentEpoch (a sync was interrupted before \
                 its NEWLEADER): keeping currentEpoch, this node syncs again before it serves"
            );
        }
        Ok(DurableState {
            accepted_epoch,
            current_epoch,
            snapshot_zxid,
            log_index,
            log_bytes,
            snapshot_bytes,
            log_tail,
            needs_initial_sync: self.epochs.needs_initial_sync()?,
            membership,
        })
    }

    /// Resets a log that ends before the loaded snapshot at `snapshot_zxid` to start there
    /// (INV-3); a log that reaches the snapshot is left alone.
    fn reset_log_behind(&mut self, snapshot_zxid: Zxid) -> Result<()> {
        let reader = self.log.reader();
        let last = reader.last_zxid().unwrap_or(reader.floor());
        if last < snapshot_zxid {
            if reader.last_zxid().is_none() {
                // No record at all: the log was reset to a received SNAP and nothing was
                // appended before the node stopped (or the log is new). Nothing was lost.
                tracing::info!(
                    dir = %reader.dir().display(),
                    snapshot = %snapshot_zxid,
                    "the txn log is empty: it starts at the newest snapshot"
                );
            } else {
                tracing::warn!(
                    dir = %reader.dir().display(),
                    log_last = %last,
                    snapshot = %snapshot_zxid,
                    "the txn log ends before the newest snapshot (records the snapshot covers \
                     were not synced before a crash): the log restarts at the snapshot"
                );
            }
            self.log.reset(snapshot_zxid)?;
        }
        Ok(())
    }
}

/// Keeps the newest `retain` snapshots and queues the removal of the log segments only older
/// snapshots needed (INV-2); returns the oldest kept snapshot's zxid. The log's answer arrives
/// as `LogEvent::Purged`.
pub fn purge(snaps: &SnapDir, log: &LogWriter, retain: usize) -> Result<Option<Zxid>> {
    let oldest_kept = snaps.purge(retain.max(1))?;
    if let Some(z) = oldest_kept {
        log.purge(z)?;
    }
    Ok(oldest_kept)
}
