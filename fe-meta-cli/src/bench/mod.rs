//! `fe-meta bench`: the anchors' workloads (W0–W6, `/work/shared/anchors/README.md`) against a
//! fresh 3-node cluster of child processes (tickTime=2000, initLimit=10, syncLimit=5,
//! forceSync=yes) or an attached one, printing the same RESULT lines as the anchors' ZkBench
//! and cpu.sh (so `zookeeper/table.py` renders ours unchanged), then a human table; `--json`
//! prints one JSON document instead.
//!
//! Module map: [`cluster`] (launch / attach, node kill and restart), [`cpu`] (quiet gate and
//! CPU sampling as cpu.sh does), [`load`] (W0–W3), [`fault`] (W4, W5), [`memory`] (RSS, image
//! size and load time with a million catalog entries), [`large`] (the same and more with
//! millions: restart, W2 during a snapshot, W4, SNAP catch-up), [`w6`] (write unavailability
//! during an online membership change; like the anchors' W6 it is not part of `all` and changes
//! the cluster, so it runs after every other selected workload), [`report`] (RESULT lines,
//! tables),
//! [`output`] (where results go, and the SVG's inputs), [`histogram`] (latency buckets and
//! their text bars), [`plot`] and [`svg`] (the SVG).
//!
//! INV-1: every workload is bounded in time; progress goes to stderr, results to stdout.
//! INV-2: before each workload the machine must be idle (bounded wait, the reading printed);
//! CPU is sampled only inside a measured phase of at least 5 s (cpu.sh's window).
//! INV-3: a launched cluster is stopped (every child reaped) and its folder removed before
//! `run` returns, whatever failed.

mod args;
mod busy;
mod catchup;
mod cluster;
mod cpu;
mod failover;
mod histogram;
mod large;
mod load;
mod memory;
mod output;
mod plot;
mod report;
mod sittings;
mod svg;
mod tls;
mod w6;
#[cfg(test)]
mod xml_check;

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{runtime, Failure};
pub use args::BenchArgs;
use args::{secs, Params};
use cluster::{Cluster, LaunchOptions};
use cpu::{Quiet, Window};
use fe_meta::client::ClientError;
use output::{draw, file_name, plot_failure, Output};
use report::Line;

/// Client port of node 1 of a launched bench cluster (clear of local-cluster's 9630..9939).
pub const DEFAULT_BENCH_BASE_PORT: u16 = 19030;

const ALL: [&str; 6] = ["W0", "W1", "W2", "W3", "W4", "W5"];

/// One progress line on stderr, stamped with the UTC time of day.
pub(crate) fn progress(msg: &str) {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    eprintln!(
        "[bench {:02}:{:02}:{:02}] {msg}",
        t / 3600 % 24,
        t / 60 % 60,
        t % 60
    );
}

/// Runs `fe-meta bench`.
pub(super) fn run(args: &BenchArgs) -> Result<(), Failure> {
    if let (Some(svg), Some(results)) = (&args.svg, &args.results) {
        let ours = plot::read_results(results).map_err(plot_failure)?;
        return draw(args, svg, &file_name(results), &ours);
    }
    let mut selected: Vec<String> = Vec::new();
    for w in &args.workload {
        let w = w.trim().to_ascii_uppercase();
        match w.as_str() {
            "ALL" => selected.extend(ALL.iter().map(|s| (*s).to_owned())),
            "MEMORY" => selected.push("memory".to_owned()),
            "LARGE" => selected.push("large".to_owned()),
            _ if ALL.contains(&w.as_str()) || w == "W6" => selected.push(w),
            _ => {
                return Err(Failure {
                    code: super::ExitCode::Usage,
                    message: format!(
                        "--workload: unknown workload `{w}` (W0..W6, all, memory, large)"
                    ),
                })
            }
        }
    }
    if selected.iter().any(|w| w == "large") {
        large::check(&args.large)?;
    }
    // W6 leaves the cluster changed (two original members killed): last, once.
    let w6 = selected.iter().any(|w| w == "W6");
    selected.retain(|w| w != "W6");
    if w6 {
        selected.push("W6".to_owned());
    }
    if args.tls
        && selected
            .iter()
            .any(|w| !["W0", "W1", "W2", "W3"].contains(&w.as_str()))
    {
        return Err(Failure {
            code: super::ExitCode::Usage,
            message: "--tls runs W0-W3 only: give --workload W1,W2,W3 (or a subset)".to_owned(),
        });
    }
    let p = Params {
        warm: secs(args.warm, "--warm")?,
        run: secs(args.run, "--run")?,
        trials: args.trials,
        w5_txns: args.w5_txns,
        sessions: args.w3_sessions.max(1),
        outstanding: args.w2_outstanding.max(1),
        memory_entries: args.memory_entries,
        payload: "z".repeat(100),
        request_timeout: secs(args.timeout, "--timeout")?,
        tls: None,
        background_cores: args.background_cores as usize,
    };
    // Children are spawned from this (main) thread: PDEATHSIG follows the spawning thread.
    runtime()?.block_on(bench(args, &selected, &p))
}

