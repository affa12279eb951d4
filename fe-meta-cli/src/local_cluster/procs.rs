//! The local cluster's child processes: start, reap, stop.
//!
//! INV-1: [`Children::stop`] returns only after every child has been waited for (SIGTERM, a
//! bounded wait, then SIGKILL). Only our own children are signalled, by their pid.
//! INV-2: each child runs in its own process group and gets SIGTERM from the kernel if the
//! thread that spawned it (the supervisor's main thread) dies.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek, SeekFrom, Write as _};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::layout::Layout;
use super::Failure;

struct Proc {
    sid: u64,
    pid: u32,
    log: PathBuf,
    child: Option<Child>,
}

/// A child that exited.
pub(super) struct Dead {
    sid: u64,
    pid: u32,
    status: ExitStatus,
    log: PathBuf,
}

impl fmt::Display for Dead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node {} (pid {}) exited", self.sid, self.pid)?;
        match (self.status.code(), self.status.signal()) {
            (Some(code), _) => write!(f, " with code {code}"),
            (None, Some(sig)) => write!(f, " on signal {sig}"),
            _ => Ok(()),
        }
    }
}

/// The running children.
pub(crate) struct Children {
    procs: Vec<Proc>,
}

fn open_log(path: &Path) -> Result<File, Failure> {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| Failure::other(format!("cannot open log {}: {e}", path.display())))?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let _ = writeln!(
        f,
        "=== fe-meta local-cluster starts this node (unix time {now}) ==="
    );
    Ok(f)
}

fn spawn(exe: &Path, config: &Path, log: &Path, bootstrap: bool) -> Result<Child, Failure> {
    let out = open_log(log)?;
    let err = out
        .try_clone()
        .map_err(|e| Failure::other(format!("cannot open log {}: {e}", log.display())))?;
    let mut cmd = Command::new(exe);
    cmd.arg("server").arg("--config").arg(config);
    if bootstrap {
        cmd.arg("--bootstrap");
    }
    cmd.stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0);
    // SAFETY: the closure runs in the forked child before exec and only makes the
    // async-signal-safe prctl(2) call; it touches no memory shared with the parent.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(Signal::SIGTERM).map_err(std::io::Error::from)
        });
    }
    cmd.spawn()
        .map_err(|e| Failure::other(format!("cannot start {}: {e}", exe.display())))
}

impl Children {
    /// Starts one `server` child per node of `layout`; on failure stops those started. A
    /// folder made by this run starts its nodes with `--bootstrap` (a new cluster); a reused
    /// one without it, so a node whose data dir was emptied resyncs before it votes.
    pub(crate) fn start(exe: &Path, layout: &Layout) -> Result<Children, Failure> {
        let mut children = Children { procs: Vec::new() };
        for node in &layout.nodes {
            match spawn(exe, &node.config, &node.log, layout.created) {
                Ok(child) => children.procs.push(Proc {
                    sid: node.sid,
                    pid: child.id(),
                    log: node.log.clone(),
                    child: Some(child),
                }),
                Err(e) => {
                    children.kill_all();
                    return Err(e);
                }
            }
        }
        Ok(children)
    }

    /// How many children are still running.
    pub(super) fn running(&self) -> usize {
        self.procs.iter().filter(|p| p.child.is_some()).count()
    }

    /// The children that exited since the last call.
    pub(super) fn reap(&mut self) -> Vec<Dead> {
        let mut dead = Vec::new();
        for p in &mut self.procs {
            let Some(child) = p.child.as_mut() else {
                continue;
            };
            if let Ok(Some(status)) = child.try_wait() {
                p.child = None;
                dead.push(Dead {
                    sid: p.sid,
                    pid: p.pid,
                    status,
                    log: p.log.clone(),
                });
            }
        }
        dead
    }

