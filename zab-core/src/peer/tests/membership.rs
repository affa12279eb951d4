//! Membership changes (`crate::membership`): grow with a joining member that is promoted once
//! synced, one change at a time, removal of a follower and of the leader, a change lost with
//! its leader, and a restart that takes the configuration from its log.

use crate::durable::DurableState;
use crate::io::{Action, Input};
use crate::membership::{MemberRole, Membership, MembershipChange, MembershipError};
use crate::message::{ElectionState, Message};
use crate::types::{LearnerType, RequestId, Role, ServerId, Zxid};

use super::{s, Cluster};

impl Cluster {
    pub fn change(&mut self, sid: ServerId, id: u64, change: MembershipChange) {
        let input = Input::ChangeMembership {
            request_id: RequestId(id),
            change,
        };
        self.input(sid, input);
    }

    pub fn change_done(&self, sid: ServerId, id: u64) -> Option<Result<Zxid, MembershipError>> {
        self.nodes[&sid].done.iter().find_map(|a| match a {
            Action::MembershipDone {
                request_id,
                outcome,
            } if *request_id == RequestId(id) => Some(outcome.clone()),
            _ => None,
        })
    }

    /// Starts `sid` on an empty data dir that learned `membership` from a helper member.
    pub fn join(&mut self, sid: ServerId, membership: Membership) {
        let d = DurableState {
            needs_initial_sync: true,
            membership: Some(membership),
            ..DurableState::default()
        };
        self.start(sid, d);
    }

    fn committed(&self, sid: ServerId) -> &Membership {
        self.nodes[&sid].peer.committed_membership()
    }
}

fn add(sid: u64) -> MembershipChange {
    MembershipChange::Add {
        sid: s(sid),
        learner_type: LearnerType::Participant,
        address: format!("server-{sid}"),
    }
}

fn established(participants: u64) -> Cluster {
    let mut c = Cluster::new(participants, 0);
    c.run_until(5_000, |c| c.leader().is_some() && c.all_serving());
    c
}

/// Adds `sid` through the leader and starts it; returns the version of the add.
fn grow(c: &mut Cluster, sid: u64, id: u64) -> Zxid {
    let leader = c.leader().unwrap();
    c.change(leader, id, add(sid));
    c.run_until(2_000, |c| c.change_done(leader, id).is_some());
    let version = c.change_done(leader, id).unwrap().unwrap();
    let m = c.committed(leader).clone();
    assert_eq!(m.version, version);
    assert_eq!(m.role_of(s(sid)), Some(MemberRole::Joining));
    c.join(s(sid), m);
    version
}

#[test]
fn an_added_follower_syncs_without_a_vote_then_is_promoted_and_counts() {
    let mut c = established(3);
    let added = grow(&mut c, 4, 1);
    c.run_until(5_000, |c| {
        c.nodes
            .values()
            .all(|n| n.peer.committed_membership().role_of(s(4)) == Some(MemberRole::Participant))
    });
    let promoted = c.committed(s(3)).version;
    assert!(promoted > added, "the promotion is a change of its own");
    c.run_until(5_000, |c| c.nodes[&s(4)].peer.role() == Role::Following);
    // Four voters: with two of the original three down, no quorum; with one down, 3 of 4.
    c.crash(s(1));
    c.write(s(3), 10, "after-grow");
    c.run_until(2_000, |c| c.write_done(s(3), 10).is_some());
    assert!(c.write_done(s(3), 10).unwrap().is_ok());
    c.run_until(2_000, |c| {
        c.nodes[&s(4)].applied.len() == c.nodes[&s(3)].applied.len()
    });
    c.check_prefix();
}

