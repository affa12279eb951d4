//! The node's Prometheus metrics: [`NodeMetrics`], registered in
//! [`crate::NodeOptions::metrics_registry`] (or the node's own registry,
//! [`crate::Node::metrics_registry`]). Serve them with `prometheus::TextEncoder` over
//! `registry.gather()`; the same values can be read back from `gather()` (as a `mntr` does).
//!
//! Units are in the names: `_us` microseconds, `_bytes` bytes, `_total` a counter. Zxids are
//! exact integers (IntGauge: a zxid is `epoch << 32 | counter`).
//!
//! | name | type | meaning |
//! |---|---|---|
//! | `zab_role{role}` | gauge | 1 for the current role (`looking`, `following`, `leading`, `observing`), 0 for the others |
//! | `zab_epoch` | gauge | the epoch being led or followed |
//! | `zab_last_logged_zxid` | gauge | the newest zxid in this node's txn log (durable or queued) |
//! | `zab_last_committed_zxid` | gauge | the newest zxid this node knows committed |
//! | `zab_last_applied_zxid` | gauge | the newest zxid applied to the state machine |
//! | `zab_serving` | gauge | 1 while the node serves clients (a synced learner, or an established leader) |
//! | `zab_initialized` | gauge | 1 once the data dir completed its first sync (it votes) |
//! | `zab_commits_total` | counter | txns applied to the state machine |
//! | `zab_proposals_total` | counter | txns proposed while leading |
//! | `zab_proposals_in_flight` | gauge | leader: proposed and not yet committed |
//! | `zab_commit_latency_us` | histogram | leader: proposed → committed |
//! | `zab_log_fsync_duration_us` | histogram | time in the txn log's sync call (zab-store's sync thread) |
//! | `zab_log_sync_batch_records` | histogram | records made durable per sync (group commit) |
//! | `zab_log_sync_batch_bytes` | histogram | their encoded bytes per sync |
//! | `zab_log_append_durable_latency_us` | histogram | append queued by the driver → reported durable |
//! | `zab_log_appends_pending` | gauge | appends queued to the log, not yet durable |
//! | `zab_input_queue_depth` | gauge | requests waiting in the driver's input channel |
//! | `zab_writes_pending` | gauge | writes, syncs and changes submitted and not yet answered |
//! | `zab_snapshots_taken_total` | counter | background snapshots written |
//! | `zab_snapshot_duration_us` | histogram | time to write one background snapshot |
//! | `zab_snapshot_last_size_bytes` | gauge | size of the newest snapshot written |
//! | `zab_syncs_total{direction,mode}` | counter | learner syncs: `direction` `sent` (leader) or `received` (learner); `mode` `diff`, `trunc`, `snap` (a TRUNC+DIFF counts one `trunc` and one `diff`) |
//! | `zab_syncs_diff_from_log_total` | counter | leader: DIFFs read (partly) from the on-disk log |
//! | `zab_sync_duration_us{direction}` | histogram | leader: sync chosen → UPTODATE sent; learner: sync header received → serving |
//! | `zab_elections_total` | counter | elections ended: LOOKING until serving again as leader or learner |
//! | `zab_election_duration_us` | histogram | their duration |
//! | `zab_learners_connected` | gauge | leader: learners being synced or synced |
//! | `zab_learners_synced` | gauge | leader: learners sent UPTODATE and still connected |
//!
//! INV-1: everything updated on the commit path is an atomic (label children are resolved once,
//! at registration): no lock, allocation or label lookup per write.
//! INV-2: `NodeStatus::syncs_sent`/`syncs_received` and `snapshots_taken` are read from these
//! counters ([`NodeMetrics::syncs`]), so both show the same numbers.
//! INV-3: registering twice in one registry fails (`AlreadyReg`): one node per registry.

use std::sync::Arc;
use std::time::Duration;

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry,
};
use zab_core::{Role, SyncMode, Zxid};
use zab_store::{SyncBatch, SyncObserver};

use crate::node::SyncCounters;

