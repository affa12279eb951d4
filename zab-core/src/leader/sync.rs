//! Sync on the leader (DESIGN §3.4): per-learner sync data, NEWLEADER, the NEWLEADER quorum
//! and the commit of the leader's initial history.
//!
//! INV-1: in one step the leader reports the sync it chose (`Action::SyncChosen`) and queues,
//! to one learner: the sync header (DIFF / TRUNC+DIFF / SNAP), PROPOSAL+COMMIT for every history txn the learner lacks up to the commit point, a
//! PROPOSAL for every outstanding proposal (followers only), NEWLEADER, and registers the
//! learner for forwarding (leader INV-3).
//! INV-2: the leader applies nothing beyond its snapshot before a quorum (itself included, once
//! its own log is durable) acked NEWLEADER; then its whole logged history is committed, applied
//! in order, and only then is UPTODATE sent and are new txns proposed (Zab D9, F7).
//! INV-3: the NEWLEADER quorum is confirmed by a PING round sent after it was reached: the
//! epoch is established only when a quorum of the NEWLEADER ackers answered a round at least
//! that recent.

use std::collections::BTreeSet;

use crate::error::StepError;
use crate::io::Action;
use crate::message::Message;
use crate::peer::core::{Core, Next};
use crate::sync_plan::{plan_sync, DiffSource, LeaderLog, SyncPlan};
use crate::types::{Role, ServerId, Zxid};

use super::{HandlerState, Leader, Phase};

/// What the sync plan needs to know of the leader's log.
fn leader_log(core: &Core) -> LeaderLog<'_> {
    LeaderLog {
        index: core.log.index(),
        base: core.log.base(),
        memory_first: core.log.memory_first(),
        sizes: core.log.sizes(),
        diff_from_log_limit: core.cfg.diff_from_log_limit,
        snapshot_bytes: core.log.snapshot_bytes(),
        snapshot_size_factor: core.cfg.snapshot_size_factor,
    }
}

impl Leader {
    /// Syncs one learner that acked the epoch (INV-1).
    pub(super) fn start_sync(&mut self, core: &mut Core, sid: ServerId) -> Result<(), StepError> {
        let Some(h) = self.handlers.get(&sid) else {
            return Ok(());
        };
        let (observer, peer_last) = (h.observer, h.summary.1);
        // The history every learner must end up with: everything committed once established,
        // the whole log before (it becomes committed with the NEWLEADER quorum).
        let end = if self.phase == Phase::Broadcast {
            core.last_committed
        } else {
            core.log.last()
        };
        let plan = plan_sync(&leader_log(core), peer_last);
        tracing::debug!(%sid, %peer_last, ?plan, "leader: syncing learner");
        report_sync(core, sid, plan, end);
        let sent_upto = match plan {
            SyncPlan::Diff { after, source } => {
                core.send(sid, Message::Diff { last_zxid: end });
                self.send_diff(core, sid, after, end, source)?;
                end.max(after)
            }
            SyncPlan::TruncDiff { to, source } => {
                core.send(sid, Message::Trunc { zxid: to });
                core.send(sid, Message::Diff { last_zxid: end });
                self.send_diff(core, sid, to, end, source)?;
                end.max(to)
            }
            SyncPlan::Snap => {
                let at = core.last_applied;
                let membership = core.members.committed().clone();
                core.push(Action::SendSnapshot {
                    to: sid,
                    zxid: at,
                    membership,
                });
                self.send_pairs(core, sid, at, end)?;
                end.max(at)
            }
        };
        if !observer {
            let pending: Vec<Zxid> = self
                .outstanding
                .range(sent_upto..)
                .map(|(z, _)| *z)
                .collect();
            for z in pending.into_iter().filter(|z| *z > sent_upto) {
                let txn = core.log.txn(z).cloned().ok_or_else(|| missing(z))?;
                core.send(sid, Message::Proposal(txn));
            }
        }
        core.send(
            sid,
            Message::NewLeader {
                zxid: Zxid::new(self.epoch(), 0),
            },
        );
        if let Some(h) = self.handlers.get_mut(&sid) {
            h.state = HandlerState::Syncing;
            h.plan = Some(plan);
        }
        Ok(())
    }

    fn send_diff(
        &mut self,
        core: &mut Core,
        sid: ServerId,
        after: Zxid,
        end: Zxid,
        source: DiffSource,
    ) -> Result<(), StepError> {
        match source {
            DiffSource::Memory => self.send_pairs(core, sid, after, end),
            DiffSource::Log { upto, .. } => {
                let upto = upto.min(end);
                core.push(Action::SendLogRange {
                    to: sid,
                    after,
                    upto,
                });
                self.send_pairs(core, sid, upto, end)
            }
        }
    }

