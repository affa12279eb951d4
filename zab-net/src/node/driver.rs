//! The driver: one tokio task that owns the [`Peer`], feeds it inputs and carries out its
//! actions with the transport, the zab-store log writer, files and the state machine.
//!
//! ```text
//!  select! { shutdown | log events | transport events | stream ends | snapshot ends
//!           | client requests | tick }  ──▶ Peer::step ──▶ take_actions ──▶ execute in order
//! ```
//! INV-1 (zab-core io.rs): one batch of actions runs in order; epoch files and TRUNC are durable
//! before the next action runs (the driver awaits them; log events that arrive meanwhile are
//! fed to the core after the batch); `AppendLog` only queues to the group-commit thread.
//! INV-2: every input produced while executing a batch (`LogPersisted`, `SnapshotInstalled`,
//! `LogPurged`) is fed after that batch, in arrival order.
//! INV-3: a fatal condition (core `StepError`, a failed apply/restore, the log thread failing,
//! an epoch file not written) stops the driver: pending requests fail, the reason is published
//! in `NodeStatus::fatal`, nothing more is applied.
//! INV-4 (coalescing): after the event that woke it, the driver also takes what is already
//! queued on its log, transport and request channels (at most [`WAKE_BATCH`] items, no
//! waiting) and feeds it all in arrival order per channel, each transport event and request
//! handled only once everything taken before it was fed (as if it had just arrived); the status is published once per
//! such batch and the batch's answers to clients are sent after that publish, so a caller
//! that got its zxid sees it applied in `Node::status` (mod INV-4) and many writes cost one
//! status notification instead of one each.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn, Instrument, Span};
use zab_core::{Action, Input, Message, Peer, RequestId, Zxid};
use zab_store::{EpochFiles, EpochKind, LogEvent, LogReader, LogWriter, SyncThread};

use super::api::{NodeStatus, RoleStatus, StateMachine, SubmitError};
use super::out::{OutQueues, Stream, StreamDone};
use super::snap::{SnapDone, Snapper};
use super::Request;
use crate::transport::{Event, Transport};

/// How long a synchronous log command (truncate, reset) may take before the node gives up.
const LOG_WAIT: Duration = Duration::from_secs(60);

/// Most queued items taken without waiting after a wake-up (INV-4).
pub(super) const WAKE_BATCH: usize = 256;

/// A transport event or client request taken by `gather`, turned into inputs only when
/// everything before it was fed (INV-4).
pub(super) enum Taken {
    Net(Event),
    Request(Request),
}

/// What woke the driver up.
enum Wake {
    Tick,
    Log(LogEvent),
    Net(Event),
    Stream(StreamDone),
    Snap(SnapDone),
    Request(Request),
}

/// The span of every log line of the node (see `node_span`).
pub(super) fn node_span(sid: zab_core::ServerId, role: zab_core::Role, epoch: u32) -> Span {
    // ERROR level so that the span frames every line whatever the filter (an `info_span!`
    // vanishes under `RUST_LOG=warn`, leaving warnings without a sid). A new span per role
    // change, because `Span::record` appends fields in tracing-subscriber's fmt output.
    tracing::error_span!(parent: None, "zab", sid = sid.0, role = %role, epoch)
}

/// A fatal condition (INV-3).
pub(super) struct Fatal(pub(super) String);

/// Where the driver sends a write's or a sync's answer.
pub type Reply = oneshot::Sender<Result<Zxid, SubmitError>>;

/// Channels the driver selects over.
pub(super) struct Inbox {
    pub(super) events: mpsc::Receiver<Event>,
    pub(super) streams: mpsc::UnboundedReceiver<StreamDone>,
    pub(super) snaps: mpsc::UnboundedReceiver<SnapDone>,
    pub(super) requests: mpsc::Receiver<Request>,
}

