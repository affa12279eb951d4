//! A load for the linearizability check: clients that write values no one else writes and
//! read with `sync`, every operation recorded with its invocation and return times
//! ([`crate::lincheck`]).
//!
//! Each client works on one of [`KEYS`] keys at a time, one request after the other, through
//! one server; when that server does not answer it moves on to the next address of its list
//! (a server killed, dropped or not yet started). A write that failed with an outcome the
//! client cannot know (timeout, connection lost, quorum lost after the proposal) is recorded as
//! unknown, a definite refusal as failed.
//!
//! INV-1: every client stops by itself at its deadline, or earlier on [`LinLoad::stop`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fe_meta::client::{Client, ClientOptions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::task::JoinSet;

use crate::lincheck::{self, Kind, Operation, Recorder, Report, Verdict};

/// The keys the clients share.
pub const KEYS: usize = 4;

/// The clients' timeouts: long enough to ride out an election, short enough that a client
/// whose server died comes back quickly.
pub const LIN_CLIENT: ClientOptions = ClientOptions {
    connect_timeout: Duration::from_millis(500),
    request_timeout: Duration::from_secs(3),
    ..ClientOptions::DEFAULT
};

/// What the clients did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    /// Writes acknowledged.
    pub writes_ok: u64,
    /// Writes whose outcome the client cannot know.
    pub writes_unknown: u64,
    /// Writes refused.
    pub writes_failed: u64,
    /// Reads answered.
    pub reads_ok: u64,
    /// Reads that failed.
    pub reads_failed: u64,
}

impl Tally {
    fn add(&mut self, o: Tally) {
        self.writes_ok += o.writes_ok;
        self.writes_unknown += o.writes_unknown;
        self.writes_failed += o.writes_failed;
        self.reads_ok += o.reads_ok;
        self.reads_failed += o.reads_failed;
    }
}

/// Running clients.
#[derive(Debug)]
pub struct LinLoad {
    rec: Arc<Recorder>,
    stop: Arc<AtomicBool>,
    tasks: JoinSet<Tally>,
}

/// The history's verdict and the clients' counts.
#[derive(Debug)]
pub struct LinReport {
    /// The checker's report.
    pub check: Report,
    /// Operations recorded.
    pub history: usize,
    /// What the clients did.
    pub tally: Tally,
    /// The history itself (client `i` is the one started on `rings[i]`).
    pub ops: Vec<Operation>,
    /// The instant the history's times count from.
    pub clock: Instant,
}

impl LinReport {
    /// Why the history is not accepted, if it is not: not linearizable, or not checked in
    /// time.
    pub fn failure(&self) -> Option<String> {
        match &self.check.verdict {
            Verdict::Linearizable => None,
            Verdict::NotLinearizable(v) => Some(format!("the history is not linearizable:\n{v}")),
            Verdict::Timeout { key } => Some(format!("the check of key {key} did not finish")),
        }
    }

    /// The `LINCHECK` line of a test's output.
    pub fn line(&self) -> String {
        let t = &self.tally;
        format!(
            "LINCHECK history={} checked={} keys={} writes_ok={} writes_unknown={} \
             writes_failed={} reads_ok={} reads_failed={} check_ms={:.1}",
            self.history,
            self.check.ops,
            self.check.keys,
            t.writes_ok,
            t.writes_unknown,
            t.writes_failed,
            t.reads_ok,
            t.reads_failed,
            self.check.elapsed.as_secs_f64() * 1e3
        )
    }
}

impl LinLoad {
    /// Starts `clients` clients; client `i` starts at `addrs[i % addrs.len()]`. Each stops
    /// after `max` at the latest (INV-1).
    pub fn start(addrs: &[String], clients: usize, max: Duration) -> LinLoad {
        let rings: Vec<Vec<String>> = (0..clients)
            .map(|i| {
                let mut ring = addrs.to_vec();
                ring.rotate_left(i % addrs.len().max(1));
                ring
            })
            .collect();
        LinLoad::start_rings(&rings, max)
    }

