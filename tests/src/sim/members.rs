//! The operator's membership changes: asking a node to add or remove a member, starting an
//! added server, and the random changes of the sweep.
//!
//! An operator asks any node (`Input::ChangeMembership`); a follower answers `NotLeader`. An
//! added server is started once its addition is visible as committed: when the change is
//! answered `Ok`, or later, when an answer never came or said `QuorumLost` and some node's
//! committed configuration lists it. It starts on an empty data dir that learned the
//! configuration from that node (`--helper`) and must sync before it votes; from then on it is
//! an ordinary node of the run (faults included). A removed server keeps running, crashing and
//! restarting; a restart whose data dir holds its removal is refused and leaves it down.
//!
//! INV-MB1: new servers get sids never used before in the run, so a removed sid never returns.
//! INV-MB2 (random changes, asked of the leader two times in three): at most `SimOptions::max_membership_changes` requests per run,
//! at most [`MAX_ADDED`] added servers; a removal never leaves fewer than three participants,
//! nor wiped participants that have not resynced among the remaining ones at half of them or
//! more (`faults` INV-F3 under the new configuration).

use std::collections::BTreeMap;

use rand::Rng;
use zab_core::{
    LearnerType, MemberRole, Membership, MembershipChange, MembershipError, RequestId, ServerId,
    Zxid,
};

use super::cluster::Cluster;
use super::node::SimNode;

/// Random changes add at most this many servers to a run.
pub const MAX_ADDED: u64 = 3;

/// Adds asked for whose server is not started yet: request → new sid.
pub type PendingAdds = BTreeMap<RequestId, ServerId>;

impl Cluster {
    /// The address text of `sid` in a configuration (unique per server).
    pub fn address_of(sid: ServerId) -> String {
        format!("sim-{}", sid.0)
    }

    /// Asks `id` for `change`; returns the request id. An `Add` of a server the run does not
    /// know yet starts it once the addition is committed.
    pub fn change_membership(&mut self, id: ServerId, change: MembershipChange) -> RequestId {
        let request_id = self.next_request_id();
        if let MembershipChange::Add { sid, .. } = &change {
            if !self.nodes.contains_key(sid) {
                self.pending_adds.insert(request_id, *sid);
                self.next_sid = self.next_sid.max(sid.0 + 1);
            }
        }
        self.membership_requests += 1;
        self.mix(0x3e3b ^ request_id.0);
        self.trace(format_args!("{id} is asked {change:?} ({request_id:?})"));
        self.feed(id, zab_core::Input::ChangeMembership { request_id, change });
        request_id
    }

    /// Asks `id` to add a fresh server (INV-MB1) of `learner_type`; returns the request and
    /// the new sid.
    pub fn add_member(&mut self, id: ServerId, learner_type: LearnerType) -> (RequestId, ServerId) {
        let sid = ServerId(self.next_sid);
        let change = MembershipChange::Add {
            sid,
            learner_type,
            address: Cluster::address_of(sid),
        };
        (self.change_membership(id, change), sid)
    }

    /// Asks `id` to remove `sid`.
    pub fn remove_member(&mut self, id: ServerId, sid: ServerId) -> RequestId {
        self.change_membership(id, MembershipChange::Remove { sid })
    }

    /// The answer to a change, once given.
    pub fn membership_outcome(&self, req: RequestId) -> Option<Result<Zxid, MembershipError>> {
        self.membership_outcomes.get(&req).cloned()
    }

    /// Asks `id` for `change` and runs until it is answered (30 s of virtual time at most).
    pub fn change_and_wait(
        &mut self,
        id: ServerId,
        change: MembershipChange,
    ) -> Option<Result<Zxid, MembershipError>> {
        let req = self.change_membership(id, change);
        self.run_until(30_000, |c| c.membership_outcomes.contains_key(&req));
        self.membership_outcome(req)
    }

    /// The committed configuration `id` last reported.
    pub fn committed_membership(&self, id: ServerId) -> Option<&Membership> {
        self.nodes[&id].committed.as_ref()
    }

    /// The newest committed configuration any node reported.
    pub fn newest_committed(&self) -> Option<&Membership> {
        self.nodes
            .values()
            .filter_map(|n| n.committed.as_ref())
            .max_by_key(|m| m.version)
    }

    /// The participants of the newest committed configuration.
    pub fn participants(&self) -> Vec<ServerId> {
        self.newest_committed()
            .map(|m| m.participants().collect())
            .unwrap_or_default()
    }

    /// True when `id` is a member of the newest committed configuration.
    pub fn is_member(&self, id: ServerId) -> bool {
        self.newest_committed()
            .is_some_and(|m| m.members.contains_key(&id))
    }

