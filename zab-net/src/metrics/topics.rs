//! The node's metrics by topic, each registering its own (names and help texts in the parent
//! module's table).
//!
//! INV-1: label children are resolved here, at registration, so the hooks that update them on
//! the commit path touch atomics only.

use std::sync::Arc;

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry,
};
use zab_core::{Role, Zxid};
use zab_store::{SyncBatch, SyncObserver};

use super::{micros, Direction, StateSample, LATENCY_BUCKETS_US};

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

/// The counters of one direction, by mode.
#[derive(Clone, Debug)]
pub(super) struct SyncSide {
    pub(super) diff: IntCounter,
    pub(super) trunc: IntCounter,
    pub(super) snap: IntCounter,
    pub(super) duration: Histogram,
}

/// The core's state: role, epoch, zxids, serving, initialized.
#[derive(Clone, Debug)]
pub(super) struct StateGauges {
    pub(super) roles: [(Role, IntGauge); 4],
    pub(super) epoch: IntGauge,
    pub(super) last_logged: IntGauge,
    pub(super) last_committed: IntGauge,
    pub(super) last_applied: IntGauge,
    pub(super) serving: IntGauge,
    pub(super) initialized: IntGauge,
}

/// The commit path: proposals, commits and the leader's commit latency.
#[derive(Clone, Debug)]
pub(crate) struct CommitMetrics {
    pub(crate) commits: IntCounter,
    pub(crate) proposals: IntCounter,
    pub(crate) proposals_in_flight: IntGauge,
    pub(crate) commit_latency: Histogram,
}

/// The txn log: what its sync thread reports and the driver's appends.
#[derive(Clone, Debug)]
pub(crate) struct LogMetrics {
    pub(super) sync: Arc<LogSyncMetrics>,
    pub(crate) append_durable_latency: Histogram,
    pub(crate) appends_pending: IntGauge,
}

/// What the txn log's sync thread updates (zab-store's [`SyncObserver`]).
#[derive(Debug)]
pub(super) struct LogSyncMetrics {
    pub(super) fsync: Histogram,
    pub(super) batch_records: Histogram,
    pub(super) batch_bytes: Histogram,
}

/// Work waiting: the driver's input channel, unanswered writes, messages queued per peer.
#[derive(Clone, Debug)]
pub(crate) struct QueueMetrics {
    pub(crate) input_queue: IntGauge,
    pub(crate) writes_pending: IntGauge,
    pub(crate) peer_queued: IntGaugeVec,
    pub(crate) requests_held: IntCounter,
}

/// Background snapshots.
#[derive(Clone, Debug)]
pub(crate) struct SnapshotMetrics {
    pub(crate) snapshots_taken: IntCounter,
    pub(crate) snapshot_duration: Histogram,
    pub(crate) snapshot_last_size: IntGauge,
}

/// Learner syncs, both directions.
#[derive(Clone, Debug)]
pub(super) struct SyncMetrics {
    pub(super) sent: SyncSide,
    pub(super) received: SyncSide,
    pub(super) diff_from_log: IntCounter,
}

/// Elections, and the learners a leader holds.
#[derive(Clone, Debug)]
pub(crate) struct ElectionMetrics {
    pub(crate) elections: IntCounter,
    pub(crate) election_duration: Histogram,
    pub(crate) learners_connected: IntGauge,
    pub(crate) learners_synced: IntGauge,
}

impl SyncObserver for LogSyncMetrics {
    fn on_sync(&self, batch: &SyncBatch) {
        self.fsync.observe(micros(batch.duration));
        if batch.records > 0 {
            self.batch_records.observe(batch.records as f64);
            self.batch_bytes.observe(batch.bytes as f64);
        }
    }
}

/// A zxid as a gauge value (exact below epoch 2^31, saturating above).
fn zxid_value(z: Zxid) -> i64 {
    i64::try_from(z.0).unwrap_or(i64::MAX)
}

/// Builds and registers metrics in one registry, failing on the first error.
pub(super) struct Builder<'a> {
    pub(super) registry: &'a Registry,
}

impl Builder<'_> {
    pub(super) fn gauge(&self, name: &str, help: &str) -> prometheus::Result<IntGauge> {
        let g = IntGauge::new(name, help)?;
        self.registry.register(Box::new(g.clone()))?;
        Ok(g)
    }

    pub(super) fn counter(&self, name: &str, help: &str) -> prometheus::Result<IntCounter> {
        let c = IntCounter::new(name, help)?;
        self.registry.register(Box::new(c.clone()))?;
        Ok(c)
    }

    pub(super) fn histogram(
        &self,
        name: &str,
        help: &str,
        buckets: &[f64],
    ) -> prometheus::Result<Histogram> {
        let h = Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets.to_vec()))?;
        self.registry.register(Box::new(h.clone()))?;
        Ok(h)
    }

    pub(super) fn gauge_vec(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
    ) -> prometheus::Result<IntGaugeVec> {
        let v = IntGaugeVec::new(Opts::new(name, help), labels)?;
        self.registry.register(Box::new(v.clone()))?;
        Ok(v)
    }
}

