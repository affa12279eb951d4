//! `fe-meta server --config FILE [--bootstrap]`: one node in the foreground. `--bootstrap`
//! forms a new cluster: an empty data dir is initialized as a voter at zxid 0; without it an
//! empty data dir joins a leader as a non-voting learner and votes after its first sync.
//! Logs go to stderr through `tracing-subscriber`, filtered by `RUST_LOG` (default `info`);
//! Ctrl-C (SIGINT) or SIGTERM stops the node cleanly.
//!
//! INV: the process exits 0 after a clean stop, 1 with one line on stderr when the node cannot
//! start or fails.

use std::io::IsTerminal;
use std::path::Path;

use tracing_subscriber::EnvFilter;

use super::{runtime, Failure};

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
    rt.block_on(crate::server::run(config, bootstrap, shutdown_signal()))
        .map_err(|e| Failure::other(format!("server {}: {e}", config.display())))
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
