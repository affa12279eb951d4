//! The cluster under test: three `fe-meta server` children launched in a fresh folder
//! (through `local_cluster`'s layout and process supervisor), or a running cluster attached
//! by its client endpoints.
//!
//! INV-0: a launch refuses ports already in use, so every STATUS answer comes from our nodes.
//! INV-1: a launched cluster's children are all stopped and reaped before [`Cluster::shutdown`]
//! returns (and by `Children`'s drop on any early return); its folder is removed unless kept.
//! INV-2: an attached cluster is never signalled: fault workloads (W4, W5) need a launched one.
//! INV-3: server pids are known for a launched cluster; for an attached one they come from
//! `--server-pids` or from the listening sockets in `/proc` (our own processes only), else
//! they are unknown and CPU figures say n/a.

use std::collections::HashSet;
use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::super::local_cluster::layout::{self, Layout};
use super::super::local_cluster::procs::Children;
use super::super::local_cluster::{elected, in_leader_epoch, poll_endpoints, wait_for_leader};
use super::super::Failure;
use fe_meta::protocol::{Mode, StatusInfo};

/// A launched cluster: its folder and children.
struct Launched {
    layout: Layout,
    children: Children,
    exe: PathBuf,
    keep: bool,
}

/// How a cluster is launched.
pub struct LaunchOptions {
    /// How long to wait until every node follows one leader.
    pub wait: Duration,
    /// Keep the folder after the run.
    pub keep: bool,
    /// TLS on every port.
    pub tls: bool,
    /// `server_threads` for every node (`None`: the server's default).
    pub server_threads: Option<u16>,
}

/// The cluster under test.
pub struct Cluster {
    /// Client endpoints `host:port`, by position (node `i` has sid `sids[i]`).
    pub endpoints: Vec<String>,
    /// Each endpoint's server id.
    pub sids: Vec<u64>,
    launched: Option<Launched>,
    attached_pids: Option<Vec<u32>>,
    /// The clients' TLS when the cluster was launched with `--tls`.
    pub tls: Option<fe_meta::client::ClientTls>,
}

impl Cluster {
    /// Makes a fresh 3-node cluster in a new folder under `parent` with client ports from
    /// `base_port`, starts it and waits (at most `wait`) until every node follows one leader.
    /// With `tls`, every port is TLS (`super::tls::secure`).
    pub async fn launch(
        parent: PathBuf,
        base_port: u16,
        opts: LaunchOptions,
    ) -> Result<Cluster, Failure> {
        let LaunchOptions {
            wait,
            keep,
            tls,
            server_threads,
        } = opts;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let busy: Vec<u16> = (0..3u16)
            .flat_map(|i| [0, 100, 200].map(|off| base_port.saturating_add(off + i)))
            .filter(|&p| std::net::TcpListener::bind(("127.0.0.1", p)).is_err())
            .collect();
        if !busy.is_empty() {
            // Another cluster there would answer our STATUS polls in place of ours.
            return Err(Failure::other(format!(
                "ports {busy:?} are in use (another cluster?); pick another --base-port"
            )));
        }
        let dir = parent.join(format!("fe-meta-bench-{}-{stamp}", std::process::id()));
        let layout = layout::open_or_create(&dir, 3, base_port)?;
        let tls = match tls {
            true => Some(super::tls::secure(&layout)?),
            false => None,
        };
        if let Some(n) = server_threads {
            layout::append_keys(&layout, &format!("server_threads={n}\n"))?;
        }
        let exe = std::env::current_exe()
            .map_err(|e| Failure::other(format!("cannot find this executable: {e}")))?;
        let mut children = Children::start(&exe, &layout)?;
        if let Err(e) = wait_for_leader(&layout, &mut children, wait).await {
            children.stop(Duration::from_secs(10)).await;
            return Err(e);
        }
        let endpoints = layout.nodes.iter().map(|n| n.endpoint()).collect();
        let sids = layout.nodes.iter().map(|n| n.sid).collect();
        Ok(Cluster {
            endpoints,
            sids,
            launched: Some(Launched {
                layout,
                children,
                exe,
                keep,
            }),
            attached_pids: None,
            tls,
        })
    }

    /// Attaches to running nodes at `endpoints`; `pids` as given, else discovered by their
    /// listening ports (else unknown).
    pub async fn attach(
        endpoints: Vec<String>,
        pids: Option<Vec<u32>>,
    ) -> Result<Cluster, Failure> {
        let statuses = poll_endpoints(&endpoints).await;
        let mut sids = Vec::with_capacity(endpoints.len());
        for (e, s) in endpoints.iter().zip(&statuses) {
            let s = s
                .as_ref()
                .ok_or_else(|| Failure::other(format!("{e} does not answer STATUS")))?;
            sids.push(s.sid);
        }
        let pids = pids.or_else(|| discover_pids(&endpoints));
        Ok(Cluster {
            endpoints,
            sids,
            launched: None,
            attached_pids: pids,
            tls: None,
        })
    }

    /// Whether this run launched the cluster (fault workloads need that).
    pub fn launched(&self) -> bool {
        self.launched.is_some()
    }

    /// The folder of a launched cluster.
    pub fn dir(&self) -> Option<&std::path::Path> {
        self.launched.as_ref().map(|l| l.layout.dir.as_path())
    }

    /// The server pids, if known.
    pub fn server_pids(&self) -> Option<Vec<u32>> {
        match &self.launched {
            Some(l) => Some(l.children.pids()),
            None => self.attached_pids.clone(),
        }
    }

