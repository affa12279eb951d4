//! Unit tests of the intake limit (`admission` INV-2, INV-3, INV-5).

#![allow(clippy::unwrap_used, clippy::panic)]

use super::*;
use std::time::Duration as Instant;
use zab_core::Epoch;

fn sid(n: u64) -> ServerId {
    ServerId(n)
}

/// The room once every follower past the mark has been there for the grace.
fn leader_room(voters: &[u64], backlogs: &[(u64, usize)], uncommitted: usize) -> usize {
    let mut a = Intake::new(400);
    let t0 = Instant::ZERO;
    leader_room_in(&mut a, t0, voters, backlogs, uncommitted);
    leader_room_in(&mut a, t0 + SLOW_GRACE, voters, backlogs, uncommitted)
}

fn leader_room_in(
    a: &mut Intake<Instant>,
    now: Instant,
    voters: &[u64],
    backlogs: &[(u64, usize)],
    uncommitted: usize,
) -> usize {
    let voters: Vec<ServerId> = voters.iter().map(|n| sid(*n)).collect();
    let backlog = |s: ServerId| {
        backlogs
            .iter()
            .find(|(n, _)| sid(*n) == s)
            .map_or(0, |(_, b)| *b)
    };
    let d = Demand {
        me: sid(1),
        role: Role::Leading,
        leader: Some(sid(1)),
        voters: &voters,
        uncommitted,
        queued: 0,
        backlog,
        now,
    };
    a.room_for(&d)
}

#[test]
fn a_leader_takes_what_its_best_placed_quorum_can_absorb() {
    // High water 300; three messages per write.
    assert_eq!(leader_room(&[1, 2, 3], &[], 0), 100);
    // One follower far behind for the grace: the other one is the quorum.
    assert_eq!(leader_room(&[1, 2, 3], &[(2, 10_000), (3, 100)], 0), 66);
    // Both past the mark: hold.
    assert_eq!(leader_room(&[1, 2, 3], &[(2, 300), (3, 301)], 0), 0);
    // Two messages still owed per uncommitted proposal count against every follower: 120
    // owed, so follower 3 (100 queued) has 80 messages left before the mark.
    assert_eq!(leader_room(&[1, 2, 3], &[(3, 100)], 60), 26);
    // Five voters: the second best follower decides...
    let five = [(2, 0), (3, 350), (4, 100), (5, 400)];
    assert_eq!(leader_room(&[1, 2, 3, 4, 5], &five, 0), 66);
    // ... unless one still under the mark would pass it (the last quarter of the outbox is
    // kept for heartbeats and sync traffic).
    let five = [(2, 0), (3, 290), (4, 100), (5, 400)];
    assert_eq!(leader_room(&[1, 2, 3, 4, 5], &five, 0), 3);
}

#[test]
fn a_follower_past_the_mark_limits_the_intake_only_for_the_grace() {
    let mut a = Intake::new(400);
    let t0 = Instant::ZERO;
    let behind = [(2, 340)];
    // Past the mark: the intake holds, so its heartbeats still fit...
    assert_eq!(leader_room_in(&mut a, t0, &[1, 2, 3], &behind, 0), 0);
    let t1 = t0 + SLOW_GRACE / 2;
    assert_eq!(leader_room_in(&mut a, t1, &[1, 2, 3], &behind, 0), 0);
    // ... until it has been there for the grace: then it is left to overflow.
    let t2 = t0 + SLOW_GRACE;
    assert_eq!(leader_room_in(&mut a, t2, &[1, 2, 3], &behind, 0), 100);
    // Back under the mark: it limits again (50 left, three messages per write), and a new
    // stay past it starts a new grace.
    assert_eq!(leader_room_in(&mut a, t2, &[1, 2, 3], &[(2, 250)], 0), 16);
    assert_eq!(leader_room_in(&mut a, t2, &[1, 2, 3], &behind, 0), 0);
}

#[test]
fn a_lone_voter_and_a_looking_peer_have_no_limit() {
    assert_eq!(leader_room(&[1], &[], 5_000), usize::MAX);
    let voters = [sid(1), sid(2), sid(3)];
    let d = Demand {
        me: sid(2),
        role: Role::Looking,
        leader: None,
        voters: &voters,
        uncommitted: 0,
        queued: 0,
        backlog: |_| 10_000,
        now: Instant::ZERO,
    };
    assert_eq!(Intake::new(400).room_for(&d), usize::MAX);
}

#[test]
fn a_learner_takes_what_its_link_to_the_leader_can_absorb() {
    let voters = [sid(1), sid(2), sid(3)];
    let d = |backlog: usize| Demand {
        me: sid(2),
        role: Role::Following,
        leader: Some(sid(1)),
        voters: &voters,
        uncommitted: 0,
        queued: 0,
        backlog: move |s: ServerId| if s == sid(1) { backlog } else { 99_999 },
        now: Instant::ZERO,
    };
    assert_eq!(Intake::new(400).room_for(&d(100)), 100);
    assert_eq!(Intake::new(400).room_for(&d(300)), 0);
}

fn request(n: u64) -> Message {
    Message::Sync {
        request_id: zab_core::RequestId(n),
    }
}

#[test]
fn learners_requests_wait_in_order_and_end_with_their_connection() {
    let mut a = Intake::<Instant>::new(400);
    a.room = 1;
    assert!(a.admit(sid(2), request(1)).is_some());
    assert!(a.admit(sid(2), Message::Ping { round: 0 }).is_some());
    assert!(a.admit(sid(2), request(2)).is_none());
    assert!(a.admit(sid(3), request(3)).is_none());
    // Room again, but others wait: a new one queues behind them.
    a.room = 5;
    assert!(a.admit(sid(2), request(4)).is_none());
    a.forget(sid(3));
    assert!(a.can_release());
    let ids: Vec<_> = a
        .release()
        .map(|(from, m)| match m {
            Message::Sync { request_id } => (from.0, request_id.0),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(ids, [(2, 2), (2, 4)]);
    assert_eq!(a.room(), 3);
    assert!(!a.can_release());
}

#[test]
fn uncommitted_counts_within_the_epoch() {
    assert_eq!(
        uncommitted(Zxid::new(Epoch(3), 10), Zxid::new(Epoch(3), 4)),
        6
    );
    assert_eq!(
        uncommitted(Zxid::new(Epoch(3), 10), Zxid::new(Epoch(2), 99)),
        10
    );
    assert_eq!(
        uncommitted(Zxid::new(Epoch(3), 4), Zxid::new(Epoch(3), 4)),
        0
    );
}

#[test]
fn requests_the_core_holds_count_as_sent() {
    let voters = [sid(1), sid(2), sid(3)];
    let demand = |me: u64, role: Role, queued: usize| Demand {
        me: sid(me),
        role,
        leader: Some(sid(1)),
        voters: &voters,
        uncommitted: 0,
        queued,
        backlog: |_: ServerId| 0,
        now: Instant::ZERO,
    };
    let leader = |queued: usize| demand(1, Role::Leading, queued);
    // High water 300, three messages per write: 100 writes, less those the core holds.
    assert_eq!(Intake::<Instant>::new(400).room_for(&leader(0)), 100);
    assert_eq!(Intake::<Instant>::new(400).room_for(&leader(60)), 40);
    assert_eq!(Intake::<Instant>::new(400).room_for(&leader(100)), 0);
    let learner = |queued: usize| demand(2, Role::Following, queued);
    assert_eq!(Intake::<Instant>::new(400).room_for(&learner(100)), 50);
    assert_eq!(Intake::<Instant>::new(400).room_for(&learner(150)), 0);
}
