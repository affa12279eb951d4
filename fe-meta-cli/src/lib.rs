//! The `fe-meta` command line: `server`, `local-cluster`, and one client command per request
//! kind (`add-backend`, `show-backends`, `create-db`, …), each talking to any node through
//! [`fe_meta::client`].
//!
//! Module map: [`exit`] (exit codes), `client_cmds` (client commands → output), `render`
//! (human tables and JSON), `local_cluster` (the 3-node loopback cluster as child processes),
//! `server_cmd` (the node process: tracing, signals), `bench` (the ZooKeeper anchors'
//! workloads against a launched or attached cluster), `offline` (tools that read a data dir or
//! a zoo.cfg without a running server: `dump-log`, `inspect`, `check-config`, `verify-image`),
//! `recover` (a cluster that lost its majority restarted from one survivor), `backup`
//! (`backup` and `restore`).
//!
//! Adding a subcommand (e.g. issue 7's `bench`): a variant in [`Command`] with its args, a
//! module beside these, and one arm in [`run`]; reuse [`ClientArgs`] for `--server` and the
//! timeouts, and [`exit::ExitCode`] for failures.
//!
//! INV-1: every failure prints one line to stderr and exits with the code of its kind
//! ([`exit`]); stdout carries only results (tables, or one JSON document with `--json`).

mod backup;
mod bench;
mod client_cmds;
pub mod exit;
mod local_cluster;
mod offline;
mod recover;
mod render;
mod server_cmd;
pub mod tls_certs;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

pub use client_cmds::ClientCommand;
pub use exit::ExitCode;
pub use local_cluster::{LocalClusterArgs, DEFAULT_BASE_PORT};
pub use server_cmd::LogFormat;

/// `127.0.0.1:<first client port of a default local-cluster>` ([`DEFAULT_BASE_PORT`]).
pub const DEFAULT_SERVER: &str = "127.0.0.1:9630";

/// The commit this binary was built from: a short hash, `-dirty` appended when tracked files
/// differed from it, or `unknown` (built without git; see `build.rs`).
pub const COMMIT: &str = env!("FE_META_COMMIT");

/// What `fe-meta --version` prints after the name, and the server logs at start:
/// `0.1.0 (commit 43e3218)`.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("FE_META_COMMIT"),
    ")"
);

/// The `fe-meta` command line.
#[derive(Debug, Parser)]
#[command(
    name = "fe-meta",
    version = VERSION,
    about = "A replicated metadata service (Doris/StarRocks frontend style) on ZAB",
    after_help = exit::help_text()
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Where a client command connects, and how long it waits.
#[derive(Clone, Debug, Args)]
pub struct ClientArgs {
    /// Client endpoints, host:port, comma-separated (`a:9630,b:9630,c:9630`): the command
    /// goes to the first that accepts and moves to the next when a connection fails (writes
    /// are forwarded to the leader by any node).
    #[arg(long, short = 's', env = "FE_META_SERVER", default_value = DEFAULT_SERVER, value_name = "HOST:PORT[,HOST:PORT...]")]
    pub server: String,
    /// Print one JSON document instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Seconds to wait for the answer.
    #[arg(long, default_value_t = 30.0, value_name = "SECS")]
    pub timeout: f64,
    /// Seconds to wait for the TCP connection.
    #[arg(long, default_value_t = 5.0, value_name = "SECS")]
    pub connect_timeout: f64,
    /// A file holding `IDENTITY:SECRET`: authenticate as that identity (needed when the
    /// nodes set `auth.identitiesFile`). Kept in a file, not on the command line, so that
    /// `ps` does not show the secret.
    #[arg(long, env = "FE_META_CREDENTIALS", value_name = "FILE")]
    pub credentials: Option<PathBuf>,
    /// Connect with TLS (the nodes run `client.secure=true`), trusting this PEM CA bundle;
    /// the node's certificate must name the endpoint's host.
    #[arg(long, env = "FE_META_TLS_CA", value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// The client certificate (PEM chain) to present, with --tls-key (`ssl.clientAuth=need`).
    #[arg(
        long,
        env = "FE_META_TLS_CERT",
        value_name = "FILE",
        requires = "tls_ca"
    )]
    pub tls_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(
        long,
        env = "FE_META_TLS_KEY",
        value_name = "FILE",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,
}

impl ClientArgs {
    /// The endpoints of `--server`, in order: a usage error for an empty one (`a,,b`).
    pub fn endpoints(&self) -> Result<Vec<String>, Failure> {
        self.server
            .split(',')
            .map(|e| match e.trim() {
                "" => Err(Failure {
                    code: ExitCode::Usage,
                    message: format!(
                        "--server `{}`: an empty endpoint (expected HOST:PORT[,HOST:PORT...])",
                        self.server
                    ),
                }),
                e => Ok(e.to_owned()),
            })
            .collect()
    }

