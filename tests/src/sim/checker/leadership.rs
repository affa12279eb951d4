//! Leadership (Zab.tla Leadership1/Leadership2).
//!
//! A leader is *established* in epoch `e` once it is LEADING and serving (a quorum acked its
//! NEWLEADER) with currentEpoch `e`.
//!
//! INV-L1: at most one server establishes each epoch.
//! INV-L2: every newly established epoch is greater than every epoch established before it.

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
        if let Some((max, by)) = self.established.iter().next_back() {
            if *max > epoch {
                return Err(format!(
                    "Leadership: {id} establishes epoch {epoch} after {by} established {max}"
                ));
            }
        }
        self.established.insert(epoch, id);
        Ok(true)
    }

    /// Established epochs and their leaders.
    pub fn established(&self) -> &BTreeMap<Epoch, ServerId> {
        &self.established
    }
}
