//! The checks every scenario runs at its end ([`run`], via [`ProcCluster::finish`]):
//!
//! 1. convergence: every node runs, and all report the same digest at the same journal id
//!    (within 60 s);
//! 2. every node serves plain reads (within 10 s: a restarted node may match the others' data
//!    a moment before its sync completes), and every write in the [`Ledger`](super::Ledger) reads back, with its value, from every node
//!    (SHOW_VARS for small ledgers; GET_VAR per name, pipelined, for large ones, since a
//!    SHOW_VARS answer is bounded by the frame size); every acknowledged CREATE_DB is there on
//!    every node under its name *with the id its `Written` answer gave* (an answer stands
//!    for what replay did, not for an entry replay ignored);
//! 3. no node answered a read at a lower journal id than an earlier read (the monitor, which
//!    must have read from every node after convergence);
//! 4. no node's log says `panicked at`.
//!
//! INV: all problems found are reported together, each naming the node.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fe_meta::client::{Client, ClientError, ClientOptions};
use fe_meta::protocol::{ErrorDetail, ErrorReply, Status};
use thiserror::Error;
use tokio::task::JoinSet;

use super::monitor::MonitorReport;
use super::{ProcCluster, ProcError};

/// A ledger above this many value bytes is read back per name.
const SHOW_VARS_BYTES_MAX: u64 = 8 * 1024 * 1024;
/// GET_VARs in flight per node when reading back per name.
const READ_DEPTH: usize = 32;
/// How long the checks wait for the monitor to read from every node after convergence.
const MONITOR_WAIT: Duration = Duration::from_secs(5);
/// How long a converged node may still refuse plain reads as not yet synced.
const SYNC_WAIT: Duration = Duration::from_secs(10);

/// The end checks found problems.
#[derive(Debug, Error)]
#[error("end checks failed:\n  {}", .problems.join("\n  "))]
pub struct CheckFailure {
    /// One line per problem.
    pub problems: Vec<String>,
}

/// The converged state the checks saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Converged {
    /// The common journal id.
    pub journal_id: u64,
    /// The common digest.
    pub digest: [u8; 32],
    /// Acknowledged writes read back from every node.
    pub acked_writes: usize,
}

/// Runs the checks on `cluster`.
pub async fn run(cluster: &mut ProcCluster) -> Result<Converged, ProcError> {
    let (journal_id, digest) = cluster.wait_converged(Duration::from_secs(60)).await?;
    let mut problems = Vec::new();
    for sid in cluster.sids() {
        if let Err(p) = read_back(cluster, sid).await {
            problems.extend(p);
        }
    }
    let mon = monitor_after_convergence(cluster).await;
    problems.extend(mon.regressions.iter().cloned());
    for sid in cluster.sids() {
        if mon.samples.get(&sid).copied().unwrap_or(0) == 0 {
            problems.push(format!("node {sid}: the monitor never got a read answered"));
        }
    }
    for sid in cluster.sids() {
        let node = cluster.node(sid)?;
        let text = std::fs::read_to_string(node.log_path()).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.contains("panicked at")) {
            problems.push(format!("node {sid} panicked: {line}"));
        }
    }
    if problems.is_empty() {
        Ok(Converged {
            journal_id,
            digest,
            acked_writes: cluster.ledger().len(),
        })
    } else {
        Err(CheckFailure { problems }.into())
    }
}

