//! The peer's whole interface: the inputs a driver feeds it and the actions it asks for.
//!
//! # Contract with the driver
//! The driver executes the actions of one `take_actions()` batch **in order**:
//! - `PersistAcceptedEpoch`, `PersistCurrentEpoch`, `PersistInitialized` and `TruncateLog`
//!   are durable (written, fsynced, renamed, directory fsynced) before any later action of the
//!   batch runs. A driver that cannot make them durable must stop the peer: continuing would
//!   break INV-durability.
//! - `AppendLog` is asynchronous: the txn joins the group-commit queue behind every earlier
//!   append/truncate, and the driver later feeds `Input::LogPersisted { upto }`. Appends,
//!   truncations and log resets reach the disk in the order they were issued.
//! - `Send`s to one peer leave in order (FIFO per link), and after anything `SendLogRange` or
//!   `SendSnapshot` queued for that peer earlier.
//! - `Apply` actions reach the state machine in order; `SendSnapshot { zxid }` captures the
//!   state machine exactly after every earlier `Apply` and before any later one (`zxid` is the
//!   last applied zxid).
//! - A SNAP received from the leader arrives as `BeginSnapshot`, `SnapshotChunk`s and
//!   `EndSnapshot`; after `EndSnapshot` the driver makes the snapshot durable, loads it into the
//!   state machine, resets the log so it holds no record (new appends follow the snapshot) and
//!   feeds `Input::SnapshotInstalled`. If the stream is abandoned (`AbortSnapshot`, or the peer
//!   restarts) the old state and files stay as they were. A learner whose state machine is
//!   already at or past the SNAP's zxid does not install it: it emits no `BeginSnapshot`, drops
//!   the chunks itself, and truncates its log to its applied point instead.
//! - An `Apply` of a `TxnKind::Membership` txn is not the application's: the configuration it
//!   carries is reported by the `MembershipChanged` just before it. A background snapshot
//!   carries the committed configuration of the last `MembershipChanged` before it;
//!   `SendSnapshot` and `BeginSnapshot` name theirs, and `SnapshotInstalled` hands the
//!   received snapshot's configuration back.
//! - `LogPurged { first_zxid }` is fed only for segments a local snapshot covers (applied
//!   txns); from then on the peer never asks `SendLogRange` for anything below `first_zxid`.
//!
//! # Log durability contract
//! What the store and the driver report about the txn log, and what the peer concludes. The
//! real store (`zab_store::LogWriter`, mapped to inputs by `LogEvent::input`) and the
//! simulation's disk are both held to it by one conformance test (`tests/tests/log_conformance.rs`).
//! - L1: `LogPersisted { upto }` means every record appended up to `upto`, and not removed
//!   since, is durable. Between two truncations the reports name ascending zxids.
//! - L2: a completed `TruncateLog { zxid }` leaves the log holding exactly the appended records
//!   `<= zxid`, **all durable** (appends issued before it are synced first), and every record
//!   above `zxid` durably gone. The peer counts its whole kept log durable from then on, so a
//!   learner whose TRUNC cut into appends not yet reported can still ack NEWLEADER.
//! - L3: after a truncation a late `LogPersisted` may still arrive, naming a record the
//!   truncation removed (synced before it, reported after it) or a kept one; the peer only
//!   counts a zxid its log still holds, so such a report says nothing about records appended
//!   after the truncation.
//! - L4: a crash or power loss keeps every record reported durable and every completed
//!   truncation; of the appends not yet reported, a prefix may survive (records are sequential
//!   and recovery stops at the first torn one): none, some or all of them.
//! - L5: `EndSnapshot` resets the log: after `SnapshotInstalled { zxid }` the log holds no
//!   record at or below `zxid`, and appends issued after `EndSnapshot` follow the snapshot.
//!
//! What the peer promises in turn: it emits `PersistCurrentEpoch(e)` only when its whole log is
//! durable (a leader waits for its own `LogPersisted`; a learner acks NEWLEADER only after its
//! sync data is durable), so no restarted peer reports an epoch whose log tail it lost.
//!
//! # After a restart
//! A restarted peer's state machine holds the newest local snapshot only; the txns logged after
//! it are applied when a leader confirms them (UPTODATE). Until the peer serves again, reads of
//! the state machine see the snapshot's state, which may be older than what this node served
//! before it stopped (the driver shows this as `NodeStatus::serving == false`).

