//! The simulated cluster and its seeded scheduler.
//!
//! One thread, no sockets, no clock: every step the scheduler picks, by seeded weight, one of
//! deliver (the head of a link, or a pending `ConnectionLost`), tick (advance virtual time and
//! tick a node), fsync (complete a node's group commit; never on a node whose disk is stalled,
//! `faults` INV-F4), install (finish a SNAP install),
//! client write, client sync, or a fault. Every choice comes from one `ChaCha8Rng`, and every
//! collection is ordered, so a seed replays the same run exactly (the trace hash proves it).
//!
//! INV-C1: every live node is ticked at least every `tick_ms / 2` of virtual time (the
//! contract of `Input::Tick`); a paused node is not (that is the fault).
//! INV-C2: the checkers run on every input, every action and after every step, and so does
//! every peer's `Peer::check_invariants` (the core's own INV lines); the first violation aborts
//! the run with its seed, step and replay command.
//! INV-C3: a deliver step drains a link's backlog down to [`BURST_BACKLOG`] messages. Virtual
//! time advances only on tick steps (~0.9 ms per step on average), so one message per deliver
//! step caps the whole cluster at under one message per virtual ms; a SNAP or long DIFF of a few
//! hundred messages to each of six learners then took more than `initLimit` (1 s), which no
//! real network does (seed 39460: a restarted leader that had applied nothing sent, every
//! epoch, its empty snapshot plus its whole log; a SNAP keeps nothing across epochs, so every
//! epoch's sync timed out and elections churned to epoch 0x67).
//! Short queues still deliver one message per step, so fine-grained interleavings remain.
//! INV-C4: a deliver step serves one ready link per [`LINKS_PER_DELIVER`] ready links (at
//! least one; `SimOptions::links_per_deliver`), each picked at random (`Cluster::deliver_step`).
//! With one link per step the cluster's capacity was fixed
//! (about one message per virtual ms) however many links share it, so each link's service
//! interval grew with the number of busy links; in a cluster grown to 11 servers (seed 1567
//! with membership changes) a link was served about every 85 virtual ms, slower than a
//! learner resends FOLLOWERINFO (`info_resend_ms`, 50 ms), so every quorum link sat at
//! [`BURST_BACKLOG`] messages, an ACKEPOCH waited about a second behind them, every epoch's
//! discovery ran out of initLimit, and the timed-out peers' LOOKING notifications (each
//! answered) kept the links full: elections churned for the whole liveness phase. A real
//! network gives each connection its own bandwidth; now each ready link is served about every
//! 25 virtual ms whatever the cluster size. Clusters with at most `LINKS_PER_DELIVER` ready
//! links (every 3-server cluster) are scheduled exactly as before.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zab_core::{Input, MembershipError, RequestError, RequestId, ServerId, Zxid};

use super::checker::{Checker, PeerView, Verdict};
use super::core::Peer;
use super::members::PendingAdds;
use super::net::{LinkKey, Network};
use super::node::SimNode;
use super::options::{SimOptions, Weights};
use super::record::{EpochWrite, Event, SyncRecorder};

/// A deliver step keeps delivering from the same link while it holds more than this many
/// messages (INV-C3): bulk transfers move at network speed, not one message per step.
pub const BURST_BACKLOG: usize = 16;

/// A deliver step serves one link per this many ready links (INV-C4).
pub const LINKS_PER_DELIVER: usize = 16;

/// What one scheduler step did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// Delivered a message or a `ConnectionLost`.
    Deliver,
    /// Advanced time and ticked a node.
    Tick,
    /// Completed an fsync.
    Fsync,
    /// Finished a SNAP install.
    Install,
    /// Issued a client write.
    Write,
    /// Issued a client sync.
    Sync,
    /// Injected a fault.
    Fault,
}

/// What each step kind could act on in one step (drawn from by `Cluster::step_with`).
struct StepCandidates {
    /// Nodes up and not paused.
    live: Vec<ServerId>,
    /// Links with a message to deliver to a live node.
    links: Vec<LinkKey>,
    /// Live nodes with a pending `ConnectionLost`.
    notices: Vec<ServerId>,
    /// Live nodes with appends to fsync (or a `LogPersisted` owed) and no stalled disk.
    fsyncs: Vec<ServerId>,
    /// Live nodes with a SNAP install pending.
    installs: Vec<ServerId>,
}

