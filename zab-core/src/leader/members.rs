//! Membership changes on the leader (`crate::membership`): proposing a change, promoting a
//! synced joining member, and reacting when a change commits.
//!
//! INV-1: a change is proposed only in broadcast and only while the log holds no uncommitted
//! configuration (R3); a second one is refused with `ChangeInFlight`, an invalid one with
//! `Invalid`, and neither touches the log.
//! INV-2: a configuration txn waits for the quorum of the configuration it replaces as well as
//! its own (R4, `Proposal::joint`).
//! INV-3: once a configuration commits, a leader it no longer lists leaves its role (R6) after
//! answering the change; a learner it no longer lists gets the COMMIT and leaves by itself.

use bytes::Bytes;

use crate::error::StepError;
use crate::io::Action;
use crate::membership::{MemberRole, MembershipChange, MembershipError};
use crate::peer::core::{Core, Next};
use crate::types::{TxnKind, Zxid};

use super::{HandlerState, Leader, Origin, Phase};

impl Leader {
    /// Proposes `change` (INV-1, INV-2).
    pub(super) fn propose_change(
        &mut self,
        core: &mut Core,
        origin: Origin,
        change: MembershipChange,
    ) -> Result<Next, StepError> {
        if let Some(pending) = core.members.pending() {
            let version = pending.version;
            self.answer_change(core, origin, Err(MembershipError::ChangeInFlight(version)));
            return Ok(Next::Stay);
        }
        let next = match core.members.in_force().changed(&change) {
            Ok(next) => next,
            Err(e) => {
                self.answer_change(core, origin, Err(e));
                return Ok(Next::Stay);
            }
        };
        tracing::info!(?change, "leader: proposing a membership change");
        let joint = core.cfg.members.clone();
        let data: Bytes = next.encode();
        self.propose_txn(core, data, TxnKind::Membership, origin, Some(joint))
    }

    /// Answers the origin of a change that was refused or failed before it was proposed.
    fn answer_change(
        &mut self,
        core: &mut Core,
        origin: Origin,
        outcome: Result<Zxid, MembershipError>,
    ) {
        if let Origin::Change(request_id) = origin {
            core.push(Action::MembershipDone {
                request_id,
                outcome,
            });
        }
    }

    /// Promotes a joining member once it is synced and its data durable (R5): it acked
    /// NEWLEADER (everything its sync brought is durable) and got UPTODATE.
    pub(super) fn promote_synced(&mut self, core: &mut Core) -> Result<Next, StepError> {
        let busy = core.members.pending().is_some() || self.transfer.is_some();
        if self.phase != Phase::Broadcast || busy {
            return Ok(Next::Stay);
        }
        let ready = core
            .members
            .in_force()
            .members
            .iter()
            .filter(|(_, m)| m.role == MemberRole::Joining)
            .map(|(sid, _)| *sid)
            .find(|sid| {
                self.handlers
                    .get(sid)
                    .is_some_and(|h| !h.observer && h.state == HandlerState::UpToDate)
            });
        match ready {
            Some(sid) => {
                tracing::info!(%sid, "leader: joining member is synced; promoting it");
                self.propose_change(core, Origin::Internal, MembershipChange::Promote { sid })
            }
            None => Ok(Next::Stay),
        }
    }

    /// The configuration moved during this step (INV-3). A learner the committed
    /// configuration dropped is not disconnected here: the COMMIT of its removal is queued to
    /// it and must arrive, so it learns it was removed and leaves by itself; until then it
    /// counts in no quorum, and if it stays silent the learner timeout drops it.
    pub(crate) fn on_members_moved(&mut self, core: &mut Core) -> Result<Next, StepError> {
        if !core.members.committed().members.contains_key(&core.sid()) {
            return Ok(Next::Leave(
                "leader: the committed configuration removed this server",
            ));
        }
        self.promote_synced(core)
    }
}
