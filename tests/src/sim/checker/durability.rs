//! Durability: acknowledged writes survive, and acknowledgements mean "on disk".
//!
//! INV-U1: a `WriteDone Ok(z)` answers a pending request of that node, once, with the txn the
//! client wrote, which is applied at `z` on that node.
//! INV-U2: every acknowledged txn is in the history (applied state or log) of every leader
//! established after the acknowledgement, and of every leader of a later epoch when it sends
//! NEWLEADER (Zab's initial-history property); no node's
//! TRUNC drops an acknowledged txn; every node's applied history is a prefix of one history
//! holding every acknowledged txn (`order` INV-O1, checked at every apply). So an acknowledged
//! write is missing from no committed history, at the step it would go missing.
//! INV-U3: a learner sends `Ack { z }` for a txn only when its disk holds `z` durably, and no
//! proposal ACK between receiving sync data and acking NEWLEADER (ZOOKEEPER-4685).
//! INV-U4: a learner acks NEWLEADER `<e, 0>` only once its currentEpoch file holds `e` and every
//! txn the leader committed during the sync (and the SNAP) is durable (ZOOKEEPER-4643/3911).
//! INV-U6: a node writes currentEpoch (a leader once its ACKEPOCH quorum is in, a learner on
//! NEWLEADER) only when every record it appended is durable on its disk: a currentEpoch ahead of
//! the durable log lets a power loss leave the node with the new epoch and a shorter log, and
//! win an election by epoch that TRUNCs away a committed txn (PITFALLS B3).
//! INV-U5: a learner sends ACKEPOCH only once its acceptedEpoch file holds the proposed epoch;
//! a leader sends LEADERINFO { e } only once its own acceptedEpoch file holds `e`.

use std::collections::BTreeMap;

use bytes::Bytes;
use zab_core::{Epoch, Message, RequestError, RequestId, Role, ServerId, Zxid};

use super::{NodeView, Verdict};

/// Per-learner tracking of the current discovery/sync exchange.
#[derive(Debug, Default, Clone)]
struct SyncTrack {
    leader_info: Option<Epoch>,
    in_sync: bool,
    sync_committed: Zxid,
}

/// State of the durability checker.
#[derive(Debug, Default)]
pub struct Durability {
    pending: BTreeMap<(ServerId, RequestId), Bytes>,
    acked: BTreeMap<Zxid, Bytes>,
    track: BTreeMap<ServerId, SyncTrack>,
    roles: BTreeMap<ServerId, Role>,
}

impl Durability {
    /// The highest acknowledged zxid.
    pub fn max_acked(&self) -> Zxid {
        self.acked.keys().next_back().copied().unwrap_or(Zxid::ZERO)
    }

    /// Every acknowledged write.
    pub fn acked(&self) -> &BTreeMap<Zxid, Bytes> {
        &self.acked
    }

    /// A client of `id` submits `payload`.
    pub fn on_client_write(&mut self, id: ServerId, req: RequestId, payload: &Bytes) -> Verdict {
        if self.pending.insert((id, req), payload.clone()).is_some() {
            return Err(format!("harness: request {req:?} reused on {id}"));
        }
        Ok(())
    }

    /// `node` answers a write.
    pub fn on_write_done(
        &mut self,
        node: NodeView<'_>,
        req: RequestId,
        outcome: &Result<Zxid, RequestError>,
    ) -> Verdict {
        let id = node.id;
        let Some(payload) = self.pending.remove(&(id, req)) else {
            return Err(format!(
                "node {id} answers write {req:?} that is not pending"
            ));
        };
        let Ok(z) = outcome else { return Ok(()) };
        let at = node.applied.binary_search_by_key(z, |t| t.zxid).ok();
        match at.map(|i| &node.applied[i]) {
            Some(t) if t.data == payload => {
                self.acked.insert(*z, payload);
                Ok(())
            }
            Some(t) => Err(format!(
                "node {id} acknowledges write {payload:?} at {z}, which holds {:?}",
                t.data
            )),
            None => Err(format!(
                "node {id} acknowledges write {payload:?} at {z} before applying it"
            )),
        }
    }

    /// A membership change committed at `txn.zxid` was answered: it is held like an
    /// acknowledged write from now on (`membership` INV-M2).
    pub fn on_change_committed(&mut self, txn: &zab_core::Txn) {
        self.acked.insert(txn.zxid, txn.data.clone());
    }

    /// The first acknowledged write before `before` missing from the history (applied state,
    /// durable log or pending appends) of `node`.
    fn missing_acked(&self, node: NodeView<'_>, before: Zxid) -> Option<(Zxid, &Bytes)> {
        self.acked
            .range(..before)
            .map(|(z, p)| (*z, p))
            .find(|(z, payload)| {
                let in_applied = node
                    .applied
                    .binary_search_by_key(z, |t| t.zxid)
                    .is_ok_and(|i| node.applied[i].data == **payload);
                let in_log = || {
                    node.disk
                        .log
                        .iter()
                        .chain(node.disk.pending.iter())
                        .any(|t| t.zxid == *z && t.data == **payload)
                };
                !in_applied && !in_log()
            })
    }

