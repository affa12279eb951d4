//! Fast leader election (DESIGN §3.2): vote order and the tally of one LOOKING period.
//!
//! INV-1: votes order by `(peer_epoch, zxid, leader)` (ZooKeeper's `totalOrderPredicate`); a
//! peer only ever replaces its vote by a better one within a round, or by the best of its own
//! and the sender's when it joins a higher round.
//! INV-2: only participants' votes are tallied; observers' and uninitialized peers'
//! notifications are answered, never counted, and neither ever decides from LOOKING votes
//! (an uninitialized peer, PITFALLS B9, acts as an observer until its first sync).
//! INV-3: a LOOKING tally decides only after a quorum held the peer's own vote and no better
//! vote arrived for `finalize_wait_ms` — or at once when the vote is a transfer's nominee's
//! and the nominee itself holds it (`crate::transfer` T3), or at once when every voter that
//! can still vote already holds it (`peer::looking` INV-12).
//! INV-4: a peer joins an established leader from FOLLOWING/LEADING notifications only when a
//! quorum of participants report the same `(leader, peer_epoch)` and the leader itself reports
//! LEADING with it (ZOOKEEPER-1732: compare only leader id and epoch).
//! INV-9: a voting peer whose own vote a quorum (itself included) reports FOLLOWING, decided in
//! its own round, leads (`Election::lead_for_followers`; ZooKeeper's election has the rule).
//! INV-8: ... or when the leader itself reports LEADING with an epoch at or above this peer's
//! currentEpoch, from any member (joining members included). A peer whose configuration is
//! behind the leader's (it missed a change, or holds one the leader truncated) may count too
//! few of the supporters as participants to see a quorum, and would stay LOOKING for good.
//! Following a leader never decides anything (the leader's own quorums do), so this is safe;
//! a claim can only be stale if a later epoch deposed that leader, and then the leader steps
//! down within syncLimit and this peer looks again.
//! INV-10: a peer that has told the others a better vote than its own in a round never leads
//! in that round for followers of its own vote (INV-9 counts this peer only while its current
//! vote is still its own, as ZooKeeper tallies its own current vote). The better candidate may
//! already count this peer's vote in its quorum and lead; leading too would count one vote
//! for two leaders of the same round, and the candidate, with no follower and no LOOKING
//! voter to tell it (`peer::looking` INV-6), would wait out initLimit. The peers that follow
//! the old vote learn the change from the vote's broadcast (`peer::looking` INV-14).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::config::Config;
use crate::message::{ElectionState, Notification, Vote};
use crate::types::{Epoch, ServerId};

/// Compares two votes in election order (INV-1).
pub fn vote_cmp(a: &Vote, b: &Vote) -> Ordering {
    (a.peer_epoch, a.zxid, a.leader).cmp(&(b.peer_epoch, b.zxid, b.leader))
}

/// What a notification made the tally decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tally {
    /// Nothing new.
    Nothing,
    /// Our vote changed: tell every participant.
    VoteChanged,
    /// Join the established leader of `round`.
    Join {
        /// The leader.
        leader: ServerId,
        /// Its round.
        round: u64,
        /// The epoch it leads.
        epoch: Epoch,
    },
}

/// The state of one LOOKING period.
#[derive(Clone, Debug)]
pub(crate) struct Election {
    /// This round's LOOKING votes of participants, ours included.
    recv: BTreeMap<ServerId, Vote>,
    /// Notifications of peers that are FOLLOWING or LEADING.
    established: BTreeMap<ServerId, Notification>,
    /// When a quorum held our vote: decide at this time unless a better vote comes.
    pub(crate) finalize_at_ms: Option<u64>,
    /// When to resend our notification.
    pub(crate) resend_at_ms: u64,
    /// Current resend interval.
    pub(crate) backoff_ms: u64,
    /// This peer votes (a participant with an initialized data dir).
    i_vote: bool,
    /// The nominee of a leader transfer, if this period started with one (`transfer` T3).
    pub(crate) nominee: Option<ServerId>,
}

