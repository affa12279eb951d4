//! The leader's side of a leader transfer (`crate::transfer` steps 1–3).
//!
//! INV-1: while `Leader::transfer` is set nothing new is proposed: writes and membership
//! changes are answered `NotLeader { leader: Some(target) }` at once.
//! INV-2: the handover happens only when no proposal is outstanding (everything proposed is
//! committed) and the target, a voting follower in sync, acked every proposal of this epoch;
//! so the target's log holds every txn any client heard of.
//! INV-4: the handover leaves the learners' quorum channels open: each learner closes its own
//! when the notice reaches it, so it goes LOOKING with the nominee's vote instead of racing the
//! notice with a "connection lost" and a vote for itself (which could elect another up-to-date
//! server). The old leader sends nothing more on them (LOOKING sends no quorum message, and a
//! learner drops what does not come from its current leader); a learner the notice never
//! reaches leaves after syncLimit as when its leader dies.
//! INV-3: the transfer ends within syncLimit: by the handover, or by `Timeout` (leading goes
//! on), or by `TargetNotConnected` when the target's channel closes.

use crate::io::Action;
use crate::membership::MemberRole;
use crate::message::{Message, Vote};
use crate::peer::core::{Core, Next};
use crate::transfer::{TransferError, Watch};
use crate::types::{ServerId, Zxid};

use super::{HandlerState, Leader, Origin, Phase};

/// A transfer under way on the leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Handover {
    /// The server that should lead next.
    pub(crate) target: ServerId,
    /// When to give up and keep leading (INV-3).
    pub(crate) until_ms: u64,
}

impl Leader {
    /// Starts a transfer to `target` (or the best candidate), or refuses it (`transfer` T1).
    pub(crate) fn start_transfer(&mut self, core: &mut Core, target: Option<ServerId>) -> Next {
        match self.choose_target(core, target) {
            Ok(target) => {
                tracing::info!(%target, "leader: transferring leadership");
                self.transfer = Some(Handover {
                    target,
                    until_ms: core.now_ms.saturating_add(core.sync_ms()),
                });
                self.check_handover(core)
            }
            Err(e) => {
                core.push(Action::TransferDone { outcome: Err(e) });
                Next::Stay
            }
        }
    }

    /// Validates the requested target, or picks the voting follower in sync with the highest
    /// acked zxid (the lowest sid among equals).
    fn choose_target(
        &self,
        core: &Core,
        target: Option<ServerId>,
    ) -> Result<ServerId, TransferError> {
        if self.phase != Phase::Broadcast {
            return Err(TransferError::NotLeader { leader: None });
        }
        if self.transfer.is_some() {
            return Err(TransferError::InProgress);
        }
        if let Some(pending) = core.members.pending() {
            return Err(TransferError::ChangeInFlight(pending.version));
        }
        let in_sync = |sid: &ServerId| {
            self.handlers.get(sid).is_some_and(|h| {
                !h.observer
                    && h.state == HandlerState::UpToDate
                    && crate::election::is_participant(&core.cfg, *sid)
            })
        };
        let Some(target) = target else {
            return self
                .handlers
                .iter()
                .filter(|(sid, _)| in_sync(sid))
                .max_by_key(|(sid, h)| (h.acked_upto, std::cmp::Reverse(**sid)))
                .map(|(sid, _)| *sid)
                .ok_or(TransferError::NoCandidate);
        };
        if target == core.sid() {
            return Err(TransferError::AlreadyLeader(target));
        }
        match core.members.in_force().role_of(target) {
            None => Err(TransferError::UnknownTarget(target)),
            Some(MemberRole::Observer | MemberRole::Joining) => {
                Err(TransferError::NotAVoter(target))
            }
            Some(MemberRole::Participant) if !in_sync(&target) => {
                Err(TransferError::TargetNotConnected(target))
            }
            Some(MemberRole::Participant) => Ok(target),
        }
    }

    /// Refuses a write or change while a transfer is under way (INV-1); true if it did.
    pub(super) fn refuse_during_transfer(&mut self, core: &mut Core, origin: Origin) -> bool {
        let Some(h) = self.transfer else {
            return false;
        };
        let err = crate::message::RequestError::NotLeader {
            leader: Some(h.target),
        };
        self.answer(core, origin, Err(err));
        true
    }

    /// Hands over once the target holds everything (INV-2): notices to every learner, then
    /// LOOKING with the target as our first vote.
    pub(crate) fn check_handover(&mut self, core: &mut Core) -> Next {
        let Some(h) = self.transfer else {
            return Next::Stay;
        };
        let Some(th) = self.handlers.get(&h.target) else {
            return self.abort_transfer(core, TransferError::TargetNotConnected(h.target));
        };
        let last_proposed = match self.counter {
            0 => Zxid::ZERO,
            c => Zxid::new(self.epoch(), c),
        };
        if !self.outstanding.is_empty() || th.acked_upto < last_proposed {
            return Next::Stay;
        }
        let nominee = Vote {
            leader: h.target,
            zxid: core.log.last(),
            peer_epoch: core.current_epoch,
        };
        for sid in self.handlers.keys().copied().collect::<Vec<_>>() {
            core.send(sid, Message::Transfer { nominee });
        }
        self.transfer = None;
        self.handed_over = true;
        core.set_hint(nominee);
        core.watch = Some(Watch {
            target: h.target,
            until_ms: core.now_ms.saturating_add(core.init_ms()),
        });
        tracing::info!(target = %h.target, zxid = %nominee.zxid, "leader: handing over");
        Next::Leave("leader: handed leadership over")
    }

    /// Ends the transfer on timeout or when the target's channel closed (INV-3).
    pub(super) fn transfer_tick(&mut self, core: &mut Core) -> Next {
        match self.transfer {
            Some(h) if core.now_ms >= h.until_ms => {
                tracing::info!(target = %h.target, "leader: transfer timed out; leading on");
                self.abort_transfer(core, TransferError::Timeout { target: h.target })
            }
            Some(_) => self.check_handover(core),
            None => Next::Stay,
        }
    }

    fn abort_transfer(&mut self, core: &mut Core, e: TransferError) -> Next {
        self.transfer = None;
        core.push(Action::TransferDone { outcome: Err(e) });
        Next::Stay
    }

    /// Leaving the role with a transfer not handed over yet: it failed (`transfer` T5).
    pub(super) fn fail_transfer_on_leave(&mut self, core: &mut Core) {
        if let Some(h) = self.transfer.take() {
            core.push(Action::TransferDone {
                outcome: Err(TransferError::LeadershipLost { target: h.target }),
            });
        }
    }
}
