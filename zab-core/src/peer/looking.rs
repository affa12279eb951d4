//! The peer's LOOKING behaviour: rounds, notifications, resends with backoff, answers to other
//! peers' notifications in every role, and the decision.
//!
//! INV-1: every LOOKING period starts a new round with a vote for ourselves
//! `(currentEpoch, last logged zxid, sid)` — or for a transfer's nominee (`crate::transfer` T2)
//! — and tells every participant.
//! INV-2: a peer that is not LOOKING answers every LOOKING sender with its current vote and
//! state, so restarted peers and observers learn the established leader (B6); a LOOKING
//! participant answers LOOKING senders of a lower round, LOOKING senders of its round with a
//! worse vote (INV-7) and LOOKING observers; nobody answers a notification that is not
//! LOOKING, so answers never ping-pong.
//! INV-4: a leader or learner that sees a vote carrying a currentEpoch above the epoch it
//! leads or follows leaves its role: a later epoch already passed discovery (this also catches
//! a leader resumed after a long pause before any tick tells it the time).
//! INV-5 (PITFALLS B9): a peer whose data dir needs an initial sync reports the state
//! `Uninitialized`: nobody counts its vote, it never decides, and every voter answers it (as it
//! answers an observer) so it learns an established leader and syncs from it.
//! INV-6 (PITFALLS B7): a prospective leader that sees a participant LOOKING while it still
//! waits for its FOLLOWERINFO quorum past `Config::epoch_wait_ticks` re-elects (leader
//! discovery INV-6).
//! INV-8 (`membership` R6): a removed peer sends no notification, answers none and never
//! decides.
//! INV-9: a LOOKING peer that is not a participant of its own configuration in force (a
//! joining member, or one whose removal it logged) reports `Uninitialized` like B9's peers:
//! peers whose configuration still lists it as a participant must neither count its vote nor
//! elect it, since it would never lead (it does not vote for itself) and they would re-elect it
//! round after round.
//! INV-10: LOOKING notifications go to every participant and every joining member of the
//! configuration in force and of the committed one: a member that missed the promotion of a joining member learns the
//! leader only from the leader's own answer (INV-4 of `election` needs its LEADING claim).
//! INV-11: a LOOKING participant does not answer a LOOKING member that is joining in its
//! configuration (unless it says it is uninitialized): that member may be a participant of
//! its own newer configuration, and the two would answer each other's votes for ever.
//! INV-3: while LOOKING, notifications are resent on a timer that doubles up to `tick_ms`
//! (plus up to a quarter of it as jitter, from the generator seeded by `Config::jitter_seed`,
//! `jitter` INV-1) until a decision.
//! INV-7: a LOOKING participant also answers a LOOKING participant of its own round whose vote
//! is worse than its own. The sender adopts the better vote (and answers nothing, its vote is
//! now ours), so this cannot ping-pong. It matters after a leader dies: the first survivor to
//! go LOOKING tells the others while they are still FOLLOWING (they answer with their old
//! state and keep no record of its vote); when they go LOOKING in the same round, nobody would
//! tell them the better vote before the first resend (`finalize_wait_ms` later), and the
//! election would take two finalize waits instead of one.
//! INV-12 (early decision): a LOOKING participant decides without waiting `finalize_wait_ms`
//! when a quorum of the configuration in force holds its vote (the condition that starts the
//! wait, `election` INV-3) and every other participant of the configuration in force and of
//! the committed one either holds that same vote in this round or is *unreachable*: the driver
//! reported it unreachable (`Input::PeerUnreachable`) and nothing arrived from it since
//! (any message from it makes it reachable again). The finalize wait exists only so that a
//! better vote still on its way can win; when every voter that could send one has voted, or
//! cannot be heard, none is coming. This cannot break ZAB's safety: the deciding quorum is the
//! same as after the wait, and each of its members holds the vote only because it compared it
//! with its own (currentEpoch, last zxid) and found it at least as good (`election` INV-1), so
//! the leader's history still covers every txn a quorum acknowledged; discovery and
//! synchronization still run as always. Deciding early on a wrong "unreachable" (a stale mark,
//! a peer that is up but silent) is therefore only a liveness matter, like an ended wait: a
//! better vote that arrives later meets established peers and joins them (`election` INV-4),
//! or, when the voters that agreed with us change their mind first, INV-13 applies.
//! A peer we never heard lost (never connected) counts as reachable, which keeps the wait.
//! INV-13: a leader or learner that decided early (INV-12) and does not serve yet goes back
//! to LOOKING when a voter it counted unreachable then reports LOOKING with a vote better than
//! its own: the voter is back (a fast restart), and the voters that agreed with us may now
//! follow its vote, leaving a prospective leader without a quorum until `initLimit`. Leaving
//! a role is always safe.
//! INV-14: a learner that does not serve yet goes back to LOOKING when the leader it chose
//! reports LOOKING in a later round than the one the learner decided in, or in that round
//! with a vote for another peer. Within a round a vote only gets better (`election` INV-1),
//! so a peer that has voted for another never holds its own vote again in that round, and
//! neither decides for itself nor leads for followers of its old vote (`election` INV-10);
//! a peer in a later round has left whatever it did in the learner's round, possibly before
//! any FOLLOWERINFO reached it (so the learner never saw a connection close). Either way the
//! learner would otherwise send FOLLOWERINFO to a peer that does not lead for it, until
//! initLimit. It happens when the learner decided on the leader's vote (after the finalize
//! wait, or early) before a better vote reached them both. An older round's notification is
//! stale and ignored; so is the leader's own vote in the learner's round (it may simply not
//! have decided yet).
//! INV-15: a leader or learner that leaves its role for a notification (INV-4, INV-6, INV-13,
//! INV-14) answers it only with its new LOOKING state (the new round's broadcast, INV-1),
//! never with the role it is leaving: a LEADING claim sent in the very step the claimant
//! stops leading would let a LOOKING peer join it (`election` INV-8) and wait for it until
//! initLimit.

