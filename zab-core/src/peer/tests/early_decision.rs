//! The early decision (`looking` INV-12), with ZooKeeper's timing (tickTime 2000 ms,
//! finalizeWait 200 ms): survivors that know the dead leader unreachable decide as soon as
//! they agree; a voter that is reachable but has not voted keeps the finalize wait.

use crate::io::Input;
use crate::types::{Role, ServerId};

use super::{s, Cluster};

const TIMING: (u64, u64) = (2000, 200);

/// A fresh cluster whose node 3 is down before anything was delivered, and nobody was told
/// (`PeerUnreachable`): nodes 1 and 2 exchange their votes.
fn without_node_3() -> Cluster {
    let mut c = Cluster::with_timing(3, 0, TIMING);
    c.nodes.get_mut(&s(3)).unwrap().up = false;
    c.links.retain(|(a, b), _| *a != s(3) && *b != s(3));
    while c.deliver_one() {}
    c
}

fn role(c: &Cluster, sid: ServerId) -> Role {
    c.nodes[&sid].peer.role()
}

#[test]
fn survivors_of_a_killed_leader_decide_without_the_finalize_wait() {
    let mut c = Cluster::with_timing(3, 0, TIMING);
    c.run_until(30_000, |c| c.leader().is_some() && c.all_serving());
    assert_eq!(c.leader(), Some(s(3)));
    let killed = c.now;
    // Both survivors hear their connections to node 3 close.
    c.crash(s(3));
    while c.deliver_one() {}
    assert_eq!(c.now, killed, "no time passed");
    assert_eq!(role(&c, s(2)), Role::Leading);
    assert_eq!(role(&c, s(1)), Role::Following);
    assert_eq!(c.nodes[&s(1)].peer.leader(), Some(s(2)));
    c.run_until(100, |c| c.leader() == Some(s(2)) && c.all_serving());
    assert!(
        c.now - killed < 100,
        "established {} ms after the kill",
        c.now - killed
    );
    c.check_prefix();
}

#[test]
fn a_reachable_voter_that_has_not_voted_keeps_the_finalize_wait() {
    let mut c = without_node_3();
    // A quorum (1, 2) holds node 2's vote, but node 3 may still send a better one.
    assert_eq!(role(&c, s(1)), Role::Looking);
    assert_eq!(role(&c, s(2)), Role::Looking);
    c.tick(190);
    assert_eq!(role(&c, s(1)), Role::Looking);
    assert_eq!(role(&c, s(2)), Role::Looking);
    c.run_until(2_000, |c| c.leader() == Some(s(2)) && c.all_serving());
    assert!(c.now >= 200, "decided after {} ms", c.now);
}

#[test]
fn a_voter_reported_unreachable_ends_the_finalize_wait_at_once() {
    let mut c = without_node_3();
    let start = c.now;
    // Node 1 learns that node 3 is unreachable: every voter it can hear agrees.
    c.input(s(1), Input::PeerUnreachable { peer: s(3) });
    assert_eq!(role(&c, s(1)), Role::Following);
    // Node 2 still counts node 3 reachable and waits, until it hears the same.
    assert_eq!(role(&c, s(2)), Role::Looking);
    c.input(s(2), Input::PeerUnreachable { peer: s(3) });
    assert_eq!(role(&c, s(2)), Role::Leading);
    assert_eq!(c.now, start);
    c.run_until(100, |c| c.leader() == Some(s(2)) && c.all_serving());
}
