//! The servers W6 starts while the cluster runs: each joins with `--helper`, on a fresh data
//! dir (only `myid`) and a zoo.cfg that lists only itself, as an operator starts a new node
//! (README: growing, shrinking and replacing).
//!
//! Server `sid` keeps the port scheme of the bench cluster (`cluster`, `local_cluster::layout`):
//! client `B+sid-1`, quorum `B+100+sid-1`, election `B+200+sid-1`, so a re-added original
//! server listens where it did before.
//!
//! INV-1: every joiner runs in its own process group and gets SIGTERM from the kernel if the
//! thread that spawned it dies; [`Joiners::stop_all`] (and the drop on an early return) stops
//! and reaps every one still running. Only our own children are signalled, by pid.
//! INV-2: each start gets a new folder (`DIR/<sid>-<n>`), so a re-added server never sees the
//! data of its earlier membership.
//! INV-3: every wait is bounded by its caller's `within`.

use std::fs;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::Failure;

/// The ports of server `sid` in a bench cluster whose node 1 has client port `base`.
#[derive(Clone, Copy, Debug)]
pub struct Ports {
    /// Client port.
    pub client: u16,
    /// Quorum port.
    pub quorum: u16,
    /// Election port.
    pub election: u16,
}

impl Ports {
    /// Server `sid`'s ports (`None` if they do not fit below 65536).
    pub fn of(base: u16, sid: u64) -> Option<Ports> {
        let i = u16::try_from(sid.checked_sub(1)?).ok()?;
        Some(Ports {
            client: base.checked_add(i)?,
            quorum: base.checked_add(100)?.checked_add(i)?,
            election: base.checked_add(200)?.checked_add(i)?,
        })
    }

    /// The zoo.cfg `server.N` value: `127.0.0.1:Q:E;127.0.0.1:C`.
    pub fn server_value(&self) -> String {
        format!(
            "127.0.0.1:{}:{};127.0.0.1:{}",
            self.quorum, self.election, self.client
        )
    }

    /// `127.0.0.1:C`.
    pub fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.client)
    }
}

struct Joiner {
    sid: u64,
    child: Child,
    dir: PathBuf,
}

/// The joiners started by W6.
pub struct Joiners {
    exe: PathBuf,
    dir: PathBuf,
    base: u16,
    started: u64,
    running: Vec<Joiner>,
}

fn io(what: &str, path: &Path, e: std::io::Error) -> Failure {
    Failure::other(format!("cannot {what} {}: {e}", path.display()))
}

impl Joiners {
    /// Joiners of the cluster whose node 1 has client port `base`, their folders under `dir`.
    pub fn new(exe: PathBuf, dir: PathBuf, base: u16) -> Joiners {
        Joiners {
            exe,
            dir,
            base,
            started: 0,
            running: Vec::new(),
        }
    }

    /// Server `sid`'s ports.
    pub fn ports(&self, sid: u64) -> Result<Ports, Failure> {
        Ports::of(self.base, sid)
            .ok_or_else(|| Failure::other(format!("server {sid}: its ports do not fit")))
    }

    /// Whether this set runs server `sid`.
    pub fn runs(&self, sid: u64) -> bool {
        self.running.iter().any(|j| j.sid == sid)
    }

