//! The driver: one tokio task that owns the [`Peer`], feeds it inputs and carries out its
//! actions with the transport, the zab-store log writer, files and the state machine.
//!
//! ```text
//!  select! { shutdown | log events | transport events | stream ends | snapshot ends
//!           | client requests | tick }  ──▶ Peer::step ──▶ take_actions ──▶ execute in order
//! ```
//! Reading order: this file (the select loop, the batching of inputs, the stop), `admission`
//! (which requests are taken: backpressure), `requests` (one request), `execute` (one action),
//! `install` (a received SNAP). Requests and their answers are paired in
//! `pending`, the status is published by `board`, per-peer output is `out`.
//!
//! INV-1 (zab-core io.rs): one batch of actions runs in order; epoch files and TRUNC are durable
//! before the next action runs (the driver awaits them; log events that arrive meanwhile are
//! fed to the core after the batch); `AppendLog` only queues to the group-commit thread.
//! INV-2: every input produced while executing a batch (`LogPersisted`, `SnapshotInstalled`,
//! `LogPurged`) is fed after that batch, in arrival order.
//! INV-3: a fatal condition ([`Fatal`]: core `StepError`, a failed apply/restore, the log
//! thread failing, an epoch file not written) stops the driver: pending requests fail, the
//! reason is published in `NodeStatus::fatal`, nothing more is applied.
//! INV-4 (coalescing): after the event that woke it, the driver also takes what is already
//! queued on its log, transport and request channels (at most [`WAKE_BATCH`] items, no
//! waiting) and feeds it all in arrival order per channel, each transport event and request
//! handled only once everything taken before it was fed (as if it had just arrived); the
//! state machine is asked to publish its applies ([`StateMachine::publish`]) and the status
//! is published once per such batch, and the batch's answers to clients are sent after both,
//! so a caller that got its zxid sees it applied in the state machine's published state and in
//! `Node::status` (mod INV-4), and many writes cost one publish and one status notification
//! instead of one each.
//! INV-5 (backpressure): requests, the handle's and those learners forward, are taken only
//! while `admission` gives room: never more in one wake-up than the members a quorum needs
//! can absorb without overflowing their links (`crate::admission` INV-1..INV-6; the holds, INV-4,
//! in `admission`).

mod admission;
mod execute;
mod install;
mod requests;

use std::collections::VecDeque;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn, Instrument, Span};
use zab_core::{Input, Peer, Role, ServerId, Zxid};
use zab_store::{EpochFiles, LogEvent};

use super::api::StateMachine;
use super::board::StatusBoard;
use super::fatal::Fatal;
use super::log_link::{to_input, LogLink};
use super::meter::Meter;
use super::out::{OutQueues, StreamDone};
use super::peers::PeerBook;
use super::pending::{Pending, StopReason};
use super::snap::{SnapDone, Snapper};
use super::Request;
use crate::metrics::NodeMetrics;
use crate::transport::{Channel, Event, Transport};
use admission::{Admission, Demand, RECHECK};

/// Most queued items taken without waiting after a wake-up (INV-4).
const WAKE_BATCH: usize = 256;

/// A transport event or client request taken by `gather`, turned into inputs only when
/// everything before it was fed (INV-4).
enum Taken {
    Net(Event),
    Request(Request),
}

/// What woke the driver up.
enum Wake {
    Tick,
    /// Requests are held (INV-5) and it is time to look at the backlogs again.
    Recheck,
    /// Learners' deferred requests have room now (INV-5).
    Deferred,
    Log(LogEvent),
    Net(Event),
    Stream(StreamDone),
    Snap(SnapDone),
    Request(Request),
}

/// The span of every log line of the node.
pub(super) fn node_span(sid: ServerId, role: Role, epoch: u32) -> Span {
    // ERROR level so that the span frames every line whatever the filter (an `info_span!`
    // vanishes under `RUST_LOG=warn`, leaving warnings without a sid). A new span per role
    // change, because `Span::record` appends fields in tracing-subscriber's fmt output.
    tracing::error_span!(parent: None, "zab", sid = sid.0, role = %role, epoch)
}

