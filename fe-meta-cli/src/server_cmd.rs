//! `fe-meta server --config FILE [--bootstrap | --helper HOST:CLIENT_PORT]`: one node in the
//! foreground. `--bootstrap` forms a new cluster: an empty data dir is initialized as a voter
//! at zxid 0; without it an empty data dir joins a leader as a non-voting learner and votes
//! after its first sync. `--helper` joins a running cluster through one of its members
//! (`fe_meta::server::join`): it waits until this server was added, learns the cluster id, the
//! configuration and the timing keys from the member, then syncs and serves.
//! The node's tasks run on `server_threads` threads (zoo.cfg; one by default, see
//! `fe_meta::server::config`). Logs go to stderr through `tracing-subscriber`, filtered by
//! `RUST_LOG` (default `info`); the first line names the version, the commit the binary was
//! built from (`build.rs`) and the number of server threads. Lines are
//! human-readable text by default, or with `--log-format json` (or `FE_META_LOG_FORMAT=json`)
//! one JSON object per line for log shippers ([`LogFormat`]). Ctrl-C (SIGINT) or SIGTERM
//! stops the node cleanly (also while it waits to be added).
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

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::EnvFilter;

use super::{runtime_of, ExitCode, Failure};
use fe_meta::server::config::{server_threads_of, SERVER_THREADS_DEFAULT};
use fe_meta::server::{ServerError, StartMode, Stopped};
use zab_net::NetError;
use zab_store::StoreError;

/// How long the runtime's leftover blocking tasks may delay the exit.
const RUNTIME_STOP_WAIT: Duration = Duration::from_secs(2);

/// How the server writes its log lines to stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines: time, level, target, message and fields (colours on a terminal).
    #[default]
    Text,
    /// One JSON object per line for log shippers: `timestamp`, `level`, `target`, `message`,
    /// the event's fields at the top level, and `span` (the current span and its fields).
    Json,
}

/// The log subscriber of `format`, writing to `writer` (ANSI colours only in text, and only
/// when `ansi`).
fn subscriber<W>(
    format: LogFormat,
    filter: EnvFilter,
    writer: W,
    ansi: bool,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    match format {
        LogFormat::Text => Box::new(builder.with_ansi(ansi).finish()),
        LogFormat::Json => Box::new(
            builder
                .json()
                .flatten_event(true)
                .with_current_span(true)
                .with_span_list(false)
                .finish(),
        ),
    }
}

/// The start mode of the command line's flags (clap refuses both at once).
pub(super) fn start_mode(bootstrap: bool, helper: Option<String>) -> StartMode {
    match (helper, bootstrap) {
        (Some(h), _) => StartMode::Helper(h),
        (None, true) => StartMode::Bootstrap,
        (None, false) => StartMode::Plain,
    }
}

/// Runs the node configured by `config` until Ctrl-C or SIGTERM, logging in `log_format`.
pub(super) fn run(config: &Path, mode: StartMode, log_format: LogFormat) -> Result<(), Failure> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // A second init (tests calling this twice) keeps the first subscriber.
    let _ = subscriber(
        log_format,
        filter,
        std::io::stderr,
        std::io::stderr().is_terminal(),
    )
    .try_init();
    let threads = server_threads_of(config).unwrap_or(SERVER_THREADS_DEFAULT);
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        commit = super::COMMIT,
        config = %config.display(),
        server_threads = threads,
        "fe-meta {} starting",
        super::VERSION
    );
    let rt = runtime_of(threads)?;
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
        Err(ServerError::Node(NetError::Store(e))) if is_damage(&e) => Err(Failure {
            code: ExitCode::DataDirDamaged,
            message: format!(
                "server {at}: the data dir is damaged, the node refuses to start: {e}. Keep a \
                 copy of the data dir for a report (`fe-meta dump-log` and `fe-meta \
                 verify-image` show the damage), check the disk, then resync this node from \
                 the cluster: empty its data dir except myid and start it again without \
                 --bootstrap (docs/OPERATIONS.md, section 5.2)"
            ),
        }),
        Err(ServerError::Node(NetError::Store(e))) if is_disk_failure(&e) => Err(Failure {
            code: ExitCode::NodeFatal,
            message: format!(
                "server {at}: the disk failed while the node started: {e}. Fix the disk (free \
                 space, or check the kernel log and replace a failing disk and resync the \
                 node, docs/OPERATIONS.md section 6.1), then start it again"
            ),
        }),
        Err(e) => Err(Failure::other(format!("server {at}: {e}"))),
    }
}

/// Whether a start failed because the disk itself did (an I/O error, no space, a file system
/// turned read-only, a quota): the same exit status as a fatal stop, whose causes these are.
fn is_disk_failure(e: &StoreError) -> bool {
    /// EIO, ENOSPC, EROFS and EDQUOT on Linux.
    const DISK_FAILURES: [i32; 4] = [5, 28, 30, 122];
    match e {
        StoreError::Io { source, .. } => source
            .raw_os_error()
            .is_some_and(|code| DISK_FAILURES.contains(&code)),
        _ => false,
    }
}

/// Whether a start failed on files that are damaged, not on an operating-system error:
/// starting again changes nothing until the node is resynced.
fn is_damage(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::Corrupt { .. }
            | StoreError::LogGap { .. }
            | StoreError::BadSnapshot { .. }
            | StoreError::BadEpochFile { .. }
    )
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

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A writer into a shared buffer.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn disk_failures_at_start_are_told_from_other_io_errors() {
        let at = |code: i32| {
            StoreError::io(
                "fsync directory",
                "/d",
                std::io::Error::from_raw_os_error(code),
            )
        };
        for code in [5, 28, 30, 122] {
            assert!(is_disk_failure(&at(code)), "os error {code}");
        }
        for code in [2, 13] {
            assert!(
                !is_disk_failure(&at(code)),
                "os error {code} is a setup problem"
            );
        }
        assert!(!is_disk_failure(&StoreError::corrupt(
            "/d/log", 0, "bad crc"
        )));
    }

    fn log_with(format: LogFormat) -> String {
        let out = Captured::default();
        let writer = out.clone();
        let sub = subscriber(
            format,
            EnvFilter::new("info"),
            move || writer.clone(),
            false,
        );
        tracing::subscriber::with_default(sub, || {
            let span = tracing::info_span!("sync", learner = 2);
            let _in = span.enter();
            tracing::info!(zxid = 4096, mode = "DIFF", "snapshot loaded");
            tracing::debug!("filtered out");
        });
        let text = out.0.lock().unwrap().clone();
        String::from_utf8(text).unwrap()
    }

    #[test]
    fn json_format_writes_one_object_per_line_with_the_fields() {
        let text = log_with(LogFormat::Json);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{text}");
        let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(v["level"], "INFO");
        assert_eq!(v["message"], "snapshot loaded");
        assert_eq!(v["zxid"], 4096);
        assert_eq!(v["mode"], "DIFF");
        assert_eq!(v["span"]["name"], "sync");
        assert_eq!(v["span"]["learner"], 2);
        assert!(v["target"]
            .as_str()
            .is_some_and(|t| t.starts_with("fe_meta_cli")));
        assert!(v["timestamp"].as_str().is_some());
    }

    #[test]
    fn text_format_stays_the_default_and_is_not_json() {
        assert_eq!(LogFormat::default(), LogFormat::Text);
        let text = log_with(LogFormat::Text);
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(text.contains("INFO") && text.contains("snapshot loaded zxid=4096"));
        assert!(serde_json::from_str::<serde_json::Value>(text.trim()).is_err());
    }
}
