//! The peer: one deterministic state machine per server, driven by [`Input`]s, emitting
//! [`Action`]s (see [`crate::io`] for the contract with the driver).
//!
//! `step` dispatches each input to the current role (LOOKING → `election`, LEADING →
//! `leader`, FOLLOWING/OBSERVING → `learner`); role handlers answer with `Next` and the peer
//! performs role changes here, in one place.
//!
//! INV-1: a role change is stop-the-world: the old role fails its pending requests, aborts a
//! SNAP in progress, closes its quorum channels, and the commit point falls back to what is
//! applied; what is logged stays (its in-flight appends still get their `LogPersisted`), so the
//! vote uses the last appended zxid (history INV-4) (C5, C11, C13, C19).
//! INV-2: no clock, no randomness but the core's seeded generator (`jitter`), no `HashMap`
//! iteration: the same configuration and inputs give the same actions (`zab-core/clippy.toml`
//! rejects clocks, ambient randomness and hash maps at lint time).
//! INV-3: `step` returns `Err` only for fatal local conditions; a peer's bad message is
//! dropped or makes this peer leave its role.
//! INV-5: see `accepts_from`.
//! INV-4: when the configuration moves (`membership` R1), the peer reacts at the end of the
//! step, in one place: a learner whose own role in the configuration in force no longer
//! matches the way it learns goes LOOKING (and rejoins as what it now is); a leader disconnects
//! learners the committed configuration dropped or changed, and leaves if it dropped the
//! leader itself (R6); a peer that applied a configuration without itself is removed: it stays
//! LOOKING and silent for good.

pub(crate) mod core;
#[cfg(test)]
mod initial_sync_tests;
mod jitter;
mod looking;
pub(crate) mod members;
mod members_io;
#[cfg(test)]
mod tests;
mod transfer;

use crate::config::Config;
use crate::durable::DurableState;
use crate::election::Election;
use crate::error::StepError;
use crate::history::History;
use crate::io::{Action, Input};
use crate::leader::Leader;
use crate::learner::Learner;
use crate::membership::{MemberRole, Membership};
use crate::message::{Message, RequestError};
use crate::sync_plan::SyncPlan;
use crate::types::{Epoch, Role, ServerId, Zxid};

use self::core::{ClientOp, Core, Next};
use self::members::Members;

/// The role-specific state.
#[derive(Debug)]
enum RoleState {
    Looking(Election),
    Leading(Leader),
    Learning(Learner),
}

/// One ZAB server as a deterministic state machine.
#[derive(Debug)]
pub struct Peer {
    core: Core,
    role: RoleState,
}

impl Peer {
    /// A peer starting from what its driver loaded from disk; it starts LOOKING.
    ///
    /// The committed configuration is the one `durable` loaded from the snapshot, else the
    /// bootstrap one of `config` (`members` and `addresses`); configuration txns of the log
    /// tail are in force on top of it. A peer the committed configuration does not list is
    /// refused: `NotAMember` for a bootstrap configuration, `Removed` for a replicated one.
    pub fn new(config: Config, durable: DurableState, now_ms: u64) -> Result<Peer, StepError> {
        let committed = durable
            .membership
            .clone()
            .unwrap_or_else(|| Membership::bootstrap(&config.members, &config.addresses));
        if !committed.members.contains_key(&config.sid) {
            return Err(match committed.version {
                Zxid::ZERO => StepError::NotAMember(config.sid),
                version => StepError::Removed {
                    sid: config.sid,
                    version,
                },
            });
        }
        let members = Members::new(committed, &durable.log_tail)?;
        if durable.accepted_epoch < durable.current_epoch {
            return Err(StepError::InconsistentDurableState(format!(
                "acceptedEpoch {} is below currentEpoch {}",
                durable.accepted_epoch, durable.current_epoch
            )));
        }
        let log = History::from_durable(&durable)?;
        let core = Core::new(
            config,
            members,
            log,
            durable.accepted_epoch,
            durable.current_epoch,
            durable.needs_initial_sync,
            now_ms,
        );
        let election = Election::new(&core.cfg, core.vote, core.votes(), now_ms);
        let mut peer = Peer {
            core,
            role: RoleState::Looking(election),
        };
        peer.enter_looking("start")?;
        Ok(peer)
    }

