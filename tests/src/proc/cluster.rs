//! [`ProcCluster`]: N voters as child processes, the faults, and the waits a test needs.
//!
//! INV-1 (the slot): a cluster holds the process-wide slot from [`ProcCluster::start`] until
//! it drops, so clusters of one test binary run one at a time.
//! INV-2: dropping the cluster kills and reaps every node, stops the monitor, and removes the
//! dir unless the test failed (panic, or a failed [`ProcCluster::finish`]): then the dir is
//! kept and its path and each node's log tail are printed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use fe_meta::client::{four_letter_word_with, Client, ClientError, ClientOptions};
use fe_meta::protocol::{Mode, StatusInfo};

use super::monitor::{Monitor, MonitorReport};
use super::node::{NodePorts, ProcNode, SyncCounts};
use super::spec::ClusterSpec;
use super::{binary, checks, ports, Ledger, ProcError};

/// Timeouts of the harness's own short requests (status, digest, mntr).
pub const PROBE: ClientOptions = ClientOptions {
    connect_timeout: Duration::from_millis(500),
    request_timeout: Duration::from_secs(2),
    ..ClientOptions::DEFAULT
};

/// A running (or partly running) cluster of `fe-meta server` processes.
#[derive(Debug)]
pub struct ProcCluster {
    name: String,
    spec: ClusterSpec,
    nodes: BTreeMap<u64, ProcNode>,
    ledger: Ledger,
    monitor: Option<Monitor>,
    failed: bool,
    root: Option<tempfile::TempDir>,
    _slot: Slot,
}

impl ProcCluster {
    /// Takes the slot, writes the configs and starts every node with `--bootstrap` (a new
    /// cluster), starts the monitor and waits up to 30 s for a leader all follow.
    pub async fn start(name: &str, spec: ClusterSpec) -> Result<ProcCluster, ProcError> {
        let mut c = ProcCluster::prepare(name, spec)?;
        for n in c.nodes.values_mut() {
            n.spawn(true)?;
        }
        c.serve().await?;
        Ok(c)
    }

    /// Takes the slot and writes the configs (a new cluster id) but starts nothing: the test
    /// fills the data dirs (e.g. `fe-meta restore`), starts nodes with [`ProcCluster::restart`]
    /// and then calls [`ProcCluster::serve`].
    pub fn prepare(name: &str, spec: ClusterSpec) -> Result<ProcCluster, ProcError> {
        let slot = Slot::acquire();
        let bin = binary::fe_meta_bin()?;
        let root = tempfile::Builder::new()
            .prefix(&format!("fe-meta-proc-{name}-"))
            .tempdir()
            .map_err(ProcError::io("temp dir"))?;
        let base = ports::free_block()?;
        let mut nodes = BTreeMap::new();
        for sid in 1..=spec.nodes {
            let p = base + 3 * (sid as u16 - 1);
            let ports = NodePorts {
                client: p,
                quorum: p + 1,
                election: p + 2,
            };
            let data_dir = spec.data_dirs.get(&sid).map(PathBuf::as_path);
            let net = spec.net.get(&sid).cloned().unwrap_or_default();
            let mut node = ProcNode::new(sid, ports, net, root.path(), data_dir, &bin);
            node.set_env(spec.node_env.get(&sid).cloned().unwrap_or_default());
            nodes.insert(sid, node);
        }
        let c = ProcCluster {
            name: name.to_owned(),
            spec,
            nodes,
            ledger: Ledger::default(),
            monitor: None,
            failed: false,
            root: Some(root),
            _slot: slot,
        };
        c.write_configs()?;
        Ok(c)
    }

    /// Starts the monitor on every node and waits up to 30 s for a leader all follow.
    pub async fn serve(&mut self) -> Result<(), ProcError> {
        let addrs: Vec<(u64, String)> = self
            .nodes
            .values()
            .map(|n| (n.sid(), n.client_addr()))
            .collect();
        self.monitor = Some(Monitor::start(&addrs, &self.spec));
        self.leader(Duration::from_secs(30)).await?;
        Ok(())
    }

