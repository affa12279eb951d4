//! Every message peers exchange: fast leader election on the election channel, and the quorum
//! protocol (discovery, sync, broadcast, heartbeats, forwarded requests) on the quorum channel.
//!
//! The sender is never inside a message: the transport authenticates it at the handshake and
//! hands it to the peer with the message (`Input::Message { from, .. }`).
//!
//! | ours            | ZooKeeper packet      | Zab paper / Zab.tla |
//! |-----------------|-----------------------|---------------------|
//! | `Notification`  | FLE notification      | (phase 0)           |
//! | `Membership`    | (config in FLE notification) | —            |
//! | `FollowerInfo`  | FOLLOWERINFO          | CEPOCH              |
//! | `ObserverInfo`  | OBSERVERINFO          | CEPOCH (non-voting) |
//! | `LeaderInfo`    | LEADERINFO            | NEWEPOCH            |
//! | `AckEpoch`      | ACKEPOCH              | ACK-E               |
//! | `Diff` `Trunc` `Snap`+`SnapChunk` | DIFF, TRUNC, SNAP | (sync of history) |
//! | `NewLeader`     | NEWLEADER             | NEWLEADER           |
//! | `Ack`           | ACK                   | ACK-LD / ACK        |
//! | `UpToDate`      | UPTODATE              | COMMIT-LD           |
//! | `Proposal`      | PROPOSAL              | PROPOSE             |
//! | `Commit`        | COMMIT                | COMMIT              |
//! | `Inform`        | INFORM                | (observers)         |
//! | `Ping`/`PingAck`| PING                  | (heartbeat)         |
//! | `Request` / `RequestDone` | REQUEST     | (forwarded write)   |
//! | `Sync` / `SyncReply` | SYNC / sync reply | (linearizable read) |
//! | `Transfer`      | —                     | (leader transfer, `crate::transfer`) |
//!
//! INV: every quorum-channel message that a deposed leader could still have in flight is scoped
//! by the TCP connection it came on; the peer drops anything that arrives from a sid that is not
//! its current leader (or, on a leader, not a learner of its current epoch).

use bytes::Bytes;

use crate::membership::Membership;
use crate::types::{Epoch, RequestId, ServerId, Txn, Zxid};

/// The protocol version carried by FOLLOWERINFO/OBSERVERINFO and LEADERINFO.
pub const PROTOCOL_VERSION: u32 = 1;

/// The state a peer reports in an election notification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ElectionState {
    /// Still electing.
    Looking,
    /// Following the leader named in the vote.
    Following,
    /// Leading; the vote names itself.
    Leading,
    /// An observer; its vote never counts.
    Observing,
    /// LOOKING, but its data dir needs an initial sync (PITFALLS B9): it looks for a leader to
    /// sync from as a non-voting learner; its vote never counts and it is never elected.
    Uninitialized,
}

/// A vote: the candidate and the history it would lead with. Votes order by
/// `(peer_epoch, zxid, leader)` (ZooKeeper's `totalOrderPredicate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Vote {
    /// The proposed leader.
    pub leader: ServerId,
    /// The proposed leader's last logged zxid.
    pub zxid: Zxid,
    /// The proposed leader's currentEpoch.
    pub peer_epoch: Epoch,
}

/// A fast-leader-election notification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Notification {
    /// The sender's current vote.
    pub vote: Vote,
    /// The sender's election round (ZooKeeper's electionEpoch / logical clock).
    pub round: u64,
    /// The sender's state.
    pub state: ElectionState,
    /// The version of the sender's committed configuration: a receiver that knows a newer
    /// one answers with `Message::Membership` (`crate::membership` R7).
    pub config_version: Zxid,
}

/// Why a forwarded or local write did not commit.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RequestError {
    /// This server is not the leader and knows no leader to forward to.
    NotLeader {
        /// The leader this server believes in, if any.
        leader: Option<ServerId>,
    },
    /// The leader lost its quorum (or stepped down) before the write committed; the write may
    /// or may not commit later under a new leader.
    QuorumLost,
    /// The zxid counter of this epoch is exhausted; a new election is under way.
    EpochExhausted,
}

