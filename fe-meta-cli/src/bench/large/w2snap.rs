//! W2 on the large catalog with and without a background snapshot: one connection with
//! `--w2-outstanding` writes in flight on the leader, while every node's data dir is polled
//! every [`SAMPLE`] for a `snapshot.*.tmp` (a background snapshot being written). Each
//! interval between two polls is classed by what was being written at either end: the
//! leader's snapshot, only a follower's, or none; writes are counted by when they were
//! answered. The throughput while the leader snapshots is compared with the one while no node
//! does (`ratio`, target ≥ 0.8).
//!
//! No snapshot is forced (there is no command for one): the nodes run with
//! `snapCount` = [`super::snap_count::W2_SNAP_COUNT`], freshly restarted, and a node snapshots
//! every snapCount/2..snapCount txns, so W2 runs until it has seen a whole leader snapshot and
//! at least `--run` seconds with none, after `--warm` seconds (or [`ENOUGH`] in all).
//!
//! INV-1: bounded: at most [`QUIET_WAIT`] for running snapshots to end first, then at most
//! [`CAP`] of W2; what is in flight then ends within the client's request timeout.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};

use super::super::cluster::Cluster;
use super::super::load::connect;
use super::super::report::Line;
use super::super::{progress, Params};
use super::mem::snapshots;
use crate::Failure;

/// How often the data dirs are polled.
const SAMPLE: Duration = Duration::from_millis(50);
/// Most time W2 runs waiting for a whole leader snapshot.
const CAP: Duration = Duration::from_secs(240);
/// After this long, a whole leader snapshot is enough (snapshots may follow one another).
const ENOUGH: Duration = Duration::from_secs(90);
/// Most time to wait for the snapshots running before W2 to end.
const QUIET_WAIT: Duration = Duration::from_secs(300);

/// What was being written during an interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// No node was writing a snapshot.
    None = 0,
    /// The leader was (followers maybe too).
    Leader = 1,
    /// Only a follower was.
    Follower = 2,
}

/// One poll: its time since W2 started, and whether the leader / any follower was writing a
/// snapshot.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// Since W2 started.
    pub at: Duration,
    /// The leader had a `snapshot.*.tmp`.
    pub leader: bool,
    /// A follower had one.
    pub follower: bool,
}

/// The writes of one class: seconds, count and latencies (µs).
#[derive(Clone, Debug, Default)]
pub struct ClassStats {
    /// Seconds of intervals in this class.
    pub secs: f64,
    /// Latencies of the writes answered in them, µs.
    pub lat_us: Vec<u64>,
}

impl ClassStats {
    /// Writes per second (`None` without time in this class).
    pub fn ops_per_s(&self) -> Option<f64> {
        (self.secs > 0.0).then(|| self.lat_us.len() as f64 / self.secs)
    }

    fn pct(&mut self, q: f64) -> String {
        if self.lat_us.is_empty() {
            return "NA".to_owned();
        }
        self.lat_us.sort_unstable();
        let i = ((q * (self.lat_us.len() - 1) as f64).round() as usize).min(self.lat_us.len() - 1);
        self.lat_us[i].to_string()
    }
}

/// Classes every interval between consecutive `samples` that starts at or after `from`, and
/// counts the writes `answered` (time since start, latency µs; sorted by time) in each.
pub fn classify(
    samples: &[Sample],
    answered: &[(Duration, u64)],
    from: Duration,
) -> [ClassStats; 3] {
    let mut out: [ClassStats; 3] = Default::default();
    let mut k = answered.partition_point(|(t, _)| *t < from);
    for w in samples.windows(2) {
        let (a, b) = (w[0], w[1]);
        let class = if a.leader || b.leader {
            Class::Leader
        } else if a.follower || b.follower {
            Class::Follower
        } else {
            Class::None
        };
        while k < answered.len() && answered[k].0 < a.at {
            k += 1;
        }
        if a.at < from {
            continue;
        }
        let stats = &mut out[class as usize];
        stats.secs += (b.at - a.at).as_secs_f64();
        while k < answered.len() && answered[k].0 < b.at {
            stats.lat_us.push(answered[k].1);
            k += 1;
        }
    }
    out
}

