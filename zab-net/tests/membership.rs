//! Membership changes on real nodes on loopback: a cluster grows by a server that joins with
//! an empty data dir and the configuration learned from a member, a member is removed and
//! goes silent for good, and the committed configuration survives restarts (from the log and
//! from a snapshot) whatever the stale zoo.cfg says.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{retryable, Cluster};
use zab_core::StepError;
use zab_net::config::ServerAddr;
use zab_net::transport::PeerAddrs;
use zab_net::{LearnerType, MemberRole, NetError, NodeError, NodeStatus, Role, ServerId, Zxid};

const STABLE: Duration = Duration::from_secs(10);

fn role_of(s: &NodeStatus, sid: u64) -> Option<MemberRole> {
    s.committed_membership.role_of(ServerId(sid))
}

/// The `host:quorum:election` address of a participant listening on `listen`.
fn participant_addr(listen: &PeerAddrs) -> ServerAddr {
    let text = format!(
        "127.0.0.1:{}:{}",
        listen.quorum.port(),
        listen.election.port()
    );
    ServerAddr::parse_value(&text).unwrap()
}

/// `sid` was synced by SNAP, is not removed, votes, and holds `a0..a{count}` as written by
/// `put_many(_, "a", count, _)`.
async fn assert_synced_by_snap(c: &Cluster, sid: ServerId, count: usize) {
    let st = c.status(sid);
    assert!(st.syncs_received.snap >= 1, "{st:?}");
    assert!(!st.removed);
    c.wait_status(
        sid,
        &format!("server {} votes", sid.0),
        |s| s.initialized,
        STABLE,
    )
    .await;
    for i in 0..count {
        assert_eq!(
            c.kvs[&sid].get(&format!("a{i}")).as_deref(),
            Some(&*i.to_string())
        );
    }
}

