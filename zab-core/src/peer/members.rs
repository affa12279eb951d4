//! The configurations a peer holds: the newest committed one, and the ones logged after it.
//!
//! INV-1: `logged` holds, ascending by version, the configuration txns of the log above the
//! applied point and above `committed.version` (a committed configuration adopted from a member,
//! `membership` R7, may be newer than the applied point; the log's older ones are then history).
//! INV-2: the configuration in force (`membership` R1) is the newest of `logged`, else
//! `committed`; it changes only with an append, a truncation, an apply or a snapshot install.
//! INV-3: when a SNAP resets the log (`on_log_reset`), every logged configuration goes with
//! it, whatever its version: the log before the SNAP is gone, and a configuration above the
//! snapshot's zxid may be one no leader committed (the learner's tail of a later epoch than
//! the snapshot's, `sync_plan` INV-2). Only configurations logged after the reset stay until
//! the install (`on_snapshot`).

use crate::error::StepError;
use crate::membership::Membership;
use crate::types::{ServerId, Txn, TxnKind, Zxid};

/// See the module docs.
#[derive(Clone, Debug)]
pub(crate) struct Members {
    committed: Membership,
    logged: Vec<Membership>,
}

fn decode(txn: &Txn) -> Result<Membership, StepError> {
    Membership::from_txn(txn).map_err(|e| StepError::BadMembership(e.to_string()))
}

impl Members {
    /// `committed` is the configuration of the loaded snapshot (or the bootstrap one);
    /// `tail` the log after it (every configuration txn in it is logged, not known committed).
    pub(crate) fn new(committed: Membership, tail: &[Txn]) -> Result<Members, StepError> {
        let mut members = Members {
            committed,
            logged: Vec::new(),
        };
        for txn in tail {
            members.on_append(txn)?;
        }
        Ok(members)
    }

    /// The configuration in force (INV-2).
    pub(crate) fn in_force(&self) -> &Membership {
        self.logged.last().unwrap_or(&self.committed)
    }

    /// The newest configuration applied here.
    pub(crate) fn committed(&self) -> &Membership {
        &self.committed
    }

    /// The newest logged configuration not applied yet, if any.
    pub(crate) fn pending(&self) -> Option<&Membership> {
        self.logged.last()
    }

    /// True when `sid` is in the configuration in force.
    pub(crate) fn has(&self, sid: ServerId) -> bool {
        self.in_force().members.contains_key(&sid)
    }

    /// A txn was logged; returns true when the configuration in force changed.
    pub(crate) fn on_append(&mut self, txn: &Txn) -> Result<bool, StepError> {
        if txn.kind != TxnKind::Membership || txn.zxid <= self.committed.version {
            // A configuration at or below the committed one is history: a member that joined
            // with a helper's configuration logs the older ones again while it syncs.
            return Ok(false);
        }
        if txn.zxid <= self.in_force().version {
            return Err(StepError::Invariant(format!(
                "configuration {} logged after configuration {}",
                txn.zxid,
                self.in_force().version
            )));
        }
        self.logged.push(decode(txn)?);
        Ok(true)
    }

    /// Every record after `zxid` was dropped; returns true when the configuration in force
    /// changed.
    pub(crate) fn on_truncate(&mut self, zxid: Zxid) -> bool {
        let before = self.logged.len();
        self.logged.retain(|m| m.version <= zxid);
        before != self.logged.len()
    }

    /// The txn was applied; returns true when the committed configuration changed.
    pub(crate) fn on_apply(&mut self, txn: &Txn) -> bool {
        if txn.kind != TxnKind::Membership {
            return false;
        }
        match self.logged.iter().position(|m| m.version == txn.zxid) {
            Some(at) => {
                if let Some(m) = self.logged.drain(..=at).next_back() {
                    self.committed = m;
                }
                true
            }
            None => false,
        }
    }

    /// A SNAP carrying `committed` replaced the whole log (INV-3): no logged configuration
    /// stays, and the SNAP's configuration is the committed one unless this peer already knows
    /// a newer committed one (see `on_snapshot`).
    pub(crate) fn on_log_reset(&mut self, committed: Membership) {
        if committed.version >= self.committed.version {
            self.committed = committed;
        }
        self.logged.clear();
    }

    /// The SNAP at `zxid` carrying `committed` was installed: only configurations logged
    /// after the snapshot stay (the learner may log the leader's next txns before the install
    /// is reported), and the snapshot's configuration is the committed one unless this peer
    /// already knows a newer committed one (a joining member's helper gave it the
    /// configuration that added it; a SNAP from before that point must not make it forget
    /// it is a member).
    pub(crate) fn on_snapshot(&mut self, zxid: Zxid, committed: Membership) {
        if committed.version >= self.committed.version {
            self.committed = committed;
        }
        self.logged
            .retain(|m| m.version > zxid && m.version > self.committed.version);
    }

    /// `committed`, newer than ours, is a member's committed configuration (`membership`
    /// R7): it becomes ours, with only the logged configurations newer than it.
    pub(crate) fn adopt(&mut self, committed: Membership) {
        self.logged.retain(|m| m.version > committed.version);
        self.committed = committed;
    }

    /// Checks INV-1 against the applied point.
    pub(crate) fn check(&self, applied: Zxid) -> Result<(), String> {
        let mut prev = self.committed.version;
        for m in &self.logged {
            if m.version <= prev || m.version <= applied {
                return Err(format!(
                    "members INV-1: logged configuration {} is not above {prev} and the \
                     applied point {applied}",
                    m.version
                ));
            }
            prev = m.version;
        }
        Ok(())
    }
}