/// The leader's snapshots seen whole in `samples` (started after the first poll): their
/// durations, to a poll's precision.
pub fn leader_snapshots(samples: &[Sample]) -> Vec<Duration> {
    let mut out = Vec::new();
    let mut started: Option<Duration> = None;
    for w in samples.windows(2) {
        if !w[0].leader && w[1].leader {
            started = Some(w[1].at);
        } else if w[0].leader && !w[1].leader {
            if let Some(t) = started.take() {
                out.push(w[1].at - t);
            }
        }
    }
    out
}

/// Whether the leader / any follower has a `snapshot.*.tmp` now.
fn poll(cluster: &Cluster, leader: u64) -> (bool, bool) {
    let mut out = (false, false);
    for &sid in &cluster.sids {
        let writing = cluster.data_dir(sid).is_some_and(|d| snapshots(&d).1);
        if sid == leader {
            out.0 |= writing;
        } else {
            out.1 |= writing;
        }
    }
    out
}

/// Waits (at most [`QUIET_WAIT`]) until no node is writing a snapshot; whether none is.
pub async fn wait_no_snapshot(cluster: &Cluster, leader: u64) -> bool {
    let t = Instant::now();
    while t.elapsed() < QUIET_WAIT {
        if poll(cluster, leader) == (false, false) {
            return true;
        }
        tokio::time::sleep(SAMPLE).await;
    }
    false
}

/// The polls, until a whole leader snapshot and `p.run` seconds without any were seen after
/// `p.warm` (or [`CAP`]); sets `stop` at the end.
async fn watch(
    cluster: &Cluster,
    leader: u64,
    p: &Params,
    t0: Instant,
    stop: &AtomicBool,
) -> Vec<Sample> {
    let mut samples = Vec::new();
    let (mut next_note, mut base) = (Duration::from_secs(10), 0.0f64);
    while t0.elapsed() < CAP {
        let (l, f) = poll(cluster, leader);
        let at = t0.elapsed();
        if let Some(prev) = samples.last().copied() {
            let prev: Sample = prev;
            if prev.at >= p.warm && !(prev.leader || prev.follower || l || f) {
                base += (at - prev.at).as_secs_f64();
            }
        }
        samples.push(Sample {
            at,
            leader: l,
            follower: f,
        });
        let whole = !leader_snapshots(&samples).is_empty();
        if whole && (base >= p.run.as_secs_f64() || at >= ENOUGH) {
            break;
        }
        if at >= next_note {
            progress(&format!(
                "large W2: {:.0} s, {base:.1} s with no snapshot, leader snapshot {}",
                at.as_secs_f64(),
                if whole {
                    "seen"
                } else if l {
                    "running"
                } else {
                    "awaited"
                }
            ));
            next_note += Duration::from_secs(10);
        }
        tokio::time::sleep(SAMPLE).await;
    }
    stop.store(true, Ordering::Relaxed);
    samples
}

/// W2 on `endpoint` until `stop`: each answered write's time since `t0` and latency (µs);
/// and the failed writes (how many, the first one's error).
async fn writes(
    endpoint: &str,
    p: &Params,
    t0: Instant,
    stop: &AtomicBool,
) -> Result<(Vec<(Duration, u64)>, (u64, Option<String>)), Failure> {
    let client = connect(endpoint, p).await.map_err(Failure::from)?;
    let key = "bench.w2";
    let client = &client;
    let (mut answered, mut errors) = (Vec::with_capacity(1 << 20), (0u64, None));
    let mut inflight = FuturesUnordered::new();
    loop {
        while inflight.len() < p.outstanding && !stop.load(Ordering::Relaxed) {
            let ts = Instant::now();
            inflight.push(async move { (ts, client.set_var(key, &p.payload).await) });
        }
        let Some((ts, r)) = inflight.next().await else {
            break;
        };
        match r {
            Ok(_) => {
                let us = u64::try_from(ts.elapsed().as_micros()).unwrap_or(u64::MAX);
                answered.push((t0.elapsed(), us));
            }
            Err(e) => {
                errors.0 += 1;
                errors.1.get_or_insert_with(|| e.to_string());
            }
        }
    }
    Ok((answered, errors))
}

