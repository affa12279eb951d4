//! Named deterministic scenarios: one per pitfall of `PITFALLS.md` the model can express, and
//! one per sync mode of the leader's decision table. Each reads like the protocol: faults and
//! client requests are explicit, `run_until` lets the (seeded) scheduler make fault-free
//! progress in between, and every checker runs after every step throughout. Each scenario
//! ends with the liveness phase unless it says otherwise.
//!
//! `ZAB_SCENARIO_SEED=<n>` changes the scheduler seed of every scenario (default 1), so the
//! same scripts can be run under other interleavings:
//! `for s in $(seq 1 50); do ZAB_SCENARIO_SEED=$s cargo test -p tests --release --test scenarios || break; done`

// Test code: a failed expectation aborts the test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod backpressure;
mod broadcast;
mod durability_bugs;
mod election;
mod epochs;
mod journal;
mod liveness;
mod sync;
mod sync_interrupted;
mod sync_modes;
mod sync_pitfalls;
mod transfer;

use tests::sim::{Cluster, SimOptions, SyncMode};
use zab_core::{Message, Role, ServerId, Zxid};

/// The scheduler without fsyncs: appends stay pending, and unreported, on every disk.
pub const NO_FSYNC: tests::sim::Weights = tests::sim::Weights {
    fsync: 0,
    ..tests::sim::Weights::QUIET
};

/// Node `n`.
pub fn sid(n: u64) -> ServerId {
    ServerId(n)
}

/// Options for a scenario cluster: events recorded, the scenario seed.
pub fn options(voters: usize, observers: usize) -> SimOptions {
    let seed = std::env::var("ZAB_SCENARIO_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let mut o = SimOptions::new(seed, voters, observers);
    o.record_events = true;
    o
}

/// A cluster with a stable leader; returns it with the leader.
pub fn started(opts: SimOptions) -> (Cluster, ServerId) {
    let mut c = Cluster::new(opts);
    let l = c.stabilize();
    (c, l)
}

/// Every node but `leader`, voters first.
pub fn others(c: &Cluster, leader: ServerId) -> Vec<ServerId> {
    c.ids().into_iter().filter(|id| *id != leader).collect()
}

/// The node among `ids` that leads and serves, if any.
pub fn leader_among(c: &Cluster, ids: &[ServerId]) -> Option<ServerId> {
    ids.iter().copied().find(|id| {
        c.peer(*id)
            .is_some_and(|p| p.role() == Role::Leading && p.is_serving())
    })
}

/// Runs until some node of `ids` leads and serves; returns it.
pub fn elect_among(c: &mut Cluster, ids: &[ServerId]) -> ServerId {
    c.expect_within(60_000, "a leader among the given nodes", |c| {
        leader_among(c, ids).is_some()
    });
    leader_among(c, ids).unwrap()
}

/// The last sync mode any leader chose for `learner`.
pub fn last_sync(c: &Cluster, learner: ServerId) -> Option<SyncMode> {
    c.sync_records()
        .iter()
        .rev()
        .find(|r| r.learner == learner)
        .map(|r| r.mode)
}

/// The last zxid `id` logged (per its peer).
pub fn last_logged(c: &Cluster, id: ServerId) -> Zxid {
    c.peer(id).map(|p| p.last_logged_zxid()).unwrap_or_default()
}

/// Runs until `id`'s disk holds `zxid` durably.
pub fn until_durable(c: &mut Cluster, id: ServerId, zxid: Zxid) {
    c.expect_within(10_000, "the txn durable", |c| {
        c.node(id).disk.durable_upto() >= zxid
    });
}

/// Commits `n` writes through `via`.
pub fn commit_n(c: &mut Cluster, via: ServerId, n: usize) -> Vec<Zxid> {
    (0..n).map(|_| c.commit_write(via)).collect()
}

/// True when some node applied a txn with zxid `z`.
pub fn applied_anywhere(c: &Cluster, z: Zxid) -> bool {
    c.ids().iter().any(|id| c.applied_zxids(*id).contains(&z))
}

/// True when `payload` was applied on `id`.
pub fn applied_payload(c: &Cluster, id: ServerId, payload: &[u8]) -> bool {
    c.node(id)
        .applied
        .iter()
        .any(|t| t.data.as_ref() == payload)
}

/// The zxids of the proposals `from` sent to `to` after event `mark`, in send order.
pub fn proposals_sent(c: &Cluster, mark: usize, from: ServerId, to: ServerId) -> Vec<Zxid> {
    c.events()[mark..]
        .iter()
        .filter(|e| e.from == from && e.to == to)
        .filter_map(|e| match &e.msg {
            Message::Proposal(t) => Some(t.zxid),
            _ => None,
        })
        .collect()
}

/// Every zxid `id` holds on its disk (log and pending appends), ascending.
pub fn disk_zxids(c: &Cluster, id: ServerId) -> Vec<Zxid> {
    let d = &c.node(id).disk;
    d.log
        .iter()
        .chain(d.pending.iter())
        .map(|t| t.zxid)
        .collect()
}
