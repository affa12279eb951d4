//! Reconciling the learner's log with a SNAP it does not install (its state machine is already
//! past the leader's snapshot): "truncate only on real conflict" (PITFALLS F3, C4, C10).
//!
//! INV-1: while reconciling, the learner's log is never cut below a zxid the leader streamed
//! or below its applied point; a streamed txn the log already holds (same zxid, hence the same
//! txn and the same prefix) is skipped.
//! INV-2: the first streamed txn the log does not hold cuts the log right after the last
//! streamed (or applied) zxid, then is appended; at NEWLEADER anything the log holds beyond the
//! stream is cut: the leader streamed its whole history, so none of it was committed.

use crate::error::StepError;
use crate::peer::core::{Core, Next};
use crate::types::Txn;

use super::Learner;

impl Learner {
    /// A txn of the sync stream (PROPOSAL, or INFORM to an observer).
    pub(super) fn sync_txn(&mut self, core: &mut Core, txn: Txn) -> Result<Next, StepError> {
        if txn.zxid.epoch() > self.new_epoch {
            return Ok(Next::Leave("learner: txn from a future epoch in sync"));
        }
        let Some(prev) = self.reconcile else {
            if txn.zxid > core.log.last() {
                core.append(txn)?;
            }
            return Ok(Next::Stay);
        };
        if txn.zxid <= core.last_applied || core.log.contains(txn.zxid) {
            self.reconcile = Some(prev.max(txn.zxid));
            return Ok(Next::Stay);
        }
        // First real conflict (INV-2).
        let cut = prev.max(core.last_applied);
        self.reconcile = None;
        if let Next::Leave(why) = self.cut_log(core, cut)? {
            return Ok(Next::Leave(why));
        }
        if txn.zxid > core.log.last() {
            core.append(txn)?;
        }
        Ok(Next::Stay)
    }

    /// NEWLEADER ends the stream: cut what the leader does not have (INV-2).
    pub(super) fn finish_reconcile(&mut self, core: &mut Core) -> Result<Next, StepError> {
        let Some(prev) = self.reconcile.take() else {
            return Ok(Next::Stay);
        };
        self.cut_log(core, prev.max(core.last_applied))
    }
}