impl Election {
    /// A new LOOKING period; `my_vote` is recorded when this peer votes (`i_vote`).
    pub(crate) fn new(cfg: &Config, my_vote: Vote, i_vote: bool, now_ms: u64) -> Election {
        let mut recv = BTreeMap::new();
        if i_vote {
            recv.insert(cfg.sid, my_vote);
        }
        let backoff_ms = cfg.finalize_wait_ms.max(1);
        Election {
            recv,
            established: BTreeMap::new(),
            finalize_at_ms: None,
            resend_at_ms: now_ms.saturating_add(backoff_ms),
            backoff_ms,
            i_vote,
            nominee: None,
        }
    }

    /// Records our own (possibly changed) vote and re-checks the finalize condition.
    pub(crate) fn set_my_vote(&mut self, cfg: &Config, vote: Vote, now_ms: u64) {
        if self.i_vote {
            self.recv.insert(cfg.sid, vote);
        }
        self.check_quorum(cfg, vote, now_ms);
    }

    /// Starts or cancels the finalize wait depending on whether a quorum holds `vote`.
    fn check_quorum(&mut self, cfg: &Config, vote: Vote, now_ms: u64) {
        let holders: Vec<ServerId> = self
            .recv
            .iter()
            .filter(|(_, v)| **v == vote)
            .map(|(s, _)| *s)
            .collect();
        if self.i_vote && cfg.is_quorum(holders.iter()) {
            // The nominee of a transfer voting for itself with a quorum behind it: decide now
            // (`transfer` T3).
            // Without the nominee's own vote, do not decide for it while the hint lasts: it
            // may have crashed, and following it would cost initLimit.
            let for_nominee = self.nominee == Some(vote.leader);
            let nominee_agrees = for_nominee && self.recv.get(&vote.leader) == Some(&vote);
            if nominee_agrees {
                self.finalize_at_ms = Some(now_ms);
            } else if for_nominee {
                self.finalize_at_ms = None;
            } else if self.finalize_at_ms.is_none() {
                self.finalize_at_ms = Some(now_ms.saturating_add(cfg.finalize_wait_ms));
            }
        } else {
            self.finalize_at_ms = None;
        }
    }

    /// True when the finalize wait is over and a quorum still holds `vote`.
    pub(crate) fn decided(&self, now_ms: u64) -> bool {
        self.finalize_at_ms.is_some_and(|at| now_ms >= at)
    }

    /// True while a quorum holds our vote and nothing forbids deciding for it (the finalize
    /// wait runs, or is over).
    pub(crate) fn quorum_holds(&self) -> bool {
        self.finalize_at_ms.is_some()
    }

    /// True when `sid` voted `vote` in this round (its LOOKING notification is tallied).
    pub(crate) fn holds(&self, sid: ServerId, vote: &Vote) -> bool {
        self.recv.get(&sid) == Some(vote)
    }

