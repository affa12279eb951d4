//! The peer's side of membership (`crate::membership`): whom it hears (INV-5 of `peer`), the
//! configuration it shares with and adopts from other members (R7), and its reaction when the
//! configuration moves (INV-4 of `peer`).

use crate::error::StepError;
use crate::membership::Membership;
use crate::message::Message;
use crate::types::{ServerId, Zxid};

use super::core::Next;
use super::{Peer, RoleState};

impl Peer {
    /// The configuration moved during this step (INV-4).
    pub(super) fn on_members_moved(&mut self) -> Result<(), StepError> {
        let listed = self.core.members.has(self.core.sid());
        let observer = self.learns_as_observer();
        let next = match &mut self.role {
            RoleState::Leading(l) => l.on_members_moved(&mut self.core)?,
            RoleState::Learning(l) if listed && l.observer != observer => {
                Next::Leave("learner: my role in the configuration changed")
            }
            RoleState::Learning(_) | RoleState::Looking(_) => Next::Stay,
        };
        if self.is_removed() {
            if !matches!(self.role, RoleState::Looking(_)) || next != Next::Stay {
                self.enter_looking("removed from the configuration")?;
            }
            return Ok(());
        }
        if let Next::Leave(why) = next {
            self.enter_looking(why)?;
        }
        Ok(())
    }
    /// A member's notification carried an older committed configuration than ours: tell it
    /// ours (`membership` R7). A removed peer tells nobody anything.
    pub(super) fn share_membership(&mut self, to: ServerId, their_version: Zxid) {
        let committed = self.core.members.committed();
        if their_version < committed.version && !self.is_removed() {
            let m = Message::Membership(committed.clone());
            self.core.send(to, m);
        }
    }
    /// A member told us its committed configuration. While LOOKING, a newer one than ours is
    /// adopted (R7) and the election starts over under it; in a role, the leader keeps this
    /// peer's configuration current, so the message is dropped.
    pub(super) fn on_membership(&mut self, from: ServerId, m: Membership) -> Next {
        if !matches!(self.role, RoleState::Looking(_))
            || m.version <= self.core.members.committed().version
        {
            return Next::Stay;
        }
        tracing::info!(%from, version = %m.version, "adopting a newer committed configuration");
        self.core.members.adopt(m);
        self.core.members_moved();
        Next::Leave("adopted a newer committed configuration")
    }
    /// INV-5: a peer hears members of its configuration in force or its committed one, the
    /// leader it learns from and, as a leader, its learners (a member whose removal is logged
    /// but not committed still acks: its old configuration's quorum may need it); anything
    /// else is a stranger's.
    pub(super) fn accepts_from(&self, from: ServerId) -> bool {
        let members = &self.core.members;
        from != self.core.sid()
            && (members.has(from)
                || members.committed().members.contains_key(&from)
                || match &self.role {
                    RoleState::Learning(l) => l.leader == from,
                    RoleState::Leading(l) => l.handlers.contains_key(&from),
                    RoleState::Looking(_) => false,
                })
    }
}
