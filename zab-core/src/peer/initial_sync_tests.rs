//! PITFALLS B9 at the core: a peer whose data dir needs its initial sync never votes, syncs as
//! an observer, records itself initialized only after a durable sync, then rejoins as a voter.

use std::collections::BTreeSet;

use crate::io::Action;
use crate::message::{ElectionState, Message};
use crate::types::{Role, ServerId};

use super::tests::{s, Cluster};

/// Delivers and ticks for `ms` of virtual time (bounded; no condition).
fn run_for(c: &mut Cluster, ms: u64) {
    let end = c.now + ms;
    while c.now < end {
        for _ in 0..10_000 {
            if !c.deliver_one() {
                break;
            }
        }
        c.tick(10);
    }
}

fn nobody_leads_or_follows(c: &Cluster) -> bool {
    c.nodes
        .values()
        .filter(|n| n.up)
        .all(|n| matches!(n.peer.role(), Role::Looking | Role::Observing))
}

fn sent(c: &Cluster, sid: ServerId, pick: impl Fn(&Message) -> bool) -> Vec<usize> {
    c.nodes[&sid]
        .trace
        .iter()
        .enumerate()
        .filter(|(_, a)| matches!(a, Action::Send { msg, .. } if pick(msg)))
        .map(|(i, _)| i)
        .collect()
}

fn initialized_at(c: &Cluster, sid: ServerId) -> Option<usize> {
    c.nodes[&sid]
        .trace
        .iter()
        .position(|a| *a == Action::PersistInitialized)
}

#[test]
fn a_cluster_of_uninitialized_peers_never_elects() {
    let mut c = Cluster::new(3, 0);
    for sid in [s(1), s(2), s(3)] {
        c.wipe(sid);
    }
    run_for(&mut c, 5_000);
    assert!(nobody_leads_or_follows(&c));
    for n in c.nodes.values() {
        assert!(n.peer.needs_initial_sync());
        assert!(!n.peer.is_serving());
    }
    let countable = sent(
        &c,
        s(1),
        |m| matches!(m, Message::Notification(n) if n.state != ElectionState::Uninitialized),
    );
    assert!(
        countable.is_empty(),
        "an uninitialized peer sent a countable vote"
    );
}

#[test]
fn a_wiped_peer_and_one_voter_do_not_elect_until_a_holder_of_the_data_returns() {
    let mut c = Cluster::new(3, 0);
    c.run_until(5_000, |c| c.leader().is_some() && c.all_serving());
    let leader = c.leader().unwrap();
    c.write(leader, 1, "x");
    c.run_until(1_000, |c| c.nodes.values().all(|n| n.applied.len() == 1));
    let others: Vec<ServerId> = c.nodes.keys().copied().filter(|s| *s != leader).collect();
    let (wiped, voter) = (others[0], others[1]);
    let leader_disk = c.durable(leader);
    c.crash(leader);
    c.wipe(wiped);
    run_for(&mut c, 5_000);
    assert!(
        nobody_leads_or_follows(&c),
        "a wiped peer completed a quorum"
    );
    assert!(c.nodes[&wiped].peer.needs_initial_sync());
    c.start(leader, leader_disk);
    c.run_until(10_000, |c| {
        c.all_serving()
            && !c.nodes[&wiped].peer.needs_initial_sync()
            && c.nodes[&wiped].peer.role() == Role::Following
    });
    assert_eq!(
        c.nodes[&wiped].applied.len(),
        1,
        "the wiped peer got x back"
    );
    assert_eq!(c.nodes[&voter].applied.len(), 1);
    c.check_prefix();
}

#[test]
fn a_wiped_follower_syncs_as_observer_then_rejoins_as_a_voter() {
    let mut c = Cluster::new(3, 0);
    c.run_until(5_000, |c| c.leader().is_some() && c.all_serving());
    let leader = c.leader().unwrap();
    c.write(leader, 1, "x");
    c.run_until(1_000, |c| c.nodes.values().all(|n| n.applied.len() == 1));
    let wiped = if leader == s(1) { s(2) } else { s(1) };
    let round = c.nodes[&leader].peer.election_round();
    c.wipe(wiped);
    c.run_until(5_000, |c| {
        !c.nodes[&wiped].peer.needs_initial_sync() && c.nodes[&wiped].peer.is_serving()
    });
    assert_eq!(c.nodes[&wiped].peer.role(), Role::Following);
    assert_eq!(c.nodes[&wiped].peer.leader(), Some(leader));
    assert_eq!(
        c.nodes[&leader].peer.election_round(),
        round,
        "no new election"
    );
    let done = initialized_at(&c, wiped).expect("PersistInitialized emitted");
    let observer_infos = sent(&c, wiped, |m| matches!(m, Message::ObserverInfo { .. }));
    let follower_infos = sent(&c, wiped, |m| matches!(m, Message::FollowerInfo { .. }));
    assert!(observer_infos.iter().all(|i| *i < done));
    assert!(!observer_infos.is_empty());
    assert!(!follower_infos.is_empty() && follower_infos.iter().all(|i| *i > done));
    assert!(
        !c.nodes[&wiped].needs_initial_sync,
        "the flag reached the disk"
    );
    assert_eq!(c.nodes[&wiped].applied.len(), 1);
    c.write(wiped, 2, "y");
    c.run_until(1_000, |c| c.write_done(wiped, 2).is_some());
    assert!(c.write_done(wiped, 2).unwrap().is_ok());
    c.check_prefix();
}

#[test]
fn a_crash_before_persist_initialized_keeps_the_peer_uninitialized() {
    let mut c = Cluster::new(3, 0);
    c.run_until(5_000, |c| c.leader().is_some() && c.all_serving());
    let leader = c.leader().unwrap();
    c.write(leader, 1, "x");
    c.run_until(1_000, |c| c.nodes.values().all(|n| n.applied.len() == 1));
    let wiped = if leader == s(1) { s(2) } else { s(1) };
    c.wipe(wiped);
    c.nodes.get_mut(&wiped).unwrap().auto_persist = false;
    c.run_until(5_000, |c| {
        c.nodes[&wiped]
            .trace
            .iter()
            .any(|a| matches!(a, Action::AppendLog(_)))
    });
    run_for(&mut c, 200);
    assert!(
        initialized_at(&c, wiped).is_none(),
        "sync data is not durable yet"
    );
    let d = c.durable(wiped);
    assert!(d.needs_initial_sync);
    c.crash(wiped);
    c.start(wiped, d);
    assert!(c.nodes[&wiped].peer.needs_initial_sync());
    c.run_until(5_000, |c| {
        !c.nodes[&wiped].peer.needs_initial_sync()
            && c.nodes[&wiped].peer.role() == Role::Following
            && c.nodes[&wiped].peer.is_serving()
    });
    assert_eq!(c.nodes[&wiped].applied.len(), 1);
    let roles: BTreeSet<Role> = c.nodes.values().map(|n| n.peer.role()).collect();
    assert!(roles.contains(&Role::Leading));
}