/// Latency buckets in µs: 50 µs to 10 s.
pub const LATENCY_BUCKETS_US: [f64; 18] = [
    50.0,
    100.0,
    250.0,
    500.0,
    1_000.0,
    2_500.0,
    5_000.0,
    10_000.0,
    25_000.0,
    50_000.0,
    100_000.0,
    250_000.0,
    500_000.0,
    1_000_000.0,
    2_500_000.0,
    5_000_000.0,
    7_500_000.0,
    10_000_000.0,
];

/// Records per group-commit sync: 1 to 65536 (the writer's batch limit).
const RECORD_BUCKETS: [f64; 9] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0,
];

/// Bytes per group-commit sync: 64 B to 64 MiB.
const BYTE_BUCKETS: [f64; 11] = [
    64.0,
    256.0,
    1024.0,
    4096.0,
    16384.0,
    65536.0,
    262_144.0,
    1_048_576.0,
    4_194_304.0,
    16_777_216.0,
    67_108_864.0,
];

/// Which side of a learner sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    /// The leader syncing a learner.
    Sent,
    /// This node synced by its leader.
    Received,
}

/// The counters of one direction, by mode.
#[derive(Clone, Debug)]
struct SyncSide {
    diff: IntCounter,
    trunc: IntCounter,
    snap: IntCounter,
    duration: Histogram,
}

/// The node's metrics (see the module docs). Cheap to clone (shared atomics).
#[derive(Clone, Debug)]
pub struct NodeMetrics {
    roles: [(Role, IntGauge); 4],
    epoch: IntGauge,
    last_logged: IntGauge,
    last_committed: IntGauge,
    last_applied: IntGauge,
    serving: IntGauge,
    initialized: IntGauge,
    pub(crate) commits: IntCounter,
    pub(crate) proposals: IntCounter,
    pub(crate) proposals_in_flight: IntGauge,
    pub(crate) commit_latency: Histogram,
    log: Arc<LogMetrics>,
    pub(crate) append_durable_latency: Histogram,
    pub(crate) appends_pending: IntGauge,
    pub(crate) input_queue: IntGauge,
    pub(crate) writes_pending: IntGauge,
    pub(crate) snapshots_taken: IntCounter,
    pub(crate) snapshot_duration: Histogram,
    pub(crate) snapshot_last_size: IntGauge,
    sent: SyncSide,
    received: SyncSide,
    pub(crate) diff_from_log: IntCounter,
    pub(crate) elections: IntCounter,
    pub(crate) election_duration: Histogram,
    pub(crate) learners_connected: IntGauge,
    pub(crate) learners_synced: IntGauge,
}

/// What the txn log's sync thread updates (zab-store's [`SyncObserver`]).
#[derive(Debug)]
struct LogMetrics {
    fsync: Histogram,
    batch_records: Histogram,
    batch_bytes: Histogram,
}

impl SyncObserver for LogMetrics {
    fn on_sync(&self, batch: &SyncBatch) {
        self.fsync.observe(micros(batch.duration));
        if batch.records > 0 {
            self.batch_records.observe(batch.records as f64);
            self.batch_bytes.observe(batch.bytes as f64);
        }
    }
}

/// A duration in µs, as a histogram sample.
pub(crate) fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A zxid as a gauge value (exact below epoch 2^31, saturating above).
fn zxid_value(z: Zxid) -> i64 {
    i64::try_from(z.0).unwrap_or(i64::MAX)
}

/// Builds and registers metrics in one registry, failing on the first error.
struct Builder<'a> {
    registry: &'a Registry,
}

impl Builder<'_> {
    fn gauge(&self, name: &str, help: &str) -> prometheus::Result<IntGauge> {
        let g = IntGauge::new(name, help)?;
        self.registry.register(Box::new(g.clone()))?;
        Ok(g)
    }

    fn counter(&self, name: &str, help: &str) -> prometheus::Result<IntCounter> {
        let c = IntCounter::new(name, help)?;
        self.registry.register(Box::new(c.clone()))?;
        Ok(c)
    }

    fn histogram(&self, name: &str, help: &str, buckets: &[f64]) -> prometheus::Result<Histogram> {
        let h = Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets.to_vec()))?;
        self.registry.register(Box::new(h.clone()))?;
        Ok(h)
    }
}