    /// The pid of node `sid` (a launched cluster's child).
    pub fn pid(&self, sid: u64) -> Option<u32> {
        self.launched.as_ref().and_then(|l| l.children.pid(sid))
    }

    /// The data folder of a launched cluster's node `sid`.
    pub fn data_dir(&self, sid: u64) -> Option<PathBuf> {
        let l = self.launched.as_ref()?;
        l.layout
            .nodes
            .iter()
            .find(|n| n.sid == sid)
            .map(|n| n.dir.join("data"))
    }

    /// The endpoint of node `sid`.
    pub fn endpoint(&self, sid: u64) -> Option<&str> {
        self.sids
            .iter()
            .position(|&s| s == sid)
            .map(|i| self.endpoints[i].as_str())
    }

    /// Every node's STATUS (`None`: did not answer).
    pub async fn statuses(&self) -> Vec<Option<StatusInfo>> {
        poll_endpoints(&self.endpoints).await
    }

    /// Waits (at most `wait`) until every node follows one leader in its epoch and has applied
    /// an entry of that epoch, i.e. a restarted node is past its sync and serving, not merely
    /// FOLLOWING (like the anchors' ZkBench, which waits for every server to be back in the
    /// Once healthy (within `wait`): the leader, and the follower a catch-up phase stops (the
    /// highest other sid), with their client endpoints.
    pub async fn leader_and_follower(
        &self,
        wait: Duration,
    ) -> Result<((u64, String), (u64, String)), Failure> {
        let leader = self.wait_healthy(wait).await?;
        let follower = self
            .sids
            .iter()
            .copied()
            .rfind(|&s| s != leader)
            .ok_or_else(|| Failure::other("no follower"))?;
        let endpoint = |sid| self.endpoint(sid).unwrap_or_default().to_owned();
        Ok(((leader, endpoint(leader)), (follower, endpoint(follower))))
    }

    /// ensemble); the leader's sid.
    pub async fn wait_healthy(&self, wait: Duration) -> Result<u64, Failure> {
        let deadline = Instant::now() + wait;
        loop {
            let statuses = self.statuses().await;
            if elected(&statuses) && in_leader_epoch(&statuses) {
                if let Some(l) = statuses.iter().flatten().find(|s| s.mode == Mode::Leader) {
                    return Ok(l.sid);
                }
            }
            if Instant::now() >= deadline {
                return Err(Failure::other(format!(
                    "the cluster has no leader followed (and synced from) by every node after \
                     {wait:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn launched_mut(&mut self) -> Result<&mut Launched, Failure> {
        self.launched
            .as_mut()
            .ok_or_else(|| Failure::other("fault workloads need a cluster launched by the bench"))
    }

    /// Signals node `sid` (SIGKILL or SIGTERM) and waits until it has exited.
    pub async fn stop_node(&mut self, sid: u64, sig: Signal) -> Result<(), Failure> {
        let l = self.launched_mut()?;
        if l.children.stop_one(sid, sig, Duration::from_secs(30)).await {
            Ok(())
        } else {
            Err(Failure::other(format!("node {sid} was not running")))
        }
    }

    /// Starts node `sid` again.
    pub fn restart_node(&mut self, sid: u64) -> Result<(), Failure> {
        let l = self.launched_mut()?;
        l.children.restart(&l.exe, &l.layout, sid).map(|_| ())
    }

    /// Stops a launched cluster and removes its folder (unless kept); nothing for an attached
    /// one.
    pub async fn shutdown(mut self) {
        if let Some(mut l) = self.launched.take() {
            l.children.stop(Duration::from_secs(10)).await;
            if l.keep {
                super::progress(&format!(
                    "kept the cluster's folder {}",
                    l.layout.dir.display()
                ));
            } else {
                let _ = fs::remove_dir_all(&l.layout.dir);
            }
        }
    }
}

/// The pids of our processes listening on the endpoints' ports (IPv4 or IPv6), found through
/// `/proc/net/tcp{,6}` and `/proc/*/fd`; `None` unless every endpoint's owner is found.
pub fn discover_pids(endpoints: &[String]) -> Option<Vec<u32>> {
    let ports: Vec<u16> = endpoints
        .iter()
        .filter_map(|e| e.rsplit_once(':').and_then(|(_, p)| p.parse().ok()))
        .collect();
    let mut pids = Vec::new();
    for port in ports {
        let inodes = listening_inodes(port);
        if inodes.is_empty() {
            return None;
        }
        pids.push(owner_of(&inodes)?);
    }
    Some(pids)
}

/// Socket inodes listening (state 0A) on `port`.
fn listening_inodes(port: u16) -> HashSet<u64> {
    let mut out = HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
                continue;
            };
            let p = local
                .rsplit_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            if p == Some(port) && *state == "0A" {
                if let Ok(i) = inode.parse() {
                    out.insert(i);
                }
            }
        }
    }
    out
}

/// The pid holding one of `inodes` open.
fn owner_of(inodes: &HashSet<u64>) -> Option<u32> {
    for entry in fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let Ok(target) = fs::read_link(fd.path()) else {
                continue;
            };
            let t = target.to_string_lossy();
            let inode = t
                .strip_prefix("socket:[")
                .and_then(|r| r.strip_suffix(']'))
                .and_then(|n| n.parse::<u64>().ok());
            if inode.is_some_and(|i| inodes.contains(&i)) {
                return Some(pid);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_of_this_process_is_found_by_its_port() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let found = discover_pids(&[format!("127.0.0.1:{port}")]);
        assert_eq!(found, Some(vec![std::process::id()]));
        drop(l);
        assert_eq!(discover_pids(&[format!("127.0.0.1:{port}")]), None);
    }
}
