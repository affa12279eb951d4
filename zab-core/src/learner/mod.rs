//! A learner (follower or observer): discovery with its leader, sync, then broadcast.
//!
//! INV-1: only messages from the current leader, and only the kinds a leader sends, are
//! accepted (and only they reset the silence timer); anything else is dropped.
//! INV-2: `AckEpoch` is sent only after `PersistAcceptedEpoch(new)` in the same batch when the
//! epoch is new; a LEADERINFO with an epoch below acceptedEpoch makes the learner leave (B1).
//! INV-3: a learner that hears nothing from its leader for initLimit (before UPTODATE) or
//! syncLimit (after) leaves the role.
//! INV-4: client requests are forwarded only once serving (after UPTODATE); a forwarded write
//! or sync is answered only once the learner applied the zxid the leader returned, so reads
//! after it see it (read-your-writes on every node).
//! INV-5: until LEADERINFO arrives, the info is resent every `Config::info_resend_ms`: the
//! leader drops an info that reaches it while it is still LOOKING (it often finishes its
//! election a little after its followers), and the resend period adds to every failover.

mod broadcast;
mod reconcile;
mod sync;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use crate::error::StepError;
use crate::io::Action;
use crate::membership::Membership;
use crate::message::{Message, RequestError, PROTOCOL_VERSION};
use crate::peer::core::{ClientOp, Core, Next};
use crate::sync_plan::SyncMode;
use crate::types::{Epoch, RequestId, ServerId, Zxid};

/// The learner's phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Info sent; waiting for LEADERINFO.
    Discovery,
    /// ACKEPOCH sent; receiving sync data until UPTODATE.
    Sync,
    /// Serving.
    Broadcast,
}

/// Progress of a SNAP from the leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SnapState {
    /// No SNAP in progress.
    Idle,
    /// Chunks arriving.
    Receiving(Zxid),
    /// `EndSnapshot` emitted; waiting for `SnapshotInstalled`.
    Installing(Zxid),
    /// A SNAP at or below what this learner already applied: its chunks are ignored (the
    /// learner keeps its state and truncates its log to its applied point instead).
    Skipping,
}

/// A follower's or observer's state.
#[derive(Debug)]
pub(crate) struct Learner {
    pub(crate) leader: ServerId,
    pub(crate) observer: bool,
    pub(crate) phase: Phase,
    pub(crate) new_epoch: Epoch,
    pub(crate) last_heard_ms: u64,
    next_info_ms: u64,
    /// Everything up to here is committed history of the leader (applied at UPTODATE).
    pub(crate) sync_point: Zxid,
    pub(crate) snap: SnapState,
    /// The configuration of the SNAP being received (from its `Snap` header).
    pub(crate) snap_membership: Option<Membership>,
    /// The sync mode received from the leader, once its first sync header arrived.
    pub(crate) synced_by: Option<SyncMode>,
    /// While reconciling with a SNAP not installed: the last zxid of the stream so far.
    pub(crate) reconcile: Option<Zxid>,
    pub(crate) newleader: Option<Zxid>,
    pub(crate) newleader_acked: bool,
    /// Highest proposal zxid acked.
    pub(crate) acked: Zxid,
    pub(crate) writes: BTreeMap<RequestId, Option<Zxid>>,
    pub(crate) syncs: BTreeMap<RequestId, Option<Zxid>>,
    pub(crate) queued: Vec<ClientOp>,
}

impl Learner {
    /// Starts learning from `leader`: sends FOLLOWERINFO / OBSERVERINFO.
    pub(crate) fn start(core: &mut Core, leader: ServerId, observer: bool) -> Learner {
        let mut l = Learner {
            leader,
            observer,
            phase: Phase::Discovery,
            new_epoch: Epoch(0),
            last_heard_ms: core.now_ms,
            next_info_ms: core.now_ms,
            sync_point: Zxid::ZERO,
            snap: SnapState::Idle,
            snap_membership: None,
            synced_by: None,
            reconcile: None,
            newleader: None,
            newleader_acked: false,
            acked: Zxid::ZERO,
            writes: BTreeMap::new(),
            syncs: BTreeMap::new(),
            queued: Vec::new(),
        };
        l.send_info(core);
        l
    }

    /// Sends (or, while the leader may not be listening yet, resends) our info.
    fn send_info(&mut self, core: &mut Core) {
        let (accepted_epoch, protocol_version) = (core.accepted_epoch, PROTOCOL_VERSION);
        let msg = if self.observer {
            Message::ObserverInfo {
                accepted_epoch,
                protocol_version,
            }
        } else {
            Message::FollowerInfo {
                accepted_epoch,
                protocol_version,
            }
        };
        core.send(self.leader, msg);
        self.next_info_ms = core.now_ms.saturating_add(core.cfg.info_resend_ms.max(1));
    }

    /// True after UPTODATE.
    pub(crate) fn is_serving(&self) -> bool {
        self.phase == Phase::Broadcast
    }

    /// Checks the sync INV lines on the current state (`Peer::check_invariants`).
    pub(crate) fn check(&self, core: &Core) -> Result<(), String> {
        if self.newleader_acked && core.current_epoch != self.new_epoch {
            return Err(format!(
                "learner sync INV-2: NEWLEADER of epoch {} acked with currentEpoch {}",
                self.new_epoch, core.current_epoch
            ));
        }
        if self.phase == Phase::Broadcast && !self.newleader_acked {
            return Err("learner sync: serving without a NEWLEADER ack".into());
        }
        if !self.newleader_acked && self.acked != Zxid::ZERO {
            return Err(format!(
                "learner sync INV-3: proposal {} acked before NEWLEADER",
                self.acked
            ));
        }
        if self.acked > core.log.persisted() {
            return Err(format!(
                "learner sync INV-3: acked {} beyond the durable {}",
                self.acked,
                core.log.persisted()
            ));
        }
        Ok(())
    }

