//! A learner serves only after UPTODATE (DESIGN §3.4; ZOOKEEPER-1551/1552 for observers).
//!
//! INV-S1: a FOLLOWING/OBSERVING node applies txns, answers a write or answers a sync only
//! after it received UPTODATE from the leader it follows, since it last changed role or leader.
//! INV-S2: a learner reports `is_serving()` only under the same condition.

use std::collections::BTreeMap;

use zab_core::{Message, Role, ServerId};

use super::{PeerView, Verdict};

#[derive(Debug, Clone, Copy)]
struct Track {
    role: Role,
    leader: Option<ServerId>,
    uptodate_from: Option<ServerId>,
}

/// State of the serving checker.
#[derive(Debug, Default)]
pub struct Serving {
    track: BTreeMap<ServerId, Track>,
}

fn is_learner(role: Role) -> bool {
    matches!(role, Role::Following | Role::Observing)
}

impl Serving {
    /// `id` received `msg`.
    pub fn on_receive(&mut self, id: ServerId, from: ServerId, msg: &Message) {
        if let (Message::UpToDate, Some(t)) = (msg, self.track.get_mut(&id)) {
            if t.leader == Some(from) {
                t.uptodate_from = Some(from);
            }
        }
    }

    /// `id` announced a role change.
    pub fn on_role(&mut self, id: ServerId, role: Role, leader: Option<ServerId>) {
        let t = self.track.entry(id).or_insert(Track {
            role,
            leader,
            uptodate_from: None,
        });
        if t.role != role || t.leader != leader {
            *t = Track {
                role,
                leader,
                uptodate_from: None,
            };
        }
    }

    /// `id` does something only a serving node may do.
    pub fn on_serve(&self, id: ServerId, what: &str) -> Verdict {
        match self.track.get(&id) {
            Some(t) if is_learner(t.role) && t.uptodate_from.is_none() => Err(format!(
                "learner {id} ({}) emits {what} before UPTODATE from {:?}",
                t.role, t.leader
            )),
            _ => Ok(()),
        }
    }

    /// After a step.
    pub fn after_step(&self, id: ServerId, peer: &PeerView) -> Verdict {
        if !is_learner(peer.role) || !peer.serving {
            return Ok(());
        }
        match self.track.get(&id) {
            Some(t) if t.uptodate_from.is_some() && t.uptodate_from == peer.leader => Ok(()),
            _ => Err(format!(
                "learner {id} ({}) serves without UPTODATE from its leader {:?}",
                peer.role, peer.leader
            )),
        }
    }

    /// `id` crashed.
    pub fn on_crash(&mut self, id: ServerId) {
        self.track.remove(&id);
    }
}
