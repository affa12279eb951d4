//! Start-up: configurations from zoo.cfg and [`NodeOptions`], the data directories opened and
//! the state machine restored from the newest snapshot, then the log thread, the transport and
//! the driver task.
//!
//! INV-1: the driver starts only after the state machine holds the loaded snapshot and the
//! core was built from the same durable state (zab-core `DurableState`).
//! INV-2 (PITFALLS B9): an empty data dir started with [`NodeOptions::bootstrap`] is made a
//! voting member at zxid 0 (epoch files written at 0, so a restart finds it initialized);
//! without it, the `needsInitialSync` marker is written before the core starts and the node
//! does not vote until its first sync is durable. A data dir that holds data ignores
//! bootstrap, and so does a node given [`NodeOptions::join_membership`].
//! INV-3: the committed configuration is the data dir's (its newest snapshot's) when it has
//! one; zoo.cfg's `server.N` lines are only the bootstrap configuration, and where they differ
//! from the data dir's one warning names the servers. A joining node's configuration
//! ([`NodeOptions::join_membership`]) is used only when the data dir has none, and is made
//! durable (`join_file`, with the initial-sync marker written first) before the core starts;
//! a configuration that does not list this node is refused before anything is written.
//! INV-4: the snapshot loaded at start belongs to zoo.cfg's cluster ([`NetError::ForeignSnapshot`]
//! otherwise, before the node joins anything): a restored or copied data dir of another
//! cluster is never mixed in.

use std::path::Path;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};
use zab_core::{Membership, Peer, ServerId, StepError, Zxid};
use zab_store::{DataDir, EpochKind, LogOptions};

use super::api::{NodeOptions, StateMachine};
use super::board::{StatusBoard, Watches};
use super::driver::{Driver, DriverIo, Inbox};
use super::join_file;
use super::log_link::LogLink;
use super::out::OutQueues;
use super::peers::PeerBook;
use super::snap::{SnapTarget, Snapper};
use super::Request;
use crate::config::NodeConfig;
use crate::metrics::NodeMetrics;
use crate::transport::{NetError, PeerAddrs, Transport, TransportConfig};

/// Requests the handle may queue at the driver before a sender waits.
pub(super) const REQUEST_QUEUE_LEN: usize = 1024;

/// Messages a DIFF from the in-memory committed log sends per txn (PROPOSAL and COMMIT).
const MESSAGES_PER_DIFF_TXN: usize = 2;

/// Messages around a DIFF's txns (DIFF, the configuration, NEWLEADER, UPTODATE) and the
/// heartbeats that may share the outbox with it, rounded up.
const DIFF_FRAMING: usize = 16;

/// The core's and the transport's configurations; refuses an outbox that cannot hold a DIFF
/// of the committed-log window (the core sends that DIFF straight to the outbox).
pub(super) fn configs(
    config: &NodeConfig,
    sid: zab_core::ServerId,
    opts: &NodeOptions,
) -> Result<(zab_core::Config, TransportConfig), NetError> {
    let mut core_cfg = config.to_core(sid)?;
    if let Some(w) = opts.committed_log_window {
        core_cfg.committed_log_window = w;
    }
    if let Some(l) = opts.diff_from_log_limit {
        core_cfg.diff_from_log_limit = l;
    }
    let cluster_id = config.cluster_id.unwrap_or(0);
    let mut tcfg = TransportConfig::from_node(config, sid, cluster_id)?;
    if let Some(listen) = opts.listen {
        tcfg.listen = listen;
    }
    if let Some(n) = opts.outbox_len {
        tcfg.outbox_len = n;
    }
    for (peer, addrs) in &opts.peer_addrs {
        tcfg.peers.insert(*peer, *addrs);
    }
    let window = core_cfg.committed_log_window;
    let needed = window
        .saturating_mul(MESSAGES_PER_DIFF_TXN)
        .saturating_add(DIFF_FRAMING);
    if tcfg.outbox_len < needed {
        return Err(NetError::OutboxTooSmall {
            outbox_len: tcfg.outbox_len,
            window,
            needed,
        });
    }
    Ok((core_cfg, tcfg))
}