    /// Tallies a notification from `from`; `round` and `vote` are ours and may be updated.
    /// `init` is the vote for ourselves.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_notification(
        &mut self,
        cfg: &Config,
        round: &mut u64,
        vote: &mut Vote,
        init: Vote,
        from: ServerId,
        n: Notification,
        now_ms: u64,
    ) -> Tally {
        // The peer hears only known senders (members in force or committed, `Peer` INV-5); a
        // leader's claim counts from any of them, even one its configuration in force dropped
        // in a change that may never commit (INV-8).
        match n.state {
            ElectionState::Observing | ElectionState::Uninitialized => Tally::Nothing,
            ElectionState::Looking if !is_participant(cfg, from) => Tally::Nothing,
            ElectionState::Looking => self.on_looking(cfg, round, vote, init, from, n, now_ms),
            ElectionState::Following | ElectionState::Leading => {
                self.established.insert(from, n);
                if n.vote.leader == cfg.sid && n.round == *round {
                    return self.lead_for_followers(cfg, n, init, *vote);
                }
                self.join_established(cfg, n, init.peer_epoch)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_looking(
        &mut self,
        cfg: &Config,
        round: &mut u64,
        vote: &mut Vote,
        init: Vote,
        from: ServerId,
        n: Notification,
        now_ms: u64,
    ) -> Tally {
        if !self.i_vote {
            return Tally::Nothing;
        }
        let mut changed = false;
        if n.round > *round {
            *round = n.round;
            self.recv.clear();
            self.finalize_at_ms = None;
            *vote = if vote_cmp(&n.vote, &init) == Ordering::Greater {
                n.vote
            } else {
                init
            };
            changed = true;
        } else if n.round < *round {
            return Tally::Nothing;
        } else if vote_cmp(&n.vote, vote) == Ordering::Greater {
            *vote = n.vote;
            changed = true;
        }
        self.recv.insert(cfg.sid, *vote);
        self.recv.insert(from, n.vote);
        if changed {
            // A better vote restarts the finalize wait (INV-3).
            self.finalize_at_ms = None;
        }
        self.check_quorum(cfg, *vote, now_ms);
        if changed {
            Tally::VoteChanged
        } else {
            Tally::Nothing
        }
    }

    /// INV-9: a quorum (this peer included) already FOLLOWING this peer with exactly its own
    /// vote, decided in this peer's round: lead. They decided for it and wait for it; without
    /// this, a peer that missed their LOOKING votes (it was still in a role when they were
    /// sent) would stay LOOKING until they give up after initLimit. ZooKeeper's election has
    /// the same rule. Leading decides nothing by itself: discovery still needs a quorum of
    /// them. This peer counts itself only while `current`, its vote of this round, is still
    /// `mine` (INV-10).
    fn lead_for_followers(
        &self,
        cfg: &Config,
        n: Notification,
        mine: Vote,
        current: Vote,
    ) -> Tally {
        if !self.i_vote || n.vote != mine || current != mine {
            return Tally::Nothing;
        }
        let mut holders: Vec<ServerId> = self
            .established
            .iter()
            .filter(|(_, m)| {
                m.state == ElectionState::Following && m.vote == mine && m.round == n.round
            })
            .map(|(s, _)| *s)
            .collect();
        holders.push(cfg.sid);
        if cfg.is_quorum(holders.iter()) {
            Tally::Join {
                leader: cfg.sid,
                round: n.round,
                epoch: mine.peer_epoch,
            }
        } else {
            Tally::Nothing
        }
    }

    /// INV-4: join when a quorum reports the same established leader and it claims LEADING;
    /// or when the leader itself claims LEADING for an epoch above `my_epoch` (INV-8).
    fn join_established(&self, cfg: &Config, n: Notification, my_epoch: Epoch) -> Tally {
        let key = (n.vote.leader, n.vote.peer_epoch);
        if key.0 == cfg.sid {
            return Tally::Nothing;
        }
        let same: Vec<ServerId> = self
            .established
            .iter()
            .filter(|(_, m)| (m.vote.leader, m.vote.peer_epoch) == key)
            .map(|(s, _)| *s)
            .collect();
        let leader_claims = self.established.get(&key.0).is_some_and(|m| {
            m.state == ElectionState::Leading && (m.vote.leader, m.vote.peer_epoch) == key
        });
        if leader_claims && (cfg.is_quorum(same.iter()) || key.1 >= my_epoch) {
            Tally::Join {
                leader: key.0,
                round: n.round,
                epoch: key.1,
            }
        } else {
            Tally::Nothing
        }
    }
}

/// True when `sid` is a voting member.
pub(crate) fn is_participant(cfg: &Config, sid: ServerId) -> bool {
    cfg.members.get(&sid) == Some(&crate::types::LearnerType::Participant)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{LearnerType, Zxid};

    fn cfg(sid: u64) -> Config {
        let members = (1..=3)
            .map(|s| (ServerId(s), LearnerType::Participant))
            .collect();
        let mut c = Config::new(ServerId(sid), members);
        c.finalize_wait_ms = 200;
        c
    }
    fn vote(leader: u64, zxid: u64, epoch: u32) -> Vote {
        Vote {
            leader: ServerId(leader),
            zxid: Zxid(zxid),
            peer_epoch: Epoch(epoch),
        }
    }
    fn looking(v: Vote, round: u64) -> Notification {
        Notification {
            vote: v,
            round,
            state: ElectionState::Looking,
            config_version: Zxid::ZERO,
        }
    }

    #[test]
    fn vote_order_is_epoch_then_zxid_then_sid() {
        assert_eq!(
            vote_cmp(&vote(1, 9, 2), &vote(3, 100, 1)),
            Ordering::Greater
        );
        assert_eq!(vote_cmp(&vote(1, 9, 2), &vote(3, 9, 2)), Ordering::Less);
        assert_eq!(vote_cmp(&vote(1, 10, 2), &vote(3, 9, 2)), Ordering::Greater);
    }

    #[test]
    fn adopts_better_vote_and_finalizes_after_wait() {
        let c = cfg(1);
        let init = vote(1, 5, 1);
        let (mut round, mut v) = (1, init);
        let mut e = Election::new(&c, v, true, 0);
        let t = e.on_notification(
            &c,
            &mut round,
            &mut v,
            init,
            ServerId(3),
            looking(vote(3, 7, 1), 1),
            10,
        );
        assert_eq!(t, Tally::VoteChanged);
        assert_eq!(v, vote(3, 7, 1));
        assert!(e.decided(210) && !e.decided(209));
    }

    #[test]
    fn higher_round_resets_tally() {
        let c = cfg(1);
        let init = vote(1, 9, 1);
        let (mut round, mut v) = (1, init);
        let mut e = Election::new(&c, v, true, 0);
        let t = e.on_notification(
            &c,
            &mut round,
            &mut v,
            init,
            ServerId(2),
            looking(vote(2, 1, 1), 4),
            0,
        );
        assert_eq!((t, round, v), (Tally::VoteChanged, 4, init));
        assert!(e.finalize_at_ms.is_none());
    }

    #[test]
    fn joins_established_leader_only_with_its_own_claim() {
        let c = cfg(3);
        let init = vote(3, 1, 1);
        let (mut round, mut v) = (1, init);
        let mut e = Election::new(&c, v, true, 0);
        let fol = Notification {
            vote: vote(1, 9, 2),
            round: 7,
            state: ElectionState::Following,
            config_version: Zxid::ZERO,
        };
        let t = e.on_notification(&c, &mut round, &mut v, init, ServerId(2), fol, 0);
        assert_eq!(t, Tally::Nothing);
        let lead = Notification {
            state: ElectionState::Leading,
            ..fol
        };
        let t = e.on_notification(&c, &mut round, &mut v, init, ServerId(1), lead, 0);
        assert_eq!(
            t,
            Tally::Join {
                leader: ServerId(1),
                round: 7,
                epoch: Epoch(2)
            }
        );
    }

    /// INV-10 (PITFALLS B6 schedule): peer 2 adopts peer 3's better vote in round 4 (and peer 3
    /// may now count it), then peer 1's FOLLOWING notification for peer 2's old vote arrives.
    /// Peer 2 must not lead for it: it keeps voting for peer 3.
    #[test]
    fn does_not_lead_for_followers_of_a_vote_it_gave_up() {
        let c = cfg(2);
        let mine = vote(2, 9, 2);
        let (mut round, mut v) = (4, mine);
        let mut e = Election::new(&c, v, true, 0);
        let t = e.on_notification(
            &c,
            &mut round,
            &mut v,
            mine,
            ServerId(3),
            looking(vote(3, 9, 2), 4),
            0,
        );
        assert_eq!((t, v), (Tally::VoteChanged, vote(3, 9, 2)));
        let following = Notification {
            vote: mine,
            round: 4,
            state: ElectionState::Following,
            config_version: Zxid::ZERO,
        };
        let t = e.on_notification(&c, &mut round, &mut v, mine, ServerId(1), following, 0);
        assert_eq!(t, Tally::Nothing, "led for a vote it no longer holds");
        assert_eq!(v, vote(3, 9, 2));
        // Peer 3's own vote and ours are a quorum: the election goes on for peer 3.
        assert!(e.decided(200));
    }

    #[test]
    fn leads_when_a_quorum_follows_its_own_vote() {
        let c = cfg(1);
        let mine = vote(1, 9, 2);
        let (mut round, mut v) = (4, mine);
        let mut e = Election::new(&c, v, true, 0);
        let following = |v: Vote| Notification {
            vote: v,
            round: 4,
            state: ElectionState::Following,
            config_version: Zxid::ZERO,
        };
        // A follower of another vote of ours (a stale zxid) does not count.
        let stale = following(vote(1, 8, 2));
        let t = e.on_notification(&c, &mut round, &mut v, mine, ServerId(2), stale, 0);
        assert_eq!(t, Tally::Nothing);
        let t = e.on_notification(
            &c,
            &mut round,
            &mut v,
            mine,
            ServerId(3),
            following(mine),
            0,
        );
        assert_eq!(
            t,
            Tally::Join {
                leader: ServerId(1),
                round: 4,
                epoch: Epoch(2)
            }
        );
    }
}
