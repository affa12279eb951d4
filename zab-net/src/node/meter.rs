//! The driver's side of the metrics: the hooks it calls as it carries out the core's actions,
//! the timestamps the latency histograms need, and the INFO lines of long work that ends
//! (learner syncs, elections).
//!
//! INV-1: per write, only atomics and pushes onto queues whose capacity is kept (no label
//! lookup, no lock; allocation only while a queue grows past its largest size so far).
//! INV-2: every timestamp queue is bounded by what it waits for: proposals by the leader's
//! uncommitted txns (cleared when the node stops leading), appends by the log's undurable
//! ones (cut by TRUNC and reset), learner syncs by the learners connected.
//! INV-3: an election is timed from the first batch that ends LOOKING (or the start) to the
//! first that ends serving; a sync received from its header to the first batch that ends
//! serving; a sync sent from `SyncChosen` to the UPTODATE sent to that learner.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use prometheus::IntGauge;
use tracing::info;
use zab_core::{Peer, Role, ServerId, SyncMode, Zxid};

use crate::metrics::{micros, Direction, NodeMetrics, StateSample};

/// A sync the leader runs for one learner.
struct SentSync {
    mode: SyncMode,
    from: Zxid,
    to: Zxid,
    txns: u64,
    started: Instant,
    /// UPTODATE sent.
    synced: bool,
}

/// The sync this learner receives.
struct ReceivedSync {
    leader: ServerId,
    mode: SyncMode,
    zxid: Zxid,
    started: Instant,
    snap_bytes: u64,
    txns: u64,
}

/// How often a long run of applies reports its progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// Applies between two looks at the clock for a progress line.
const PROGRESS_CHECK_APPLIES: u64 = 1024;

/// A run of applies that may be long, logged when it ends and every [`PROGRESS_EVERY`] while
/// it lasts: the txns found in the log at start, or those of a DIFF received.
struct ApplyRun {
    what: &'static str,
    /// The run ends with the apply of this zxid (or a later one).
    upto: Zxid,
    /// The first apply of the run and the last progress line.
    started: Option<(Instant, Instant)>,
    applied: u64,
}

/// See the module docs.
pub(super) struct Meter {
    m: NodeMetrics,
    /// Leader: txns proposed and not yet committed, in zxid order.
    proposed: VecDeque<(Zxid, Instant)>,
    /// Appends queued to the log and not yet reported durable, in zxid order.
    appended: VecDeque<(Zxid, Instant)>,
    /// Leader: the learners being synced or synced.
    learners: BTreeMap<ServerId, SentSync>,
    receiving: Option<ReceivedSync>,
    /// Since when the node is LOOKING and not serving (INV-3).
    looking_since: Option<Instant>,
    snapshot_started: Option<Instant>,
    apply_run: Option<ApplyRun>,
    /// The `zab_peer_queued_messages` child of each member sampled (resolved once per member).
    peer_queued: BTreeMap<ServerId, IntGauge>,
}

impl Meter {
    /// The meter of a node whose log holds txns up to `logged` beyond those applied (`None`:
    /// nothing to apply from the log).
    pub(super) fn new(m: NodeMetrics, logged: Option<Zxid>) -> Meter {
        Meter {
            m,
            proposed: VecDeque::new(),
            appended: VecDeque::new(),
            learners: BTreeMap::new(),
            receiving: None,
            looking_since: Some(Instant::now()),
            snapshot_started: None,
            peer_queued: BTreeMap::new(),
            apply_run: logged.map(|upto| ApplyRun {
                what: "logged txns found at start",
                upto,
                started: None,
                applied: 0,
            }),
        }
    }

    /// The metrics.
    pub(super) fn metrics(&self) -> &NodeMetrics {
        &self.m
    }

    /// A txn queued to the log by a node in `role`.
    pub(super) fn appended(&mut self, zxid: Zxid, role: Role) {
        let now = Instant::now();
        self.appended.push_back((zxid, now));
        self.m.log.appends_pending.inc();
        if role == Role::Leading {
            self.m.commit.proposals.inc();
            self.proposed.push_back((zxid, now));
        }
        if let Some(r) = &mut self.receiving {
            r.txns += 1;
        }
    }

    /// The log reports every append up to `upto` durable.
    pub(super) fn persisted(&mut self, upto: Zxid) {
        while let Some(&(z, at)) = self.appended.front() {
            if z > upto {
                break;
            }
            self.appended.pop_front();
            self.m
                .log
                .append_durable_latency
                .observe(micros(at.elapsed()));
        }
        self.set_appends_pending();
    }

    /// The log was cut after `to` (TRUNC), or emptied (`None`: a SNAP installed).
    pub(super) fn log_cut(&mut self, to: Option<Zxid>) {
        match to {
            Some(to) => {
                while self.appended.back().is_some_and(|&(z, _)| z > to) {
                    self.appended.pop_back();
                }
            }
            None => {
                self.appended.clear();
                self.apply_run = None;
            }
        }
        self.set_appends_pending();
    }