    /// `node` just became an established leader of `epoch` (INV-U2): it holds every write
    /// acknowledged in an older epoch. A leader of an older epoch may complete its
    /// establishment late (paused between its NEWLEADER quorum and its confirming PING round)
    /// after a later epoch acknowledged writes; it can commit nothing more, since the later
    /// epoch's quorum has left it, and those writes are not "earlier" than it.
    pub fn on_established(&mut self, node: NodeView<'_>, epoch: zab_core::Epoch) -> Verdict {
        match self.missing_acked(node, Zxid::new(epoch, 0)) {
            Some((z, payload)) => Err(format!(
                "Durability: leader {} established without acknowledged write {z} ({payload:?})",
                node.id
            )),
            None => Ok(()),
        }
    }

    /// `node` truncates its log to `to`, dropping `txn` (INV-U2).
    pub fn on_drop(&self, id: ServerId, to: Zxid, txn: &zab_core::Txn) -> Verdict {
        if self.acked.get(&txn.zxid) == Some(&txn.data) {
            return Err(format!(
                "Durability: node {id} truncates its log to {to}, dropping acknowledged write {}                  ({:?})",
                txn.zxid, txn.data
            ));
        }
        Ok(())
    }

    /// `node` writes currentEpoch `e` (INV-U6).
    pub fn on_persist_current(&self, node: NodeView<'_>, e: Epoch) -> Verdict {
        let disk = node.disk;
        if disk.log_durable() {
            return Ok(());
        }
        let role = self
            .roles
            .get(&node.id)
            .map_or("a node".to_string(), |r| format!("{r:?}"));
        Err(format!(
            "node {} ({role}) writes currentEpoch {e} while its log is not durable: {} appends \
             up to {} pending{}",
            node.id,
            disk.pending.len(),
            disk.last_appended(),
            if disk.install.is_some() {
                " behind a SNAP install"
            } else {
                ""
            }
        ))
    }

    /// `id` received `msg` from `from`.
    pub fn on_receive(&mut self, id: ServerId, _from: ServerId, msg: &Message) {
        let t = self.track.entry(id).or_default();
        match msg {
            Message::LeaderInfo { new_epoch, .. } => {
                *t = SyncTrack {
                    leader_info: Some(*new_epoch),
                    ..SyncTrack::default()
                };
            }
            Message::Diff { .. } | Message::Trunc { .. } => {
                t.in_sync = true;
            }
            Message::Snap { zxid, .. } => {
                t.in_sync = true;
                t.sync_committed = t.sync_committed.max(*zxid);
            }
            Message::Commit { zxid } if t.in_sync => {
                t.sync_committed = t.sync_committed.max(*zxid);
            }
            _ => {}
        }
    }

    /// `id` changed role.
    pub fn on_role(&mut self, id: ServerId, role: Role) {
        self.roles.insert(id, role);
        if role == Role::Looking || role == Role::Leading {
            self.track.remove(&id);
        }
    }

    /// `node` sends `msg` to `to` (checked before the send executes).
    pub fn on_send(&mut self, node: NodeView<'_>, to: ServerId, msg: &Message) -> Verdict {
        let id = node.id;
        let disk = node.disk;
        match msg {
            Message::Ack { zxid } if zxid.counter() == 0 => {
                let t = self.track.entry(id).or_default();
                if disk.current_epoch != zxid.epoch() {
                    return Err(format!(
                        "node {id} acks NEWLEADER {zxid} to {to} with currentEpoch {} on disk",
                        disk.current_epoch
                    ));
                }
                if disk.durable_upto() < t.sync_committed {
                    return Err(format!(
                        "node {id} acks NEWLEADER {zxid} to {to} with sync data durable only up \
                         to {} < {}",
                        disk.durable_upto(),
                        t.sync_committed
                    ));
                }
                t.in_sync = false;
                Ok(())
            }
            Message::Ack { zxid } => {
                if self.track.get(&id).is_some_and(|t| t.in_sync) {
                    return Err(format!(
                        "node {id} acks proposal {zxid} to {to} before acking NEWLEADER"
                    ));
                }
                if disk.durable_upto() < *zxid {
                    return Err(format!(
                        "node {id} acks {zxid} to {to} but its disk is durable only up to {}",
                        disk.durable_upto()
                    ));
                }
                Ok(())
            }
            Message::AckEpoch { .. } => {
                let t = self.track.entry(id).or_default();
                match t.leader_info {
                    Some(e) if disk.accepted_epoch >= e => Ok(()),
                    Some(e) => Err(format!(
                        "node {id} sends ACKEPOCH for {e} to {to} with acceptedEpoch {} on disk",
                        disk.accepted_epoch
                    )),
                    None => Err(format!(
                        "node {id} sends ACKEPOCH to {to} without LEADERINFO"
                    )),
                }
            }
            // a stale leader of an older epoch may still send NEWLEADER (no quorum will ack
            // it); what it must hold is every write acknowledged in an older epoch than its own
            Message::NewLeader { zxid } => match self.missing_acked(node, *zxid) {
                Some((z, payload)) => Err(format!(
                    "Durability: leader {id} sends NEWLEADER to {to} without acknowledged write \
                     {z} ({payload:?}) in its history"
                )),
                None => Ok(()),
            },
            Message::LeaderInfo { new_epoch, .. } if disk.accepted_epoch < *new_epoch => {
                Err(format!(
                    "leader {id} proposes epoch {new_epoch} to {to} with acceptedEpoch {} on disk",
                    disk.accepted_epoch
                ))
            }
            _ => Ok(()),
        }
    }

    /// `id` crashed.
    pub fn on_crash(&mut self, id: ServerId) {
        self.track.remove(&id);
        self.roles.remove(&id);
        self.pending.retain(|(n, _), _| *n != id);
    }
}
