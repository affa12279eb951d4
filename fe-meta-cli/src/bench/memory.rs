//! `--workload memory`: what a big catalog costs. Writes `entries` catalog entries through
//! the client (40% backends, 40% tables of 8 columns in databases of 1,000 tables, 20%
//! variables; ≤ 1000 writes in flight), then reports
//! * `rss_mib`: each node's resident size (VmRSS), leader first,
//! * `image_bytes`: the newest snapshot image in the leader's data dir (and its journal id),
//! * `restart_to_serving_ms` / `restart_to_caught_up_ms`: a follower stopped with SIGTERM and
//!   restarted, until it follows and until it has applied the leader's last entry (loading
//!   its image and replaying its log), and its RSS after that load (`rss_after_load_mib`).
//!
//! INV: the writes and every wait are bounded (600 s writing, 300 s reloading).

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};
use nix::sys::signal::Signal;

use super::catchup::wait_caught_up;
use super::cluster::Cluster;
use super::load::connect;
use super::report::Line;
use super::{progress, Params};
use crate::Failure;
use fe_meta::client::{Client, ClientError};
use fe_meta::state::catalog::{Column, ColumnType};

const TABLES_PER_DB: usize = 1000;

/// Resident size of `pid` in MiB (VmRSS), `None` if unreadable.
pub fn rss_mib(pid: u32) -> Option<f64> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 = text
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

/// The newest `snapshot.*` file under `dir` (recursively): its size and name.
fn newest_snapshot(dir: &Path) -> Option<(u64, String)> {
    let mut best: Option<(String, u64)> = None;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).ok()?.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                stack.push(path);
            } else if name.starts_with("snapshot.") && !name.contains(".tmp") {
                let len = e.metadata().map_or(0, |m| m.len());
                // Names carry the zxid in fixed-width hex: the greatest is the newest.
                if best.as_ref().is_none_or(|(b, _)| name > *b) {
                    best = Some((name, len));
                }
            }
        }
    }
    best.map(|(n, l)| (l, n))
}

/// The 8 columns of every table of the `memory` and `large` mixes.
pub(super) fn columns() -> Vec<Column> {
    (0..8)
        .map(|i| Column {
            name: format!("c{i}"),
            ty: ColumnType::Int,
            nullable: i != 0,
            is_key: i == 0,
            default: None,
        })
        .collect()
}

/// Entry `i` of the mix; databases are made before their first table.
async fn write_entry(c: &Client, i: usize, cols: &[Column]) -> Result<(), ClientError> {
    match i % 5 {
        0 | 1 => {
            let n = i / 5 * 2 + i % 5;
            let host = format!("10.{}.{}.{}", n >> 16 & 255, n >> 8 & 255, n & 255);
            c.add_backend(&host, 9050 + (n >> 24) as u16, 1 << 40)
                .await?;
        }
        2 | 3 => {
            let n = i / 5 * 2 + i % 5 - 2;
            let db = format!("db{}", n / TABLES_PER_DB);
            c.create_table(&db, &format!("t{}", n % TABLES_PER_DB), cols.to_vec())
                .await?;
        }
        _ => {
            c.set_var(&format!("bench.mem.v{}", i / 5), "value-of-a-variable")
                .await?;
        }
    }
    Ok(())
}

/// Runs the memory workload on a launched cluster.
pub async fn run(cluster: &mut Cluster, p: &Params) -> Result<Line, Failure> {
    let leader = cluster.wait_healthy(Duration::from_secs(60)).await?;
    let lep = cluster.endpoint(leader).unwrap_or_default().to_owned();
    let client = connect(&lep, p).await.map_err(Failure::from)?;
    let filled = fill(&client, p).await?;
    let status = client.status().await.map_err(Failure::from)?;
    progress(&format!(
        "memory: {} writes in {:.1} s (errors {}); leader has {} entries",
        filled.writes, filled.secs, filled.errors, status.entry_count
    ));
    // Let followers apply and background snapshots finish.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut order = vec![leader];
    order.extend(cluster.sids.iter().copied().filter(|&s| s != leader));
    let rss: Vec<String> = order
        .iter()
        .map(|&s| {
            cluster
                .pid(s)
                .and_then(rss_mib)
                .map_or("NA".to_owned(), |m| format!("{m:.0}"))
        })
        .collect();
    let image = cluster.data_dir(leader).and_then(|d| newest_snapshot(&d));
    let follower = order.last().copied().unwrap_or(leader);
    let fep = cluster.endpoint(follower).unwrap_or_default().to_owned();
    let lz = client
        .status()
        .await
        .map_err(Failure::from)?
        .applied_journal_id;
    cluster.stop_node(follower, Signal::SIGTERM).await?;
    cluster.restart_node(follower)?;
    let (serving, done) = wait_caught_up(&fep, lz).await;
    let rss_after = cluster.pid(follower).and_then(rss_mib);
    let ms = |d: Option<Duration>| {
        d.map_or("-1".to_owned(), |d| format!("{:.0}", d.as_secs_f64() * 1e3))
    };
    let mut l = Line::new("memory", "ens");
    l.set("entries", status.entry_count)
        .set("writes", filled.writes)
        .set("write_s", format!("{:.1}", filled.secs))
        .set("write_errors", filled.errors)
        .set("rss_mib", rss.join(","))
        .set("image_bytes", image.as_ref().map_or(0, |i| i.0))
        .set("image", image.map_or("none".to_owned(), |i| i.1))
        .set("reloaded_node", follower)
        .set("restart_to_serving_ms", ms(serving))
        .set("restart_to_caught_up_ms", ms(done))
        .set(
            "rss_after_load_mib",
            rss_after.map_or("NA".to_owned(), |m| format!("{m:.0}")),
        );
    Ok(l)
}

/// How filling the catalog went.
struct Filled {
    writes: usize,
    secs: f64,
    errors: u64,
}

/// Writes `p.memory_entries` catalog entries (databases first, then tables, backends and
/// variables), at most 1000 in flight, within 600 s.
async fn fill(client: &Client, p: &Params) -> Result<Filled, Failure> {
    let tables = p.memory_entries / 5 * 2 + p.memory_entries % 5 / 3;
    for d in 0..tables.div_ceil(TABLES_PER_DB) {
        client
            .create_db(&format!("db{d}"))
            .await
            .map_err(Failure::from)?;
    }
    let cols = columns();
    let errors = AtomicU64::new(0);
    let started = Instant::now();
    let deadline = started + Duration::from_secs(600);
    let mut inflight = FuturesUnordered::new();
    let (mut next, mut reported) = (0usize, 0usize);
    let (errs, cols) = (&errors, &cols);
    while next < p.memory_entries || !inflight.is_empty() {
        while next < p.memory_entries && inflight.len() < 1000 && Instant::now() < deadline {
            let i = next;
            next += 1;
            inflight.push(async move {
                if write_entry(client, i, cols).await.is_err() {
                    errs.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        if inflight.next().await.is_none() {
            break;
        }
        if next >= reported + 100_000 {
            reported = next;
            progress(&format!("memory: {next} writes issued"));
        }
    }
    Ok(Filled {
        writes: next,
        secs: started.elapsed().as_secs_f64(),
        errors: errors.load(Ordering::Relaxed),
    })
}
