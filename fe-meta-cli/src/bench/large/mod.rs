//! `--workload large`: what a large catalog (`--large-entries`, default 5,000,000, the mix of
//! `memory`) costs a launched 3-node cluster, phase by phase, one RESULT line each
//! (`workload=large phase=...`):
//! 1. `w4-empty`: W4 (leader kill) on the empty catalog first, to compare with step 6;
//! 2. `build`: the catalog written over `--large-connections` connections ([`fill`]);
//! 3. `memory`: each node's VmRSS, RssAnon, RssFile and peak (leader first), MiB and MiB per
//!    million entries, and the leader's newest snapshot image;
//! 4. `restart`: a follower SIGTERMed and restarted: → serving, → caught up, and its memory;
//! 5. `w2-snapshot`: every node restarted with a larger `snapCount` ([`snap_count`], kept for
//!    the later phases; and `snapCpuPercent` when `--snap-cpu-percent` is given), then W2
//!    while no node snapshots vs while the leader does ([`w2snap`]);
//! 6. `w4-large`: W4 with the catalog (`--trials`);
//! 7. `snap-catchup`: a follower brought back by a SNAP ([`snap_catchup`]).
//!
//! With `--large-w2-only` only steps 2 and 5 run (the A/B of `--snap-cpu-percent`).
//!
//! INV-1: nothing is launched when the estimated footprint exceeds MemAvailable
//! ([`mem::check_footprint`]); every phase is bounded (see each module); a failed phase after
//! the build is reported and the next one still runs.

mod fill;
mod human;
mod mem;
mod mix;
mod snap_catchup;
mod snap_count;
mod w2snap;

use std::time::{Duration, Instant};

use clap::Args;
use nix::sys::signal::Signal;

pub use human::human;

use super::catchup::wait_caught_up;
use super::cluster::Cluster;
use super::load::connect;
use super::output::Output;
use super::report::Line;
use super::{failover, progress, Params};
use crate::Failure;
use mem::{mib, mib_per_million, Mem};

/// The arguments of `--workload large`.
#[derive(Clone, Debug, Args)]
pub struct LargeArgs {
    /// Catalog entries for `--workload large` (40% backends, 40% tables, 20% variables).
    #[arg(long, default_value_t = 5_000_000)]
    pub large_entries: usize,
    /// Connections writing the large catalog, each with 1000 writes in flight.
    #[arg(long, default_value_t = 4)]
    pub large_connections: usize,
    /// MiB per million entries a node is assumed to need by the footprint check that refuses
    /// a --large-entries the machine's MemAvailable cannot hold.
    #[arg(long, default_value_t = 600)]
    pub large_mib_per_million: u64,
    /// `snapCpuPercent` (1-100) written to every node's zoo.cfg before the W2 phase (the
    /// share of one core a background snapshot may use); absent: the servers' default.
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=100))]
    pub snap_cpu_percent: Option<u8>,
    /// Runs only the build and the W2-during-a-snapshot phases (skips W4, memory, restart and
    /// the SNAP catch-up).
    #[arg(long)]
    pub large_w2_only: bool,
}

/// Refuses a run whose footprint does not fit (INV-1); else a note on the estimate.
pub fn check(a: &LargeArgs) -> Result<String, Failure> {
    mem::check_machine(a.large_entries, a.large_mib_per_million).map_err(|message| Failure {
        code: crate::ExitCode::Usage,
        message,
    })
}

/// `d` in ms, `-1` for none.
fn ms(d: Option<Duration>) -> String {
    d.map_or("-1".to_owned(), |d| format!("{:.0}", d.as_secs_f64() * 1e3))
}

/// `d` in ms per million of `entries`, `NA` for none.
fn per_million(d: Option<Duration>, entries: u64) -> String {
    match d {
        Some(d) if entries > 0 => format!("{:.0}", d.as_secs_f64() * 1e3 * 1e6 / entries as f64),
        _ => "NA".to_owned(),
    }
}

