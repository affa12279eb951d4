//! The node's Prometheus metrics (`zab_net::metrics`) on real nodes on loopback (see
//! `common`): what a 3-node cluster's registries show after writes, a restarted follower's
//! sync, background snapshots, and where the metrics are registered.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{Cluster, STABLE};
use prometheus::proto::{MetricFamily, MetricType};
use prometheus::{Encoder, Registry, TextEncoder};
use zab_net::{NetError, Node, ServerId};

/// One sample of `name` with exactly `labels` in `families`: a counter's or a gauge's value,
/// a histogram's sample count; `None` when absent.
fn sample(families: &[MetricFamily], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let family = families.iter().find(|f| f.name() == name)?;
    let metric = family.get_metric().iter().find(|m| {
        let have = m.get_label();
        have.len() == labels.len()
            && labels
                .iter()
                .all(|(k, v)| have.iter().any(|l| l.name() == *k && l.value() == *v))
    })?;
    Some(match family.get_field_type() {
        MetricType::COUNTER => metric.get_counter().get_value(),
        MetricType::GAUGE => metric.get_gauge().get_value(),
        MetricType::HISTOGRAM => metric.get_histogram().get_sample_count() as f64,
        other => panic!("{name}: unexpected type {other:?}"),
    })
}

/// `sample` on a node's registry, which must have it.
fn value(node: &Node, name: &str, labels: &[(&str, &str)]) -> f64 {
    let families = node.metrics_registry().gather();
    sample(&families, name, labels).unwrap_or_else(|| panic!("{name} {labels:?} missing"))
}

fn role(node: &Node, r: &str) -> f64 {
    value(node, "zab_role", &[("role", r)])
}