/// The whole simulated cluster.
#[derive(Debug)]
pub struct Cluster {
    pub(crate) opts: SimOptions,
    pub(crate) rng: ChaCha8Rng,
    pub(crate) now_ms: u64,
    pub(crate) step_no: u64,
    pub(crate) nodes: BTreeMap<ServerId, SimNode>,
    pub(crate) net: Network,
    pub(crate) checker: Checker,
    pub(crate) hash: u64,
    pub(crate) next_request: u64,
    pub(crate) write_outcomes: BTreeMap<RequestId, Result<Zxid, RequestError>>,
    pub(crate) sync_outcomes: BTreeMap<RequestId, Result<Zxid, RequestError>>,
    pub(crate) membership_outcomes: BTreeMap<RequestId, Result<Zxid, MembershipError>>,
    pub(crate) pending_adds: PendingAdds,
    /// The sid the next added server gets (`members` INV-MB1).
    pub(crate) next_sid: u64,
    pub(crate) first_added_sid: u64,
    pub(crate) syncs: SyncRecorder,
    pub(crate) events: Vec<Event>,
    pub(crate) epoch_writes: Vec<EpochWrite>,
    /// Faults injected so far.
    pub faults: u64,
    /// Random wipes so far (INV-F3).
    pub wipes: u64,
    /// Slow-disk faults so far (`faults` INV-F4) and the power losses they scheduled that hit.
    pub stalls: u64,
    /// Power losses inside a slow-disk span.
    pub stalled_power_losses: u64,
    /// Times a node became leader with appends of its own still pending (the state of bug
    /// "currentEpoch before the tail is durable").
    pub leaders_with_pending_tail: u64,
    /// Times a node truncated into appends still pending (the state of bug "TRUNC into
    /// unreported appends").
    pub truncates_into_pending: u64,
    /// Membership changes asked for.
    pub membership_requests: u64,
    /// Membership changes answered as committed.
    pub membership_commits: u64,
    /// Servers added and started.
    pub added: u64,
    /// Times a node began holding client requests or deferring learners' ones (`admit`).
    pub holds: u64,
    /// Slow-link faults so far (`faults` INV-F5).
    pub slow_links: u64,
    pub(crate) transfers: super::transfer::TransferLog,
}

impl Cluster {
    /// Starts every node empty at virtual time 0.
    pub fn new(opts: SimOptions) -> Cluster {
        let rng = ChaCha8Rng::seed_from_u64(opts.seed);
        let mut c = Cluster {
            rng,
            now_ms: 0,
            step_no: 0,
            nodes: BTreeMap::new(),
            net: Network::with_outbox_len(opts.effective_outbox_len()).folding_acks(opts.fold_acks),
            checker: Checker::default(),
            hash: 0xcbf2_9ce4_8422_2325,
            next_request: 0,
            write_outcomes: BTreeMap::new(),
            sync_outcomes: BTreeMap::new(),
            membership_outcomes: BTreeMap::new(),
            pending_adds: PendingAdds::new(),
            next_sid: 0,
            first_added_sid: 0,
            syncs: SyncRecorder::default(),
            events: Vec::new(),
            epoch_writes: Vec::new(),
            faults: 0,
            wipes: 0,
            stalls: 0,
            stalled_power_losses: 0,
            leaders_with_pending_tail: 0,
            truncates_into_pending: 0,
            membership_requests: 0,
            membership_commits: 0,
            added: 0,
            holds: 0,
            slow_links: 0,
            transfers: Default::default(),
            opts,
        };
        c.next_sid = c.opts.members().len() as u64 + 1;
        c.first_added_sid = c.next_sid;
        for sid in c.opts.members().into_keys() {
            let node = SimNode::new(sid, c.opts.config(sid), None, c.net.outbox_len());
            c.nodes.insert(sid, node);
            c.net.crash(sid, &[]);
        }
        let ids: Vec<ServerId> = c.nodes.keys().copied().collect();
        for id in ids {
            c.start(id);
        }
        c
    }

    /// The options of this run.
    pub fn options(&self) -> &SimOptions {
        &self.opts
    }

    /// Virtual time in ms.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// Steps taken so far.
    pub fn step_no(&self) -> u64 {
        self.step_no
    }

    /// A hash of everything that happened so far; equal for equal seeds.
    pub fn trace_hash(&self) -> u64 {
        self.hash
    }

    /// Every node id.
    pub fn ids(&self) -> Vec<ServerId> {
        self.nodes.keys().copied().collect()
    }

    /// One node.
    pub fn node(&self, id: ServerId) -> &SimNode {
        &self.nodes[&id]
    }

    /// The checkers' state.
    pub fn checker(&self) -> &Checker {
        &self.checker
    }

