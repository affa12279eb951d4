//! A peer that changes its vote or leaves its role after another peer decided on it
//! (PITFALLS B6, rolling restarts): it does not lead for followers of the vote it gave up
//! (`election` INV-10), a learner that chose it looks again when it hears the new vote or
//! round (`looking` INV-14), and it never answers with the role it is leaving (`looking`
//! INV-15). Each peer of {1, 2, 3} is driven alone, fed by hand; every vote has the same
//! epoch and zxid, so the higher sid is the better vote.

use crate::config::Config;
use crate::durable::DurableState;
use crate::io::{Action, Input};
use crate::message::{ElectionState, Message, Notification, Vote};
use crate::types::{Epoch, LearnerType, Role, ServerId, Zxid};
use crate::Peer;

use super::s;

fn peer(sid: u64) -> Peer {
    let members = (1..=3)
        .map(|n| (ServerId(n), LearnerType::Participant))
        .collect();
    let mut cfg = Config::new(ServerId(sid), members);
    cfg.finalize_wait_ms = 40;
    let mut p = Peer::new(cfg, DurableState::default(), 0).unwrap();
    p.take_actions();
    p
}

fn vote(leader: u64) -> Vote {
    Vote {
        leader: s(leader),
        zxid: Zxid::ZERO,
        peer_epoch: Epoch(0),
    }
}

fn notify(p: &mut Peer, from: u64, leader: u64, round: u64, state: ElectionState) {
    let n = Notification {
        vote: vote(leader),
        round,
        state,
        config_version: Zxid::ZERO,
    };
    let msg = Message::Notification(n);
    p.step(Input::Message { from: s(from), msg }).unwrap();
}

/// LOOKING notifications `p` sent to `to` since the last call, as (vote's leader, round).
fn looking_sent(p: &mut Peer, to: u64) -> Vec<(ServerId, u64)> {
    p.take_actions()
        .into_iter()
        .filter_map(|a| match a {
            Action::Send {
                to: t,
                msg: Message::Notification(n),
            } if t == s(to) && n.state == ElectionState::Looking => Some((n.vote.leader, n.round)),
            _ => None,
        })
        .collect()
}

/// Seeds 5 and 27 of the B6 scenario: node 1 follows node 2's vote, node 2 then adopts node
/// 3's better vote and tells node 3, and only then hears node 1 FOLLOWING its old vote. Node
/// 2 leading would count its vote twice in round 1 (for itself and for node 3), and node 3,
/// leading with that vote and nobody to follow it, would wait out initLimit.
#[test]
fn a_peer_that_adopted_a_better_vote_does_not_lead_for_followers_of_its_old_one() {
    let mut p = peer(2);
    notify(&mut p, 3, 3, 1, ElectionState::Looking);
    assert_eq!(
        looking_sent(&mut p, 3),
        vec![(s(3), 1)],
        "node 3 hears the new vote"
    );
    notify(&mut p, 1, 2, 1, ElectionState::Following);
    assert_eq!(p.role(), Role::Looking, "led for a vote it gave up");
    // The finalize wait for node 3's vote, held by nodes 2 and 3, ends as usual.
    p.step(Input::Tick { now_ms: 40 }).unwrap();
    assert_eq!((p.role(), p.leader()), (Role::Following, Some(s(3))));
}

/// Node 1, following node 2 and not serving yet, hears node 2 vote for node 3 in the round
/// node 1 decided in: node 2 will not lead that round, so node 1 looks again at once (with a
/// new round) instead of sending FOLLOWERINFO to it until initLimit. A resend of node 2's
/// old vote, a notification of an older round, or another peer's better vote (node 1 did not
/// decide early, `looking` INV-13) keeps it following.
#[test]
fn a_learner_whose_chosen_leader_votes_for_another_peer_looks_again() {
    let mut p = peer(1);
    notify(&mut p, 2, 2, 2, ElectionState::Looking);
    p.step(Input::Tick { now_ms: 40 }).unwrap();
    assert_eq!((p.role(), p.leader()), (Role::Following, Some(s(2))));
    assert_eq!(p.core.round, 2);
    notify(&mut p, 2, 2, 2, ElectionState::Looking);
    notify(&mut p, 2, 3, 1, ElectionState::Looking);
    notify(&mut p, 3, 3, 2, ElectionState::Looking);
    assert_eq!((p.role(), p.leader()), (Role::Following, Some(s(2))));
    p.take_actions();
    notify(&mut p, 2, 3, 2, ElectionState::Looking);
    assert_eq!(p.role(), Role::Looking);
    assert_eq!(
        looking_sent(&mut p, 3),
        vec![(s(1), 3)],
        "a new round starts"
    );
}

/// Node 1 follows node 2 (not serving yet), and node 2 reports LOOKING in a later round, even
/// for itself: it left whatever it did in node 1's round, so node 1 looks again.
#[test]
fn a_learner_whose_chosen_leader_looks_in_a_later_round_looks_again() {
    let mut p = peer(1);
    notify(&mut p, 2, 2, 1, ElectionState::Looking);
    p.step(Input::Tick { now_ms: 40 }).unwrap();
    assert_eq!((p.role(), p.leader()), (Role::Following, Some(s(2))));
    notify(&mut p, 2, 2, 2, ElectionState::Looking);
    assert_eq!(p.role(), Role::Looking);
}

/// Seed 40 of the B6 scenario: node 2 decided early without node 3 (reported unreachable, but
/// already restarted) and leads, not serving yet; node 3's better LOOKING vote sends it back
/// to LOOKING (INV-13). Its answer to node 3 is the new round's LOOKING vote, never a LEADING
/// claim: node 3 would join that claim (`election` INV-8) and wait for node 2 until initLimit.
#[test]
fn a_leader_that_leaves_for_a_notification_does_not_answer_it_as_leader() {
    let mut p = peer(2);
    p.step(Input::PeerUnreachable { peer: s(3) }).unwrap();
    notify(&mut p, 1, 2, 1, ElectionState::Looking);
    assert_eq!(p.role(), Role::Leading, "decided early");
    p.take_actions();
    notify(&mut p, 3, 3, 1, ElectionState::Looking);
    assert_eq!(p.role(), Role::Looking);
    let to_3: Vec<ElectionState> = p
        .take_actions()
        .into_iter()
        .filter_map(|a| match a {
            Action::Send {
                to,
                msg: Message::Notification(n),
            } if to == s(3) => Some(n.state),
            _ => None,
        })
        .collect();
    assert_eq!(to_3, vec![ElectionState::Looking]);
}