/// What `open_store` needs besides zoo.cfg and the state machine.
pub(super) struct StoreStart {
    /// This server.
    pub(super) sid: ServerId,
    /// zoo.cfg's configuration (the bootstrap one).
    pub(super) bootstrap_membership: Membership,
    /// [`NodeOptions::bootstrap`].
    pub(super) bootstrap: bool,
    /// [`NodeOptions::join_membership`].
    pub(super) join: Option<Membership>,
}

/// Opens the data directories and restores `sm` from the newest valid snapshot (blocking);
/// settles what an empty data dir means (INV-2) and which configuration holds (INV-3).
pub(super) fn open_store(
    cfg: &NodeConfig,
    mut sm: Box<dyn StateMachine>,
    start: StoreStart,
) -> Result<(DataDir, zab_core::DurableState, Box<dyn StateMachine>), NetError> {
    let opts = LogOptions {
        prealloc_bytes: usize::try_from(cfg.pre_alloc_bytes).unwrap_or(64 << 20),
        force_sync: cfg.force_sync,
    };
    let mut dd = DataDir::open(&cfg.data_dir, &cfg.data_log_dir, opts)?;
    let mut restored = None;
    let durable = dd.load(|r| {
        let zxid = r.info().zxid;
        let started = std::time::Instant::now();
        let result = sm
            .restore(zxid, r)
            .map_err(|e| std::io::Error::other(e.to_string()));
        restored = Some((
            r.info().path.clone(),
            started.elapsed(),
            r.info().cluster_id,
        ));
        result
    })?;
    if let Some((path, _, found)) = &restored {
        check_cluster_id(cfg, path, *found)?;
    }
    log_loaded(&durable, restored.map(|(path, took, _)| (path, took)));
    let durable = settle_membership(&dd, durable, cfg, &start)?;
    let bootstrap = start.bootstrap && start.join.is_none();
    let durable = settle_initialized(&dd, durable, bootstrap)?;
    Ok((dd, durable, sm))
}

/// INV-4: a loaded snapshot whose cluster id is not zoo.cfg's `clusterId` refuses the start
/// (snapshots of cluster id 0, written without a `clusterId`, are not checked).
fn check_cluster_id(cfg: &NodeConfig, path: &Path, found: u64) -> Result<(), NetError> {
    match cfg.cluster_id {
        Some(expected) if expected != 0 && found != 0 && found != expected => {
            Err(NetError::ForeignSnapshot {
                path: path.to_owned(),
                found,
                expected,
            })
        }
        _ => Ok(()),
    }
}

/// Logs what start-up found: the snapshot the state machine was restored from (file, size,
/// time to restore), the txn log's range, and the logged txns that will be applied once a
/// leader confirms them (the driver logs when they are).
fn log_loaded(durable: &zab_core::DurableState, restored: Option<(std::path::PathBuf, Duration)>) {
    match restored {
        Some((file, took)) => info!(
            "loaded snapshot {} ({}, {} bytes): state machine restored in {} ms",
            durable.snapshot_zxid,
            file.display(),
            durable.snapshot_bytes,
            took.as_millis()
        ),
        None => info!("no snapshot: the state machine starts empty"),
    }
    match (durable.log_index.first(), durable.log_index.last()) {
        (Some(first), Some(last)) => info!(
            "txn log holds {} records from {first} to {last}; {} logged after the snapshot \
             will be applied once a leader confirms them",
            durable.log_index.len(),
            durable.log_tail.len()
        ),
        _ => info!("txn log is empty"),
    }
}