    /// The network.
    pub fn net(&self) -> &Network {
        &self.net
    }

    pub(crate) fn mix(&mut self, v: u64) {
        self.hash = (self.hash ^ v)
            .wrapping_mul(0x0100_0000_01b3)
            .rotate_left(7);
    }

    /// Aborts the run: a property is violated (or the harness met something impossible).
    // A failed invariant must stop the test and name the seed; panicking is the way to do it.
    #[allow(clippy::panic)]
    pub(crate) fn fail(&self, msg: &str) -> ! {
        panic!(
            "\nSIMULATION FAILURE at step {} (seed {}, {} voters + {} observers, t={} ms):\n  \
             {msg}\nreplay: ZAB_SEED={} cargo test -p tests --release --test random -- \
             --nocapture   (ZAB_TRACE=1 prints every step; scenario tests replay by name)\n",
            self.step_no,
            self.opts.seed,
            self.opts.voters,
            self.opts.observers,
            self.now_ms,
            self.opts.seed
        )
    }

    pub(crate) fn check(&self, v: Verdict) {
        if let Err(msg) = v {
            self.fail(&msg);
        }
    }

    pub(crate) fn trace(&self, what: std::fmt::Arguments<'_>) {
        if self.opts.trace {
            eprintln!("[{} t={}] {what}", self.step_no, self.now_ms);
        }
    }

    /// The ids of the nodes that are live: up and not paused.
    pub(crate) fn live(&self) -> Vec<ServerId> {
        self.nodes
            .values()
            .filter(|n| n.is_live())
            .map(|n| n.id)
            .collect()
    }

    fn pick<T: Copy>(&mut self, v: &[T]) -> Option<T> {
        if v.is_empty() {
            None
        } else {
            Some(v[self.rng.gen_range(0..v.len())])
        }
    }

    /// One step with the run's weights.
    pub fn step(&mut self) -> StepKind {
        self.step_with(self.opts.weights)
    }

    /// One step with the given weights; runs the checkers afterwards.
    pub fn step_with(&mut self, w: Weights) -> StepKind {
        self.step_no += 1;
        self.scheduled_disk_faults();
        self.release_waiting();
        let c = self.candidates();
        let kind = self.choose_step(w, &c);
        self.mix(kind as u64);
        match kind {
            StepKind::Deliver => self.deliver_step(&c.links, &c.notices),
            StepKind::Tick => {
                let delta = self.rng.gen_range(1..=(self.opts.tick_ms / 10).max(1));
                self.advance(delta);
                if let Some(id) = self.pick(&c.live) {
                    self.tick_node(id);
                }
            }
            StepKind::Fsync => {
                if let Some(id) = self.pick(&c.fsyncs) {
                    let len = self.nodes[&id].disk.pending.len();
                    let n = if len == 0 {
                        0
                    } else {
                        self.rng.gen_range(1..=len)
                    };
                    self.fsync(id, n);
                }
            }
            StepKind::Install => {
                if let Some(id) = self.pick(&c.installs) {
                    self.finish_install(id);
                }
            }
            StepKind::Write => {
                if let Some(id) = self.pick(&c.live) {
                    self.write(id);
                }
            }
            StepKind::Sync => {
                if let Some(id) = self.pick(&c.live) {
                    self.sync_read(id);
                }
            }
            StepKind::Fault => self.random_fault(),
        }
        self.start_added();
        self.after_step();
        kind
    }

    /// What each step kind could act on now.
    fn candidates(&self) -> StepCandidates {
        let live = self.live();
        let links = self
            .net
            .ready_links(self.now_ms)
            // a server that is added but not started yet is not live
            .filter(|(_, to, _)| self.nodes.get(to).is_some_and(|n| n.is_live()))
            .collect();
        let notices = self
            .net
            .ready_notices()
            .filter(|id| self.nodes.get(id).is_some_and(|n| n.is_live()))
            .collect();
        let fsyncs = live
            .iter()
            .copied()
            .filter(|id| {
                let n = &self.nodes[id];
                let d = &n.disk;
                (!d.pending.is_empty() || d.owed_persisted.is_some())
                    && !n.fsync_stalled(self.now_ms)
            })
            .collect();
        let installs = live
            .iter()
            .copied()
            .filter(|id| self.nodes[id].disk.install.is_some())
            .collect();
        StepCandidates {
            live,
            links,
            notices,
            fsyncs,
            installs,
        }
    }