    /// PROPOSAL + COMMIT for every logged txn in `(after, upto]`, from memory.
    fn send_pairs(
        &mut self,
        core: &mut Core,
        sid: ServerId,
        after: Zxid,
        upto: Zxid,
    ) -> Result<(), StepError> {
        if upto <= after {
            return Ok(());
        }
        let txns = core
            .log
            .txns_in(after, upto)
            .ok_or_else(|| missing(after))?;
        for txn in txns {
            let zxid = txn.zxid;
            core.send(sid, Message::Proposal(txn));
            core.send(sid, Message::Commit { zxid });
        }
        Ok(())
    }

    /// ACK of NEWLEADER from `from`.
    pub(super) fn on_newleader_ack(
        &mut self,
        core: &mut Core,
        from: ServerId,
    ) -> Result<Next, StepError> {
        let Some(h) = self.handlers.get_mut(&from) else {
            return Ok(Next::Stay);
        };
        if h.state != HandlerState::Syncing {
            tracing::debug!(%from, "leader: NEWLEADER ack out of phase dropped");
            return Ok(Next::Stay);
        }
        h.state = HandlerState::NewLeaderAcked;
        if !h.observer && crate::election::is_participant(&core.cfg, from) {
            self.newleader_acks.insert(from);
        }
        match self.phase {
            Phase::Sync => self.check_newleader(core),
            Phase::Broadcast => {
                self.send_uptodate(core, from);
                Ok(Next::Stay)
            }
            _ => Ok(Next::Stay),
        }
    }

    fn send_uptodate(&mut self, core: &mut Core, sid: ServerId) {
        if let Some(h) = self.handlers.get_mut(&sid) {
            if h.state == HandlerState::NewLeaderAcked {
                h.state = HandlerState::UpToDate;
                h.last_heard_ms = core.now_ms;
                core.send(sid, Message::UpToDate);
            }
        }
    }

    /// Establishes the epoch once a quorum acked NEWLEADER (INV-2).
    pub(super) fn check_newleader(&mut self, core: &mut Core) -> Result<Next, StepError> {
        if self.phase != Phase::Sync {
            return Ok(Next::Stay);
        }
        if core.log.all_persisted() {
            self.newleader_acks.insert(core.sid());
        }
        if !core.cfg.is_quorum(self.newleader_acks.iter()) {
            return Ok(Next::Stay);
        }
        if !self.confirmed(core) {
            return Ok(Next::Stay);
        }
        let last = core.log.last();
        core.apply_upto(last)?;
        core.last_committed = last;
        self.set_phase(core, Phase::Broadcast);
        let epoch = self.epoch();
        tracing::debug!(%epoch, %last, "leader: established");
        core.push(Action::RoleChanged {
            role: Role::Leading,
            leader: Some(core.sid()),
            epoch,
        });
        let acked: Vec<ServerId> = self
            .handlers
            .iter()
            .filter(|(_, h)| h.state == HandlerState::NewLeaderAcked)
            .map(|(s, _)| *s)
            .collect();
        for sid in acked {
            self.send_uptodate(core, sid);
        }
        self.drain_queued(core)
    }
}

impl Leader {
    /// INV-3: one PING round after the NEWLEADER quorum, answered by a quorum of those that
    /// acked, proves they still follow this leader now (acks queued before a long pause of the
    /// leader, from followers that left since, do not establish a stale epoch).
    fn confirmed(&mut self, core: &mut Core) -> bool {
        if self.confirm_round.is_none() {
            self.ping_round += 1;
            let round = self.ping_round;
            self.confirm_round = Some(round);
            self.confirm_acks = BTreeSet::from([core.sid()]);
            let acked: Vec<ServerId> = self
                .newleader_acks
                .iter()
                .copied()
                .filter(|s| *s != core.sid())
                .collect();
            for sid in acked {
                core.send(sid, Message::Ping { round });
            }
        }
        let live: Vec<ServerId> = self
            .confirm_acks
            .intersection(&self.newleader_acks)
            .copied()
            .collect();
        core.cfg.is_quorum(live.iter())
    }
}

/// Reports the sync chosen for `learner`, whose history will end at `end` (INV-1).
fn report_sync(core: &mut Core, learner: ServerId, plan: SyncPlan, end: Zxid) {
    let (from, source) = match plan {
        SyncPlan::Diff { after, source } => (after, source),
        SyncPlan::TruncDiff { to, source } => (to, source),
        SyncPlan::Snap => (core.last_applied, DiffSource::Memory),
    };
    let index = core.log.index();
    let below = |z: Zxid| index.partition_point(|x| *x <= z);
    let txns = below(end).saturating_sub(below(from)) as u64;
    core.push(Action::SyncChosen {
        learner,
        mode: plan.mode(),
        from,
        to: end.max(from),
        txns,
        source,
    });
}

fn missing(z: Zxid) -> StepError {
    StepError::Invariant(format!("leader lacks the data of txns after {z}"))
}