async fn bench(args: &BenchArgs, selected: &[String], p: &Params) -> Result<(), Failure> {
    let mut out = Output::new(args.json);
    let mut result = Ok(());
    // The catalog-size workloads take minutes and measure sizes, not noise: the first sitting only.
    let later: Vec<String> = selected
        .iter()
        .filter(|w| !["memory", "large"].contains(&w.as_str()))
        .cloned()
        .collect();
    for sitting in 1..=args.sittings {
        let selected = if sitting == 1 { selected } else { &later };
        if selected.is_empty() {
            break;
        }
        out.start_sitting(sitting);
        if args.sittings > 1 {
            progress(&format!("sitting {sitting} of {}", args.sittings));
        }
        let r = one_sitting(args, selected, p, sitting, &mut out).await;
        if let Err(e) = r {
            result = Err(e);
            break;
        }
    }
    out.finish(args.sittings);
    let drawn = match &args.svg {
        Some(svg) => draw(args, svg, "this run", out.lines()),
        None => Ok(()),
    };
    result.and(drawn)
}

/// One sitting: a fresh cluster (or the attached one) and every selected workload.
async fn one_sitting(
    args: &BenchArgs,
    selected: &[String],
    p: &Params,
    sitting: u32,
    out: &mut Output,
) -> Result<(), Failure> {
    let mut cluster = match &args.attach {
        Some(eps) => Cluster::attach(eps.clone(), args.server_pids.clone()).await?,
        None => {
            progress("launching a 3-node cluster");
            let opts = LaunchOptions {
                wait: Duration::from_secs(60),
                keep: args.keep,
                tls: args.tls,
                server_threads: args.server_threads,
            };
            Cluster::launch(args.dir.clone(), args.base_port, opts).await?
        }
    };
    let p = &Params {
        tls: cluster.tls.clone(),
        ..p.clone()
    };
    out.note(&header(args, &cluster, sitting));
    let result = workloads(&mut cluster, args, selected, p, out).await;
    cluster.shutdown().await;
    result
}

fn header(args: &BenchArgs, cluster: &Cluster, sitting: u32) -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_default();
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| {
                    l.split_whitespace()
                        .nth(1)
                        .and_then(|v| v.parse::<u64>().ok())
                })
        })
        .map_or(0, |kib| kib / 1024 / 1024);
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let target = match cluster.dir() {
        Some(d) => format!(
            "launched 3 nodes in {} (tickTime=2000 initLimit=10 syncLimit=5 forceSync=yes{}{})",
            d.display(),
            args.server_threads
                .map(|n| format!(" server_threads={n}"))
                .unwrap_or_default(),
            if cluster.tls.is_some() {
                " sslQuorum=true client.secure=true ssl.clientAuth=need"
            } else {
                ""
            }
        ),
        None => format!("attached to {}", cluster.endpoints.join(",")),
    };
    format!(
        "# fe-meta bench run (unix time {})\n# host: nproc={nproc} cpu='{cpu}' mem={mem_gib}GiB\n\
         # fe-meta {} {target}\n\
         # WARM={} RUN={} TRIALS={} W5_TXNS={} W3_SESSIONS={} W2_OUTSTANDING={} payload=100B\n\
         # sitting {} of {}, background_cores={}",
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        env!("CARGO_PKG_VERSION"),
        args.warm,
        args.run,
        args.trials,
        args.w5_txns,
        args.w3_sessions,
        args.w2_outstanding,
        sitting,
        args.sittings,
        args.background_cores,
    )
}

async fn workloads(
    cluster: &mut Cluster,
    args: &BenchArgs,
    selected: &[String],
    p: &Params,
    out: &mut Output,
) -> Result<(), Failure> {
    let mut failed: Option<Failure> = None;
    for w in selected {
        let leader = match cluster.wait_healthy(Duration::from_secs(60)).await {
            Ok(leader) => leader,
            Err(e) => {
                progress(&format!("{w} failed: {}", e.message));
                failed.get_or_insert(e);
                break;
            }
        };
        let errors = match w.as_str() {
            "W0" | "W1" | "W2" | "W3" => steady(w, leader, cluster, args, p, out).await,
            "W4" | "W5" | "W6" | "MEMORY" | "memory" | "large" if !cluster.launched() => {
                progress(&format!(
                    "{w}: skipped (needs a cluster launched by the bench, not --attach)"
                ));
                Vec::new()
            }
            _ => faults(w, cluster, args, p, out).await,
        };
        for e in errors {
            progress(&format!("{w} failed: {}", e.message));
            failed.get_or_insert(e);
        }
    }
    failed.map_or(Ok(()), Err)
}

/// Waits for an idle machine (cpu.sh's gate) before a measured phase.
async fn quiet(args: &BenchArgs) -> cpu::Quiet {
    cpu::wait_quiet(args.quiet_cores, Duration::from_secs(args.quiet_max_wait)).await
}

