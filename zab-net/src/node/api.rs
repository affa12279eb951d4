//! What an embedding application implements and sees: the [`StateMachine`] it replicates, the
//! [`NodeStatus`] it can watch (with the configuration in force and the committed one), the
//! errors of [`super::Node::submit`] / [`super::Node::sync`] and of
//! [`super::Node::change_membership`], and the [`NodeOptions`] that tests and tools tune.
//!
//! INV-1: for each committed txn, in zxid order, on the node's driver task, exactly one of
//! `StateMachine::apply` (the application's operations) or `StateMachine::apply_membership`
//! (a configuration change) is called once; `snapshot` is called between two applies and must
//! only capture a view (an `Arc` clone of an immutable version), never copy or serialise the
//! state there; it captures every apply made so far, published or not. After each batch of
//! work that may have applied txns, and before the node answers any write or sync that batch
//! decided, `StateMachine::publish` is called once.
//! INV-2: an `apply` or `restore` error is fatal for the node: it stops and reports the error in
//! [`NodeStatus::fatal`]; nothing after the failed txn is applied. The node does not exit the
//! process: the embedder does (see [`NodeStatus::fatal`]).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use zab_core::{Epoch, Membership, MembershipError, RequestError, Role, ServerId, Zxid};

use crate::transport::PeerAddrs;

/// Why the state machine could not apply a txn or restore a snapshot (fatal for the node).
#[derive(Debug, Error)]
#[error("{0}")]
#[non_exhaustive]
pub struct ApplyError(pub String);

impl ApplyError {
    /// An error with a message.
    pub fn new(msg: impl Into<String>) -> ApplyError {
        ApplyError(msg.into())
    }
}

/// The application's replicated state.
pub trait StateMachine: Send + 'static {
    /// Applies the committed txn `zxid` (INV-1). An error stops the node (INV-2).
    fn apply(&mut self, zxid: Zxid, data: &[u8]) -> Result<(), ApplyError>;

    /// The committed txn `zxid` is a configuration change, not an operation of the
    /// application: `membership` is the configuration it committed (its version is `zxid`).
    /// Called instead of [`StateMachine::apply`] for such txns (INV-1); an error stops the node
    /// (INV-2).
    ///
    /// The default does nothing. An application that tracks its applied zxid (to check that
    /// applies arrive in order, or to publish how far it is) must override it and advance that
    /// zxid here too: the next operation's zxid follows this one, not the operation before it.
    fn apply_membership(&mut self, zxid: Zxid, membership: &Membership) -> Result<(), ApplyError> {
        let _ = (zxid, membership);
        Ok(())
    }

    /// Called once after each batch of applies (one or more `apply` / `apply_membership`
    /// calls, or none), before the node answers the writes and syncs that batch committed
    /// (INV-1). An application that makes its state visible to readers (and wakes those
    /// waiting for a zxid) can do it here once per batch instead of once per txn: a client
    /// that got its write's zxid then finds it published. The default does nothing.
    fn publish(&mut self) {}

    /// A consistent, immutable view of the state as of the last `apply`; must be cheap (the
    /// bytes are produced later, on another thread, by [`SnapshotSource::write_to`]).
    fn snapshot(&self) -> Box<dyn SnapshotSource>;

    /// Replaces the whole state with the snapshot at `zxid` read from `src` (what a
    /// `SnapshotSource` wrote). Called at start-up and when the leader sends a SNAP. After a
    /// failed restore the node stops (or, at start-up, may retry with an older snapshot), so a
    /// partial state is never used.
    fn restore(&mut self, zxid: Zxid, src: &mut dyn Read) -> Result<(), ApplyError>;
}

/// A captured state, serialised off the driver (background snapshots, SNAP to a learner).
pub trait SnapshotSource: Send {
    /// Streams the state to `out`; must not hold the whole serialised state in memory.
    fn write_to(self: Box<Self>, out: &mut dyn Write) -> std::io::Result<()>;
}

/// How the leader brought learners in sync, and how this node was synced (counters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SyncCounters {
    /// DIFF headers (including empty DIFFs and the DIFF that follows a TRUNC).
    pub diff: u64,
    /// TRUNC headers.
    pub trunc: u64,
    /// SNAP headers.
    pub snap: u64,
    /// Ranges streamed from the on-disk log (a DIFF from the log).
    pub diff_from_log: u64,
}