/// Channels the driver selects over, besides the log's.
pub(super) struct Inbox {
    /// Transport events.
    pub(super) events: mpsc::Receiver<Event>,
    /// Stream ends (`out`).
    pub(super) streams: mpsc::UnboundedReceiver<StreamDone>,
    /// Background snapshot ends (`snap`).
    pub(super) snaps: mpsc::UnboundedReceiver<SnapDone>,
    /// The handle's requests.
    pub(super) requests: mpsc::Receiver<Request>,
}

/// The driver's ends of the outside world, opened at start-up.
pub(super) struct DriverIo {
    /// Peer connections.
    pub(super) transport: Transport,
    /// Per-peer output over `transport`.
    pub(super) out: OutQueues,
    /// The txn log.
    pub(super) log: LogLink,
    /// acceptedEpoch, currentEpoch and the initial-sync marker.
    pub(super) epochs: EpochFiles,
    /// Background snapshots and received SNAPs.
    pub(super) snapper: Snapper,
    /// Where the members of the configuration in force listen.
    pub(super) peer_book: PeerBook,
}

/// The driver task's state (see the module docs).
pub(super) struct Driver {
    peer: Peer,
    /// `None` only while a SNAP restore runs on a blocking thread.
    sm: Option<Box<dyn StateMachine>>,
    transport: Transport,
    out: OutQueues,
    log: LogLink,
    epochs: EpochFiles,
    snapper: Snapper,
    peer_book: PeerBook,
    pending: Pending,
    board: StatusBoard,
    clock: Instant,
    inputs: VecDeque<Input>,
    /// Events and requests taken ahead by `gather`, in arrival order (INV-4).
    taken: VecDeque<Taken>,
    shutdown: CancellationToken,
    tick: Duration,
    span: Span,
    /// The node's metrics and what timing them needs.
    meter: Meter,
    /// The one leader transfer a caller waits for (`transfer` INV-1).
    transfer: super::transfer::TransferSlot,
    /// The intake limit (INV-5).
    admission: Admission,
    /// The voters of the configuration in force, as of the version it names.
    voters: (Zxid, Vec<ServerId>),
}

