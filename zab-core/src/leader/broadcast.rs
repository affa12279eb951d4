//! Broadcast on the leader (DESIGN §3.5): proposals, cumulative acks, in-order commit,
//! forwarded requests and quorum-confirmed `sync`.
//!
//! INV-1: zxids of this epoch are `(epoch << 32) | counter` with the counter strictly
//! increasing from 1; no zxid with a counter above `max_counter` is ever proposed (B10).
//! INV-2: a proposal commits only when a quorum of participants acked it (for a configuration
//! txn, a quorum of the configuration it replaces as well, `membership` R4) (the leader after its
//! own `LogPersisted`) and every earlier proposal committed (D1); COMMIT goes to every
//! registered follower, INFORM to every registered observer, then `Apply`, then the answer to
//! the client (`WriteDone`, or `RequestDone` after the COMMIT on the same link).
//! INV-3: a `sync` answers the commit point recorded when it arrived, and only after a quorum of
//! participants answered a PING of a later round, so a deposed leader cannot answer (D3).

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use crate::config::is_quorum_of;
use crate::error::StepError;
use crate::io::Action;
use crate::membership::MembershipError;
use crate::message::{Message, RequestError};
use crate::peer::core::{Core, Next};
use crate::types::{LearnerType, ServerId, Txn, TxnKind, Zxid};

use super::{HandlerState, Leader, Origin, PendingSync, Phase, Proposal};

impl Leader {
    /// ACK from a learner: of NEWLEADER (`(epoch, 0)`) or of proposals up to `zxid`.
    pub(super) fn on_ack(
        &mut self,
        core: &mut Core,
        from: ServerId,
        zxid: Zxid,
    ) -> Result<Next, StepError> {
        let epoch = self.epoch();
        if zxid == Zxid::new(epoch, 0) {
            return self.on_newleader_ack(core, from);
        }
        let Some(h) = self.handlers.get_mut(&from) else {
            return Ok(Next::Stay);
        };
        if zxid.epoch() != epoch || h.observer || h.state < HandlerState::NewLeaderAcked {
            tracing::debug!(%from, %zxid, "leader: ACK out of phase dropped");
            return Ok(Next::Stay);
        }
        if zxid <= h.acked_upto {
            return Ok(Next::Stay);
        }
        let lo = h.acked_upto;
        h.acked_upto = zxid;
        for (_, p) in self.outstanding.range_mut(lo..=zxid) {
            p.acks.insert(from);
        }
        self.try_commit(core)?;
        Ok(Next::Stay)
    }

    /// The leader's own log became durable up to its persisted point: it acks for itself.
    pub(super) fn on_self_persisted(&mut self, core: &mut Core) -> Result<Next, StepError> {
        let upto = core.log.persisted();
        let me = core.sid();
        for (_, p) in self.outstanding.range_mut(..=upto) {
            p.acks.insert(me);
        }
        self.try_commit(core)?;
        Ok(Next::Stay)
    }

    /// Proposes a new txn of the application (INV-1).
    pub(super) fn propose(
        &mut self,
        core: &mut Core,
        payload: Bytes,
        origin: Origin,
    ) -> Result<Next, StepError> {
        self.propose_txn(core, payload, TxnKind::App, origin, None)
    }

    /// Proposes a new txn of `kind` (INV-1); `joint` is the configuration a configuration txn
    /// replaces (`members` INV-2).
    pub(super) fn propose_txn(
        &mut self,
        core: &mut Core,
        data: Bytes,
        kind: TxnKind,
        origin: Origin,
        joint: Option<BTreeMap<ServerId, LearnerType>>,
    ) -> Result<Next, StepError> {
        if self.counter >= core.cfg.max_counter {
            self.answer(core, origin, Err(RequestError::EpochExhausted));
            return Ok(Next::Leave(
                "leader: zxid counter exhausted, forcing a new epoch",
            ));
        }
        self.counter += 1;
        let zxid = Zxid::new(self.epoch(), self.counter);
        let txn = Txn { zxid, data, kind };
        core.append(txn.clone())?;
        self.outstanding.insert(
            zxid,
            Proposal {
                acks: BTreeSet::new(),
                origin,
                joint,
            },
        );
        let followers: Vec<ServerId> = self
            .handlers
            .iter()
            .filter(|(_, h)| h.forwarding() && !h.observer)
            .map(|(s, _)| *s)
            .collect();
        for sid in followers {
            core.send(sid, Message::Proposal(txn.clone()));
        }
        if core.log.persisted() >= zxid {
            self.on_self_persisted(core)?;
        }
        Ok(Next::Stay)
    }

