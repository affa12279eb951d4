//! The leader: one object for the epoch it establishes and one `Handler` per learner
//! (ZooKeeper's LearnerHandler), through discovery, sync and broadcast.
//!
//! INV-1: every quorum counts participants only (`Config::is_quorum`) that joined as followers
//! (a handler with `observer` set never counts: an observer, or an uninitialized participant
//! syncing, PITFALLS B9; nor does a joining member, which follows without voting); the leader
//! counts itself
//! in the FOLLOWERINFO and ACKEPOCH quorums at once and in the NEWLEADER and proposal quorums
//! only once its own log is durable.
//! INV-2: messages are accepted only from a sid with a handler of this leadership, and only in
//! the handler state that expects them; anything else is logged and dropped.
//! INV-3: a learner is registered for forwarding (PROPOSAL to followers, COMMIT/INFORM to all)
//! in the same step that queues its sync data and the outstanding proposals, so no txn slips
//! through the gap (PITFALLS A4.1, C9).
//! INV-4: a learner silent longer than its limit (initLimit until UPTODATE, syncLimit after) is
//! dropped; the leader leaves its role when discovery or sync exceeds initLimit, or when the
//! followers heard within syncLimit plus itself are no quorum.
//! INV-5: a learner whose channel closed (or that was dropped) no longer counts in the
//! FOLLOWERINFO, ACKEPOCH and NEWLEADER quorums: a leader establishes its epoch only with
//! learners it is still connected to.

mod broadcast;
mod discovery;
mod members;
mod sync;
#[cfg(test)]
mod sync_report_tests;
#[cfg(test)]
mod tests;
pub(crate) mod transfer;

use std::collections::{BTreeMap, BTreeSet};

use crate::error::StepError;
use crate::io::Action;
use crate::membership::MembershipError;
use crate::message::{Message, RequestError};
use crate::peer::core::{ClientOp, Core, Next};
use crate::sync_plan::SyncPlan;
use crate::types::{Epoch, LearnerType, RequestId, ServerId, Zxid};

/// The leader's phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Phase {
    /// Waiting for a quorum of FOLLOWERINFO.
    Discovery,
    /// LEADERINFO sent; waiting for a quorum of ACKEPOCH.
    EpochAck,
    /// Syncing learners; waiting for a quorum of NEWLEADER acks.
    Sync,
    /// Established: proposing and committing.
    Broadcast,
}

/// Where a learner stands with this leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum HandlerState {
    /// FOLLOWERINFO/OBSERVERINFO received.
    Info,
    /// LEADERINFO sent.
    LeaderInfoSent,
    /// ACKEPOCH received; sync not started yet.
    EpochAcked,
    /// Sync data and NEWLEADER queued; registered for forwarding.
    Syncing,
    /// NEWLEADER acked.
    NewLeaderAcked,
    /// UPTODATE sent: serving.
    UpToDate,
}

/// The leader's view of one learner.
#[derive(Clone, Debug)]
pub(crate) struct Handler {
    pub(crate) observer: bool,
    pub(crate) state: HandlerState,
    /// acceptedEpoch from its FOLLOWERINFO.
    pub(crate) info_epoch: Epoch,
    /// `(currentEpoch, lastZxid)` from its ACKEPOCH.
    pub(crate) summary: (Epoch, Zxid),
    pub(crate) last_heard_ms: u64,
    /// Highest proposal zxid it acked.
    pub(crate) acked_upto: Zxid,
    /// How it was synced (for tests and logs).
    pub(crate) plan: Option<SyncPlan>,
}

/// True when the learner `sid` votes: it joined as a follower and the configuration in force
/// makes it a participant (a joining member follows but never counts, `membership` R5).
pub(crate) fn votes(core: &Core, sid: ServerId, h: &Handler) -> bool {
    !h.observer && crate::election::is_participant(&core.cfg, sid)
}

impl Handler {
    /// Registered for forwarding (INV-3).
    pub(crate) fn forwarding(&self) -> bool {
        self.state >= HandlerState::Syncing
    }
}

/// Who is waiting for a proposal or a sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A local client.
    Local(RequestId),
    /// A learner's forwarded request.
    Remote(ServerId, RequestId),
    /// A local operator's membership change (answered by `MembershipDone`).
    Change(RequestId),
    /// The leader itself (a promotion, `membership` R5): nobody to answer.
    Internal,
}

