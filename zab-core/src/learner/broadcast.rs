//! Broadcast on the learner: log proposals, ack them once durable, apply on COMMIT / INFORM,
//! finish forwarded writes and syncs.
//!
//! INV-1: only proposals of the leader's epoch are logged in broadcast (stale epochs dropped,
//! D9); duplicates (zxid already logged) are ignored (Zab.tla issue 2).
//! INV-2: a COMMIT applies every logged txn up to its zxid, in order; a COMMIT of a zxid not
//! logged here makes the learner leave the role (it can no longer be trusted to be in sync).
//! INV-3: a write or sync finishes only when `last_applied` reached the zxid the leader gave.

use crate::error::StepError;
use crate::io::Action;
use crate::message::Message;
use crate::peer::core::{Core, Next};
use crate::types::{Txn, Zxid};

use super::Learner;

impl Learner {
    /// A message while serving.
    pub(super) fn on_broadcast_message(
        &mut self,
        core: &mut Core,
        msg: Message,
    ) -> Result<Next, StepError> {
        match msg {
            Message::Proposal(txn) if !self.observer => self.on_proposal(core, txn)?,
            Message::Commit { zxid } if !self.observer => return self.on_commit(core, zxid),
            Message::Inform(txn) if self.observer => {
                let zxid = txn.zxid;
                if zxid.epoch() != self.new_epoch {
                    tracing::debug!(%zxid, "observer: stale INFORM dropped");
                    return Ok(Next::Stay);
                }
                if zxid > core.log.last() {
                    core.append(txn)?;
                }
                return self.on_commit(core, zxid);
            }
            Message::RequestDone {
                request_id,
                outcome,
            } => match outcome {
                Ok(z) => {
                    if let Some(slot) = self.writes.get_mut(&request_id) {
                        *slot = Some(z);
                    }
                    self.complete_pending(core);
                }
                Err(e) => {
                    if self.writes.remove(&request_id).is_some() {
                        core.push(Action::WriteDone {
                            request_id,
                            outcome: Err(e),
                        });
                    }
                }
            },
            Message::SyncReply {
                request_id,
                outcome,
            } => match outcome {
                Ok(z) => {
                    if let Some(slot) = self.syncs.get_mut(&request_id) {
                        *slot = Some(z);
                    }
                    self.complete_pending(core);
                }
                Err(e) => {
                    if self.syncs.remove(&request_id).is_some() {
                        core.push(Action::SyncDone {
                            request_id,
                            outcome: Err(e),
                        });
                    }
                }
            },
            other => tracing::debug!(?other, "learner: message out of phase dropped"),
        }
        Ok(Next::Stay)
    }

    fn on_proposal(&mut self, core: &mut Core, txn: Txn) -> Result<(), StepError> {
        let zxid = txn.zxid;
        if zxid.epoch() != self.new_epoch {
            tracing::debug!(%zxid, "learner: proposal of another epoch dropped");
            return Ok(());
        }
        if zxid <= core.log.last() {
            tracing::debug!(%zxid, "learner: duplicate proposal ignored");
            return Ok(());
        }
        core.append(txn)
    }

    /// COMMIT (INV-2).
    fn on_commit(&mut self, core: &mut Core, zxid: Zxid) -> Result<Next, StepError> {
        if zxid <= core.last_applied {
            return Ok(Next::Stay);
        }
        if zxid > core.log.last() || !core.log.contains(zxid) {
            tracing::warn!(%zxid, "learner: COMMIT of a txn not logged");
            return Ok(Next::Leave("learner: COMMIT of a txn not logged"));
        }
        core.apply_upto(zxid)?;
        self.complete_pending(core);
        Ok(Next::Stay)
    }

    /// Finishes writes and syncs whose zxid is applied (INV-3).
    pub(super) fn complete_pending(&mut self, core: &mut Core) {
        let applied = core.last_applied;
        let done: Vec<_> = self
            .writes
            .iter()
            .filter_map(|(id, z)| z.filter(|z| *z <= applied).map(|z| (*id, z)))
            .collect();
        for (request_id, z) in done {
            self.writes.remove(&request_id);
            core.push(Action::WriteDone {
                request_id,
                outcome: Ok(z),
            });
        }
        let done: Vec<_> = self
            .syncs
            .iter()
            .filter_map(|(id, z)| z.filter(|z| *z <= applied).map(|z| (*id, z)))
            .collect();
        for (request_id, z) in done {
            self.syncs.remove(&request_id);
            core.push(Action::SyncDone {
                request_id,
                outcome: Ok(z),
            });
        }
    }
}
