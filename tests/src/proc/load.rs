//! Bounded write load: writer tasks, one connection each, spread over the nodes, writing
//! `SET_VAR load-<load>-<client>-<seq>` one after the other — every [`CREATE_EVERY`]-th write
//! a `CREATE_DB load-db-<load>-<client>-<seq>` instead, whose answered id is recorded — and recording
//! what was acknowledged (in the [`Ledger`]) and when (for recovery times). Plus [`fill`], a
//! pipelined bulk load.
//!
//! INV-1: every writer stops by itself at its deadline, or earlier on [`Load::stop`].
//! INV-2: a writer whose node is down or frozen keeps trying (new connection after a failure,
//! 50 ms apart) until it stops; nothing waits longer than the client's request timeout.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fe_meta::client::{Client, ClientError, ClientOptions};
use tokio::task::JoinSet;

use super::{Ledger, ProcCluster};

/// The timeouts of the load's connections.
pub const LOAD_CLIENT: ClientOptions = ClientOptions {
    connect_timeout: Duration::from_millis(500),
    request_timeout: Duration::from_secs(5),
    ..ClientOptions::DEFAULT
};

/// Every this many writes of a writer, one creates a database instead of setting a variable.
pub const CREATE_EVERY: u64 = 8;

/// Running writers; [`Load::stop`] ends them and reports.
#[derive(Debug)]
pub struct Load {
    stop: Arc<AtomicBool>,
    tasks: JoinSet<Writer>,
    started: Instant,
}

/// What the writers did.
#[derive(Clone, Debug, Default)]
pub struct LoadReport {
    /// Writes acknowledged.
    pub acked: u64,
    /// Writes that failed (any error, including unknown outcomes).
    pub failed: u64,
    /// Each acknowledgement, sorted by arrival.
    pub acks: Vec<Ack>,
    /// Failures by error kind (`NotLeader`, `QuorumUnavailable`, `Closed`, ...).
    pub errors: BTreeMap<String, u64>,
    /// How long the load ran.
    pub ran: Duration,
}

/// One acknowledged write of the load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ack {
    /// When the answer arrived.
    pub at: Instant,
    /// The journal id it was acknowledged with.
    pub journal_id: u64,
}

impl LoadReport {
    /// The first acknowledgement at or after `t` with a journal id of at least
    /// `min_journal_id` (e.g. `epoch << 32`: a write of a new leader).
    pub fn first_ack_after(&self, t: Instant, min_journal_id: u64) -> Option<Ack> {
        self.acks
            .iter()
            .copied()
            .find(|a| a.at >= t && a.journal_id >= min_journal_id)
    }

    /// From `t` to [`LoadReport::first_ack_after`].
    pub fn recovery_after(&self, t: Instant, min_journal_id: u64) -> Option<Duration> {
        self.first_ack_after(t, min_journal_id).map(|a| a.at - t)
    }

    /// Acknowledgements that arrived in `[from, to)`.
    pub fn acked_between(&self, from: Instant, to: Instant) -> usize {
        self.acks
            .iter()
            .filter(|a| a.at >= from && a.at < to)
            .count()
    }
}

#[derive(Debug, Default)]
struct Writer {
    report: LoadReport,
}

/// The short name of a client error's kind.
pub fn error_kind(e: &ClientError) -> String {
    let s = format!("{e:?}");
    s.split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or("?")
        .to_owned()
}

impl Load {
    /// Starts `clients` writers, writer `i` on the `i % n`-th node, with values of
    /// `value_len` bytes, for at most `max`.
    pub fn start(cluster: &ProcCluster, clients: usize, value_len: usize, max: Duration) -> Load {
        Load::start_on(cluster, &cluster.sids(), clients, value_len, max)
    }

    /// As [`Load::start`], with the writers spread over `sids` only (writer `i` on the
    /// `i % sids.len()`-th).
    pub fn start_on(
        cluster: &ProcCluster,
        sids: &[u64],
        clients: usize,
        value_len: usize,
        max: Duration,
    ) -> Load {
        let addrs: Vec<String> = sids.iter().map(|s| cluster.client_addr(*s)).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = JoinSet::new();
        let started = Instant::now();
        // Loads of one test process (concurrent or one after the other) never share a name:
        // a CREATE_DB of a name taken would fail, and slow the writer down.
        static LOADS: AtomicU64 = AtomicU64::new(0);
        let load = LOADS.fetch_add(1, Ordering::Relaxed);
        for i in 0..clients {
            let Some(addr) = addrs.get(i % addrs.len().max(1)).cloned() else {
                break;
            };
            let (stop, ledger) = (stop.clone(), cluster.ledger().clone());
            let deadline = started + max;
            let options = cluster.spec().client_options(LOAD_CLIENT);
            let writer = format!("{load}-{i}");
            tasks.spawn(write_loop(
                writer,
                (addr, options),
                value_len,
                deadline,
                stop,
                ledger,
            ));
        }
        Load {
            stop,
            tasks,
            started,
        }
    }