    fn write_configs(&self) -> Result<(), ProcError> {
        let s = &self.spec;
        static CLUSTER: AtomicU64 = AtomicU64::new(1);
        let cluster_id =
            (u64::from(std::process::id()) << 16) | CLUSTER.fetch_add(1, Ordering::Relaxed);
        for n in self.nodes.values() {
            let mut t = format!(
                "tickTime={}\ninitLimit={}\nsyncLimit={}\ndataDir={}\nclientPort={}\n\
                 clusterId={cluster_id}\nforceSync={}\npreAllocSize={}\n",
                s.tick_ms,
                s.init_limit,
                s.sync_limit,
                n.data_dir().display(),
                n.ports().client,
                if s.force_sync { "yes" } else { "no" },
                s.pre_alloc_kib,
            );
            if let Some(k) = s.snap_count {
                t += &format!("snapCount={k}\n");
            }
            let extras = s
                .extra
                .iter()
                .chain(s.node_extra.get(&n.sid()).into_iter().flatten());
            if !extras.clone().any(|l| l.starts_with("admin.")) {
                // The admin port on a port of the OS's choosing, not the shared default 8080.
                t += "admin.serverAddress=127.0.0.1\nadmin.serverPort=0\n";
            }
            for line in s
                .extra
                .iter()
                .chain(s.node_extra.get(&n.sid()).into_iter().flatten())
            {
                t += line;
                t.push('\n');
            }
            for m in self.nodes.values() {
                let p = m.ports();
                let h = m.host();
                t += &format!(
                    "server.{}={h}:{}:{};{h}:{}\n",
                    m.sid(),
                    p.quorum,
                    p.election,
                    p.client
                );
            }
            std::fs::write(n.config_path(), t).map_err(ProcError::io("write zoo.cfg"))?;
        }
        Ok(())
    }

    /// Adds a node created after the start (`members`).
    pub(crate) fn insert_node(&mut self, node: ProcNode) {
        if let Some(m) = &mut self.monitor {
            m.watch(node.sid(), node.client_addr());
        }
        self.nodes.insert(node.sid(), node);
    }

    /// Takes node `sid` out of the cluster (`members`); the caller stops it.
    pub(crate) fn remove_node(&mut self, sid: u64) -> Result<ProcNode, ProcError> {
        self.nodes.remove(&sid).ok_or(ProcError::NoNode(sid))
    }

    /// The test's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The spec it runs with.
    pub fn spec(&self) -> &ClusterSpec {
        &self.spec
    }

    /// The test dir (configs, data dirs, logs).
    pub fn dir(&self) -> &Path {
        self.root.as_ref().map_or(Path::new("."), |r| r.path())
    }

    /// All sids.
    pub fn sids(&self) -> Vec<u64> {
        self.nodes.keys().copied().collect()
    }

    /// Node `sid`.
    pub fn node(&self, sid: u64) -> Result<&ProcNode, ProcError> {
        self.nodes.get(&sid).ok_or(ProcError::NoNode(sid))
    }

    /// Node `sid`, to apply faults.
    pub fn node_mut(&mut self, sid: u64) -> Result<&mut ProcNode, ProcError> {
        self.nodes.get_mut(&sid).ok_or(ProcError::NoNode(sid))
    }

    /// `<host>:<client port>` of `sid` (empty for an unknown sid).
    pub fn client_addr(&self, sid: u64) -> String {
        self.nodes
            .get(&sid)
            .map(ProcNode::client_addr)
            .unwrap_or_default()
    }

    /// The acknowledged writes the end checks read back; load tasks record into it.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// What the journal-id poller saw so far.
    pub fn monitor_report(&self) -> MonitorReport {
        self.monitor
            .as_ref()
            .map(Monitor::report)
            .unwrap_or_default()
    }

    /// Sids of nodes running and not paused.
    pub fn live_sids(&mut self) -> Vec<u64> {
        self.nodes
            .values_mut()
            .filter_map(|n| (n.is_running() && !n.is_paused()).then_some(n.sid()))
            .collect()
    }

    /// SIGKILL node `sid`.
    pub fn kill(&mut self, sid: u64) -> Result<(), ProcError> {
        self.node_mut(sid)?.kill9()
    }

    /// SIGSTOP node `sid`.
    pub fn pause(&mut self, sid: u64) -> Result<(), ProcError> {
        self.node_mut(sid)?.pause()
    }