/// The steady-state workloads W0-W3; returns their failures.
async fn steady(
    w: &str,
    leader: u64,
    cluster: &Cluster,
    args: &BenchArgs,
    p: &Params,
    out: &mut Output,
) -> Vec<Failure> {
    let follower = cluster
        .sids
        .iter()
        .copied()
        .find(|&s| s != leader)
        .unwrap_or(leader);
    let lep = cluster.endpoint(leader).unwrap_or_default().to_owned();
    let fep = cluster.endpoint(follower).unwrap_or_default().to_owned();
    let pids = cluster.server_pids();
    let pids = pids.as_deref();
    let mut errors = Vec::new();
    match w {
        "W0" => {
            progress("W0 (read floor: closed-loop get-var on the leader)");
            let load = load::closed_loop("W0", "ens-leader", &lep, p);
            let r = measured(quiet(args).await, p, pids, load).await;
            out.result(r).unwrap_or_else(|e| errors.push(e));
        }
        "W1" => {
            for (label, ep) in [("ens-leader", &lep), ("ens-follower", &fep)] {
                progress(&format!(
                    "W1 (closed-loop set-var, client on the {})",
                    &label[4..]
                ));
                let load = load::closed_loop("W1", label, ep, p);
                let r = measured(quiet(args).await, p, pids, load).await;
                out.result(r).unwrap_or_else(|e| errors.push(e));
            }
        }
        "W2" => {
            progress(&format!(
                "W2 (one connection, {} writes in flight, on the leader)",
                p.outstanding
            ));
            let load = load::pipelined("ens-leader", &lep, p);
            let r = measured(quiet(args).await, p, pids, load).await;
            out.result(r).unwrap_or_else(|e| errors.push(e));
        }
        _ => {
            let spread = cluster.endpoints.clone();
            for (label, eps) in [("ens-spread", spread), ("ens-leader", vec![lep.clone()])] {
                progress(&format!("W3 ({} clients, {label})", p.sessions));
                let load = load::concurrent(label, &eps, p);
                let r = measured(quiet(args).await, p, pids, load).await;
                out.result(r).unwrap_or_else(|e| errors.push(e));
            }
        }
    }
    errors
}

/// The fault workloads W4, W5, W6 and the memory workload (a launched cluster only); returns
/// their failures.
async fn faults(
    w: &str,
    cluster: &mut Cluster,
    args: &BenchArgs,
    p: &Params,
    out: &mut Output,
) -> Vec<Failure> {
    let mut errors = Vec::new();
    match w {
        "W4" => {
            progress(&format!("W4 (failover, {} trials)", p.trials));
            let q = quiet(args).await;
            let a = cpu::stat();
            let r = failover::failover(cluster, p).await;
            out.gate_note("W4 ens", q, a);
            match r {
                Ok(lines) => lines.into_iter().for_each(|l| out.line(l)),
                Err(e) => errors.push(e),
            }
        }
        "W5" => {
            for (label, op) in [("ens-set", "set"), ("ens-create", "create")] {
                progress(&format!("W5 (catch-up after {} {op} writes)", p.w5_txns));
                let q = quiet(args).await;
                let a = cpu::stat();
                let r = catchup::catchup(cluster, p, label, op).await;
                out.gate_note(&format!("W5 {label}"), q, a);
                match r {
                    Ok(lines) => lines.into_iter().for_each(|l| out.line(l)),
                    Err(e) => errors.push(e),
                }
            }
        }
        "W6" => {
            progress(&format!(
                "W6 (online membership change: add/remove a 4th server, remove the leader, grow to 5 and lose 2; {} trials)",
                p.trials
            ));
            match w6::run(cluster, args, p).await {
                Ok(lines) => lines.into_iter().for_each(|l| out.line(l)),
                Err(e) => errors.push(e),
            }
        }
        "large" => errors.extend(large::run(cluster, &args.large, p, out).await.err()),
        _ => {
            progress(&format!("memory ({} catalog entries)", p.memory_entries));
            match memory::run(cluster, p).await {
                Ok(l) => out.line(l),
                Err(e) => errors.push(e),
            }
        }
    }
    errors
}

/// Runs a steady-state workload with CPU sampled over cpu.sh's window.
async fn measured(
    quiet: Quiet,
    p: &Params,
    pids: Option<&[u32]>,
    work: impl Future<Output = Result<Line, ClientError>>,
) -> Result<Line, Failure> {
    let sampler = async {
        if p.run < Duration::from_secs(5) {
            return None;
        }
        tokio::time::sleep(p.warm + Duration::from_millis(2500)).await;
        let a = cpu::sample(pids);
        tokio::time::sleep(p.run - Duration::from_secs(3)).await;
        Some(Window::between(&a, &cpu::sample(pids)))
    };
    let load = busy::BackgroundLoad::start(p.background_cores);
    let (r, window): (Result<Line, ClientError>, Option<Window>) = tokio::join!(work, sampler);
    let spinners = load.stop().len();
    let mut line = r.map_err(Failure::from)?;
    line.add_cpu(window, quiet);
    line.set("background_cores", spinners);
    Ok(line)
}