/// Writes `key=value` through whichever node leads, retrying through elections.
async fn put_anywhere(c: &Cluster, key: &str, value: &str) -> Zxid {
    let start = Instant::now();
    loop {
        for sid in c.nodes.keys() {
            let st = c.status(*sid);
            if st.role != Role::Leading || !st.serving {
                continue;
            }
            match c.put(*sid, key, value).await {
                Ok(z) => return z,
                Err(e) if retryable(&e) => {}
                Err(e) => panic!("write {key} refused: {e}"),
            }
        }
        assert!(
            start.elapsed() < STABLE,
            "no leader took {key} in {STABLE:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Grows 3 → 4: the new server is added on the leader, then joins with an empty data dir, a
/// zoo.cfg listing only itself and the configuration learned from a member; it is synced by
/// SNAP (which carries the configuration), promoted, and then counts: with one original
/// member stopped, the four-voter cluster still commits only thanks to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_joins_is_promoted_and_counts_in_the_quorum() {
    let mut c = Cluster::new(3, 0);
    // The joining server is far behind a tiny in-memory window: it gets a SNAP.
    c.opts.committed_log_window = Some(2);
    c.opts.diff_from_log_limit = Some(3);
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    c.put_many(leader, "a", 20, 10).await;

    // Only the leader changes the membership; a follower names it.
    let follower = c.followers(leader)[0];
    let refused = c.node(follower).remove_member(ServerId(2)).await;
    assert_eq!(refused, Err(NodeError::NotLeader { leader }));

    let listen = Cluster::free_addrs();
    let addr = participant_addr(&listen);
    let added = c
        .node(leader)
        .add_member(ServerId(4), LearnerType::Participant, &addr)
        .await
        .unwrap();
    let st = c.status(leader);
    assert_eq!(st.committed_membership.version, added, "{st:?}");
    assert_eq!(role_of(&st, 4), Some(MemberRole::Joining));
    assert_eq!(
        st.committed_membership.members[&ServerId(4)].address,
        addr.to_value()
    );
    let again = c
        .node(leader)
        .add_member(ServerId(4), LearnerType::Participant, &addr)
        .await;
    assert!(matches!(again, Err(NodeError::Invalid(_))), "{again:?}");

    let join = (*st.committed_membership).clone();
    c.start_joining(ServerId(4), listen, Some(join)).await;
    let promoted = |s: &NodeStatus| role_of(s, 4) == Some(MemberRole::Participant);
    c.wait_status(leader, "server 4 promoted", promoted, STABLE)
        .await;
    c.wait_status(ServerId(4), "server 4 promoted", promoted, STABLE)
        .await;
    assert_synced_by_snap(&c, ServerId(4), 20).await;
    // Every original member applied both configurations through apply_membership.
    let promotion = c.status(leader).committed_membership.version;
    assert!(promotion > added);
    for sid in 1..=3 {
        c.wait_status(ServerId(sid), "server 4 promoted", promoted, STABLE)
            .await;
        let applied = c.kvs[&ServerId(sid)].state().memberships.clone();
        assert_eq!(applied, vec![added, promotion], "server {sid}");
    }

    // Four voters: stop the leader; a new one is elected and commits with server 4's votes.
    c.stop(leader).await;
    let mut last = Zxid::ZERO;
    for i in 0..10 {
        last = put_anywhere(&c, &format!("b{i}"), "x").await;
    }
    let running: Vec<ServerId> = c.nodes.keys().copied().collect();
    for sid in running {
        c.wait_applied(sid, last, STABLE).await;
        assert_eq!(c.kvs[&sid].get("b9").as_deref(), Some("x"), "{sid}");
    }
    c.shutdown().await;
}

/// A removed follower learns of its removal, goes silent, and the cluster goes on without it;
/// once a snapshot of its data dir carries the removal, that data dir refuses to start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_member_goes_silent_and_its_data_dir_cannot_rejoin() {
    let mut c = Cluster::new(3, 0);
    // A snapshot after every applied txn, so the removal reaches a snapshot at once.
    c.snap_count = 1;
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    let gone = c.followers(leader)[0];
    // One write at a time, each snapshot done before the next apply, so that no snapshot is
    // running when the removal is applied (a running one would make it skip its own).
    for i in 1..=3u64 {
        c.put(leader, &format!("a{i}"), "x").await.unwrap();
        let done = move |s: &NodeStatus| s.snapshots_taken >= i;
        c.wait_status(gone, "the write's snapshot", done, STABLE)
            .await;
    }
    let taken = c.status(gone).snapshots_taken;

    let version = c.node(leader).remove_member(gone).await.unwrap();
    assert!(!c
        .status(leader)
        .committed_membership
        .members
        .contains_key(&gone));
    c.wait_status(gone, "removed", |s| s.removed, STABLE).await;
    let st = c.status(gone);
    assert_eq!(st.committed_membership.version, version, "{st:?}");
    assert!(!st.serving, "{st:?}");
    c.wait_status(gone, "a snapshot", |s| s.snapshots_taken > taken, STABLE)
        .await;

    // Two voters left: both needed, and enough.
    let z = c.put(leader, "after", "1").await.unwrap();
    assert_eq!(c.kvs[&gone].get("after"), None);
    assert!(c.status(gone).last_applied < z);

    c.stop(gone).await;
    match c.try_start(gone).await {
        Err(NetError::Core(StepError::Removed { sid, version: v })) => {
            assert_eq!((sid, v), (gone, version));
        }
        other => panic!("a removed data dir started: {other:?}"),
    }
    c.shutdown().await;
}

/// The committed configuration outlives a restart with a zoo.cfg that does not list the
/// added server: first from the log (no snapshot carries it yet), then from a snapshot (known
/// at once, before any sync).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_keeps_the_committed_configuration_over_a_stale_zoo_cfg() {
    let mut c = Cluster::new(3, 0);
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    // An observer that never starts: the change commits with the participants alone.
    let addr = ServerAddr::parse_value("127.0.0.1:1:2:observer").unwrap();
    let version = c
        .node(leader)
        .add_member(ServerId(4), LearnerType::Observer, &addr)
        .await
        .unwrap();
    let z = c.put(leader, "a", "1").await.unwrap();
    let f = c.followers(leader)[0];
    c.wait_applied(f, z, STABLE).await;
    let has_it = |s: &NodeStatus| s.committed_membership.version == version;
    assert!(has_it(&c.status(f)));

    // From the log: the snapshot at start predates the change; the log tail holds it.
    c.stop(f).await;
    c.start(f).await;
    c.wait_status(f, "the configuration from its log", has_it, STABLE)
        .await;
    assert_eq!(
        role_of(&c.status(f), 4),
        Some(MemberRole::Observer),
        "{:?}",
        c.status(f)
    );

    // From a snapshot: small snapCount, writes until the follower snapshots after the change.
    c.snap_count = 2;
    c.stop(f).await;
    c.start(f).await;
    c.wait_status(f, "serving", |s| s.serving, STABLE).await;
    for i in 0..6 {
        c.put(leader, &format!("b{i}"), "x").await.unwrap();
    }
    c.wait_status(f, "a snapshot", |s| s.snapshots_taken >= 1, STABLE)
        .await;
    c.stop(f).await;
    c.start(f).await;
    let st = c.status(f);
    assert!(!st.serving, "{st:?}");
    assert!(has_it(&st), "not known before the sync: {st:?}");
    c.wait_stable(STABLE).await;
    c.shutdown().await;
}

