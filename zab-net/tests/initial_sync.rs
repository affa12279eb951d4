//! PITFALLS B9 on real nodes: a node restarted on an emptied data dir without bootstrap syncs
//! as a non-voting learner, then votes; until it has synced it completes no quorum.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::Cluster;
use zab_core::{Role, ServerId};
use zab_store::NEEDS_INITIAL_SYNC_FILE;

const STABLE: Duration = Duration::from_secs(20);

/// Stops `sid`, empties its data dir and starts it again without bootstrap.
async fn wipe_and_restart(c: &mut Cluster, sid: ServerId) {
    c.stop(sid).await;
    let dir = c.root.path().join(format!("n{}", sid.0));
    std::fs::remove_dir_all(&dir).unwrap();
    let bootstrap = c.opts.bootstrap;
    c.opts.bootstrap = false;
    c.start(sid).await;
    c.opts.bootstrap = bootstrap;
}

fn marker(c: &Cluster, sid: ServerId) -> bool {
    let dir = c.root.path().join(format!("n{}", sid.0));
    walk(&dir)
        .iter()
        .any(|p| p.ends_with(NEEDS_INITIAL_SYNC_FILE))
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

async fn wait_voting(c: &Cluster, sid: ServerId) {
    let mut w = c.node(sid).watch();
    tokio::time::timeout(
        STABLE,
        w.wait_for(|s| s.initialized && s.role == Role::Following && s.serving),
    )
    .await
    .expect("the wiped node synced and votes")
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wiped_follower_resyncs_without_bootstrap_then_votes() {
    let mut c = Cluster::new(3, 0);
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    c.put_many(leader, "a", 20, 10).await;
    let [w, f] = c.followers(leader)[..] else {
        panic!("two followers")
    };
    wipe_and_restart(&mut c, w).await;
    wait_voting(&c, w).await;
    assert!(
        !marker(&c, w),
        "the needsInitialSync marker is removed once synced"
    );
    assert_eq!(c.kvs[&w].state().map, c.kvs[&leader].state().map);
    // Its vote now counts: with the other follower down, the leader and it are a quorum.
    c.stop(f).await;
    let z = c.put(leader, "b", "1").await.unwrap();
    c.wait_applied(w, z, STABLE).await;
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wiped_node_and_one_other_do_not_elect_until_it_synced() {
    let mut c = Cluster::new(3, 0);
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    let z = c.put_many(leader, "a", 20, 10).await;
    let [w, f] = c.followers(leader)[..] else {
        panic!("two followers")
    };
    c.wait_applied(f, z, STABLE).await;
    // w's data goes first, then the leader: from then on f is the only initialized voter up.
    c.stop(w).await;
    std::fs::remove_dir_all(c.root.path().join(format!("n{}", w.0))).unwrap();
    c.stop(leader).await;
    c.opts.bootstrap = false;
    c.start(w).await;
    c.opts.bootstrap = true;
    assert!(!c.status(w).initialized);
    assert!(marker(&c, w));
    // tickTime 100 ms: a pair that could elect would have done so many times over.
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(3) {
        for sid in [w, f] {
            let st = c.status(sid);
            assert!(
                !matches!(st.role, Role::Leading | Role::Following),
                "{sid} {:?} while the only initialized voter left is {f}",
                st.role
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!c.status(w).initialized);
    c.start(leader).await;
    c.wait_stable(STABLE).await;
    wait_voting(&c, w).await;
    c.wait_applied(w, z, STABLE).await;
    assert_eq!(c.kvs[&w].state().map, c.kvs[&f].state().map);
    c.shutdown().await;
}
