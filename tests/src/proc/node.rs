//! One `fe-meta server` process: its ports and files, and the faults a test applies to it.
//!
//! The node's files: `<root>/node<sid>.cfg` (its zoo.cfg), `<root>/data<sid>/` (dataDir: myid,
//! VERSION, ROLE, `log.*` segments, `snapshot.*`; elsewhere if the cluster's spec says so) and `<root>/node<sid>.log` (stdout and
//! stderr of every incarnation, appended, each start headed by a `=== harness:` line).
//!
//! INV-1: signals go only to the pid of this node's own child, and only while it has not been
//! reaped. INV-2: dropping a node kills and reaps its process (SIGCONT first if stopped).

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::spec::NodeNet;
use super::ProcError;

/// A node's three loopback ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodePorts {
    /// The client port (protocol and four-letter words).
    pub client: u16,
    /// The quorum (peer) port.
    pub quorum: u16,
    /// The election port.
    pub election: u16,
}

/// The sync-mode counters a node reports in `mntr` (`fe_meta_sync_{sent,received}_*`), since
/// its process started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncCounts {
    /// DIFF headers (a DIFF after a TRUNC counts too).
    pub diff: u64,
    /// TRUNC headers.
    pub trunc: u64,
    /// SNAP headers.
    pub snap: u64,
}

/// One server process (running or not) and its files.
#[derive(Debug)]
pub struct ProcNode {
    sid: u64,
    ports: NodePorts,
    net: NodeNet,
    root: PathBuf,
    data_dir: PathBuf,
    bin: PathBuf,
    child: Option<Child>,
    paused: bool,
    starts: u32,
    env: Vec<(String, String)>,
}

impl ProcNode {
    /// Node `sid` with its files in `root`; its dataDir is `data_dir`, or `<root>/data<sid>`.
    pub(crate) fn new(
        sid: u64,
        ports: NodePorts,
        net: NodeNet,
        root: &Path,
        data_dir: Option<&Path>,
        bin: &Path,
    ) -> ProcNode {
        ProcNode {
            sid,
            ports,
            net,
            root: root.to_path_buf(),
            data_dir: data_dir.map_or_else(|| root.join(format!("data{sid}")), Path::to_path_buf),
            bin: bin.to_path_buf(),
            child: None,
            paused: false,
            starts: 0,
            env: Vec::new(),
        }
    }

    /// The server id.
    pub fn sid(&self) -> u64 {
        self.sid
    }

    /// Its ports.
    pub fn ports(&self) -> NodePorts {
        self.ports
    }

    /// The host it listens on.
    pub fn host(&self) -> &str {
        &self.net.host
    }

    /// `<host>:<client port>`.
    pub fn client_addr(&self) -> String {
        format!("{}:{}", self.net.host, self.ports.client)
    }

    /// Its dataDir.
    pub fn data_dir(&self) -> PathBuf {
        self.data_dir.clone()
    }

    /// Its zoo.cfg.
    pub fn config_path(&self) -> PathBuf {
        self.root.join(format!("node{}.cfg", self.sid))
    }

    /// The file its stdout and stderr go to.
    pub fn log_path(&self) -> PathBuf {
        self.root.join(format!("node{}.log", self.sid))
    }

    /// Its txn log segments (`log.<zxid>`), sorted by name (= first zxid).
    pub fn txn_log_files(&self) -> Vec<PathBuf> {
        self.files_with_prefix("log.")
    }

    /// Its snapshots (`snapshot.<zxid>`), sorted by name (= zxid).
    pub fn snapshot_files(&self) -> Vec<PathBuf> {
        self.files_with_prefix("snapshot.")
    }

    fn files_with_prefix(&self, prefix: &str) -> Vec<PathBuf> {
        files_with_prefix(&self.data_dir(), prefix)
    }