impl NodeMetrics {
    /// Creates the metrics and registers them in `registry` (INV-3).
    pub fn register(registry: &Registry) -> prometheus::Result<NodeMetrics> {
        let b = Builder { registry };
        let role_vec = IntGaugeVec::new(
            Opts::new(
                "zab_role",
                "1 for the node's current role, 0 for the others",
            ),
            &["role"],
        )?;
        registry.register(Box::new(role_vec.clone()))?;
        let roles = [
            Role::Looking,
            Role::Following,
            Role::Leading,
            Role::Observing,
        ]
        .map(|r| (r, role_vec.with_label_values(&[role_label(r)])));
        let syncs = IntCounterVec::new(
            Opts::new(
                "zab_syncs_total",
                "learner syncs by direction (sent by the leader, received by a learner) and \
                 mode (a TRUNC+DIFF counts one trunc and one diff)",
            ),
            &["direction", "mode"],
        )?;
        registry.register(Box::new(syncs.clone()))?;
        let sync_durations = HistogramVec::new(
            HistogramOpts::new(
                "zab_sync_duration_us",
                "learner sync duration: leader, sync chosen to UPTODATE sent; learner, sync \
                 header received to serving",
            )
            .buckets(LATENCY_BUCKETS_US.to_vec()),
            &["direction"],
        )?;
        registry.register(Box::new(sync_durations.clone()))?;
        let side = |dir: &str| SyncSide {
            diff: syncs.with_label_values(&[dir, "diff"]),
            trunc: syncs.with_label_values(&[dir, "trunc"]),
            snap: syncs.with_label_values(&[dir, "snap"]),
            duration: sync_durations.with_label_values(&[dir]),
        };
        let log = LogMetrics {
            fsync: b.histogram(
                "zab_log_fsync_duration_us",
                "time in the txn log's sync call",
                &LATENCY_BUCKETS_US,
            )?,
            batch_records: b.histogram(
                "zab_log_sync_batch_records",
                "records made durable per txn log sync (group commit)",
                &RECORD_BUCKETS,
            )?,
            batch_bytes: b.histogram(
                "zab_log_sync_batch_bytes",
                "encoded bytes made durable per txn log sync",
                &BYTE_BUCKETS,
            )?,
        };
        Ok(NodeMetrics {
            roles,
            sent: side("sent"),
            received: side("received"),
            log: Arc::new(log),
            epoch: b.gauge("zab_epoch", "the epoch being led or followed")?,
            last_logged: b.gauge("zab_last_logged_zxid", "the newest zxid in the txn log")?,
            last_committed: b
                .gauge("zab_last_committed_zxid", "the newest zxid known committed")?,
            last_applied: b.gauge(
                "zab_last_applied_zxid",
                "the newest zxid applied to the state machine",
            )?,
            serving: b.gauge("zab_serving", "1 while the node serves clients")?,
            initialized: b.gauge(
                "zab_initialized",
                "1 once the data dir completed its first sync (the node votes)",
            )?,
            commits: b.counter("zab_commits_total", "txns applied to the state machine")?,
            proposals: b.counter("zab_proposals_total", "txns proposed while leading")?,
            proposals_in_flight: b.gauge(
                "zab_proposals_in_flight",
                "leader: txns proposed and not yet committed",
            )?,
            commit_latency: b.histogram(
                "zab_commit_latency_us",
                "leader: proposed to committed",
                &LATENCY_BUCKETS_US,
            )?,
            append_durable_latency: b.histogram(
                "zab_log_append_durable_latency_us",
                "append queued by the driver to reported durable",
                &LATENCY_BUCKETS_US,
            )?,
            appends_pending: b.gauge(
                "zab_log_appends_pending",
                "appends queued to the txn log, not yet durable",
            )?,
            input_queue: b.gauge(
                "zab_input_queue_depth",
                "requests waiting in the driver's input channel",
            )?,
            writes_pending: b.gauge(
                "zab_writes_pending",
                "writes, syncs and membership changes submitted and not yet answered",
            )?,
            snapshots_taken: b
                .counter("zab_snapshots_taken_total", "background snapshots written")?,
            snapshot_duration: b.histogram(
                "zab_snapshot_duration_us",
                "time to write one background snapshot",
                &LATENCY_BUCKETS_US,
            )?,
            snapshot_last_size: b.gauge(
                "zab_snapshot_last_size_bytes",
                "size of the newest snapshot written",
            )?,
            diff_from_log: b.counter(
                "zab_syncs_diff_from_log_total",
                "leader: DIFFs read (partly) from the on-disk log",
            )?,
            elections: b.counter(
                "zab_elections_total",
                "elections ended (LOOKING until serving again)",
            )?,
            election_duration: b.histogram(
                "zab_election_duration_us",
                "election duration: LOOKING until serving again as leader or learner",
                &LATENCY_BUCKETS_US,
            )?,
            learners_connected: b.gauge(
                "zab_learners_connected",
                "leader: learners being synced or synced",
            )?,
            learners_synced: b.gauge(
                "zab_learners_synced",
                "leader: learners sent UPTODATE and still connected",
            )?,
        })
    }