    /// The client options these arguments ask for; the TLS and credentials files are read
    /// here (a usage error naming the option and the file when one does not work).
    pub fn options(&self) -> Result<fe_meta::client::ClientOptions, Failure> {
        let credentials = match &self.credentials {
            None => None,
            Some(path) => Some(std::sync::Arc::new(
                fe_meta::client::Credentials::load(path).map_err(|e| Failure {
                    code: ExitCode::Usage,
                    message: format!("--credentials: {e}"),
                })?,
            )),
        };
        let tls = match &self.tls_ca {
            None => None,
            Some(ca) => Some(
                fe_meta::client::ClientTls::load(
                    ca,
                    self.tls_cert.as_deref(),
                    self.tls_key.as_deref(),
                )
                .map_err(|e| Failure {
                    code: ExitCode::Usage,
                    message: e.to_string(),
                })?,
            ),
        };
        Ok(fe_meta::client::ClientOptions {
            connect_timeout: secs(self.connect_timeout),
            request_timeout: secs(self.timeout),
            credentials,
            tls,
            ..fe_meta::client::ClientOptions::DEFAULT
        })
    }
}

fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s).unwrap_or(Duration::from_secs(30))
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one node (ZooKeeper-style zoo.cfg; logs to stderr, filter with RUST_LOG; text, or
    /// JSON lines with --log-format json).
    Server {
        /// The node's zoo.cfg.
        #[arg(long, short = 'c', value_name = "FILE")]
        config: PathBuf,
        /// Form a new cluster: if this node's data dir is empty, initialize it as a voter.
        /// Without it, a node with an empty data dir (new or wiped) first syncs from the
        /// leader as a non-voting learner and votes only once it holds the cluster's data.
        /// Ignored (with an info line) when the data dir already holds data.
        #[arg(long, conflicts_with = "helper")]
        bootstrap: bool,
        /// Join a running cluster through this member's client address (HOST:CLIENT_PORT):
        /// zoo.cfg needs only dataDir, clientPort and this server's own server.N line (and
        /// dataDir/myid); the cluster id, the configuration and tickTime/initLimit/syncLimit
        /// come from the member. Add this server on a member first (add-follower /
        /// add-observer); started before that, it waits and says so. A data dir that already
        /// belongs to the cluster starts from its own configuration.
        #[arg(long, value_name = "HOST:CLIENT_PORT")]
        helper: Option<String>,
        /// Log line format on stderr: `text` (human-readable) or `json` (one JSON object per
        /// line, for log shippers: timestamp, level, target, message, the event's fields).
        #[arg(long, value_enum, env = "FE_META_LOG_FORMAT", default_value_t = LogFormat::Text)]
        log_format: LogFormat,
    },
    /// Run a cluster of nodes on loopback as child processes, data under --dir (a second run
    /// reuses the folder, its data and its ports); Ctrl-C stops it.
    LocalCluster(LocalClusterArgs),
    /// A client command sent to one node.
    #[command(flatten)]
    Client(ClientCommand),
    /// Benchmark a fresh 3-node cluster (or an attached one) with the ZooKeeper anchors'
    /// workloads W0-W5; RESULT lines, a table and latency histograms on stdout, progress on
    /// stderr; --svg draws W1/W3 latency percentiles beside ZooKeeper's.
    Bench(bench::BenchArgs),
    /// Offline: print every record of a txn log directory (zxid, kind, length, the decoded
    /// journal op or configuration, hex when it does not decode), then its segments and state
    /// (last valid zxid, torn tail, corruption). Reads only; exits 1 when a node would refuse
    /// to start from the log.
    DumpLog(offline::DumpLogArgs),
    /// Offline: what a node would do at start from its data dir: snapshots (checked), the log's
    /// range and state, the epochs, the cluster id, REMOVED, joinConfiguration and the
    /// configuration it would use. Reads only; exits 1 when the node would refuse to start.
    Inspect(offline::InspectArgs),
    /// Offline: check a zoo.cfg as `fe-meta server` would load it (with dataDir/myid) and list
    /// every error, not only the first; prints the effective configuration when it is fine.
    CheckConfig(offline::CheckConfigArgs),
    /// Offline: check a snapshot file (or a bare fe-meta image) end to end: CRCs, the image's
    /// structure, its journal id and state digest. Exits 1 when it is invalid.
    VerifyImage(offline::VerifyImageArgs),
    /// Recovery from a lost majority: make this host's stopped node a one-member cluster with
    /// its data, after checking (and showing) that no named survivor holds newer data; then add
    /// the others back (the output says how). Refuses when a survivor is ahead, unless
    /// --force-lose-data. --plan changes nothing.
    Recover(recover::RecoverArgs),
    /// Take a consistent backup from any node while it serves (its catalog at its applied
    /// journal id, with the digest), streamed to FILE.tmp, verified, then renamed to FILE.
    Backup(backup::BackupArgs),
    /// Offline: verify a backup file, then prepare an empty data dir of a new cluster from it
    /// (zoo.cfg's clusterId, which must differ from the backup's); start every node normally.
    Restore(backup::RestoreArgs),
    /// Issue TLS certificates: a cluster CA in --ca-dir (reused if present) and, in --out,
    /// `node<N>.pem` for each of --hosts (certificate + key, for `ssl.quorum.keyStore.location`
    /// and `ssl.keyStore.location`), `client-<NAME>.pem` for each --client, and `ca.pem`.
    TlsCerts(tls_certs::TlsCertsArgs),
}

