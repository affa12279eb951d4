//! Real nodes on loopback (ephemeral ports, temp dirs, tickTime 100 ms, forceSync=no — see
//! `common`): election, writes through leader and followers, read-your-writes, failover,
//! observers.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::Cluster;
use zab_core::{Role, ServerId};
use zab_net::SubmitError;

const STABLE: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_elect_and_commit_through_leader_and_followers() {
    let mut c = Cluster::new(3, 0);
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    for i in 0..10 {
        c.put(leader, &format!("l{i}"), "x").await.unwrap();
    }
    for f in c.followers(leader) {
        for i in 0..10 {
            let key = format!("f{}-{i}", f.0);
            let z = c.put(f, &key, "y").await.unwrap();
            // Read-your-writes: applied on the follower when submit returns.
            assert_eq!(c.kvs[&f].get(&key).as_deref(), Some("y"), "{f} at {z}");
            assert!(c.status(f).last_applied >= z);
        }
    }
    let z = c.node(c.followers(leader)[0]).sync().await.unwrap();
    for sid in c.sids() {
        c.wait_applied(sid, z, STABLE).await;
        assert_eq!(c.kvs[&sid].state().map.len(), 30);
        assert_eq!(c.kvs[&sid].state().map, c.kvs[&leader].state().map);
    }
    c.shutdown().await;
}
