//! The disk of one simulated node, honouring the log durability contract of `zab_core::io`
//! (L1–L4) in the shape of `zab_store`'s writer (`tests/tests/log_conformance.rs` holds both
//! to it with the same scripted sequences).
//!
//! # Model
//! - Epoch files and `TruncateLog` are durable the moment the action executes.
//! - `AppendLog` joins a volatile group-commit queue; a scheduler step later makes a prefix of
//!   that queue durable (one fsync for the group) and the node is fed `LogPersisted` (L1).
//! - `TruncateLog { zxid }` first syncs every pending append, as the real writer does, then
//!   drops the records after `zxid`: the kept log is all durable (L2). The pre-truncate sync is
//!   owed to the peer as a later `LogPersisted` naming the last append, which the truncate may
//!   have removed (L3: the peer must ignore it).
//! - A SNAP received from the leader is assembled from its chunks in a temporary buffer; after
//!   `EndSnapshot` it becomes durable after a random delay, then the log is reset to it.
//!   Appends issued after `EndSnapshot` queue behind the install.
//! - The driver takes local snapshots of the applied state and purges old log records.
//! - A snapshot (local, or streamed to a learner) carries the committed configuration of the
//!   last `Action::MembershipChanged` before it, and each txn keeps its kind (a flag byte, as
//!   `zab_store`'s record keeps it in a flag bit); a restart loads that configuration
//!   (`DurableState::membership`), and a node that joined with a helper's configuration and
//!   holds no snapshot yet loads the helper's.
//! - A crash (power loss) keeps everything durable and a prefix of the pending appends, chosen
//!   by the caller from the seeded rng: possibly none, possibly all (L4; records are written
//!   in order and recovery stops at the first torn one).
//!
//! INV-D1: the durable log and the pending queue together are strictly increasing in zxid.
//! INV-D2: every snapshot holds exactly a sequence of txns ending at its zxid.
//! INV-D3: `log_base` is the zxid the first log record follows: the log holds every txn in
//! `(log_base, last]` that this node logged, without gaps.
//! INV-D5: a snapshot encodes and decodes to itself (txn kinds and configuration included);
//! `Snapshot::decode` never panics and refuses malformed bytes.
//! INV-D4: `owed_persisted`, when set, names the last append a completed truncate synced (kept
//! or removed); `fsync` reports it, or a later append, and clears it.

use std::collections::VecDeque;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use zab_core::{DurableState, Epoch, Membership, Txn, TxnKind, Zxid};

/// A snapshot of a state machine: the list of applied txns and the committed configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The last applied zxid (`Zxid::ZERO` when empty).
    pub zxid: Zxid,
    /// The applied txns, ascending.
    pub txns: Vec<Txn>,
    /// The committed configuration when it was taken (`None`: the bootstrap one).
    pub membership: Option<Membership>,
}

/// Bytes of a txn header in a snapshot: zxid, kind flag, length.
const TXN_HEADER: usize = 8 + 1 + 4;

impl Snapshot {
    /// A snapshot of `txns`, carrying no configuration (the bootstrap one).
    pub fn of(txns: &[Txn]) -> Snapshot {
        Snapshot {
            zxid: txns.last().map_or(Zxid::ZERO, |t| t.zxid),
            txns: txns.to_vec(),
            membership: None,
        }
    }

    /// The same snapshot carrying the committed configuration `membership`.
    pub fn carrying(self, membership: Option<Membership>) -> Snapshot {
        Snapshot { membership, ..self }
    }

    /// The size of its encoding (what a snapshot file of it would weigh).
    pub fn bytes(&self) -> u64 {
        self.encode().len() as u64
    }

    /// Serializes the snapshot: the configuration (present flag u8, then version u64 BE,
    /// length u32 BE, `Membership::encode`), then per txn zxid (u64 BE), kind (u8: 0 app,
    /// 1 configuration), length (u32 BE), payload.
    pub fn encode(&self) -> Bytes {
        let mut b = BytesMut::new();
        match &self.membership {
            None => b.put_u8(0),
            Some(m) => {
                let data = m.encode();
                b.put_u8(1);
                b.put_u64(m.version.0);
                b.put_u32(data.len() as u32);
                b.put_slice(&data);
            }
        }
        for t in &self.txns {
            b.put_u64(t.zxid.0);
            b.put_u8(match t.kind {
                TxnKind::App => 0,
                TxnKind::Membership => 1,
            });
            b.put_u32(t.data.len() as u32);
            b.put_slice(&t.data);
        }
        b.freeze()
    }