/// Parses the process arguments and runs; the process exit code.
pub fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if !cli.command.is_long_running() {
        die_quietly_on_closed_stdout();
    }
    std::process::ExitCode::from(run(cli).code())
}

impl Command {
    /// Whether the command runs a server or a cluster (it must outlive a reader of its output
    /// that went away); the others print a result and end.
    fn is_long_running(&self) -> bool {
        matches!(
            self,
            Command::Server { .. } | Command::LocalCluster(_) | Command::Bench(_)
        )
    }
}

/// Lets SIGPIPE end the process, as it ends `cat` or `ls`: `fe-meta dump-log DIR | head` then
/// stops when `head` does, instead of failing (or panicking in `println!`) on a closed pipe.
/// Only for commands that print and end; a server keeps Rust's default (SIGPIPE ignored, so a
/// peer that closes a socket is an error to handle, not the end of the process).
fn die_quietly_on_closed_stdout() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    // SAFETY: called once from main before any other thread exists; SIG_DFL installs no
    // handler code, so no async-signal-safety question arises.
    if let Err(e) = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) } {
        eprintln!("fe-meta: cannot restore SIGPIPE's default action: {e}");
    }
}

/// Runs a parsed command line; failures have been reported on stderr.
pub fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Server {
            config,
            bootstrap,
            helper,
            log_format,
        } => server_cmd::run(
            &config,
            server_cmd::start_mode(bootstrap, helper),
            log_format,
        ),
        Command::LocalCluster(args) => local_cluster::run(&args),
        Command::Client(cmd) => client_cmds::run(cmd),
        Command::Bench(args) => bench::run(&args),
        Command::DumpLog(args) => offline::dump_log(&args),
        Command::Inspect(args) => offline::inspect(&args),
        Command::CheckConfig(args) => offline::check_config(&args),
        Command::VerifyImage(args) => offline::verify_image(&args),
        Command::Recover(args) => recover::run(&args),
        Command::Backup(args) => backup::backup(&args),
        Command::Restore(args) => backup::restore(&args),
        Command::TlsCerts(args) => tls_certs::run(&args),
    };
    match result {
        Ok(()) => ExitCode::Success,
        Err(e) => {
            eprintln!("fe-meta: {}", e.message);
            e.code
        }
    }
}

/// A failure of a subcommand: what to print, and the exit code.
#[derive(Debug)]
pub struct Failure {
    /// The exit code.
    pub code: ExitCode,
    /// One line for stderr.
    pub message: String,
}

impl Failure {
    /// A failure with exit code [`ExitCode::Other`].
    pub fn other(message: impl Into<String>) -> Failure {
        Failure {
            code: ExitCode::Other,
            message: message.into(),
        }
    }
}

impl From<fe_meta::client::ClientError> for Failure {
    fn from(e: fe_meta::client::ClientError) -> Failure {
        Failure {
            code: ExitCode::from(&e),
            message: format!("{}: {e}", e.name()),
        }
    }
}

/// Builds a runtime for a command (library code: no panics on failure).
fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    runtime_of(2)
}

/// A runtime of `threads` threads: one runs every task on the thread that blocks on it (no
/// hand-offs between workers), more make a work-stealing pool of that many.
fn runtime_of(threads: usize) -> Result<tokio::runtime::Runtime, Failure> {
    let mut builder = match threads {
        0 | 1 => tokio::runtime::Builder::new_current_thread(),
        n => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n);
            b
        }
    };
    builder
        .enable_all()
        .build()
        .map_err(|e| Failure::other(format!("cannot start the async runtime: {e}")))
}
