//! The state every role shares: configuration, clock, epochs, the log view, the commit and apply
//! points, the current vote, and the outgoing action queue.
//!
//! INV-1: `accepted_epoch >= current_epoch`; both change in memory only together with the
//! `Persist*Epoch` action that makes them durable (the driver runs it before any later action).
//! INV-2: `last_applied <= last_committed`; `Apply` actions leave in strictly ascending zxid
//! order, each for a txn this peer logged, and only for committed txns.
//! INV-3: `last_committed` is only ever raised by a leader's commit decision (a quorum of
//! durable acks, a NEWLEADER quorum, or the leader's COMMIT/INFORM/UPTODATE); on leaving a role
//! it falls back to `last_applied`.
//! INV-4: `cfg.members` is the learner type of every member of `members.in_force()`: every
//! quorum, vote and election uses the configuration in force (`membership` R1).

use std::collections::BTreeSet;

use bytes::Bytes;

use crate::config::Config;
use crate::error::StepError;
use crate::history::History;
use crate::io::Action;
use crate::membership::{MembershipChange, MembershipError};
use crate::message::{ElectionState, Message, Notification, RequestError, Vote};
use crate::transfer::{Hint, Watch};
use crate::types::{Epoch, RequestId, ServerId, Txn, Zxid};

use super::jitter::Jitter;
use super::members::Members;

/// A client request a role could not start yet, or could not finish.
#[derive(Clone, Debug)]
pub(crate) enum ClientOp {
    /// A write.
    Write(RequestId, Bytes),
    /// A linearizable read point.
    Sync(RequestId),
    /// A membership change.
    Change(RequestId, MembershipChange),
}

/// Shared peer state; see the module docs.
#[derive(Debug)]
pub(crate) struct Core {
    /// The configuration; `cfg.members` always mirrors the membership in force (INV-4).
    pub(crate) cfg: Config,
    /// The committed and logged configurations (`members` INV-1/INV-2).
    pub(crate) members: Members,
    /// Set when the configuration in force or the committed one changed; the peer reacts
    /// (and reports `Action::MembershipChanged`) at the end of the step.
    pub(crate) members_moved: bool,
    pub(crate) now_ms: u64,
    pub(crate) accepted_epoch: Epoch,
    pub(crate) current_epoch: Epoch,
    pub(crate) log: History,
    pub(crate) last_committed: Zxid,
    pub(crate) last_applied: Zxid,
    /// Election round (ZooKeeper's logical clock).
    pub(crate) round: u64,
    /// The vote this peer reports.
    pub(crate) vote: Vote,
    /// The data dir needs an initial sync before this peer may vote (`DurableState` INV-1).
    pub(crate) needs_initial_sync: bool,
    actions: Vec<Action>,
    /// The election's resend jitter, the core's only randomness.
    pub(crate) jitter: Jitter,
    /// The nominee of a leader transfer this peer votes for first (`transfer` T2, T4).
    pub(crate) hint: Option<Hint>,
    /// On an old leader after its handover: the transfer whose outcome it still owes.
    pub(crate) watch: Option<Watch>,
    /// Peers the driver reported unreachable (`Input::PeerUnreachable`) that sent nothing
    /// since: they cannot vote in a round now (`looking` INV-12).
    pub(crate) unreachable: BTreeSet<ServerId>,
    /// The voters that were unreachable when this peer last decided without the finalize
    /// wait (`looking` INV-13); emptied when it goes LOOKING.
    pub(crate) decided_without: BTreeSet<ServerId>,
}

