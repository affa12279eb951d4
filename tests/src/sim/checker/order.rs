//! Order properties over the applied (delivered) sequences (Zab.tla PrefixConsistency,
//! Agreement, TotalOrder, Integrity, LocalPrimaryOrder/GlobalPrimaryOrder).
//!
//! The checker keeps `global`, the longest applied sequence seen on any node, ever.
//!
//! INV-O1 (PrefixConsistency / Agreement / TotalOrder): every node's applied sequence is, at
//! every moment, a prefix of `global` — across restarts and SNAP installs too, so a node never
//! applies something different at a position it applied before.
//! INV-O2 (PrimaryOrder): each node applies in strictly increasing zxid order, so `global` is
//! strictly increasing; it is also gap-free within an epoch (PITFALLS D1: commits in zxid
//! order): a txn of the same epoch as its predecessor has the next counter, and the first txn
//! of an epoch has counter 1 (a leader proposes its epoch's counters from 1 and commits them in
//! order, so no committed history can skip one).
//! INV-O3 (Integrity): only client-written payloads are logged or applied (and configurations
//! that decode, `membership` INV-M4); one zxid names one payload and kind everywhere (logs,
//! proposals, applies); a client payload is applied at most at one zxid (a configuration may
//! recur: adding and removing a server restores the one before).
//! INV-O4: a SNAP never moves a node's state machine backwards.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use zab_core::{ServerId, Txn, TxnKind, Zxid};

use super::Verdict;

/// State of the order checker.
#[derive(Debug, Default)]
pub struct Order {
    global: Vec<Txn>,
    zxid_payload: BTreeMap<Zxid, (TxnKind, Bytes)>,
    payload_applied_at: BTreeMap<Bytes, Zxid>,
    written: BTreeSet<Bytes>,
}

impl Order {
    /// The longest applied sequence seen anywhere.
    pub fn global(&self) -> &[Txn] {
        &self.global
    }

    /// True when `txn` is in the applied history (so it is committed).
    pub fn is_applied_somewhere(&self, txn: &Txn) -> bool {
        self.global
            .binary_search_by_key(&txn.zxid, |t| t.zxid)
            .is_ok_and(|i| self.global[i] == *txn)
    }

    /// A client submitted `payload`.
    pub fn on_client_write(&mut self, payload: &Bytes) {
        self.written.insert(payload.clone());
    }

    fn integrity(&mut self, id: ServerId, txn: &Txn, what: &str) -> Verdict {
        match txn.kind {
            TxnKind::Membership => super::membership::decodes(id, txn, what)?,
            TxnKind::App if !self.written.contains(&txn.data) => {
                return Err(format!(
                    "Integrity: node {id} {what} {} with payload {:?} no client wrote",
                    txn.zxid, txn.data
                ));
            }
            TxnKind::App => {}
        }
        match self.zxid_payload.get(&txn.zxid) {
            Some((kind, p)) if *p != txn.data || *kind != txn.kind => Err(format!(
                "Integrity: node {id} {what} zxid {} with {:?} payload {:?}, elsewhere it is \
                 {kind:?} {p:?}",
                txn.zxid, txn.kind, txn.data
            )),
            Some(_) => Ok(()),
            None => {
                self.zxid_payload
                    .insert(txn.zxid, (txn.kind, txn.data.clone()));
                Ok(())
            }
        }
    }

    /// `id` logs or sends `txn`.
    pub fn on_logged(&mut self, id: ServerId, txn: &Txn) -> Verdict {
        self.integrity(id, txn, "logs/sends")
    }

    /// `id`, whose state machine holds `applied`, applies `txn`.
    pub fn on_apply(&mut self, id: ServerId, applied: &[Txn], txn: &Txn) -> Verdict {
        self.integrity(id, txn, "applies")?;
        if let Some(last) = applied.last() {
            if txn.zxid <= last.zxid {
                return Err(format!(
                    "PrimaryOrder: node {id} applies {} after {}",
                    txn.zxid, last.zxid
                ));
            }
        }
        match self.payload_applied_at.get(&txn.data) {
            Some(z) if *z != txn.zxid && txn.kind == TxnKind::App => {
                return Err(format!(
                    "Integrity: node {id} applies payload {:?} at {}, it was applied at {z}",
                    txn.data, txn.zxid
                ))
            }
            _ => {}
        }
        if txn.kind == TxnKind::App {
            self.payload_applied_at.insert(txn.data.clone(), txn.zxid);
        }
        self.extend(id, applied.len(), txn)
    }

    fn extend(&mut self, id: ServerId, pos: usize, txn: &Txn) -> Verdict {
        match self.global.get(pos) {
            Some(g) if g == txn => Ok(()),
            Some(g) => Err(format!(
                "PrefixConsistency: node {id} applies {} ({:?}) at position {pos}, where {} ({:?}) \
                 was applied before",
                txn.zxid, txn.data, g.zxid, g.data
            )),
            None if pos == self.global.len() => {
                if let Some(last) = self.global.last() {
                    if txn.zxid <= last.zxid {
                        return Err(format!(
                            "TotalOrder: node {id} extends the history with {} after {}",
                            txn.zxid, last.zxid
                        ));
                    }
                }
                let prev = self.global.last().map(|t| t.zxid);
                let expected = match prev {
                    Some(p) if p.epoch() == txn.zxid.epoch() => p.counter() + 1,
                    _ => 1,
                };
                if txn.zxid.counter() != expected {
                    return Err(format!(
                        "PrimaryOrder: node {id} extends the history with {} after {:?}: a gap \
                         within the epoch (expected counter {expected})",
                        txn.zxid, prev
                    ));
                }
                self.global.push(txn.clone());
                Ok(())
            }
            None => Err(format!(
                "internal: node {id} applies at {pos} beyond the history"
            )),
        }
    }

    /// The state machine of `id` was replaced by `new` (restart or SNAP install).
    pub fn on_state_loaded(
        &mut self,
        id: ServerId,
        old: &[Txn],
        new: &[Txn],
        snap: bool,
    ) -> Verdict {
        if snap && new.len() < old.len() {
            return Err(format!(
                "SNAP moves node {id} backwards: it had applied {} txns, the snapshot holds {}",
                old.len(),
                new.len()
            ));
        }
        for (pos, txn) in new.iter().enumerate() {
            self.integrity(id, txn, "loads")?;
            self.extend(id, pos, txn)?;
        }
        Ok(())
    }
}