    fn set_appends_pending(&self) {
        self.m
            .log
            .appends_pending
            .set(i64::try_from(self.appended.len()).unwrap_or(i64::MAX));
    }

    /// A committed txn applied.
    pub(super) fn applied(&mut self, zxid: Zxid) {
        self.m.commit.commits.inc();
        if self.apply_run.is_some() {
            self.apply_run_step(zxid);
        }
        while let Some(&(z, at)) = self.proposed.front() {
            if z > zxid {
                break;
            }
            self.proposed.pop_front();
            self.m.commit.commit_latency.observe(micros(at.elapsed()));
        }
    }

    /// One more apply of the run under way: its end, or a progress line.
    fn apply_run_step(&mut self, zxid: Zxid) {
        let Some(run) = &mut self.apply_run else {
            return;
        };
        run.applied += 1;
        let (first, last_line) = match run.started {
            Some(s) => s,
            None => {
                let now = Instant::now();
                info!("applying {} up to {}", run.what, run.upto);
                run.started = Some((now, now));
                (now, now)
            }
        };
        if zxid >= run.upto {
            let took = first.elapsed();
            info!(
                "applied {} {} up to {zxid} in {} ms ({})",
                run.applied,
                run.what,
                took.as_millis(),
                rate(run.applied, "txns", took)
            );
            self.apply_run = None;
        } else if run.applied % PROGRESS_CHECK_APPLIES == 0 && last_line.elapsed() >= PROGRESS_EVERY
        {
            info!(
                "applying {}: {} applied, at {zxid} of {}, for {} ms",
                run.what,
                run.applied,
                run.upto,
                first.elapsed().as_millis()
            );
            run.started = Some((first, Instant::now()));
        }
    }

    /// The leader chose how to sync `learner` (counted; its end is timed).
    pub(super) fn sync_chosen(
        &mut self,
        learner: ServerId,
        mode: SyncMode,
        span: (Zxid, Zxid),
        txns: u64,
    ) {
        self.m.count_sync(Direction::Sent, mode);
        let (from, to) = span;
        self.learners.insert(
            learner,
            SentSync {
                mode,
                from,
                to,
                txns,
                started: Instant::now(),
                synced: false,
            },
        );
        self.set_learners();
    }

    /// A DIFF sync read from the on-disk log.
    pub(super) fn diff_from_log(&self) {
        self.m.count_diff_from_log();
    }

    /// The leader sent UPTODATE to `learner`: its sync is over.
    pub(super) fn uptodate_sent(&mut self, learner: ServerId) {
        let Some(s) = self.learners.get_mut(&learner) else {
            return;
        };
        if s.synced {
            return;
        }
        s.synced = true;
        let took = s.started.elapsed();
        self.m.sync_done(Direction::Sent, took);
        info!(
            "learner {} synced by {} from {} to {}: {} txns in {} ms ({})",
            learner.0,
            s.mode,
            s.from,
            s.to,
            s.txns,
            took.as_millis(),
            rate(s.txns, "txns", took)
        );
        self.set_learners();
    }

    /// The connection to `peer` is gone (or closed at the core's request).
    pub(super) fn peer_lost(&mut self, peer: ServerId) {
        if self.learners.remove(&peer).is_some() {
            self.set_learners();
        }
    }

    fn set_learners(&self) {
        let synced = self.learners.values().filter(|s| s.synced).count();
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.m
            .election
            .learners_connected
            .set(count(self.learners.len()));
        self.m.election.learners_synced.set(count(synced));
    }

    /// This learner, which applied up to `applied`, received its leader's sync header (a
    /// DIFF's applies are a run: a TRUNC+DIFF's header names the TRUNC point, not its end).
    pub(super) fn sync_received(
        &mut self,
        leader: ServerId,
        (mode, zxid): (SyncMode, Zxid),
        applied: Zxid,
    ) {
        self.m.count_sync(Direction::Received, mode);
        if mode == SyncMode::Diff && zxid > applied {
            // Txns logged before the restart are applied in the same run as the DIFF's.
            let what = match &self.apply_run {
                Some(run) if run.started.is_none() => "logged txns found at start and of the DIFF",
                _ => "txns of the DIFF",
            };
            self.apply_run = Some(ApplyRun {
                what,
                upto: zxid,
                started: None,
                applied: 0,
            });
        }
        self.receiving = Some(ReceivedSync {
            leader,
            mode,
            zxid,
            started: Instant::now(),
            snap_bytes: 0,
            txns: 0,
        });
    }