impl Core {
    pub(crate) fn new(
        mut cfg: Config,
        members: Members,
        log: History,
        accepted_epoch: Epoch,
        current_epoch: Epoch,
        needs_initial_sync: bool,
        now_ms: u64,
    ) -> Core {
        let base = log.base();
        let vote = Vote {
            leader: cfg.sid,
            zxid: log.last(),
            peer_epoch: current_epoch,
        };
        let jitter = Jitter::new(cfg.sid, cfg.jitter_seed);
        cfg.members = members.in_force().learner_types();
        let initial = Action::MembershipChanged {
            in_force: members.in_force().clone(),
            committed: members.committed().clone(),
        };
        Core {
            cfg,
            members,
            members_moved: false,
            now_ms,
            accepted_epoch,
            current_epoch,
            log,
            last_committed: base,
            last_applied: base,
            round: 0,
            vote,
            needs_initial_sync,
            actions: vec![initial],
            jitter,
            hint: None,
            watch: None,
            unreachable: BTreeSet::new(),
            decided_without: BTreeSet::new(),
        }
    }

    pub(crate) fn sid(&self) -> ServerId {
        self.cfg.sid
    }

    /// True when this peer votes: a participant whose data dir is initialized (B9).
    pub(crate) fn votes(&self) -> bool {
        !self.needs_initial_sync && crate::election::is_participant(&self.cfg, self.cfg.sid)
    }

    /// Durably records that the first sync is complete: from now on this peer may vote.
    pub(crate) fn persist_initialized(&mut self) {
        self.needs_initial_sync = false;
        self.push(Action::PersistInitialized);
    }

    pub(crate) fn take_actions(&mut self) -> Vec<Action> {
        std::mem::take(&mut self.actions)
    }

    pub(crate) fn push(&mut self, action: Action) {
        self.actions.push(action);
    }

    pub(crate) fn send(&mut self, to: ServerId, msg: Message) {
        self.actions.push(Action::Send { to, msg });
    }

    /// `epoch_wait_ticks` in milliseconds (`None` when the rule is disabled).
    pub(crate) fn epoch_wait_ms(&self) -> Option<u64> {
        (self.cfg.epoch_wait_ticks > 0).then(|| {
            self.cfg
                .tick_ms
                .saturating_mul(u64::from(self.cfg.epoch_wait_ticks))
        })
    }

    /// How long a transfer's nominee hint lasts (`transfer` T4): one tick, and at least two
    /// finalize waits; a live nominee answers well within it.
    pub(crate) fn hint_ms(&self) -> u64 {
        self.cfg
            .tick_ms
            .max(self.cfg.finalize_wait_ms.saturating_mul(2))
    }

    /// `init_limit` in milliseconds.
    pub(crate) fn init_ms(&self) -> u64 {
        self.cfg
            .tick_ms
            .saturating_mul(u64::from(self.cfg.init_limit_ticks))
    }

    /// `sync_limit` in milliseconds.
    pub(crate) fn sync_ms(&self) -> u64 {
        self.cfg
            .tick_ms
            .saturating_mul(u64::from(self.cfg.sync_limit_ticks))
    }

    /// The vote for ourselves: `(current_epoch, last logged zxid, sid)` (INV-4 of history).
    pub(crate) fn self_vote(&self) -> Vote {
        Vote {
            leader: self.sid(),
            zxid: self.log.last(),
            peer_epoch: self.current_epoch,
        }
    }

    /// The first vote of a LOOKING period: the nominee of a live transfer hint, else our own
    /// (`transfer` T2: the hint was only kept if the nominee's history is at least ours).
    pub(crate) fn initial_vote(&self) -> Vote {
        match self.hint {
            Some(h) if self.now_ms < h.until_ms => h.vote,
            _ => self.self_vote(),
        }
    }

    /// Keeps `nominee` as this peer's first vote for one tick (`transfer` T4), if its `(epoch, zxid)` is at
    /// or above our own and it is a participant (`transfer` T2); returns whether it was kept.
    pub(crate) fn set_hint(&mut self, nominee: Vote) -> bool {
        let mine = (self.current_epoch, self.log.last());
        let ok = (nominee.peer_epoch, nominee.zxid) >= mine
            && crate::election::is_participant(&self.cfg, nominee.leader);
        if ok {
            self.hint = Some(Hint {
                vote: nominee,
                until_ms: self.now_ms.saturating_add(self.hint_ms()),
            });
        }
        ok
    }

