//! Real nodes on loopback (ephemeral ports, temp dirs, tickTime 100 ms, forceSync=no — see
//! `common`): election, writes through leader and followers, read-your-writes, failover,
//! observers, fatal errors, batched submission, the role watch. How learners are synced and
//! snapshots taken: `sync_and_snapshots.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;

use common::{retryable, Cluster, STABLE};
use zab_core::{Role, ServerId, Zxid};
use zab_net::SubmitError;

/// PITFALLS E13 (runtime half): `submit` on a follower goes to the leader and returns its
/// zxid once applied here; every replica ends with the same state.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_nodes_fail_over_when_the_leader_stops() {
    let mut c = Cluster::new(5, 0);
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    c.put_many(leader, "a", 20, 10).await;
    let survivor = c.followers(leader)[0];
    let t0 = Instant::now();
    c.stop(leader).await;
    let mut slowest_failure = Duration::ZERO;
    let z = loop {
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "no write after failover"
        );
        let t = Instant::now();
        match c.put(survivor, "after", "1").await {
            Ok(z) => break z,
            Err(e) => {
                assert!(retryable(&e), "{e}");
                slowest_failure = slowest_failure.max(t.elapsed());
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };
    let failover = t0.elapsed();
    println!(
        "failover (5 nodes, tickTime 100 ms, clean stop of the leader): next committed write \
         after {failover:?}; slowest failed submit meanwhile {slowest_failure:?}"
    );
    let new_leader = c.wait_stable(STABLE).await;
    assert_ne!(new_leader, leader);
    assert!(z.epoch() > zab_core::Epoch(0));
    c.put_many(new_leader, "b", 20, 10).await;
    let z = c.node(survivor).sync().await.unwrap();
    for sid in c.followers(new_leader) {
        c.wait_applied(sid, z, STABLE).await;
        assert_eq!(c.kvs[&sid].state().map, c.kvs[&new_leader].state().map);
    }
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observers_receive_everything_and_never_vote() {
    let mut c = Cluster::new(3, 1);
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    let obs = ServerId(4);
    assert_eq!(c.status(obs).role, Role::Observing);
    let last = c.put_many(leader, "a", 20, 10).await;
    c.wait_applied(obs, last, STABLE).await;
    let z = c.put(obs, "via-observer", "1").await.unwrap();
    assert_eq!(c.kvs[&obs].get("via-observer").as_deref(), Some("1"));
    assert!(c.status(obs).last_applied >= z);
    let voters: Vec<ServerId> = c
        .followers(leader)
        .into_iter()
        .filter(|s| *s != obs)
        .collect();
    c.stop(voters[0]).await;
    let z = c.put(leader, "one-voter-down", "1").await.unwrap();
    c.wait_applied(obs, z, STABLE).await;
    assert_eq!(c.kvs[&obs].state().map, c.kvs[&leader].state().map);
    c.stop(voters[1]).await;
    // One voter and the observer are up: no quorum, whatever the observer does.
    let e = c.put(leader, "two-voters-down", "1").await.unwrap_err();
    assert!(retryable(&e), "{e}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let e = c.put(obs, "two-voters-down", "1").await.unwrap_err();
    assert!(retryable(&e), "{e}");
    for sid in [leader, obs] {
        let st = c.status(sid);
        assert!(!st.serving && st.role != Role::Leading, "{st:?}");
    }
    assert_eq!(c.kvs[&leader].get("two-voters-down"), None);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_error_stops_the_node_and_shows_in_its_status() {
    let mut c = Cluster::new(3, 0);
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    c.put(leader, "a", "1").await.unwrap();
    let e = c.put(leader, "fail", "now").await.unwrap_err();
    assert!(matches!(e, SubmitError::Fatal(_)), "{e}");
    let mut w = c.node(leader).watch();
    let st = tokio::time::timeout(STABLE, w.wait_for(|s| s.stopped))
        .await
        .unwrap()
        .unwrap()
        .clone();
    let fatal = st.fatal.unwrap_or_default();
    assert!(fatal.contains("asked to fail"), "{fatal}");
    assert!(matches!(
        c.put(leader, "b", "2").await,
        Err(SubmitError::Fatal(_))
    ));
    // A replica that learns of the commit fails on it too; one that does not is left without
    // a quorum. None of them goes on serving past the bad txn.
    tokio::time::sleep(Duration::from_secs(1)).await;
    for sid in c.followers(leader) {
        let st = c.status(sid);
        assert!(st.fatal.is_some() || !st.serving, "{st:?}");
    }
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_hangs_past_sync_limit_is_replaced_and_rejoins() {
    let mut c = Cluster::new(3, 0);
    c.start_all().await;
    let old = c.wait_stable(STABLE).await;
    c.put_many(old, "a", 10, 10).await;
    let survivor = c.followers(old)[0];
    let t0 = Instant::now();
    // Sockets stay open: followers notice only by silence (syncLimit 5 × tickTime 100 ms).
    c.node(old).pause(Duration::from_secs(3)).await;
    let z = loop {
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "no write after the leader hung"
        );
        match c.put(survivor, "after", "1").await {
            Ok(z) => break z,
            Err(e) => {
                assert!(retryable(&e), "{e}");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };
    println!(
        "failover (3 nodes, tickTime 100 ms, syncLimit 5, leader hung): next committed write \
         after {:?}",
        t0.elapsed()
    );
    // The old leader wakes up, finds itself without a quorum and rejoins as a follower.
    let leader = c.wait_stable(Duration::from_secs(15)).await;
    assert_ne!(leader, old);
    c.wait_applied(old, z, STABLE).await;
    assert_eq!(c.kvs[&old].state().map, c.kvs[&leader].state().map);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_stopped_during_a_snap_keeps_its_old_state_and_recovers() {
    let mut c = Cluster::new(3, 0);
    c.opts.committed_log_window = Some(10);
    c.opts.diff_from_log_limit = Some(10);
    c.opts.snap_chunk_bytes = 16 * 1024;
    c.opts.outbox_len = Some(64);
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    let before = c.put_many(leader, "a", 5, 5).await;
    let lag = c.followers(leader)[0];
    c.wait_applied(lag, before, STABLE).await;
    c.stop(lag).await;
    let big = "v".repeat(64 * 1024);
    for round in 0..16 {
        let keys: Vec<String> = (0..16).map(|i| format!("k{round}-{i}")).collect();
        let futs = keys.iter().map(|k| c.put(leader, k, &big));
        for r in futures::future::join_all(futs).await {
            r.unwrap();
        }
    }
    let last = c.node(leader).sync().await.unwrap();
    c.start(lag).await;
    let mut w = c.node(lag).watch();
    tokio::time::timeout(STABLE, w.wait_for(|s| s.syncs_received.snap >= 1))
        .await
        .unwrap()
        .unwrap();
    // Stop it mid-transfer (or, if the SNAP was quick, just after): either way it restarts
    // from a consistent state and is brought up to date again.
    let st = c.status(lag);
    c.stop(lag).await;
    println!(
        "learner stopped during its SNAP: serving={} last_applied={} (SNAP at {last})",
        st.serving, st.last_applied
    );
    let dir = c.root.path().join(format!("n{}", lag.0));
    c.start(lag).await;
    let tmp = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".tmp")
        })
        .count();
    assert_eq!(tmp, 0, "unfinished snapshot files are removed at start");
    c.wait_applied(lag, last, Duration::from_secs(20)).await;
    assert_eq!(c.kvs[&lag].state().map, c.kvs[&leader].state().map);
    c.shutdown().await;
}

/// PITFALLS D1 / node INV-4, INV-5 (batched submission): writes queued one after another with
/// `enqueue_write` — many per driver wake-up, answered once per batch — are proposed in queue
/// order, each reply carries its own write's zxid (consecutive counters, in queue order), and
/// when a reply arrives the node's status and state machine already show that write applied,
/// on the leader and through a follower alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_writes_keep_their_order_and_each_reply_names_its_own_zxid() {
    const N: usize = 300;
    let mut c = Cluster::new(3, 0);
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    let follower = c.followers(leader)[0];
    for sid in [leader, follower] {
        let node = c.node(sid);
        let mut replies = Vec::with_capacity(N);
        for i in 0..N {
            let (tx, rx) = tokio::sync::oneshot::channel();
            node.enqueue_write(Bytes::from(format!("q{}-{i}={i}", sid.0)), tx)
                .await;
            replies.push(rx);
        }
        let mut first: Option<Zxid> = None;
        for (i, rx) in replies.into_iter().enumerate() {
            let z = tokio::time::timeout(STABLE, rx)
                .await
                .expect("answered in time")
                .expect("reply sent")
                .expect("committed");
            let first = *first.get_or_insert(z);
            assert_eq!(z.epoch(), first.epoch(), "write {i} at {z}");
            assert_eq!(
                u64::from(z.counter()),
                u64::from(first.counter()) + i as u64,
                "write {i} of {sid} got {z}, not the zxid after its predecessor's"
            );
            let key = format!("q{}-{i}", sid.0);
            assert_eq!(c.kvs[&sid].get(&key), Some(i.to_string()), "{key} at {z}");
            assert!(c.status(sid).last_applied >= z, "{sid} status behind {z}");
        }
    }
    c.shutdown().await;
}

/// Node `watch_role`: a task that reacts to elections (fe-meta's TIMESTAMP ticker) waits on the
/// role watch, which must not wake it for writes: 200 committed writes change the full
/// status watch but leave the role watch unchanged on every node; the leader's stop then
/// changes the followers' role watch (they stop following it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_role_watch_ignores_writes_and_follows_elections() {
    let mut c = Cluster::new(3, 0);
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    let mut roles: Vec<_> = c
        .sids()
        .into_iter()
        .map(|s| (s, c.node(s).watch_role()))
        .collect();
    let mut full = c.node(leader).watch();
    for (_, w) in &mut roles {
        w.borrow_and_update();
    }
    full.borrow_and_update();
    c.put_many(leader, "w", 200, 20).await;
    assert!(
        full.has_changed().unwrap(),
        "the full status follows the writes"
    );
    for (sid, w) in &roles {
        assert!(
            !w.has_changed().unwrap(),
            "{sid}: role watch changed by writes"
        );
        assert_eq!(w.borrow().leader, Some(leader), "{sid}");
    }
    c.stop(leader).await;
    for (sid, w) in &mut roles {
        if *sid == leader {
            continue;
        }
        let moved = tokio::time::timeout(STABLE, w.wait_for(|r| r.leader != Some(leader))).await;
        assert!(moved.is_ok(), "{sid}: role watch did not see the leader go");
    }
    c.shutdown().await;
}

/// A data dir whose snapshot was written by another cluster (a copied or restored dir) refuses
/// to start under zoo.cfg's clusterId, naming the file and both ids; under its own id it starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_of_another_cluster_refuses_the_start() {
    use std::io::Write as _;
    let mut c = Cluster::new(1, 0);
    c.cluster_id = Some(9);
    let dir = c.root.path().join("n1");
    std::fs::create_dir_all(&dir).unwrap();
    let snaps = zab_store::SnapDir::open(&dir, false).unwrap();
    let mut w = snaps.create(Zxid(0x1_0000_0005), 7, None).unwrap();
    w.write_all(&0u64.to_be_bytes()).unwrap();
    w.finish().unwrap();
    let e = c.try_start(ServerId(1)).await.unwrap_err();
    assert!(
        matches!(
            e,
            zab_net::NetError::ForeignSnapshot {
                found: 7,
                expected: 9,
                ..
            }
        ),
        "{e}"
    );
    let text = e.to_string();
    assert!(
        text.contains("snapshot.0000000100000005") && text.contains("0x7"),
        "{text}"
    );
    c.cluster_id = Some(7);
    c.start(ServerId(1)).await;
    c.shutdown().await;
}