/// The leader promotes a joining member once it acked NEWLEADER and was sent UPTODATE (R5),
/// which may still be in flight: the member must then already be initialized on disk, or a
/// participant that never votes (it reports `Uninitialized` until some leader syncs it) counts
/// in every quorum (sim seed 18059: the promoted member lost its leader before UPTODATE, and
/// with one more participant not voting no quorum could elect).
#[test]
fn a_joining_member_the_leader_may_promote_is_initialized_on_disk() {
    let mut c = established(3);
    grow(&mut c, 4, 1);
    let leader = c.leader().unwrap();
    let in_flight = |c: &Cluster| {
        c.links
            .get(&(leader, s(4)))
            .is_some_and(|q| q.iter().any(|m| matches!(m, Message::UpToDate)))
    };
    c.run_until(2_000, in_flight);
    // The leader's next tick promotes the member while its UPTODATE is still on the way.
    let now = c.now + 1;
    c.input(leader, Input::Tick { now_ms: now });
    assert_eq!(
        c.nodes[&leader].peer.membership().role_of(s(4)),
        Some(MemberRole::Participant)
    );
    assert!(in_flight(&c));
    c.crash(s(4));
    assert!(!c.durable(s(4)).needs_initial_sync);
}

#[test]
fn a_joining_member_counts_in_no_quorum_before_its_promotion() {
    let mut c = established(3);
    let leader = c.leader().unwrap();
    c.change(leader, 1, add(4));
    c.run_until(2_000, |c| c.change_done(leader, 1).is_some());
    // 4 never starts: the configuration has three voters and one joining member, so one
    // follower down still leaves a quorum (2 of 3), which a 4-voter configuration would not.
    c.crash(s(1));
    c.write(leader, 2, "w");
    c.run_until(2_000, |c| c.write_done(leader, 2).is_some());
    assert!(c.write_done(leader, 2).unwrap().is_ok());
    assert_eq!(c.committed(leader).participants().count(), 3);
}

#[test]
fn a_second_change_while_one_is_in_flight_is_refused() {
    let mut c = established(3);
    let leader = c.leader().unwrap();
    // Hold the followers' acks back: the first change stays uncommitted.
    for sid in [s(1), s(2)] {
        c.crash(sid);
    }
    c.change(leader, 1, add(4));
    c.change(leader, 2, add(5));
    assert_eq!(
        c.change_done(leader, 2),
        Some(Err(MembershipError::ChangeInFlight(
            c.nodes[&leader].peer.membership().version
        )))
    );
    assert!(c.change_done(leader, 1).is_none());
}

#[test]
fn invalid_changes_and_changes_on_a_follower_are_refused() {
    let mut c = established(3);
    let leader = c.leader().unwrap();
    c.change(leader, 1, MembershipChange::Remove { sid: s(9) });
    assert!(matches!(
        c.change_done(leader, 1),
        Some(Err(MembershipError::Invalid(_)))
    ));
    c.change(s(1), 2, add(4));
    assert_eq!(
        c.change_done(s(1), 2),
        Some(Err(MembershipError::NotLeader {
            leader: Some(leader)
        }))
    );
}

#[test]
fn a_removed_follower_is_disconnected_and_goes_silent() {
    let mut c = established(3);
    let leader = c.leader().unwrap();
    c.change(leader, 1, MembershipChange::Remove { sid: s(1) });
    c.run_until(2_000, |c| c.change_done(leader, 1).is_some());
    assert!(c.change_done(leader, 1).unwrap().is_ok());
    c.run_until(2_000, |c| c.nodes[&s(1)].peer.is_removed());
    assert_eq!(c.nodes[&s(1)].peer.role(), Role::Looking);
    let sent_before = sends(&c, s(1));
    for _ in 0..500 {
        c.tick(10);
        while c.deliver_one() {}
    }
    assert_eq!(sends(&c, s(1)), sent_before, "a removed peer sends nothing");
    // Two voters left: both are needed, and they are enough.
    c.write(leader, 2, "w");
    c.run_until(2_000, |c| c.write_done(leader, 2).is_some());
    assert!(c.write_done(leader, 2).unwrap().is_ok());
}

fn sends(c: &Cluster, sid: ServerId) -> usize {
    c.nodes[&sid]
        .trace
        .iter()
        .filter(|a| matches!(a, Action::Send { .. }))
        .count()
}

#[test]
fn a_removed_leader_answers_then_steps_down_and_the_rest_elect() {
    let mut c = established(3);
    let old = c.leader().unwrap();
    c.change(old, 1, MembershipChange::Remove { sid: old });
    c.run_until(2_000, |c| c.change_done(old, 1).is_some());
    assert!(c.change_done(old, 1).unwrap().is_ok());
    c.run_until(5_000, |c| c.leader().is_some_and(|l| l != old));
    assert!(c.nodes[&old].peer.is_removed());
    let new = c.leader().unwrap();
    c.write(new, 2, "after");
    c.run_until(2_000, |c| c.write_done(new, 2).is_some());
    assert!(c.write_done(new, 2).unwrap().is_ok());
    assert!(!c.committed(new).members.contains_key(&old));
}

