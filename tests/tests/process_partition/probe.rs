//! Probes pinned to one node each: a write of a fresh variable, then a sync read of it, over
//! and over (20 ms apart), each recorded with its invocation and return times and outcome, so
//! a test can say until when a node on the cut-off side acknowledged writes and answered sync
//! reads, and when it first refused. Acknowledged writes go into the cluster's ledger (the end
//! checks read them back from every node).
//!
//! INV: every probe stops by itself after its `max`, or earlier on [`Probes::stop`]; no
//! request waits longer than the client's request timeout.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fe_meta::client::{Client, ClientError, ClientOptions};
use tests::proc::{Ledger, ProcCluster};
use tokio::task::JoinSet;

const OPTS: ClientOptions = ClientOptions {
    connect_timeout: Duration::from_millis(500),
    request_timeout: Duration::from_secs(3),
    ..ClientOptions::DEFAULT
};

/// What a probe sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `SET_VAR probe-<sid>-<seq>`.
    Write,
    /// `GET_VAR --sync` of the same name.
    SyncRead,
}

/// One request and its answer.
#[derive(Clone, Debug)]
pub struct Event {
    /// The node asked.
    pub sid: u64,
    /// What was asked.
    pub op: Op,
    /// When it was sent.
    pub invoked: Instant,
    /// When the answer (or the error) came.
    pub returned: Instant,
    /// `Ok(journal id)` or `Err(the error's name)`.
    pub outcome: Result<u64, &'static str>,
    /// A sync read that answered without the value of the write just acknowledged to the
    /// same client (a stale read).
    pub stale: bool,
}

/// Running probes.
#[derive(Debug)]
pub struct Probes {
    stop: Arc<AtomicBool>,
    tasks: JoinSet<Vec<Event>>,
}

impl Probes {
    /// One probe on each of `sids`, for at most `max`.
    pub fn start(c: &ProcCluster, sids: &[u64], max: Duration) -> Probes {
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = JoinSet::new();
        let deadline = Instant::now() + max;
        for &sid in sids {
            let (addr, ledger, stop) = (c.client_addr(sid), c.ledger().clone(), stop.clone());
            tasks.spawn(probe(sid, addr, ledger, stop, deadline));
        }
        Probes { stop, tasks }
    }

    /// Stops the probes; every event, by invocation time.
    pub async fn stop(mut self) -> Vec<Event> {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = Vec::new();
        while let Some(done) = self.tasks.join_next().await {
            all.extend(done.unwrap_or_default());
        }
        all.sort_by_key(|e| e.invoked);
        all
    }
}

async fn probe(
    sid: u64,
    addr: String,
    ledger: Ledger,
    stop: Arc<AtomicBool>,
    deadline: Instant,
) -> Vec<Event> {
    let mut events = Vec::new();
    let mut conn: Option<Client> = None;
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        let client = match &conn {
            Some(c) if !c.is_closed() => c,
            _ => match Client::connect_with(&addr, OPTS).await {
                Ok(c) => conn.insert(c),
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        seq += 1;
        let name = format!("probe-{sid}-{seq}");
        let invoked = Instant::now();
        let w = client.set_var(&name, "p").await;
        if let Ok(written) = &w {
            ledger.record(&name, "p", written.journal_id.0);
        }
        let acked = w.is_ok();
        events.push(event(sid, Op::Write, invoked, w.map(|w| w.journal_id.0)));
        let invoked = Instant::now();
        let r = client.get_var(&name, true).await;
        let stale = acked && r.as_ref().is_ok_and(|r| r.value.is_none());
        let mut e = event(sid, Op::SyncRead, invoked, r.map(|r| r.journal_id.0));
        e.stale = stale;
        events.push(e);
        if events.iter().rev().take(2).any(|e| e.outcome.is_err()) {
            conn = None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    events
}

fn event(sid: u64, op: Op, invoked: Instant, r: Result<u64, ClientError>) -> Event {
    Event {
        sid,
        op,
        invoked,
        returned: Instant::now(),
        outcome: r.map_err(|e| e.name()),
        stale: false,
    }
}
