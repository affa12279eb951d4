//! The scripting API scenarios are written in, and the liveness phase.
//!
//! Scripts mix explicit faults and client requests with `run_until`, which lets the seeded
//! scheduler make progress without faults or client traffic until a predicate holds.
//!
//! Liveness (checked by [`Cluster::check_liveness`]): once faults stop and every link heals,
//! within bounded virtual time exactly one leader serves, every up member of its committed
//! configuration serves under it, a fresh write commits and is applied on every member, and
//! the members' applied sequences are equal and hold every acknowledged write (and every
//! committed membership change). Removed servers are not members: they may stay LOOKING or
//! down (refused); the checkers hold them to never leading nor voting. The leader judged is
//! the one serving once the members agree, which need not be the one the fresh write went
//! through: a removal of that leader asked before the faults stopped may commit meanwhile.

use bytes::Bytes;
use zab_core::{Input, RequestError, RequestId, Role, ServerId, Zxid};

use super::cluster::Cluster;
use super::options::Weights;
use super::record::{EpochWrite, Event, SyncRecord};

/// How long liveness may take after faults stop, in virtual ms.
pub const LIVENESS_DEADLINE_MS: u64 = 120_000;

impl Cluster {
    /// Runs random steps with the run's weights.
    pub fn run_random(&mut self, steps: u64) {
        for _ in 0..steps {
            self.step();
        }
    }

    /// Runs fault-free, client-free steps until `pred` holds or `within_ms` of virtual time
    /// pass; returns whether `pred` holds.
    pub fn run_until(&mut self, within_ms: u64, mut pred: impl FnMut(&Cluster) -> bool) -> bool {
        let deadline = self.now_ms + within_ms;
        while self.now_ms <= deadline {
            if pred(self) {
                return true;
            }
            self.step_with(Weights::QUIET);
        }
        pred(self)
    }

    /// Like [`Cluster::run_until`], failing the run when the deadline passes.
    pub fn expect_within(
        &mut self,
        within_ms: u64,
        what: &str,
        pred: impl FnMut(&Cluster) -> bool,
    ) {
        if !self.run_until(within_ms, pred) {
            let msg = format!(
                "{what}: not reached within {within_ms} ms; {}",
                self.describe()
            );
            self.fail(&msg);
        }
    }

    /// Runs fault-free steps for `ms` of virtual time.
    pub fn run_for(&mut self, ms: u64) {
        self.run_until(ms, |_| false);
    }

    /// Delivers and persists until nothing is in flight or pending on any disk (bounded).
    pub fn settle(&mut self) {
        self.run_until(10_000, |c| {
            c.net.in_flight() == 0
                && c.nodes
                    .values()
                    .all(|n| n.disk.pending.is_empty() && n.disk.install.is_none())
        });
    }

    /// The established leader every live member of its committed configuration serves under,
    /// if there is exactly one.
    pub fn stable_leader(&self) -> Option<ServerId> {
        let leaders: Vec<_> = self
            .nodes
            .values()
            .filter(|n| n.is_live())
            .filter_map(|n| n.peer.as_ref().map(|p| (n.id, p)))
            .filter(|(_, p)| p.role() == Role::Leading && p.is_serving())
            .map(|(id, _)| id)
            .collect();
        let [l] = leaders[..] else { return None };
        let config = self.nodes[&l].peer.as_ref()?.committed_membership();
        let all = self
            .nodes
            .values()
            .filter(|n| n.is_live() && n.id != l && config.members.contains_key(&n.id))
            .all(|n| {
                n.peer.as_ref().is_some_and(|p| {
                    matches!(p.role(), Role::Following | Role::Observing)
                        && p.is_serving()
                        && p.leader() == Some(l)
                })
            });
        all.then_some(l)
    }

    /// Runs until one leader serves with every live node behind it; returns it.
    pub fn stabilize(&mut self) -> ServerId {
        self.expect_within(LIVENESS_DEADLINE_MS, "a stable leader", |c| {
            c.stable_leader().is_some()
        });
        self.stable_leader().unwrap_or_else(|| unreachable!())
    }

    /// The node in LEADING role and serving, if exactly one.
    pub fn leader(&self) -> Option<ServerId> {
        let v: Vec<_> = self
            .nodes
            .values()
            .filter(|n| {
                n.peer
                    .as_ref()
                    .is_some_and(|p| p.role() == Role::Leading && p.is_serving())
            })
            .map(|n| n.id)
            .collect();
        (v.len() == 1).then(|| v[0])
    }

    pub(crate) fn next_request_id(&mut self) -> RequestId {
        self.next_request += 1;
        RequestId(self.next_request)
    }

    /// A client of `id` writes a fresh, unique payload; returns the request id.
    pub fn write(&mut self, id: ServerId) -> RequestId {
        let request_id = self.next_request_id();
        let payload = Bytes::from(format!("w{}@{}", request_id.0, id.0));
        self.mix(0x77 ^ request_id.0);
        self.submit(
            id,
            Input::ClientWrite {
                request_id,
                payload,
            },
        );
        request_id
    }

    /// The outcome of a write, once answered.
    pub fn write_outcome(&self, req: RequestId) -> Option<Result<Zxid, RequestError>> {
        self.write_outcomes.get(&req).cloned()
    }