    /// Stops the writers (each finishes or abandons its write in flight) and merges reports.
    pub async fn stop(mut self) -> LoadReport {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = LoadReport::default();
        while let Some(done) = self.tasks.join_next().await {
            let Ok(w) = done else { continue };
            all.acked += w.report.acked;
            all.failed += w.report.failed;
            all.acks.extend(w.report.acks);
            for (k, n) in w.report.errors {
                *all.errors.entry(k).or_default() += n;
            }
        }
        all.acks.sort();
        all.ran = self.started.elapsed();
        all
    }
}

async fn write_loop(
    i: String,
    (addr, options): (String, ClientOptions),
    value_len: usize,
    deadline: Instant,
    stop: Arc<AtomicBool>,
    ledger: Ledger,
) -> Writer {
    let mut w = Writer::default();
    let mut client: Option<Client> = None;
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        let c = match &client {
            Some(c) if !c.is_closed() => c,
            _ => match Client::connect_with(&addr, options.clone()).await {
                Ok(c) => client.insert(c),
                Err(e) => {
                    w.fail(&e);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        seq += 1;
        let answer = if seq.is_multiple_of(CREATE_EVERY) {
            let name = format!("load-db-{i}-{seq}");
            c.create_db(&name).await.and_then(|written| {
                let id = written.created_id.ok_or_else(|| {
                    ClientError::Protocol(format!("CREATE_DB {name}: Written without an id"))
                })?;
                ledger.record_database(&name, id, written.journal_id.0);
                Ok(written)
            })
        } else {
            let name = format!("load-{i}-{seq}");
            let value = value_of(&name, value_len);
            c.set_var(&name, &value).await.inspect(|written| {
                ledger.record(&name, &value, written.journal_id.0);
            })
        };
        match answer {
            Ok(written) => {
                w.report.acked += 1;
                w.report.acks.push(Ack {
                    at: Instant::now(),
                    journal_id: written.journal_id.0,
                });
            }
            Err(e) => {
                w.fail(&e);
                if matches!(e, ClientError::Closed { .. } | ClientError::Timeout { .. }) {
                    client = None;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    w
}

impl Writer {
    fn fail(&mut self, e: &ClientError) {
        self.report.failed += 1;
        *self.report.errors.entry(error_kind(e)).or_default() += 1;
    }
}

/// A value of `len` bytes derived from `name` (so a misplaced value is detected).
pub fn value_of(name: &str, len: usize) -> String {
    let mut v = format!("{name}=");
    while v.len() < len {
        v.push_str(name);
        v.push('.');
    }
    v.truncate(len.max(name.len() + 1));
    v
}

/// Writes `count` variables `<prefix><k>` of `value_len` bytes through node `sid`, `depth`
/// requests in flight, recording each acknowledged one; stops at the first failure or at
/// `within`. Returns how many were acknowledged.
pub async fn fill(
    cluster: &ProcCluster,
    sid: u64,
    prefix: &str,
    count: usize,
    value_len: usize,
    depth: usize,
    within: Duration,
) -> Result<usize, ClientError> {
    let opts = ClientOptions {
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(30),
        tls: cluster.spec().client_tls.clone(),
        ..ClientOptions::DEFAULT
    };
    let client = Arc::new(cluster.client(sid, Some(opts)).await?);
    let deadline = Instant::now() + within;
    let mut tasks: JoinSet<Result<(), ClientError>> = JoinSet::new();
    let mut next = 0usize;
    let mut acked = 0usize;
    loop {
        while next < count && tasks.len() < depth.max(1) && Instant::now() < deadline {
            let (c, ledger) = (client.clone(), cluster.ledger().clone());
            let name = format!("{prefix}{next}");
            tasks.spawn(async move {
                let value = value_of(&name, value_len);
                let w = c.set_var(&name, &value).await?;
                ledger.record(&name, &value, w.journal_id.0);
                Ok(())
            });
            next += 1;
        }
        match tasks.join_next().await {
            None => return Ok(acked),
            Some(Ok(Ok(()))) => acked += 1,
            Some(Ok(Err(e))) => return Err(e),
            Some(Err(join)) => return Err(ClientError::Protocol(format!("fill task: {join}"))),
        }
    }
}