    /// Parses [`Snapshot::encode`]'s output as the snapshot at `zxid`; `None` when malformed
    /// (INV-D5).
    pub fn decode(zxid: Zxid, mut b: Bytes) -> Option<Snapshot> {
        if !b.has_remaining() {
            return None;
        }
        let membership = match b.get_u8() {
            0 => None,
            1 => {
                if b.remaining() < 12 {
                    return None;
                }
                let version = Zxid(b.get_u64());
                let len = b.get_u32() as usize;
                if b.remaining() < len {
                    return None;
                }
                Some(Membership::decode(version, &b.split_to(len)).ok()?)
            }
            _ => return None,
        };
        let mut txns = Vec::new();
        while b.has_remaining() {
            if b.remaining() < TXN_HEADER {
                return None;
            }
            let zxid = Zxid(b.get_u64());
            let kind = match b.get_u8() {
                0 => TxnKind::App,
                1 => TxnKind::Membership,
                _ => return None,
            };
            let len = b.get_u32() as usize;
            if b.remaining() < len {
                return None;
            }
            let data = b.split_to(len);
            txns.push(Txn { zxid, data, kind });
        }
        Some(Snapshot {
            zxid,
            txns,
            membership,
        })
    }
}

/// A SNAP whose stream ended and which is being written.
#[derive(Clone, Debug)]
pub struct PendingInstall {
    /// The snapshot being installed.
    pub snapshot: Snapshot,
    /// Appends issued after `EndSnapshot`: they reach the disk after the install.
    pub queued_after: VecDeque<Txn>,
    /// The install is already durable (a later synchronous action forced it); only the
    /// `SnapshotInstalled` input is still owed.
    pub durable: bool,
}

/// One node's disk.
#[derive(Clone, Debug, Default)]
pub struct Disk {
    /// The acceptedEpoch file.
    pub accepted_epoch: Epoch,
    /// The currentEpoch file.
    pub current_epoch: Epoch,
    /// Durable snapshots, oldest first (at most `retain` kept).
    pub snapshots: Vec<Snapshot>,
    /// Durable log records, ascending.
    pub log: Vec<Txn>,
    /// The zxid the first log record follows (INV-D3).
    pub log_base: Zxid,
    /// Appends waiting for the next fsync.
    pub pending: VecDeque<Txn>,
    /// Highest zxid made durable by a flush whose `LogPersisted` is still owed.
    pub owed_persisted: Option<Zxid>,
    /// The SNAP being received from the leader: zxid and bytes so far.
    pub incoming: Option<(Zxid, BytesMut)>,
    /// The SNAP being made durable.
    pub install: Option<PendingInstall>,
    /// The "needs initial sync" marker: set by a wipe, cleared by `PersistInitialized`
    /// (PITFALLS B9). A node of the initial cluster starts without it (bootstrapped).
    pub needs_initial_sync: bool,
    /// Snapshots received from a leader (SNAP) and made durable, ever (PITFALLS D5).
    pub snap_installs: u64,
    /// Local snapshots the driver wrote, ever.
    pub local_snapshots: u64,
    /// The configuration a helper member gave this node when it joined (or rejoined after a
    /// wipe) on an empty data dir; loaded while no snapshot carries one.
    pub helper_membership: Option<Membership>,
}

impl Disk {
    /// The newest durable snapshot's zxid.
    pub fn snapshot_zxid(&self) -> Zxid {
        self.snapshots.last().map_or(Zxid::ZERO, |s| s.zxid)
    }

    /// Every txn up to this zxid is durable here (log or snapshot).
    pub fn durable_upto(&self) -> Zxid {
        let log_last = self.log.last().map_or(self.log_base, |t| t.zxid);
        log_last.max(self.snapshot_zxid())
    }

    /// The last zxid logged or queued (what the peer believes its log ends at).
    pub fn last_appended(&self) -> Zxid {
        if let Some(i) = self.install.as_ref().filter(|i| !i.durable) {
            return i.queued_after.back().map_or(i.snapshot.zxid, |t| t.zxid);
        }
        self.pending.back().map_or(self.durable_upto(), |t| t.zxid)
    }

    /// Queues an append. Returns false when it would break INV-D1.
    pub fn append(&mut self, txn: Txn) -> bool {
        if txn.zxid <= self.last_appended() {
            return false;
        }
        match self.install.as_mut().filter(|i| !i.durable) {
            Some(i) => i.queued_after.push_back(txn),
            None => self.pending.push_back(txn),
        }
        true
    }