/// The node's state as seen from outside; a `tokio::sync::watch` value.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeStatus {
    /// This server.
    pub sid: ServerId,
    /// Its role.
    pub role: Role,
    /// The leader it follows or is, when known.
    pub leader: Option<ServerId>,
    /// The epoch being led or followed.
    pub epoch: Epoch,
    /// The last txn applied to the state machine.
    pub last_applied: Zxid,
    /// The last txn appended to the log (durable or not).
    pub last_logged: Zxid,
    /// The last txn this node knows committed (it may not have applied it yet).
    pub last_committed: Zxid,
    /// The durable `acceptedEpoch`: the last epoch this node promised in ACKEPOCH.
    pub accepted_epoch: Epoch,
    /// The durable `currentEpoch`: the epoch of the last NEWLEADER it accepted; elections
    /// order votes by (currentEpoch, last logged zxid).
    pub current_epoch: Epoch,
    /// True when it serves clients (established leader, or learner after UPTODATE).
    pub serving: bool,
    /// `Some(zxid)` from the node's start until it first serves: its state machine holds the
    /// newest local snapshot (at `zxid`) and the txns logged after it are applied only once a
    /// leader confirms them (zab-core io, "After a restart"). Reads of the state machine in this
    /// window may be older than what the node served before it stopped; an embedder that answers
    /// reads should refuse them, or say how old they are, until this is `None`.
    pub restored_snapshot: Option<Zxid>,
    /// False while the data dir needs its first sync from a leader: the node does not vote
    /// and is counted in no quorum until then (PITFALLS B9; [`NodeOptions::bootstrap`]).
    pub initialized: bool,
    /// What the leader sent learners while this node led (the `zab_syncs_total` metric).
    pub syncs_sent: SyncCounters,
    /// What this node received as a learner (the `zab_syncs_total` metric).
    pub syncs_received: SyncCounters,
    /// Background snapshots written (the `zab_snapshots_taken_total` metric).
    pub snapshots_taken: u64,
    /// The configuration in force: the newest in this node's log, committed or not (zab-core
    /// `membership` R1); quorums and elections use it. Shared: a status is cloned by every
    /// reader, the configuration changes rarely.
    pub membership: Arc<Membership>,
    /// The newest committed configuration this node applied; its `version` is the zxid that
    /// committed it (0: the bootstrap configuration of zoo.cfg). A member with the role
    /// `Joining` was added as a follower and is not synced yet.
    pub committed_membership: Arc<Membership>,
    /// True once the committed configuration does not list this node: it was removed from the
    /// cluster and stays silent for good (no vote, no election, nothing served). An application
    /// should stop it and exit; its data dir cannot rejoin (a new start is refused): wipe it and
    /// add the server again.
    pub removed: bool,
    /// The fatal error that stopped the node, if any: the txn log failed (disk full, an
    /// fsync error; zab-store's message names the file), an epoch file was not written, a
    /// SNAP was not installed, the state machine failed to apply, or the core refused an
    /// input. The node then applies nothing more and its state machine is frozen while the
    /// cluster moves on: an embedding process should stop serving from it at once and exit
    /// with a non-zero status, so that a supervisor restarts it once the cause is fixed (it
    /// then rejoins and catches up), as `fe-meta server` does (exit status 4).
    pub fatal: Option<String>,
    /// True once the driver has stopped (shutdown or fatal error).
    pub stopped: bool,
}

/// The part of [`NodeStatus`] that changes only with elections, the initial sync and the
/// node's stop: a separate watch ([`super::Node::watch_role`]) for tasks that must react to
/// those changes but not wake up for every committed write.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RoleStatus {
    /// Its role.
    pub role: Role,
    /// The leader it follows or is, when known.
    pub leader: Option<ServerId>,
    /// The epoch being led or followed.
    pub epoch: Epoch,
    /// True when it serves clients.
    pub serving: bool,
    /// The fatal error that stopped the node, if any.
    pub fatal: Option<String>,
    /// True once the driver has stopped.
    pub stopped: bool,
}