/// Runs every phase on a launched cluster, printing each line as it is made.
pub async fn run(
    cluster: &mut Cluster,
    a: &LargeArgs,
    p: &Params,
    out: &mut Output,
) -> Result<(), Failure> {
    let mut failed: Option<Failure> = None;
    let mut keep = |r: Result<Vec<Line>, Failure>, out: &mut Output, what: &str| match r {
        Ok(lines) => lines.into_iter().for_each(|l| out.line(l)),
        Err(e) => {
            progress(&format!("large {what} failed: {}", e.message));
            failed.get_or_insert(e);
        }
    };
    progress(&format!("large ({} catalog entries)", a.large_entries));
    progress(&format!("large: {}", check(a)?));
    if !a.large_w2_only {
        keep(w4(cluster, p, "w4-empty").await, out, "w4-empty");
    }
    let entries = build(cluster, a, p, out).await?;
    if a.large_w2_only {
        let r = match snap_count::reset(cluster, a.snap_cpu_percent).await {
            Ok(leader) => w2snap::run(cluster, leader, p).await.map(|l| vec![l]),
            Err(e) => Err(e),
        };
        keep(r, out, "w2-snapshot");
        return failed.map_or(Ok(()), Err);
    }
    keep(
        memory(cluster, entries).await.map(|l| vec![l]),
        out,
        "memory",
    );
    keep(
        restart(cluster, entries).await.map(|l| vec![l]),
        out,
        "restart",
    );
    let r = match snap_count::reset(cluster, a.snap_cpu_percent).await {
        Ok(leader) => w2snap::run(cluster, leader, p).await.map(|l| vec![l]),
        Err(e) => Err(e),
    };
    keep(r, out, "w2-snapshot");
    keep(w4(cluster, p, "w4-large").await, out, "w4-large");
    let r = snap_catchup::run(cluster, p, entries).await;
    keep(r.map(|l| vec![l]), out, "snap-catchup");
    failed.map_or(Ok(()), Err)
}

/// W4's lines, relabelled `workload=large phase=<phase>`.
async fn w4(cluster: &mut Cluster, p: &Params, phase: &str) -> Result<Vec<Line>, Failure> {
    progress(&format!("large {phase}: W4, {} leader kills", p.trials));
    let lines = failover::failover(cluster, p).await?;
    Ok(lines
        .into_iter()
        .map(|mut l| {
            l.set("workload", "large").set("phase", phase);
            l
        })
        .collect())
}

/// Phase `build`; the entry count the leader reports after it.
async fn build(
    cluster: &Cluster,
    a: &LargeArgs,
    p: &Params,
    out: &mut Output,
) -> Result<u64, Failure> {
    let leader = cluster.wait_healthy(Duration::from_secs(120)).await?;
    let lep = cluster.endpoint(leader).unwrap_or_default().to_owned();
    let b = fill::build(&lep, p, a.large_entries, a.large_connections).await?;
    let client = connect(&lep, p).await.map_err(Failure::from)?;
    let entries = client.status().await.map_err(Failure::from)?.entry_count;
    progress(&format!(
        "large: {} entries written in {:.1} s ({:.0}/s, errors {}); the leader has {entries}",
        b.entries,
        b.secs,
        b.entries as f64 / b.secs,
        b.errors
    ));
    let mut l = Line::new("large", "ens");
    l.set("phase", "build")
        .set("entries", entries)
        .set("written", b.entries)
        .set("databases", b.dbs)
        .set("connections", a.large_connections.max(1))
        .set("in_flight", a.large_connections.max(1) * fill::IN_FLIGHT)
        .set("build_s", format!("{:.1}", b.secs))
        .set("entries_per_s", format!("{:.0}", b.entries as f64 / b.secs))
        .set("errors", b.errors)
        .set(
            "first_error",
            b.first_error.unwrap_or_else(|| "none".to_owned()),
        );
    out.line(l);
    Ok(entries)
}

/// The nodes, leader first.
fn leader_first(cluster: &Cluster, leader: u64) -> Vec<u64> {
    let mut order = vec![leader];
    order.extend(cluster.sids.iter().copied().filter(|&s| s != leader));
    order
}