pub(super) struct Driver {
    pub(super) peer: Peer,
    pub(super) sm: Option<Box<dyn StateMachine>>,
    pub(super) transport: Transport,
    pub(super) out: OutQueues,
    pub(super) log: LogWriter,
    pub(super) log_reader: LogReader,
    pub(super) log_thread: Option<SyncThread>,
    pub(super) log_events: mpsc::UnboundedReceiver<LogEvent>,
    pub(super) epochs: EpochFiles,
    pub(super) snapper: Snapper,
    pub(super) writes: BTreeMap<u64, Reply>,
    pub(super) syncs: BTreeMap<u64, Reply>,
    /// Answers decided while feeding the current batch, sent after its publish (INV-4).
    pub(super) answers: Vec<(Reply, Result<Zxid, SubmitError>)>,
    pub(super) next_request: u64,
    pub(super) status_tx: watch::Sender<NodeStatus>,
    /// The role part of the status, sent only when it changes (`Node::watch_role`).
    pub(super) role_tx: watch::Sender<RoleStatus>,
    pub(super) status: NodeStatus,
    pub(super) clock: Instant,
    pub(super) inputs: VecDeque<Input>,
    /// Events and requests taken ahead by `gather`, in arrival order (INV-4).
    pub(super) taken: VecDeque<Taken>,
    pub(super) shutdown: CancellationToken,
    pub(super) tick: Duration,
    pub(super) span: Span,
}