    /// Feeds one input (INV-3).
    pub fn step(&mut self, input: Input) -> Result<(), StepError> {
        let next = match input {
            Input::Tick { now_ms } => {
                self.core.now_ms = self.core.now_ms.max(now_ms);
                self.on_tick()?
            }
            Input::Message { from, msg } => {
                // Anything from `from` shows it can be reached again (`looking` INV-12).
                self.core.unreachable.remove(&from);
                self.on_message(from, msg)?
            }
            Input::ConnectionLost { peer } => self.on_connection_lost(peer),
            Input::PeerUnreachable { peer } => {
                self.core.unreachable.insert(peer);
                // The last voter we waited for may be gone: decide now (`looking` INV-12).
                self.try_decide()?;
                Next::Stay
            }
            Input::LogPersisted { upto } => {
                self.core.log.on_persisted(upto);
                match &mut self.role {
                    RoleState::Leading(l) => l.on_persisted(&mut self.core)?,
                    RoleState::Learning(l) => l.on_persisted(&mut self.core),
                    RoleState::Looking(_) => Next::Stay,
                }
            }
            Input::SnapshotInstalled { zxid, membership } => {
                self.core.log.snapshot_installed(zxid);
                self.core.members.on_snapshot(zxid, membership);
                self.core.members_moved();
                self.core.last_applied = zxid;
                self.core.last_committed = zxid;
                match &mut self.role {
                    RoleState::Learning(l) => l.on_snapshot_installed(&mut self.core, zxid),
                    RoleState::Leading(_) | RoleState::Looking(_) => Next::Stay,
                }
            }
            Input::SnapshotSaved { zxid, bytes } => {
                self.core.log.on_snapshot_saved(zxid, bytes);
                Next::Stay
            }
            Input::LogPurged { first_zxid } => {
                self.core.log.purge(first_zxid);
                Next::Stay
            }
            Input::ClientWrite {
                request_id,
                payload,
            } => self.on_client(ClientOp::Write(request_id, payload))?,
            Input::ClientSync { request_id } => self.on_client(ClientOp::Sync(request_id))?,
            Input::ChangeMembership { request_id, change } => {
                self.on_client(ClientOp::Change(request_id, change))?
            }
            Input::TransferLeadership { target } => self.on_transfer(target),
        };
        if let Next::Leave(why) = next {
            self.enter_looking(why)?;
        }
        if std::mem::take(&mut self.core.members_moved) {
            self.on_members_moved()?;
        }
        self.check_watch();
        Ok(())
    }

    /// True once this peer applied a configuration without itself (R6).
    pub fn is_removed(&self) -> bool {
        !self
            .core
            .members
            .committed()
            .members
            .contains_key(&self.core.sid())
    }

    /// The configuration in force (the newest in the log, `membership` R1).
    pub fn membership(&self) -> &Membership {
        self.core.members.in_force()
    }

    /// The newest committed (applied) configuration.
    pub fn committed_membership(&self) -> &Membership {
        self.core.members.committed()
    }

    /// Takes the actions emitted since the last call, in order.
    pub fn take_actions(&mut self) -> Vec<Action> {
        self.core.take_actions()
    }

    fn on_tick(&mut self) -> Result<Next, StepError> {
        match &mut self.role {
            RoleState::Looking(_) => {
                self.looking_tick()?;
                Ok(Next::Stay)
            }
            RoleState::Leading(l) => l.on_tick(&mut self.core),
            RoleState::Learning(l) => Ok(l.on_tick(&mut self.core)),
        }
    }

