//! The fault workloads, copies of the anchors' ZkBench `failover` (W4) and `catchup` (W5).
//!
//! W4, per trial: wait until every node follows one leader and is synced (has applied an
//! entry of the leader's epoch: `Cluster::wait_healthy`), 2 s of steady writes, SIGKILL the
//! leader, then measure
//! * `unavail_ms`: the already-connected writer's largest gap between two successful writes
//!   around the kill (it reconnects to the next node when its connection is lost),
//! * `new_leader_reported_ms`: kill → a survivor's STATUS says leader (polled every 5 ms),
//! * `fresh_client_first_write_ms`: kill → the first write committed by a client connecting
//!   afresh to each survivor in turn (100 ms to connect),
//!
//! then restart the killed node and wait until it is synced and serving again.
//!
//! W5: SIGTERM a follower, write `txns` entries to the leader (≤ 1000 in flight), restart it,
//! and time restart → serving (its STATUS says follower) and restart → caught up (its applied
//! journal id reaches the leader's, read before the restart).
//!
//! INV: every wait is bounded (60 s per W4 phase, 300 s for W5's writes and catch-up).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};
use nix::sys::signal::Signal;

use super::cluster::Cluster;
use super::load::connect;
use super::report::Line;
use super::{progress, Params};
use crate::Failure;
use fe_meta::client::{four_letter_word, Client, ClientError, ClientOptions};
use fe_meta::protocol::Mode;
use fe_meta::Zxid;

const PHASE: Duration = Duration::from_secs(60);

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

fn client_failure(e: ClientError) -> Failure {
    Failure::from(e)
}

/// The W4 writer's record, shared with the trial loop.
#[derive(Default)]
struct Record {
    ok: Mutex<Vec<Instant>>,
    conn_loss: AtomicU64,
    other: AtomicU64,
    stop: AtomicBool,
}