    /// The observer the txn log's sync thread reports to.
    pub(crate) fn log_observer(&self) -> Arc<dyn SyncObserver> {
        Arc::clone(&self.log) as Arc<dyn SyncObserver>
    }

    /// Sets the state gauges (once per driver batch).
    pub(crate) fn set_state(&self, s: &StateSample) {
        for (r, g) in &self.roles {
            g.set(i64::from(*r == s.role));
        }
        self.epoch.set(i64::from(s.epoch));
        self.last_logged.set(zxid_value(s.last_logged));
        self.last_committed.set(zxid_value(s.last_committed));
        self.last_applied.set(zxid_value(s.last_applied));
        self.serving.set(i64::from(s.serving));
        self.initialized.set(i64::from(s.initialized));
    }

    fn side(&self, dir: Direction) -> &SyncSide {
        match dir {
            Direction::Sent => &self.sent,
            Direction::Received => &self.received,
        }
    }

    /// One more sync in `dir` by `mode` (a TRUNC+DIFF counts a TRUNC and a DIFF header).
    pub(crate) fn count_sync(&self, dir: Direction, mode: SyncMode) {
        let s = self.side(dir);
        match mode {
            SyncMode::Diff => s.diff.inc(),
            SyncMode::TruncDiff => {
                s.trunc.inc();
                s.diff.inc();
            }
            SyncMode::Snap => s.snap.inc(),
        }
    }

    /// A sync in `dir` that took `d`.
    pub(crate) fn sync_done(&self, dir: Direction, d: Duration) {
        self.side(dir).duration.observe(micros(d));
    }

    /// The sync counters of `dir`, as `NodeStatus` shows them (INV-2).
    pub(crate) fn syncs(&self, dir: Direction) -> SyncCounters {
        let s = self.side(dir);
        let diff_from_log = match dir {
            Direction::Sent => self.diff_from_log.get(),
            Direction::Received => 0,
        };
        SyncCounters {
            diff: s.diff.get(),
            trunc: s.trunc.get(),
            snap: s.snap.get(),
            diff_from_log,
        }
    }
}

/// The core's state the gauges show.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StateSample {
    pub(crate) role: Role,
    pub(crate) epoch: u32,
    pub(crate) last_logged: Zxid,
    pub(crate) last_committed: Zxid,
    pub(crate) last_applied: Zxid,
    pub(crate) serving: bool,
    pub(crate) initialized: bool,
}

/// The `role` label of `r`.
fn role_label(r: Role) -> &'static str {
    match r {
        Role::Looking => "looking",
        Role::Following => "following",
        Role::Leading => "leading",
        Role::Observing => "observing",
    }
}