/// An outstanding proposal.
#[derive(Clone, Debug)]
pub(crate) struct Proposal {
    pub(crate) acks: BTreeSet<ServerId>,
    pub(crate) origin: Origin,
    /// For a configuration txn, the configuration it replaces: its quorum must ack too
    /// (`membership` R4).
    pub(crate) joint: Option<BTreeMap<ServerId, LearnerType>>,
}

/// A `sync` waiting for its quorum round.
#[derive(Clone, Debug)]
pub(crate) struct PendingSync {
    pub(crate) origin: Origin,
    pub(crate) point: Zxid,
    pub(crate) round: u64,
    pub(crate) acks: BTreeSet<ServerId>,
}

/// The leader's state.
#[derive(Debug)]
pub(crate) struct Leader {
    pub(crate) phase: Phase,
    pub(crate) phase_since_ms: u64,
    pub(crate) new_epoch: Option<Epoch>,
    pub(crate) handlers: BTreeMap<ServerId, Handler>,
    pub(crate) info_quorum: BTreeSet<ServerId>,
    pub(crate) epoch_acks: BTreeSet<ServerId>,
    pub(crate) newleader_acks: BTreeSet<ServerId>,
    pub(crate) counter: u32,
    pub(crate) outstanding: BTreeMap<Zxid, Proposal>,
    pub(crate) ping_round: u64,
    pub(crate) next_ping_ms: u64,
    pub(crate) syncs: Vec<PendingSync>,
    pub(crate) queued: Vec<(Origin, ClientOp)>,
    /// The PING round that confirms the NEWLEADER quorum is still there (sync INV-3).
    pub(crate) confirm_round: Option<u64>,
    pub(crate) confirm_acks: BTreeSet<ServerId>,
    /// A leader transfer under way (`transfer` INV-1).
    pub(crate) transfer: Option<transfer::Handover>,
    /// Set by the handover: leaving keeps the learners' channels (`transfer` INV-4).
    pub(crate) handed_over: bool,
}

impl Leader {
    /// Takes the lead; may finish discovery at once (a one-participant ensemble).
    pub(crate) fn start(core: &mut Core) -> Result<(Leader, Next), StepError> {
        let mut leader = Leader {
            phase: Phase::Discovery,
            phase_since_ms: core.now_ms,
            new_epoch: None,
            handlers: BTreeMap::new(),
            info_quorum: BTreeSet::from([core.sid()]),
            epoch_acks: BTreeSet::new(),
            newleader_acks: BTreeSet::new(),
            counter: 0,
            outstanding: BTreeMap::new(),
            ping_round: 0,
            next_ping_ms: core.now_ms,
            syncs: Vec::new(),
            queued: Vec::new(),
            confirm_round: None,
            confirm_acks: BTreeSet::new(),
            transfer: None,
            handed_over: false,
        };
        let next = leader.check_discovery(core)?;
        Ok((leader, next))
    }

    /// The epoch being established (zero before it is chosen).
    pub(crate) fn epoch(&self) -> Epoch {
        self.new_epoch.unwrap_or_default()
    }

    /// True once established.
    pub(crate) fn is_serving(&self) -> bool {
        self.phase == Phase::Broadcast
    }

    fn set_phase(&mut self, core: &Core, phase: Phase) {
        self.phase = phase;
        self.phase_since_ms = core.now_ms;
    }

    /// A quorum-channel message from `from` (INV-2).
    pub(crate) fn on_message(
        &mut self,
        core: &mut Core,
        from: ServerId,
        msg: Message,
    ) -> Result<Next, StepError> {
        match msg {
            Message::FollowerInfo { accepted_epoch, .. } => {
                return self.on_info(core, from, accepted_epoch, false)
            }
            Message::ObserverInfo { accepted_epoch, .. } => {
                return self.on_info(core, from, accepted_epoch, true)
            }
            _ => {}
        }
        let Some(h) = self.handlers.get_mut(&from) else {
            tracing::debug!(%from, "leader: message from a non-learner dropped");
            return Ok(Next::Stay);
        };
        if matches!(
            msg,
            Message::AckEpoch { .. }
                | Message::Ack { .. }
                | Message::PingAck { .. }
                | Message::Request { .. }
                | Message::Sync { .. }
        ) {
            h.last_heard_ms = core.now_ms;
        }
        match msg {
            Message::AckEpoch {
                current_epoch,
                last_zxid,
            } => self.on_ack_epoch(core, from, current_epoch, last_zxid),
            Message::Ack { zxid } => match self.on_ack(core, from, zxid)? {
                Next::Stay => Ok(self.check_handover(core)),
                leave => Ok(leave),
            },
            Message::PingAck { round } => self.on_ping_ack(core, from, round),
            Message::Request {
                request_id,
                payload,
            } => self.client_op(
                core,
                Origin::Remote(from, request_id),
                ClientOp::Write(request_id, payload),
            ),
            Message::Sync { request_id } => self.client_op(
                core,
                Origin::Remote(from, request_id),
                ClientOp::Sync(request_id),
            ),
            other => {
                tracing::debug!(%from, ?other, "leader: unexpected message dropped");
                Ok(Next::Stay)
            }
        }
    }

