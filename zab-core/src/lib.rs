//! ZooKeeper's ZAB atomic broadcast as a deterministic, sans-I/O state machine.
//!
//! A [`Peer`] does no I/O, reads no clock and spawns nothing. Its driver feeds it [`Input`]s
//! (messages, ticks carrying the time, "log persisted up to Z", client requests) and carries out
//! the [`Action`]s it returns (send, persist, truncate, apply, reply). The contract between the
//! two, in particular the ordering that makes acknowledgements mean durability, is in [`io`].
//!
//! # Phases
//! ```text
//!  LOOKING ──(fast leader election)──▶ LEADING / FOLLOWING / OBSERVING
//!   leader:   wait FOLLOWERINFO quorum ─▶ LEADERINFO(e) ─▶ ACKEPOCH quorum ─▶ per-learner sync
//!             (DIFF | TRUNC | TRUNC+DIFF | DIFF from log | SNAP) ─▶ NEWLEADER ─▶ ACK quorum
//!             ─▶ commit own history ─▶ UPTODATE ─▶ broadcast
//!   learner:  FOLLOWERINFO ─▶ persist acceptedEpoch ─▶ ACKEPOCH ─▶ sync data ─▶ NEWLEADER:
//!             make sync data durable ─▶ persist currentEpoch ─▶ ACK ─▶ UPTODATE: apply, serve
//! ```
//!
//! # Invariants (named after ZooKeeper's Zab.tla; the simulation in `tests` checks them)
//! - Leadership: at most one leader establishes each epoch; established epochs only grow.
//! - PrefixConsistency / Agreement / TotalOrder: the applied sequences of any two peers are
//!   prefixes of one another.
//! - Integrity / PrimaryOrder: only proposed txns are applied; a leader's txns are applied in its
//!   proposal order; a txn of a later epoch is never applied before one of an earlier epoch
//!   that is applied anywhere.
//! - Durability: an ACK (and an ACKEPOCH / NEWLEADER ACK) is sent only after what it
//!   acknowledges is durable; a txn is committed only when a quorum acked it and every earlier
//!   zxid is committed; a client hears of success only for a committed txn.
//! - TRUNC and SNAP never remove a committed txn.
//!
//! Leader transfer (`transfer`) adds a handover from an established leader to an up-to-date
//! follower; it only hints first votes and never bypasses the rules above.

// Modules, from the outside in:
// - `peer`: the `Peer` (step / take_actions), role changes, LOOKING behaviour;
// - `election`: vote order and the fast-leader-election tally;
// - `leader`: discovery, per-learner sync, broadcast, heartbeats (one `Handler` per learner);
// - `learner`: the follower/observer side of the same phases;
// - `sync_plan`: the pure DIFF / TRUNC+DIFF / SNAP decision, property-tested;
// - `history`: the peer's view of its own log (index, in-memory window, durable point);
// - `membership`: the replicated configuration, its change rule and the quorum-overlap proof;
// - `types`, `message`, `io`, `config`, `durable`, `error`, `codec`: the vocabulary.
pub mod codec;
pub mod config;
pub mod durable;
mod election;
pub mod error;
mod history;
pub mod io;
mod leader;
mod learner;
pub mod membership;
pub mod message;
mod peer;
pub mod sync_plan;
pub mod transfer;
pub mod types;

pub use config::Config;
pub use durable::DurableState;
pub use election::vote_cmp;
pub use error::StepError;
pub use io::{Action, Input};
pub use membership::{Member, MemberRole, Membership, MembershipChange, MembershipError};
pub use message::{ElectionState, Message, Notification, RequestError, Vote, PROTOCOL_VERSION};
pub use peer::Peer;
pub use sync_plan::{DiffSource, SyncMode};
pub use transfer::{TransferError, TransferReport};
pub use types::{Epoch, LearnerType, RequestId, Role, ServerId, Txn, TxnKind, Zxid};
