//! PITFALLS B9: a node whose data dir needs its initial sync never acts as a voter.
//!
//! INV-1: while its disk carries the "needs initial sync" marker a node never sends
//! FOLLOWERINFO (it joins leaders with OBSERVERINFO, counted in no quorum), never reports a
//! vote that could be counted (a notification in state LOOKING, FOLLOWING or LEADING), and
//! never becomes LEADING or FOLLOWING. The marker is cleared only by `PersistInitialized`,
//! which must come after a durable sync: the node's durable history then reaches at least its
//! applied point.
//!
//! A member added as a follower (joining, `zab_core::membership` R5) is exempt: it learns as a
//! follower on an empty disk by design, and no configuration counts it until the leader
//! promotes it; so is one whose own configuration no longer lists it (removed while it
//! synced). The durability checker catches such a member counted in a quorum.
//!
//! The effect of a violation (a quorum completed with a wiped vote) is caught by the
//! durability checker (an acknowledged write lost); this one names the cause at once.

use zab_core::{Action, ElectionState, Message, Role};

use super::{NodeView, Verdict};

/// Checks one action of `node` before it runs (INV-1).
pub fn on_action(node: NodeView<'_>, action: &Action) -> Verdict {
    if !node.disk.needs_initial_sync || node.joining {
        return Ok(());
    }
    let id = node.id;
    match action {
        Action::Send {
            msg: Message::FollowerInfo { .. },
            to,
        } => Err(format!(
            "node {id} needs its initial sync but sends FOLLOWERINFO to {to} (it would be counted)"
        )),
        Action::Send {
            msg: Message::Notification(n),
            to,
        } if matches!(
            n.state,
            ElectionState::Looking | ElectionState::Following | ElectionState::Leading
        ) =>
        {
            Err(format!(
                "node {id} needs its initial sync but tells {to} a countable vote {n:?}"
            ))
        }
        Action::RoleChanged {
            role: role @ (Role::Leading | Role::Following),
            ..
        } => Err(format!(
            "node {id} needs its initial sync but becomes {role:?}"
        )),
        Action::PersistInitialized if node.disk.durable_upto() < node.last_applied() => {
            Err(format!(
                "node {id} records itself initialized with its history durable only up to {} \
                 but applied up to {}",
                node.disk.durable_upto(),
                node.last_applied()
            ))
        }
        _ => Ok(()),
    }
}