/// The monitor's report once it has read from every node after convergence (or after
/// [`MONITOR_WAIT`]): a node restarted late may not have been sampled yet.
async fn monitor_after_convergence(cluster: &ProcCluster) -> MonitorReport {
    let at_convergence = cluster.monitor_report().samples;
    let start = Instant::now();
    loop {
        let now = cluster.monitor_report();
        let all_sampled = cluster.sids().iter().all(|sid| {
            now.samples.get(sid).copied().unwrap_or(0)
                > at_convergence.get(sid).copied().unwrap_or(0)
        });
        if all_sampled || start.elapsed() > MONITOR_WAIT {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Reads every acknowledged write back from node `sid`.
async fn read_back(cluster: &ProcCluster, sid: u64) -> Result<(), Vec<String>> {
    let opts = ClientOptions {
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(30),
        ..ClientOptions::DEFAULT
    };
    let client = cluster
        .client(sid, Some(opts))
        .await
        .map_err(|e| vec![format!("node {sid}: {e}")])?;
    until_synced(&client)
        .await
        .map_err(|e| vec![format!("node {sid}: still refuses plain reads: {e}")])?;
    let mut problems = databases_back(cluster, &client, sid).await?;
    let expected = cluster.ledger().snapshot();
    let found: BTreeMap<String, Option<String>> =
        if cluster.ledger().value_bytes() <= SHOW_VARS_BYTES_MAX {
            let vars = client
                .show_vars(false)
                .await
                .map_err(|e| vec![format!("node {sid}: SHOW_VARS: {e}")])?;
            let all: BTreeMap<String, String> = vars.value.into_iter().collect();
            expected
                .keys()
                .map(|k| (k.clone(), all.get(k).cloned()))
                .collect()
        } else {
            get_each(Arc::new(client), expected.keys().cloned().collect())
                .await
                .map_err(|e| vec![format!("node {sid}: {e}")])?
        };
    for (name, acked) in &expected {
        match found.get(name).cloned().flatten() {
            Some(v) if v == acked.value => {}
            Some(_) => problems.push(format!("node {sid}: {name} has another value")),
            None => problems.push(format!(
                "node {sid}: acknowledged write {name} (journal id {:#x}) is missing",
                acked.journal_id
            )),
        }
    }
    problems.truncate(20);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// Checks that every acknowledged database is on node `sid` with the id it was answered.
async fn databases_back(
    cluster: &ProcCluster,
    client: &Client,
    sid: u64,
) -> Result<Vec<String>, Vec<String>> {
    let expected = cluster.ledger().databases();
    if expected.is_empty() {
        return Ok(Vec::new());
    }
    let found: BTreeMap<String, u64> = client
        .show_databases(false)
        .await
        .map_err(|e| vec![format!("node {sid}: SHOW_DATABASES: {e}")])?
        .value
        .into_iter()
        .map(|d| (d.name, d.id))
        .collect();
    let mut problems = Vec::new();
    for (name, acked) in &expected {
        match found.get(name) {
            Some(id) if *id == acked.id => {}
            Some(id) => problems.push(format!(
                "node {sid}: database {name} was answered Written with id {} (journal id \
                 {:#x}) but has id {id}",
                acked.id, acked.journal_id
            )),
            None => problems.push(format!(
                "node {sid}: acknowledged database {name} (id {}, journal id {:#x}) is missing",
                acked.id, acked.journal_id
            )),
        }
    }
    Ok(problems)
}

/// Waits until node `client` serves plain reads: right after a restart it answers that it
/// has not synced with a leader yet, and its data can already match the others' (a SNAP
/// restored) a moment before its UPTODATE arrives. Any other answer ends the wait; still
/// unsynced after [`SYNC_WAIT`] is a problem.
async fn until_synced(client: &Client) -> Result<(), ClientError> {
    let start = Instant::now();
    loop {
        match client.get_var("probe", false).await {
            Err(ClientError::Server(ErrorReply {
                detail: ErrorDetail::Lag { lag_ms, .. },
                ..
            })) if lag_ms == u64::MAX && start.elapsed() < SYNC_WAIT => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) if e.status() == Some(Status::Stale) => return Err(e),
            _ => return Ok(()),
        }
    }
}

async fn get_each(
    client: Arc<Client>,
    names: Vec<String>,
) -> Result<BTreeMap<String, Option<String>>, String> {
    let mut out = BTreeMap::new();
    let mut tasks = JoinSet::new();
    let mut names = names.into_iter();
    loop {
        while tasks.len() < READ_DEPTH {
            let Some(name) = names.next() else { break };
            let c = client.clone();
            tasks.spawn(async move {
                let r = c.get_var(&name, false).await;
                (name, r)
            });
        }
        match tasks.join_next().await {
            None => return Ok(out),
            Some(Ok((name, Ok(read)))) => {
                out.insert(name, read.value);
            }
            Some(Ok((name, Err(e)))) => return Err(format!("GET_VAR {name}: {e}")),
            Some(Err(e)) => return Err(format!("GET_VAR task: {e}")),
        }
    }
}
