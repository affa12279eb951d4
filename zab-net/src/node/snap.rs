//! Snapshots on disk: background snapshots every ~snapCount applied txns or ~snapSizeLimitInKb
//! of txn log, whichever comes first (then purge), and the learner's side of a SNAP (temp file,
//! durable, restored, log reset).
//!
//! Every snapshot carries a committed configuration (zab-store's configuration section): a
//! background one the configuration committed at its zxid (the driver reports each
//! `MembershipChanged` with [`Snapper::set_committed`] in action order), a received SNAP the
//! one its `Snap` header names (`BeginSnapshot`).
//!
//! INV-1: a background snapshot captures the state machine right after the `Apply` of the zxid
//! it is named after, and is written on a thread of its own at a lower CPU priority
//! (`snap_thread`), paced to `snapCpuPercent` of one core (`snap_duty`); commits go on
//! meanwhile. A received SNAP is not paced.
//! INV-2: at most one background snapshot runs at a time, and none starts while a SNAP is
//! being received; a SNAP's `BeginSnapshot` waits for a running one to end.
//! INV-3: a received SNAP replaces the state only once complete: the temp file is fsynced and
//! renamed (zab-store INV-1) before the state machine restores from it; an abandoned stream
//! drops the temp file and leaves state and files as they were.
//! INV-4 (PITFALLS E8): the trigger counts bytes as well as txns: each applied txn adds its
//! log record's size (payload + record header); once the bytes since the last snapshot reach
//! the (per-node randomised, like the count) size threshold, a snapshot is due even if far
//! fewer than snapCount txns were applied, so restart replay is bounded in bytes too.
//! INV-5: a received SNAP's file carries the configuration of the leader's `Snap` header (the
//! core's `BeginSnapshot` names it); the codec refuses a header whose configuration does not
//! decode, so there is never a received snapshot without one.

use rand::Rng;
use thiserror::Error;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{info, warn};
use zab_core::{Member, Membership, ServerId, Zxid};
use zab_store::{LogWriter, SnapDir, SnapshotWriter, StoreError};

use super::api::SnapshotSource;
use super::fatal::Fatal;
use super::snap_duty::{DutyWriter, Pace, ThreadClock};

/// The size of a txn log record's header (zab-store's record format), counted with the
/// payload towards `snapSizeLimitInKb`.
const RECORD_HEADER_LEN: u64 = 20;

/// The end of a background snapshot: its zxid and size on disk, or why it failed.
pub(super) type SnapDone = Result<(Zxid, u64), SnapshotError>;

/// Why a background snapshot was not written (not fatal: the next one is tried later).
#[derive(Debug, Error)]
pub(super) enum SnapshotError {
    /// The temp file could not be created.
    #[error("create snapshot {zxid}: {source}")]
    Create {
        /// The snapshot's zxid.
        zxid: Zxid,
        /// Why.
        #[source]
        source: StoreError,
    },
    /// The state machine's view failed to write its bytes.
    #[error("write snapshot {zxid}: {source}")]
    Write {
        /// The snapshot's zxid.
        zxid: Zxid,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file could not be made durable and renamed.
    #[error("finish snapshot {zxid}: {source}")]
    Finish {
        /// The snapshot's zxid.
        zxid: Zxid,
        /// Why.
        #[source]
        source: StoreError,
    },
}

/// Decides when to snapshot and runs the writes (INV-1, INV-2).
pub(super) struct Snapper {
    snap_count: u64,
    exact: bool,
    threshold: u64,
    since: u64,
    size_limit: Option<u64>,
    size_threshold: u64,
    bytes_since: u64,
    retain: usize,
    cluster_id: u64,
    snaps: SnapDir,
    /// `snapCpuPercent`: the share of one core a background snapshot may use.
    cpu_percent: u8,
    /// The running background snapshot's hurry flag (`snap_duty` INV-4).
    hurry: std::sync::Arc<std::sync::atomic::AtomicBool>,
    running: Option<JoinHandle<()>>,
    done_tx: mpsc::UnboundedSender<SnapDone>,
    /// The configuration committed at the last applied txn: what a snapshot carries.
    committed: Membership,
    /// The SNAP being received, if any: its zxid and temp file.
    receiving: Option<(Zxid, SnapshotWriter)>,
}

/// Where the snapshots go and what they are told.
pub(super) struct SnapTarget {
    /// The snapshot directory.
    pub(super) snaps: SnapDir,
    /// The cluster id written into each snapshot.
    pub(super) cluster_id: u64,
    /// The committed configuration at start (the core's).
    pub(super) committed: Membership,
    /// `snapCpuPercent` (`snap_duty`; 100 = no limit).
    pub(super) cpu_percent: u8,
}

impl Snapper {
    pub(super) fn new(
        snap_count: u64,
        size_limit: Option<u64>,
        exact: bool,
        retain: usize,
        target: SnapTarget,
    ) -> (Snapper, mpsc::UnboundedReceiver<SnapDone>) {
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        let mut s = Snapper {
            snap_count: snap_count.max(1),
            exact,
            threshold: 0,
            since: 0,
            size_limit: size_limit.map(|b| b.max(1)),
            size_threshold: u64::MAX,
            bytes_since: 0,
            retain,
            cluster_id: target.cluster_id,
            snaps: target.snaps,
            cpu_percent: target.cpu_percent,
            hurry: Default::default(),
            running: None,
            done_tx,
            committed: target.committed,
            receiving: None,
        };
        s.rearm();
        (s, done_rx)
    }