#[test]
fn a_change_logged_only_by_a_crashed_leader_is_gone_and_so_is_its_configuration() {
    let mut c = established(3);
    let old = c.leader().unwrap();
    // The proposal never leaves the leader: its links are cut right after it is logged.
    c.change(old, 1, add(4));
    assert!(c.nodes[&old].peer.membership().members.contains_key(&s(4)));
    c.crash(old);
    c.run_until(5_000, |c| c.leader().is_some_and(|l| l != old));
    let new = c.leader().unwrap();
    assert!(!c.nodes[&new].peer.membership().members.contains_key(&s(4)));
    // The old leader restarts: the new leader truncates the change, and with it the
    // configuration it had in force.
    let d = c.durable(old);
    c.start(old, d);
    c.run_until(5_000, |c| c.all_serving());
    assert!(!c.nodes[&old].peer.membership().members.contains_key(&s(4)));
    c.check_prefix();
}

/// A SNAP replaces the whole log, so a configuration logged before it goes with it, even one
/// above the snapshot's zxid (`members` INV-3): here the leader of epoch 2 logs a change that
/// never leaves it, the epoch-3 leader's history ends in epoch 1, and the restarted server's
/// tail (epoch 2) is no prefix of it, so it gets a SNAP at an epoch-1 zxid (`sync_plan`
/// INV-2), below the change. The change must not stay in force after the SNAP (sim seed 10981: it stayed, and
/// the server counted quorums in a configuration no leader ever committed).
#[test]
fn a_snap_drops_a_configuration_logged_before_it_above_the_snapshot() {
    let mut c = established(3);
    let first = c.leader().unwrap();
    c.write(first, 1, "w1");
    c.run_until(2_000, |c| c.write_done(first, 1).is_some());
    c.crash(first);
    c.run_until(5_000, |c| c.leader().is_some_and(|l| l != first));
    let second = c.leader().unwrap();
    // The proposal never leaves the epoch-2 leader: its links are cut right after it is
    // logged.
    c.change(second, 2, add(4));
    assert!(c.nodes[&second]
        .peer
        .membership()
        .members
        .contains_key(&s(4)));
    let stale = c.durable(second);
    c.crash(second);
    let d = c.durable(first);
    c.start(first, d);
    c.run_until(5_000, |c| {
        c.leader().is_some_and(|l| l != second) && c.all_serving()
    });
    let third = c.leader().unwrap();
    c.start(second, stale);
    c.run_until(5_000, |c| c.all_serving());
    // A txn of epoch 3, above the dropped change, is applied everywhere.
    c.write(third, 3, "w3");
    c.run_until(2_000, |c| {
        let done = c.write_done(third, 3).and_then(Result::ok);
        done.is_some() && c.nodes[&second].applied.last().map(|t| t.zxid) == done
    });
    let snapped = c.nodes[&second]
        .trace
        .iter()
        .any(|a| matches!(a, Action::EndSnapshot { .. }));
    assert!(snapped, "the restarted server was synced by SNAP");
    let peer = &c.nodes[&second].peer;
    assert!(!peer.membership().members.contains_key(&s(4)));
    assert_eq!(peer.check_invariants(), Ok(()));
}

#[test]
fn a_restarted_peer_takes_the_configuration_in_force_from_its_log() {
    let mut c = established(3);
    let leader = c.leader().unwrap();
    c.change(leader, 1, add(4));
    c.run_until(2_000, |c| {
        c.nodes
            .values()
            .all(|n| n.peer.membership().members.contains_key(&s(4)))
    });
    c.crash(s(1));
    let d = c.durable(s(1));
    assert!(d
        .log_tail
        .iter()
        .any(|t| t.kind == crate::types::TxnKind::Membership));
    c.start(s(1), d);
    assert!(c.nodes[&s(1)].peer.membership().members.contains_key(&s(4)));
}