    /// A quorum-channel message (INV-1).
    pub(crate) fn on_message(
        &mut self,
        core: &mut Core,
        from: ServerId,
        msg: Message,
    ) -> Result<Next, StepError> {
        if from != self.leader {
            tracing::debug!(%from, "learner: message from a non-leader dropped");
            return Ok(Next::Stay);
        }
        if !is_leader_message(&msg) {
            tracing::debug!(%from, ?msg, "learner: not a leader's message, dropped");
            return Ok(Next::Stay);
        }
        self.last_heard_ms = core.now_ms;
        match msg {
            Message::Ping { round } => {
                core.send(from, Message::PingAck { round });
                Ok(Next::Stay)
            }
            Message::LeaderInfo { new_epoch, .. } => self.on_leader_info(core, new_epoch),
            m if self.phase == Phase::Sync => self.on_sync_message(core, m),
            m if self.phase == Phase::Broadcast => self.on_broadcast_message(core, m),
            other => {
                tracing::debug!(?other, "learner: message out of phase dropped");
                Ok(Next::Stay)
            }
        }
    }

    /// LEADERINFO (INV-2).
    fn on_leader_info(&mut self, core: &mut Core, new_epoch: Epoch) -> Result<Next, StepError> {
        if self.phase != Phase::Discovery {
            tracing::debug!("learner: duplicate LEADERINFO dropped");
            return Ok(Next::Stay);
        }
        if new_epoch < core.accepted_epoch {
            tracing::warn!(%new_epoch, accepted = %core.accepted_epoch, "learner: stale epoch");
            return Ok(Next::Leave(
                "learner: leader proposed an epoch below acceptedEpoch",
            ));
        }
        if new_epoch > core.accepted_epoch {
            core.persist_accepted(new_epoch);
        }
        self.new_epoch = new_epoch;
        self.phase = Phase::Sync;
        let (current_epoch, last_zxid) = (core.current_epoch, core.log.last());
        core.send(
            self.leader,
            Message::AckEpoch {
                current_epoch,
                last_zxid,
            },
        );
        Ok(Next::Stay)
    }

    /// Info resends and the leader-silence timeout (INV-3).
    pub(crate) fn on_tick(&mut self, core: &mut Core) -> Next {
        let now = core.now_ms;
        if self.phase == Phase::Discovery && now >= self.next_info_ms {
            self.send_info(core);
        }
        let limit = if self.phase == Phase::Broadcast {
            core.sync_ms()
        } else {
            core.init_ms()
        };
        if now.saturating_sub(self.last_heard_ms) > limit {
            return Next::Leave("learner: leader silent too long");
        }
        Next::Stay
    }

    /// A local client's write or sync (INV-4).
    pub(crate) fn on_client(&mut self, core: &mut Core, op: ClientOp) {
        if let ClientOp::Change(..) = op {
            // Only the leader changes the membership; the driver forwards the request.
            let leader = Some(self.leader);
            core.fail_op(op, RequestError::NotLeader { leader });
            return;
        }
        if self.phase != Phase::Broadcast {
            self.queued.push(op);
            return;
        }
        match op {
            ClientOp::Write(request_id, payload) => {
                self.writes.insert(request_id, None);
                core.send(
                    self.leader,
                    Message::Request {
                        request_id,
                        payload,
                    },
                );
            }
            ClientOp::Sync(request_id) => {
                self.syncs.insert(request_id, None);
                core.send(self.leader, Message::Sync { request_id });
            }
            ClientOp::Change(..) => {}
        }
    }

    /// Leaving the role: abort a SNAP in progress, close the channel, fail what is pending.
    pub(crate) fn leave(self, core: &mut Core) {
        if let SnapState::Receiving(_) = self.snap {
            core.push(Action::AbortSnapshot);
        }
        core.push(Action::Disconnect { peer: self.leader });
        for request_id in self.writes.into_keys() {
            core.push(Action::WriteDone {
                request_id,
                outcome: Err(RequestError::QuorumLost),
            });
        }
        for request_id in self.syncs.into_keys() {
            core.push(Action::SyncDone {
                request_id,
                outcome: Err(RequestError::QuorumLost),
            });
        }
        for op in self.queued {
            core.fail_op(op, RequestError::NotLeader { leader: None });
        }
    }
}

/// True for the messages only a leader sends; only they prove the leader is alive (two peers
/// that both believe to follow the other must not keep each other alive with their infos).
fn is_leader_message(msg: &Message) -> bool {
    matches!(
        msg,
        Message::LeaderInfo { .. }
            | Message::Diff { .. }
            | Message::Trunc { .. }
            | Message::Snap { .. }
            | Message::SnapChunk { .. }
            | Message::NewLeader { .. }
            | Message::UpToDate
            | Message::Proposal(_)
            | Message::Commit { .. }
            | Message::Inform(_)
            | Message::Ping { .. }
            | Message::RequestDone { .. }
            | Message::SyncReply { .. }
    )
}