    /// ZooKeeper's rule: snapshot after snapCount/2 + rand(snapCount/2) txns, or after
    /// limit/2 + rand(limit/2) bytes of log, so that the nodes of an ensemble do not all
    /// snapshot at once.
    fn rearm(&mut self) {
        self.since = 0;
        self.bytes_since = 0;
        self.threshold = self.randomised(self.snap_count);
        self.size_threshold = self.size_limit.map_or(u64::MAX, |l| self.randomised(l));
    }

    fn randomised(&self, limit: u64) -> u64 {
        if self.exact || limit < 2 {
            limit
        } else {
            let half = limit / 2;
            half + rand::thread_rng().gen_range(0..=half)
        }
    }

    /// One txn whose payload is `payload_len` bytes was applied; true when a snapshot is due
    /// now (INV-4).
    pub(super) fn applied(&mut self, payload_len: usize) -> bool {
        self.since += 1;
        let record = u64::try_from(payload_len)
            .unwrap_or(u64::MAX)
            .saturating_add(RECORD_HEADER_LEN);
        self.bytes_since = self.bytes_since.saturating_add(record);
        let due = self.since >= self.threshold || self.bytes_since >= self.size_threshold;
        due && self.running.is_none() && self.receiving.is_none()
    }

    /// The state was replaced by a SNAP: count from it.
    pub(super) fn installed(&mut self) {
        self.rearm();
    }

    /// The committed configuration changed (a `MembershipChanged`, in action order).
    pub(super) fn set_committed(&mut self, committed: Membership) {
        self.committed = committed;
    }

    /// The members of the configuration committed at the last applied txn.
    pub(super) fn committed_members(&self) -> &std::collections::BTreeMap<ServerId, Member> {
        &self.committed.members
    }

    /// Writes `source` as `snapshot.<zxid>` on a low-priority thread, then purges (INV-1).
    pub(super) fn start(&mut self, zxid: Zxid, source: Box<dyn SnapshotSource>, log: LogWriter) {
        self.rearm();
        if self.snaps.path(zxid).exists() {
            return;
        }
        let (snaps, cluster_id, retain) = (self.snaps.clone(), self.cluster_id, self.retain);
        let pace = Pace {
            percent: self.cpu_percent,
            hurry: Default::default(),
        };
        self.hurry = pace.hurry.clone();
        let membership = self.committed.clone();
        let done = self.done_tx.clone();
        let span = tracing::Span::current();
        self.running = Some(super::snap_thread::spawn_low_priority(move || {
            let _enter = span.enter();
            let target = (&snaps, cluster_id, &membership);
            let r = write_and_purge(target, &log, (zxid, pace), source, retain);
            let _ = done.send(r.map(|bytes| (zxid, bytes)));
        }));
    }

    /// A background snapshot ended (its report arrived).
    pub(super) fn finished(&mut self) {
        self.running = None;
    }