use std::cmp::Ordering;

use crate::election::{is_participant, vote_cmp, Election, Tally};
use crate::error::StepError;
use crate::membership::MemberRole;
use crate::message::{ElectionState, Message, Notification};
use crate::types::{Epoch, ServerId};

use super::{Peer, RoleState};

impl Peer {
    /// Starts a new round (INV-1).
    pub(super) fn start_election(&mut self) -> Result<(), StepError> {
        self.core.round += 1;
        self.core.vote = self.core.initial_vote();
        let now = self.core.now_ms;
        let vote = self.core.vote;
        let nominee = self.core.hint.map(|h| h.vote.leader);
        if let RoleState::Looking(e) = &mut self.role {
            e.nominee = nominee;
            e.set_my_vote(&self.core.cfg, vote, now);
        }
        let epoch = self.core.current_epoch;
        self.core.push(crate::io::Action::RoleChanged {
            role: crate::types::Role::Looking,
            leader: None,
            epoch,
        });
        self.broadcast_notification();
        self.try_decide()
    }

    fn my_state(&self) -> ElectionState {
        let observer = self.core.members.in_force().role_of(self.core.sid())
            == Some(crate::membership::MemberRole::Observer);
        match &self.role {
            RoleState::Looking(_) if self.core.needs_initial_sync => ElectionState::Uninitialized,
            // Not a participant of its own configuration in force (joining, or a removal is
            // logged): it must not be elected by peers that still count it (INV-9).
            RoleState::Looking(_) if !observer && !self.core.votes() => {
                ElectionState::Uninitialized
            }
            RoleState::Looking(_) => ElectionState::Looking,
            RoleState::Leading(_) => ElectionState::Leading,
            RoleState::Learning(l) if l.observer => ElectionState::Observing,
            RoleState::Learning(_) => ElectionState::Following,
        }
    }