    /// A local client's write or sync.
    pub(crate) fn on_client(&mut self, core: &mut Core, op: ClientOp) -> Result<Next, StepError> {
        let origin = match &op {
            ClientOp::Write(id, _) | ClientOp::Sync(id) => Origin::Local(*id),
            ClientOp::Change(id, _) => Origin::Change(*id),
        };
        self.client_op(core, origin, op)
    }

    fn client_op(
        &mut self,
        core: &mut Core,
        origin: Origin,
        op: ClientOp,
    ) -> Result<Next, StepError> {
        if self.phase != Phase::Broadcast {
            self.queued.push((origin, op));
            return Ok(Next::Stay);
        }
        let proposes = matches!(op, ClientOp::Write(..) | ClientOp::Change(..));
        if proposes && self.refuse_during_transfer(core, origin) {
            return Ok(Next::Stay);
        }
        match op {
            ClientOp::Write(_, payload) => self.propose(core, payload, origin),
            ClientOp::Sync(_) => {
                self.start_read_sync(core, origin);
                Ok(Next::Stay)
            }
            ClientOp::Change(_, change) => self.propose_change(core, origin, change),
        }
    }

    /// Runs the client ops queued before the leader was established.
    pub(crate) fn drain_queued(&mut self, core: &mut Core) -> Result<Next, StepError> {
        for (origin, op) in std::mem::take(&mut self.queued) {
            if let Next::Leave(why) = self.client_op(core, origin, op)? {
                return Ok(Next::Leave(why));
            }
        }
        Ok(Next::Stay)
    }

    /// The quorum channel to `peer` closed: forget the learner.
    pub(crate) fn on_connection_lost(&mut self, peer: ServerId) {
        if self.handlers.remove(&peer).is_some() {
            tracing::debug!(%peer, "leader: learner connection lost");
        }
        self.forget(peer);
    }

    /// A learner left: its votes in the phase quorums no longer count (INV-5).
    fn forget(&mut self, peer: ServerId) {
        self.info_quorum.remove(&peer);
        self.epoch_acks.remove(&peer);
        self.newleader_acks.remove(&peer);
        self.confirm_acks.remove(&peer);
    }

    /// Everything up to the log's persisted point is durable here.
    pub(crate) fn on_persisted(&mut self, core: &mut Core) -> Result<Next, StepError> {
        match self.phase {
            Phase::EpochAck => self.check_epoch_acks(core),
            Phase::Sync => self.check_newleader(core),
            Phase::Broadcast => match self.on_self_persisted(core)? {
                Next::Stay => Ok(self.check_handover(core)),
                leave => Ok(leave),
            },
            _ => Ok(Next::Stay),
        }
    }

    /// Heartbeats, learner timeouts, phase timeouts and the quorum check (INV-4).
    pub(crate) fn on_tick(&mut self, core: &mut Core) -> Result<Next, StepError> {
        let now = core.now_ms;
        if now >= self.next_ping_ms {
            self.ping_round += 1;
            let round = self.ping_round;
            for sid in self.handlers.keys().copied().collect::<Vec<_>>() {
                core.send(sid, Message::Ping { round });
            }
            self.next_ping_ms = now.saturating_add((core.cfg.tick_ms / 2).max(1));
        }
        let (init_ms, sync_ms) = (core.init_ms(), core.sync_ms());
        let dead: Vec<ServerId> = self
            .handlers
            .iter()
            .filter(|(_, h)| {
                let limit = if h.state == HandlerState::UpToDate {
                    sync_ms
                } else {
                    init_ms
                };
                now.saturating_sub(h.last_heard_ms) > limit
            })
            .map(|(s, _)| *s)
            .collect();
        for peer in dead {
            tracing::debug!(%peer, "leader: learner silent too long, dropped");
            self.handlers.remove(&peer);
            self.forget(peer);
            core.push(Action::Disconnect { peer });
        }
        if self.phase != Phase::Broadcast {
            if now.saturating_sub(self.phase_since_ms) > init_ms {
                return Ok(Next::Leave("leader: no quorum within initLimit"));
            }
            return Ok(Next::Stay);
        }
        let mut alive = vec![core.sid()];
        alive.extend(
            self.handlers
                .iter()
                .filter(|(_, h)| {
                    !h.observer
                        && h.state == HandlerState::UpToDate
                        && now.saturating_sub(h.last_heard_ms) <= sync_ms
                })
                .map(|(s, _)| *s),
        );
        if !core.cfg.is_quorum(alive.iter()) {
            return Ok(Next::Leave("leader: lost its quorum of followers"));
        }
        if let Next::Leave(why) = self.transfer_tick(core) {
            return Ok(Next::Leave(why));
        }
        self.promote_synced(core)
    }