use bytes::Bytes;

use crate::membership::{Membership, MembershipChange, MembershipError};
use crate::message::{Message, RequestError};
use crate::sync_plan::{DiffSource, SyncMode};
use crate::transfer::{TransferError, TransferReport};
use crate::types::{Epoch, RequestId, Role, ServerId, Txn, Zxid};

/// Something that happened, fed to the peer by its driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// The clock moved; the only source of time. Feed at least every `tick_ms / 2`.
    Tick {
        /// Milliseconds on a monotonic clock.
        now_ms: u64,
    },
    /// A message arrived from an authenticated peer.
    Message {
        /// The sender.
        from: ServerId,
        /// The message.
        msg: Message,
    },
    /// The quorum channel to `peer` closed; nothing more arrives from that connection.
    ConnectionLost {
        /// The other end.
        peer: ServerId,
    },
    /// `peer` cannot be reached: the driver saw it close its election connection, or failed to
    /// dial it (a killed process closes its sockets at once). The peer counts it unable to
    /// vote until any message from it arrives (`looking` INV-12). Feeding it wrongly costs
    /// only efficiency, never safety; never feeding it keeps every finalize wait.
    PeerUnreachable {
        /// The other end.
        peer: ServerId,
    },
    /// Every appended txn up to `upto` is durable.
    LogPersisted {
        /// The highest durable zxid.
        upto: Zxid,
    },
    /// The snapshot of a SNAP sync is durable, loaded, and the log was reset to it.
    SnapshotInstalled {
        /// The snapshot's zxid.
        zxid: Zxid,
        /// The committed configuration the snapshot carries.
        membership: Membership,
    },
    /// A snapshot at `zxid` of `bytes` bytes is on disk (a background snapshot, or the one a
    /// SNAP sync installed); the leader weighs DIFFs from its log against the newest one.
    SnapshotSaved {
        /// The snapshot's zxid.
        zxid: Zxid,
        /// Its size on disk.
        bytes: u64,
    },
    /// Log segments before `first_zxid` were purged; `SendLogRange` can no longer reach them.
    LogPurged {
        /// The first zxid still on disk.
        first_zxid: Zxid,
    },
    /// A local client wants to write `payload`.
    ClientWrite {
        /// Matched by `Action::WriteDone`.
        request_id: RequestId,
        /// The state machine operation.
        payload: Bytes,
    },
    /// A local client wants a linearizable read point.
    ClientSync {
        /// Matched by `Action::SyncDone`.
        request_id: RequestId,
    },
    /// An operator wants the membership changed (`crate::membership`); only a leader accepts.
    ChangeMembership {
        /// Matched by `Action::MembershipDone`.
        request_id: RequestId,
        /// The change.
        change: MembershipChange,
    },
    /// An operator wants the leader to hand over to `target` (or, when `None`, to the most
    /// up-to-date voting follower in sync); answered by `Action::TransferDone`
    /// (`crate::transfer`).
    TransferLeadership {
        /// The server that should lead next.
        target: Option<ServerId>,
    },
}