/// Which committed configuration holds (INV-3): the newest of the data dir's snapshot's and
/// the joining node's (the join file, or [`NodeOptions::join_membership`], made durable here),
/// else zoo.cfg's. A SNAP from before the node was added carries a configuration without it,
/// so the join file stays until a snapshot's configuration is at least as new.
fn settle_membership(
    dd: &DataDir,
    mut durable: zab_core::DurableState,
    cfg: &NodeConfig,
    start: &StoreStart,
) -> Result<zab_core::DurableState, NetError> {
    let dir = dd.snaps.dir();
    let join_err = |e: join_file::JoinFileError| NetError::StateMachine(e.to_string());
    let kept_join = join_file::read(dir).map_err(join_err)?;
    if let (Some(data), Some(kept)) = (&durable.membership, &kept_join) {
        if kept.version > data.version {
            info!(
                "the configuration this server joined with (version {}) is newer than its \
                 snapshot's (version {}): it is the committed one",
                kept.version, data.version
            );
            durable.membership = Some(kept.clone());
            return Ok(durable);
        }
    }
    if let Some(data) = &durable.membership {
        data_dir_membership_wins(dir, data, start)?;
        return Ok(durable);
    }
    let kept = kept_join;
    let newer = match (&kept, &start.join) {
        (Some(k), Some(j)) if j.version > k.version => Some(j),
        (None, Some(j)) => Some(j),
        _ => None,
    };
    let Some(join) = newer.or(kept.as_ref()) else {
        return Ok(durable);
    };
    if !join.members.contains_key(&start.sid) {
        // Checked before anything is written: a restart must not find itself removed.
        warn!(
            "server {} is not in the configuration (version {}) it was given to join: add it \
             on a member first",
            start.sid.0, join.version
        );
        return Err(NetError::Core(StepError::NotAMember(start.sid)));
    }
    let empty = durable.snapshot_zxid == Zxid::ZERO && durable.log_index.is_empty();
    if kept.is_none() && !empty {
        // Data from before configurations were replicated: its zoo.cfg is its configuration.
        warn!(
            "the data dir holds data without a configuration (snapshot {}); the configuration \
             given to join is not used",
            durable.snapshot_zxid
        );
        return Ok(durable);
    }
    if let Some(join) = newer {
        if kept.is_none() {
            // The marker first: a crash between the two leaves a dir that syncs before voting.
            dd.epochs.set_needs_initial_sync(true)?;
        }
        join_file::write(dir, join, cfg.force_sync).map_err(join_err)?;
        info!(
            "joining the cluster with its configuration version {} (servers {:?}), kept in \
             the data dir until a snapshot carries one",
            join.version,
            join.members.keys().map(|s| s.0).collect::<Vec<_>>()
        );
    }
    durable.needs_initial_sync = dd.epochs.needs_initial_sync()?;
    durable.membership = Some(join.clone());
    Ok(durable)
}

/// The data dir's committed configuration `data` holds (it is not older than the join
/// file's): says where zoo.cfg and a configuration given to join are overruled, and removes
/// the join file it supersedes.
fn data_dir_membership_wins(
    dir: &Path,
    data: &Membership,
    start: &StoreStart,
) -> Result<(), NetError> {
    if let Some(diff) = start.bootstrap_membership.differences(data) {
        warn!(
            "zoo.cfg's server lines differ from the committed configuration in the data \
             dir ({diff}); the data dir's configuration (version {}) wins",
            data.version
        );
    }
    if start.join.is_some() {
        info!(
            "the data dir already holds the cluster's configuration (version {}); the one \
             given to join is ignored",
            data.version
        );
    }
    join_file::remove(dir).map_err(|e| NetError::StateMachine(e.to_string()))
}

