//! W5, the catch-up workload: a copy of the anchors' ZkBench `catchup`.
//!
//! SIGTERM a follower, write `txns` entries to the leader (≤ 1000 in flight), restart it, and
//! time restart → serving (its STATUS says follower) and restart → caught up (its applied
//! journal id reaches the leader's, read before the restart). The leader's `mntr` tells which
//! kind of sync (DIFF, TRUNC, SNAP) brought it back.
//!
//! INV: every wait is bounded (60 s to find a healthy cluster, 300 s for the writes and for the
//! catch-up).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};
use nix::sys::signal::Signal;

use super::cluster::Cluster;
use super::load::connect;
use super::report::Line;
use super::{progress, Params};
use crate::Failure;
use fe_meta::client::{four_letter_word, Client, ClientOptions};
use fe_meta::protocol::Mode;
use fe_meta::Zxid;

const PHASE: Duration = Duration::from_secs(60);
const LONG_PHASE: Duration = Duration::from_secs(300);

/// How the writes while the follower was down went.
struct Written {
    txns: usize,
    secs: f64,
    errors: u64,
}

/// W5: catch-up of a follower after `p.w5_txns` writes; `op` is `set` (one variable) or
/// `create` (a new variable per write).
pub async fn catchup(
    cluster: &mut Cluster,
    p: &Params,
    label: &str,
    op: &str,
) -> Result<Vec<Line>, Failure> {
    let ((leader, lep), (follower, fep)) = cluster.leader_and_follower(PHASE).await?;
    cluster.stop_node(follower, Signal::SIGTERM).await?;
    progress(&format!("W5 follower {follower} stopped; leader {leader}"));
    let client = connect(&lep, p).await.map_err(Failure::from)?;
    let written = write_while_down(&client, p, op).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let lz = client
        .status()
        .await
        .map_err(Failure::from)?
        .applied_journal_id;
    progress(&format!(
        "W5 wrote {} txns in {:.2} s ({:.0}/s, errors={}); leader journal id {lz}",
        written.txns,
        written.secs,
        written.txns as f64 / written.secs,
        written.errors
    ));
    let sent_before = syncs_sent(&lep).await;
    cluster.restart_node(follower)?;
    let (serving, done) = wait_caught_up(&fep, lz).await;
    let lz2 = client
        .status()
        .await
        .map_or(Zxid::ZERO, |s| s.applied_journal_id);
    let ms0 = |d: Option<Duration>| {
        d.map_or("-1".to_owned(), |d| format!("{:.0}", d.as_secs_f64() * 1e3))
    };
    let mut l = Line::new("W5", label);
    l.set("op", op)
        .set("follower", follower)
        .set("leader", leader)
        .set("txns", written.txns)
        .set("write_s", format!("{:.2}", written.secs))
        .set(
            "write_ops_per_s",
            format!("{:.0}", written.txns as f64 / written.secs),
        )
        .set("write_errors", written.errors)
        .set("leader_zxid", lz.to_string())
        .set("leader_zxid_after", lz2.to_string())
        .set("restart_to_serving_ms", ms0(serving))
        .set("restart_to_caught_up_ms", ms0(done));
    let mut sync = Line::new("W5-sync", label);
    sync.set("info", sync_sent_since(&lep, sent_before).await);
    Ok(vec![l, sync])
}

/// `p.w5_txns` writes through `client`, at most 1000 in flight, within [`LONG_PHASE`].
async fn write_while_down(client: &Client, p: &Params, op: &str) -> Written {
    let errors = AtomicU64::new(0);
    let started = Instant::now();
    let deadline = started + LONG_PHASE;
    let mut inflight = FuturesUnordered::new();
    let mut next = 0usize;
    let errors_ref = &errors;
    while next < p.w5_txns || !inflight.is_empty() {
        while next < p.w5_txns && inflight.len() < 1000 && Instant::now() < deadline {
            let name = if op == "create" {
                format!("bench.w5c.n{next}")
            } else {
                "bench.w5".to_owned()
            };
            next += 1;
            inflight.push(async move {
                if client.set_var(&name, &p.payload).await.is_err() {
                    errors_ref.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        if inflight.next().await.is_none() {
            break;
        }
    }
    Written {
        txns: next,
        secs: started.elapsed().as_secs_f64(),
        errors: errors.load(Ordering::Relaxed),
    }
}

/// Polls the restarted follower at `endpoint`: how long until it serves as a follower, and
/// until it has applied `leader_journal_id` (each `None` if not within [`LONG_PHASE`]).
pub(super) async fn wait_caught_up(
    endpoint: &str,
    leader_journal_id: Zxid,
) -> (Option<Duration>, Option<Duration>) {
    let started = Instant::now();
    let mut serving = None;
    let quick = ClientOptions {
        connect_timeout: Duration::from_millis(500),
        request_timeout: Duration::from_secs(2),
        ..ClientOptions::DEFAULT
    };
    while started.elapsed() < LONG_PHASE {
        if let Ok(c) = Client::connect_with(endpoint, quick.clone()).await {
            if let Ok(s) = c.status().await {
                if s.mode == Mode::Follower && serving.is_none() {
                    serving = Some(started.elapsed());
                }
                if s.mode == Mode::Follower && s.applied_journal_id >= leader_journal_id {
                    return (serving, Some(started.elapsed()));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    (serving, None)
}

/// The leader's `mntr` counts of syncs sent: DIFF, TRUNC, SNAP.
pub(super) async fn syncs_sent(endpoint: &str) -> Option<[u64; 3]> {
    let text = four_letter_word(endpoint, "mntr", Duration::from_secs(2))
        .await
        .ok()?;
    let get = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('\t')?.trim().parse().ok())
    };
    Some([
        get("fe_meta_sync_sent_diff")?,
        get("fe_meta_sync_sent_trunc")?,
        get("fe_meta_sync_sent_snap")?,
    ])
}

/// Which kind of sync the leader sent since `before` (polled up to 2 s).
pub(super) async fn sync_sent_since(endpoint: &str, before: Option<[u64; 3]>) -> String {
    let Some(before) = before else {
        return "sync=n/a (no mntr from the leader)".to_owned();
    };
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if let Some(now) = syncs_sent(endpoint).await {
            let kinds: Vec<&str> = ["DIFF", "TRUNC", "SNAP"]
                .iter()
                .zip(now.iter().zip(before))
                .filter(|(_, (n, b))| **n > *b)
                .map(|(k, _)| *k)
                .collect();
            if !kinds.is_empty() {
                return format!("sync={} (leader's mntr)", kinds.join("+"));
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    "sync=n/a (the leader's mntr counted none)".to_owned()
}
