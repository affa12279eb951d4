//! A synced learner whose log is durable acks NEWLEADER promptly (liveness of the sync,
//! PITFALLS B3's other face: a learner that never acks stalls every election it is needed in).
//!
//! A learner is *synced* once it received NEWLEADER from the leader it still follows (its sync
//! data precedes NEWLEADER on the FIFO link). Its log is *durable* when its disk model holds no
//! pending append and no SNAP install still owed to the peer: by the log durability contract (L1, L2) a
//! peer that follows the contract then knows its whole log durable, whether the last report
//! was a `LogPersisted` or a completed truncate.
//!
//! INV-N1: from the first step after which a synced learner's log is durable, it sends
//! `Ack { <e, 0> }` to its leader before it has consumed more than [`ACK_BOUND_INPUTS`] further
//! inputs, unless it stops following that leader (or crashes) first.
//!
//! The bound: the core acks in the very input that completes the condition (NEWLEADER itself,
//! the `LogPersisted` or the `SnapshotInstalled` that makes the log durable), so a correct peer
//! needs none; 12 inputs leave room for a core that re-checks on its next tick or message, and
//! stay below what a learner consumes before its leader gives up on the sync (`initLimit`, 10
//! ticks, is at least 20 tick inputs), so a learner that never acks is caught while it still
//! follows.

use std::collections::BTreeMap;

use zab_core::{Message, Role, ServerId};

use super::{NodeView, PeerView, Verdict};

/// Inputs a synced learner with a durable log may consume before acking NEWLEADER (INV-N1).
pub const ACK_BOUND_INPUTS: u64 = 12;

#[derive(Clone, Copy, Debug)]
struct Synced {
    leader: ServerId,
    /// The learner's input count when its log was first seen durable while synced.
    durable_since: Option<u64>,
}

/// State of the NEWLEADER-ack checker.
#[derive(Debug, Default)]
pub struct NewLeaderAck {
    inputs: BTreeMap<ServerId, u64>,
    synced: BTreeMap<ServerId, Synced>,
}

impl NewLeaderAck {
    /// `id` is about to consume an input; `msg` when it is a message from `from`.
    pub fn on_input(&mut self, id: ServerId, msg: Option<(ServerId, &Message)>) {
        *self.inputs.entry(id).or_default() += 1;
        match msg {
            Some((leader, Message::NewLeader { .. })) => {
                self.synced.insert(
                    id,
                    Synced {
                        leader,
                        durable_since: None,
                    },
                );
            }
            Some((_, Message::LeaderInfo { .. })) => {
                self.synced.remove(&id);
            }
            _ => {}
        }
    }

    /// `id` sends `msg` to `to`.
    pub fn on_send(&mut self, id: ServerId, to: ServerId, msg: &Message) {
        if let Message::Ack { zxid } = msg {
            if zxid.counter() == 0 && self.synced.get(&id).is_some_and(|s| s.leader == to) {
                self.synced.remove(&id);
            }
        }
    }

    /// `id` crashed.
    pub fn on_crash(&mut self, id: ServerId) {
        self.synced.remove(&id);
    }

    /// After a step, for one up node (INV-N1).
    pub fn after_step(&mut self, node: NodeView<'_>, peer: &PeerView) -> Verdict {
        let id = node.id;
        let Some(s) = self.synced.get_mut(&id) else {
            return Ok(());
        };
        let learning = matches!(peer.role, Role::Following | Role::Observing);
        if !learning || peer.leader != Some(s.leader) {
            self.synced.remove(&id);
            return Ok(());
        }
        if !node.disk.log_durable() || node.disk.install.is_some() {
            s.durable_since = None;
            return Ok(());
        }
        let now = self.inputs.get(&id).copied().unwrap_or(0);
        let since = *s.durable_since.get_or_insert(now);
        if now - since > ACK_BOUND_INPUTS {
            return Err(format!(
                "node {id} got NEWLEADER from {} and its log is durable on disk (last {}), but \
                 it has not acked NEWLEADER after {} more inputs",
                s.leader,
                node.disk.last_appended(),
                now - since
            ));
        }
        Ok(())
    }
}