#[test]
fn a_snap_carries_the_committed_configuration() {
    let mut c = established(3);
    let leader = c.leader().unwrap();
    c.change(leader, 1, add(4));
    c.run_until(2_000, |c| c.change_done(leader, 1).is_some());
    // Enough writes past the leader's in-memory window that a wiped peer gets a SNAP.
    for i in 0..120 {
        c.write(leader, 100 + i, "w");
    }
    c.run_until(2_000, |c| c.write_done(leader, 219).is_some());
    c.wipe(s(1));
    c.run_until(5_000, |c| {
        c.all_serving() && !c.nodes[&s(1)].peer.needs_initial_sync()
    });
    let snapped = c.nodes[&s(1)]
        .trace
        .iter()
        .any(|a| matches!(a, Action::EndSnapshot { .. }));
    assert!(snapped, "the wiped peer was synced by SNAP");
    assert!(c.committed(s(1)).members.contains_key(&s(4)));
}

#[test]
fn peers_that_missed_a_removal_do_not_elect_the_server_being_removed() {
    let mut c = established(5);
    let old = c.leader().unwrap();
    assert_eq!(old, s(5));
    // Remove 4 while 1 and 2 are away: 3, 4 and the leader log it; the new configuration's
    // quorum (3 of {1, 2, 3, 5}) is not there, so it stays uncommitted.
    let away = [s(1), s(2)];
    let saved: Vec<_> = away.iter().map(|sid| (*sid, c.durable(*sid))).collect();
    for sid in away {
        c.crash(sid);
    }
    c.change(old, 1, MembershipChange::Remove { sid: s(4) });
    let dropped_4 =
        |c: &Cluster, sid: ServerId| !c.nodes[&sid].peer.membership().members.contains_key(&s(4));
    c.run_until(2_000, |c| dropped_4(c, s(4)) && dropped_4(c, s(3)));
    assert!(c.change_done(old, 1).is_none());
    // The leader dies; 1 and 2 come back knowing nothing of the change. 4 has the longest
    // log with the highest sid, but it is not a participant of its own configuration: it must
    // not be elected, and {1, 2, 3} elect one of themselves.
    let traced = c.nodes[&s(4)].trace.len();
    c.crash(old);
    for (sid, d) in saved {
        c.start(sid, d);
    }
    c.run_until(20_000, |c| c.leader().is_some());
    let new = c.leader().unwrap();
    assert!([s(1), s(2), s(3)].contains(&new), "elected {new}");
    // What keeps it so: 4 tells everyone it cannot be elected.
    let states: Vec<ElectionState> = c.nodes[&s(4)].trace[traced..]
        .iter()
        .filter_map(|a| match a {
            Action::Send {
                msg: Message::Notification(n),
                ..
            } => Some(n.state),
            _ => None,
        })
        .collect();
    assert!(!states.is_empty());
    assert!(
        states.iter().all(|st| *st == ElectionState::Uninitialized),
        "{states:?}"
    );
}

#[test]
fn a_member_that_was_down_through_changes_learns_the_configuration_and_follows_a_new_server() {
    let mut c = established(3);
    let down = s(1);
    let saved = c.durable(down);
    c.crash(down);
    grow(&mut c, 4, 1);
    c.run_until(5_000, |c| {
        c.committed(s(3)).role_of(s(4)) == Some(MemberRole::Participant)
            && c.nodes[&s(4)].peer.role() == Role::Following
    });
    // The leader dies and 1 comes back knowing only {1, 2, 3}. Of the configuration
    // {1, 2, 3, 4} only 1, 2 and 4 are up: 1 is needed for a quorum, and without learning
    // the newer configuration from 2 it could neither count 4 nor reach it.
    c.crash(s(3));
    c.start(down, saved);
    c.run_until(20_000, |c| {
        c.leader().is_some() && c.nodes[&down].peer.is_serving()
    });
    assert_eq!(
        c.committed(down).role_of(s(4)),
        Some(MemberRole::Participant)
    );
    c.write(s(4), 9, "after");
    c.run_until(2_000, |c| {
        c.nodes[&down]
            .applied
            .iter()
            .any(|t| &t.data[..] == b"after")
    });
    c.check_prefix();
}