    /// Leaving the role: fail everything pending and close every learner channel.
    pub(crate) fn leave(mut self, core: &mut Core) {
        self.fail_transfer_on_leave(core);
        for p in self.outstanding.into_values() {
            match p.origin {
                Origin::Local(request_id) => core.push(Action::WriteDone {
                    request_id,
                    outcome: Err(RequestError::QuorumLost),
                }),
                Origin::Change(request_id) => core.push(Action::MembershipDone {
                    request_id,
                    outcome: Err(MembershipError::QuorumLost),
                }),
                Origin::Remote(..) | Origin::Internal => {}
            }
        }
        for s in self.syncs {
            if let Origin::Local(request_id) = s.origin {
                core.push(Action::SyncDone {
                    request_id,
                    outcome: Err(RequestError::QuorumLost),
                });
            }
        }
        for (origin, op) in self.queued {
            if let Origin::Local(_) | Origin::Change(_) = origin {
                core.fail_op(op, RequestError::NotLeader { leader: None });
            }
        }
        if self.handed_over {
            return;
        }
        for peer in self.handlers.into_keys() {
            core.push(Action::Disconnect { peer });
        }
    }

    /// Checks the leader's INV lines on its current state (`Peer::check_invariants`).
    pub(crate) fn check(&self, core: &Core) -> Result<(), String> {
        let me = core.sid();
        let counted = |sid: &ServerId| {
            *sid == me || self.handlers.get(sid).is_some_and(|h| votes(core, *sid, h))
        };
        // In broadcast the phase quorums are history; the configuration may have moved since.
        let phase_sets = if self.phase == Phase::Broadcast {
            vec![]
        } else {
            vec![
                ("FOLLOWERINFO", &self.info_quorum),
                ("ACKEPOCH", &self.epoch_acks),
                ("NEWLEADER", &self.newleader_acks),
            ]
        };
        for (name, set) in phase_sets {
            if let Some(bad) = set.iter().find(|s| !counted(s)) {
                return Err(format!(
                    "leader INV-1/INV-5: {bad} counts in the {name} quorum without a voting \
                     learner handler"
                ));
            }
        }
        if self.phase < Phase::Sync {
            if let Some((sid, _)) = self.handlers.iter().find(|(_, h)| h.forwarding()) {
                return Err(format!(
                    "leader INV-3: learner {sid} registered for forwarding before the epoch \
                     quorum (phase {:?})",
                    self.phase
                ));
            }
            if !self.newleader_acks.is_empty() {
                return Err("leader: NEWLEADER acks before the sync phase".into());
            }
        } else {
            let epoch = self.epoch();
            if core.current_epoch != epoch || core.accepted_epoch != epoch {
                return Err(format!(
                    "leader discovery INV-3: phase {:?} of epoch {epoch} with currentEpoch {} \
                     and acceptedEpoch {}",
                    self.phase, core.current_epoch, core.accepted_epoch
                ));
            }
        }
        if let Some((z, _)) = self.outstanding.iter().next() {
            if *z <= core.last_committed {
                return Err(format!(
                    "leader broadcast: proposal {z} outstanding at or below the commit point {}",
                    core.last_committed
                ));
            }
        }
        if let Some((z, _)) = self.outstanding.iter().next_back() {
            if *z > core.log.last() || z.epoch() != self.epoch() {
                return Err(format!(
                    "leader broadcast: outstanding proposal {z} is not in this epoch's log \
                     (last {})",
                    core.log.last()
                ));
            }
        }
        Ok(())
    }

    /// The sync plan chosen for `sid`, if it was synced.
    pub(crate) fn plan_of(&self, sid: ServerId) -> Option<SyncPlan> {
        self.handlers.get(&sid).and_then(|h| h.plan)
    }
}
