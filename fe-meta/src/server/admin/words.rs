//! The four-letter words' inputs, gathered from the running server, and their JSON form for
//! the admin port's `/commands/<name>` (ZooKeeper AdminServer's names).
//!
//! INV-1: the text words (client port) and the JSON commands (admin port) are answered from
//! the same [`WordInputs`]; `mntr`/`monitor` reads the node's metrics registry right after its
//! gauges were refreshed (metrics INV-2).
//! INV-2: `dirs` walks at most [`DIR_ENTRIES_MAX`] entries per directory tree, off the
//! runtime's worker threads; a file that vanishes during the walk is skipped.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::super::metrics::{gather_flat, StateGauges};
use super::super::write::is_serving_leader;
use super::super::Shared;
use crate::protocol::{render_four_letter_word, FourLetterWord, ServerStats, WordExtras};

/// Most directory entries `dirs` visits per tree (INV-2).
pub const DIR_ENTRIES_MAX: usize = 100_000;

/// What a word is answered from.
#[derive(Clone, Debug)]
pub struct WordInputs {
    /// The summary every word may use.
    pub stats: ServerStats,
    /// What the word needs besides.
    pub extras: WordExtras,
}

/// The threads of the runtime this runs on and their busy time so far, summed (none outside
/// a runtime).
fn runtime_load() -> (usize, std::time::Duration) {
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return (0, std::time::Duration::ZERO);
    };
    let m = handle.metrics();
    let threads = m.num_workers();
    (
        threads,
        (0..threads).map(|w| m.worker_total_busy_duration(w)).sum(),
    )
}

impl Shared {
    /// Refreshes the state gauges of the metrics from the node (metrics INV-2).
    pub(crate) fn refresh_metrics(&self) {
        let st = self.node.status();
        let catalog = self.catalog.load();
        let leader = is_serving_leader(&st);
        let (server_threads, server_busy) = runtime_load();
        self.stats.metrics().refresh(&StateGauges {
            applied_journal_id: catalog.journal_id().0,
            staleness_ms: if leader {
                Some(0)
            } else {
                self.progress.lag_ms()
            },
            catalog_entries: catalog.entry_count(),
            last_timestamp_ms: catalog.last_timestamp_ms(),
            timestamps_applied: self.progress.timestamps_applied(),
            fatal: st.fatal.is_some(),
            server_threads,
            server_busy,
        });
    }

    /// Runs `word`: `srst` resets the counters first; then gathers what it is answered from.
    pub(crate) async fn word_inputs(&self, word: FourLetterWord) -> WordInputs {
        if word == FourLetterWord::Srst {
            self.stats.reset();
        }
        let mut extras = WordExtras::default();
        match word {
            FourLetterWord::Mntr => {
                self.refresh_metrics();
                extras.metrics = gather_flat(self.node.metrics_registry());
            }
            FourLetterWord::Conf => extras.conf = self.conf_entries(),
            FourLetterWord::Envi => extras.env = env_entries(),
            FourLetterWord::Dirs => {
                let (data, log) = (
                    self.cfg.node.data_dir.clone(),
                    self.cfg.node.data_log_dir.clone(),
                );
                extras.dir_sizes = tokio::task::spawn_blocking(move || {
                    (
                        tree_size(&data),
                        if log == data { 0 } else { tree_size(&log) },
                    )
                })
                .await
                .unwrap_or((0, 0));
            }
            FourLetterWord::Isro => {
                let st = self.node.status();
                extras.read_only = !(is_serving_leader(&st) || (st.serving && st.leader.is_some()));
            }
            _ => {}
        }
        WordInputs {
            stats: self.server_stats().await,
            extras,
        }
    }

    /// The text answer to `word` on the client port.
    pub(crate) async fn word_text(&self, word: FourLetterWord) -> String {
        let inputs = self.word_inputs(word).await;
        render_four_letter_word(word, &inputs.stats, &inputs.extras)
    }

    /// `conf`: the configuration in force (the members are the committed configuration's).
    fn conf_entries(&self) -> Vec<(String, String)> {
        let c = &self.cfg;
        let st = self.node.status();
        let mut kv = vec![
            ("clientPortAddress".to_owned(), c.client_listen.clone()),
            ("dataDir".to_owned(), c.node.data_dir.display().to_string()),
            (
                "dataLogDir".to_owned(),
                c.node.data_log_dir.display().to_string(),
            ),
            ("tickTime".to_owned(), c.node.tick_ms.to_string()),
            ("initLimit".to_owned(), c.node.init_limit_ticks.to_string()),
            ("syncLimit".to_owned(), c.node.sync_limit_ticks.to_string()),
            ("serverId".to_owned(), c.sid.to_string()),
            ("clusterId".to_owned(), format!("{:#x}", c.cluster_id)),
        ];
        for (sid, m) in &st.committed_membership.members {
            kv.push((format!("server.{}", sid.0), m.address.clone()));
        }
        kv.push((
            "version".to_owned(),
            format!("{:x}", st.committed_membership.version.0),
        ));
        kv.extend(c.fe_meta_settings());
        kv
    }
}