/// Phase `memory`, once followers have applied everything and no snapshot is being written
/// (at most 300 s).
async fn memory(cluster: &Cluster, entries: u64) -> Result<Line, Failure> {
    let leader = cluster.wait_healthy(Duration::from_secs(120)).await?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    if !w2snap::wait_no_snapshot(cluster, leader).await {
        progress("large memory: a snapshot is still being written after 300 s; measuring now");
    }
    let mems: Vec<Mem> = leader_first(cluster, leader)
        .iter()
        .map(|&s| cluster.pid(s).and_then(Mem::of).unwrap_or_default())
        .collect();
    let join = |f: fn(&Mem) -> String| mems.iter().map(f).collect::<Vec<_>>().join(",");
    let image = cluster.data_dir(leader).and_then(|d| mem::snapshots(&d).0);
    let mut l = Line::new("large", "ens");
    l.set("phase", "memory")
        .set("entries", entries)
        .set(
            "nodes",
            leader_first(cluster, leader)
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(","),
        )
        .set("rss_mib", join(|m| mib(m.rss)))
        .set("rss_anon_mib", join(|m| mib(m.anon)))
        .set("rss_file_mib", join(|m| mib(m.file)))
        .set("peak_rss_mib", join(|m| mib(m.hwm)))
        .set(
            "rss_mib_per_million",
            mems.iter()
                .map(|m| mib_per_million(m.rss, entries))
                .collect::<Vec<_>>()
                .join(","),
        )
        .set("rss_total_mib", mib(mems.iter().map(|m| m.rss).sum()))
        .set("image_bytes", image.as_ref().map_or(0, |i| i.0))
        .set("image", image.map_or("none".to_owned(), |i| i.1));
    Ok(l)
}

/// Phase `restart`: a follower SIGTERMed and started again.
async fn restart(cluster: &mut Cluster, entries: u64) -> Result<Line, Failure> {
    let leader = cluster.wait_healthy(Duration::from_secs(120)).await?;
    let follower = leader_first(cluster, leader)
        .last()
        .copied()
        .unwrap_or(leader);
    let fep = cluster.endpoint(follower).unwrap_or_default().to_owned();
    let lep = cluster.endpoint(leader).unwrap_or_default().to_owned();
    let quick = fe_meta::client::ClientOptions {
        connect_timeout: Duration::from_secs(5),
        ..fe_meta::client::ClientOptions::DEFAULT
    };
    let client = fe_meta::client::Client::connect_with(&lep, quick)
        .await
        .map_err(Failure::from)?;
    let lz = client
        .status()
        .await
        .map_err(Failure::from)?
        .applied_journal_id;
    progress(&format!(
        "large restart: follower {follower} SIGTERMed and started again"
    ));
    cluster.stop_node(follower, Signal::SIGTERM).await?;
    let t = Instant::now();
    cluster.restart_node(follower)?;
    let (serving, done) = wait_caught_up(&fep, lz).await;
    progress(&format!(
        "large restart: caught up after {:.1} s",
        t.elapsed().as_secs_f64()
    ));
    let m = cluster.pid(follower).and_then(Mem::of).unwrap_or_default();
    let mut l = Line::new("large", "ens");
    l.set("phase", "restart")
        .set("node", follower)
        .set("entries", entries)
        .set("restart_to_serving_ms", ms(serving))
        .set("restart_to_caught_up_ms", ms(done))
        .set("serving_ms_per_million", per_million(serving, entries))
        .set("caught_up_ms_per_million", per_million(done, entries))
        .set("rss_after_load_mib", mib(m.rss))
        .set("rss_anon_after_load_mib", mib(m.anon))
        .set("rss_file_after_load_mib", mib(m.file))
        .set("peak_rss_mib", mib(m.hwm));
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_in_ms_and_per_million() {
        assert_eq!(ms(None), "-1");
        assert_eq!(ms(Some(Duration::from_millis(1500))), "1500");
        assert_eq!(
            per_million(Some(Duration::from_secs(10)), 5_000_000),
            "2000"
        );
        assert_eq!(per_million(Some(Duration::from_secs(1)), 0), "NA");
        assert_eq!(per_million(None, 10), "NA");
    }
}