impl Record {
    fn ok_times(&self) -> std::sync::MutexGuard<'_, Vec<Instant>> {
        self.ok.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The already-connected writer: writes in a closed loop; on a lost connection it connects
/// to the next endpoint (like ZooKeeper's client moving along its connect string).
async fn writer(endpoints: Vec<String>, p: Params, rec: Arc<Record>, deadline: Instant) {
    let mut at = 0usize;
    let mut client: Option<Client> = None;
    while !rec.stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        let c = match &client {
            Some(c) => c,
            None => match connect(&endpoints[at % endpoints.len()], &p).await {
                Ok(c) => client.insert(c),
                Err(_) => {
                    rec.conn_loss.fetch_add(1, Ordering::Relaxed);
                    at += 1;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    continue;
                }
            },
        };
        match c.set_var("bench.w4", &p.payload).await {
            Ok(_) => rec.ok_times().push(Instant::now()),
            Err(ClientError::Closed { .. } | ClientError::Connect { .. }) => {
                rec.conn_loss.fetch_add(1, Ordering::Relaxed);
                client = None;
                at += 1;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Err(_) => {
                rec.other.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }
}

/// A fresh client's first committed write: each survivor in turn, 100 ms to connect.
async fn probe(survivors: Vec<String>, p: Params, deadline: Instant) -> Option<Instant> {
    let opts = ClientOptions {
        connect_timeout: Duration::from_millis(100),
        request_timeout: p.client_options().request_timeout,
    };
    while Instant::now() < deadline {
        for e in &survivors {
            if let Ok(c) = Client::connect_with(e, opts).await {
                if c.set_var("bench.w4", &p.payload).await.is_ok() {
                    return Some(Instant::now());
                }
            } else {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }
    None
}

/// W4: `p.trials` leader kills.
pub async fn failover(cluster: &mut Cluster, p: &Params) -> Result<Vec<Line>, Failure> {
    cluster.wait_healthy(PHASE).await?;
    let rec = Arc::new(Record::default());
    let bound = Instant::now() + PHASE * 4 * u32::try_from(p.trials).unwrap_or(1);
    let w = tokio::spawn(writer(
        cluster.endpoints.clone(),
        p.clone(),
        Arc::clone(&rec),
        bound,
    ));
    let mut lines = Vec::new();
    let (mut sum_out, mut max_out, mut sum_elect, mut sum_probe) = (0.0, 0.0f64, 0.0, 0.0);
    for t in 1..=p.trials {
        cluster.wait_healthy(PHASE).await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let leader = cluster.wait_healthy(PHASE).await?;
        let before = rec.ok_times().len();
        let t_kill = Instant::now();
        cluster.stop_node(leader, Signal::SIGKILL).await?;
        let survivors: Vec<(u64, String)> = cluster
            .sids
            .iter()
            .zip(&cluster.endpoints)
            .filter(|(s, _)| **s != leader)
            .map(|(s, e)| (*s, e.clone()))
            .collect();
        let probe = tokio::spawn(probe(
            survivors.iter().map(|(_, e)| e.clone()).collect(),
            p.clone(),
            t_kill + PHASE,
        ));
        let (mut elected, mut new_leader) = (None, 0u64);
        let survivor_eps: Vec<String> = survivors.iter().map(|(_, e)| e.clone()).collect();
        while elected.is_none() && t_kill.elapsed() < PHASE {
            let statuses = super::super::local_cluster::poll_endpoints(&survivor_eps).await;
            if let Some(s) = statuses.iter().flatten().find(|s| s.mode == Mode::Leader) {
                elected = Some(Instant::now());
                new_leader = s.sid;
            } else {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        let resume_after = elected.unwrap_or(t_kill).max(t_kill);
        while t_kill.elapsed() < PHASE && rec.ok_times().last().is_none_or(|&l| l < resume_after) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let probed = probe.await.ok().flatten();
        let (gap, gap_start, gap_end) = {
            let ok = rec.ok_times();
            let mut best = (Duration::ZERO, t_kill, t_kill);
            for i in before.saturating_sub(1).max(1)..ok.len() {
                let g = ok[i].saturating_duration_since(ok[i - 1]);
                if g > best.0 {
                    best = (g, ok[i - 1], ok[i]);
                }
            }
            best
        };
        let after = rec.ok_times().len();
        let elect_ms = elected.map_or(-1.0, |e| (e - t_kill).as_secs_f64() * 1e3);
        let probe_ms = probed.map_or(f64::NAN, |e| (e - t_kill).as_secs_f64() * 1e3);
        let mut l = Line::new("W4", "ens");
        l.set("trial", t)
            .set("killed", leader)
            .set("new_leader", new_leader)
            .set("unavail_ms", ms(gap))
            .set(
                "last_ok_before_kill_ms",
                format!("{:.1}", signed_ms(gap_start, t_kill)),
            )
            .set(
                "first_ok_after_kill_ms",
                format!("{:.1}", signed_ms(t_kill, gap_end)),
            )
            .set("new_leader_reported_ms", format!("{elect_ms:.1}"))
            .set(
                "fresh_client_first_write_ms",
                if probe_ms.is_nan() {
                    "-1".to_owned()
                } else {
                    format!("{probe_ms:.1}")
                },
            )
            .set("ops_before", before)
            .set("ops_after", after);
        progress(&format!("W4 {}", l.render()));
        sum_out += gap.as_secs_f64() * 1e3;
        max_out = max_out.max(gap.as_secs_f64() * 1e3);
        sum_elect += elect_ms;
        sum_probe += probe_ms;
        lines.push(l);
        let t_restart = Instant::now();
        cluster.restart_node(leader)?;
        cluster.wait_healthy(PHASE * 2).await?;
        progress(&format!(
            "W4 trial {t}: node {leader} rejoined after {} ms",
            t_restart.elapsed().as_millis()
        ));
    }
    rec.stop.store(true, Ordering::Relaxed);
    let _ = tokio::time::timeout(Duration::from_secs(15), w).await;
    let n = p.trials.max(1) as f64;
    let mut s = Line::new("W4", "ens");
    s.flag("summary")
        .set("trials", p.trials)
        .set("mean_unavail_ms", format!("{:.1}", sum_out / n))
        .set("max_unavail_ms", format!("{max_out:.1}"))
        .set("mean_new_leader_ms", format!("{:.1}", sum_elect / n))
        .set(
            "mean_fresh_client_first_write_ms",
            format!("{:.1}", sum_probe / n),
        )
        .set("conn_loss_errors", rec.conn_loss.load(Ordering::Relaxed))
        .set("session_expired", 0)
        .set("other_errors", rec.other.load(Ordering::Relaxed));
    lines.push(s);
    Ok(lines)
}

/// `b - a` in ms, negative when `b` is before `a`.
fn signed_ms(a: Instant, b: Instant) -> f64 {
    match b.checked_duration_since(a) {
        Some(d) => d.as_secs_f64() * 1e3,
        None => -(a - b).as_secs_f64() * 1e3,
    }
}

/// W5: catch-up of a follower after `p.w5_txns` writes; `op` is `set` (one variable) or
/// `create` (a new variable per write).
pub async fn catchup(
    cluster: &mut Cluster,
    p: &Params,
    label: &str,
    op: &str,
) -> Result<Vec<Line>, Failure> {
    let leader = cluster.wait_healthy(PHASE).await?;
    let follower = cluster
        .sids
        .iter()
        .copied()
        .rfind(|&s| s != leader)
        .ok_or_else(|| Failure::other("no follower"))?;
    let lep = cluster.endpoint(leader).unwrap_or_default().to_owned();
    let fep = cluster.endpoint(follower).unwrap_or_default().to_owned();
    cluster.stop_node(follower, Signal::SIGTERM).await?;
    progress(&format!("W5 follower {follower} stopped; leader {leader}"));
    let client = connect(&lep, p).await.map_err(client_failure)?;
    let errors = AtomicU64::new(0);
    let tw0 = Instant::now();
    let deadline = tw0 + Duration::from_secs(300);
    let mut inflight = FuturesUnordered::new();
    let mut next = 0usize;
    let (client, errors_ref) = (&client, &errors);
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
    let write_s = tw0.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let lz = client
        .status()
        .await
        .map_err(client_failure)?
        .applied_journal_id;
    progress(&format!(
        "W5 wrote {next} txns in {write_s:.2} s ({:.0}/s, errors={}); leader journal id {lz}",
        next as f64 / write_s,
        errors.load(Ordering::Relaxed)
    ));
    let sent_before = syncs_sent(&lep).await;
    let t0 = Instant::now();
    cluster.restart_node(follower)?;
    let (mut serving, mut done) = (None, None);
    let quick = ClientOptions {
        connect_timeout: Duration::from_millis(500),
        request_timeout: Duration::from_secs(1),
    };
    while t0.elapsed() < Duration::from_secs(300) {
        if let Ok(c) = Client::connect_with(&fep, quick).await {
            if let Ok(s) = c.status().await {
                if s.mode == Mode::Follower && serving.is_none() {
                    serving = Some(t0.elapsed());
                }
                if s.mode == Mode::Follower && s.applied_journal_id >= lz {
                    done = Some(t0.elapsed());
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
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
        .set("txns", next)
        .set("write_s", format!("{write_s:.2}"))
        .set("write_ops_per_s", format!("{:.0}", next as f64 / write_s))
        .set("write_errors", errors.load(Ordering::Relaxed))
        .set("leader_zxid", lz.to_string())
        .set("leader_zxid_after", lz2.to_string())
        .set("restart_to_serving_ms", ms0(serving))
        .set("restart_to_caught_up_ms", ms0(done));
    let mut sync = Line::new("W5-sync", label);
    sync.set("info", sync_sent_since(&lep, sent_before).await);
    Ok(vec![l, sync])
}

/// The leader's `mntr` counts of syncs sent: DIFF, TRUNC, SNAP.
async fn syncs_sent(endpoint: &str) -> Option<[u64; 3]> {
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
async fn sync_sent_since(endpoint: &str, before: Option<[u64; 3]>) -> String {
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