    /// Commits every head-of-line proposal that has a quorum (INV-2).
    fn try_commit(&mut self, core: &mut Core) -> Result<(), StepError> {
        while let Some(entry) = self.outstanding.first_entry() {
            let p = entry.get();
            let joint_ok = p
                .joint
                .as_ref()
                .is_none_or(|old| is_quorum_of(old, p.acks.iter()));
            if !joint_ok || !core.cfg.is_quorum(p.acks.iter()) {
                break;
            }
            let zxid = *entry.key();
            let origin = entry.remove().origin;
            self.commit(core, zxid, origin)?;
        }
        Ok(())
    }

    fn commit(&mut self, core: &mut Core, zxid: Zxid, origin: Origin) -> Result<(), StepError> {
        let txn =
            core.log.txn(zxid).cloned().ok_or_else(|| {
                StepError::Invariant(format!("committing {zxid} without its data"))
            })?;
        for (sid, h) in &self.handlers {
            if !h.forwarding() {
                continue;
            }
            let msg = if h.observer {
                Message::Inform(txn.clone())
            } else {
                Message::Commit { zxid }
            };
            core.send(*sid, msg);
        }
        core.apply_upto(zxid)?;
        self.answer(core, origin, Ok(zxid));
        Ok(())
    }

    /// Tells the origin of a write its outcome.
    pub(super) fn answer(
        &mut self,
        core: &mut Core,
        origin: Origin,
        outcome: Result<Zxid, RequestError>,
    ) {
        match origin {
            Origin::Internal => {}
            Origin::Change(request_id) => core.push(Action::MembershipDone {
                request_id,
                outcome: outcome.map_err(|e| match e {
                    RequestError::NotLeader { leader } => MembershipError::NotLeader { leader },
                    RequestError::QuorumLost => MembershipError::QuorumLost,
                    RequestError::EpochExhausted => MembershipError::EpochExhausted,
                }),
            }),
            Origin::Local(request_id) => core.push(Action::WriteDone {
                request_id,
                outcome,
            }),
            Origin::Remote(sid, request_id) => {
                if self.handlers.contains_key(&sid) {
                    core.send(
                        sid,
                        Message::RequestDone {
                            request_id,
                            outcome,
                        },
                    );
                }
            }
        }
    }

    /// Starts a quorum round for a `sync` (INV-3).
    pub(super) fn start_read_sync(&mut self, core: &mut Core, origin: Origin) {
        self.ping_round += 1;
        let round = self.ping_round;
        let targets: Vec<ServerId> = self
            .handlers
            .iter()
            .filter(|(_, h)| h.forwarding() && !h.observer)
            .map(|(s, _)| *s)
            .collect();
        for sid in targets {
            core.send(sid, Message::Ping { round });
        }
        let acks = BTreeSet::from([core.sid()]);
        self.syncs.push(PendingSync {
            origin,
            point: core.last_committed,
            round,
            acks,
        });
        self.check_syncs(core);
    }

    /// PINGACK: heartbeat answer, and a vote for every `sync` round it covers.
    pub(super) fn on_ping_ack(
        &mut self,
        core: &mut Core,
        from: ServerId,
        round: u64,
    ) -> Result<Next, StepError> {
        let counts = self
            .handlers
            .get(&from)
            .is_some_and(|h| h.forwarding() && !h.observer);
        if counts && self.phase == Phase::Sync {
            let fresh = self.confirm_round.is_some_and(|r| round >= r);
            if fresh && self.newleader_acks.contains(&from) {
                self.confirm_acks.insert(from);
                return self.check_newleader(core);
            }
            return Ok(Next::Stay);
        }
        if !counts || self.phase != Phase::Broadcast {
            return Ok(Next::Stay);
        }
        for s in self.syncs.iter_mut().filter(|s| s.round <= round) {
            s.acks.insert(from);
        }
        self.check_syncs(core);
        Ok(Next::Stay)
    }

    fn check_syncs(&mut self, core: &mut Core) {
        let (done, waiting): (Vec<PendingSync>, Vec<PendingSync>) = std::mem::take(&mut self.syncs)
            .into_iter()
            .partition(|s| core.cfg.is_quorum(s.acks.iter()));
        self.syncs = waiting;
        for s in done {
            match s.origin {
                Origin::Local(request_id) => core.push(Action::SyncDone {
                    request_id,
                    outcome: Ok(s.point),
                }),
                Origin::Change(_) | Origin::Internal => {}
                Origin::Remote(sid, request_id) => {
                    if self.handlers.contains_key(&sid) {
                        core.send(
                            sid,
                            Message::SyncReply {
                                request_id,
                                outcome: Ok(s.point),
                            },
                        );
                    }
                }
            }
        }
    }
}