    /// Makes the first `n` pending appends durable; returns the highest zxid now owed to the
    /// peer as `LogPersisted`.
    pub fn fsync(&mut self, n: usize) -> Option<Zxid> {
        let n = n.min(self.pending.len());
        for txn in self.pending.drain(..n) {
            self.owed_persisted = Some(txn.zxid);
            self.log.push(txn);
        }
        self.owed_persisted.take()
    }

    /// `TruncateLog { zxid }`: syncs the pending appends in order (owing their report, INV-D4),
    /// then drops records after `zxid`, durably (L2, L3).
    pub fn truncate(&mut self, zxid: Zxid) {
        self.force_install();
        if let Some(last) = self.pending.back().map(|t| t.zxid) {
            self.log.extend(self.pending.drain(..));
            self.owed_persisted = Some(last);
        }
        self.log.retain(|t| t.zxid <= zxid);
        if self.log_base > zxid {
            self.log_base = zxid;
        }
    }

    /// Every appended record is durable: nothing is waiting for an fsync and no SNAP install
    /// is still volatile.
    pub fn log_durable(&self) -> bool {
        self.pending.is_empty() && self.install.as_ref().is_none_or(|i| i.durable)
    }

    /// Makes a pending SNAP install durable now (a later synchronous action needs it on disk
    /// first); `SnapshotInstalled` stays owed.
    pub fn force_install(&mut self) {
        let Some(i) = &mut self.install else { return };
        if i.durable {
            return;
        }
        i.durable = true;
        let snap = i.snapshot.clone();
        let after = std::mem::take(&mut i.queued_after);
        self.reset_to(snap);
        self.pending = after;
    }

    fn reset_to(&mut self, snap: Snapshot) {
        self.pending.clear();
        self.log.clear();
        self.log_base = snap.zxid;
        self.owed_persisted = None;
        self.snapshots.push(snap);
        self.snap_installs += 1;
    }

    /// `EndSnapshot`: the received stream is complete. Pending appends before it are erased by
    /// the coming log reset. Returns the decoded snapshot, or `None` when the stream is missing
    /// or malformed.
    pub fn end_snapshot(&mut self, zxid: Zxid) -> Option<Snapshot> {
        let (z, bytes) = self.incoming.take()?;
        let snapshot = Snapshot::decode(zxid, bytes.freeze())?;
        if z != zxid {
            return None;
        }
        self.pending.clear();
        self.install = Some(PendingInstall {
            snapshot: snapshot.clone(),
            queued_after: VecDeque::new(),
            durable: false,
        });
        Some(snapshot)
    }

    /// Completes the pending install; returns its snapshot.
    pub fn finish_install(&mut self) -> Option<Snapshot> {
        self.force_install();
        self.install.take().map(|i| i.snapshot)
    }

    /// A local snapshot of the applied state; keeps `retain` snapshots and purges log records
    /// no retained snapshot needs, keeping `keep_log` records before the oldest one. Returns
    /// the first zxid still in the log when records were purged.
    pub fn take_snapshot(
        &mut self,
        snap: Snapshot,
        retain: usize,
        keep_log: usize,
    ) -> Option<Zxid> {
        if snap.zxid <= self.snapshot_zxid() {
            return None;
        }
        self.snapshots.push(snap);
        self.local_snapshots += 1;
        while self.snapshots.len() > retain.max(1) {
            self.snapshots.remove(0);
        }
        let oldest = self.snapshots.first().map_or(Zxid::ZERO, |s| s.zxid);
        let covered = self.log.iter().take_while(|t| t.zxid <= oldest).count();
        // keep at least one record, so the log still says where it starts
        let purge = covered
            .saturating_sub(keep_log)
            .min(self.log.len().saturating_sub(1));
        if purge == 0 {
            return None;
        }
        self.log_base = self.log[purge - 1].zxid;
        self.log.drain(..purge);
        self.log.first().map(|t| t.zxid)
    }

    /// Reads the log range `(after, upto]`; `None` unless the range is provably present and
    /// contiguous (INV-D3). Reads what was written, synced or not.
    pub fn read_range(&self, after: Zxid, upto: Zxid) -> Option<Vec<Txn>> {
        if upto < after {
            return None;
        }
        let all: Vec<&Txn> = self.log.iter().chain(self.pending.iter()).collect();
        let starts_ok = after == self.log_base || all.iter().any(|t| t.zxid == after);
        if !starts_ok {
            return None;
        }
        let range: Vec<Txn> = all
            .iter()
            .filter(|t| t.zxid > after && t.zxid <= upto)
            .map(|t| (*t).clone())
            .collect();
        let ends_ok = upto == after || range.last().map(|t| t.zxid) == Some(upto);
        ends_ok.then_some(range)
    }

