//! Partial faults: a one-way cut between the leader and a follower, a "bridge" node that sees
//! both halves, a flapping link, and a lossy (and, where the kernel has netem, slow) link.

use std::time::Duration;

use tests::proc::Impairment;

use super::driver::{run, Cut, Fault, Phase, Plan};

/// The leader's packets to one follower are dropped; the follower's to the leader arrive.
/// The follower stops hearing the leader and leaves after syncLimit; the leader keeps its
/// quorum with the other follower; the cut-off follower refuses writes until the heal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_way_cut_leader_to_follower() {
    run("part_one_way", 3, |r| {
        let f = r.followers[0];
        Plan {
            minority: vec![f],
            fault: Fault::Split(vec![Cut::OneWay {
                from: r.leader,
                to: f,
            }]),
        }
    })
    .await;
}

/// The other direction: the follower's packets to the leader are dropped, the leader's to it
/// arrive. The leader stops hearing the follower's acks and drops it after syncLimit (its
/// close reaches the follower); the follower cannot connect back and refuses until the heal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_way_cut_follower_to_leader() {
    run("part_one_way_back", 3, |r| {
        let f = r.followers[0];
        Plan {
            minority: vec![f],
            fault: Fault::Split(vec![Cut::OneWay {
                from: f,
                to: r.leader,
            }]),
        }
    })
    .await;
}

/// The leader's packets to both followers are dropped, theirs to it arrive: the followers
/// stop hearing it and elect one of them; the old leader, which still receives their packets
/// (their connection closes, their election messages), must step down and refuse like an
/// isolated one, and answer no sync read once the new leader can commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_way_cut_leader_to_both_followers() {
    run("part_one_way_deposed", 3, |r| Plan {
        minority: vec![r.leader],
        fault: Fault::Split(
            r.followers
                .iter()
                .map(|f| Cut::OneWay {
                    from: r.leader,
                    to: *f,
                })
                .collect(),
        ),
    })
    .await;
}

/// Nodes L (leader), B and X: only L–X is cut; B sees both. L keeps its quorum through B;
/// X, which B tells who leads but cannot reach it, refuses writes until the heal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_node_sees_both_halves() {
    run("part_bridge", 3, |r| {
        let x = r.followers[1];
        Plan {
            minority: vec![x],
            fault: Fault::Split(vec![Cut::Both(r.leader, x)]),
        }
    })
    .await;
}

/// The number of cut+heal rounds of the flapping link (`PARTITION_FLAP_ROUNDS`, default 8).
fn flap_rounds() -> u32 {
    std::env::var("PARTITION_FLAP_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8)
}

/// The leader–follower link cut and healed every 300–700 ms (seed `PARTITION_FLAP_SEED`,
/// default 7): nothing acknowledged is lost, the history stays linearizable, and the cluster
/// converges after the last heal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flapping_leader_follower_link() {
    let seed = std::env::var("PARTITION_FLAP_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let rounds = flap_rounds();
    println!("flapping: {rounds} rounds, seed {seed}");
    run("part_flapping", 3, |r| Plan {
        minority: vec![r.followers[0]],
        fault: Fault::Flap {
            a: r.leader,
            b: r.followers[0],
            rounds,
            seed,
        },
    })
    .await;
}

/// The leader's link slowed (netem 50 ms ± 10 ms each way, where the kernel has netem; SKIP
/// otherwise), then lossy (10 % of packets dropped each way), then restored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_link_delay_then_loss() {
    let delay = Impairment {
        delay_ms: 50,
        jitter_ms: 10,
        ..Impairment::default()
    };
    let loss = Impairment {
        loss_pct: 10,
        ..Impairment::default()
    };
    run("part_lossy_link", 3, |r| Plan {
        minority: Vec::new(),
        fault: Fault::Impair {
            sid: r.leader,
            phases: vec![
                Phase {
                    name: "delay50ms",
                    how: delay,
                    hold: Duration::from_secs(2),
                },
                Phase {
                    name: "loss10pct",
                    how: loss,
                    hold: Duration::from_secs(3),
                },
            ],
        },
    })
    .await;
}