    /// Writes on `id` and runs until the write is answered; returns the outcome (`None` when
    /// unanswered within 30 s).
    pub fn write_and_wait(&mut self, id: ServerId) -> Option<Result<Zxid, RequestError>> {
        let req = self.write(id);
        self.run_until(30_000, |c| c.write_outcomes.contains_key(&req));
        self.write_outcome(req)
    }

    /// Writes on `id` and requires it to commit; returns its zxid. Like a client, it retries
    /// (up to 5 times, once some leader serves) when a write fails or goes unanswered.
    pub fn commit_write(&mut self, id: ServerId) -> Zxid {
        let mut last = None;
        for _ in 0..5 {
            match self.write_and_wait(id) {
                Some(Ok(z)) => return z,
                other => last = other,
            }
            self.run_until(30_000, |c| c.leader().is_some());
        }
        self.fail(&format!(
            "write on {id} did not commit after 5 attempts: {last:?}"
        ))
    }

    /// A client of `id` asks for a linearizable read point; returns the request id.
    pub fn sync_read(&mut self, id: ServerId) -> RequestId {
        let request_id = self.next_request_id();
        self.mix(0x55 ^ request_id.0);
        self.submit(id, Input::ClientSync { request_id });
        request_id
    }

    /// The outcome of a sync, once answered.
    pub fn sync_outcome(&self, req: RequestId) -> Option<Result<Zxid, RequestError>> {
        self.sync_outcomes.get(&req).cloned()
    }

    /// Completed syncs, in order.
    pub fn sync_records(&self) -> &[SyncRecord] {
        &self.syncs.done
    }

    /// Every message sent (only when `record_events` is on).
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Every epoch file written, in order with [`Cluster::events`] (when events are recorded).
    pub fn epoch_writes(&self) -> &[EpochWrite] {
        &self.epoch_writes
    }

    /// The zxids applied on `id`.
    pub fn applied_zxids(&self, id: ServerId) -> Vec<Zxid> {
        self.nodes[&id].applied.iter().map(|t| t.zxid).collect()
    }

    /// One line per node: role, leader, epochs, zxids.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        for n in self.nodes.values() {
            let state = match &n.peer {
                None => "down".to_string(),
                Some(p) => format!(
                    "{}{} leader={:?} acc={} cur={} logged={} committed={} applied={} serving={} \
                     config in force {} (committed {})",
                    p.role(),
                    if n.paused { " (paused)" } else { "" },
                    p.leader().map(|l| l.0),
                    p.accepted_epoch(),
                    p.current_epoch(),
                    p.last_logged_zxid(),
                    p.last_committed_zxid(),
                    p.last_applied_zxid(),
                    p.is_serving(),
                    p.membership(),
                    p.committed_membership().version
                ),
            };
            s.push_str(&format!(
                "\n    node {}: {state}; disk durable to {}",
                n.id,
                n.disk.durable_upto()
            ));
        }
        s
    }

    /// The liveness phase: ends all faults, then requires a stable leader, a fresh committed
    /// write, and then a stable leader (possibly another one) holding that write, whose
    /// committed configuration's members all applied its history, which holds every
    /// acknowledged write.
    pub fn check_liveness(&mut self) {
        self.end_faults();
        self.settle_transfers();
        let mut leader = self.stabilize();
        let ids = self.ids();
        let mut fresh = None;
        for attempt in 0..10 {
            // A write may legitimately fail (a counter rollover forces a new epoch, a leader
            // steps down); a client retries.
            let via = if attempt == 0 {
                ids[(self.step_no as usize) % ids.len()]
            } else {
                leader
            };
            if let Some(Ok(z)) = self.write_and_wait(via) {
                fresh = Some(z);
                break;
            }
            leader = self.stabilize();
        }
        let Some(fresh) = fresh else {
            let msg = format!(
                "liveness: no write committed in 10 attempts; {}",
                self.describe()
            );
            self.fail(&msg)
        };
        // Judged against the leader serving *now*, not the one the write went through: a
        // change asked before the faults stopped may still remove that leader (R6 of
        // `zab_core::membership`), and the remaining members then go on without it under a
        // new leader, past the last txn it applied (seed 4107 with bounded links).
        self.expect_within(
            LIVENESS_DEADLINE_MS,
            "every member applies the same history",
            |c| c.converged_leader(fresh).is_some(),
        );
        let Some(leader) = self.converged_leader(fresh) else {
            let msg = format!("liveness: no converged leader; {}", self.describe());
            self.fail(&msg)
        };
        let applied = &self.nodes[&leader].applied;
        for (z, payload) in self.checker.durability.acked() {
            let ok = applied
                .binary_search_by_key(z, |t| t.zxid)
                .is_ok_and(|i| applied[i].data == *payload);
            if !ok {
                let msg = format!("Durability: acknowledged write {z} ({payload:?}) lost");
                self.fail(&msg);
            }
        }
    }

    /// The stable leader, when its history holds `fresh` and every member of its committed
    /// configuration has applied exactly that history; removed servers are not members.
    fn converged_leader(&self, fresh: Zxid) -> Option<ServerId> {
        let leader = self.stable_leader()?;
        let config = self.peer(leader)?.committed_membership();
        let g = &self.nodes[&leader].applied;
        let converged = g.last().is_some_and(|t| t.zxid >= fresh)
            && config
                .members
                .keys()
                .all(|id| self.nodes.get(id).is_some_and(|n| n.applied == *g));
        converged.then_some(leader)
    }
}
