//! W6's writer and its gap analysis.
//!
//! One closed loop of 100-byte `set_var bench.w6` writes, each value the write's sequence
//! number (zero-padded to 100 bytes), every success time recorded. It uses one endpoint list
//! (its "connect string"): it starts on the first and moves to the next when its connection is
//! lost or cannot be made; [`Writer::place`] gives it a new list and a new connection.
//!
//! INV-1: sequence numbers grow by one per attempt and the writer is alone on `bench.w6`, so
//! the variable's value after the run is at least the highest acknowledged number if no
//! acknowledged write was lost (a write whose answer was lost may be there too).
//! INV-2: the loop ends at its deadline or on [`Writer::finish`], whichever comes first.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use super::super::Params;
use fe_meta::client::{Client, ClientError, ClientOptions};

/// The variable the writer sets.
pub const VAR: &str = "bench.w6";

/// The value of write `seq`: its number, zero-padded to 100 bytes.
pub fn value_of(seq: u64) -> String {
    format!("{seq:0>100}")
}

#[derive(Default)]
struct Shared {
    ok: Mutex<Vec<Instant>>,
    acked_seq: AtomicU64,
    /// (generation, endpoints): a new generation makes the writer reconnect.
    placement: Mutex<(u64, Vec<String>)>,
    /// The endpoint of the current connection.
    on: Mutex<Option<String>>,
    paused: AtomicBool,
    stop: AtomicBool,
    conn_loss: AtomicU64,
    other: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The running writer.
pub struct Writer {
    shared: Arc<Shared>,
    task: Option<JoinHandle<()>>,
}

/// The writer's error counters at one moment.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counters {
    /// Lost or failed connections.
    pub conn_loss: u64,
    /// Other failed writes (server errors, timeouts).
    pub other: u64,
}

impl Writer {
    /// Starts writing on `endpoints` until `deadline`.
    pub fn start(endpoints: Vec<String>, p: &Params, deadline: Instant) -> Writer {
        let shared = Arc::new(Shared::default());
        *lock(&shared.placement) = (0, endpoints);
        let task = tokio::spawn(run(Arc::clone(&shared), p.clone(), deadline));
        Writer {
            shared,
            task: Some(task),
        }
    }

    /// Gives the writer a new endpoint list and a new connection (on the list's first).
    pub fn place(&self, endpoints: Vec<String>) {
        let mut g = lock(&self.shared.placement);
        *g = (g.0 + 1, endpoints);
    }

    /// Pauses or resumes writing (the quiet gate measures other work only).
    pub fn pause(&self, paused: bool) {
        self.shared.paused.store(paused, Ordering::Relaxed);
    }

    /// The success times so far.
    pub fn ok_times(&self) -> Vec<Instant> {
        lock(&self.shared.ok).clone()
    }

    /// How many writes succeeded so far.
    pub fn count(&self) -> usize {
        lock(&self.shared.ok).len()
    }

    /// The last success time.
    pub fn last_ok(&self) -> Option<Instant> {
        lock(&self.shared.ok).last().copied()
    }

    /// The highest acknowledged sequence number (0: none).
    pub fn acked_seq(&self) -> u64 {
        self.shared.acked_seq.load(Ordering::Relaxed)
    }

    /// The endpoint of the current connection.
    pub fn on(&self) -> Option<String> {
        lock(&self.shared.on).clone()
    }

    /// The error counters.
    pub fn counters(&self) -> Counters {
        Counters {
            conn_loss: self.shared.conn_loss.load(Ordering::Relaxed),
            other: self.shared.other.load(Ordering::Relaxed),
        }
    }

