//! The running node: [`Node::start`] opens the data directories, restores the state machine
//! from the newest snapshot, starts the transport and the log's group-commit thread, and
//! spawns the driver task that runs the protocol core; the handle submits writes, asks for
//! linearizable read points and watches the node's status.
//!
//! Reading order: [`api`] (what the application implements and sees), `boot` (start-up),
//! `driver` (the task, and the execution of the core's actions), `pending` (requests paired
//! with their answers), `board` (the published status), `fatal` (why the driver stops),
//! `log_link` (the txn log thread), `transfer` (leader transfer), `meter` (the driver's side of the metrics and the logs of
//! long work), `out` / `out_state` / `stream` (per-peer FIFOs, their
//! state machine, flow-controlled streams), `snap` / `snap_prefix` (snapshots taken, SNAPs
//! received; a configuration as bytes, for the join file), `peers` (where the members in force
//! listen).
//!
//! # Membership
//! The configuration is replicated state (zab-core `membership`): zoo.cfg's `server.N` lines
//! are only the bootstrap configuration of a brand-new cluster; a data dir's committed
//! configuration wins over them. [`Node::change_membership`] (and [`Node::add_member`],
//! [`Node::remove_member`]) changes it on the leader; [`NodeStatus`] shows the configuration
//! in force, the committed one, and whether this node was removed. A new server is added on a
//! member first, then started with an empty data dir and [`NodeOptions::join_membership`].
//!
//! INV-1: the core is only ever touched by the driver task; the handle talks to it through a
//! bounded request channel and reads a `watch` of its status.
//! INV-2: `submit` and `sync` always return: with the core's answer, a fast failure when no
//! leader is established, `Shutdown`/`Fatal` when the node stops, or `Timeout` after
//! [`NodeOptions::request_timeout`].
//! INV-3: `submit` returns `Ok(zxid)` only once the txn is committed *and applied on this
//! node* (read-your-writes on any node); `sync` returns `Ok(zxid)` once everything up to the
//! leader's commit point at the time of the call is applied here.
//! INV-4: when `submit`/`sync` returns `Ok(zxid)`, [`Node::status`] already shows
//! `last_applied >= zxid` (the driver publishes before it answers).
//! INV-5: writes queued by [`Node::enqueue_write`] calls that follow one another are
//! proposed in that order; each is answered on its own reply with what `submit` would return
//! (without `submit`'s timeout: the caller bounds its wait).
//!
//! # Known limits
//! - While a SNAP or a DIFF-from-log stream to a learner runs, later messages to that learner
//!   wait in a driver-side queue that is not bounded (as ZooKeeper's `queuedPackets`).
//! - A background purge can remove log segments a running DIFF-from-log stream still reads;
//!   the stream then fails and the learner is disconnected (it reconnects and is synced again,
//!   by SNAP if needed).
//! - A received SNAP's chunks are written to the temp file on the driver task (buffered
//!   writes); its fsync and the restore run on a blocking thread while the driver waits.

pub mod api;
mod board;
mod boot;
mod driver;
mod fatal;
mod join_file;
mod log_link;
mod meter;
mod out;
mod out_state;
mod peers;
mod pending;
mod snap;
mod snap_duty;
mod snap_prefix;
mod snap_thread;
mod stream;
mod transfer;

use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::error;
use zab_core::{LearnerType, Membership, MembershipChange, Peer, ServerId, StepError, Zxid};

pub use api::{
    ApplyError, NodeError, NodeOptions, NodeStatus, RoleStatus, SnapshotSource, StateMachine,
    SubmitError, SyncCounters,
};
pub use transfer::{TransferFailure, TransferReport};

use crate::config::{NodeConfig, ServerAddr};
use crate::metrics::NodeMetrics;
use crate::transport::{NetError, PeerAddrs};
use pending::ChangeReply;
pub use pending::Reply;

/// A request from the handle to the driver.
pub(crate) enum Request {
    Write {
        payload: Bytes,
        reply: Reply,
    },
    Sync {
        reply: Reply,
    },
    ChangeMembership {
        change: MembershipChange,
        reply: ChangeReply,
    },
    SetPeerAddrs {
        sid: ServerId,
        addrs: PeerAddrs,
    },
    Transfer {
        target: Option<ServerId>,
        reply: transfer::TransferReply,
    },
    #[cfg(feature = "test-support")]
    Pause {
        duration: Duration,
    },
}