impl Driver {
    /// A driver for `peer` and its state machine `sm` (restored from the same durable state),
    /// whose clock started at `clock` and which ticks every `tick`, measured in `metrics`.
    pub(super) fn new(
        peer: Peer,
        sm: Box<dyn StateMachine>,
        io: DriverIo,
        board: StatusBoard,
        (clock, tick): (Instant, Duration),
        shutdown: CancellationToken,
        metrics: NodeMetrics,
    ) -> Driver {
        let span = node_span(board.sid(), Role::Looking, 0);
        let logged = peer.last_logged_zxid();
        let backlog = (logged > peer.last_applied_zxid()).then_some(logged);
        let admission = Admission::new(io.transport.outbox_capacity());
        let voters = (Zxid::ZERO, peer.membership().participants().collect());
        Driver {
            admission,
            voters,
            peer,
            sm: Some(sm),
            transport: io.transport,
            out: io.out,
            log: io.log,
            epochs: io.epochs,
            snapper: io.snapper,
            peer_book: io.peer_book,
            pending: Pending::new(),
            board,
            clock,
            inputs: VecDeque::new(),
            taken: VecDeque::new(),
            shutdown,
            tick,
            span,
            meter: Meter::new(metrics, backlog),
            transfer: Default::default(),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.clock.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Runs until shutdown or a fatal condition.
    pub(super) async fn run(mut self, mut inbox: Inbox) {
        let mut tick = tokio::time::interval(self.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        self.meter.after_batch(&self.peer, 0);
        self.board.publish(&self.peer);
        let result = loop {
            let shutdown = self.shutdown.clone();
            let room = self.refresh_room();
            // Unbiased: under a steady stream of messages, ticks (heartbeats, timeouts) and
            // client requests still get their turn.
            let wake = if self.admission.can_release() {
                Wake::Deferred
            } else {
                tokio::select! {
                _ = shutdown.cancelled() => break Ok(()),
                _ = tick.tick() => Wake::Tick,
                _ = tokio::time::sleep(RECHECK), if room == 0 => Wake::Recheck,
                Some(ev) = self.log.recv() => Wake::Log(ev),
                Some(ev) = inbox.events.recv() => Wake::Net(ev),
                Some(done) = inbox.streams.recv() => Wake::Stream(done),
                Some(done) = inbox.snaps.recv() => Wake::Snap(done),
                Some(req) = inbox.requests.recv(), if room > 0 => Wake::Request(req),
                }
            };
            let span = self.span.clone();
            if let Err(f) = self.handle(wake, &mut inbox).instrument(span).await {
                break Err(f);
            }
        };
        let span = self.span.clone();
        self.stop(result).instrument(span).await;
    }

    /// Works out how many requests may be taken in this wake-up (INV-5).
    fn refresh_room(&mut self) -> usize {
        let membership = self.peer.membership();
        if membership.version != self.voters.0 {
            self.voters = (membership.version, membership.participants().collect());
        }
        let (transport, out) = (&self.transport, &self.out);
        let demand = Demand {
            me: self.board.sid(),
            role: self.peer.role(),
            leader: self.peer.leader(),
            voters: &self.voters.1,
            uncommitted: admission::uncommitted(
                self.peer.last_logged_zxid(),
                self.peer.last_committed_zxid(),
            ),
            queued: self.peer.queued_requests(),
            backlog: |sid| {
                transport.outbox_len(sid, Channel::Quorum).unwrap_or(0) + out.waiting(sid)
            },
            now: Instant::now(),
        };
        self.admission.refresh(&demand, self.meter.requests_held());
        self.admission.room()
    }

    async fn handle(&mut self, wake: Wake, inbox: &mut Inbox) -> Result<(), Fatal> {
        match wake {
            Wake::Tick => return self.on_tick().await,
            Wake::Recheck => return Ok(()),
            Wake::Deferred => {
                let released = self.admission.release();
                let inputs = released.map(|(from, msg)| Input::Message { from, msg });
                self.inputs.extend(inputs);
            }
            Wake::Stream(done) => {
                self.out.on_done(&self.transport, done);
                return Ok(());
            }
            Wake::Snap(done) => {
                self.on_snapshot_done(done);
                return self.drain().await;
            }
            Wake::Log(ev) => self.defer_log_event(ev)?,
            Wake::Net(ev) => self.on_transport(ev),
            Wake::Request(req) => {
                self.admission.take();
                self.on_request(req).await
            }
        }
        self.gather(inbox)?;
        let result = self.drain().await;
        self.meter.input_queue(inbox.requests.len());
        result
    }

    /// Takes what is already waiting on the log, transport and request channels (at most
    /// [`WAKE_BATCH`] items, and only the requests there is room for, without waiting: INV-4,
    /// INV-5). Log
    /// events become inputs at once (as
    /// the log's synchronous commands defer them); transport events and requests wait in
    /// `taken` until everything before them was fed, so each is handled as if it had just
    /// arrived.
    fn gather(&mut self, inbox: &mut Inbox) -> Result<(), Fatal> {
        let mut budget = WAKE_BATCH;
        while budget > 0 {
            let before = budget;
            if let Some(ev) = self.log.try_recv() {
                self.defer_log_event(ev)?;
                budget -= 1;
            }
            if let Ok(ev) = inbox.events.try_recv() {
                self.taken.push_back(Taken::Net(ev));
                budget = budget.saturating_sub(1);
            }
            if self.admission.room() > 0 {
                if let Ok(req) = inbox.requests.try_recv() {
                    self.admission.take();
                    self.taken.push_back(Taken::Request(req));
                    budget = budget.saturating_sub(1);
                }
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
            self.admission.forget(peer);
            self.inputs.push_back(Input::ConnectionLost { peer });
        }
        self.sample_peer_queues();
        let now_ms = self.now_ms();
        self.step(Input::Tick { now_ms }).await
    }

    /// The messages queued for each member in force (a per-tick sample: no label lookup on
    /// the commit path).
    fn sample_peer_queues(&mut self) {
        let me = self.board.sid();
        let peers = self.peer.membership().members.keys().copied();
        let (transport, out) = (&self.transport, &self.out);
        let queued = |sid| {
            let outbox = transport.outbox_len(sid, Channel::Quorum).unwrap_or(0);
            outbox + out.waiting(sid)
        };
        self.meter
            .sample_peer_queues(peers.filter(|s| *s != me), queued);
    }

    /// Turns a transport event into an input (fed by the next `drain`).
    fn on_transport(&mut self, ev: Event) {
        match ev {
            Event::Message { from, msg } => {
                if let Some(msg) = self.admission.admit(from, msg) {
                    self.inputs.push_back(Input::Message { from, msg });
                }
            }
            Event::Unreachable { peer } => self.inputs.push_back(Input::PeerUnreachable { peer }),
            Event::ConnectionLost { peer } => {
                self.admission.forget(peer);
                self.meter.peer_lost(peer);
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
        if let LogEvent::Persisted { upto } = ev {
            self.meter.persisted(upto);
        }
        if let Some(input) = to_input(ev)? {
            self.inputs.push_back(input);
        }
        Ok(())
    }

    fn on_snapshot_done(&mut self, done: SnapDone) {
        self.snapper.finished();
        match done {
            Ok((zxid, bytes)) => {
                self.meter.snapshot_done(bytes);
                self.board.set_snapshots_taken(self.meter.metrics());
                info!(%zxid, bytes, "background snapshot done");
                self.inputs.push_back(Input::SnapshotSaved { zxid, bytes });
                self.board.publish(&self.peer);
            }
            Err(e) => warn!(error = %e, "background snapshot failed"),
        }
    }

    /// Feeds `input` and everything that follows from it (INV-2).
    async fn step(&mut self, input: Input) -> Result<(), Fatal> {
        self.inputs.push_back(input);
        self.drain().await
    }

    /// Feeds every queued input, then has the state machine publish what it applied and
    /// publishes the status, once each, and sends the answers the inputs decided (INV-4; also
    /// when a fatal condition ends the batch early).
    async fn drain(&mut self) -> Result<(), Fatal> {
        let result = self.feed().await;
        if let Some(sm) = self.sm.as_mut() {
            sm.publish();
        }
        self.meter.after_batch(&self.peer, self.pending.waiting());
        self.board.publish(&self.peer);
        self.pending.send_answers();
        self.transfer.send_answer();
        result
    }

    async fn feed(&mut self) -> Result<(), Fatal> {
        // Bounded: each input's actions produce finitely many follow-up inputs, and `taken`
        // holds at most `WAKE_BATCH` items.
        loop {
            while let Some(input) = self.inputs.pop_front() {
                self.peer.step(input)?;
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

    /// Stops everything (INV-3).
    async fn stop(mut self, result: Result<(), Fatal>) {
        let reason = match result {
            Ok(()) => {
                info!("node shutting down");
                StopReason::Shutdown
            }
            Err(fatal) => {
                // WARN: the embedding application reports the one ERROR line with what to do
                // (`NodeStatus::fatal`); fe-meta does, then exits.
                let msg = fatal.to_string();
                warn!(error = %msg, "node stops on a fatal error");
                self.board.set_fatal(&self.peer, msg.clone());
                StopReason::Fatal(msg)
            }
        };
        for taken in std::mem::take(&mut self.taken) {
            match taken {
                Taken::Request(Request::Write { reply, .. } | Request::Sync { reply }) => {
                    let _ = reply.send(Err(reason.submit_error()));
                }
                Taken::Request(Request::ChangeMembership { reply, .. }) => {
                    let _ = reply.send(Err(reason.node_error()));
                }
                _ => {}
            }
        }
        self.pending.fail_all(&reason);
        self.out.abort_all();
        self.snapper.abort_receive();
        self.snapper.wait_idle().await;
        self.transport.shutdown().await;
        self.log.stop().await;
        self.board.stopped();
        info!("node stopped");
    }
}