    fn on_message(&mut self, from: ServerId, msg: Message) -> Result<Next, StepError> {
        if !self.accepts_from(from) {
            tracing::debug!(%from, "message from a stranger dropped");
            return Ok(Next::Stay);
        }
        if let Message::Notification(n) = msg {
            self.share_membership(from, n.config_version);
            self.on_notification(from, n)?;
            return Ok(Next::Stay);
        }
        if let Message::Membership(m) = msg {
            return Ok(self.on_membership(from, m));
        }
        if let Message::Transfer { nominee } = msg {
            return self.on_transfer_notice(from, nominee);
        }
        match &mut self.role {
            RoleState::Looking(_) => {
                tracing::debug!(%from, "looking: quorum message dropped");
                Ok(Next::Stay)
            }
            RoleState::Leading(l) => l.on_message(&mut self.core, from, msg),
            RoleState::Learning(l) => l.on_message(&mut self.core, from, msg),
        }
    }

    fn on_connection_lost(&mut self, peer: ServerId) -> Next {
        match &mut self.role {
            RoleState::Leading(l) => {
                l.on_connection_lost(peer);
                Next::Stay
            }
            RoleState::Learning(l) if l.leader == peer => {
                Next::Leave("learner: connection to the leader lost")
            }
            _ => Next::Stay,
        }
    }

    fn on_client(&mut self, op: ClientOp) -> Result<Next, StepError> {
        match &mut self.role {
            RoleState::Looking(_) => {
                self.core
                    .fail_op(op, RequestError::NotLeader { leader: None });
                Ok(Next::Stay)
            }
            RoleState::Leading(l) => l.on_client(&mut self.core, op),
            RoleState::Learning(l) => {
                l.on_client(&mut self.core, op);
                Ok(Next::Stay)
            }
        }
    }

    /// Leaves the current role (INV-1) and starts a new LOOKING period.
    fn enter_looking(&mut self, why: &str) -> Result<(), StepError> {
        tracing::debug!(sid = %self.core.sid(), why, "going LOOKING");
        if self.core.needs_initial_sync {
            tracing::info!(
                sid = %self.core.sid(),
                why,
                "data dir needs an initial sync: not voting, looking for a leader to sync from \
                 as a non-voting learner"
            );
        }
        let election = Election::new(
            &self.core.cfg,
            self.core.self_vote(),
            self.core.votes(),
            self.core.now_ms,
        );
        let old = std::mem::replace(&mut self.role, RoleState::Looking(election));
        match old {
            RoleState::Leading(l) => l.leave(&mut self.core),
            RoleState::Learning(l) => l.leave(&mut self.core),
            RoleState::Looking(_) => {}
        }
        self.core.last_committed = self.core.last_applied;
        self.start_election()
    }

    /// Becomes LEADING, FOLLOWING or OBSERVING for `leader`.
    fn enter_role(&mut self, leader: ServerId) -> Result<(), StepError> {
        self.core.hint = None;
        let epoch = self.core.current_epoch;
        if leader == self.core.sid() {
            self.core.push(Action::RoleChanged {
                role: Role::Leading,
                leader: Some(leader),
                epoch,
            });
            let (l, next) = Leader::start(&mut self.core)?;
            self.role = RoleState::Leading(l);
            if let Next::Leave(why) = next {
                self.enter_looking(why)?;
            }
            return Ok(());
        }
        let observer = self.learns_as_observer();
        let role = if observer {
            Role::Observing
        } else {
            Role::Following
        };
        self.core.push(Action::RoleChanged {
            role,
            leader: Some(leader),
            epoch,
        });
        self.role = RoleState::Learning(Learner::start(&mut self.core, leader, observer));
        Ok(())
    }

    /// How this peer learns from a leader: an uninitialized participant as an observer until
    /// its first sync (B9); a joining member as a follower that does not vote until the leader
    /// promotes it (R5); an observer, or a server the configuration in force does not list,
    /// as an observer.
    fn learns_as_observer(&self) -> bool {
        match self.core.members.in_force().role_of(self.core.sid()) {
            Some(MemberRole::Participant) => self.core.needs_initial_sync,
            Some(MemberRole::Joining) => false,
            Some(MemberRole::Observer) | None => true,
        }
    }

    /// The role this peer plays.
    pub fn role(&self) -> Role {
        match &self.role {
            RoleState::Looking(_) => Role::Looking,
            RoleState::Leading(_) => Role::Leading,
            RoleState::Learning(l) if l.observer => Role::Observing,
            RoleState::Learning(_) => Role::Following,
        }
    }