    /// Waits for a running background snapshot (INV-2; bounded by the disk), which stops
    /// pacing itself for it (`snap_duty` INV-4).
    pub(super) async fn wait_idle(&mut self) {
        if let Some(h) = self.running.take() {
            self.hurry.store(true, std::sync::atomic::Ordering::Relaxed);
            let _ = h.await;
        }
    }

    /// Starts receiving a SNAP at `zxid` carrying `membership` (from the leader's `Snap`
    /// header): its temp file is created at once, with that configuration (INV-5).
    pub(super) async fn begin_receive(
        &mut self,
        zxid: Zxid,
        membership: &Membership,
    ) -> Result<(), Fatal> {
        self.wait_idle().await;
        let w = self
            .snaps
            .create(zxid, self.cluster_id, Some(membership))
            .map_err(Fatal::SnapCreate)?;
        self.receiving = Some((zxid, w));
        Ok(())
    }

    /// Takes a chunk of the SNAP: bytes of the temp file's body.
    pub(super) fn receive_chunk(&mut self, data: &[u8]) -> Result<(), Fatal> {
        use std::io::Write;
        let Some((_, w)) = self.receiving.as_mut() else {
            return Err(Fatal::ChunkWithoutSnap);
        };
        w.write_all(data).map_err(Fatal::SnapWrite)
    }

    /// The SNAP at `zxid` is complete: its temp file, to be made durable (INV-3, INV-5).
    pub(super) fn end_receive(&mut self, zxid: Zxid) -> Result<SnapshotWriter, Fatal> {
        match self.receiving.take() {
            None => Err(Fatal::EndWithoutSnap(zxid)),
            Some((receiving, _)) if receiving != zxid => Err(Fatal::EndMismatch {
                ended: zxid,
                receiving,
            }),
            Some((_, w)) => Ok(w),
        }
    }

    /// Abandons the SNAP: the temp file goes, the old state stays (INV-3).
    pub(super) fn abort_receive(&mut self) {
        if let Some((zxid, _)) = self.receiving.take() {
            info!(%zxid, "SNAP abandoned; the old state stays");
        }
    }

    /// The snapshot directory.
    pub(super) fn snaps(&self) -> &SnapDir {
        &self.snaps
    }
}

/// Writes `source` as the durable `snapshot.<zxid>` carrying `membership` (blocking), its
/// encoding paced as `pace` says (`snap_duty`); returns its size on disk.
fn write_snapshot(
    (snaps, cluster_id, membership): (&SnapDir, u64, &Membership),
    (zxid, pace): (Zxid, Pace),
    source: Box<dyn SnapshotSource>,
) -> Result<u64, SnapshotError> {
    let started = std::time::Instant::now();
    let mut w = snaps
        .create(zxid, cluster_id, Some(membership))
        .map_err(|source| SnapshotError::Create { zxid, source })?;
    let percent = pace.percent;
    let mut paced = DutyWriter::new(&mut w, ThreadClock::new(), pace);
    source
        .write_to(&mut paced)
        .map_err(|source| SnapshotError::Write { zxid, source })?;
    let slept = paced.slept();
    let info = w
        .finish()
        .map_err(|source| SnapshotError::Finish { zxid, source })?;
    info!(
        file = %info.path.display(),
        ms = started.elapsed().as_millis() as u64,
        paused_ms = slept.as_millis() as u64,
        cpu_percent = percent,
        "snapshot written"
    );
    Ok(file_bytes(&info.path))
}

fn write_and_purge(
    target: (&SnapDir, u64, &Membership),
    log: &LogWriter,
    paced: (Zxid, Pace),
    source: Box<dyn SnapshotSource>,
    retain: usize,
) -> Result<u64, SnapshotError> {
    let snaps = target.0;
    let bytes = write_snapshot(target, paced, source)?;
    if let Err(e) = zab_store::purge(snaps, log, retain) {
        warn!(error = %e, "purge after snapshot failed");
    }
    Ok(bytes)
}

/// A snapshot file's size, a hint for the leader's DIFF-or-SNAP choice (0 = unknown).
pub(super) fn file_bytes(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}
