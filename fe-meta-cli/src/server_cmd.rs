//! `fe-meta server --config FILE [--bootstrap]`: one node in the foreground. `--bootstrap`
//! forms a new cluster: an empty data dir is initialized as a voter at zxid 0; without it an
//! empty data dir joins a leader as a non-voting learner and votes after its first sync.
//! Logs go to stderr through `tracing-subscriber`, filtered by `RUST_LOG` (default `info`);
//! Ctrl-C (SIGINT) or SIGTERM stops the node cleanly.
//!
//! INV: the process exits 0 after a clean stop, 1 with one line on stderr when the node cannot
//! start, and 4 ([`fe_meta::server::FATAL_EXIT_STATUS`]) when the node stopped on a fatal error
//! (the ERROR log line says what failed, which file and what to do; a supervisor restarts it
//! once that is fixed). The exit does not wait more than a few seconds for threads stuck on a
//! failed disk.

use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

use tracing_subscriber::EnvFilter;

use super::{runtime, ExitCode, Failure};
use fe_meta::server::Stopped;

/// How long the runtime's leftover blocking tasks may delay the exit.
const RUNTIME_STOP_WAIT: Duration = Duration::from_secs(2);

/// Runs the node configured by `config` until Ctrl-C or SIGTERM.
pub(super) fn run(config: &Path, bootstrap: bool) -> Result<(), Failure> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // A second init (tests calling this twice) keeps the first subscriber.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
    let rt = runtime()?;
    let ended = rt.block_on(fe_meta::server::run(config, bootstrap, shutdown_signal()));
    rt.shutdown_timeout(RUNTIME_STOP_WAIT);
    match ended {
        Ok(Stopped::Requested) => Ok(()),
        Ok(Stopped::Fatal(_)) => Err(Failure {
            code: ExitCode::NodeFatal,
            message: format!(
                "server {}: the node stopped on a fatal error (see the ERROR line above)",
                config.display()
            ),
        }),
        Err(e) => Err(Failure::other(format!("server {}: {e}", config.display()))),
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