/// Waits until `want` holds for `node`'s registry (some metrics follow the status by a batch).
async fn wait_metric(node: &Node, what: &str, want: impl Fn(&Node) -> bool) {
    let start = Instant::now();
    while !want(node) {
        assert!(
            start.elapsed() < STABLE,
            "{what} not reached in {STABLE:?} on server {}",
            node.sid().0
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The status's sync counters are the metrics' (metrics INV-2).
fn assert_syncs_match(node: &Node) {
    let st = node.status();
    let syncs = |dir: &str, mode: &str| {
        value(
            node,
            "zab_syncs_total",
            &[("direction", dir), ("mode", mode)],
        ) as u64
    };
    assert_eq!(syncs("sent", "diff"), st.syncs_sent.diff, "{st:?}");
    assert_eq!(syncs("sent", "trunc"), st.syncs_sent.trunc, "{st:?}");
    assert_eq!(syncs("sent", "snap"), st.syncs_sent.snap, "{st:?}");
    assert_eq!(syncs("received", "diff"), st.syncs_received.diff, "{st:?}");
    assert_eq!(
        syncs("received", "trunc"),
        st.syncs_received.trunc,
        "{st:?}"
    );
    assert_eq!(syncs("received", "snap"), st.syncs_received.snap, "{st:?}");
    let from_log = value(node, "zab_syncs_diff_from_log_total", &[]) as u64;
    assert_eq!(from_log, st.syncs_sent.diff_from_log, "{st:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_node_cluster_shows_roles_commits_fsyncs_syncs_and_elections() {
    let mut c = Cluster::new(3, 0);
    c.start_all().await;
    let leader_sid = c.wait_stable(STABLE).await;
    let last = c.put_many(leader_sid, "a", 200, 20).await;
    for sid in c.sids() {
        c.wait_applied(sid, last, STABLE).await;
    }
    let leader = c.node(leader_sid);
    wait_metric(leader, "two learners synced", |n| {
        value(n, "zab_learners_synced", &[]) == 2.0
    })
    .await;
    assert_leader_state(leader);
    assert_leader_commit_path(leader);
    assert_peer_queues_sampled(&c, leader_sid);
    assert_followers_state(&c, leader_sid);
    assert_elections_and_syncs(&c);
    restarted_follower_sync_is_counted(&mut c, leader_sid).await;
    assert_text_format(c.node(leader_sid));
    c.shutdown().await;
}

/// The leader's role, learners and state gauges (these match its status).
fn assert_leader_state(leader: &Node) {
    assert_eq!(value(leader, "zab_learners_connected", &[]), 2.0);
    assert_eq!(role(leader, "leading"), 1.0);
    assert_eq!(role(leader, "looking"), 0.0);
    assert_eq!(role(leader, "following"), 0.0);
    assert_eq!(value(leader, "zab_serving", &[]), 1.0);
    assert_eq!(value(leader, "zab_initialized", &[]), 1.0);
    let st = leader.status();
    assert_eq!(value(leader, "zab_epoch", &[]), f64::from(st.epoch.0));
    let applied = value(leader, "zab_last_applied_zxid", &[]);
    assert_eq!(applied as u64, st.last_applied.0);
    assert!(value(leader, "zab_last_committed_zxid", &[]) >= applied);
    assert!(value(leader, "zab_last_logged_zxid", &[]) >= applied);
}

/// The leader's commit path after 200 writes: commits, proposals, latencies, the txn log's
/// syncs, and the two learners synced.
fn assert_leader_commit_path(leader: &Node) {
    assert!(value(leader, "zab_commits_total", &[]) >= 200.0);
    assert!(value(leader, "zab_proposals_total", &[]) >= 200.0);
    assert!(value(leader, "zab_commit_latency_us", &[]) >= 200.0);
    assert!(value(leader, "zab_log_fsync_duration_us", &[]) > 0.0);
    assert!(value(leader, "zab_log_sync_batch_records", &[]) > 0.0);
    assert!(value(leader, "zab_log_append_durable_latency_us", &[]) >= 200.0);
    assert!(value(leader, "zab_sync_duration_us", &[("direction", "sent")]) >= 2.0);
}

/// Sampled per tick, the leader has one queue gauge per other member.
fn assert_peer_queues_sampled(c: &Cluster, leader_sid: ServerId) {
    let families = c.node(leader_sid).metrics_registry().gather();
    let peers = c
        .sids()
        .into_iter()
        .filter(|s| {
            sample(
                &families,
                "zab_peer_queued_messages",
                &[("peer", &s.0.to_string())],
            )
            .is_some()
        })
        .collect::<Vec<_>>();
    assert_eq!(peers, c.followers(leader_sid));
}

/// Each follower: its role, commits without proposals, its log's syncs and its own sync.
fn assert_followers_state(c: &Cluster, leader_sid: ServerId) {
    for sid in c.followers(leader_sid) {
        let f = c.node(sid);
        assert_eq!(role(f, "following"), 1.0, "server {}", sid.0);
        assert_eq!(role(f, "leading"), 0.0);
        assert!(value(f, "zab_commits_total", &[]) >= 200.0);
        assert_eq!(value(f, "zab_proposals_total", &[]), 0.0);
        assert_eq!(value(f, "zab_proposals_in_flight", &[]), 0.0);
        assert!(value(f, "zab_log_fsync_duration_us", &[]) > 0.0);
        assert!(value(f, "zab_sync_duration_us", &[("direction", "received")]) >= 1.0);
    }
}

/// Every node counted and timed its election, and its sync counters match its status.
fn assert_elections_and_syncs(c: &Cluster) {
    for sid in c.sids() {
        let n = c.node(sid);
        assert!(
            value(n, "zab_elections_total", &[]) >= 1.0,
            "server {}",
            sid.0
        );
        assert!(value(n, "zab_election_duration_us", &[]) >= 1.0);
        assert_syncs_match(n);
    }
}

/// A follower that missed writes is synced again when it restarts (by DIFF here); its new
/// registry counts that sync, the leader's counts one more sent.
async fn restarted_follower_sync_is_counted(c: &mut Cluster, leader_sid: ServerId) {
    let lag = c.followers(leader_sid)[0];
    let sent_before = value(
        c.node(leader_sid),
        "zab_sync_duration_us",
        &[("direction", "sent")],
    );
    c.stop(lag).await;
    let last = c.put_many(leader_sid, "b", 50, 10).await;
    c.start(lag).await;
    c.wait_applied(lag, last, STABLE).await;
    c.wait_status(lag, "serving", |s| s.serving, STABLE).await;
    let restarted = c.node(lag);
    wait_metric(restarted, "a received sync timed", |n| {
        value(n, "zab_sync_duration_us", &[("direction", "received")]) >= 1.0
    })
    .await;
    let received: f64 = ["diff", "trunc", "snap"]
        .iter()
        .map(|m| {
            value(
                restarted,
                "zab_syncs_total",
                &[("direction", "received"), ("mode", m)],
            )
        })
        .sum();
    assert!(received >= 1.0, "{:?}", restarted.status());
    assert_syncs_match(restarted);
    let leader = c.node(leader_sid);
    wait_metric(leader, "the restarted follower's sync timed", |n| {
        value(n, "zab_sync_duration_us", &[("direction", "sent")]) > sent_before
    })
    .await;
    wait_metric(leader, "two learners synced again", |n| {
        value(n, "zab_learners_synced", &[]) == 2.0
    })
    .await;
    assert_syncs_match(leader);
}

/// The text format an embedder serves.
fn assert_text_format(leader: &Node) {
    let mut text = Vec::new();
    TextEncoder::new()
        .encode(&leader.metrics_registry().gather(), &mut text)
        .unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("zab_role{role=\"leading\"} 1"), "{text}");
    assert!(text.contains("zab_peer_acks_folded_total "), "{text}");
    assert!(
        text.contains("zab_commit_latency_us_bucket{le=\"50\"}"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_snapshots_are_counted_sized_and_timed() {
    let mut c = Cluster::new(3, 0);
    c.snap_count = 100;
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    c.put_many(leader, "a", 250, 25).await;
    c.wait_status(leader, "2 snapshots", |s| s.snapshots_taken >= 2, STABLE)
        .await;
    let n = c.node(leader);
    let taken = value(n, "zab_snapshots_taken_total", &[]);
    assert_eq!(taken as u64, n.status().snapshots_taken);
    assert_eq!(value(n, "zab_snapshot_duration_us", &[]), taken);
    assert!(value(n, "zab_snapshot_last_size_bytes", &[]) > 0.0);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_go_to_the_registry_given_and_one_registry_holds_one_node() {
    let mut c = Cluster::new(3, 0);
    let shared = Registry::new();
    c.opts.metrics_registry = Some(shared.clone());
    c.start(ServerId(1)).await;
    // A second node in the same registry would make its names ambiguous: refused at start.
    let again = c.try_start(ServerId(2)).await;
    assert!(matches!(again, Err(NetError::Metrics(_))), "{again:?}");
    c.opts.metrics_registry = None;
    c.start(ServerId(2)).await;
    c.start(ServerId(3)).await;
    let leader = c.wait_stable(STABLE).await;
    let last = c.put_many(leader, "a", 30, 10).await;
    c.wait_applied(ServerId(1), last, STABLE).await;
    let one = c.node(ServerId(1));
    let commits = sample(&shared.gather(), "zab_commits_total", &[]).unwrap();
    assert!(commits >= 30.0, "{commits}");
    assert_eq!(commits, value(one, "zab_commits_total", &[]));
    // Each of the other nodes has a registry of its own with its own values.
    let roles: Vec<f64> = c
        .sids()
        .into_iter()
        .map(|s| role(c.node(s), "leading"))
        .collect();
    assert_eq!(roles.iter().sum::<f64>(), 1.0, "one leader: {roles:?}");
    assert_eq!(
        sample(&shared.gather(), "zab_role", &[("role", "leading")]),
        Some(f64::from(u8::from(leader == ServerId(1))))
    );
    c.shutdown().await;
}