/// `envi`: the process's environment, with ZooKeeper's key names where they apply.
fn env_entries() -> Vec<(String, String)> {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    };
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    vec![
        (
            "fe-meta.version".to_owned(),
            super::super::VERSION.to_owned(),
        ),
        ("host.name".to_owned(), read("/proc/sys/kernel/hostname")),
        ("os.name".to_owned(), std::env::consts::OS.to_owned()),
        ("os.arch".to_owned(), std::env::consts::ARCH.to_owned()),
        ("os.version".to_owned(), read("/proc/sys/kernel/osrelease")),
        ("user.name".to_owned(), var("USER")),
        ("user.home".to_owned(), var("HOME")),
        (
            "user.dir".to_owned(),
            std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
        ),
        ("process.id".to_owned(), std::process::id().to_string()),
        (
            "process.cpus".to_owned(),
            std::thread::available_parallelism()
                .map_or(0, |n| n.get())
                .to_string(),
        ),
    ]
}

/// Bytes in the files under `root` (INV-2).
pub fn tree_size(root: &Path) -> u64 {
    let mut total = 0u64;
    let mut pending: Vec<PathBuf> = vec![root.to_path_buf()];
    let mut visited = 0usize;
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            visited += 1;
            if visited > DIR_ENTRIES_MAX {
                return total;
            }
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if meta.is_dir() {
                pending.push(entry.path());
            } else if meta.is_file() {
                total = total.saturating_add(meta.len());
            }
        }
    }
    total
}

/// `GET /commands/<name>`: an HTTP status and the JSON answer (ZooKeeper AdminServer's
/// shape: `command`, `error`, then the word's fields).
pub fn command_json(word: FourLetterWord, i: &WordInputs) -> (u16, Value) {
    let mut body = Map::new();
    body.insert("command".into(), json!(word.command_name()));
    if let Some(reason) = &i.stats.fatal {
        body.insert(
            "error".into(),
            json!(format!(
                "the node stopped on a fatal error and is exiting: {reason}"
            )),
        );
        return (503, Value::Object(body));
    }
    body.insert("error".into(), Value::Null);
    let s = &i.stats;
    let x = &i.extras;
    let fields = match word {
        FourLetterWord::Ruok | FourLetterWord::Srst => json!({}),
        FourLetterWord::Srvr | FourLetterWord::Stat => stats_json(s, word == FourLetterWord::Stat),
        FourLetterWord::Cons => json!({ "connections": connections(s) }),
        FourLetterWord::Mntr => {
            let text = render_four_letter_word(word, s, x);
            let mut m = Map::new();
            for line in text.lines() {
                if let Some((k, v)) = line.split_once('\t') {
                    m.insert(k.to_owned(), number_or_text(v));
                }
            }
            Value::Object(m)
        }
        FourLetterWord::Conf | FourLetterWord::Envi => {
            let kv = if word == FourLetterWord::Conf {
                &x.conf
            } else {
                &x.env
            };
            Value::Object(
                kv.iter()
                    .map(|(k, v)| (k.clone(), json!(v)))
                    .collect::<Map<_, _>>(),
            )
        }
        FourLetterWord::Dirs => json!({
            "datadir_size": x.dir_sizes.0,
            "logdir_size": x.dir_sizes.1,
        }),
        FourLetterWord::Isro => json!({ "read_only": x.read_only }),
        FourLetterWord::Wchs => json!({
            "num_connections": 0,
            "num_paths": 0,
            "num_total_watches": 0,
        }),
    };
    if let Value::Object(m) = fields {
        body.extend(m);
    }
    (200, Value::Object(body))
}

/// `server_stats`, and `stats` (`with_connections`).
fn stats_json(s: &ServerStats, with_connections: bool) -> Value {
    let mut v = json!({
        "version": format!("fe-meta {}", s.version),
        "server_state": s.mode.name(),
        "sid": s.sid,
        "epoch": s.epoch,
        "zxid": s.zxid.to_string(),
        "node_count": s.node_count,
        "min_latency_ms": s.latency_min_ms,
        "avg_latency_ms": s.latency_avg_ms,
        "max_latency_ms": s.latency_max_ms,
        "packets_received": s.received,
        "packets_sent": s.sent,
        "num_alive_client_connections": s.connections,
        "outstanding_requests": s.outstanding,
        "staleness_ms": s.staleness_ms,
        "initialized": s.initialized,
    });
    if with_connections {
        v["connections"] = connections(s);
    }
    v
}

fn connections(s: &ServerStats) -> Value {
    Value::Array(
        s.clients
            .iter()
            .map(|c| {
                json!({
                    "remote_socket_address": c.addr,
                    "outstanding_requests": c.queued,
                    "packets_received": c.received,
                    "packets_sent": c.sent,
                })
            })
            .collect(),
    )
}

fn number_or_text(v: &str) -> Value {
    if let Ok(n) = v.parse::<i64>() {
        return json!(n);
    }
    match v.parse::<f64>() {
        Ok(f) if f.is_finite() => json!(f),
        _ => json!(v),
    }
}