/// A joining server that stops before its first sync keeps the configuration it was given:
/// restarted without it, it still knows the cluster, and syncs once the members are back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_server_restarted_before_its_first_sync_still_knows_the_cluster() {
    let mut c = Cluster::new(3, 0);
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    let listen = Cluster::free_addrs();
    let addr = participant_addr(&listen);
    let added = c
        .node(leader)
        .add_member(ServerId(4), LearnerType::Participant, &addr)
        .await
        .unwrap();
    let z = c.put(leader, "a", "1").await.unwrap();
    let join = (*c.status(leader).committed_membership).clone();
    let originals = c.sids();
    for sid in &originals {
        c.stop(*sid).await;
    }

    // Nobody to sync from: it starts, knows the cluster, and does not vote.
    c.start_joining(ServerId(4), listen, Some(join.clone()))
        .await;
    let st = c.status(ServerId(4));
    assert_eq!(*st.committed_membership, join, "{st:?}");
    assert!(!st.initialized, "{st:?}");
    c.stop(ServerId(4)).await;
    c.start_joining(ServerId(4), listen, None).await;
    let st = c.status(ServerId(4));
    assert_eq!(st.committed_membership.version, added, "{st:?}");
    assert!(!st.initialized, "{st:?}");

    for sid in &originals {
        c.start(*sid).await;
    }
    let promoted = |s: &NodeStatus| role_of(s, 4) == Some(MemberRole::Participant);
    c.wait_status(ServerId(4), "server 4 promoted", promoted, STABLE)
        .await;
    c.wait_applied(ServerId(4), z, STABLE).await;
    assert_eq!(c.kvs[&ServerId(4)].get("a").as_deref(), Some("1"));

    // Synced by DIFF, no snapshot yet: restarted again, its log and the kept configuration
    // make it the cluster's member (not a cluster of one, as its zoo.cfg alone would).
    c.stop(ServerId(4)).await;
    c.start_joining(ServerId(4), listen, None).await;
    let st = c.status(ServerId(4));
    assert!(st.committed_membership.version >= added, "{st:?}");
    c.wait_stable(STABLE).await;
    let z = put_anywhere(&c, "b", "2").await;
    c.wait_applied(ServerId(4), z, STABLE).await;
    let st = c.status(ServerId(4));
    assert!(promoted(&st) && st.initialized, "{st:?}");
    c.shutdown().await;
}
