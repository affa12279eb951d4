//! W4, the leader failover workload: a copy of the anchors' ZkBench `failover` (W5, the
//! catch-up, is in `catchup`).
//!
//! W4, per trial: wait until every node follows one leader and is synced (has applied an
//! entry of the leader's epoch: `Cluster::wait_healthy`), 2 s of steady writes, SIGKILL the
//! leader, then measure
//! * `unavail_ms`: the already-connected writer's largest gap between two successful writes
//!   around the kill (it reconnects to the next node when its connection is lost),
//! * `new_leader_reported_ms`: kill → a survivor's STATUS says it leads an epoch above the
//!   killed leader's and has applied a txn of that epoch: it is established (discovery and
//!   sync with a quorum are over) and commits (its first is the TIMESTAMP a leader logs on
//!   taking office). A leader still in discovery already reports LEADING and its new epoch,
//!   so neither alone means established. Polled every millisecond,
//! * `fresh_client_first_write_ms`: kill → the first write committed by a client connecting
//!   afresh to each survivor in turn (100 ms to connect),
//! * `killed_exit_ms`: kill → the killed process reaped (polled every millisecond). The kernel
//!   frees a killed process's memory before it closes its sockets (60–70 ms per GiB of
//!   RSS here), so the survivors cannot learn of the kill sooner; with a large catalog this,
//!   not the election, is most of `new_leader_reported_ms`. `new_leader_after_exit_ms` is the
//!   rest: what the election, discovery and sync took once the connections had closed,
//!
//! then restart the killed node and wait until it is synced and serving again.
//!
//! INV: every wait is bounded (60 s per phase).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::cluster::Cluster;
use super::load::connect;
use super::report::Line;
use super::{progress, Params};
use crate::Failure;
use fe_meta::client::{Client, ClientError, ClientOptions};
use fe_meta::protocol::{Mode, StatusInfo};

const PHASE: Duration = Duration::from_secs(60);

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

/// The W4 writer's record, shared with the trial loop.
#[derive(Default)]
struct Record {
    ok: Mutex<Vec<Instant>>,
    conn_loss: AtomicU64,
    other: AtomicU64,
    /// The first error that was not a lost or refused connection.
    first_other: Mutex<Option<String>>,
    stop: AtomicBool,
}

