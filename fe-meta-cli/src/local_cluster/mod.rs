//! `fe-meta local-cluster`: a cluster of `fe-meta server` child processes on loopback, data
//! under one folder ([`layout`]), supervised until Ctrl-C / SIGTERM.
//!
//! Run: make or reuse the folder → start one child per node (this executable, its own process
//! group so a terminal's Ctrl-C reaches only the supervisor, stdout/stderr appended to the
//! node's log) → poll STATUS until one leader is followed by every node → print the endpoints
//! (`127.0.0.1:PORT`, one a line; on stderr each beside its admin URL `http://127.0.0.1:PORT`)
//! and a status table → watch: report any child that exits →
//! on SIGINT/SIGTERM stop the children (SIGTERM, wait, SIGKILL after `--stop-timeout`).
//!
//! INV-1: every child started is waited for before `run` returns (no zombies, no leftovers);
//! children also get SIGTERM from the kernel if the supervisor dies (PR_SET_PDEATHSIG).
//! INV-2: every wait is bounded (`--wait-secs` for the leader, `--stop-timeout` to stop).

pub mod layout;
pub(crate) mod procs;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;

use super::render::{status_row, table, STATUS_HEADERS};
use super::server_cmd::shutdown_signal;
use super::{runtime, Failure};
use fe_meta::client::{Client, ClientOptions};
use fe_meta::protocol::{Mode, StatusInfo};
use layout::Layout;
use procs::Children;

/// Client port of node 1 in a default local cluster: clients on 9630.., quorum 9730..,
/// election 9830.., admin HTTP 9930.. (not 9030, the MySQL query port of Doris' and
/// StarRocks' frontends, which this service runs beside; README "Ports").
pub const DEFAULT_BASE_PORT: u16 = 9630;

/// The arguments of `local-cluster`.
#[derive(Clone, Debug, Args)]
pub struct LocalClusterArgs {
    /// The cluster's folder (configs, data, logs); a second run reuses it as is.
    #[arg(long, default_value = "./fe-meta-local")]
    pub dir: PathBuf,
    /// Number of nodes (first run only).
    #[arg(long, default_value_t = 3)]
    pub nodes: u16,
    /// Node 1's client port; node N uses BASE+N-1 (client), BASE+100+N-1 (quorum) and
    /// BASE+200+N-1 (election), BASE+300+N-1 (admin HTTP). First run only.
    #[arg(long, default_value_t = DEFAULT_BASE_PORT)]
    pub base_port: u16,
    /// Seconds to wait for a leader before giving up.
    #[arg(long, default_value_t = 60)]
    pub wait_secs: u64,
    /// Seconds a node gets to stop after SIGTERM before SIGKILL.
    #[arg(long, default_value_t = 10)]
    pub stop_timeout: u64,
}

/// Runs the local cluster until Ctrl-C / SIGTERM.
pub(super) fn run(args: &LocalClusterArgs) -> Result<(), Failure> {
    let layout = layout::open_or_create(&args.dir, args.nodes, args.base_port)?;
    let exe = std::env::current_exe()
        .map_err(|e| Failure::other(format!("cannot find this executable: {e}")))?;
    let rt = runtime()?;
    // Children are spawned from this (main) thread: PDEATHSIG follows the spawning thread.
    rt.block_on(supervise(args, &layout, exe))
}

async fn supervise(args: &LocalClusterArgs, layout: &Layout, exe: PathBuf) -> Result<(), Failure> {
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    let verb = if layout.created { "made" } else { "reusing" };
    eprintln!(
        "fe-meta local-cluster: {verb} {} ({} nodes, cluster id {:#x})",
        layout.dir.display(),
        layout.nodes.len(),
        layout.cluster_id
    );
    let mut children = Children::start(&exe, layout)?;
    let wait = Duration::from_secs(args.wait_secs);
    let stop = Duration::from_secs(args.stop_timeout);
    let started = tokio::select! {
        r = wait_for_leader(layout, &mut children, wait) => r,
        _ = &mut shutdown => Err(Failure::other("interrupted while starting")),
    };
    let statuses = match started {
        Ok(s) => s,
        Err(e) => {
            children.stop(stop).await;
            return Err(e);
        }
    };
    for node in &layout.nodes {
        println!("{}", node.endpoint());
        eprintln!(
            "fe-meta local-cluster: node {}: client {}  admin {}",
            node.sid,
            node.endpoint(),
            node.admin_url()
        );
    }
    print!("{}", status_table(layout, &statuses));
    eprintln!(
        "fe-meta local-cluster: running; logs in {}/nodeN/fe-meta.log; Ctrl-C stops it",
        layout.dir.display()
    );
    let watched = tokio::select! {
        r = watch(&mut children) => r,
        _ = &mut shutdown => Ok(()),
    };
    eprintln!("fe-meta local-cluster: stopping");
    children.stop(stop).await;
    eprintln!("fe-meta local-cluster: stopped");
    watched
}

/// The status table: one row per node (a node that did not answer shows `-`).
fn status_table(layout: &Layout, statuses: &[Option<StatusInfo>]) -> String {
    let rows: Vec<Vec<String>> = layout
        .nodes
        .iter()
        .zip(statuses)
        .map(|(node, s)| match s {
            Some(s) => status_row(&node.endpoint(), s),
            None => vec![
                node.sid.to_string(),
                node.endpoint(),
                "down".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ],
        })
        .collect();
    table(&STATUS_HEADERS, &rows)
}

