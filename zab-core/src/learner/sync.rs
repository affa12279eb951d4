//! Sync on the learner (DESIGN §3.4, PITFALLS B3, C10–C14).
//!
//! INV-1: nothing received in sync is applied before UPTODATE; at UPTODATE the learner applies,
//! in order, every logged txn up to the sync point (the leader's committed history), and keeps
//! proposals that are still outstanding pending until their COMMIT (C14).
//! INV-2: NEWLEADER is acked only once every txn the learner logged is durable (`LogPersisted`)
//! and any SNAP is installed; then `PersistCurrentEpoch(new)` is emitted, then the ACK, in that
//! order in one batch (B3, C12).
//! INV-3: no proposal is acked before the NEWLEADER ack (ZOOKEEPER-4685); after it, the learner
//! acks cumulatively the highest durable zxid of the new epoch. Observers never ack proposals.
//! INV-4: TRUNC never removes a committed txn: a TRUNC below the last committed zxid is a fatal
//! `StepError` (C2).
//! INV-6 (PITFALLS B9): a learner whose data dir needs its initial sync emits `PersistInitialized`
//! after its first UPTODATE (a joining member earlier, INV-8), once everything it logged is durable
//! (the leader's whole history as of the sync, INV-2, and any txn since) and, when it is a
//! participant, leaves the role to rejoin as a voter (FOLLOWERINFO); until then it learns as an
//! observer and is counted nowhere.
//! INV-5: a SNAP never moves the state machine backwards: one at or below the applied point is
//! not installed; the learner reconciles its log with the stream that follows instead
//! (`reconcile`), cutting only what the leader does not have.
//! INV-8 (`membership` R5): a learner that needs its initial sync and learns as a follower (a
//! joining member; a wiped participant learns as an observer) emits `PersistInitialized` with
//! its NEWLEADER ack, before the ACK: the leader may promote it on that ack, while UPTODATE is
//! still in flight, and a promoted participant that lost its leader before UPTODATE would
//! otherwise count in every quorum yet never vote. The ack already means the leader's whole
//! history as of the sync is durable here (INV-2), which is all INV-6 waits for.
//! INV-7: the learner reports the sync its leader chose (`Action::SyncReceived`) once, at the
//! sync's first header (DIFF, TRUNC or SNAP).

use crate::error::StepError;
use crate::io::Action;
use crate::membership::Membership;
use crate::message::Message;
use crate::peer::core::{Core, Next};
use crate::sync_plan::SyncMode;
use crate::types::{Role, Zxid};

use super::{Learner, Phase, SnapState};

impl Learner {
    /// A message while syncing.
    pub(super) fn on_sync_message(
        &mut self,
        core: &mut Core,
        msg: Message,
    ) -> Result<Next, StepError> {
        match msg {
            Message::Diff { last_zxid } => {
                self.report_sync(core, SyncMode::Diff, last_zxid);
                self.sync_point = self.sync_point.max(last_zxid);
            }
            Message::Trunc { zxid } => {
                self.report_sync(core, SyncMode::TruncDiff, zxid);
                return self.on_trunc(core, zxid);
            }
            Message::Snap { zxid, membership } => {
                self.report_sync(core, SyncMode::Snap, zxid);
                return self.on_snap(core, zxid, membership);
            }
            Message::SnapChunk { last, .. } if self.snap == SnapState::Skipping => {
                if last {
                    self.snap = SnapState::Idle;
                }
            }
            Message::SnapChunk { data, last } => {
                let SnapState::Receiving(zxid) = self.snap else {
                    return Ok(Next::Leave("learner: snapshot chunk without SNAP"));
                };
                core.push(Action::SnapshotChunk(data));
                if last {
                    core.push(Action::EndSnapshot { zxid });
                    core.log.reset_to_snapshot(zxid);
                    if let Some(membership) = self.snap_membership.take() {
                        // The log restarts at the snapshot: so do its configurations
                        // (`members` INV-3).
                        core.members.on_log_reset(membership);
                        core.members_moved();
                    }
                    self.snap = SnapState::Installing(zxid);
                    self.sync_point = self.sync_point.max(zxid);
                }
            }
            Message::Proposal(txn) => return self.sync_txn(core, txn),
            Message::Inform(txn) if self.observer => {
                self.sync_point = self.sync_point.max(txn.zxid);
                return self.sync_txn(core, txn);
            }
            Message::Commit { zxid } => {
                if zxid > core.log.last() {
                    return Ok(Next::Leave("learner: COMMIT of a txn not logged"));
                }
                self.sync_point = self.sync_point.max(zxid);
            }
            Message::NewLeader { zxid } => {
                if zxid != Zxid::new(self.new_epoch, 0) || self.newleader.is_some() {
                    return Ok(Next::Leave("learner: unexpected NEWLEADER"));
                }
                if let Next::Leave(why) = self.finish_reconcile(core)? {
                    return Ok(Next::Leave(why));
                }
                self.newleader = Some(zxid);
                self.try_ack_newleader(core);
            }
            Message::UpToDate => return self.on_uptodate(core),
            Message::RequestDone { .. } | Message::SyncReply { .. } => {
                return self.on_broadcast_message(core, msg)
            }
            other => tracing::debug!(?other, "learner: message out of phase in sync dropped"),
        }
        Ok(Next::Stay)
    }

    /// Reports the sync mode at the sync's first header (INV-7): the DIFF that follows a
    /// TRUNC is part of the TRUNC+DIFF already reported.
    fn report_sync(&mut self, core: &mut Core, mode: SyncMode, zxid: Zxid) {
        if self.synced_by.is_some() {
            return;
        }
        self.synced_by = Some(mode);
        core.push(Action::SyncReceived {
            leader: self.leader,
            mode,
            zxid,
        });
    }