    /// SIGCONT node `sid`.
    pub fn resume(&mut self, sid: u64) -> Result<(), ProcError> {
        self.node_mut(sid)?.resume()
    }

    /// SIGTERM node `sid` and wait (10 s) for its clean exit; returns the exit code.
    pub fn terminate(&mut self, sid: u64) -> Result<Option<i32>, ProcError> {
        self.node_mut(sid)?.terminate(Duration::from_secs(10))
    }

    /// Starts node `sid` again on its dir, without `--bootstrap` (INV-4 of the module).
    pub fn restart(&mut self, sid: u64) -> Result<(), ProcError> {
        self.node_mut(sid)?.spawn(false)
    }

    /// Deletes node `sid`'s data dir (it must be stopped); the monitor starts its journal
    /// ids over.
    pub fn wipe(&mut self, sid: u64) -> Result<(), ProcError> {
        self.node_mut(sid)?.wipe()?;
        if let Some(m) = &self.monitor {
            m.forget(sid);
        }
        Ok(())
    }

    /// A client of node `sid` (`PROBE` timeouts unless `opts`; the spec's TLS unless `opts`
    /// has its own).
    pub async fn client(
        &self,
        sid: u64,
        opts: Option<ClientOptions>,
    ) -> Result<Client, ClientError> {
        let opts = self.spec.client_options(opts.unwrap_or(PROBE));
        Client::connect_with(&self.client_addr(sid), opts).await
    }

    /// STATUS of node `sid`, or `None` if it does not answer in time.
    pub async fn status(&self, sid: u64) -> Option<StatusInfo> {
        let c = self.client(sid, None).await.ok()?;
        c.status().await.ok()
    }

    /// `mntr` of node `sid` as key → value.
    pub async fn mntr(&self, sid: u64) -> Result<BTreeMap<String, String>, ClientError> {
        let tls = self.spec.client_tls.as_ref();
        let addr = self.client_addr(sid);
        let text = four_letter_word_with(&addr, "mntr", Duration::from_secs(2), tls).await?;
        Ok(text
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect())
    }