impl NodeStatus {
    /// Its [`RoleStatus`] part.
    pub fn role_status(&self) -> RoleStatus {
        RoleStatus {
            role: self.role,
            leader: self.leader,
            epoch: self.epoch,
            serving: self.serving,
            fatal: self.fatal.clone(),
            stopped: self.stopped,
        }
    }

    pub(crate) fn new(sid: ServerId, membership: Membership, committed: Membership) -> NodeStatus {
        NodeStatus {
            sid,
            role: Role::Looking,
            leader: None,
            epoch: Epoch(0),
            last_applied: Zxid::ZERO,
            last_logged: Zxid::ZERO,
            last_committed: Zxid::ZERO,
            accepted_epoch: Epoch(0),
            current_epoch: Epoch(0),
            serving: false,
            restored_snapshot: None,
            initialized: true,
            syncs_sent: SyncCounters::default(),
            syncs_received: SyncCounters::default(),
            snapshots_taken: 0,
            removed: !committed.members.contains_key(&sid),
            membership: Arc::new(membership),
            committed_membership: Arc::new(committed),
            fatal: None,
            stopped: false,
        }
    }
}

/// Why a `submit` or `sync` did not succeed.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubmitError {
    /// This node knows a leader but could not reach it (retry there, or later).
    #[error("not the leader; the leader is server {leader}")]
    NotLeader {
        /// The leader this node believes in.
        leader: ServerId,
    },
    /// No leader is established (election under way, or no quorum): failed fast.
    #[error("no leader: an election is under way or no quorum is reachable")]
    NoLeader,
    /// The leader lost its quorum before the write committed; it may still commit later.
    #[error("the leader lost its quorum; the write may or may not commit later")]
    QuorumLost,
    /// The epoch's zxid counter is exhausted; a new election is under way (retry).
    #[error("the epoch's zxid counter is exhausted; a new election is under way")]
    EpochExhausted,
    /// The payload is larger than a txn may be.
    #[error("payload of {len} bytes exceeds the limit of {max}")]
    TooLarge {
        /// The payload's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// No answer within the request timeout; the write may or may not commit.
    #[error("no answer within {0:?}; the outcome is unknown")]
    Timeout(Duration),
    /// The node is shutting down or stopped.
    #[error("the node is stopped")]
    Shutdown,
    /// The node stopped on a fatal error.
    #[error("the node stopped on a fatal error: {0}")]
    Fatal(String),
}

impl From<RequestError> for SubmitError {
    fn from(e: RequestError) -> SubmitError {
        match e {
            RequestError::NotLeader { leader: Some(l) } => SubmitError::NotLeader { leader: l },
            RequestError::NotLeader { leader: None } => SubmitError::NoLeader,
            RequestError::QuorumLost => SubmitError::QuorumLost,
            RequestError::EpochExhausted => SubmitError::EpochExhausted,
        }
    }
}

/// Why a membership change ([`super::Node::change_membership`]) did not succeed.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeError {
    /// Only the leader changes the membership: send the change to server `leader` (an
    /// application forwards it there, as it forwards its other requests).
    #[error("not the leader; send the membership change to the leader, server {leader}")]
    NotLeader {
        /// The leader this node believes in.
        leader: ServerId,
    },
    /// No leader is established (election under way, or no quorum): failed fast.
    #[error("no leader: an election is under way or no quorum is reachable")]
    NoLeader,
    /// Another change is proposed and not committed yet: one change at a time (retry).
    #[error("another membership change (version {0}) is not committed yet; retry when it is")]
    ChangeInFlight(Zxid),
    /// The change does not fit the current configuration (the text says why).
    #[error("membership change refused: {0}")]
    Invalid(String),
    /// The leader lost its quorum before the change committed; it may still commit.
    #[error("the leader lost its quorum; the change may or may not commit")]
    QuorumLost,
    /// The epoch's zxid counter is exhausted; a new election is under way (retry).
    #[error("the epoch's zxid counter is exhausted; a new election is under way")]
    EpochExhausted,
    /// No answer within the request timeout; the change may or may not commit.
    #[error("no answer within {0:?}; the outcome is unknown")]
    Timeout(Duration),
    /// The node is shutting down or stopped.
    #[error("the node is stopped")]
    Shutdown,
    /// The node stopped on a fatal error.
    #[error("the node stopped on a fatal error: {0}")]
    Fatal(String),
}