    /// The leader this peer follows or is, when known.
    pub fn leader(&self) -> Option<ServerId> {
        match &self.role {
            RoleState::Looking(_) => None,
            RoleState::Leading(_) => Some(self.core.sid()),
            RoleState::Learning(l) => Some(l.leader),
        }
    }

    /// The durable acceptedEpoch (as of the actions emitted so far).
    pub fn accepted_epoch(&self) -> Epoch {
        self.core.accepted_epoch
    }

    /// The durable currentEpoch (as of the actions emitted so far).
    pub fn current_epoch(&self) -> Epoch {
        self.core.current_epoch
    }

    /// The last logged (appended) zxid.
    pub fn last_logged_zxid(&self) -> Zxid {
        self.core.log.last()
    }

    /// The last zxid known committed.
    pub fn last_committed_zxid(&self) -> Zxid {
        self.core.last_committed
    }

    /// The last zxid applied (`Apply` emitted, or loaded from a snapshot).
    pub fn last_applied_zxid(&self) -> Zxid {
        self.core.last_applied
    }

    /// Client requests (and, at a leader, learners' forwarded ones) held until the role is
    /// established: proposed or forwarded all at once then. A driver limiting its intake
    /// counts them with what it already sent.
    pub fn queued_requests(&self) -> usize {
        match &self.role {
            RoleState::Looking(_) => 0,
            RoleState::Leading(l) => l.queued.len(),
            RoleState::Learning(l) => l.queued.len(),
        }
    }

    /// True for an established leader, or a learner after UPTODATE.
    pub fn is_serving(&self) -> bool {
        match &self.role {
            RoleState::Looking(_) => false,
            RoleState::Leading(l) => l.is_serving(),
            RoleState::Learning(l) => l.is_serving(),
        }
    }

    /// On a leader, how it synced learner `sid` (for tests and diagnostics).
    pub fn sync_plan_of(&self, sid: ServerId) -> Option<SyncPlan> {
        match &self.role {
            RoleState::Leading(l) => l.plan_of(sid),
            _ => None,
        }
    }

    /// The epoch being established or led (leader), or followed (learner, once known).
    pub fn epoch(&self) -> Epoch {
        match &self.role {
            RoleState::Leading(l) => l.epoch(),
            RoleState::Learning(l) => l.new_epoch,
            RoleState::Looking(_) => self.core.current_epoch,
        }
    }

    /// Checks the internal invariants of every module (the INV lines of the core, the log view,
    /// the leader and its learner handlers, the learner) on the current state; `Err` names the
    /// broken one. Cheap enough for the simulation to call after every step, so a corrupted
    /// state is caught where it happens rather than many steps later.
    pub fn check_invariants(&self) -> Result<(), String> {
        let c = &self.core;
        if c.accepted_epoch < c.current_epoch {
            return Err(format!(
                "core INV-1: acceptedEpoch {} below currentEpoch {}",
                c.accepted_epoch, c.current_epoch
            ));
        }
        if c.last_applied > c.last_committed {
            return Err(format!(
                "core INV-2: applied {} beyond committed {}",
                c.last_applied, c.last_committed
            ));
        }
        if c.last_applied > c.log.last() {
            return Err(format!(
                "core INV-2: applied {} beyond the log's last {}",
                c.last_applied,
                c.log.last()
            ));
        }
        c.log.check(c.last_applied)?;
        c.members.check(c.last_applied)?;
        if c.cfg.members != c.members.in_force().learner_types() {
            return Err("core INV-4: cfg.members is not the configuration in force".into());
        }
        match &self.role {
            RoleState::Looking(_) => Ok(()),
            RoleState::Leading(l) => l.check(c),
            RoleState::Learning(l) => l.check(c),
        }
    }

    /// The election round.
    pub fn election_round(&self) -> u64 {
        self.core.round
    }

    /// True while the data dir needs its first sync from a leader: the peer does not vote
    /// (`DurableState` INV-1, PITFALLS B9).
    pub fn needs_initial_sync(&self) -> bool {
        self.core.needs_initial_sync
    }
}
