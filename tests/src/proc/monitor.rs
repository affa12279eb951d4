//! A background poller of every node's journal id as clients see it: a plain (non-sync) read
//! every 100 ms, one task per node, answered with the journal id of the catalog version read;
//! any step backwards is recorded.
//!
//! A node that is down, frozen, or refuses the read (not serving yet, stale) gives no sample.
//! A read a node answers must carry a journal id at least as high as every read it answered
//! before — across restarts too, since only committed txns are ever applied and a restarted
//! node serves only once it is in sync — unless its data dir was wiped in between
//! ([`Monitor::forget`]).
//!
//! INV: the tasks end when the [`Monitor`] drops.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use fe_meta::client::{Client, ClientError, ClientOptions, ClientTls};
use tokio::task::JoinHandle;

/// The variable the poller reads (never written).
const PROBE_VAR: &str = "harness.monitor.probe";
const POLL: Duration = Duration::from_millis(100);
const POLL_CLIENT: ClientOptions = ClientOptions {
    connect_timeout: Duration::from_millis(300),
    request_timeout: Duration::from_millis(500),
    ..ClientOptions::DEFAULT
};

/// What the poller saw.
#[derive(Clone, Debug, Default)]
pub struct MonitorReport {
    /// Reads answered per node.
    pub samples: BTreeMap<u64, u64>,
    /// The highest journal id a read of each node was answered at.
    pub highest: BTreeMap<u64, u64>,
    /// Steps backwards, in words.
    pub regressions: Vec<String>,
}

/// The running poller.
#[derive(Debug)]
pub struct Monitor {
    report: Arc<Mutex<MonitorReport>>,
    tasks: Vec<JoinHandle<()>>,
    opts: ClientOptions,
}

impl Monitor {
    /// Starts polling `nodes` (sid, client address).
    pub fn start(nodes: &[(u64, String)], tls: Option<ClientTls>) -> Monitor {
        let report = Arc::new(Mutex::new(MonitorReport::default()));
        let opts = ClientOptions { tls, ..POLL_CLIENT };
        let tasks = nodes
            .iter()
            .map(|(sid, addr)| tokio::spawn(poll(*sid, addr.clone(), opts.clone(), report.clone())))
            .collect();
        Monitor {
            report,
            tasks,
            opts,
        }
    }

    /// What was seen so far.
    pub fn report(&self) -> MonitorReport {
        lock(&self.report).clone()
    }

    /// Starts polling a node added after the start (`members`).
    pub fn watch(&mut self, sid: u64, addr: String) {
        let task = tokio::spawn(poll(sid, addr, self.opts.clone(), self.report.clone()));
        self.tasks.push(task);
    }

    /// Forgets node `sid`'s highest journal id: its data dir was wiped, so it starts over.
    pub fn forget(&self, sid: u64) {
        lock(&self.report).highest.remove(&sid);
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn lock(m: &Mutex<MonitorReport>) -> MutexGuard<'_, MonitorReport> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

async fn poll(sid: u64, addr: String, opts: ClientOptions, report: Arc<Mutex<MonitorReport>>) {
    let mut client: Option<Client> = None;
    loop {
        tokio::time::sleep(POLL).await;
        if client.as_ref().is_none_or(Client::is_closed) {
            client = Client::connect_with(&addr, opts.clone()).await.ok();
        }
        let Some(c) = &client else { continue };
        let journal_id = match c.get_var(PROBE_VAR, false).await {
            Ok(read) => read.journal_id.0,
            Err(ClientError::Closed { .. } | ClientError::Timeout { .. }) => {
                client = None;
                continue;
            }
            Err(_) => continue,
        };
        let mut r = lock(&report);
        *r.samples.entry(sid).or_default() += 1;
        let highest = r.highest.entry(sid).or_default();
        if journal_id < *highest {
            let msg = format!(
                "node {sid}: a read was answered at journal id {journal_id:#x} after one at {:#x}",
                *highest
            );
            r.regressions.push(msg);
        } else {
            *highest = journal_id;
        }
    }
}