    /// Sends our notification to every other participant, and to joining members: another
    /// peer's newer configuration may have promoted one, and it may lead; of the configuration
    /// in force and of the committed one, since a change in force here may never commit and
    /// the server it drops may lead (INV-10).
    pub(super) fn broadcast_notification(&mut self) {
        if self.is_removed() {
            return;
        }
        let n = self.core.notification(self.my_state());
        let me = self.core.sid();
        let members = &self.core.members;
        let targets: std::collections::BTreeSet<ServerId> =
            [members.in_force(), members.committed()]
                .into_iter()
                .flat_map(|m| m.members.iter())
                .filter(|(sid, m)| **sid != me && m.role != crate::membership::MemberRole::Observer)
                .map(|(sid, _)| *sid)
                .collect();
        for to in targets {
            self.core.send(to, Message::Notification(n));
        }
    }

    /// Resends and the finalize decision (INV-3).
    pub(super) fn looking_tick(&mut self) -> Result<(), StepError> {
        let now = self.core.now_ms;
        let cap = self
            .core
            .cfg
            .tick_ms
            .max(self.core.cfg.finalize_wait_ms)
            .max(1);
        let jitter = self.core.jitter.below(cap / 4 + 1);
        if self.hint_expired() {
            return self.start_election();
        }
        let RoleState::Looking(e) = &mut self.role else {
            return Ok(());
        };
        if now >= e.resend_at_ms {
            e.backoff_ms = e.backoff_ms.saturating_mul(2).min(cap);
            e.resend_at_ms = now.saturating_add(e.backoff_ms).saturating_add(jitter);
            self.broadcast_notification();
        }
        self.try_decide()
    }

    /// Decides when the finalize wait is over, or at once when no better vote can come
    /// (INV-12).
    pub(super) fn try_decide(&mut self) -> Result<(), StepError> {
        let RoleState::Looking(e) = &self.role else {
            return Ok(());
        };
        let early = self.every_voter_heard(e);
        if self.is_removed() || !(early || e.decided(self.core.now_ms)) {
            return Ok(());
        }
        self.core.decided_without.clear();
        if early && !e.decided(self.core.now_ms) {
            tracing::debug!(vote = ?self.core.vote, unreachable = ?self.core.unreachable,
                "every voter that can vote agrees: deciding without the finalize wait");
            self.core.decided_without = self.core.unreachable.clone();
        }
        let leader = self.core.vote.leader;
        if leader == self.core.sid() && self.core.install_pending() {
            // Lead only once the state machine holds the snapshot our log starts from.
            return Ok(());
        }
        self.enter_role(leader)
    }

    /// INV-12: a quorum holds our vote and every other voter of the configuration in force
    /// and of the committed one either holds it in this round or is unreachable.
    fn every_voter_heard(&self, e: &Election) -> bool {
        if !e.quorum_holds() {
            return false;
        }
        let me = self.core.sid();
        let vote = self.core.vote;
        let members = &self.core.members;
        [members.in_force(), members.committed()]
            .into_iter()
            .flat_map(|m| m.members.iter())
            .filter(|(sid, m)| **sid != me && m.role == MemberRole::Participant)
            .all(|(sid, _)| self.core.unreachable.contains(sid) || e.holds(*sid, &vote))
    }

    /// A notification from `from`, in any role (INV-2).
    pub(super) fn on_notification(
        &mut self,
        from: ServerId,
        n: Notification,
    ) -> Result<(), StepError> {
        if self.is_removed() {
            return Ok(());
        }
        let now = self.core.now_ms;
        let sender_votes = is_participant(&self.core.cfg, from);
        let RoleState::Looking(e) = &mut self.role else {
            return self.on_notification_in_role(from, n, sender_votes);
        };
        let init = self.core.initial_vote();
        let before = self.core.round;
        let tally = e.on_notification(
            &self.core.cfg,
            &mut self.core.round,
            &mut self.core.vote,
            init,
            from,
            n,
            now,
        );
        // Answer a LOOKING sender that is behind (an older round, or a worse vote in our
        // round: INV-7), or that cannot vote (an observer or an uninitialized peer learning);
        // those never answer, so two LOOKING peers cannot ping-pong forever (INV-5). A member
        // joining in our configuration is not answered as a non-voter: its own (newer)
        // configuration may have promoted it, and then it answers our vote as a voter would,
        // and we it, for ever (INV-11).
        let i_vote = self.core.votes();
        let joining = self.core.members.in_force().role_of(from)
            == Some(crate::membership::MemberRole::Joining);
        let cannot_vote = (!sender_votes && !joining) || n.state == ElectionState::Uninitialized;
        let looking = matches!(
            n.state,
            ElectionState::Looking | ElectionState::Uninitialized
        );
        let worse_vote = tally == Tally::Nothing
            && n.round == self.core.round
            && vote_cmp(&self.core.vote, &n.vote) == Ordering::Greater;
        if i_vote && looking && (n.round < before || cannot_vote || worse_vote) {
            let reply = self.core.notification(ElectionState::Looking);
            self.core.send(from, Message::Notification(reply));
        }
        match tally {
            Tally::Nothing => {}
            Tally::VoteChanged => self.broadcast_notification(),
            Tally::Join {
                leader,
                round,
                epoch,
            } => {
                self.core.round = round;
                self.core.vote = n.vote;
                tracing::debug!(%leader, %epoch, "joining an established leader");
                return self.enter_role(leader);
            }
        }
        self.try_decide()
    }