    /// Starts one client per ring: client `i` uses only the addresses of `rings[i]`, in order
    /// (a ring of one address pins the client to that server, e.g. on one side of a
    /// partition). Each stops after `max` at the latest (INV-1).
    pub fn start_rings(rings: &[Vec<String>], max: Duration) -> LinLoad {
        let rec = Arc::new(Recorder::new());
        let stop = Arc::new(AtomicBool::new(false));
        let deadline = Instant::now() + max;
        let mut tasks = JoinSet::new();
        for (i, ring) in rings.iter().enumerate().filter(|(_, r)| !r.is_empty()) {
            tasks.spawn(client_loop(
                i as u32,
                ring.clone(),
                rec.clone(),
                stop.clone(),
                deadline,
            ));
        }
        LinLoad { rec, stop, tasks }
    }

    /// Stops the clients and checks the history (the check may take up to `budget`).
    pub async fn stop(mut self, budget: Duration) -> LinReport {
        self.stop.store(true, Ordering::Relaxed);
        let mut tally = Tally::default();
        while let Some(t) = self.tasks.join_next().await {
            if let Ok(t) = t {
                tally.add(t);
            }
        }
        let history = self.rec.history();
        let check = lincheck::check(&history, budget);
        LinReport {
            check,
            history: history.len(),
            tally,
            ops: history,
            clock: self.rec.started(),
        }
    }
}

/// One client: random ops on the keys until `stop` (or `deadline`), through the first address
/// of `addrs` that answers.
async fn client_loop(
    id: u32,
    addrs: Vec<String>,
    rec: Arc<Recorder>,
    stop: Arc<AtomicBool>,
    deadline: Instant,
) -> Tally {
    let mut rng = ChaCha8Rng::seed_from_u64(u64::from(id));
    let mut tally = Tally::default();
    let mut conn: Option<Client> = None;
    let (mut at, mut seq) = (0usize, 0u64);
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        let client = match &conn {
            Some(c) if !c.is_closed() => c,
            _ => match Client::connect_with(&addrs[at % addrs.len()], LIN_CLIENT).await {
                Ok(c) => conn.insert(c),
                Err(_) => {
                    conn = None;
                    at += 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let key = format!("lin-{}", rng.gen_range(0..KEYS));
        let done = if rng.gen_bool(0.5) {
            seq += 1;
            let value = format!("c{id}-{seq}");
            write_once(client, &rec, id, &key, &value, &mut tally).await
        } else {
            read_once(client, &rec, id, &key, &mut tally).await
        };
        if !done {
            conn = None;
            at += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    tally
}

/// Client `id` writes `value` to `key`; whether it was acknowledged.
async fn write_once(
    client: &Client,
    rec: &Recorder,
    id: u32,
    key: &str,
    value: &str,
    tally: &mut Tally,
) -> bool {
    let kind = Kind::Write {
        value: value.to_string(),
    };
    let op = rec.invoke(id, key, kind);
    match client.set_var(key, value).await {
        Ok(_) => {
            rec.ok(op, None);
            tally.writes_ok += 1;
            true
        }
        Err(e) if e.may_be_applied() => {
            rec.unknown(op);
            tally.writes_unknown += 1;
            false
        }
        Err(_) => {
            rec.failed(op);
            tally.writes_failed += 1;
            false
        }
    }
}

/// Client `id` reads `key` with `sync`; whether it was answered.
async fn read_once(client: &Client, rec: &Recorder, id: u32, key: &str, tally: &mut Tally) -> bool {
    let op = rec.invoke(id, key, Kind::Read { observed: None });
    match client.get_var(key, true).await {
        Ok(read) => {
            rec.ok(op, read.value);
            tally.reads_ok += 1;
            true
        }
        Err(_) => {
            rec.failed(op);
            tally.reads_failed += 1;
            false
        }
    }
}