    /// `id` answered a change.
    pub(crate) fn on_membership_done(
        &mut self,
        id: ServerId,
        req: RequestId,
        outcome: Result<Zxid, MembershipError>,
    ) {
        self.mix(0x3d0e ^ req.0 ^ u64::from(outcome.is_ok()) << 40);
        let definitely_not = matches!(
            outcome,
            Err(MembershipError::NotLeader { .. }
                | MembershipError::ChangeInFlight(_)
                | MembershipError::Invalid(_))
        );
        if definitely_not {
            self.pending_adds.remove(&req);
        }
        if outcome.is_ok() {
            self.membership_commits += 1;
        }
        self.trace(format_args!("{id} answers {req:?}: {outcome:?}"));
        self.membership_outcomes.insert(req, outcome);
    }

    /// Starts every added server whose addition some node reports committed, on an empty
    /// data dir with that node's configuration (called after every step).
    pub(crate) fn start_added(&mut self) {
        if self.pending_adds.is_empty() {
            return;
        }
        let due: Vec<(RequestId, ServerId, Membership)> = self
            .pending_adds
            .iter()
            .filter_map(|(req, sid)| {
                let helper = self
                    .nodes
                    .values()
                    .filter_map(|n| n.committed.as_ref())
                    .filter(|m| m.members.contains_key(sid))
                    .max_by_key(|m| m.version)?;
                Some((*req, *sid, helper.clone()))
            })
            .collect();
        for (req, sid, helper) in due {
            self.pending_adds.remove(&req);
            self.added += 1;
            self.mix(0xadd ^ sid.0);
            self.trace(format_args!(
                "START ADDED {sid} with helper configuration {helper}"
            ));
            let outbox_len = self.net.outbox_len();
            let node = SimNode::new(sid, self.opts.config(sid), Some(helper), outbox_len);
            self.nodes.insert(sid, node);
            let ids = self.ids();
            self.net.crash(sid, &ids);
            self.start(sid);
        }
    }

    /// One random change (INV-MB2), asked of a random live node.
    pub(crate) fn random_membership_change(&mut self) {
        if self.membership_requests >= self.opts.max_membership_changes {
            return;
        }
        let live = self.live();
        if live.is_empty() {
            return;
        }
        // mostly the leader (an operator who knows it), else any node (which forwards nothing:
        // a follower answers NotLeader)
        let leader = self.leader().filter(|_| self.rng.gen_ratio(2, 3));
        let target = match leader {
            Some(l) => l,
            None => live[self.rng.gen_range(0..live.len())],
        };
        let Some(config) = self.nodes[&target].committed.clone() else {
            return;
        };
        match self.rng.gen_range(0..3) {
            0 | 1 if self.next_sid - self.first_added_sid < MAX_ADDED => {
                let t = if self.rng.gen_ratio(2, 3) {
                    LearnerType::Participant
                } else {
                    LearnerType::Observer
                };
                self.add_member(target, t);
            }
            _ => {
                let members: Vec<ServerId> = config.members.keys().copied().collect();
                let sid = members[self.rng.gen_range(0..members.len())];
                if self.may_remove(&config, sid) {
                    self.remove_member(target, sid);
                }
            }
        }
    }

    /// INV-MB2 for the removal of `sid` from `config`.
    fn may_remove(&self, config: &Membership, sid: ServerId) -> bool {
        if config.role_of(sid) != Some(MemberRole::Participant) {
            return true;
        }
        let rest = config.participants().filter(|p| *p != sid).count();
        rest >= 3 && self.unsynced_minority(None, Some(sid))
    }

    /// True when, in the newest committed configuration and in the newest configuration in
    /// force, the participants whose disks need their initial sync (plus `wiping`, minus
    /// `removing`) are fewer than half: the others can still form a quorum (`faults` INV-F3).
    pub(crate) fn unsynced_minority(
        &self,
        wiping: Option<ServerId>,
        removing: Option<ServerId>,
    ) -> bool {
        let in_force = self
            .nodes
            .values()
            .filter_map(|n| n.peer.as_ref().map(|p| p.membership()))
            .max_by_key(|m| m.version);
        [self.newest_committed(), in_force]
            .into_iter()
            .flatten()
            .all(|m| {
                let rest: Vec<ServerId> =
                    m.participants().filter(|p| Some(*p) != removing).collect();
                let unsynced = rest
                    .iter()
                    .filter(|p| {
                        Some(**p) == wiping
                            || self.nodes.get(p).is_some_and(|n| n.disk.needs_initial_sync)
                    })
                    .count();
                unsynced * 2 < rest.len()
            })
    }
}