    /// What survives a power loss that kept the first `keep_pending` pending appends (L4), as
    /// the restarted node's store finds it: a log that now ends before the newest snapshot (it
    /// applied and snapshotted txns a quorum had made durable before its own appends were
    /// synced) restarts at that snapshot, like `zab_store::DataDir::load` does; appending after
    /// the shorter log would leave a hole.
    pub fn power_loss(&mut self, keep_pending: usize) {
        self.owed_persisted = None;
        self.incoming = None;
        match self.install.take() {
            // the reset never reached the disk: it and the appends queued behind it are lost
            Some(i) if !i.durable => self.pending.clear(),
            // the reset is durable; the appends after it are ordinary pending appends
            _ => {}
        }
        let keep = keep_pending.min(self.pending.len());
        let survivors: Vec<Txn> = self.pending.drain(..keep).collect();
        self.log.extend(survivors);
        self.pending.clear();
        let snapshot = self.snapshot_zxid();
        if self.log.last().map_or(self.log_base, |t| t.zxid) < snapshot {
            self.log.clear();
            self.log_base = snapshot;
        }
    }

    /// What survives a power loss that kept none of the pending appends (the L4 outcome
    /// scripted scenarios rely on).
    pub fn crash(&mut self) {
        self.power_loss(0);
    }

    /// Wipes everything (an operator emptied the data dir); the node restarts without
    /// `--bootstrap` but with `--helper`, from which it learns `helper_membership` (`None`:
    /// the bootstrap configuration), so it must sync before it votes (PITFALLS B9).
    pub fn wipe(&mut self, helper_membership: Option<Membership>) {
        *self = Disk {
            needs_initial_sync: true,
            helper_membership,
            ..Disk::default()
        };
    }

    /// The durable state a restarted peer is given, and the state machine it starts with.
    pub fn load(&self) -> (DurableState, Vec<Txn>) {
        let snap = self.snapshots.last().cloned().unwrap_or_default();
        let durable = DurableState {
            accepted_epoch: self.accepted_epoch,
            current_epoch: self.current_epoch,
            snapshot_zxid: snap.zxid,
            log_index: self.log.iter().map(|t| t.zxid).collect(),
            log_bytes: self.log.iter().map(|t| t.data.len() as u32).collect(),
            snapshot_bytes: snap.bytes(),
            log_tail: self
                .log
                .iter()
                .filter(|t| t.zxid > snap.zxid)
                .cloned()
                .collect(),
            needs_initial_sync: self.needs_initial_sync,
            membership: snap
                .membership
                .clone()
                .or_else(|| self.helper_membership.clone()),
        };
        (durable, snap.txns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(epoch: u32, counter: u32) -> Txn {
        Txn::app(Zxid::new(Epoch(epoch), counter), Bytes::from_static(b"x"))
    }

    /// Seed 14623's path: the node applied 6..=8 before its own log synced them, took a local
    /// snapshot at 8 and crashed with 6..=8 still pending. After the crash the log must follow
    /// the snapshot, not 5, or the next epoch's records would sit after a hole.
    #[test]
    fn a_crash_leaving_the_log_behind_the_snapshot_restarts_the_log_there() {
        let mut disk = Disk::default();
        for c in 1..=8 {
            assert!(disk.append(txn(1, c)));
        }
        disk.fsync(5);
        let applied: Vec<Txn> = (1..=8).map(|c| txn(1, c)).collect();
        disk.take_snapshot(Snapshot::of(&applied), 2, usize::MAX);
        disk.crash();
        assert!(disk.log.is_empty());
        assert_eq!(disk.log_base, Zxid::new(Epoch(1), 8));
        assert!(disk.append(txn(2, 1)));
        disk.fsync(1);
        assert!(disk
            .read_range(Zxid::new(Epoch(1), 5), txn(2, 1).zxid)
            .is_none());
        let (durable, _) = disk.load();
        assert_eq!(durable.log_index, vec![txn(2, 1).zxid]);
    }

    /// L4: a power loss keeps every durable record and the first `keep` pending appends.
    #[test]
    fn a_power_loss_keeps_a_prefix_of_the_pending_appends() {
        let mut disk = Disk::default();
        for c in 1..=5 {
            assert!(disk.append(txn(1, c)));
        }
        disk.fsync(2);
        disk.power_loss(2);
        let (durable, _) = disk.load();
        let kept: Vec<Zxid> = (1..=4).map(|c| txn(1, c).zxid).collect();
        assert_eq!(durable.log_index, kept);
        assert!(disk.pending.is_empty());
    }
}