/// Every message of the protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// Fast leader election.
    Notification(Notification),
    /// Follower → leader: first message after connecting (CEPOCH).
    FollowerInfo {
        /// The learner's acceptedEpoch.
        accepted_epoch: Epoch,
        /// The learner's protocol version.
        protocol_version: u32,
    },
    /// Observer → leader: like `FollowerInfo`, from a non-voting learner.
    ObserverInfo {
        /// The learner's acceptedEpoch.
        accepted_epoch: Epoch,
        /// The learner's protocol version.
        protocol_version: u32,
    },
    /// Leader → learner: the epoch it proposes (NEWEPOCH).
    LeaderInfo {
        /// The new epoch.
        new_epoch: Epoch,
        /// The leader's protocol version.
        protocol_version: u32,
    },
    /// Learner → leader: the new epoch is accepted (and durable); here is my history's tip.
    AckEpoch {
        /// The learner's currentEpoch.
        current_epoch: Epoch,
        /// The learner's last logged zxid (from disk, never from memory).
        last_zxid: Zxid,
    },
    /// A member's committed configuration, sent on the election channel to a peer whose
    /// notification carried an older version (`crate::membership` R7).
    Membership(Membership),
    /// Leader → learner: the following proposals/commits bring you from your last zxid up to
    /// `last_zxid` (an empty DIFF when nothing follows).
    Diff {
        /// The zxid the learner will be at when the DIFF's txns are in.
        last_zxid: Zxid,
    },
    /// Leader → learner: drop every logged txn after `zxid`.
    Trunc {
        /// The last zxid to keep.
        zxid: Zxid,
    },
    /// Leader → learner: a snapshot at `zxid` follows as `SnapChunk`s.
    Snap {
        /// The zxid the snapshot's state is at.
        zxid: Zxid,
        /// The committed configuration at `zxid`, which the learner's snapshot carries.
        membership: Membership,
    },
    /// One chunk of a SNAP stream; `last` ends it.
    SnapChunk {
        /// Raw snapshot bytes.
        data: Bytes,
        /// True on the final chunk.
        last: bool,
    },
    /// Leader → learner: end of sync data; ack once it is durable.
    NewLeader {
        /// `Zxid::new(new_epoch, 0)`.
        zxid: Zxid,
    },
    /// Leader → learner: the new leader's history is committed; start serving.
    UpToDate,
    /// Leader → follower: log this txn.
    Proposal(Txn),
    /// Follower → leader: everything up to `zxid` is durable (also acks NEWLEADER, with its
    /// zxid).
    Ack {
        /// The acknowledged zxid.
        zxid: Zxid,
    },
    /// Leader → follower: `zxid` (and everything before it) is committed.
    Commit {
        /// The committed zxid.
        zxid: Zxid,
    },
    /// Leader → observer: a committed txn.
    Inform(Txn),
    /// Leader → learner heartbeat.
    Ping {
        /// Heartbeat round, echoed by `PingAck`; it also serves the quorum round of `sync`.
        round: u64,
    },
    /// Learner → leader heartbeat answer.
    PingAck {
        /// The round being answered.
        round: u64,
    },
    /// Learner → leader: a client write to propose.
    Request {
        /// The id the learner will match the answer with.
        request_id: RequestId,
        /// The state machine operation.
        payload: Bytes,
    },
    /// Leader → learner: outcome of a forwarded `Request`. On success, sent after the `Commit`
    /// of `zxid` on the same channel.
    RequestDone {
        /// The learner's request id.
        request_id: RequestId,
        /// The committed zxid, or why it failed.
        outcome: Result<Zxid, RequestError>,
    },
    /// Learner → leader: a client wants a linearizable read.
    Sync {
        /// The id the learner will match the answer with.
        request_id: RequestId,
    },
    /// Leader → learner: after a quorum confirmed the leadership, the commit point a read must
    /// wait for. Sent after the `Commit`s up to `zxid` on the same channel.
    SyncReply {
        /// The learner's request id.
        request_id: RequestId,
        /// The commit point, or why it failed.
        outcome: Result<Zxid, RequestError>,
    },
    /// Leader → learner, on the election channel: the leader hands over; go LOOKING and vote
    /// for `nominee` first (`crate::transfer`). The nominee itself votes for itself.
    Transfer {
        /// The nominee's vote: its sid, the leader's last zxid, the epoch.
        nominee: Vote,
    },
}
