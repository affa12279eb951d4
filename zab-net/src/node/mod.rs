//! The running node: [`Node::start`] opens the data directories, restores the state machine
//! from the newest snapshot, starts the transport and the log's group-commit thread, and
//! spawns the driver task that runs the protocol core; the handle submits writes, asks for
//! linearizable read points and watches the node's status.
//!
//! Reading order: [`api`] (what the application implements and sees), `driver` (the task and
//! the execution of the core's actions), `out` (per-peer FIFOs and flow-controlled streams),
//! `snap` / `install` (snapshots taken, SNAPs received).
//!
//! INV-1: the core is only ever touched by the driver task; the handle talks to it through a
//! bounded request channel and reads a `watch` of its status.
//! INV-2: `submit` and `sync` always return: with the core's answer, a fast failure when no
//! leader is established, `Shutdown`/`Fatal` when the node stops, or `Timeout` after
//! [`NodeOptions::request_timeout`].
//! INV-3: `submit` returns `Ok(zxid)` only once the txn is committed *and applied on this
//! node* (read-your-writes on any node); `sync` returns `Ok(zxid)` once everything up to the
//! leader's commit point at the time of the call is applied here.

pub mod api;
mod driver;
mod install;
mod out;
mod snap;

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use zab_core::{Peer, Role, ServerId, Zxid};
use zab_store::{DataDir, LogOptions, LogWriter};

pub use api::{
    ApplyError, NodeOptions, NodeStatus, SnapshotSource, StateMachine, SubmitError, SyncCounters,
};

use crate::config::NodeConfig;
use crate::transport::{NetError, PeerAddrs, Transport, TransportConfig};
use driver::{Driver, Inbox, Reply};
use out::OutQueues;
use snap::Snapper;

/// A request from the handle to the driver.
pub(crate) enum Request {
    Write { payload: Bytes, reply: Reply },
    Sync { reply: Reply },
    SetPeerAddrs { sid: ServerId, addrs: PeerAddrs },
}

/// A running ZAB node (see the module docs). Dropping it stops the node without waiting; call
/// [`Node::shutdown`] to wait for a clean stop.
#[derive(Debug)]
pub struct Node {
    sid: ServerId,
    requests: mpsc::Sender<Request>,
    status: watch::Receiver<NodeStatus>,
    shutdown: CancellationToken,
    local: PeerAddrs,
    request_timeout: Duration,
}

impl Node {
    /// Starts server `sid` of `config` with its state machine.
    pub async fn start<S: StateMachine>(
        config: NodeConfig,
        sid: ServerId,
        state_machine: S,
    ) -> Result<Node, NetError> {
        Node::start_with(config, sid, state_machine, NodeOptions::default()).await
    }

    /// Like [`Node::start`], with [`NodeOptions`] (listen/peer addresses chosen at run time,
    /// timeouts, core tuning).
    pub async fn start_with<S: StateMachine>(
        config: NodeConfig,
        sid: ServerId,
        state_machine: S,
        opts: NodeOptions,
    ) -> Result<Node, NetError> {
        let mut core_cfg = config.to_core(sid)?;
        if let Some(w) = opts.committed_log_window {
            core_cfg.committed_log_window = w;
        }
        if let Some(l) = opts.diff_from_log_limit {
            core_cfg.diff_from_log_limit = l;
        }
        let cluster_id = config.cluster_id.unwrap_or(0);
        let mut tcfg = TransportConfig::from_node(&config, sid, cluster_id)?;
        if let Some(listen) = opts.listen {
            tcfg.listen = listen;
        }
        if let Some(n) = opts.outbox_len {
            tcfg.outbox_len = n;
        }
        for (peer, addrs) in &opts.peer_addrs {
            tcfg.peers.insert(*peer, *addrs);
        }

        let sm: Box<dyn StateMachine> = Box::new(state_machine);
        let boot_cfg = config.clone();
        let (dd, durable, sm) = tokio::task::spawn_blocking(move || open_store(&boot_cfg, sm))
            .await
            .map_err(|e| NetError::StateMachine(format!("start-up task: {e}")))??;
        let clock = Instant::now();
        let peer = Peer::new(core_cfg, durable, 0)?;

        let (log_tx, log_events) = mpsc::unbounded_channel();
        let (log, log_reader, log_thread) = LogWriter::spawn(dd.log, move |ev| {
            // The driver may be gone during shutdown; nobody is left to tell then.
            let _ = log_tx.send(ev);
        })?;
        let (transport, events) = Transport::start(tcfg).await?;
        let local = transport.local_addrs();
        let (out, streams) = OutQueues::new(
            log_reader.clone(),
            opts.snap_chunk_bytes,
            opts.stream_stall_timeout,
        );
        let (snapper, snaps) = Snapper::new(
            config.snap_count,
            opts.exact_snap_count,
            usize::try_from(config.snap_retain_count).unwrap_or(3),
            cluster_id,
            dd.snaps.clone(),
        );
        let (req_tx, requests) = mpsc::channel(1024);
        let status = NodeStatus::new(sid);
        let (status_tx, status_rx) = watch::channel(status.clone());
        let shutdown = CancellationToken::new();
        let driver = Driver {
            peer,
            sm: Some(sm),
            transport,
            out,
            log,
            log_reader,
            log_thread: Some(log_thread),
            log_events,
            epochs: dd.epochs,
            snapper,
            writes: BTreeMap::new(),
            syncs: BTreeMap::new(),
            next_request: 0,
            status_tx,
            status,
            clock,
            inputs: VecDeque::new(),
            shutdown: shutdown.clone(),
            tick: Duration::from_millis((config.tick_ms / 2).clamp(5, 50)),
        };
        let inbox = Inbox {
            events,
            streams,
            snaps,
            requests,
        };
        let span = tracing::info_span!(
            "zab",
            sid = sid.0,
            role = %Role::Looking,
            epoch = tracing::field::Empty
        );
        tokio::spawn(driver.run(inbox).instrument(span));
        Ok(Node {
            sid,
            requests: req_tx,
            status: status_rx,
            shutdown,
            local,
            request_timeout: opts.request_timeout,
        })
    }

