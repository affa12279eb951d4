//! Leadership (Zab.tla Leadership1/Leadership2).
//!
//! A leader is *established* in epoch `e` once it is LEADING and serving (a quorum acked its
//! NEWLEADER) with currentEpoch `e`.
//!
//! INV-L1: at most one server establishes each epoch.
//! INV-L2: the epochs one server establishes only grow.
//! INV-L3: each server's acceptedEpoch and currentEpoch files only grow, and currentEpoch never
//! exceeds acceptedEpoch (B1/B2/B4).
//!
//! Not checked, on purpose: that epochs are established in increasing order across servers.
//! A leader of epoch 5 may receive its last NEWLEADER ack (sent by a follower before it moved
//! on) after epoch 6 was established elsewhere; it then cannot make progress, and the order
//! checkers prove it harmless.

use std::collections::{BTreeMap, BTreeSet};

use zab_core::{Epoch, Role, ServerId};

use super::PeerView;

/// State of the leadership checker.
#[derive(Debug, Default)]
pub struct Leadership {
    established: BTreeMap<Epoch, ServerId>,
    /// (sid, epoch) pairs already seen established.
    seen: BTreeSet<(ServerId, Epoch)>,
}

impl Leadership {
    /// Returns `Ok(true)` when `id` just became established.
    pub fn after_step(&mut self, id: ServerId, peer: &PeerView) -> Result<bool, String> {
        if peer.role != Role::Leading || !peer.serving {
            return Ok(false);
        }
        let epoch = peer.current_epoch;
        if !self.seen.insert((id, epoch)) {
            return Ok(false);
        }
        if let Some(other) = self.established.get(&epoch) {
            return Err(format!(
                "Leadership: epoch {epoch} established by both {other} and {id}"
            ));
        }
        let own_max = self
            .established
            .iter()
            .filter(|(_, s)| **s == id)
            .map(|(e, _)| *e)
            .max();
        if let Some(max) = own_max {
            if max > epoch {
                return Err(format!(
                    "Leadership: {id} establishes epoch {epoch} after it established {max}"
                ));
            }
        }
        self.established.insert(epoch, id);
        Ok(true)
    }

    /// `id` persists an epoch file; `disk` holds (acceptedEpoch, currentEpoch) before it.
    pub fn on_persist_epoch(
        &self,
        id: ServerId,
        accepted: bool,
        new: Epoch,
        disk: (Epoch, Epoch),
    ) -> Result<(), String> {
        let (acc, cur) = disk;
        let (name, old) = if accepted {
            ("acceptedEpoch", acc)
        } else {
            ("currentEpoch", cur)
        };
        if new < old {
            return Err(format!(
                "node {id} moves its {name} file back from {old} to {new}"
            ));
        }
        if !accepted && new > acc {
            return Err(format!(
                "node {id} persists currentEpoch {new} above its acceptedEpoch {acc}"
            ));
        }
        Ok(())
    }

    /// Established epochs and their leaders.
    pub fn established(&self) -> &BTreeMap<Epoch, ServerId> {
        &self.established
    }
}
