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
//! bootstrap.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};
use zab_core::Peer;
use zab_store::{DataDir, EpochKind, LogOptions};

use super::api::{NodeOptions, StateMachine};
use super::board::{StatusBoard, Watches};
use super::driver::{Driver, DriverIo, Inbox};
use super::log_link::LogLink;
use super::out::OutQueues;
use super::snap::Snapper;
use super::Request;
use crate::config::NodeConfig;
use crate::transport::{NetError, PeerAddrs, Transport, TransportConfig};

/// The core's and the transport's configurations.
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
    Ok((core_cfg, tcfg))
}

/// Opens the data directories and restores `sm` from the newest valid snapshot (blocking);
/// settles what an empty data dir means (INV-2).
pub(super) fn open_store(
    cfg: &NodeConfig,
    mut sm: Box<dyn StateMachine>,
    bootstrap: bool,
) -> Result<(DataDir, zab_core::DurableState, Box<dyn StateMachine>), NetError> {
    let opts = LogOptions {
        prealloc_bytes: usize::try_from(cfg.pre_alloc_bytes).unwrap_or(64 << 20),
        force_sync: cfg.force_sync,
    };
    let mut dd = DataDir::open(&cfg.data_dir, &cfg.data_log_dir, opts)?;
    let durable = dd.load(|r| {
        let zxid = r.info().zxid;
        sm.restore(zxid, r)
            .map_err(|e| std::io::Error::other(e.to_string()))
    })?;
    let durable = settle_initialized(&dd, durable, bootstrap)?;
    Ok((dd, durable, sm))
}

/// What an empty data dir (no epoch file, no snapshot, no log record) means (INV-2).
fn settle_initialized(
    dd: &DataDir,
    mut durable: zab_core::DurableState,
    bootstrap: bool,
) -> Result<zab_core::DurableState, NetError> {
    let empty = dd.epochs.read(EpochKind::Accepted)?.is_none()
        && dd.epochs.read(EpochKind::Current)?.is_none()
        && durable.snapshot_zxid == zab_core::Zxid::ZERO
        && durable.log_index.is_empty();
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
}

/// What the handle keeps.
pub(super) type Launched = (PeerAddrs, mpsc::Sender<Request>, Watches, CancellationToken);

/// Starts the log thread, the transport and the driver task (INV-1).
pub(super) async fn launch(p: Parts<'_>) -> Result<Launched, NetError> {
    let sid = p.tcfg.sid;
    let log = LogLink::spawn(p.dd.log)?;
    let (transport, events) = Transport::start(p.tcfg).await?;
    let local = transport.local_addrs();
    let (out, streams) = OutQueues::new(
        log.reader().clone(),
        p.opts.snap_chunk_bytes,
        p.opts.stream_stall_timeout,
    );
    let (snapper, snaps) = Snapper::new(
        p.config.snap_count,
        p.config.snap_size_limit_bytes,
        p.opts.exact_snap_count,
        usize::try_from(p.config.snap_retain_count).unwrap_or(3),
        p.cluster_id,
        p.dd.snaps.clone(),
    );
    let (req_tx, requests) = mpsc::channel(1024);
    let (board, watches) = StatusBoard::new(sid, &p.peer);
    let shutdown = CancellationToken::new();
    let io = DriverIo {
        transport,
        out,
        log,
        epochs: p.dd.epochs,
        snapper,
    };
    let tick = Duration::from_millis((p.config.tick_ms / 2).clamp(5, 50));
    let driver = Driver::new(p.peer, p.sm, io, board, p.clock, tick, shutdown.clone());
    let inbox = Inbox {
        events,
        streams,
        snaps,
        requests,
    };
    tokio::spawn(driver.run(inbox));
    Ok((local, req_tx, watches, shutdown))
}
