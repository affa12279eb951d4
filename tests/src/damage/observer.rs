//! An observer (`server.N=host:quorumPort:electionPort:observer;host:clientPort`): a
//! non-voting `fe-meta server` the test starts and kills itself, next to a
//! [`crate::proc::ProcCluster`] of voters.
//!
//! Use: take a port block with [`crate::proc::ports::free_block`], put [`Observer::line`] in
//! the cluster spec's `extra` lines (so every voter knows the observer), start the cluster,
//! then [`Observer::create`] from a voter's zoo.cfg and [`Observer::start`].
//!
//! INV: the observer's process is a child of the test; it is only signalled by its own pid and
//! is killed and reaped on drop.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Child;

use super::DamageError;
use crate::proc::node::spawn_server;

/// A non-voting node run by the test.
#[derive(Debug)]
pub struct Observer {
    sid: u64,
    client_port: u16,
    dir: PathBuf,
    bin: PathBuf,
    child: Option<Child>,
}

impl Observer {
    /// The `server.<sid>` line naming the observer at `base` (client), `base+1` (quorum),
    /// `base+2` (election).
    pub fn line(sid: u64, base: u16) -> String {
        format!(
            "server.{sid}=127.0.0.1:{}:{}:observer;127.0.0.1:{base}",
            base + 1,
            base + 2
        )
    }

    /// Prepares the observer under `root/observer<sid>`: its zoo.cfg is `voter_cfg` with its
    /// own `dataDir` and `clientPort` (`base`), and its `myid`.
    pub fn create(
        root: &Path,
        voter_cfg: &Path,
        bin: &Path,
        sid: u64,
        base: u16,
    ) -> Result<Observer, DamageError> {
        let dir = root.join(format!("observer{sid}"));
        let data = dir.join("data");
        std::fs::create_dir_all(&data)
            .map_err(DamageError::io(format!("mkdir {}", data.display())))?;
        let template = std::fs::read_to_string(voter_cfg)
            .map_err(DamageError::io(format!("read {}", voter_cfg.display())))?;
        let cfg: String = template
            .lines()
            .map(|l| {
                if l.starts_with("dataDir=") {
                    format!("dataDir={}\n", data.display())
                } else if l.starts_with("clientPort=") {
                    format!("clientPort={base}\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        std::fs::write(dir.join("zoo.cfg"), cfg)
            .map_err(DamageError::io("write observer zoo.cfg"))?;
        std::fs::write(data.join("myid"), format!("{sid}\n"))
            .map_err(DamageError::io("write myid"))?;
        Ok(Observer {
            sid,
            client_port: base,
            dir,
            bin: bin.to_owned(),
            child: None,
        })
    }

    /// Its sid.
    pub fn sid(&self) -> u64 {
        self.sid
    }

    /// `127.0.0.1:<client port>`.
    pub fn client_addr(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    /// Its log file (stdout and stderr of every start, appended).
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("observer.log")
    }

    /// Starts the process (its data dir is kept across starts).
    pub fn start(&mut self) -> Result<(), DamageError> {
        self.kill9();
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .map_err(DamageError::io("open observer log"))?;
        let _ = writeln!(log, "=== test: start of observer {}", self.sid);
        let child = spawn_server(&self.bin, &self.dir.join("zoo.cfg"), &[], log)
            .map_err(DamageError::io(format!("spawn {}", self.bin.display())))?;
        self.child = Some(child);
        Ok(())
    }

    /// SIGKILL (to its own pid) and reap; nothing if it is not running.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.kill9();
    }
}
