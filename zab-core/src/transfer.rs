//! Leader transfer: the leader hands its role to an up-to-date follower.
//!
//! # Protocol
//! 1. `Input::TransferLeadership { target }` reaches the leader. It picks the target (the one
//!    given, else the voting follower in sync with the highest acked zxid) or refuses with a
//!    [`TransferError`] at once (T1).
//! 2. From then on the leader proposes nothing new: writes and membership changes are refused
//!    with `NotLeader { leader: Some(target) }` (a definite "not done", so clients may retry
//!    elsewhere). Proposals already in flight still commit.
//! 3. Once every proposal is committed and the target acked the last one, the leader sends
//!    every learner `Message::Transfer { nominee }` (the target's vote: its sid, the leader's
//!    last zxid and the epoch) on the election channel and goes LOOKING with the nominee as its
//!    first vote. If that does not happen within syncLimit, the leader keeps leading and
//!    reports [`TransferError::Timeout`].
//! 4. A learner that gets the notice from its leader (or while LOOKING) goes LOOKING with the
//!    nominee as its first vote; the target goes LOOKING voting for itself.
//! 5. The old leader reports the outcome once it serves again: `Ok` if it follows the target,
//!    [`TransferError::NotElected`] if another server (itself included) was elected, or if no
//!    leader served within initLimit after the handover.
//!
//! # Invariants
//! - T1: a refusal changes nothing: no state, no message.
//! - T2 (safety): the nominee hint only replaces a peer's *first* vote of a LOOKING period, and
//!   only when the nominee's `(epoch, zxid)` is at or above the peer's own; every later vote
//!   change follows the normal vote order, so a better history still wins, and discovery still
//!   makes a leader abdicate to a follower with a later history. The hint can speed the
//!   election up, never elect a server that is behind a quorum.
//! - T3 (speed): a peer whose current vote is the nominee's, and that holds the nominee's own
//!   vote for itself with a quorum behind it, decides at once instead of after the finalize
//!   wait (the nominee was chosen because it is up to date); without the nominee's own vote it
//!   does not decide for the nominee while the hint lasts (a crashed nominee is not followed).
//! - T4 (bounded): a hint lasts one tick (at least two finalize waits); when it expires the
//!   peer starts a new round voting for itself, so a nominee that crashed costs about a tick
//!   more than an ordinary election.
//! - T5: exactly one `Action::TransferDone` answers every `Input::TransferLeadership`.

use crate::message::Vote;
use crate::types::{Epoch, ServerId, Zxid};

/// A successful transfer, reported by the old leader once it serves under the new one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransferReport {
    /// The old leader (this server).
    pub from: ServerId,
    /// The new leader.
    pub to: ServerId,
    /// The epoch the new leader established.
    pub epoch: Epoch,
}

/// Why a leader transfer was refused or failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransferError {
    /// This server is not an established leader.
    #[error("this server is not the leader (leader: {}); send the request to the leader",
        leader.map_or("unknown".to_string(), |l| l.to_string()))]
    NotLeader {
        /// The leader this server believes in, if any.
        leader: Option<ServerId>,
    },
    /// The target already leads.
    #[error("server {0} is already the leader")]
    AlreadyLeader(ServerId),
    /// The target is not a member of the configuration in force.
    #[error("server {0} is not a member of the cluster")]
    UnknownTarget(ServerId),
    /// The target does not vote (an observer, or a member still joining).
    #[error("server {0} is not a voting member (an observer or a joining member cannot lead)")]
    NotAVoter(ServerId),
    /// The target is not connected and in sync with the leader.
    #[error("server {0} is not connected to the leader and in sync; check that it runs")]
    TargetNotConnected(ServerId),
    /// No voting follower is connected and in sync.
    #[error("no voting follower is connected and in sync to take over")]
    NoCandidate,
    /// A transfer is already under way.
    #[error("a leader transfer is already under way")]
    InProgress,
    /// A membership change is not committed yet.
    #[error("a membership change (version {0}) is not committed yet; retry when it is")]
    ChangeInFlight(Zxid),
    /// The target did not catch up within syncLimit; the leader kept leading.
    #[error("server {target} did not catch up within syncLimit; this server keeps leading")]
    Timeout {
        /// The target.
        target: ServerId,
    },
    /// This server stopped leading (lost its quorum) before it could hand over.
    #[error("this server stopped leading before it could hand over to server {target}")]
    LeadershipLost {
        /// The target.
        target: ServerId,
    },
    /// The handover happened but the target was not elected (it failed, or another server
    /// with a later history won).
    #[error("handed over to server {target}, but {}",
        leader.map_or("no leader served within initLimit".to_string(),
            |l| format!("server {l} was elected instead")))]
    NotElected {
        /// The intended target.
        target: ServerId,
        /// The leader actually elected, if one serves.
        leader: Option<ServerId>,
    },
}

/// The nominee hint of a LOOKING peer (T2, T4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hint {
    /// The nominee's vote.
    pub(crate) vote: Vote,
    /// When the hint expires.
    pub(crate) until_ms: u64,
}

/// The old leader's wait for the outcome after its handover (step 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Watch {
    /// The intended target.
    pub(crate) target: ServerId,
    /// When to give up and report `NotElected { leader: None }`.
    pub(crate) until_ms: u64,
}