    /// Whether its process runs (or is stopped by SIGSTOP) and has not exited.
    pub fn is_running(&mut self) -> bool {
        match &mut self.child {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Whether it is stopped by [`ProcNode::pause`].
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Sets the extra environment variables of its next starts (e.g. an `LD_PRELOAD`).
    pub fn set_env(&mut self, env: Vec<(String, String)>) {
        self.env = env;
    }

    /// How many times it was started.
    pub fn starts(&self) -> u32 {
        self.starts
    }

    /// The pid of the running process.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Writes `myid` (again, after a wipe) and starts the process; `bootstrap` adds
    /// `--bootstrap`.
    pub(crate) fn spawn(&mut self, bootstrap: bool) -> Result<(), ProcError> {
        let extra: &[&str] = if bootstrap { &["--bootstrap"] } else { &[] };
        self.spawn_with(extra)
    }

    /// Writes `myid` and starts the process with `extra` arguments after `server --config`.
    pub(crate) fn spawn_with(&mut self, extra: &[&str]) -> Result<(), ProcError> {
        if self.is_running() {
            return Err(ProcError::Running(self.sid));
        }
        self.reap();
        let dir = self.data_dir();
        std::fs::create_dir_all(&dir).map_err(ProcError::io(format!("mkdir {}", dir.display())))?;
        std::fs::write(dir.join("myid"), format!("{}\n", self.sid))
            .map_err(ProcError::io("write myid"))?;
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .map_err(ProcError::io(format!("open {}", self.log_path().display())))?;
        let _ = writeln!(
            log,
            "=== harness: start #{} of node {} (arguments: {extra:?})",
            self.starts + 1,
            self.sid
        );
        let netns = self.net.netns.as_deref();
        let (bin, cfg) = (&self.bin, self.config_path());
        let child = spawn_server_with(netns, &self.env, bin, &cfg, extra, log)
            .map_err(ProcError::io(format!("spawn {}", self.bin.display())))?;
        self.child = Some(child);
        self.paused = false;
        self.starts += 1;
        Ok(())
    }

    fn signal(&mut self, sig: Signal) -> Result<(), ProcError> {
        if !self.is_running() {
            return Err(ProcError::NotRunning(self.sid));
        }
        let pid = self.pid().ok_or(ProcError::NotRunning(self.sid))? as i32;
        kill(Pid::from_raw(pid), sig).map_err(|errno| ProcError::Signal {
            sid: self.sid,
            pid,
            signal: sig.as_str(),
            errno,
        })
    }

    /// SIGKILL, then reaps the process.
    pub fn kill9(&mut self) -> Result<(), ProcError> {
        self.signal(Signal::SIGKILL)?;
        self.reap();
        Ok(())
    }

    /// SIGSTOP, and waits (up to 2 s) until every thread of the process is stopped: the signal
    /// is delivered asynchronously, and a test that then sends messages to the frozen node
    /// relies on it not reading them. Its sockets stay open.
    pub fn pause(&mut self) -> Result<(), ProcError> {
        self.signal(Signal::SIGSTOP)?;
        self.paused = true;
        let pid = self.pid().ok_or(ProcError::NotRunning(self.sid))?;
        let within = Duration::from_secs(2);
        let start = Instant::now();
        while !all_threads_stopped(pid) {
            if start.elapsed() > within {
                return Err(ProcError::Timeout {
                    what: format!("every thread of node {} (pid {pid}) stopped", self.sid),
                    within,
                    detail: String::new(),
                });
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(())
    }

    /// SIGCONT after [`ProcNode::pause`].
    pub fn resume(&mut self) -> Result<(), ProcError> {
        self.signal(Signal::SIGCONT)?;
        self.paused = false;
        Ok(())
    }

    /// SIGTERM (a clean stop) and waits up to `within` for the exit; returns its exit code.
    pub fn terminate(&mut self, within: Duration) -> Result<Option<i32>, ProcError> {
        if self.paused {
            self.resume()?;
        }
        self.signal(Signal::SIGTERM)?;
        let start = Instant::now();
        while start.elapsed() < within {
            if let Some(c) = &mut self.child {
                if let Ok(Some(status)) = c.try_wait() {
                    self.child = None;
                    return Ok(status.code());
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(ProcError::Timeout {
            what: format!("node {} exiting after SIGTERM", self.sid),
            within,
            detail: String::new(),
        })
    }

    /// Waits up to `within` for the process to exit by itself (no signal sent) and reaps it;
    /// returns its exit code (`None`: ended by a signal).
    pub async fn wait_exit(&mut self, within: Duration) -> Result<Option<i32>, ProcError> {
        let start = Instant::now();
        while start.elapsed() < within {
            match &mut self.child {
                None => return Err(ProcError::NotRunning(self.sid)),
                Some(c) => {
                    if let Ok(Some(status)) = c.try_wait() {
                        self.child = None;
                        self.paused = false;
                        return Ok(status.code());
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(ProcError::Timeout {
            what: format!("node {} exiting by itself", self.sid),
            within,
            detail: String::new(),
        })
    }

    /// Deletes everything in the data dir (the node must not run); the next start writes
    /// `myid` again, as an operator would.
    pub fn wipe(&mut self) -> Result<(), ProcError> {
        if self.is_running() {
            return Err(ProcError::Running(self.sid));
        }
        let dir = self.data_dir();
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(ProcError::io(format!("wipe {}", dir.display())))?;
        }
        Ok(())
    }

    /// The last `lines` lines of its log file.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Kills (SIGCONT first if paused, then SIGKILL) and reaps a process still running.
    pub(crate) fn kill_and_reap(&mut self) {
        if self.is_running() {
            if self.paused {
                let _ = self.signal(Signal::SIGCONT);
            }
            let _ = self.signal(Signal::SIGKILL);
        }
        self.reap();
    }

    fn reap(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
        self.paused = false;
    }
}

/// Whether every thread of `pid` is in the stopped state (`T` in `/proc/<pid>/task/*/stat`).
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|t| {
        std::fs::read_to_string(t.path().join("stat")).is_ok_and(|stat| {
            // `pid (comm) S ...`: the state follows the last ')'.
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
        })
    })
}

impl Drop for ProcNode {
    fn drop(&mut self) {
        self.kill_and_reap();
    }
}

/// Files in `dir` whose names start with `prefix` (no `.tmp`), sorted by name.
pub fn files_with_prefix(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix) && !n.ends_with(".tmp"))
        })
        .collect();
    v.sort();
    v
}

/// Starts `bin server --config <config> <extra>` with stdout and stderr appended to `log`,
/// `RUST_LOG` from `FE_META_LOG` (default `info`) and backtraces on.
pub fn spawn_server(
    bin: &Path,
    config: &Path,
    extra: &[&str],
    log: std::fs::File,
) -> std::io::Result<Child> {
    spawn_server_in(None, bin, config, extra, log)
}

/// As [`spawn_server`], inside the network namespace `netns` when given (`ip netns exec`,
/// which execs the server: the child's pid is the server's).
pub fn spawn_server_in(
    netns: Option<&str>,
    bin: &Path,
    config: &Path,
    extra: &[&str],
    log: std::fs::File,
) -> std::io::Result<Child> {
    spawn_server_with(netns, &[], bin, config, extra, log)
}

/// As [`spawn_server_in`], with `env` added to the server's environment (through `ip netns
/// exec` too, which keeps the environment).
pub fn spawn_server_with(
    netns: Option<&str>,
    env: &[(String, String)],
    bin: &Path,
    config: &Path,
    extra: &[&str],
    log: std::fs::File,
) -> std::io::Result<Child> {
    let err = log.try_clone()?;
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(bin);
            c
        }
        None => Command::new(bin),
    };
    cmd.arg("server")
        .arg("--config")
        .arg(config)
        .args(extra)
        .env(
            "RUST_LOG",
            std::env::var("FE_META_LOG").unwrap_or_else(|_| "info".into()),
        )
        .env("RUST_BACKTRACE", "1")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .spawn()
}