/// Polls every node's STATUS until one is the leader and every node follows it; fails early
/// if a child exits, and after `wait`.
pub(crate) async fn wait_for_leader(
    layout: &Layout,
    children: &mut Children,
    wait: Duration,
) -> Result<Vec<Option<StatusInfo>>, Failure> {
    let deadline = Instant::now() + wait;
    let mut elected_at: Option<Instant> = None;
    loop {
        if let Some(dead) = children.reap().into_iter().next() {
            return Err(Failure::other(format!(
                "{dead} during start-up; the end of its log:\n{}",
                children.log_tail(&dead, 12)
            )));
        }
        let statuses = poll_statuses(layout).await;
        if elected(&statuses) {
            // Give the new leader a moment to commit its epoch's first entry (its TIMESTAMP),
            // so the table shows where the data is; not required.
            let since = *elected_at.get_or_insert_with(Instant::now);
            if in_leader_epoch(&statuses) || since.elapsed() > Duration::from_secs(3) {
                return Ok(statuses);
            }
        }
        if Instant::now() >= deadline {
            return Err(Failure::other(format!(
                "no leader within {wait:?}; the nodes say:\n{}",
                status_table(layout, &statuses)
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Each node's STATUS, `None` for a node that does not answer (quickly).
pub(super) async fn poll_statuses(layout: &Layout) -> Vec<Option<StatusInfo>> {
    let endpoints: Vec<String> = layout.nodes.iter().map(|n| n.endpoint()).collect();
    poll_endpoints(&endpoints).await
}

/// The TLS of this process's STATUS polls, set once by `bench --tls` (whose cluster has TLS
/// client ports); plain TCP otherwise.
static POLL_TLS: std::sync::OnceLock<fe_meta::client::ClientTls> = std::sync::OnceLock::new();

/// Makes every later STATUS poll of this process use `tls` (the first call wins).
pub(crate) fn set_poll_tls(tls: fe_meta::client::ClientTls) {
    let _ = POLL_TLS.set(tls);
}

/// Each endpoint's STATUS, `None` for a node that does not answer (quickly).
pub(crate) async fn poll_endpoints(endpoints: &[String]) -> Vec<Option<StatusInfo>> {
    let options = ClientOptions {
        connect_timeout: Duration::from_millis(500),
        request_timeout: Duration::from_secs(1),
        tls: POLL_TLS.get().cloned(),
        ..ClientOptions::DEFAULT
    };
    let mut out = Vec::with_capacity(endpoints.len());
    for endpoint in endpoints {
        let status = match Client::connect_with(endpoint, options.clone()).await {
            Ok(c) => c.status().await.ok(),
            Err(_) => None,
        };
        out.push(status);
    }
    out
}

/// Whether every node answered and all follow the one leader in its epoch.
pub(crate) fn elected(statuses: &[Option<StatusInfo>]) -> bool {
    let Some(all) = statuses.iter().cloned().collect::<Option<Vec<_>>>() else {
        return false;
    };
    let leaders: Vec<&StatusInfo> = all.iter().filter(|s| s.mode == Mode::Leader).collect();
    match leaders.as_slice() {
        // Everyone follows it in its epoch: discovery and sync are over.
        [leader] => all.iter().all(|s| {
            s.mode != Mode::Looking && s.leader_sid == Some(leader.sid) && s.epoch == leader.epoch
        }),
        _ => false,
    }
}

/// Whether every node has applied an entry of its current epoch (a learner applies nothing
/// of a leader's epoch before its UPTODATE, so this one is synced and serving).
pub(crate) fn in_leader_epoch(statuses: &[Option<StatusInfo>]) -> bool {
    statuses.iter().all(|s| {
        s.as_ref()
            .is_some_and(|s| u64::from(s.applied_journal_id.epoch().0) == s.epoch)
    })
}

/// Reports children that exit, until none is left (then an error).
async fn watch(children: &mut Children) -> Result<(), Failure> {
    loop {
        for dead in children.reap() {
            eprintln!(
                "fe-meta local-cluster: {dead}; the end of its log:\n{}",
                children.log_tail(&dead, 8)
            );
        }
        if children.running() == 0 {
            return Err(Failure::other("every node has exited"));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(sid: u64, mode: Mode, epoch: u64, applied_epoch: u32) -> Option<StatusInfo> {
        Some(StatusInfo {
            sid,
            mode,
            leader_sid: Some(3),
            epoch,
            applied_journal_id: fe_meta::Zxid::new(fe_meta::Epoch(applied_epoch), 7),
            last_timestamp_ms: 0,
            staleness_ms: None,
            entry_count: 0,
            cluster_id: 1,
            version: String::new(),
            last_start_time_ms: None,
        })
    }

    /// A restarted node reports FOLLOWING in the leader's epoch from LEADERINFO on, before its
    /// sync: the cluster counts as elected then, but as steady (every node serving) only once
    /// that node applied an entry of the epoch, after its UPTODATE.
    #[test]
    fn a_follower_still_syncing_is_elected_but_not_in_the_leaders_epoch() {
        let mut statuses = vec![
            status(1, Mode::Follower, 5, 5),
            status(2, Mode::Follower, 5, 4),
            status(3, Mode::Leader, 5, 5),
        ];
        assert!(elected(&statuses));
        assert!(!in_leader_epoch(&statuses));
        statuses[1] = status(2, Mode::Follower, 5, 5);
        assert!(elected(&statuses) && in_leader_epoch(&statuses));
    }
}