    /// INV-14: `n`, LOOKING from a voter, comes from the leader this learner chose, either in
    /// a later round, or in the round the learner decided in with a vote for another peer.
    fn chosen_leader_moved_on(&self, from: ServerId, n: &Notification) -> bool {
        let RoleState::Learning(l) = &self.role else {
            return false;
        };
        let round = self.core.round;
        l.leader == from && (n.round > round || (n.round == round && n.vote.leader != from))
    }

    /// A notification from `from` while leading or learning: leave the role for a LOOKING
    /// voter with a better vote we decided without (INV-13), for our chosen leader moving on
    /// (INV-14), for a LOOKING voter without an epoch quorum (INV-6), or when the role is stale
    /// (INV-4); and answer a LOOKING sender (INV-2) with the state we are in after that
    /// (INV-15).
    fn on_notification_in_role(
        &mut self,
        from: ServerId,
        n: Notification,
        sender_votes: bool,
    ) -> Result<(), StepError> {
        let looking = matches!(
            n.state,
            ElectionState::Looking | ElectionState::Uninitialized
        );
        if let Some(why) = self.leaves_role_for(from, &n, sender_votes) {
            tracing::info!(%from, vote = ?n.vote, why, "leaving the role");
            self.enter_looking(why)?;
            if sender_votes {
                // The new round's broadcast answered it.
                return Ok(());
            }
        }
        if looking {
            let reply = self.core.notification(self.my_state());
            self.core.send(from, Message::Notification(reply));
        }
        Ok(())
    }

    /// Why `n` from `from` makes this leader or learner leave its role, if it does.
    fn leaves_role_for(
        &self,
        from: ServerId,
        n: &Notification,
        sender_votes: bool,
    ) -> Option<&'static str> {
        if n.state == ElectionState::Looking && sender_votes {
            let better = vote_cmp(&n.vote, &self.core.vote) == Ordering::Greater;
            let stale = self.core.decided_without.contains(&from) && better;
            let serving = match &self.role {
                RoleState::Leading(l) => l.is_serving(),
                RoleState::Learning(l) => l.is_serving(),
                RoleState::Looking(_) => true,
            };
            if stale && !serving {
                return Some("decided early without a voter that has a better vote (INV-13)");
            }
            if !serving && self.chosen_leader_moved_on(from, n) {
                return Some("learner: the chosen leader moved on to another vote or round");
            }
            if let RoleState::Leading(l) = &self.role {
                if l.abandons_epoch_for(&self.core, from) {
                    return Some(
                        "leader: a voter is LOOKING and no epoch quorum within epoch_wait",
                    );
                }
            }
        }
        let epoch = self.epoch();
        // An uninitialized peer's vote carries no weight, not even to depose (INV-5).
        let counts = n.state != ElectionState::Uninitialized;
        // Someone's currentEpoch is above ours: a later epoch passed discovery, so this role
        // is stale (INV-4).
        (counts && epoch > Epoch(0) && n.vote.peer_epoch > epoch).then_some("a later epoch exists")
    }
}
