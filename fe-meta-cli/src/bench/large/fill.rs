//! Building the large catalog fast: its databases first, then the entries of [`super::mix`]
//! from a shared counter over several connections, each with up to [`IN_FLIGHT`] writes in
//! flight; a progress line on stderr every [`PROGRESS_EVERY`] with the entries/s.
//!
//! INV-1: bounded: no new write is issued after the deadline (600 s plus 1 s per 1,000
//! entries, i.e. at least 1,000 entries/s), and what is in flight then ends within the
//! client's request timeout.
//! INV-2: a failed write is counted (and the first error kept), not retried: the entry count
//! the leader reports afterwards is the figure the memory phase divides by.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};

use super::super::load::connect;
use super::super::memory::columns;
use super::super::{progress, Params};
use super::mix::{db_name, entry, Counts, Entry};
use crate::Failure;
use fe_meta::client::{Client, ClientError};
use fe_meta::state::catalog::Column;

/// Writes in flight per connection.
pub const IN_FLIGHT: usize = 1000;
/// How often a progress line is printed.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// How the build went.
pub struct Built {
    /// Entries written (issued), databases not counted.
    pub entries: usize,
    /// Databases made first.
    pub dbs: usize,
    /// Seconds from the first database to the last answer.
    pub secs: f64,
    /// Failed writes.
    pub errors: u64,
    /// The first failure, if any.
    pub first_error: Option<String>,
}

/// What the writers share.
struct Shared {
    next: AtomicUsize,
    done: AtomicU64,
    errors: AtomicU64,
    first_error: Mutex<Option<String>>,
    finished: AtomicBool,
    total: usize,
    deadline: Instant,
    columns: Vec<Column>,
}

impl Shared {
    fn failed(&self, e: &ClientError) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut first = self.first_error.lock().unwrap_or_else(|p| p.into_inner());
        first.get_or_insert_with(|| e.to_string());
    }
}

async fn write(c: &Client, e: Entry, columns: &[Column]) -> Result<(), ClientError> {
    match e {
        Entry::Backend { host, port } => c.add_backend(&host, port, 1 << 40).await.map(|_| ()),
        Entry::Table { db, table } => c
            .create_table(&db, &table, columns.to_vec())
            .await
            .map(|_| ()),
        Entry::Var { name } => c.set_var(&name, "value-of-a-variable").await.map(|_| ()),
    }
}

/// Writes `entries` entries to `endpoint` over `connections` connections (INV-1, INV-2).
pub async fn build(
    endpoint: &str,
    p: &Params,
    entries: usize,
    connections: usize,
) -> Result<Built, Failure> {
    let mut clients = Vec::new();
    for _ in 0..connections.max(1) {
        clients.push(connect(endpoint, p).await.map_err(Failure::from)?);
    }
    let started = Instant::now();
    let bound = Duration::from_secs(600 + u64::try_from(entries / 1000).unwrap_or(u64::MAX / 2));
    let shared = Shared {
        next: AtomicUsize::new(0),
        done: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        first_error: Mutex::new(None),
        finished: AtomicBool::new(false),
        total: entries,
        deadline: started + bound,
        columns: columns(),
    };
    let dbs = Counts::of(entries).dbs;
    make_dbs(&clients[0], dbs, &shared).await?;
    progress(&format!(
        "large: {dbs} databases made; writing {entries} entries over {} connections",
        clients.len()
    ));
    let writers = futures::future::join_all(clients.iter().map(|c| writer(c, &shared)));
    let ticker = async {
        ticker(&shared, started).await;
    };
    let stop = async {
        writers.await;
        shared.finished.store(true, Ordering::Relaxed);
    };
    tokio::join!(stop, ticker);
    let first_error = shared
        .first_error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    Ok(Built {
        entries: shared.next.load(Ordering::Relaxed).min(entries),
        dbs,
        secs: started.elapsed().as_secs_f64(),
        errors: shared.errors.load(Ordering::Relaxed),
        first_error,
    })
}

/// Databases `0..dbs`, up to [`IN_FLIGHT`] at a time; the first failure stops the build
/// (every table of that database would fail).
async fn make_dbs(c: &Client, dbs: usize, shared: &Shared) -> Result<(), Failure> {
    let mut inflight = FuturesUnordered::new();
    let mut next = 0;
    while next < dbs || !inflight.is_empty() {
        while next < dbs && inflight.len() < IN_FLIGHT && Instant::now() < shared.deadline {
            let name = db_name(next);
            next += 1;
            inflight.push(async move { c.create_db(&name).await });
        }
        match inflight.next().await {
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                return Err(Failure::other(format!(
                    "large: making the catalog's databases failed: {e}"
                )))
            }
            None => break,
        }
    }
    Ok(())
}

/// One connection's loop: claims the next entry number until all are claimed or the deadline.
async fn writer(c: &Client, s: &Shared) {
    let mut inflight = FuturesUnordered::new();
    loop {
        while inflight.len() < IN_FLIGHT && Instant::now() < s.deadline {
            let i = s.next.fetch_add(1, Ordering::Relaxed);
            if i >= s.total {
                break;
            }
            let cols = &s.columns;
            inflight.push(async move { write(c, entry(i), cols).await });
        }
        match inflight.next().await {
            Some(Ok(())) => {
                s.done.fetch_add(1, Ordering::Relaxed);
            }
            Some(Err(e)) => s.failed(&e),
            None => break,
        }
    }
}

/// A progress line every [`PROGRESS_EVERY`] until the writers finish.
async fn ticker(s: &Shared, started: Instant) {
    let (mut last_at, mut last_done) = (Instant::now(), 0u64);
    while !s.finished.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if last_at.elapsed() < PROGRESS_EVERY {
            continue;
        }
        let done = s.done.load(Ordering::Relaxed);
        let rate = (done - last_done) as f64 / last_at.elapsed().as_secs_f64();
        let overall = done as f64 / started.elapsed().as_secs_f64();
        progress(&format!(
            "large: {done}/{} entries ({:.1}%), {rate:.0}/s now, {overall:.0}/s overall, \
             errors {}",
            s.total,
            done as f64 * 100.0 / s.total.max(1) as f64,
            s.errors.load(Ordering::Relaxed)
        ));
        (last_at, last_done) = (Instant::now(), done);
    }
}