/// Runs the phase on the leader `leader` of a launched cluster.
pub async fn run(cluster: &Cluster, leader: u64, p: &Params) -> Result<Line, Failure> {
    let lep = cluster.endpoint(leader).unwrap_or_default().to_owned();
    let quiet = wait_no_snapshot(cluster, leader).await;
    progress(&format!(
        "large W2: one connection, {} in flight, until a whole leader snapshot and {:.0} s \
         without any are seen (at most {} s)",
        p.outstanding,
        p.run.as_secs_f64(),
        CAP.as_secs()
    ));
    let stop = AtomicBool::new(false);
    let t0 = Instant::now();
    let (w, samples) = tokio::join!(
        writes(&lep, p, t0, &stop),
        watch(cluster, leader, p, t0, &stop)
    );
    let (answered, errors) = w?;
    let [mut none, mut snap, fol] = classify(&samples, &answered, p.warm);
    let snaps = leader_snapshots(&samples);
    let rate = |c: &ClassStats| c.ops_per_s().map_or("NA".to_owned(), |r| format!("{r:.0}"));
    let ratio = match (snap.ops_per_s(), none.ops_per_s()) {
        (Some(s), Some(n)) if n > 0.0 => format!("{:.2}", s / n),
        _ => "NA".to_owned(),
    };
    let mut l = Line::new("large", "ens-leader");
    l.set("phase", "w2-snapshot")
        .set("outstanding", p.outstanding)
        .set(
            "secs",
            format!("{:.1}", samples.last().map_or(0.0, |s| s.at.as_secs_f64())),
        )
        .set("quiet_start", if quiet { "yes" } else { "no" })
        .set("no_snap_s", format!("{:.1}", none.secs))
        .set("no_snap_ops_per_s", rate(&none))
        .set("no_snap_p50_us", none.pct(0.5))
        .set("no_snap_p99_us", none.pct(0.99))
        .set("leader_snap_s", format!("{:.1}", snap.secs))
        .set("leader_snap_ops_per_s", rate(&snap))
        .set("leader_snap_p50_us", snap.pct(0.5))
        .set("leader_snap_p99_us", snap.pct(0.99))
        .set("follower_snap_s", format!("{:.1}", fol.secs))
        .set("follower_snap_ops_per_s", rate(&fol))
        .set("ratio", &ratio)
        .set("ratio_target", "0.8")
        .set("leader_snapshots_seen", snaps.len())
        .set(
            "leader_snapshot_ms",
            snaps
                .first()
                .map_or("-1".to_owned(), |d| format!("{:.0}", d.as_secs_f64() * 1e3)),
        )
        .set("errors", errors.0)
        .set("first_error", errors.1.unwrap_or_else(|| "none".to_owned()));
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(ms: u64, leader: bool, follower: bool) -> Sample {
        Sample {
            at: Duration::from_millis(ms),
            leader,
            follower,
        }
    }

    #[test]
    fn intervals_are_classed_by_either_end_and_writes_by_when_answered() {
        let samples = [
            s(0, false, false),
            s(100, false, false),
            s(200, false, false),
            s(300, true, false),
            s(400, true, true),
            s(500, false, true),
            s(600, false, false),
            s(700, false, false),
        ];
        // 1 write per 10 ms from 0 to 700 ms, latency = its index.
        let answered: Vec<(Duration, u64)> = (0..70)
            .map(|i| (Duration::from_millis(i * 10), i))
            .collect();
        let [none, leader, follower] = classify(&samples, &answered, Duration::from_millis(100));
        // none: 100-200, 600-700; leader: 200-300, 300-400, 400-500; follower: 500-600.
        assert!((none.secs - 0.2).abs() < 1e-9, "{none:?}");
        assert!((leader.secs - 0.3).abs() < 1e-9);
        assert!((follower.secs - 0.1).abs() < 1e-9);
        assert_eq!(none.lat_us.len(), 20);
        assert_eq!(leader.lat_us.len(), 30);
        assert_eq!(follower.lat_us, (50..60).collect::<Vec<u64>>());
        assert_eq!(none.ops_per_s().map(|r| r.round()), Some(100.0));
        assert_eq!(ClassStats::default().ops_per_s(), None);
        // The leader's snapshot ran from the 300 ms poll to the 500 ms one.
        assert_eq!(leader_snapshots(&samples), vec![Duration::from_millis(200)]);
        // One already running at the first poll is not a whole one.
        assert!(leader_snapshots(&[s(0, true, false), s(50, false, false)]).is_empty());
    }
}
