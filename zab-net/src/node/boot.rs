//! Start-up: configurations from zoo.cfg and [`NodeOptions`], the data directories opened and
//! the state machine restored from the newest snapshot, then the log thread, the transport and
//! the driver task.
//!
//! INV-1: the driver starts only after the state machine holds the loaded snapshot and the
//! core was built from the same durable state (zab-core `DurableState`).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use zab_core::{Peer, Role};
use zab_store::{DataDir, LogOptions, LogWriter};

use super::api::{NodeOptions, NodeStatus, StateMachine};
use super::driver::{node_span, Driver, Inbox};
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

/// Opens the data directories and restores `sm` from the newest valid snapshot (blocking).
pub(super) fn open_store(
    cfg: &NodeConfig,
    mut sm: Box<dyn StateMachine>,
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
    Ok((dd, durable, sm))
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
pub(super) type Launched = (
    PeerAddrs,
    mpsc::Sender<Request>,
    watch::Receiver<NodeStatus>,
    CancellationToken,
);

/// Starts the log thread, the transport and the driver task (INV-1).
pub(super) async fn launch(p: Parts<'_>) -> Result<Launched, NetError> {
    let sid = p.tcfg.sid;
    let (log_tx, log_events) = mpsc::unbounded_channel();
    let (log, log_reader, log_thread) = LogWriter::spawn(p.dd.log, move |ev| {
        // The driver may be gone during shutdown; nobody is left to tell then.
        let _ = log_tx.send(ev);
    })?;
    let (transport, events) = Transport::start(p.tcfg).await?;
    let local = transport.local_addrs();
    let (out, streams) = OutQueues::new(
        log_reader.clone(),
        p.opts.snap_chunk_bytes,
        p.opts.stream_stall_timeout,
    );
    let (snapper, snaps) = Snapper::new(
        p.config.snap_count,
        p.opts.exact_snap_count,
        usize::try_from(p.config.snap_retain_count).unwrap_or(3),
        p.cluster_id,
        p.dd.snaps.clone(),
    );
    let (req_tx, requests) = mpsc::channel(1024);
    let status = NodeStatus::new(sid);
    let (status_tx, status_rx) = watch::channel(status.clone());
    let shutdown = CancellationToken::new();
    let driver = Driver {
        peer: p.peer,
        sm: Some(p.sm),
        transport,
        out,
        log,
        log_reader,
        log_thread: Some(log_thread),
        log_events,
        epochs: p.dd.epochs,
        snapper,
        writes: BTreeMap::new(),
        syncs: BTreeMap::new(),
        next_request: 0,
        status_tx,
        status,
        clock: p.clock,
        inputs: VecDeque::new(),
        shutdown: shutdown.clone(),
        span: node_span(sid, Role::Looking, 0),
        tick: Duration::from_millis((p.config.tick_ms / 2).clamp(5, 50)),
    };
    let inbox = Inbox {
        events,
        streams,
        snaps,
        requests,
    };
    tokio::spawn(driver.run(inbox));
    Ok((local, req_tx, status_rx, shutdown))
}