    pub(crate) fn notification(&self, state: ElectionState) -> Notification {
        Notification {
            vote: self.vote,
            round: self.round,
            state,
            config_version: self.members.committed().version,
        }
    }

    /// True while a snapshot received by SNAP is being installed (the log was reset to it but
    /// the state machine is not there yet).
    pub(crate) fn install_pending(&self) -> bool {
        self.log.base() > self.last_applied
    }

    /// Durably promises `epoch` (INV-1).
    pub(crate) fn persist_accepted(&mut self, epoch: Epoch) {
        self.accepted_epoch = epoch;
        self.push(Action::PersistAcceptedEpoch(epoch));
    }

    /// Durably records that this peer now follows or leads `epoch`; from now on it reports
    /// that epoch in its vote (ZOOKEEPER-1732).
    pub(crate) fn persist_current(&mut self, epoch: Epoch) {
        if self.accepted_epoch < epoch {
            self.persist_accepted(epoch);
        }
        self.current_epoch = epoch;
        self.vote.peer_epoch = epoch;
        self.push(Action::PersistCurrentEpoch(epoch));
    }

    /// Logs a txn (asynchronously durable); a configuration txn is in force from now on.
    pub(crate) fn append(&mut self, txn: Txn) -> Result<(), StepError> {
        self.log.append(txn.clone())?;
        if self.members.on_append(&txn)? {
            self.members_moved();
        }
        self.push(Action::AppendLog(txn));
        Ok(())
    }

    /// Durably drops every logged txn after `zxid`; a configuration among them is no longer
    /// in force.
    pub(crate) fn truncate_log(&mut self, zxid: Zxid) {
        self.push(Action::TruncateLog { zxid });
        self.log.truncate(zxid);
        if self.members.on_truncate(zxid) {
            self.members_moved();
        }
    }

    /// Re-derives `cfg.members` (INV-4), reports the change in the action stream where it
    /// happened (so a snapshot captured after it carries the new committed configuration),
    /// and flags it for the peer's reaction at the end of the step.
    pub(crate) fn members_moved(&mut self) {
        self.cfg.members = self.members.in_force().learner_types();
        self.members_moved = true;
        self.push(Action::MembershipChanged {
            in_force: self.members.in_force().clone(),
            committed: self.members.committed().clone(),
        });
    }

    /// Applies every logged txn in `(last_applied, upto]`, in order (INV-2), and raises the
    /// commit point to `upto`.
    pub(crate) fn apply_upto(&mut self, upto: Zxid) -> Result<(), StepError> {
        if upto <= self.last_applied {
            return Ok(());
        }
        let txns = self.log.txns_in(self.last_applied, upto).ok_or_else(|| {
            StepError::Invariant(format!(
                "txns in ({}, {}] are not all held in memory",
                self.last_applied, upto
            ))
        })?;
        for txn in txns {
            self.last_applied = txn.zxid;
            if self.members.on_apply(&txn) {
                self.members_moved();
            }
            self.push(Action::Apply(txn));
        }
        self.last_committed = self.last_committed.max(upto);
        self.log
            .trim(self.last_applied, self.cfg.committed_log_window);
        Ok(())
    }

    /// Answers a client op that cannot be served.
    pub(crate) fn fail_op(&mut self, op: ClientOp, err: RequestError) {
        match op {
            ClientOp::Write(request_id, _) => self.push(Action::WriteDone {
                request_id,
                outcome: Err(err),
            }),
            ClientOp::Sync(request_id) => self.push(Action::SyncDone {
                request_id,
                outcome: Err(err),
            }),
            ClientOp::Change(request_id, _) => self.push(Action::MembershipDone {
                request_id,
                outcome: Err(match err {
                    RequestError::NotLeader { leader } => MembershipError::NotLeader { leader },
                    RequestError::QuorumLost => MembershipError::QuorumLost,
                    RequestError::EpochExhausted => MembershipError::EpochExhausted,
                }),
            }),
        }
    }
}

/// What a role handler asks of the peer after an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Keep the role.
    Stay,
    /// Leave the role and go back to LOOKING.
    Leave(&'static str),
}