impl StateGauges {
    pub(super) fn register(b: &Builder<'_>) -> prometheus::Result<StateGauges> {
        let role_vec = b.gauge_vec(
            "zab_role",
            "1 for the node's current role, 0 for the others",
            &["role"],
        )?;
        let roles = [
            Role::Looking,
            Role::Following,
            Role::Leading,
            Role::Observing,
        ]
        .map(|r| (r, role_vec.with_label_values(&[role_label(r)])));
        Ok(StateGauges {
            roles,
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
        })
    }

    pub(super) fn set(&self, s: &StateSample) {
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
}

impl CommitMetrics {
    pub(super) fn register(b: &Builder<'_>) -> prometheus::Result<CommitMetrics> {
        Ok(CommitMetrics {
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
        })
    }
}

impl LogMetrics {
    pub(super) fn register(b: &Builder<'_>) -> prometheus::Result<LogMetrics> {
        let sync = LogSyncMetrics {
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
        Ok(LogMetrics {
            sync: Arc::new(sync),
            append_durable_latency: b.histogram(
                "zab_log_append_durable_latency_us",
                "append queued by the driver to reported durable",
                &LATENCY_BUCKETS_US,
            )?,
            appends_pending: b.gauge(
                "zab_log_appends_pending",
                "appends queued to the txn log, not yet durable",
            )?,
        })
    }
}

impl QueueMetrics {
    pub(super) fn register(b: &Builder<'_>) -> prometheus::Result<QueueMetrics> {
        Ok(QueueMetrics {
            input_queue: b.gauge(
                "zab_input_queue_depth",
                "requests waiting in the driver's input channel",
            )?,
            writes_pending: b.gauge(
                "zab_writes_pending",
                "writes, syncs and membership changes submitted and not yet answered",
            )?,
            peer_queued: b.gauge_vec(
                "zab_peer_queued_messages",
                "messages waiting to be sent to a member (quorum outbox and the \
                 driver's queue behind a stream)",
                &["peer"],
            )?,
            requests_held: b.counter(
                "zab_requests_held_total",
                "times the driver stopped taking requests because the members a quorum \
                 needs had a full backlog of messages (backpressure)",
            )?,
        })
    }
}

impl SnapshotMetrics {
    pub(super) fn register(b: &Builder<'_>) -> prometheus::Result<SnapshotMetrics> {
        Ok(SnapshotMetrics {
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
        })
    }
}

impl SyncMetrics {
    pub(super) fn register(b: &Builder<'_>) -> prometheus::Result<SyncMetrics> {
        let syncs = IntCounterVec::new(
            Opts::new(
                "zab_syncs_total",
                "learner syncs by direction (sent by the leader, received by a learner) and \
                 mode (a TRUNC+DIFF counts one trunc and one diff)",
            ),
            &["direction", "mode"],
        )?;
        b.registry.register(Box::new(syncs.clone()))?;
        let sync_durations = HistogramVec::new(
            HistogramOpts::new(
                "zab_sync_duration_us",
                "learner sync duration: leader, sync chosen to UPTODATE sent; learner, sync \
                 header received to serving",
            )
            .buckets(LATENCY_BUCKETS_US.to_vec()),
            &["direction"],
        )?;
        b.registry.register(Box::new(sync_durations.clone()))?;
        let side = |dir: &str| SyncSide {
            diff: syncs.with_label_values(&[dir, "diff"]),
            trunc: syncs.with_label_values(&[dir, "trunc"]),
            snap: syncs.with_label_values(&[dir, "snap"]),
            duration: sync_durations.with_label_values(&[dir]),
        };
        Ok(SyncMetrics {
            sent: side("sent"),
            received: side("received"),
            diff_from_log: b.counter(
                "zab_syncs_diff_from_log_total",
                "leader: DIFFs read (partly) from the on-disk log",
            )?,
        })
    }

    pub(super) fn side(&self, dir: Direction) -> &SyncSide {
        match dir {
            Direction::Sent => &self.sent,
            Direction::Received => &self.received,
        }
    }
}

impl ElectionMetrics {
    pub(super) fn register(b: &Builder<'_>) -> prometheus::Result<ElectionMetrics> {
        Ok(ElectionMetrics {
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