/// Something the peer asks its driver to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send a message to a peer.
    Send {
        /// The receiver.
        to: ServerId,
        /// The message.
        msg: Message,
    },
    /// Close the quorum channel to `peer`, dropping whatever is queued either way.
    Disconnect {
        /// The other end.
        peer: ServerId,
    },
    /// Durably replace the acceptedEpoch file (synchronous).
    PersistAcceptedEpoch(Epoch),
    /// Durably replace the currentEpoch file (synchronous).
    PersistCurrentEpoch(Epoch),
    /// Durably record that this node completed its first sync from a leader and may vote from
    /// now on (clears `DurableState::needs_initial_sync`; synchronous). Emitted only once
    /// everything that sync brought is durable.
    PersistInitialized,
    /// Append a txn to the log (asynchronous; see `Input::LogPersisted`).
    AppendLog(Txn),
    /// Durably drop every log record after `zxid` (synchronous).
    TruncateLog {
        /// The last zxid kept.
        zxid: Zxid,
    },
    /// Queue to `to`, as `Proposal` + `Commit` pairs, every logged txn in `(after, upto]`.
    /// The peer only asks for a range its log index proves is on disk and contiguous.
    SendLogRange {
        /// The receiver.
        to: ServerId,
        /// Exclusive lower bound (a zxid the receiver has).
        after: Zxid,
        /// Inclusive upper bound.
        upto: Zxid,
    },
    /// Queue to `to` a `Snap { zxid, membership }` header and the state machine's snapshot
    /// as `SnapChunk`s.
    SendSnapshot {
        /// The receiver.
        to: ServerId,
        /// The last applied zxid, which the snapshot must be at.
        zxid: Zxid,
        /// The committed configuration at `zxid`.
        membership: Membership,
    },
    /// A SNAP from the leader starts; prepare a temporary snapshot file that carries
    /// `membership`.
    BeginSnapshot {
        /// The snapshot's zxid.
        zxid: Zxid,
        /// The committed configuration at `zxid` (from the leader's `Snap`); hand it back in
        /// `Input::SnapshotInstalled`.
        membership: Membership,
    },
    /// Bytes of the SNAP in progress.
    SnapshotChunk(Bytes),
    /// The SNAP stream is complete: make it durable, load it, reset the log, then feed
    /// `Input::SnapshotInstalled`.
    EndSnapshot {
        /// The snapshot's zxid.
        zxid: Zxid,
    },
    /// Abandon the SNAP in progress; keep the old state.
    AbortSnapshot,
    /// Apply a committed txn to the state machine.
    Apply(Txn),
    /// Outcome of a `ClientWrite`; on success the txn was already applied here.
    WriteDone {
        /// The client's request.
        request_id: RequestId,
        /// The committed zxid, or why not.
        outcome: Result<Zxid, RequestError>,
    },
    /// Outcome of a `ClientSync`; on success everything up to the zxid is applied here, so a
    /// local read now is linearizable.
    SyncDone {
        /// The client's request.
        request_id: RequestId,
        /// The read point, or why not.
        outcome: Result<Zxid, RequestError>,
    },
    /// The leader chose how to sync `learner` (a report, for logs and counters: nothing to
    /// carry out). Emitted once per sync, before the sync's first message to the learner.
    SyncChosen {
        /// The learner being synced.
        learner: ServerId,
        /// DIFF, TRUNC+DIFF or SNAP.
        mode: SyncMode,
        /// Where the learner's history continues from: the DIFF's start (the learner's last
        /// zxid), the TRUNC's point, or the SNAP's zxid.
        from: Zxid,
        /// The end of the committed history sent before NEWLEADER.
        to: Zxid,
        /// How many txns of the history follow `from` up to `to`.
        txns: u64,
        /// Where those txns are read: all from memory, or a range from the on-disk log
        /// (`SendLogRange`) and the rest from memory.
        source: DiffSource,
    },
    /// The learner received its leader's sync header (a report, for logs and counters: nothing
    /// to carry out). Emitted once per sync; a TRUNC+DIFF is reported at its TRUNC.
    SyncReceived {
        /// The leader syncing this learner.
        leader: ServerId,
        /// DIFF, TRUNC+DIFF or SNAP.
        mode: SyncMode,
        /// The header's zxid: the DIFF's end, the TRUNC's point, or the SNAP's zxid.
        zxid: Zxid,
    },
    /// Outcome of a `ChangeMembership`: the committed configuration's version, or why not.
    MembershipDone {
        /// The operator's request.
        request_id: RequestId,
        /// The new configuration's version (the zxid that committed it), or why not.
        outcome: Result<Zxid, MembershipError>,
    },
    /// The configuration in force or the committed one changed (emitted once at start, then
    /// at the point of every change: after the `AppendLog`, `TruncateLog` or `Apply` that
    /// caused it). A driver connects to the members in force and drops the others; the
    /// committed configuration is what a snapshot taken after this point carries.
    MembershipChanged {
        /// The newest configuration in the log (`membership` R1).
        in_force: Membership,
        /// The newest applied configuration.
        committed: Membership,
    },
    /// Outcome of `Input::TransferLeadership` (exactly one per request, `crate::transfer` T5).
    TransferDone {
        /// The new leader and its epoch, or why not.
        outcome: Result<TransferReport, TransferError>,
    },
    /// The role, leader or epoch changed.
    RoleChanged {
        /// The new role.
        role: Role,
        /// The leader, when known.
        leader: Option<ServerId>,
        /// The epoch being followed or led (currentEpoch once established).
        epoch: Epoch,
    },
}
