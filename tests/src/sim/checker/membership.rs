//! Membership across configurations (`zab_core::membership`).
//!
//! INV-M1: a node's committed configuration (`Action::MembershipChanged::committed`) is the
//! newest of its applied history: no configuration txn it applied is newer, and when it applied
//! the txn of that version, the txn carries exactly that configuration.
//! INV-M2: a `MembershipDone` answers a change pending on that node, once; `Ok(v)` names a
//! configuration txn the node applied at `v`. From then on `v` is held like an acknowledged
//! write (`durability` INV-U2): in the history of every later leader, never truncated, never
//! lost by the liveness phase.
//! INV-M3: a node that applied a configuration without itself (removed, R6) never again
//! becomes LEADING, sends FOLLOWERINFO or ACKEPOCH, or writes an epoch file: it cannot lead,
//! be counted, or bump an epoch. Until it restarts it sends no notification either (R6: silent
//! for good). A restart whose snapshot predates the removal finds the removal only logged,
//! not applied: that node may look for a leader again (its notifications reach members whose
//! configuration in force excludes it, and which drop them), but the rest of the rule holds.
//! INV-M4: every configuration txn logged, sent or applied decodes (the order checker's
//! integrity rule for configurations, which no client writes).

use std::collections::{BTreeMap, BTreeSet};

use zab_core::{
    Action, Membership, MembershipError, Message, RequestId, Role, ServerId, Txn, TxnKind, Zxid,
};

use super::{NodeView, Verdict};

/// State of the membership checker.
#[derive(Debug, Default)]
pub struct MembershipChecker {
    pending: BTreeSet<(ServerId, RequestId)>,
    removed: BTreeMap<ServerId, Zxid>,
    silent: BTreeSet<ServerId>,
    committed_changes: BTreeMap<Zxid, ServerId>,
}

impl MembershipChecker {
    /// Nodes that applied their own removal, with the version that removed them.
    pub fn removed(&self) -> &BTreeMap<ServerId, Zxid> {
        &self.removed
    }

    /// Every `MembershipDone(Ok(v))` seen, with the node that answered it.
    pub fn committed_changes(&self) -> &BTreeMap<Zxid, ServerId> {
        &self.committed_changes
    }

    /// An operator asks `id` for a change.
    pub fn on_change(&mut self, id: ServerId, req: RequestId) -> Verdict {
        if !self.pending.insert((id, req)) {
            return Err(format!("harness: change request {req:?} reused on {id}"));
        }
        Ok(())
    }

    /// `node` answers a change (INV-M2); returns the committed txn to hold as acknowledged.
    pub fn on_done(
        &mut self,
        node: NodeView<'_>,
        req: RequestId,
        outcome: &Result<Zxid, MembershipError>,
    ) -> Result<Option<Txn>, String> {
        let id = node.id;
        if !self.pending.remove(&(id, req)) {
            return Err(format!(
                "node {id} answers membership change {req:?} that is not pending"
            ));
        }
        let Ok(v) = outcome else { return Ok(None) };
        let at = node.applied.binary_search_by_key(v, |t| t.zxid).ok();
        match at.map(|i| &node.applied[i]) {
            Some(t) if t.kind == TxnKind::Membership => {
                self.committed_changes.insert(*v, id);
                Ok(Some(t.clone()))
            }
            Some(_) => Err(format!(
                "node {id} answers membership change {req:?} with {v}, an application txn"
            )),
            None => Err(format!(
                "node {id} answers membership change {req:?} with {v} before applying it"
            )),
        }
    }

    /// `node` reports its committed configuration (INV-M1, and INV-M3's bookkeeping).
    pub fn on_committed(&mut self, node: NodeView<'_>, committed: &Membership) -> Verdict {
        let id = node.id;
        let newest_applied = node
            .applied
            .iter()
            .rev()
            .find(|t| t.kind == TxnKind::Membership);
        if let Some(t) = newest_applied {
            if t.zxid > committed.version {
                return Err(format!(
                    "node {id} reports committed configuration {} but applied configuration {}",
                    committed.version, t.zxid
                ));
            }
            if t.zxid == committed.version {
                match Membership::from_txn(t) {
                    Ok(m) if m == *committed => {}
                    other => {
                        return Err(format!(
                            "node {id} reports committed configuration {committed} but the txn \
                             it applied at {} carries {other:?}",
                            t.zxid
                        ))
                    }
                }
            }
        }
        if !committed.members.contains_key(&id) {
            self.removed.entry(id).or_insert(committed.version);
            self.silent.insert(id);
        }
        Ok(())
    }

    /// `node` asks for `action` (INV-M3).
    pub fn on_action(&self, node: NodeView<'_>, action: &Action) -> Verdict {
        let id = node.id;
        let Some(version) = self.removed.get(&id) else {
            return Ok(());
        };
        let what = match action {
            Action::Send {
                msg: Message::Notification(_),
                ..
            } if self.silent.contains(&id) => "sends a notification",
            Action::Send {
                msg: Message::FollowerInfo { .. },
                ..
            } => "sends FOLLOWERINFO",
            Action::Send {
                msg: Message::AckEpoch { .. },
                ..
            } => "sends ACKEPOCH",
            Action::PersistAcceptedEpoch(_) => "writes acceptedEpoch",
            Action::PersistCurrentEpoch(_) => "writes currentEpoch",
            Action::RoleChanged {
                role: Role::Leading,
                ..
            } => "becomes LEADING",
            _ => return Ok(()),
        };
        Err(format!(
            "node {id}, removed by configuration {version}, {what}: {action:?}"
        ))
    }

    /// `id` crashed: its pending changes will never be answered.
    pub fn on_crash(&mut self, id: ServerId) {
        self.pending.retain(|(n, _)| *n != id);
        self.silent.remove(&id);
    }
}

/// INV-M4: `txn`, of kind `Membership`, decodes.
pub fn decodes(id: ServerId, txn: &Txn, what: &str) -> Verdict {
    Membership::from_txn(txn).map(|_| ()).map_err(|e| {
        format!(
            "Integrity: node {id} {what} configuration txn {}: {e}",
            txn.zxid
        )
    })
}