    /// Node `sid`'s sync counters from `mntr`: (sent while leading, received as a learner).
    pub async fn sync_counts(&self, sid: u64) -> Result<(SyncCounts, SyncCounts), ClientError> {
        let m = self.mntr(sid).await?;
        let get = |k: String| -> Result<u64, ClientError> {
            m.get(&k)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| ClientError::Protocol(format!("mntr of node {sid} lacks {k}")))
        };
        let counts = |dir: &str| -> Result<SyncCounts, ClientError> {
            Ok(SyncCounts {
                diff: get(format!("fe_meta_sync_{dir}_diff"))?,
                trunc: get(format!("fe_meta_sync_{dir}_trunc"))?,
                snap: get(format!("fe_meta_sync_{dir}_snap"))?,
            })
        };
        Ok((counts("sent")?, counts("received")?))
    }

    /// Waits until exactly one live node leads, is established (it applied an entry of its
    /// epoch: the TIMESTAMP a new leader commits), and every live node reports it as leader in
    /// that epoch; returns its sid.
    pub async fn leader(&mut self, within: Duration) -> Result<u64, ProcError> {
        let start = Instant::now();
        let mut last = String::new();
        while start.elapsed() < within {
            let live = self.live_sids();
            let mut seen = Vec::new();
            for sid in &live {
                seen.push((*sid, self.status(*sid).await));
            }
            let leaders: Vec<u64> = seen
                .iter()
                .filter(|(_, s)| s.as_ref().is_some_and(|s| s.mode == Mode::Leader))
                .map(|(sid, _)| *sid)
                .collect();
            if let [l] = leaders[..] {
                let epoch = seen
                    .iter()
                    .find(|(s, _)| *s == l)
                    .and_then(|(_, st)| st.as_ref())
                    .map(|s| s.epoch);
                // Established: it committed its first entry (TIMESTAMP) in its epoch.
                let established = seen.iter().any(|(s, st)| {
                    *s == l
                        && st.as_ref().is_some_and(|st| {
                            st.epoch > 0 && u64::from(st.applied_journal_id.epoch().0) == st.epoch
                        })
                });
                let agree = established
                    && seen.iter().all(|(_, st)| {
                        st.as_ref().is_some_and(|st| {
                            st.leader_sid == Some(l)
                                && Some(st.epoch) == epoch
                                && matches!(st.mode, Mode::Leader | Mode::Follower | Mode::Observer)
                        })
                    });
                if agree {
                    return Ok(l);
                }
            }
            last = describe(&seen);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(ProcError::Timeout {
            what: "one leader followed by every live node".into(),
            within,
            detail: format!(": {last}"),
        })
    }

    /// Waits until every node runs (not paused) and all report the same journal id and digest;
    /// returns `(journal_id, digest)`.
    pub async fn wait_converged(&mut self, within: Duration) -> Result<(u64, [u8; 32]), ProcError> {
        let start = Instant::now();
        let mut last = String::new();
        while start.elapsed() < within {
            let live = self.live_sids();
            if live.len() == self.nodes.len() {
                let mut digests = BTreeMap::new();
                for sid in &live {
                    let d = match self.client(*sid, None).await {
                        Ok(c) => c.digest(false).await.ok(),
                        Err(_) => None,
                    };
                    digests.insert(*sid, d);
                }
                let first = digests.values().next().copied().flatten();
                if let Some((jid, digest, _)) = first {
                    if digests
                        .values()
                        .all(|d| d.is_some_and(|d| d.0 == jid && d.1 == digest))
                    {
                        return Ok((jid.0, digest));
                    }
                }
                last = digests
                    .iter()
                    .map(|(s, d)| match d {
                        Some((j, dg, n)) => {
                            format!("node {s}: {j} {:02x}{:02x}.. ({n} entries)", dg[0], dg[1])
                        }
                        None => format!("node {s}: no answer"),
                    })
                    .collect::<Vec<_>>()
                    .join("; ");
            } else {
                last = format!("live nodes {live:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(ProcError::Timeout {
            what: "all nodes at the same journal id and digest".into(),
            within,
            detail: format!(": {last}"),
        })
    }

    /// The end checks of every scenario ([`checks`]); on failure the dir is kept.
    pub async fn finish(&mut self) -> Result<checks::Converged, ProcError> {
        let r = checks::run(self).await;
        if r.is_err() {
            self.failed = true;
        }
        r
    }

    /// Marks the test failed: the dir is kept and the log tails printed on drop.
    pub fn keep_dir(&mut self) {
        self.failed = true;
    }

    fn report_failure(&self) {
        eprintln!(
            "=== {}: test dir kept at {}",
            self.name,
            self.dir().display()
        );
        for n in self.nodes.values() {
            eprintln!(
                "--- node {} log tail ({}):",
                n.sid(),
                n.log_path().display()
            );
            eprintln!("{}", n.log_tail(40));
        }
    }
}

fn describe(seen: &[(u64, Option<StatusInfo>)]) -> String {
    seen.iter()
        .map(|(sid, st)| match st {
            Some(s) => format!(
                "node {sid}: {} leader {:?} epoch {} applied {}",
                s.mode.name(),
                s.leader_sid,
                s.epoch,
                s.applied_journal_id
            ),
            None => format!("node {sid}: no answer"),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

impl Drop for ProcCluster {
    fn drop(&mut self) {
        for n in self.nodes.values_mut() {
            n.kill_and_reap();
        }
        self.monitor = None;
        let keep =
            self.failed || std::thread::panicking() || std::env::var_os("FE_META_KEEP").is_some();
        if keep {
            self.report_failure();
            if let Some(root) = self.root.take() {
                let _: PathBuf = root.keep();
            }
        }
    }
}

/// The process-wide slot: one cluster at a time (module INV-1).
#[derive(Debug)]
struct Slot;

static BUSY: Mutex<bool> = Mutex::new(false);
static FREED: Condvar = Condvar::new();

impl Slot {
    fn acquire() -> Slot {
        let mut busy = BUSY.lock().unwrap_or_else(|e| e.into_inner());
        while *busy {
            busy = FREED.wait(busy).unwrap_or_else(|e| e.into_inner());
        }
        *busy = true;
        Slot
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        *BUSY.lock().unwrap_or_else(|e| e.into_inner()) = false;
        FREED.notify_one();
    }
}