impl Driver {
    pub(super) fn now_ms(&self) -> u64 {
        u64::try_from(self.clock.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Runs until shutdown or a fatal condition.
    pub(super) async fn run(mut self, mut inbox: Inbox) {
        let mut tick = tokio::time::interval(self.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        self.publish();
        let result = loop {
            let shutdown = self.shutdown.clone();
            // Unbiased: under a steady stream of messages, ticks (heartbeats, timeouts) and
            // client requests still get their turn.
            let wake = tokio::select! {
                _ = shutdown.cancelled() => break Ok(()),
                _ = tick.tick() => Wake::Tick,
                Some(ev) = self.log_events.recv() => Wake::Log(ev),
                Some(ev) = inbox.events.recv() => Wake::Net(ev),
                Some(done) = inbox.streams.recv() => Wake::Stream(done),
                Some(done) = inbox.snaps.recv() => Wake::Snap(done),
                Some(req) = inbox.requests.recv() => Wake::Request(req),
            };
            let span = self.span.clone();
            if let Err(f) = self.handle(wake, &mut inbox).instrument(span).await {
                break Err(f);
            }
        };
        let span = self.span.clone();
        self.stop(result).instrument(span).await;
    }

    async fn handle(&mut self, wake: Wake, inbox: &mut Inbox) -> Result<(), Fatal> {
        match wake {
            Wake::Tick => self.on_tick().await,
            Wake::Log(ev) => {
                self.defer_log_event(ev)?;
                self.gather(inbox)?;
                self.drain().await
            }
            Wake::Net(ev) => {
                self.on_transport(ev);
                self.gather(inbox)?;
                self.drain().await
            }
            Wake::Stream(done) => {
                self.out.on_done(&self.transport, done);
                Ok(())
            }
            Wake::Snap(done) => {
                self.on_snapshot_done(done);
                self.drain().await
            }
            Wake::Request(req) => {
                self.on_request(req).await;
                self.gather(inbox)?;
                self.drain().await
            }
        }
    }

    /// Takes what is already waiting on the log, transport and request channels (at most
    /// [`WAKE_BATCH`] items, without waiting: INV-4). Log events become inputs at once (as
    /// `wait_log` defers them); transport events and requests wait in `taken` until
    /// everything before them was fed, so each is handled as if it had just arrived.
    fn gather(&mut self, inbox: &mut Inbox) -> Result<(), Fatal> {
        let mut budget = WAKE_BATCH;
        while budget > 0 {
            let before = budget;
            if let Ok(ev) = self.log_events.try_recv() {
                self.defer_log_event(ev)?;
                budget -= 1;
            }
            if let Ok(ev) = inbox.events.try_recv() {
                self.taken.push_back(Taken::Net(ev));
                budget = budget.saturating_sub(1);
            }
            if let Ok(req) = inbox.requests.try_recv() {
                self.taken.push_back(Taken::Request(req));
                budget = budget.saturating_sub(1);
            }
            if budget == before {
                break;
            }
        }
        Ok(())
    }

    async fn on_tick(&mut self) -> Result<(), Fatal> {
        for peer in self.out.expired_mutes(&self.transport) {
            warn!(
                peer = peer.0,
                "no loss reported for a severed connection; telling the core"
            );
            self.inputs.push_back(Input::ConnectionLost { peer });
        }
        let now_ms = self.now_ms();
        self.step(Input::Tick { now_ms }).await
    }

    /// Turns a transport event into an input (fed by the next `drain`).
    fn on_transport(&mut self, ev: Event) {
        match ev {
            Event::Message { from, msg } => {
                let c = &mut self.status.syncs_received;
                match &msg {
                    Message::Diff { .. } => c.diff += 1,
                    Message::Trunc { .. } => c.trunc += 1,
                    Message::Snap { .. } => c.snap += 1,
                    _ => {}
                }
                self.inputs.push_back(Input::Message { from, msg });
            }
            Event::ConnectionLost { peer } => {
                if self.out.connection_lost(&self.transport, peer) {
                    debug!(peer = peer.0, "connection closed at the core's request");
                    return;
                }
                self.inputs.push_back(Input::ConnectionLost { peer });
            }
        }
    }

    /// Turns a log event into a later input (INV-2).
    fn defer_log_event(&mut self, ev: LogEvent) -> Result<(), Fatal> {
        if let LogEvent::Failed(e) = ev {
            return Err(Fatal(format!("txn log failed: {e}")));
        }
        match ev.input() {
            Some(input) => self.inputs.push_back(input),
            None => debug!(?ev, "log event"),
        }
        Ok(())
    }

    fn on_snapshot_done(&mut self, done: SnapDone) {
        self.snapper.finished();
        match done {
            Ok((zxid, bytes)) => {
                self.status.snapshots_taken += 1;
                info!(%zxid, bytes, "background snapshot done");
                self.inputs.push_back(Input::SnapshotSaved { zxid, bytes });
                self.publish();
            }
            Err(e) => warn!(error = %e, "background snapshot failed"),
        }
    }

    /// Turns a client request into an input (fed by the next `drain`); the other requests
    /// take effect at once.
    async fn on_request(&mut self, req: Request) {
        match req {
            Request::Write { payload, reply } => self.queue_write(payload, reply),
            Request::Sync { reply } => {
                self.next_request += 1;
                let id = self.next_request;
                self.syncs.insert(id, reply);
                self.inputs.push_back(Input::ClientSync {
                    request_id: RequestId(id),
                });
            }
            Request::Pause { duration } => {
                warn!(?duration, "driver paused (fault injection)");
                tokio::time::sleep(duration).await;
            }
            Request::SetPeerAddrs { sid, addrs } => {
                if let Err(e) = self.transport.set_peer_addrs(sid, addrs) {
                    warn!(error = %e, "set_peer_addrs");
                }
            }
        }
    }

    fn queue_write(&mut self, payload: bytes::Bytes, reply: Reply) {
        let max = zab_core::codec::MAX_DATA_LEN;
        if payload.len() > max {
            let len = payload.len();
            let _ = reply.send(Err(SubmitError::TooLarge { len, max }));
            return;
        }
        self.next_request += 1;
        let id = self.next_request;
        self.writes.insert(id, reply);
        self.inputs.push_back(Input::ClientWrite {
            request_id: RequestId(id),
            payload,
        });
    }

    /// Feeds `input` and everything that follows from it (INV-2).
    pub(super) async fn step(&mut self, input: Input) -> Result<(), Fatal> {
        self.inputs.push_back(input);
        self.drain().await
    }

    /// Feeds every queued input, then publishes the status once and sends the answers the
    /// inputs decided (INV-4; also when a fatal condition ends the batch early).
    async fn drain(&mut self) -> Result<(), Fatal> {
        let result = self.feed().await;
        self.publish();
        for (reply, outcome) in self.answers.drain(..) {
            let _ = reply.send(outcome);
        }
        result
    }

    async fn feed(&mut self) -> Result<(), Fatal> {
        // Bounded: each input's actions produce finitely many follow-up inputs, and `taken`
        // holds at most `WAKE_BATCH` items.
        loop {
            while let Some(input) = self.inputs.pop_front() {
                self.peer
                    .step(input)
                    .map_err(|e| Fatal(format!("protocol core: {e}")))?;
                for action in self.peer.take_actions() {
                    self.execute(action).await?;
                }
            }
            match self.taken.pop_front() {
                Some(Taken::Net(ev)) => self.on_transport(ev),
                Some(Taken::Request(req)) => self.on_request(req).await,
                None => return Ok(()),
            }
        }
    }

    /// Carries out one action (INV-1).
    async fn execute(&mut self, action: Action) -> Result<(), Fatal> {
        match action {
            Action::Send { to, msg } => self.send(to, msg),
            Action::Disconnect { peer } => self.out.disconnect(&self.transport, peer),
            Action::PersistAcceptedEpoch(e) => self.persist_epoch(EpochKind::Accepted, e).await?,
            Action::PersistCurrentEpoch(e) => self.persist_epoch(EpochKind::Current, e).await?,
            Action::PersistInitialized => self.persist_initialized().await?,
            Action::AppendLog(txn) => self
                .log
                .append(txn)
                .map_err(|e| Fatal(format!("txn log: {e}")))?,
            Action::TruncateLog { zxid } => {
                self.log
                    .truncate(zxid)
                    .map_err(|e| Fatal(format!("txn log: {e}")))?;
                self.wait_log(|ev| matches!(ev, LogEvent::Truncated { .. }))
                    .await?;
                info!(%zxid, "log truncated (TRUNC)");
            }
            Action::SendLogRange { to, after, upto } => {
                self.status.syncs_sent.diff_from_log += 1;
                let s = Stream::Range { after, upto };
                self.out.stream(&self.transport, to, s);
            }
            Action::SendSnapshot { to, zxid } => {
                self.status.syncs_sent.snap += 1;
                let source = self.sm_mut()?.snapshot();
                info!(peer = to.0, %zxid, "streaming a SNAP");
                self.out
                    .stream(&self.transport, to, Stream::Snapshot { zxid, source });
            }
            Action::BeginSnapshot { zxid } => {
                self.snapper.begin_receive(zxid).await.map_err(Fatal)?
            }
            Action::SnapshotChunk(data) => self.snapper.receive_chunk(&data).map_err(Fatal)?,
            Action::EndSnapshot { zxid } => self.install_snapshot(zxid).await?,
            Action::AbortSnapshot => self.snapper.abort_receive(),
            Action::Apply(txn) => self.apply(txn)?,
            Action::WriteDone {
                request_id,
                outcome,
            } => self.answer(true, request_id, outcome),
            Action::SyncDone {
                request_id,
                outcome,
            } => self.answer(false, request_id, outcome),
            Action::RoleChanged {
                role,
                leader,
                epoch,
            } => {
                self.span = node_span(self.status.sid, role, epoch.0);
                let _entered = self.span.clone().entered();
                info!(%role, leader = leader.map(|l| l.0), %epoch, "role changed");
            }
        }
        Ok(())
    }

    fn send(&mut self, to: zab_core::ServerId, msg: Message) {
        let c = &mut self.status.syncs_sent;
        match &msg {
            Message::Diff { .. } => c.diff += 1,
            Message::Trunc { .. } => c.trunc += 1,
            _ => {}
        }
        self.out.send(&self.transport, to, msg);
    }

    /// Decides a client's answer; it is sent after the batch's publish (INV-4).
    fn answer(
        &mut self,
        write: bool,
        id: RequestId,
        outcome: Result<Zxid, zab_core::RequestError>,
    ) {
        let pending = if write {
            &mut self.writes
        } else {
            &mut self.syncs
        };
        if let Some(reply) = pending.remove(&id.0) {
            self.answers
                .push((reply, outcome.map_err(SubmitError::from)));
        }
    }

    fn sm_mut(&mut self) -> Result<&mut Box<dyn StateMachine>, Fatal> {
        self.sm
            .as_mut()
            .ok_or_else(|| Fatal("state machine lost during a restore".to_string()))
    }

    fn apply(&mut self, txn: zab_core::Txn) -> Result<(), Fatal> {
        let zxid = txn.zxid;
        self.sm_mut()?
            .apply(zxid, &txn.data)
            .map_err(|e| Fatal(format!("state machine failed to apply {zxid}: {e}")))?;
        if self.snapper.applied(txn.data.len()) {
            let source = self.sm_mut()?.snapshot();
            self.snapper.start(zxid, source, self.log.clone());
        }
        Ok(())
    }

    async fn persist_epoch(&mut self, kind: EpochKind, e: zab_core::Epoch) -> Result<(), Fatal> {
        let files = self.epochs.clone();
        tokio::task::spawn_blocking(move || files.write(kind, e))
            .await
            .map_err(|j| Fatal(format!("epoch file writer: {j}")))?
            .map_err(|err| Fatal(format!("cannot persist {}: {err}", kind.file_name())))
    }

    /// Removes the `needsInitialSync` marker (synchronous, like the epoch files; B9).
    async fn persist_initialized(&mut self) -> Result<(), Fatal> {
        let files = self.epochs.clone();
        tokio::task::spawn_blocking(move || files.set_needs_initial_sync(false))
            .await
            .map_err(|j| Fatal(format!("epoch file writer: {j}")))?
            .map_err(|err| Fatal(format!("cannot record the initial sync as done: {err}")))?;
        info!("initial sync complete and durable: this node now votes");
        Ok(())
    }

    /// Waits for the log event `want` (bounded by `LOG_WAIT`); other events are deferred.
    pub(super) async fn wait_log(&mut self, want: fn(&LogEvent) -> bool) -> Result<(), Fatal> {
        let deadline = Instant::now() + LOG_WAIT;
        // Bounded by the deadline.
        loop {
            let ev = tokio::time::timeout_at(deadline, self.log_events.recv())
                .await
                .map_err(|_| Fatal(format!("txn log did not answer in {LOG_WAIT:?}")))?
                .ok_or_else(|| Fatal("txn log thread is gone".to_string()))?;
            if want(&ev) {
                return Ok(());
            }
            self.defer_log_event(ev)?;
        }
    }

    /// Publishes the status if it changed.
    pub(super) fn publish(&mut self) {
        let p = &self.peer;
        let s = &mut self.status;
        s.role = p.role();
        s.leader = p.leader();
        s.epoch = p.epoch();
        s.last_applied = p.last_applied_zxid();
        s.last_logged = p.last_logged_zxid();
        s.serving = p.is_serving();
        if s.serving {
            s.restored_snapshot = None;
        }
        s.initialized = !p.needs_initial_sync();
        let new = &self.status;
        self.status_tx.send_if_modified(|cur| {
            if cur != new {
                *cur = new.clone();
                true
            } else {
                false
            }
        });
        self.publish_role();
    }

    fn publish_role(&self) {
        let next = self.status.role_status();
        self.role_tx.send_if_modified(|cur| {
            let changed = *cur != next;
            if changed {
                *cur = next;
            }
            changed
        });
    }

    /// Stops everything (INV-3).
    async fn stop(mut self, result: Result<(), Fatal>) {
        let reason = match result {
            Ok(()) => {
                info!("node shutting down");
                SubmitError::Shutdown
            }
            Err(Fatal(msg)) => {
                // WARN: the embedding application reports the one ERROR line with what to do
                // (`NodeStatus::fatal`); fe-meta does, then exits.
                warn!(error = %msg, "node stops on a fatal error");
                self.status.fatal = Some(msg.clone());
                self.publish();
                SubmitError::Fatal(msg)
            }
        };
        for taken in std::mem::take(&mut self.taken) {
            match taken {
                Taken::Request(Request::Write { reply, .. } | Request::Sync { reply }) => {
                    let _ = reply.send(Err(reason.clone()));
                }
                Taken::Request(_) | Taken::Net(_) => {}
            }
        }
        for (_, reply) in std::mem::take(&mut self.writes)
            .into_iter()
            .chain(std::mem::take(&mut self.syncs))
        {
            let _ = reply.send(Err(reason.clone()));
        }
        self.out.abort_all();
        self.snapper.abort_receive();
        self.snapper.wait_idle().await;
        self.transport.shutdown().await;
        drop(self.log);
        drop(self.log_reader);
        if let Some(t) = self.log_thread.take() {
            match tokio::task::spawn_blocking(move || t.join()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => warn!(error = %e, "txn log thread ended with an error"),
                Err(e) => warn!(error = %e, "txn log thread join"),
            }
        }
        self.status.stopped = true;
        let status = self.status.clone();
        let role = status.role_status();
        self.status_tx.send_replace(status);
        self.role_tx.send_replace(role);
        info!("node stopped");
    }
}
