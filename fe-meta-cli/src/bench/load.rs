//! The steady-state workloads W0–W3, each a faithful copy of the anchors' ZkBench mode with
//! `set-var` of a 100-byte value in place of `setData` (and `get-var` for `getData`).
//!
//! | id | ZkBench mode | what |
//! |----|--------------|------|
//! | W0 | `read`  | 1 client, closed-loop reads (no consensus) |
//! | W1 | `lat`   | 1 client, closed-loop writes |
//! | W2 | `async` | 1 connection, up to `outstanding` writes in flight |
//! | W3 | `conc`  | `sessions` clients, client i on endpoint i % k, each its own variable |
//!
//! Each runs `warm` then `run` seconds; latencies count operations that started after the
//! warm-up (W2/W3: and ended before the end), exactly as ZkBench counts them.
//!
//! INV: every loop ends by the clock (W2 then drains what is in flight, bounded by the
//! client's request timeout).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};

use super::report::{latencies, Line};
use super::Params;
use fe_meta::client::{Client, ClientError};

/// A connection with the bench's options.
pub async fn connect(endpoint: &str, p: &Params) -> Result<Client, ClientError> {
    Client::connect_with(endpoint, p.client_options()).await
}

fn phase(p: &Params) -> (Instant, Instant) {
    let start = Instant::now() + p.warm;
    (start, start + p.run)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn secs(p: &Params) -> f64 {
    p.run.as_secs_f64()
}

/// `ops=.. secs=.. ops_per_s=..` of a closed loop.
fn rate(line: &mut Line, ops: usize, p: &Params) {
    line.set("ops", ops)
        .set("secs", format!("{:.1}", secs(p)))
        .set("ops_per_s", format!("{:.0}", ops as f64 / secs(p)));
}

/// W0 (read) or W1 (write): one client, a closed loop on one variable.
pub async fn closed_loop(
    workload: &str,
    label: &str,
    endpoint: &str,
    p: &Params,
) -> Result<Line, ClientError> {
    let client = connect(endpoint, p).await?;
    let key = "bench.w1";
    client.set_var(key, &p.payload).await?;
    let (start, end) = phase(p);
    let mut lat = Vec::with_capacity(1 << 16);
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        if workload == "W0" {
            client.get_var(key, false).await?;
        } else {
            client.set_var(key, &p.payload).await?;
        }
        if now >= start {
            lat.push(nanos(now.elapsed()));
        }
    }
    let mut line = Line::new(workload, label);
    rate(&mut line, lat.len(), p);
    latencies(&mut line, &mut lat);
    Ok(line)
}

/// W2: one connection, up to `outstanding` writes in flight.
pub async fn pipelined(label: &str, endpoint: &str, p: &Params) -> Result<Line, ClientError> {
    let client = connect(endpoint, p).await?;
    let key = "bench.w2";
    client.set_var(key, &p.payload).await?;
    let (start, end) = phase(p);
    let (mut lat, mut done, mut errors, mut issued) =
        (Vec::with_capacity(1 << 20), 0u64, 0u64, 0u64);
    let client = &client;
    let mut inflight = FuturesUnordered::new();
    loop {
        while inflight.len() < p.outstanding && Instant::now() < end {
            let ts = Instant::now();
            issued += 1;
            inflight.push(async move { (ts, client.set_var(key, &p.payload).await) });
        }
        let Some((ts, r)) = inflight.next().await else {
            break;
        };
        let t1 = Instant::now();
        match r {
            Ok(_) => {
                if ts >= start && t1 < end {
                    lat.push(nanos(t1 - ts));
                }
                if t1 >= start && t1 < end {
                    done += 1;
                }
            }
            Err(_) => errors += 1,
        }
    }
    let mut line = Line::new("W2", label);
    line.set("outstanding", p.outstanding);
    line.set("ops", done)
        .set("secs", format!("{:.1}", secs(p)))
        .set("ops_per_s", format!("{:.0}", done as f64 / secs(p)))
        .set("errors", errors)
        .set("issued", issued);
    latencies(&mut line, &mut lat);
    Ok(line)
}

/// W3: `p.sessions` clients, client i on `endpoints[i % k]`, each a closed loop on its own
/// variable.
pub async fn concurrent(
    label: &str,
    endpoints: &[String],
    p: &Params,
) -> Result<Line, ClientError> {
    let mut clients = Vec::with_capacity(p.sessions);
    for i in 0..p.sessions {
        let c = connect(&endpoints[i % endpoints.len()], p).await?;
        c.set_var(&format!("bench.w3-{i}"), &p.payload).await?;
        clients.push(Arc::new(c));
    }
    let (start, end) = phase(p);
    let payload: Arc<str> = p.payload.clone().into();
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let payload = Arc::clone(&payload);
            tokio::spawn(async move {
                let key = format!("bench.w3-{i}");
                let mut lat = Vec::with_capacity(1 << 14);
                loop {
                    let now = Instant::now();
                    if now >= end {
                        break;
                    }
                    c.set_var(&key, &payload).await?;
                    let t1 = Instant::now();
                    if now >= start && t1 < end {
                        lat.push(nanos(t1 - now));
                    }
                }
                Ok::<_, ClientError>(lat)
            })
        })
        .collect();
    let mut all = Vec::new();
    let (mut min, mut max) = (usize::MAX, 0);
    for t in tasks {
        let lat = t
            .await
            .map_err(|e| ClientError::Protocol(format!("a W3 client task failed: {e}")))??;
        min = min.min(lat.len());
        max = max.max(lat.len());
        all.extend(lat);
    }
    let mut line = Line::new("W3", label);
    line.set("sessions", p.sessions)
        .set("servers", endpoints.len());
    rate(&mut line, all.len(), p);
    line.set("per_thread_min", min).set("per_thread_max", max);
    latencies(&mut line, &mut all);
    Ok(line)
}