/// What an empty data dir (no epoch file, no snapshot, no configuration, no log record) means
/// (INV-2).
fn settle_initialized(
    dd: &DataDir,
    mut durable: zab_core::DurableState,
    bootstrap: bool,
) -> Result<zab_core::DurableState, NetError> {
    // A snapshot with a configuration (a joining node's, at zxid 0) is data: never bootstrap.
    let empty = dd.epochs.read(EpochKind::Accepted)?.is_none()
        && dd.epochs.read(EpochKind::Current)?.is_none()
        && durable.snapshot_zxid == zab_core::Zxid::ZERO
        && durable.log_index.is_empty()
        && durable.membership.is_none();
    match (empty, bootstrap, durable.needs_initial_sync) {
        (true, true, _) => {
            // Epoch files at 0 make the choice stick: the dir is no longer empty.
            dd.epochs.write(EpochKind::Accepted, zab_core::Epoch(0))?;
            dd.epochs.write(EpochKind::Current, zab_core::Epoch(0))?;
            dd.epochs.set_needs_initial_sync(false)?;
            durable.needs_initial_sync = false;
            info!("bootstrap: the empty data dir is initialized at zxid 0 as a voting member");
        }
        (true, false, _) => {
            dd.epochs.set_needs_initial_sync(true)?;
            durable.needs_initial_sync = true;
            warn!(
                "the data dir is empty: joining a leader as a non-voting learner; this node \
                 votes only after its first complete sync (if this is a brand-new cluster, \
                 start every node once with bootstrap)"
            );
        }
        (false, true, true) => info!(
            "bootstrap ignored: the data dir holds a partial initial sync; it completes it \
             before voting"
        ),
        (false, false, true) => warn!(
            "the data dir has not completed its initial sync: non-voting learner until it does"
        ),
        (false, true, false) => info!("bootstrap ignored: the data dir is already initialized"),
        (false, false, false) => {}
    }
    Ok(durable)
}

/// What `launch` needs.
pub(super) struct Parts<'a> {
    pub(super) config: &'a NodeConfig,
    pub(super) opts: &'a NodeOptions,
    pub(super) cluster_id: u64,
    pub(super) tcfg: TransportConfig,
    pub(super) dd: DataDir,
    pub(super) peer: Peer,
    pub(super) sm: Box<dyn StateMachine>,
    pub(super) clock: Instant,
    pub(super) metrics: NodeMetrics,
}

/// What the handle keeps.
pub(super) type Launched = (PeerAddrs, mpsc::Sender<Request>, Watches, CancellationToken);

/// Starts the log thread, the transport and the driver task (INV-1).
pub(super) async fn launch(p: Parts<'_>) -> Result<Launched, NetError> {
    let sid = p.tcfg.sid;
    let log = LogLink::spawn(p.dd.log, &p.metrics)?;
    let mut tcfg = p.tcfg;
    tcfg.metrics = Some(p.metrics.peers());
    let (transport, events) = Transport::start(tcfg).await?;
    let local = transport.local_addrs();
    let (out, streams) = OutQueues::new(
        log.reader().clone(),
        p.opts.snap_chunk_bytes,
        p.opts.stream_stall_timeout,
    );
    let target = SnapTarget {
        snaps: p.dd.snaps.clone(),
        cluster_id: p.cluster_id,
        committed: p.peer.committed_membership().clone(),
        cpu_percent: p.config.snap_cpu_percent,
    };
    let (snapper, snaps) = Snapper::new(
        p.config.snap_count,
        p.config.snap_size_limit_bytes,
        p.opts.exact_snap_count,
        usize::try_from(p.config.snap_retain_count).unwrap_or(3),
        target,
    );
    let (req_tx, requests) = mpsc::channel(REQUEST_QUEUE_LEN);
    let (board, watches) = StatusBoard::new(sid, &p.peer);
    let shutdown = CancellationToken::new();
    let io = DriverIo {
        transport,
        out,
        log,
        epochs: p.dd.epochs,
        snapper,
        peer_book: PeerBook::new(sid, p.opts.peer_addrs.clone()),
    };
    let tick = Duration::from_millis((p.config.tick_ms / 2).clamp(5, 50));
    let driver = Driver::new(
        p.peer,
        p.sm,
        io,
        board,
        (p.clock, tick),
        shutdown.clone(),
        p.metrics,
    );
    let inbox = Inbox {
        events,
        streams,
        snaps,
        requests,
    };
    tokio::spawn(driver.run(inbox));
    Ok((local, req_tx, watches, shutdown))
}
