//! The arguments of `fe-meta bench` and the workload parameters derived from them.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::DEFAULT_BENCH_BASE_PORT;
use crate::Failure;
use fe_meta::client::ClientOptions;

/// The arguments of `bench`.
#[derive(Clone, Debug, Args)]
pub struct BenchArgs {
    /// Workloads to run, comma-separated: W0..W6, `all` (W0-W5), `memory`, `large`; W6
    /// (membership changes, launched cluster only) always runs last.
    #[arg(long, default_value = "all", value_delimiter = ',')]
    pub workload: Vec<String>,
    /// Attach to a running cluster (its client endpoints, host:port,...) instead of launching
    /// one; W4/W5 and memory need a launched cluster and are skipped.
    #[arg(long, value_delimiter = ',')]
    pub attach: Option<Vec<String>>,
    /// With --attach: the servers' pids (for CPU figures); found by listening port if omitted.
    #[arg(long, value_delimiter = ',')]
    pub server_pids: Option<Vec<u32>>,
    /// Warm-up seconds before each measured phase.
    #[arg(long, default_value_t = 3.0)]
    pub warm: f64,
    /// Measured seconds (CPU is sampled only when >= 5).
    #[arg(long, default_value_t = 10.0)]
    pub run: f64,
    /// W4 trials, and W6 trials per phase.
    #[arg(long, default_value_t = 3)]
    pub trials: usize,
    /// W5 writes while the follower is down.
    #[arg(long, default_value_t = 100_000)]
    pub w5_txns: usize,
    /// W3 clients.
    #[arg(long, default_value_t = 32)]
    pub w3_sessions: usize,
    /// W2 writes in flight.
    #[arg(long, default_value_t = 1000)]
    pub w2_outstanding: usize,
    /// Catalog entries for `--workload memory`.
    #[arg(long, default_value_t = 1_000_000)]
    pub memory_entries: usize,
    #[command(flatten)]
    pub large: super::large::LargeArgs,
    /// Node 1's client port of a launched cluster (quorum +100, election +200).
    #[arg(long, default_value_t = DEFAULT_BENCH_BASE_PORT)]
    pub base_port: u16,
    /// Where the launched cluster's folder is made (a fresh one each run).
    #[arg(long, default_value_os_t = std::env::temp_dir())]
    pub dir: PathBuf,
    /// TLS on every port of the launched cluster: a throwaway CA and certificates in its
    /// folder, mutual TLS between members (`sslQuorum`), a TLS client port that requires
    /// client certificates; W0-W3 only.
    #[arg(long, conflicts_with = "attach")]
    pub tls: bool,
    /// `server_threads=N` in every launched node's zoo.cfg (1..=256); without it the nodes
    /// run with the server's default.
    #[arg(long, conflicts_with = "attach", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub server_threads: Option<u16>,
    /// Keep the launched cluster's folder (logs, data) after the run.
    #[arg(long)]
    pub keep: bool,
    /// Busy cores under which the machine counts as idle (cpu.sh's QUIET_CORES).
    #[arg(long, default_value_t = 0.15)]
    pub quiet_cores: f64,
    /// Most seconds to wait for an idle machine before each workload (QUIET_MAX_WAIT); 0
    /// turns the gate off.
    #[arg(long, default_value_t = 180)]
    pub quiet_max_wait: u64,
    /// Seconds a request may take before the client gives up on it.
    #[arg(long, default_value_t = 30.0)]
    pub timeout: f64,
    /// Sittings: the selected workloads run this many times, each on a freshly launched
    /// cluster, each sitting's lines tagged `sitting=N`; a summary of every figure across the
    /// sittings (each, the median and the worst) follows. With --attach the same cluster
    /// serves every sitting. `memory` and `large` run in the first sitting only.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub sittings: u32,
    /// Keep this many cores busy (one spinning thread each, started after the idle gate and
    /// stopped when the phase ends) during every measured W0-W3 phase: the busy-machine
    /// figures. Lines carry `background_cores=N`.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=64))]
    pub background_cores: u32,
    /// Print one JSON document instead of RESULT lines, tables and histograms.
    #[arg(long)]
    pub json: bool,
    /// Also write an SVG of the W1 and W3 latency percentiles (p50, p90, p99, p99.9, max),
    /// ours beside ZooKeeper's (from --zookeeper-results).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// ZooKeeper's RESULT lines for --svg: a raw-*.txt of the anchors' zookeeper/run.sh
    /// [default: the newest $ANCHOR_OUT/zookeeper/results/raw-*.txt, ANCHOR_OUT defaulting to
    /// /tmp/anchor-out; without one, ours alone is drawn]
    #[arg(long, value_name = "FILE", requires = "svg")]
    pub zookeeper_results: Option<PathBuf>,
    /// With --svg: draw from this earlier run's output (its RESULT lines) instead of running
    /// workloads; no cluster is launched.
    #[arg(long, value_name = "FILE", requires = "svg")]
    pub results: Option<PathBuf>,
}

/// The workload parameters every workload reads.
#[derive(Clone, Debug)]
pub struct Params {
    pub(super) warm: Duration,
    pub(super) run: Duration,
    pub(super) trials: usize,
    pub(super) w5_txns: usize,
    pub(super) sessions: usize,
    pub(super) outstanding: usize,
    pub(super) memory_entries: usize,
    pub(super) payload: String,
    pub(super) request_timeout: Duration,
    /// The clients' TLS (`--tls`).
    pub(super) tls: Option<fe_meta::client::ClientTls>,
    /// Cores kept busy by spinning threads during each measured W0-W3 phase.
    pub(super) background_cores: usize,
}

impl Params {
    pub(super) fn client_options(&self) -> ClientOptions {
        ClientOptions {
            connect_timeout: Duration::from_secs(5),
            request_timeout: self.request_timeout,
            tls: self.tls.clone(),
            ..ClientOptions::DEFAULT
        }
    }
}

pub(super) fn secs(s: f64, what: &str) -> Result<Duration, Failure> {
    Duration::try_from_secs_f64(s).map_err(|_| Failure {
        code: crate::ExitCode::Usage,
        message: format!("{what}: not a duration in seconds: {s}"),
    })
}
