//! The peer's side of a leader transfer (`crate::transfer`): the operator's request, the
//! leader's notice, the hint's expiry and the old leader's report.
//!
//! INV-1: a notice is taken from the leader this peer follows (it leaves its role) or while
//! LOOKING (a new round with the nominee first); a leader ignores it.
//! INV-2: the old leader answers the request once, when it serves again or when its watch
//! expires (`transfer` T5).

use crate::error::StepError;
use crate::io::Action;
use crate::message::Vote;
use crate::transfer::{TransferError, TransferReport};
use crate::types::ServerId;

use super::core::Next;
use super::{Peer, RoleState};

impl Peer {
    /// `Input::TransferLeadership`: only an established leader starts one.
    pub(super) fn on_transfer(&mut self, target: Option<ServerId>) -> Next {
        if let RoleState::Leading(l) = &mut self.role {
            return l.start_transfer(&mut self.core, target);
        }
        let e = if self.core.watch.is_some() {
            TransferError::InProgress
        } else {
            TransferError::NotLeader {
                leader: self.leader(),
            }
        };
        self.core.push(Action::TransferDone { outcome: Err(e) });
        Next::Stay
    }

    /// `Message::Transfer` from `from` (INV-1).
    pub(super) fn on_transfer_notice(
        &mut self,
        from: ServerId,
        nominee: Vote,
    ) -> Result<Next, StepError> {
        match &mut self.role {
            RoleState::Learning(l) if l.leader == from => {
                let kept = self.core.set_hint(nominee);
                tracing::info!(%from, nominee = %nominee.leader, kept, "the leader hands over");
                Ok(Next::Leave("learner: the leader handed leadership over"))
            }
            RoleState::Looking(e) => {
                // Already voting for the nominee (the nominee itself, or a peer that adopted
                // its vote): keep the round, only allow the quick decision.
                let same = self.core.vote == nominee;
                tracing::debug!(%from, nominee = %nominee.leader, same, vote = ?self.core.vote,
                    ?nominee, "transfer notice while LOOKING");
                if same {
                    e.nominee = Some(nominee.leader);
                    e.set_my_vote(&self.core.cfg, nominee, self.core.now_ms);
                }
                if self.core.set_hint(nominee) && !same {
                    self.start_election()?;
                }
                self.try_decide()?;
                Ok(Next::Stay)
            }
            RoleState::Learning(_) | RoleState::Leading(_) => Ok(Next::Stay),
        }
    }

    /// True (and the hint dropped) when a transfer hint ran out while LOOKING (`transfer` T4).
    pub(super) fn hint_expired(&mut self) -> bool {
        match self.core.hint {
            Some(h) if self.core.now_ms >= h.until_ms => {
                tracing::info!(nominee = %h.vote.leader, "transfer hint expired; voting again");
                self.core.hint = None;
                true
            }
            _ => false,
        }
    }

    /// Reports the outcome of a handover once this old leader serves again (INV-2).
    pub(super) fn check_watch(&mut self) {
        let Some(w) = self.core.watch else {
            return;
        };
        let me = self.core.sid();
        let outcome = match &self.role {
            RoleState::Learning(l) if l.is_serving() && l.leader == w.target => {
                Ok(TransferReport {
                    from: me,
                    to: w.target,
                    epoch: l.new_epoch,
                })
            }
            RoleState::Learning(l) if l.is_serving() => Err(TransferError::NotElected {
                target: w.target,
                leader: Some(l.leader),
            }),
            RoleState::Leading(l) if l.is_serving() => Err(TransferError::NotElected {
                target: w.target,
                leader: Some(me),
            }),
            _ if self.core.now_ms >= w.until_ms => Err(TransferError::NotElected {
                target: w.target,
                leader: None,
            }),
            _ => return,
        };
        self.core.watch = None;
        self.core.push(Action::TransferDone { outcome });
    }
}