impl Record {
    fn note_other(&self, e: &ClientError) {
        let mut first = self.first_other.lock().unwrap_or_else(|p| p.into_inner());
        first.get_or_insert_with(|| format!("{}: {e}", e.name()));
    }

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
            Err(e) => {
                rec.other.fetch_add(1, Ordering::Relaxed);
                rec.note_other(&e);
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
        ..ClientOptions::DEFAULT
    };
    while Instant::now() < deadline {
        for e in &survivors {
            if let Ok(c) = Client::connect_with(e, opts.clone()).await {
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
    let mut trials = Vec::new();
    for t in 1..=p.trials {
        let trial = kill_the_leader(cluster, p, &rec, t).await?;
        progress(&format!("W4 {}", trial.line().render()));
        trials.push(trial);
        let t_restart = Instant::now();
        let killed = trials.last().map_or(0, |t: &Trial| t.killed);
        cluster.restart_node(killed)?;
        cluster.wait_healthy(PHASE * 2).await?;
        progress(&format!(
            "W4 trial {t}: node {killed} rejoined after {} ms",
            t_restart.elapsed().as_millis()
        ));
    }
    rec.stop.store(true, Ordering::Relaxed);
    let _ = tokio::time::timeout(Duration::from_secs(15), w).await;
    let mut lines: Vec<Line> = trials.iter().map(Trial::line).collect();
    lines.push(summary(&trials, &rec));
    Ok(lines)
}

/// What one W4 trial saw, times relative to the kill.
struct Trial {
    number: usize,
    killed: u64,
    new_leader: u64,
    /// The writer's largest gap between two successful writes around the kill.
    gap: Duration,
    last_ok_before_kill_ms: f64,
    first_ok_after_kill_ms: f64,
    /// -1 if no survivor reported itself leader within the phase.
    new_leader_ms: f64,
    /// NaN if no fresh client's write succeeded within the phase.
    probe_ms: f64,
    /// Kill → the killed process reaped (its memory freed and its sockets closed).
    exit_ms: f64,
    ops_before: usize,
    ops_after: usize,
}

impl Trial {
    fn line(&self) -> Line {
        let mut l = Line::new("W4", "ens");
        l.set("trial", self.number)
            .set("killed", self.killed)
            .set("new_leader", self.new_leader)
            .set("unavail_ms", ms(self.gap))
            .set(
                "last_ok_before_kill_ms",
                format!("{:.1}", self.last_ok_before_kill_ms),
            )
            .set(
                "first_ok_after_kill_ms",
                format!("{:.1}", self.first_ok_after_kill_ms),
            )
            .set(
                "new_leader_reported_ms",
                format!("{:.1}", self.new_leader_ms),
            )
            .set(
                "fresh_client_first_write_ms",
                if self.probe_ms.is_nan() {
                    "-1".to_owned()
                } else {
                    format!("{:.1}", self.probe_ms)
                },
            )
            .set("killed_exit_ms", format!("{:.1}", self.exit_ms))
            .set("new_leader_after_exit_ms", after_exit(self))
            .set("ops_before", self.ops_before)
            .set("ops_after", self.ops_after);
        l
    }
}

/// One trial: wait for a healthy cluster and 2 s of steady writes, SIGKILL the leader, and
/// measure until the writer is back (the killed node stays down).
async fn kill_the_leader(
    cluster: &mut Cluster,
    p: &Params,
    rec: &Record,
    number: usize,
) -> Result<Trial, Failure> {
    cluster.wait_healthy(PHASE).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let leader = cluster.wait_healthy(PHASE).await?;
    let old_epoch = cluster
        .statuses()
        .await
        .iter()
        .flatten()
        .map(|s| s.epoch)
        .max()
        .unwrap_or(0);
    let ops_before = rec.ok_times().len();
    let t_kill = Instant::now();
    cluster.stop_node(leader, Signal::SIGKILL).await?;
    let exit_ms = t_kill.elapsed().as_secs_f64() * 1e3;
    let survivors: Vec<String> = cluster
        .sids
        .iter()
        .zip(&cluster.endpoints)
        .filter(|(s, _)| **s != leader)
        .map(|(_, e)| e.clone())
        .collect();
    let probe = tokio::spawn(probe(survivors.clone(), p.clone(), t_kill + PHASE));
    let (elected, new_leader) = wait_new_leader(&survivors, t_kill, old_epoch).await;
    let resume_after = elected.unwrap_or(t_kill).max(t_kill);
    while t_kill.elapsed() < PHASE && rec.ok_times().last().is_none_or(|&l| l < resume_after) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let probed = probe.await.ok().flatten();
    let (gap, gap_start, gap_end) = largest_gap(&rec.ok_times(), ops_before, t_kill);
    Ok(Trial {
        number,
        killed: leader,
        new_leader,
        gap,
        last_ok_before_kill_ms: signed_ms(gap_start, t_kill),
        first_ok_after_kill_ms: signed_ms(t_kill, gap_end),
        new_leader_ms: elected.map_or(-1.0, |e| (e - t_kill).as_secs_f64() * 1e3),
        probe_ms: probed.map_or(f64::NAN, |e| (e - t_kill).as_secs_f64() * 1e3),
        exit_ms,
        ops_before,
        ops_after: rec.ok_times().len(),
    })
}

/// Polls the survivors every millisecond until one reports itself the leader of an epoch above
/// `old_epoch` (the killed leader's) that applied a txn of it (so it is established): when,
/// and which.
async fn wait_new_leader(
    survivors: &[String],
    t_kill: Instant,
    old_epoch: u64,
) -> (Option<Instant>, u64) {
    while t_kill.elapsed() < PHASE {
        let statuses = super::super::local_cluster::poll_endpoints(survivors).await;
        let established = |s: &&StatusInfo| {
            let applied = u64::from(s.applied_journal_id.epoch().0);
            s.mode == Mode::Leader && s.epoch > old_epoch && applied == s.epoch
        };
        if let Some(s) = statuses.iter().flatten().find(established) {
            return (Some(Instant::now()), s.sid);
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    (None, 0)
}

/// The largest gap between two successful writes from about `before` on: (gap, its start,
/// its end); `(0, t_kill, t_kill)` when there is none.
fn largest_gap(ok: &[Instant], before: usize, t_kill: Instant) -> (Duration, Instant, Instant) {
    let mut best = (Duration::ZERO, t_kill, t_kill);
    for i in before.saturating_sub(1).max(1)..ok.len() {
        let g = ok[i].saturating_duration_since(ok[i - 1]);
        if g > best.0 {
            best = (g, ok[i - 1], ok[i]);
        }
    }
    best
}

/// The summary line over every trial.
fn summary(trials: &[Trial], rec: &Record) -> Line {
    let n = trials.len().max(1) as f64;
    let mean = |f: fn(&Trial) -> f64| trials.iter().map(f).sum::<f64>() / n;
    let max_out = trials
        .iter()
        .map(|t| t.gap.as_secs_f64() * 1e3)
        .fold(0.0f64, f64::max);
    let mut s = Line::new("W4", "ens");
    s.flag("summary")
        .set("trials", trials.len())
        .set(
            "mean_unavail_ms",
            format!("{:.1}", mean(|t| t.gap.as_secs_f64() * 1e3)),
        )
        .set("max_unavail_ms", format!("{max_out:.1}"))
        .set(
            "mean_new_leader_ms",
            format!("{:.1}", mean(|t| t.new_leader_ms)),
        )
        .set(
            "mean_fresh_client_first_write_ms",
            format!("{:.1}", mean(|t| t.probe_ms)),
        )
        .set("mean_killed_exit_ms", format!("{:.1}", mean(|t| t.exit_ms)))
        .set("conn_loss_errors", rec.conn_loss.load(Ordering::Relaxed))
        .set("session_expired", 0)
        .set("other_errors", rec.other.load(Ordering::Relaxed))
        .set("first_other_error", first_other(rec));
    s
}

/// New leader reported − killed process reaped, ms; `-1` when no new leader was reported.
fn after_exit(t: &Trial) -> String {
    if t.new_leader_ms < 0.0 {
        "-1".to_owned()
    } else {
        format!("{:.1}", t.new_leader_ms - t.exit_ms)
    }
}

/// The writer's first error other than a lost connection; `none` when there was none.
fn first_other(rec: &Record) -> String {
    let first = rec.first_other.lock().unwrap_or_else(|e| e.into_inner());
    first.clone().unwrap_or_else(|| "none".to_owned())
}

/// `b - a` in ms, negative when `b` is before `a`.
fn signed_ms(a: Instant, b: Instant) -> f64 {
    match b.checked_duration_since(a) {
        Some(d) => d.as_secs_f64() * 1e3,
        None => -(a - b).as_secs_f64() * 1e3,
    }
}