    /// Samples the messages queued for each of `peers` (`queued` of a peer); the gauges of
    /// servers no longer listed are removed.
    pub(super) fn sample_peer_queues(
        &mut self,
        peers: impl Iterator<Item = ServerId>,
        queued: impl Fn(ServerId) -> usize,
    ) {
        let mut seen = Vec::new();
        for sid in peers {
            let gauge = self.peer_queued.entry(sid).or_insert_with(|| {
                self.m
                    .queues
                    .peer_queued
                    .with_label_values(&[sid.0.to_string().as_str()])
            });
            gauge.set(i64::try_from(queued(sid)).unwrap_or(i64::MAX));
            seen.push(sid);
        }
        let gone: Vec<ServerId> = self
            .peer_queued
            .keys()
            .filter(|s| !seen.contains(s))
            .copied()
            .collect();
        for sid in gone {
            self.peer_queued.remove(&sid);
            // Absent already only if it was never sampled; nothing to undo then.
            let _ = self
                .m
                .queues
                .peer_queued
                .remove_label_values(&[sid.0.to_string().as_str()]);
        }
    }

    /// Requests waiting in the driver's input channel.
    /// The counter of held request intakes (driver INV-5).
    pub(super) fn requests_held(&self) -> &prometheus::IntCounter {
        &self.m.queues.requests_held
    }

    pub(super) fn input_queue(&self, depth: usize) {
        self.m
            .queues
            .input_queue
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    /// A chunk of a SNAP received.
    pub(super) fn snap_chunk(&mut self, len: usize) {
        if let Some(r) = &mut self.receiving {
            r.snap_bytes += u64::try_from(len).unwrap_or(u64::MAX);
        }
    }

    /// A background snapshot started.
    pub(super) fn snapshot_started(&mut self) {
        self.snapshot_started = Some(Instant::now());
    }

    /// A background snapshot of `bytes` written.
    pub(super) fn snapshot_done(&mut self, bytes: u64) {
        self.m.snapshots.snapshots_taken.inc();
        self.m
            .snapshots
            .snapshot_last_size
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
        if let Some(at) = self.snapshot_started.take() {
            self.m
                .snapshots
                .snapshot_duration
                .observe(micros(at.elapsed()));
        }
    }

    /// After a batch of inputs: the state gauges, and the ends of elections and received
    /// syncs (INV-3).
    pub(super) fn after_batch(&mut self, peer: &Peer, writes_pending: usize) {
        let role = peer.role();
        let serving = peer.is_serving();
        let (last_logged, last_committed) = (peer.last_logged_zxid(), peer.last_committed_zxid());
        self.m.set_state(&StateSample {
            role,
            epoch: peer.epoch().0,
            last_logged,
            last_committed,
            last_applied: peer.last_applied_zxid(),
            serving,
            initialized: !peer.needs_initial_sync(),
        });
        self.m
            .queues
            .writes_pending
            .set(i64::try_from(writes_pending).unwrap_or(i64::MAX));
        if role == Role::Leading {
            let in_flight = if last_logged.epoch() == last_committed.epoch() {
                last_logged
                    .counter()
                    .saturating_sub(last_committed.counter())
            } else {
                last_logged.counter()
            };
            self.m.commit.proposals_in_flight.set(i64::from(in_flight));
        } else {
            self.m.commit.proposals_in_flight.set(0);
            self.proposed.clear();
            if !self.learners.is_empty() {
                self.learners.clear();
                self.set_learners();
            }
        }
        if role == Role::Looking && self.looking_since.is_none() {
            self.looking_since = Some(Instant::now());
            self.receiving = None;
        }
        if serving {
            self.election_ended(peer);
            self.received_sync_ended();
        }
    }

    fn election_ended(&mut self, peer: &Peer) {
        let Some(since) = self.looking_since.take() else {
            return;
        };
        let took = since.elapsed();
        self.m.election.elections.inc();
        self.m.election.election_duration.observe(micros(took));
        let leader = peer.leader().map_or(0, |l| l.0);
        info!(
            "elected leader {leader} for epoch {} in {} ms (this node: {})",
            peer.epoch().0,
            took.as_millis(),
            peer.role()
        );
    }

    fn received_sync_ended(&mut self) {
        let Some(r) = self.receiving.take() else {
            return;
        };
        let took = r.started.elapsed();
        self.m.sync_done(Direction::Received, took);
        let what = match r.mode {
            SyncMode::Snap => format!(
                "SNAP at {}: {} bytes ({}) and {} txns",
                r.zxid,
                r.snap_bytes,
                rate(r.snap_bytes, "bytes", took),
                r.txns
            ),
            SyncMode::Diff | SyncMode::TruncDiff => format!(
                "{} to {}: {} txns ({})",
                r.mode,
                r.zxid,
                r.txns,
                rate(r.txns, "txns", took)
            ),
        };
        info!(
            "synced by leader {} by {what} in {} ms",
            r.leader.0,
            took.as_millis()
        );
    }
}

/// `n` `unit` per second over `d`, as text.
pub(super) fn rate(n: u64, unit: &str, d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs <= 0.0 {
        return format!("{n} {unit} at once");
    }
    format!("{:.0} {unit}/s", n as f64 / secs)
}