impl From<MembershipError> for NodeError {
    fn from(e: MembershipError) -> NodeError {
        match e {
            MembershipError::NotLeader { leader: Some(l) } => NodeError::NotLeader { leader: l },
            MembershipError::NotLeader { leader: None } => NodeError::NoLeader,
            MembershipError::ChangeInFlight(v) => NodeError::ChangeInFlight(v),
            MembershipError::Invalid(why) => NodeError::Invalid(why),
            MembershipError::QuorumLost => NodeError::QuorumLost,
            MembershipError::EpochExhausted => NodeError::EpochExhausted,
        }
    }
}

/// Knobs beyond zoo.cfg, for tests and tools. `Default` is production behaviour.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct NodeOptions {
    /// Listen here instead of on the node's `server.N` ports (port 0: chosen by the OS; see
    /// [`super::Node::local_addrs`]).
    pub listen: Option<PeerAddrs>,
    /// Reach these peers here instead of at their `server.N` addresses.
    pub peer_addrs: BTreeMap<ServerId, PeerAddrs>,
    /// How long `submit` and `sync` wait for an answer.
    pub request_timeout: Duration,
    /// Bytes per `SnapChunk` when streaming a SNAP.
    pub snap_chunk_bytes: usize,
    /// Take background snapshots exactly every `snapCount` txns or `snapSizeLimitInKb` of log
    /// (no per-node randomisation).
    pub exact_snap_count: bool,
    /// Overrides the core's in-memory DIFF window (`committed_log_window`).
    pub committed_log_window: Option<usize>,
    /// Overrides the core's limit of a DIFF from the on-disk log (`diff_from_log_limit`).
    pub diff_from_log_limit: Option<u64>,
    /// Overrides the transport's per-link outbox capacity, in messages (default 4096). It must
    /// hold a DIFF of the committed-log window, 2 × `committed_log_window` + 16 messages, or
    /// the start is refused ([`NetError::OutboxTooSmall`](crate::NetError::OutboxTooSmall)).
    /// (A learner's sync itself waits for room in the outbox, whatever its length.)
    pub outbox_len: Option<usize>,
    /// A stream (SNAP, DIFF from log) to a peer that makes no progress this long is abandoned
    /// and the peer disconnected.
    pub stream_stall_timeout: Duration,
    /// What an EMPTY data dir means. `true`: this node is a member of a brand-new cluster and
    /// starts initialized at zxid 0, voting at once. `false` (the default): the dir was wiped
    /// or never synced, so the node joins a leader as a non-voting learner and votes only
    /// after its first complete sync (PITFALLS B9). Ignored when the data dir holds data.
    pub bootstrap: bool,
    /// The cluster's committed configuration, learned from one of its members, for a node
    /// that joins an existing cluster with an empty data dir (it was added first, with
    /// [`super::Node::add_member`] on a member). Used only when the data dir holds no snapshot
    /// with a configuration: it is then made durable at once (the file `joinConfiguration` in
    /// the data dir, until a snapshot carries a configuration), so a restart before the first
    /// sync still knows the cluster, and the node starts as a non-voting learner that syncs
    /// from the leader (it votes once it is synced and promoted). A configuration that does
    /// not list this server is refused (`NetError::Core(StepError::NotAMember)`): add it on a
    /// member first. [`NodeOptions::bootstrap`] is ignored with it.
    pub join_membership: Option<Membership>,
    /// The registry the node's metrics (`zab_*`) are registered in, so an embedder serves
    /// them with its own; `None`: a registry of the node's own ([`super::Node::metrics_registry`]).
    pub metrics_registry: Option<prometheus::Registry>,
}

impl Default for NodeOptions {
    fn default() -> NodeOptions {
        NodeOptions {
            listen: None,
            peer_addrs: BTreeMap::new(),
            request_timeout: Duration::from_secs(30),
            snap_chunk_bytes: 512 * 1024,
            exact_snap_count: false,
            committed_log_window: None,
            diff_from_log_limit: None,
            outbox_len: None,
            stream_stall_timeout: Duration::from_secs(30),
            bootstrap: false,
            join_membership: None,
            metrics_registry: None,
        }
    }
}