    /// The last `lines` lines of a dead child's log (at most its last 16 KiB), indented.
    pub(super) fn log_tail(&self, dead: &Dead, lines: usize) -> String {
        let mut text = String::new();
        if let Ok(mut f) = File::open(&dead.log) {
            let len = f.metadata().map_or(0, |m| m.len());
            let _ = f.seek(SeekFrom::Start(len.saturating_sub(16 * 1024)));
            let mut buf = Vec::new();
            let _ = f.read_to_end(&mut buf);
            text = String::from_utf8_lossy(&buf).into_owned();
        }
        let all: Vec<&str> = text.lines().collect();
        let tail = &all[all.len().saturating_sub(lines)..];
        let mut out: String = tail.iter().map(|l| format!("    {l}\n")).collect();
        out.push_str(&format!("    (log: {})", dead.log.display()));
        out
    }

    /// The pid of node `sid`'s running child, if it runs.
    pub(crate) fn pid(&self, sid: u64) -> Option<u32> {
        self.procs
            .iter()
            .find(|p| p.sid == sid && p.child.is_some())
            .map(|p| p.pid)
    }

    /// The pids of every running child.
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.procs
            .iter()
            .filter(|p| p.child.is_some())
            .map(|p| p.pid)
            .collect()
    }

    /// Sends `sig` to node `sid`'s child and waits (at most `timeout`, then SIGKILL) until it
    /// has exited and been reaped. `false` if it was not running.
    pub(crate) async fn stop_one(&mut self, sid: u64, sig: Signal, timeout: Duration) -> bool {
        let Some(p) = self.procs.iter_mut().find(|p| p.sid == sid) else {
            return false;
        };
        let Some(child) = p.child.as_mut() else {
            return false;
        };
        if let Ok(pid) = i32::try_from(p.pid) {
            let _ = kill(Pid::from_raw(pid), sig);
        }
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        p.child = None;
        true
    }

    /// Starts node `sid` of `layout` again (after [`Children::stop_one`]); its new pid.
    pub(crate) fn restart(
        &mut self,
        exe: &Path,
        layout: &Layout,
        sid: u64,
    ) -> Result<u32, Failure> {
        let node = layout
            .nodes
            .iter()
            .find(|n| n.sid == sid)
            .ok_or_else(|| Failure::other(format!("no node {sid}")))?;
        let p = self
            .procs
            .iter_mut()
            .find(|p| p.sid == sid)
            .ok_or_else(|| Failure::other(format!("node {sid} was never started")))?;
        if p.child.is_some() {
            return Err(Failure::other(format!("node {sid} is still running")));
        }
        let child = spawn(exe, &node.config, &node.log, false)?;
        p.pid = child.id();
        p.child = Some(child);
        Ok(p.pid)
    }

    fn signal_all(&self, sig: Signal) {
        for p in self.procs.iter().filter(|p| p.child.is_some()) {
            if let Ok(pid) = i32::try_from(p.pid) {
                let _ = kill(Pid::from_raw(pid), sig);
            }
        }
    }

    fn kill_all(&mut self) {
        self.signal_all(Signal::SIGKILL);
        for p in &mut self.procs {
            if let Some(mut c) = p.child.take() {
                let _ = c.wait();
            }
        }
    }

    /// SIGTERM to every running child, up to `timeout` for them to exit, then SIGKILL; every
    /// child has been waited for on return. Reports each exit on stderr.
    pub(crate) async fn stop(&mut self, timeout: Duration) {
        self.signal_all(Signal::SIGTERM);
        let deadline = Instant::now() + timeout;
        while self.running() > 0 && Instant::now() < deadline {
            for dead in self.reap() {
                eprintln!("fe-meta local-cluster: {dead}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        for dead in self.reap() {
            eprintln!("fe-meta local-cluster: {dead}");
        }
        if self.running() > 0 {
            eprintln!(
                "fe-meta local-cluster: {} node(s) still running after {timeout:?}: SIGKILL",
                self.running()
            );
            self.kill_all();
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        // Only reached with children still running on an early return path.
        self.kill_all();
    }
}
