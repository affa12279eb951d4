//! A write that timed out must not land after a later one (request deadlines and client
//! sessions, PROTOCOL §3.2, §7): a client's write to a frozen node times out; the same client's
//! next write through another node is acknowledged and read back; the frozen node resumes with
//! the old request still in its socket buffer — and the old value must never come back. The
//! same with a follower cut from the leader (network namespaces) while it forwards the write,
//! then healed: TCP would deliver what it had queued.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fe_meta::client::{Client, ClientError, ClientOptions, ClientSession};
use fe_meta::command::Command;
use fe_meta::protocol::{RequestBody, RequestMeta, Status};
use fe_meta::state::catalog::SessionTag;
use tests::proc::{ClusterSpec, NetLab, NodeNet, ProcCluster};

/// The writer's connections: a short timeout, so its write to the frozen node is given up.
const WRITER: ClientOptions = ClientOptions {
    connect_timeout: Duration::from_secs(1),
    request_timeout: Duration::from_millis(1500),
    ..ClientOptions::DEFAULT
};

const KEY: &str = "register";

fn set(value: &str) -> RequestBody {
    RequestBody::Write(Command::SetVar {
        name: KEY.into(),
        value: value.into(),
    })
}

/// `SET_VAR register = value` by `client`, retried (new sequence numbers) until acknowledged
/// or `within` passes; the acknowledged write goes into the ledger.
async fn write_until_acked(c: &ProcCluster, client: &Client, value: &str, within: Duration) {
    let start = Instant::now();
    loop {
        match client.set_var(KEY, value).await {
            Ok(w) => {
                c.ledger().record(KEY, value, w.journal_id.0);
                return;
            }
            Err(e) if start.elapsed() >= within => panic!("{value:?} never acknowledged: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// The register as a sync read on `sid` sees it.
async fn sync_read(c: &ProcCluster, sid: u64) -> Option<String> {
    let client = c.client(sid, None).await.unwrap();
    client.get_var(KEY, true).await.unwrap().value
}

/// Freezes `frozen` (the node the writer's first connection goes to) while a write to it is
/// in flight, writes a newer value through `other`, resumes `frozen`, and checks that the old
/// value never lands.
async fn stale_write_never_lands(name: &str, freeze_leader: bool) {
    let spec = ClusterSpec {
        extra: vec!["write_timeout_ms=4000".into(), "leader_wait_ms=3000".into()],
        ..ClusterSpec::default()
    };
    let mut c = ProcCluster::start(name, spec).await.unwrap();
    let leader = c.leader(Duration::from_secs(10)).await.unwrap();
    let followers: Vec<u64> = c.sids().into_iter().filter(|s| *s != leader).collect();
    let (frozen, other) = if freeze_leader {
        (leader, followers[0])
    } else {
        (followers[0], followers[1])
    };
    let session = Arc::new(ClientSession::new());
    let (frozen_addr, other_addr) = (c.client_addr(frozen), c.client_addr(other));
    let to_frozen = Client::connect_in_session(&frozen_addr, WRITER, session.clone())
        .await
        .unwrap();
    let to_other = Client::connect_in_session(&other_addr, WRITER, session.clone())
        .await
        .unwrap();
    write_until_acked(&c, &to_frozen, "first", Duration::from_secs(10)).await;

    c.pause(frozen).unwrap();
    let frozen_at = Instant::now();
    // Sequence number 2: sent to the frozen node, given up by the client.
    match to_frozen.set_var(KEY, "stale").await {
        Err(ClientError::Timeout { .. }) => {}
        other => panic!("the write to the frozen node should time out, got {other:?}"),
    }
    write_until_acked(&c, &to_other, "newer", Duration::from_secs(20)).await;
    assert_eq!(sync_read(&c, other).await.as_deref(), Some("newer"));

    // Keep the node frozen for a few seconds in all, then let it run its buffered request.
    let frozen_for = Duration::from_secs(4);
    tokio::time::sleep(frozen_for.saturating_sub(frozen_at.elapsed())).await;
    c.resume(frozen).unwrap();
    c.leader(Duration::from_secs(20)).await.unwrap();
    // The resumed node rejoined (the leader wait above) and had the write timeout to act on
    // the old request: forward it, propose it, or refuse it.
    tokio::time::sleep(Duration::from_secs(5)).await;
    for sid in c.sids() {
        assert_eq!(
            sync_read(&c, sid).await.as_deref(),
            Some("newer"),
            "node {sid}: the write that timed out landed after a later one"
        );
    }

    // The same request sent again (same client id and sequence number): refused by sequence.
    let retry = RequestMeta {
        budget_ms: Some(5_000),
        session: Some(SessionTag {
            client_id: session.client_id(),
            seq: 2,
            floor: 2,
        }),
    };
    let again = c.client(other, None).await.unwrap();
    match again.call_with(set("stale"), retry).await {
        Err(ClientError::Server(reply)) if reply.status == Status::StaleRequest => {
            let message = reply.message;
            assert!(message.contains("below the client's floor"), "{message}")
        }
        other => panic!("a retry of the timed-out write must be STALE_REQUEST, got {other:?}"),
    }
    // Every acknowledged write (the register's last: "newer") is on every node.
    c.finish().await.unwrap();
}

/// The writer's node is a follower, frozen: its buffered request is forwarded to the same
/// leader after SIGCONT. Before client sessions this applied the old value after the newer
/// acknowledged one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_timed_out_at_a_frozen_follower_never_lands_after_a_later_one() {
    stale_write_never_lands("stale_write_follower", false).await;
}

/// The writer's node is the leader, frozen past syncLimit: the others elect a new leader; the
/// old one resumes, steps down, and its buffered request must not be applied either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_timed_out_at_a_frozen_leader_never_lands_after_a_later_one() {
    stale_write_never_lands("stale_write_leader", true).await;
}

/// A follower cut from the leader (both ways) while it forwards the client's write: the
/// forward times out, the client gives up and writes newer values through the leader; after
/// the heal the old write must not land (before the fix, TCP delivered the bytes queued in the
/// follower's pooled forward connection and the leader applied them, seconds later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_forwarded_across_a_partition_never_lands_after_the_heal() {
    let lab = match NetLab::create(&[1, 2, 3]) {
        Ok(lab) => lab,
        Err(why) => {
            println!(
                "SKIPPED a_write_forwarded_across_a_partition_never_lands_after_the_heal: {why}"
            );
            return;
        }
    };
    let mut c = ProcCluster::start("stale_write_partition", partitionable_spec(&lab))
        .await
        .unwrap();
    let leader = c.leader(Duration::from_secs(10)).await.unwrap();
    let cut = c.sids().into_iter().find(|s| *s != leader).unwrap();
    let session = Arc::new(ClientSession::new());
    let (cut_addr, leader_addr) = (c.client_addr(cut), c.client_addr(leader));
    let to_cut = Client::connect_in_session(&cut_addr, WRITER, session.clone())
        .await
        .unwrap();
    let to_leader = Client::connect_in_session(&leader_addr, WRITER, session.clone())
        .await
        .unwrap();
    // Through the follower: its pooled connection to the leader now exists.
    write_until_acked(&c, &to_cut, "first", Duration::from_secs(10)).await;

    lab.cut(cut, leader).unwrap();
    let cut_at = Instant::now();
    match to_cut.set_var(KEY, "stale").await {
        Err(ClientError::Timeout { .. }) => {}
        Err(e) if e.status() == Some(Status::Timeout) => {}
        other => panic!("the write forwarded across the cut should time out, got {other:?}"),
    }
    for i in 1..=5 {
        write_until_acked(
            &c,
            &to_leader,
            &format!("newer-{i}"),
            Duration::from_secs(10),
        )
        .await;
    }
    tokio::time::sleep(Duration::from_secs(4).saturating_sub(cut_at.elapsed())).await;
    lab.heal(cut, leader).unwrap();
    c.leader(Duration::from_secs(20)).await.unwrap();
    // Room for TCP's retransmission backoff to deliver anything still queued.
    tokio::time::sleep(Duration::from_secs(8)).await;
    for sid in c.sids() {
        assert_eq!(
            sync_read(&c, sid).await.as_deref(),
            Some("newer-5"),
            "node {sid}: the write forwarded across the partition landed after the heal"
        );
    }
    c.finish().await.unwrap();
    drop(c);
    drop(lab);
}

/// The cluster of the partition test: each node in its own network namespace of `lab`, with
/// the write and leader-wait timeouts of the frozen-node tests.
fn partitionable_spec(lab: &NetLab) -> ClusterSpec {
    let net = [1u64, 2, 3]
        .into_iter()
        .map(|sid| {
            let node = NodeNet {
                host: lab.host(sid),
                netns: Some(lab.netns(sid)),
            };
            (sid, node)
        })
        .collect();
    ClusterSpec {
        extra: vec!["write_timeout_ms=4000".into(), "leader_wait_ms=3000".into()],
        net,
        ..ClusterSpec::default()
    }
}