/// `Node::transfer_leadership`: refused on a follower (naming the leader); on the leader it
/// returns once the old leader follows the target, whose status shows it leading a newer
/// epoch; writes go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_hands_over_to_a_named_follower() {
    let mut c = Cluster::new(3, 0);
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    c.put_many(leader, "a", 10, 5).await;
    let followers = c.followers(leader);
    let (target, other) = (followers[0], followers[1]);
    let refused = c.node(other).transfer_leadership(Some(target)).await;
    assert_eq!(
        refused,
        Err(zab_net::TransferFailure::Refused(
            zab_net::TransferError::NotLeader {
                leader: Some(leader)
            }
        ))
    );
    let epoch = c.status(leader).epoch;
    let report = c.node(leader).transfer_leadership(Some(target)).await;
    let report = report.unwrap();
    assert_eq!((report.from, report.to), (leader, target));
    assert!(report.epoch > epoch, "{report:?}");
    let st = c.status(leader);
    assert_eq!((st.role, st.leader), (Role::Following, Some(target)));
    assert_eq!(c.wait_stable(STABLE).await, target);
    c.put(other, "after", "x").await.unwrap();
    c.shutdown().await;
}

/// Driver INV-5 (backpressure): a burst of writes far beyond what the followers' links hold
/// (2,000 writes of 1 KiB queued at once through the leader, then through a follower;
/// outboxes of 512 messages) all commit. The leader holds requests back, its own and those
/// the follower forwards, while its followers' backlogs are high instead of overflowing their
/// links: it drops no follower, keeps its quorum, and no election happens. Without the hold
/// the first batch of proposals overflows both outboxes and the writes fail with "quorum
/// lost".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_beyond_the_followers_outboxes_waits_instead_of_dropping_them() {
    const N: usize = 2_000;
    let mut c = Cluster::new(3, 0);
    c.opts.outbox_len = Some(512);
    // A resync's DIFF goes through the flow-controlled stream rather than the outbox.
    c.opts.committed_log_window = Some(20);
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    let epoch = c.status(leader).epoch;
    let value = "v".repeat(1024);
    for sid in [leader, c.followers(leader)[0]] {
        let node = c.node(sid);
        let mut replies = Vec::with_capacity(N);
        for i in 0..N {
            let (tx, rx) = tokio::sync::oneshot::channel();
            node.enqueue_write(Bytes::from(format!("b{}-{i}={value}", sid.0)), tx)
                .await;
            replies.push(rx);
        }
        for (i, rx) in replies.into_iter().enumerate() {
            let outcome = tokio::time::timeout(STABLE, rx)
                .await
                .expect("answered in time")
                .expect("reply sent");
            assert!(outcome.is_ok(), "write {i} through {sid}: {outcome:?}");
        }
    }
    let st = c.status(leader);
    assert_eq!((st.role, st.epoch), (Role::Leading, epoch), "no election");
    let holds: f64 = c
        .node(leader)
        .metrics_registry()
        .gather()
        .iter()
        .filter(|f| f.name() == "zab_requests_held_total")
        .flat_map(|f| f.get_metric().iter().map(|m| m.get_counter().get_value()))
        .sum();
    assert!(holds > 0.0, "the burst never made the leader hold requests");
    let last = c.node(leader).sync().await.unwrap();
    for sid in c.sids() {
        c.wait_applied(sid, last, STABLE).await;
        assert_eq!(c.kvs[&sid].state().map.len(), 2 * N, "{sid}");
    }
    c.shutdown().await;
}

/// An outbox that cannot hold a DIFF of the committed-log window refuses the start with an
/// error that names both settings: otherwise every learner resync by DIFF would overflow it,
/// drop the learner and start over, for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outbox_smaller_than_a_diff_of_the_committed_log_refuses_the_start() {
    let mut c = Cluster::new(3, 0);
    c.opts.outbox_len = Some(64);
    c.opts.committed_log_window = Some(100);
    let e = c.try_start(ServerId(1)).await.unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("outbox_len") && text.contains("committed_log_window"),
        "{text}"
    );
    c.opts.committed_log_window = Some(24);
    c.try_start(ServerId(1)).await.unwrap();
    c.shutdown().await;
}