    /// This server's id.
    pub fn sid(&self) -> ServerId {
        self.sid
    }

    /// The addresses the node listens on (ports chosen by the OS when asked for port 0).
    pub fn local_addrs(&self) -> PeerAddrs {
        self.local
    }

    /// Submits a write; returns its zxid once it is committed and applied here (INV-3). Works
    /// on any node: a learner forwards it to the leader.
    pub async fn submit(&self, payload: Bytes) -> Result<Zxid, SubmitError> {
        self.call(|reply| Request::Write { payload, reply }).await
    }

    /// A linearizable read point: once this returns `Ok(z)`, everything committed before the
    /// call is applied here (INV-3), so a local read of the state machine is linearizable.
    pub async fn sync(&self) -> Result<Zxid, SubmitError> {
        self.call(|reply| Request::Sync { reply }).await
    }

    /// The current status.
    pub fn status(&self) -> NodeStatus {
        self.status.borrow().clone()
    }

    /// A watch of the status (role, leader, epoch, last applied zxid, serving, ...).
    pub fn watch(&self) -> watch::Receiver<NodeStatus> {
        self.status.clone()
    }

    /// Tells the node where `peer` listens now (for peers on run-time ports).
    pub async fn set_peer_addrs(&self, sid: ServerId, addrs: PeerAddrs) {
        let _ = self
            .requests
            .send(Request::SetPeerAddrs { sid, addrs })
            .await;
    }

    /// Stops the node and waits (at most 30 s) until the driver, the transport and the log
    /// thread have stopped.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let mut w = self.status.clone();
        let _ = tokio::time::timeout(Duration::from_secs(30), w.wait_for(|s| s.stopped)).await;
    }

    async fn call(&self, make: impl FnOnce(Reply) -> Request) -> Result<Zxid, SubmitError> {
        if let Some(f) = self.status.borrow().fatal.clone() {
            return Err(SubmitError::Fatal(f));
        }
        let (tx, rx) = oneshot::channel();
        let limit = self.request_timeout;
        let exchange = async {
            self.requests
                .send(make(tx))
                .await
                .map_err(|_| SubmitError::Shutdown)?;
            rx.await.map_err(|_| SubmitError::Shutdown)?
        };
        tokio::time::timeout(limit, exchange)
            .await
            .map_err(|_| SubmitError::Timeout(limit))?
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Opens the data directories and restores `sm` from the newest valid snapshot (blocking).
fn open_store(
    cfg: &NodeConfig,
    mut sm: Box<dyn StateMachine>,
) -> Result<(DataDir, zab_core::DurableState, Box<dyn StateMachine>), NetError> {
    let opts = LogOptions {
        prealloc_bytes: usize::try_from(cfg.pre_alloc_bytes).unwrap_or(64 << 20),
        force_sync: cfg.force_sync,
    };
    let dd = DataDir::open(&cfg.data_dir, &cfg.data_log_dir, opts)?;
    let durable = dd.load(|r| {
        let zxid = r.info().zxid;
        sm.restore(zxid, r)
            .map_err(|e| std::io::Error::other(e.to_string()))
    })?;
    Ok((dd, durable, sm))
}