    /// SNAP header. A snapshot at or below our applied point would move the state machine
    /// backwards; everything we applied is committed, hence in the leader's history, so we keep
    /// our state, drop only the unapplied rest of our log, and take the txns that follow (the
    /// duplicates up to our applied point are ignored as they arrive) (INV-5).
    fn on_snap(
        &mut self,
        core: &mut Core,
        zxid: Zxid,
        membership: Membership,
    ) -> Result<Next, StepError> {
        if self.snap != SnapState::Idle {
            return Ok(Next::Leave("learner: second SNAP in one sync"));
        }
        if core.install_pending() {
            return Ok(Next::Leave(
                "learner: SNAP while a snapshot install is pending",
            ));
        }
        if zxid > core.last_applied {
            self.snap = SnapState::Receiving(zxid);
            self.snap_membership = Some(membership.clone());
            core.push(Action::BeginSnapshot { zxid, membership });
            return Ok(Next::Stay);
        }
        self.snap = SnapState::Skipping;
        self.sync_point = self.sync_point.max(zxid);
        self.reconcile = Some(zxid);
        Ok(Next::Stay)
    }

    /// TRUNC (INV-4).
    fn on_trunc(&mut self, core: &mut Core, zxid: Zxid) -> Result<Next, StepError> {
        let next = self.cut_log(core, zxid)?;
        self.sync_point = self.sync_point.max(zxid);
        Ok(next)
    }

    /// Drops every logged txn after `zxid`, never a committed one (INV-4).
    pub(super) fn cut_log(&mut self, core: &mut Core, zxid: Zxid) -> Result<Next, StepError> {
        let committed = core.last_committed.max(core.last_applied);
        if zxid < committed {
            return Err(StepError::TruncateBelowCommitted {
                target: zxid,
                committed,
            });
        }
        if core.install_pending() {
            return Ok(Next::Leave(
                "learner: TRUNC while a snapshot install is pending",
            ));
        }
        if zxid < core.log.last() {
            core.truncate_log(zxid);
        }
        Ok(Next::Stay)
    }

    /// Acks NEWLEADER once the sync data is durable (INV-2).
    pub(super) fn try_ack_newleader(&mut self, core: &mut Core) {
        let Some(zxid) = self.newleader else {
            return;
        };
        if self.newleader_acked || !core.log.all_persisted() || self.snap != SnapState::Idle {
            return;
        }
        core.persist_current(self.new_epoch);
        if core.needs_initial_sync && !self.observer {
            // A joining member: the leader may promote it on this ack (INV-8).
            core.persist_initialized();
        }
        core.send(self.leader, Message::Ack { zxid });
        self.newleader_acked = true;
        self.ack_proposals(core);
    }

    /// Cumulative ACK of the highest durable proposal of the epoch (INV-3).
    pub(super) fn ack_proposals(&mut self, core: &mut Core) {
        if !self.newleader_acked || self.observer {
            return;
        }
        let p = core.log.persisted();
        if p > self.acked && p.epoch() == self.new_epoch && p.counter() > 0 {
            self.acked = p;
            core.send(self.leader, Message::Ack { zxid: p });
        }
    }

    /// UPTODATE: apply the synced history and start serving (INV-1).
    fn on_uptodate(&mut self, core: &mut Core) -> Result<Next, StepError> {
        if !self.newleader_acked {
            return Ok(Next::Leave("learner: UPTODATE before our NEWLEADER ack"));
        }
        if self.sync_point > core.log.last() {
            return Ok(Next::Leave("learner: sync point beyond our log"));
        }
        core.apply_upto(self.sync_point)?;
        self.phase = Phase::Broadcast;
        let role = if self.observer {
            Role::Observing
        } else {
            Role::Following
        };
        core.push(Action::RoleChanged {
            role,
            leader: Some(self.leader),
            epoch: self.new_epoch,
        });
        for op in std::mem::take(&mut self.queued) {
            self.on_client(core, op);
        }
        self.complete_pending(core);
        Ok(self.try_initialize(core))
    }

    /// After the first complete sync, once everything logged is durable: record that this
    /// node may vote and, as a participant, rejoin as a voter (INV-6).
    fn try_initialize(&mut self, core: &mut Core) -> Next {
        if !core.needs_initial_sync
            || self.phase != Phase::Broadcast
            || !core.log.all_persisted()
            || self.snap != SnapState::Idle
        {
            return Next::Stay;
        }
        core.persist_initialized();
        tracing::info!(
            leader = %self.leader,
            synced_to = %core.last_applied,
            "first sync complete and durable: this node is initialized and may vote"
        );
        if core.votes() {
            return Next::Leave("initialized: rejoining as a voting participant");
        }
        Next::Stay
    }

    /// The log became durable further.
    pub(crate) fn on_persisted(&mut self, core: &mut Core) -> Next {
        self.try_ack_newleader(core);
        self.ack_proposals(core);
        self.try_initialize(core)
    }

    /// The SNAP's snapshot is durable and loaded. Whatever the install was part of, everything
    /// that waits for durability is checked again (the NEWLEADER ack, proposal acks, the
    /// initial-sync marker), as after a `LogPersisted`.
    pub(crate) fn on_snapshot_installed(&mut self, core: &mut Core, zxid: Zxid) -> Next {
        if self.snap == SnapState::Installing(zxid) {
            self.snap = SnapState::Idle;
        }
        self.on_persisted(core)
    }
}
