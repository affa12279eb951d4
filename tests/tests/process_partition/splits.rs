//! Symmetric partitions: the leader cut off from both followers, a follower cut off, and five
//! nodes split 3 + 2 with the leader on the small side.

use super::driver::{run, Cut, Fault, Plan, Roles};

/// Cuts every node of `small` from every node of the rest.
pub fn isolate(small: &[u64], roles: &Roles) -> Plan {
    let all: Vec<u64> = std::iter::once(roles.leader)
        .chain(roles.followers.iter().copied())
        .collect();
    let cuts = small
        .iter()
        .flat_map(|a| {
            all.iter()
                .filter(|b| !small.contains(b))
                .map(move |b| Cut::Both(*a, *b))
        })
        .collect();
    Plan {
        minority: small.to_vec(),
        fault: Fault::Split(cuts),
    }
}

/// The leader alone: it steps down within syncLimit; the followers elect one of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_isolated_from_both_followers() {
    run("part_leader_isolated", 3, |r| isolate(&[r.leader], r)).await;
}

/// A follower alone: the leader and the other follower go on; the follower refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_isolated() {
    run("part_follower_isolated", 3, |r| {
        isolate(&[r.followers[0]], r)
    })
    .await;
}

/// Five nodes, 3 + 2, the leader and one follower on the 2-side: the 3-side elects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_nodes_split_three_two_leader_on_the_small_side() {
    run("part_split_3_2", 5, |r| {
        isolate(&[r.leader, r.followers[0]], r)
    })
    .await;
}
