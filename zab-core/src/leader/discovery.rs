//! Discovery on the leader (DESIGN §3.3): FOLLOWERINFO quorum, the new epoch, ACKEPOCH quorum.
//!
//! INV-1: the new epoch is `max(acceptedEpoch of the leader and every learner heard) + 1`, and
//! the leader emits `PersistAcceptedEpoch(new)` before any LEADERINFO of that epoch (B1).
//! INV-2: an ACKEPOCH counts toward the epoch quorum only from a participant whose FOLLOWERINFO
//! carried an acceptedEpoch below the new epoch: a learner that had already accepted this epoch
//! number (possibly from another leader) is synced but not counted (ZooKeeper's "-1" ack).
//! INV-3: the leader leaves its role when a counted learner's `(currentEpoch, lastZxid)` is
//! later than its own (B11); it persists currentEpoch = new epoch when the quorum is reached.
//! INV-5: only FOLLOWERINFO senders are ever counted; OBSERVERINFO from a participant of the
//! config is an uninitialized participant (PITFALLS B9) and is synced as an observer.
//! INV-6 (PITFALLS B7, ZooKeeper's `maxTimeToWaitForEpoch`): a prospective leader still short
//! of a FOLLOWERINFO quorum `Config::epoch_wait_ticks` after it took the lead abandons the
//! epoch and re-elects when a participant that sent it no FOLLOWERINFO reports LOOKING. Such a
//! voter changed its mind (its connection broke, it timed out) and cannot rejoin on its own: a
//! LOOKING peer joins an established leader only when a quorum reports FOLLOWING/LEADING it,
//! which is exactly what the leader lacks. Without the rule the ensemble would stay unavailable
//! for the whole `initLimit`. A LOOKING peer resends its notification at least every tick, so
//! the leader leaves at most about one tick after the wait; `epoch_wait_ticks = 0` disables it.
//! INV-7 (PITFALLS B3 on the leader's side, ZOOKEEPER-4643): the leader persists currentEpoch =
//! new epoch only once its whole log is durable. Its vote, and so its election, counted its last
//! *appended* zxid; a currentEpoch written before that tail is durable would survive a power
//! loss that the tail does not, and the restarted node's vote (new epoch, shorter log) would beat
//! the holders of the lost, possibly committed, tail and TRUNC them. Until the tail is durable the
//! leader stays in the epoch-ack phase; its `LogPersisted` re-checks the quorum.
//! INV-4: a learner arriving after the epoch was chosen with an acceptedEpoch above it would
//! refuse LEADERINFO and come back forever; the leader leaves its role so that the next
//! discovery picks an epoch above that promise.

use crate::error::StepError;
use crate::membership::MemberRole;
use crate::message::{Message, PROTOCOL_VERSION};
use crate::peer::core::{Core, Next};
use crate::types::{Epoch, ServerId, Zxid};

use super::{Handler, HandlerState, Leader, Phase};

impl Leader {
    /// FOLLOWERINFO / OBSERVERINFO.
    pub(super) fn on_info(
        &mut self,
        core: &mut Core,
        from: ServerId,
        accepted_epoch: Epoch,
        observer: bool,
    ) -> Result<Next, StepError> {
        let is_participant = crate::election::is_participant(&core.cfg, from);
        let may_follow = matches!(
            core.members.in_force().role_of(from),
            Some(MemberRole::Participant | MemberRole::Joining)
        );
        if !observer && !may_follow {
            tracing::warn!(%from, "leader: FOLLOWERINFO from an observer of the config dropped");
            return Ok(Next::Stay);
        }
        if observer && is_participant {
            // A participant whose data dir needs its first sync (PITFALLS B9): synced like an
            // observer, counted in no quorum until it comes back with FOLLOWERINFO (INV-5).
            tracing::info!(%from, "leader: syncing an uninitialized participant (non-voting)");
        }
        if self.handlers.contains_key(&from) {
            tracing::debug!(%from, "leader: duplicate learner info ignored");
            return Ok(Next::Stay);
        }
        self.handlers.insert(
            from,
            Handler {
                observer,
                state: HandlerState::Info,
                info_epoch: accepted_epoch,
                summary: (Epoch(0), Zxid::ZERO),
                last_heard_ms: core.now_ms,
                acked_upto: Zxid::ZERO,
                plan: None,
            },
        );
        if self.phase == Phase::Discovery {
            if !observer && is_participant {
                self.info_quorum.insert(from);
            }
            return self.check_discovery(core);
        }
        if accepted_epoch > self.epoch() {
            // It promised a later epoch and will refuse ours, forever: make way for an
            // election whose epoch covers its promise (INV-4).
            tracing::debug!(%from, %accepted_epoch, "leader: a learner accepted a later epoch");
            return Ok(Next::Leave("leader: a learner accepted a later epoch"));
        }
        self.send_leader_info(core, from);
        Ok(Next::Stay)
    }