    /// Starts server `sid` on a fresh data dir with `--helper helper` (INV-2).
    pub fn start(&mut self, sid: u64, helper: &str) -> Result<(), Failure> {
        if self.runs(sid) {
            return Err(Failure::other(format!("server {sid} already runs")));
        }
        let ports = self.ports(sid)?;
        self.started += 1;
        let dir = self.dir.join(format!("{sid}-{}", self.started));
        let data = dir.join("data");
        fs::create_dir_all(&data).map_err(|e| io("create", &data, e))?;
        let myid = data.join("myid");
        fs::write(&myid, format!("{sid}\n")).map_err(|e| io("write", &myid, e))?;
        let cfg = dir.join("zoo.cfg");
        let text = format!(
            "dataDir={}\nclientPort={}\nforceSync=yes\nserver.{sid}={}\n",
            data.display(),
            ports.client,
            ports.server_value()
        );
        fs::write(&cfg, text).map_err(|e| io("write", &cfg, e))?;
        let log_path = dir.join("fe-meta.log");
        let log = fs::File::create(&log_path).map_err(|e| io("create", &log_path, e))?;
        let err = log.try_clone().map_err(|e| io("open", &log_path, e))?;
        let mut cmd = Command::new(&self.exe);
        cmd.arg("server")
            .arg("--config")
            .arg(&cfg)
            .arg("--helper")
            .arg(helper)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .process_group(0);
        // SAFETY: the closure runs in the forked child before exec and only makes the
        // async-signal-safe prctl(2) call; it touches no memory shared with the parent.
        unsafe {
            cmd.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(Signal::SIGTERM).map_err(std::io::Error::from)
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| Failure::other(format!("cannot start {}: {e}", self.exe.display())))?;
        self.running.push(Joiner { sid, child, dir });
        Ok(())
    }

    /// Waits (at most `within`) until server `sid` exits by itself and reaps it: its exit
    /// status, or `None` if it still runs (then it is left running).
    pub async fn wait_exit(&mut self, sid: u64, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            let i = self.running.iter().position(|j| j.sid == sid)?;
            if let Ok(Some(status)) = self.running[i].child.try_wait() {
                self.running.remove(i);
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Sends `sig` to server `sid` and waits until it has exited (SIGKILL after 30 s).
    pub async fn stop(&mut self, sid: u64, sig: Signal) -> Result<(), Failure> {
        let j = self
            .running
            .iter()
            .find(|j| j.sid == sid)
            .ok_or_else(|| Failure::other(format!("server {sid} is not running")))?;
        if let Ok(pid) = i32::try_from(j.child.id()) {
            let _ = kill(Pid::from_raw(pid), sig);
        }
        if self.wait_exit(sid, Duration::from_secs(30)).await.is_none() {
            if let Some(i) = self.running.iter().position(|j| j.sid == sid) {
                let mut j = self.running.remove(i);
                let _ = j.child.kill();
                let _ = j.child.wait();
            }
        }
        Ok(())
    }

    /// The folder of server `sid`'s current run (for its log).
    pub fn dir_of(&self, sid: u64) -> Option<&Path> {
        self.running
            .iter()
            .find(|j| j.sid == sid)
            .map(|j| j.dir.as_path())
    }

    /// SIGTERM to every joiner, up to 10 s, then SIGKILL; all reaped on return (INV-1).
    pub async fn stop_all(&mut self) {
        let sids: Vec<u64> = self.running.iter().map(|j| j.sid).collect();
        for sid in sids {
            let _ = self.stop(sid, Signal::SIGTERM).await;
        }
    }
}

impl Drop for Joiners {
    fn drop(&mut self) {
        for j in &mut self.running {
            let _ = j.child.kill();
            let _ = j.child.wait();
        }
    }
}

/// `6`, `signal 9`, ... for a RESULT field.
pub fn exit_text(status: Option<ExitStatus>) -> String {
    match status {
        None => "running".to_owned(),
        Some(s) => match (s.code(), s.signal()) {
            (Some(c), _) => c.to_string(),
            (None, Some(sig)) => format!("signal{sig}"),
            _ => "unknown".to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_follow_the_bench_layout() {
        let p = Ports::of(19030, 4).unwrap();
        assert_eq!((p.client, p.quorum, p.election), (19033, 19133, 19233));
        assert_eq!(p.server_value(), "127.0.0.1:19133:19233;127.0.0.1:19033");
        assert!(Ports::of(65500, 9).is_none());
        assert!(Ports::of(19030, 0).is_none());
    }
}