/// A running ZAB node (see the module docs). Dropping it stops the node without waiting; call
/// [`Node::shutdown`] to wait for a clean stop.
///
/// A node that cannot keep its durability promise (its txn log or an epoch file cannot be
/// written, a SNAP not installed, an apply failed) stops by itself and reports why in
/// [`NodeStatus::fatal`] (watch it with [`Node::watch_role`]); the process embedding it should
/// then stop serving from its state machine and exit non-zero, as `fe-meta server` does.
#[derive(Debug)]
pub struct Node {
    sid: ServerId,
    requests: mpsc::Sender<Request>,
    status: watch::Receiver<NodeStatus>,
    role: watch::Receiver<RoleStatus>,
    shutdown: CancellationToken,
    local: PeerAddrs,
    request_timeout: Duration,
    metrics_registry: prometheus::Registry,
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
        let (core_cfg, tcfg) = boot::configs(&config, sid, &opts)?;
        let metrics_registry = opts.metrics_registry.clone().unwrap_or_default();
        let metrics = NodeMetrics::register(&metrics_registry)?;
        let cluster_id = tcfg.cluster_id;
        let sm: Box<dyn StateMachine> = Box::new(state_machine);
        let boot_cfg = config.clone();
        let start = boot::StoreStart {
            sid,
            bootstrap_membership: Membership::bootstrap(&core_cfg.members, &core_cfg.addresses),
            bootstrap: opts.bootstrap,
            join: opts.join_membership.clone(),
        };
        let (dd, durable, sm) =
            tokio::task::spawn_blocking(move || boot::open_store(&boot_cfg, sm, start))
                .await
                .map_err(|e| NetError::StateMachine(format!("start-up task: {e}")))??;
        let clock = Instant::now();
        let peer = Peer::new(core_cfg, durable, 0).inspect_err(|e| {
            if let StepError::Removed { sid, version } = e {
                error!(
                    "server {} was removed from the cluster by configuration {version}; its \
                     data dir cannot rejoin: wipe it and add the server again as a new member \
                     (started with an empty data dir)",
                    sid.0
                );
            }
        })?;