    /// Participant `from` reported LOOKING (INV-6): true when this prospective leader should
    /// abandon the epoch and re-elect.
    pub(crate) fn abandons_epoch_for(&self, core: &Core, from: ServerId) -> bool {
        let Some(wait_ms) = core.epoch_wait_ms() else {
            return false;
        };
        self.phase == Phase::Discovery
            && !self.info_quorum.contains(&from)
            && core.now_ms.saturating_sub(self.phase_since_ms) > wait_ms
    }

    /// Picks the new epoch once a quorum (the leader included) sent its info (INV-1).
    pub(super) fn check_discovery(&mut self, core: &mut Core) -> Result<Next, StepError> {
        if self.phase != Phase::Discovery || !core.cfg.is_quorum(self.info_quorum.iter()) {
            return Ok(Next::Stay);
        }
        let max = self
            .handlers
            .values()
            .map(|h| h.info_epoch)
            .chain([core.accepted_epoch, core.current_epoch])
            .max()
            .unwrap_or_default();
        let epoch = max.next().ok_or(StepError::EpochSpaceExhausted)?;
        core.persist_accepted(epoch);
        self.new_epoch = Some(epoch);
        self.set_phase(core, Phase::EpochAck);
        tracing::debug!(%epoch, "leader: proposing epoch");
        for sid in self.handlers.keys().copied().collect::<Vec<_>>() {
            self.send_leader_info(core, sid);
        }
        self.epoch_acks.insert(core.sid());
        self.check_epoch_acks(core)
    }

    fn send_leader_info(&mut self, core: &mut Core, to: ServerId) {
        let (Some(new_epoch), Some(h)) = (self.new_epoch, self.handlers.get_mut(&to)) else {
            return;
        };
        if h.state == HandlerState::Info {
            h.state = HandlerState::LeaderInfoSent;
            core.send(
                to,
                Message::LeaderInfo {
                    new_epoch,
                    protocol_version: PROTOCOL_VERSION,
                },
            );
        }
    }

    /// ACKEPOCH (INV-2, INV-3).
    pub(super) fn on_ack_epoch(
        &mut self,
        core: &mut Core,
        from: ServerId,
        current_epoch: Epoch,
        last_zxid: Zxid,
    ) -> Result<Next, StepError> {
        let epoch = self.epoch();
        let Some(h) = self.handlers.get_mut(&from) else {
            return Ok(Next::Stay);
        };
        if h.state != HandlerState::LeaderInfoSent {
            tracing::debug!(%from, "leader: ACKEPOCH out of phase dropped");
            return Ok(Next::Stay);
        }
        h.state = HandlerState::EpochAcked;
        h.summary = (current_epoch, last_zxid);
        let counted =
            !h.observer && crate::election::is_participant(&core.cfg, from) && h.info_epoch < epoch;
        if counted {
            if (current_epoch, last_zxid) > (core.current_epoch, core.log.last()) {
                tracing::warn!(%from, %last_zxid, "leader: follower is ahead of the leader");
                return Ok(Next::Leave("leader: a follower is ahead"));
            }
            if self.phase == Phase::EpochAck {
                self.epoch_acks.insert(from);
            }
        }
        match self.phase {
            Phase::EpochAck => self.check_epoch_acks(core),
            Phase::Sync | Phase::Broadcast => {
                self.start_sync(core, from)?;
                Ok(Next::Stay)
            }
            Phase::Discovery => Ok(Next::Stay),
        }
    }

    /// Once a quorum acked the epoch and the leader's own log is durable: persist currentEpoch
    /// and sync every acked learner (INV-7).
    pub(super) fn check_epoch_acks(&mut self, core: &mut Core) -> Result<Next, StepError> {
        if self.phase != Phase::EpochAck || !core.cfg.is_quorum(self.epoch_acks.iter()) {
            return Ok(Next::Stay);
        }
        if !core.log.all_persisted() {
            tracing::debug!(
                persisted = %core.log.persisted(),
                last = %core.log.last(),
                "leader: epoch acked; waiting for its own log to be durable before currentEpoch"
            );
            return Ok(Next::Stay);
        }
        let epoch = self.epoch();
        core.persist_current(epoch);
        self.set_phase(core, Phase::Sync);
        let acked: Vec<ServerId> = self
            .handlers
            .iter()
            .filter(|(_, h)| h.state == HandlerState::EpochAcked)
            .map(|(s, _)| *s)
            .collect();
        for sid in acked {
            self.start_sync(core, sid)?;
        }
        self.check_newleader(core)
    }
}
