//! Linearizability of `SET_VAR` / `GET_VAR --sync` on real `fe-meta server` processes while the
//! leader is killed -9 and restarted, twice.
//!
//! Six clients, two per node, each one request at a time, pick one of four keys and either
//! write a value no one else writes or read with `sync` (a linearizable read, DESIGN §6). Every
//! operation is recorded with its invocation and return times; a write that failed with an
//! outcome the client cannot know (timeout, connection lost, quorum lost after the proposal)
//! is recorded as unknown, a definite refusal as failed. At the end the history goes through
//! `tests::lincheck` and the cluster through the harness's shared end checks.
//!
//! Needs the `fe-meta` binary: `cargo build --release -p fe-meta-cli` (the workspace's
//! `cargo test --release` builds it) or `FE_META_BIN`. Prints `LINCHECK` and `RECOVERY` lines
//! with `-- --nocapture`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fe_meta::client::{Client, ClientOptions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tests::lincheck::{self, Kind, Recorder, Verdict};
use tests::proc::{ClusterSpec, ProcCluster};
use tokio::task::JoinSet;

const KEYS: usize = 4;
const CLIENTS: usize = 6;

/// The clients' timeouts: long enough to ride out an election, short enough that a client
/// whose node died comes back quickly.
const OPTS: ClientOptions = ClientOptions {
    connect_timeout: Duration::from_millis(500),
    request_timeout: Duration::from_secs(3),
    ..ClientOptions::DEFAULT
};

#[derive(Debug, Default)]
struct Tally {
    writes_ok: u64,
    writes_unknown: u64,
    writes_failed: u64,
    reads_ok: u64,
    reads_failed: u64,
}

/// One client: random ops on the keys through node `addr` until `stop` (or `deadline`).
async fn client_loop(
    id: u32,
    addr: String,
    rec: Arc<Recorder>,
    stop: Arc<AtomicBool>,
    deadline: Instant,
) -> Tally {
    let mut rng = ChaCha8Rng::seed_from_u64(u64::from(id));
    let mut tally = Tally::default();
    let mut conn: Option<Client> = None;
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        let client = match &conn {
            Some(c) if !c.is_closed() => c,
            _ => match Client::connect_with(&addr, OPTS).await {
                Ok(c) => conn.insert(c),
                Err(_) => {
                    conn = None;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let key = format!("lin-{}", rng.gen_range(0..KEYS));
        let failed = if rng.gen_bool(0.5) {
            seq += 1;
            let value = format!("c{id}-{seq}");
            !write_once(client, &rec, id, &key, &value, &mut tally).await
        } else {
            !read_once(client, &rec, id, &key, &mut tally).await
        };
        if failed {
            conn = None;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    tally
}

/// Client `id` writes `value` to `key` through `client`, recorded in `rec` and counted in
/// `tally`; whether it was acknowledged.
async fn write_once(
    client: &Client,
    rec: &Recorder,
    id: u32,
    key: &str,
    value: &str,
    tally: &mut Tally,
) -> bool {
    let op = rec.invoke(
        id,
        key,
        Kind::Write {
            value: value.to_string(),
        },
    );
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

/// Client `id` reads `key` with `sync` through `client`, recorded in `rec` and counted in
/// `tally`; whether it was answered.
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

/// kill -9 the leader, wait for the next one, restart the old one and wait until it follows;
/// returns (new leader, election time).
async fn kill_leader(c: &mut ProcCluster, round: u32) -> (u64, Duration) {
    let old = c.leader(Duration::from_secs(15)).await.unwrap();
    let killed_at = Instant::now();
    c.kill(old).unwrap();
    let new = c.leader(Duration::from_secs(15)).await.unwrap();
    let elected = killed_at.elapsed();
    assert_ne!(new, old);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let restarted_at = Instant::now();
    c.restart(old).unwrap();
    c.leader(Duration::from_secs(20)).await.unwrap();
    println!(
        "RECOVERY scenario=lin_kill_leader_{round} killed={old} new_leader={new} election_ms={} \
         rejoin_ms={}",
        elected.as_millis(),
        restarted_at.elapsed().as_millis()
    );
    (new, elected)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_and_synced_get_stay_linearizable_across_leader_kills() {
    let mut c = ProcCluster::start("linearizable", ClusterSpec::default())
        .await
        .unwrap();
    let rec = Arc::new(Recorder::new());
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut tasks = JoinSet::new();
    let sids = c.sids();
    for i in 0..CLIENTS {
        let addr = c.client_addr(sids[i % sids.len()]);
        tasks.spawn(client_loop(
            i as u32,
            addr,
            rec.clone(),
            stop.clone(),
            deadline,
        ));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    for round in 1..=2 {
        kill_leader(&mut c, round).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let mut tally = Tally::default();
    while let Some(t) = tasks.join_next().await {
        let t = t.unwrap();
        tally.writes_ok += t.writes_ok;
        tally.writes_unknown += t.writes_unknown;
        tally.writes_failed += t.writes_failed;
        tally.reads_ok += t.reads_ok;
        tally.reads_failed += t.reads_failed;
    }

    let history = rec.history();
    let report = lincheck::check(&history, Duration::from_secs(30));
    println!(
        "LINCHECK history={} checked={} keys={} writes_ok={} writes_unknown={} writes_failed={} \
         reads_ok={} reads_failed={} check_ms={:.1}",
        history.len(),
        report.ops,
        report.keys,
        tally.writes_ok,
        tally.writes_unknown,
        tally.writes_failed,
        tally.reads_ok,
        tally.reads_failed,
        report.elapsed.as_secs_f64() * 1e3
    );
    match report.verdict {
        Verdict::Linearizable => {}
        Verdict::NotLinearizable(v) => {
            c.keep_dir();
            panic!("the history is not linearizable:\n{v}");
        }
        Verdict::Timeout { key } => {
            c.keep_dir();
            panic!("the check of key {key} did not finish in time");
        }
    }
    assert!(
        tally.writes_ok > 100 && tally.reads_ok > 100,
        "too little load to prove anything: {tally:?}"
    );
    c.finish().await.unwrap();
}
