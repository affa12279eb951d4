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
//! | `zab_peer_queued_messages{peer}` | gauge | messages waiting to be sent to a member (its quorum outbox and the driver's queue behind a stream), sampled every tick |
//! | `zab_writes_pending` | gauge | writes, syncs and changes submitted and not yet answered |
//! | `zab_requests_held_total` | counter | times the driver stopped taking requests because the followers a quorum needs had three quarters of their outbox queued (backpressure instead of dropped links) |
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
//! | `zab_peer_acks_folded_total` | counter | ACKs and PINGACKs folded into one of their kind still waiting unwritten in a link's outbox instead of being queued (`transport::UnwrittenAcks`): on a learner, its link to the leader drained slower than it acknowledged (some of it is normal under a heavy write load; much of it under a light one means the leader reads it late) |
//! | `zab_peer_connections_refused_total{reason}` | counter | peer connections refused: `tls` (inbound TLS handshake failed: no certificate, untrusted CA, plaintext), `certificate_name` (the certificate does not name the server the hello claims), `hello` (hello refused or unreadable), `tls_dial` (a dial's TLS handshake failed) |
//!
//! INV-1: everything updated on the commit path is an atomic (label children are resolved once,
//! at registration): no lock, allocation or label lookup per write.
//! INV-2: `NodeStatus::syncs_sent`/`syncs_received` and `snapshots_taken` are read from these
//! counters ([`NodeMetrics::syncs`]), so both show the same numbers.
//! INV-3: registering twice in one registry fails (`AlreadyReg`): one node per registry.

use std::sync::Arc;
use std::time::Duration;

use prometheus::Registry;
use zab_core::{Role, SyncMode, Zxid};
use zab_store::SyncObserver;

use crate::node::SyncCounters;

mod peers;
mod topics;

pub use peers::PeerMetrics;

use topics::{
    Builder, CommitMetrics, ElectionMetrics, LogMetrics, QueueMetrics, SnapshotMetrics,
    StateGauges, SyncMetrics,
};

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

/// Which side of a learner sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    /// The leader syncing a learner.
    Sent,
    /// This node synced by its leader.
    Received,
}

/// The node's metrics (see the module docs), by topic. Cheap to clone (shared atomics).
#[derive(Clone, Debug)]
pub struct NodeMetrics {
    state: StateGauges,
    pub(crate) commit: CommitMetrics,
    pub(crate) log: LogMetrics,
    pub(crate) queues: QueueMetrics,
    pub(crate) snapshots: SnapshotMetrics,
    learner_syncs: SyncMetrics,
    pub(crate) election: ElectionMetrics,
    pub(crate) peers: PeerMetrics,
}

/// A duration in µs, as a histogram sample.
pub(crate) fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

impl NodeMetrics {
    /// Creates the metrics and registers them in `registry` (INV-3).
    pub fn register(registry: &Registry) -> prometheus::Result<NodeMetrics> {
        let b = Builder { registry };
        Ok(NodeMetrics {
            state: StateGauges::register(&b)?,
            commit: CommitMetrics::register(&b)?,
            log: LogMetrics::register(&b)?,
            queues: QueueMetrics::register(&b)?,
            snapshots: SnapshotMetrics::register(&b)?,
            learner_syncs: SyncMetrics::register(&b)?,
            election: ElectionMetrics::register(&b)?,
            peers: PeerMetrics::register(&b)?,
        })
    }

    /// The peer-refusal counters, for the transport.
    pub fn peers(&self) -> PeerMetrics {
        self.peers.clone()
    }

    /// The observer the txn log's sync thread reports to.
    pub(crate) fn log_observer(&self) -> Arc<dyn SyncObserver> {
        Arc::clone(&self.log.sync) as Arc<dyn SyncObserver>
    }

    /// Sets the state gauges (once per driver batch).
    pub(crate) fn set_state(&self, s: &StateSample) {
        self.state.set(s);
    }

    /// One more sync in `dir` by `mode` (a TRUNC+DIFF counts a TRUNC and a DIFF header).
    pub(crate) fn count_sync(&self, dir: Direction, mode: SyncMode) {
        let s = self.learner_syncs.side(dir);
        match mode {
            SyncMode::Diff => s.diff.inc(),
            SyncMode::TruncDiff => {
                s.trunc.inc();
                s.diff.inc();
            }
            SyncMode::Snap => s.snap.inc(),
        }
    }

    /// A DIFF sent that read (part of) its txns from the on-disk log.
    pub(crate) fn count_diff_from_log(&self) {
        self.learner_syncs.diff_from_log.inc();
    }

    /// A sync in `dir` that took `d`.
    pub(crate) fn sync_done(&self, dir: Direction, d: Duration) {
        self.learner_syncs.side(dir).duration.observe(micros(d));
    }

    /// The sync counters of `dir`, as `NodeStatus` shows them (INV-2).
    pub(crate) fn syncs(&self, dir: Direction) -> SyncCounters {
        let syncs = &self.learner_syncs;
        let s = syncs.side(dir);
        let diff_from_log = match dir {
            Direction::Sent => syncs.diff_from_log.get(),
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
