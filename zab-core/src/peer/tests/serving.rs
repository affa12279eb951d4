//! Scenarios of a serving cluster: election of the highest sid, writes committed through any
//! peer (observers included), a lone participant, and `sync` answered after a quorum round.

use crate::io::{Action, Input};
use crate::types::{Epoch, RequestId, Role, Zxid};

use super::{s, Cluster};

#[test]
fn three_peers_elect_the_highest_sid_and_commit_a_write() {
    let mut c = Cluster::new(3, 0);
    c.run_until(5_000, |c| c.leader().is_some() && c.all_serving());
    assert_eq!(c.leader(), Some(s(3)));
    for n in c.nodes.values() {
        assert_eq!(n.peer.current_epoch(), Epoch(1));
        assert_eq!(n.accepted, Epoch(1));
    }
    c.write(s(1), 7, "a");
    c.run_until(1_000, |c| c.write_done(s(1), 7).is_some());
    let z = c.write_done(s(1), 7).unwrap().unwrap();
    assert_eq!(z, Zxid::new(Epoch(1), 1));
    c.run_until(1_000, |c| c.nodes.values().all(|n| n.applied.len() == 1));
    c.check_prefix();
    c.write(s(3), 8, "b");
    c.run_until(1_000, |c| c.write_done(s(3), 8).is_some());
    assert_eq!(c.write_done(s(3), 8), Some(Ok(Zxid::new(Epoch(1), 2))));
}

#[test]
fn single_participant_leads_alone() {
    let mut c = Cluster::new(1, 0);
    c.run_until(1_000, |c| c.leader().is_some());
    c.write(s(1), 1, "x");
    c.run_until(100, |c| c.write_done(s(1), 1).is_some());
    assert_eq!(c.write_done(s(1), 1), Some(Ok(Zxid::new(Epoch(1), 1))));
}

#[test]
fn observer_learns_leader_and_gets_inform() {
    let mut c = Cluster::new(3, 1);
    c.run_until(5_000, |c| c.leader().is_some() && c.all_serving());
    assert_eq!(c.nodes[&s(4)].peer.role(), Role::Observing);
    c.write(s(4), 1, "via-observer");
    c.run_until(1_000, |c| c.write_done(s(4), 1).is_some());
    assert!(c.write_done(s(4), 1).unwrap().is_ok());
    assert_eq!(c.nodes[&s(4)].applied.len(), 1);
    let informed = c.nodes[&s(4)].trace.len();
    assert!(informed > 0);
    c.check_prefix();
}

#[test]
fn sync_on_follower_is_answered_after_quorum_round() {
    let mut c = Cluster::new(3, 0);
    c.run_until(5_000, |c| c.leader().is_some() && c.all_serving());
    c.write(s(3), 1, "a");
    c.input(
        s(1),
        Input::ClientSync {
            request_id: RequestId(9),
        },
    );
    c.run_until(1_000, |c| {
        c.nodes[&s(1)]
            .done
            .iter()
            .any(|a| matches!(a, Action::SyncDone { .. }))
    });
    let got = c.nodes[&s(1)].done.iter().find_map(|a| match a {
        Action::SyncDone { outcome, .. } => Some(outcome.clone()),
        _ => None,
    });
    let z = got.unwrap().unwrap();
    assert!(c.nodes[&s(1)].peer.last_applied_zxid() >= z);
}