    /// Draws the step kind by weight among the kinds that have something to act on (a tick
    /// when none has).
    fn choose_step(&mut self, w: Weights, c: &StepCandidates) -> StepKind {
        let has_live = !c.live.is_empty();
        let options = [
            (
                StepKind::Deliver,
                w.deliver,
                !c.links.is_empty() || !c.notices.is_empty(),
            ),
            (StepKind::Tick, w.tick, has_live),
            (StepKind::Fsync, w.fsync, !c.fsyncs.is_empty()),
            (StepKind::Install, w.install, !c.installs.is_empty()),
            (StepKind::Write, w.write, has_live),
            (StepKind::Sync, w.sync, has_live),
            (StepKind::Fault, w.fault, true),
        ];
        let total: u32 = options.iter().filter(|o| o.2).map(|o| o.1).sum();
        if total == 0 {
            return StepKind::Tick;
        }
        let mut r = self.rng.gen_range(0..total);
        for (kind, weight, enabled) in options {
            if !enabled {
                continue;
            }
            if r < weight {
                return kind;
            }
            r -= weight;
        }
        StepKind::Tick
    }

    /// Delivers the head of `key`, then keeps delivering while the link's backlog exceeds
    /// [`BURST_BACKLOG`] and the receiver is live (INV-C3).
    pub(crate) fn deliver(&mut self, key: LinkKey) {
        self.deliver_one(key);
        while self.net.queue_len(key) > BURST_BACKLOG && self.nodes[&key.1].is_live() {
            self.deliver_one(key);
        }
    }

    fn deliver_one(&mut self, key: super::net::LinkKey) {
        let (from, to, _) = key;
        self.mix(from.0 << 8 | to.0);
        if let Some(d) = self.net.pop(key) {
            self.trace(format_args!("deliver {from}->{to}: {d:?}"));
            self.deliver_to(to, from, d);
        }
    }

    pub(crate) fn deliver_notice(&mut self, id: ServerId) {
        if let Some((peer, d)) = self.net.pop_notice(id) {
            self.mix(id.0 << 16 | peer.0);
            self.trace(format_args!("{id} hears from {peer}: {d:?}"));
            self.deliver_to(id, peer, d);
        }
    }

    /// Advances virtual time by `delta` ms, ticking every live node that would otherwise go
    /// longer than `tick_ms / 2` without a tick (INV-C1).
    pub fn advance(&mut self, delta: u64) {
        let target = self.now_ms + delta;
        let half = (self.opts.tick_ms / 2).max(1);
        loop {
            let due = self
                .nodes
                .values()
                .filter(|n| n.is_live() && n.last_tick_ms + half < target)
                .min_by_key(|n| (n.last_tick_ms, n.id))
                .map(|n| (n.id, n.last_tick_ms + half));
            let Some((id, at)) = due else { break };
            self.now_ms = self.now_ms.max(at);
            self.tick_node(id);
        }
        self.now_ms = target;
    }

    pub(crate) fn tick_node(&mut self, id: ServerId) {
        self.maybe_local_snapshot(id);
        let now_ms = self.now_ms;
        if let Some(n) = self.nodes.get_mut(&id) {
            n.last_tick_ms = now_ms;
        }
        self.feed(id, Input::Tick { now_ms });
        self.refresh_on_tick(id);
    }

    fn after_step(&mut self) {
        // the core's own INV lines (history, peer state, leader and learner handlers), so a
        // corrupted internal state is caught at the step that corrupts it (INV-C2)
        for n in self.nodes.values() {
            if let Some(Err(e)) = n.peer.as_ref().map(Peer::check_invariants) {
                let msg = format!("node {}: core invariant violated: {e}", n.id);
                self.fail(&msg);
            }
        }
        let views: Vec<_> = self
            .nodes
            .values()
            .filter_map(|n| n.peer_view().map(|p| (n.view(), p)))
            .collect();
        let mut h = 0u64;
        for (n, p) in &views {
            h = h
                .wrapping_mul(31)
                .wrapping_add(state_code(n.id, p, n.last_applied()));
        }
        let verdict = self.checker.after_step(&views);
        self.check(verdict);
        self.mix(h);
    }

    /// The peer of `id`, when up.
    pub fn peer(&self, id: ServerId) -> Option<&Peer> {
        self.nodes[&id].peer.as_ref()
    }
}

fn state_code(id: ServerId, p: &PeerView, applied: Zxid) -> u64 {
    id.0 ^ (p.role as u64) << 8 ^ u64::from(p.serving) << 12 ^ applied.0.rotate_left(17)
}