        let launched = boot::launch(boot::Parts {
            config: &config,
            opts: &opts,
            cluster_id,
            tcfg,
            dd,
            peer,
            sm,
            clock,
            metrics,
        })
        .await?;
        let (local, req_tx, (status_rx, role_rx), shutdown) = launched;
        Ok(Node {
            sid,
            requests: req_tx,
            status: status_rx,
            role: role_rx,
            shutdown,
            local,
            request_timeout: opts.request_timeout,
            metrics_registry,
        })
    }

    /// The registry holding this node's metrics (`NodeOptions::metrics_registry`, or the
    /// node's own): serve `registry.gather()` with Prometheus' text encoder.
    pub fn metrics_registry(&self) -> &prometheus::Registry {
        &self.metrics_registry
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
    ///
    /// **Which forwarding path to use.** On a learner, `submit` forwards the payload to the leader
    /// over the quorum links (ZooKeeper's REQUEST), and the leader proposes those bytes as they
    /// are. Use it when the payload is final where it is made: any node can build it, and applying
    /// it is correct whatever committed in between (a blind overwrite, or an entry whose apply re-
    /// checks and records its own outcome). When the leader must decide what gets logged — validate
    /// the request against its own state, including writes it has planned but not yet committed,
    /// assign ids, or refuse with a typed error before anything is logged — forward the *request*
    /// at the application layer instead, and call `submit`/`enqueue_write` only on the leader (a
    /// learner's `SubmitError::NotLeader { leader }` says where to send it). fe-meta does the
    /// latter. Its planner validates each `Command` against the leader's catalog plus the entries
    /// still pending there; a follower's catalog may be behind, so a follower cannot plan. A
    /// follower therefore forwards the client's request once, over the client protocol, to the
    /// leader's client port, with the forwarded bit in the request id so it is never forwarded
    /// again. It passes the leader's answer back only after it has applied the entry itself (read-
    /// your-writes).
    pub async fn submit(&self, payload: Bytes) -> Result<Zxid, SubmitError> {
        self.call(|reply| Request::Write { payload, reply }).await
    }

    /// Queues one write at the driver and returns once it is queued (INV-5); `reply` later
    /// gets what [`Node::submit`] would return (the zxid once committed and applied here, or
    /// the error), straight from the driver. Writes queued by calls that follow one another
    /// are proposed in that order. If the node has stopped, `reply` is answered at once with
    /// the reason. The caller bounds its wait for the answer (and may bound this call: it
    /// waits while the driver's request channel is full; cancelling it queues nothing).
    pub async fn enqueue_write(&self, payload: Bytes, reply: Reply) {
        if let Some(f) = self.status.borrow().fatal.clone() {
            let _ = reply.send(Err(SubmitError::Fatal(f)));
            return;
        }
        let sent = self.requests.send(Request::Write { payload, reply }).await;
        if let Err(mpsc::error::SendError(Request::Write { reply, .. })) = sent {
            let _ = reply.send(Err(SubmitError::Shutdown));
        }
    }

    /// A linearizable read point: once this returns `Ok(z)`, everything committed before the
    /// call is applied here (INV-3), so a local read of the state machine is linearizable.
    pub async fn sync(&self) -> Result<Zxid, SubmitError> {
        self.call(|reply| Request::Sync { reply }).await
    }

    /// Changes the membership; returns the new configuration's version (the zxid that
    /// committed it) once it is committed and applied here, so [`Node::status`] already shows
    /// it in `committed_membership`. One change at a time (a second one in flight is refused
    /// with [`NodeError::ChangeInFlight`]); an added follower joins as `Joining` and the
    /// leader promotes it to participant by itself once it is synced.
    ///
    /// Only the leader accepts a change: on any other node this returns
    /// [`NodeError::NotLeader`] naming the leader, and the application forwards the request
    /// there (as it forwards its other requests; zab-net does not forward changes itself).
    pub async fn change_membership(&self, change: MembershipChange) -> Result<Zxid, NodeError> {
        if let Some(f) = self.status.borrow().fatal.clone() {
            return Err(NodeError::Fatal(f));
        }
        let (tx, rx) = oneshot::channel();
        let limit = self.request_timeout;
        let request = Request::ChangeMembership { change, reply: tx };
        let exchange = async {
            self.requests
                .send(request)
                .await
                .map_err(|_| NodeError::Shutdown)?;
            rx.await.map_err(|_| NodeError::Shutdown)?
        };
        tokio::time::timeout(limit, exchange)
            .await
            .map_err(|_| NodeError::Timeout(limit))?
    }

    /// Adds server `sid`, reached at `addr` (its zoo.cfg `server.N` value), as a follower
    /// (`LearnerType::Participant`: it joins as `Joining` and is promoted once synced) or an
    /// observer; see [`Node::change_membership`]. Then start the new server with an empty data
    /// dir and [`NodeOptions::join_membership`] set to the configuration this returns the
    /// version of (`NodeStatus::committed_membership` of a member).
    pub async fn add_member(
        &self,
        sid: ServerId,
        learner_type: LearnerType,
        addr: &ServerAddr,
    ) -> Result<Zxid, NodeError> {
        let mut addr = addr.clone();
        addr.learner_type = learner_type;
        let change = MembershipChange::Add {
            sid,
            learner_type,
            address: addr.to_value(),
        };
        self.change_membership(change).await
    }

    /// Removes server `sid`, whatever its role; see [`Node::change_membership`]. The removed
    /// server goes silent for good once it learns of it (`NodeStatus::removed`); removing the
    /// leader makes it hand over after the change committed.
    pub async fn remove_member(&self, sid: ServerId) -> Result<Zxid, NodeError> {
        self.change_membership(MembershipChange::Remove { sid })
            .await
    }

    /// The current status.
    pub fn status(&self) -> NodeStatus {
        self.status.borrow().clone()
    }

    /// The current status if `wanted` holds for it, copied only then: a check made on every
    /// request need not copy the whole status.
    pub fn status_if(&self, wanted: impl FnOnce(&NodeStatus) -> bool) -> Option<NodeStatus> {
        let st = self.status.borrow();
        wanted(&st).then(|| st.clone())
    }

    /// The configuration in force (shared, not copied).
    pub fn membership(&self) -> std::sync::Arc<Membership> {
        std::sync::Arc::clone(&self.status.borrow().membership)
    }

    /// A watch of the status (role, leader, epoch, last applied zxid, serving, ...).
    pub fn watch(&self) -> watch::Receiver<NodeStatus> {
        self.status.clone()
    }

    /// A watch of the role part of the status ([`RoleStatus`]): it changes with elections and
    /// the stop, not with every write, so a task waiting on it is not woken per commit.
    pub fn watch_role(&self) -> watch::Receiver<RoleStatus> {
        self.role.clone()
    }

    /// Tells the node where `peer` listens now (for peers on run-time ports).
    pub async fn set_peer_addrs(&self, sid: ServerId, addrs: PeerAddrs) {
        let _ = self
            .requests
            .send(Request::SetPeerAddrs { sid, addrs })
            .await;
    }

    /// Fault injection for tests: the driver stands still for `duration` — no ticks, no
    /// messages, no requests handled — like a SIGSTOPped process whose sockets stay open.
    /// Only with the `test-support` feature.
    #[cfg(feature = "test-support")]
    pub async fn pause(&self, duration: Duration) {
        let _ = self.requests.send(Request::Pause { duration }).await;
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
