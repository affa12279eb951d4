//! `fe-meta server --config FILE [--bootstrap | --helper HOST:CLIENT_PORT]`: one node in the
//! foreground. `--bootstrap` forms a new cluster: an empty data dir is initialized as a voter
//! at zxid 0; without it an empty data dir joins a leader as a non-voting learner and votes
//! after its first sync. `--helper` joins a running cluster through one of its members
//! (`fe_meta::server::join`): it waits until this server was added, learns the cluster id, the
//! configuration and the timing keys from the member, then syncs and serves.
//! Logs go to stderr through `tracing-subscriber`, filtered by `RUST_LOG` (default `info`);
//! Ctrl-C (SIGINT) or SIGTERM stops the node cleanly (also while it waits to be added).
//!
//! INV: the process exits 0 after a clean stop, 1 with one line on stderr when the node cannot
//! start, 4 ([`fe_meta::server::FATAL_EXIT_STATUS`]) when the node stopped on a fatal error
//! (the ERROR log line says what failed, which file and what to do; a supervisor restarts it
//! once that is fixed), and 6 ([`fe_meta::server::REMOVED_EXIT_STATUS`]) when this server is
//! not a member any more: removed while running (one WARN line, client port closed), or its
//! data dir is a removed server's (one line on stderr: the configuration version that removed
//! it and how to add it again). The exit does not wait more than a few seconds for threads
//! stuck on a failed disk.

use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

use tracing_subscriber::EnvFilter;

use super::{runtime, ExitCode, Failure};
use fe_meta::server::{ServerError, StartMode, Stopped};

/// How long the runtime's leftover blocking tasks may delay the exit.
const RUNTIME_STOP_WAIT: Duration = Duration::from_secs(2);

/// The start mode of the command line's flags (clap refuses both at once).
pub(super) fn start_mode(bootstrap: bool, helper: Option<String>) -> StartMode {
    match (helper, bootstrap) {
        (Some(h), _) => StartMode::Helper(h),
        (None, true) => StartMode::Bootstrap,
        (None, false) => StartMode::Plain,
    }
}

/// Runs the node configured by `config` until Ctrl-C or SIGTERM.
pub(super) fn run(config: &Path, mode: StartMode) -> Result<(), Failure> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // A second init (tests calling this twice) keeps the first subscriber.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
    let rt = runtime()?;
    let ended = rt.block_on(fe_meta::server::run(config, mode, shutdown_signal()));
    rt.shutdown_timeout(RUNTIME_STOP_WAIT);
    let at = config.display();
    match ended {
        Ok(Stopped::Requested) => Ok(()),
        Ok(Stopped::Fatal(_)) => Err(Failure {
            code: ExitCode::NodeFatal,
            message: format!(
                "server {at}: the node stopped on a fatal error (see the ERROR line above)"
            ),
        }),
        Ok(Stopped::Removed(version)) => Err(Failure {
            code: ExitCode::Removed,
            message: format!(
                "server {at}: removed from the cluster by configuration version {version}; \
                 stopped"
            ),
        }),
        Err(ServerError::Removed(removal)) => Err(Failure {
            code: ExitCode::Removed,
            message: format!("server {at}: {removal}"),
        }),
        Err(e) => Err(Failure::other(format!("server {at}: {e}"))),
    }
}

/// Resolves on the first Ctrl-C (SIGINT) or SIGTERM.
pub(super) async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = ctrl_c => tracing::info!("SIGINT: stopping"),
                _ = term.recv() => tracing::info!("SIGTERM: stopping"),
            }
        }
        Err(_) => ctrl_c.await,
    }
}