    /// Waits (at most `within`) until a write succeeded after `since` on one of `endpoints`.
    pub async fn wait_writing_on(
        &self,
        endpoints: &[String],
        since: Instant,
        within: Duration,
    ) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            let on = self.on();
            if on.is_some_and(|e| endpoints.contains(&e))
                && self.last_ok().is_some_and(|t| t > since)
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    /// Stops the loop and waits (at most 15 s) for it.
    pub async fn finish(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(15), t).await;
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

async fn run(s: Arc<Shared>, p: Params, deadline: Instant) {
    let opts = ClientOptions {
        connect_timeout: Duration::from_secs(1),
        request_timeout: p.request_timeout,
        ..ClientOptions::DEFAULT
    };
    let mut generation = u64::MAX;
    let mut at = 0usize;
    let mut client: Option<Client> = None;
    let mut seq = 0u64;
    while !s.stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        if s.paused.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        let (g, endpoints) = lock(&s.placement).clone();
        if g != generation || endpoints.is_empty() {
            generation = g;
            at = 0;
            client = None;
            *lock(&s.on) = None;
        }
        let Some(endpoint) = endpoints.get(at % endpoints.len().max(1)).cloned() else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        let c = match &client {
            Some(c) => c,
            None => match Client::connect_with(&endpoint, opts.clone()).await {
                Ok(c) => {
                    *lock(&s.on) = Some(endpoint);
                    client.insert(c)
                }
                Err(_) => {
                    s.conn_loss.fetch_add(1, Ordering::Relaxed);
                    at += 1;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    continue;
                }
            },
        };
        seq += 1;
        match c.set_var(VAR, &value_of(seq)).await {
            Ok(_) => {
                s.acked_seq.store(seq, Ordering::Relaxed);
                lock(&s.ok).push(Instant::now());
            }
            Err(ClientError::Closed { .. } | ClientError::Connect { .. }) => {
                s.conn_loss.fetch_add(1, Ordering::Relaxed);
                client = None;
                *lock(&s.on) = None;
                at += 1;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Err(_) => {
                s.other.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }
}

/// The gaps around one membership change, as the anchors' ZkBench computes them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gaps {
    /// The largest gap between consecutive successes among those from the call until the
    /// window's end (a gap spanning either end counts whole).
    pub max_gap: Duration,
    /// Where that gap starts, ms relative to the call (negative: before it).
    pub gap_from_ms: f64,
    /// Where it ends, ms relative to the call.
    pub gap_to_ms: f64,
    /// The largest gap within the steady phase before the call.
    pub baseline: Duration,
    /// Successes between the call and the window's end.
    pub ops_in_window: usize,
}

fn signed_ms(from: Instant, to: Instant) -> f64 {
    match to.checked_duration_since(from) {
        Some(d) => d.as_secs_f64() * 1e3,
        None => -(from - to).as_secs_f64() * 1e3,
    }
}

/// The gaps in `ok[first..]` (success times) for a change called at `call` after a steady
/// phase from `steady`, with its window ending at `end`; `now` closes a gap still open
/// (no success at or after `end`).
pub fn gaps(
    ok: &[Instant],
    first: usize,
    steady: Instant,
    call: Instant,
    end: Instant,
    now: Instant,
) -> Gaps {
    let mut g = Gaps {
        max_gap: Duration::ZERO,
        gap_from_ms: 0.0,
        gap_to_ms: 0.0,
        baseline: Duration::ZERO,
        ops_in_window: 0,
    };
    let first = first.max(1);
    for i in first..ok.len() {
        let (a, b) = (ok[i - 1], ok[i]);
        let d = b.saturating_duration_since(a);
        if b > call && a < end {
            if d > g.max_gap {
                g.max_gap = d;
                g.gap_from_ms = signed_ms(call, a);
                g.gap_to_ms = signed_ms(call, b);
            }
        } else if a >= steady && b <= call {
            g.baseline = g.baseline.max(d);
        }
        if b >= call && b <= end {
            g.ops_in_window += 1;
        }
    }
    if ok.last().is_none_or(|&l| l < end) {
        let a = ok.last().copied().unwrap_or(call);
        let d = now.saturating_duration_since(a);
        if d > g.max_gap {
            g.max_gap = d;
            g.gap_from_ms = signed_ms(call, a);
            g.gap_to_ms = signed_ms(call, now);
        }
    }
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    #[test]
    fn the_gap_spanning_the_call_counts_whole_and_the_baseline_is_before_it() {
        let t0 = Instant::now();
        // steady from 0, call at 1000, window end at 3000.
        let ok: Vec<Instant> = [0, 10, 30, 40, 990, 1300, 1310, 2990, 3010]
            .iter()
            .map(|&m| at(t0, m))
            .collect();
        let g = gaps(&ok, 1, t0, at(t0, 1000), at(t0, 3000), at(t0, 3100));
        assert_eq!(g.max_gap, Duration::from_millis(1680));
        assert_eq!((g.gap_from_ms, g.gap_to_ms), (310.0, 1990.0));
        assert_eq!(g.baseline, Duration::from_millis(950));
        assert_eq!(g.ops_in_window, 3);
    }

    #[test]
    fn writes_that_never_resume_count_until_now() {
        let t0 = Instant::now();
        let ok: Vec<Instant> = [0, 10, 900].iter().map(|&m| at(t0, m)).collect();
        let g = gaps(&ok, 1, t0, at(t0, 1000), at(t0, 3000), at(t0, 5000));
        assert_eq!(g.max_gap, Duration::from_millis(4100));
        assert_eq!(g.gap_from_ms, -100.0);
        assert_eq!(g.ops_in_window, 0);
    }

    #[test]
    fn values_are_100_bytes_and_carry_their_number() {
        let v = value_of(42);
        assert_eq!(v.len(), 100);
        assert_eq!(v.trim_start_matches('0').parse::<u64>().unwrap(), 42);
    }
}
