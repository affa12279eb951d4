//! The admin HTTP port of live in-process clusters: `/metrics` scraped over HTTP and parsed
//! with a Prometheus text parser under a write load, `/health` and `/ready` across a leader
//! kill and a quorum loss, `/commands`, errors, the whitelist of the four-letter words and a
//! port that cannot be bound.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod server_support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use prometheus_parse::{Scrape, Value};
use serde_json::Value as Json;
use server_support::{add_backend, four, Client, Cluster};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const ADMIN: &str = "meta_delay_toleration_second=60\nadmin.serverAddress=127.0.0.1\n\
                     admin.serverPort=0";

/// One HTTP/1.0 request: the status, the content type and the body.
async fn http(addr: SocketAddr, method: &str, path: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let text = String::from_utf8(out).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    let content_type = head
        .lines()
        .find_map(|l| l.strip_prefix("content-type: "))
        .unwrap_or_default()
        .to_owned();
    (code, content_type, body.to_owned())
}

async fn json(addr: SocketAddr, path: &str) -> (u16, Json) {
    let (code, ctype, body) = http(addr, "GET", path).await;
    assert_eq!(ctype, "application/json", "{path}: {body}");
    (code, serde_json::from_str(&body).unwrap())
}

/// `name{labels}` → value of every counter/gauge sample, and `name_count{labels}` of every
/// histogram, parsed from `/metrics`.
async fn scrape(addr: SocketAddr) -> BTreeMap<String, f64> {
    let (code, ctype, body) = http(addr, "GET", "/metrics").await;
    assert_eq!(code, 200);
    assert_eq!(ctype, "text/plain; version=0.0.4");
    let parsed = Scrape::parse(body.lines().map(|l| Ok(l.to_owned()))).unwrap();
    let mut out = BTreeMap::new();
    for s in parsed.samples {
        let mut labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        labels.sort();
        let key = |name: &str| format!("{name}{{{}}}", labels.join(","));
        match s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => {
                out.insert(key(&s.metric), v);
            }
            Value::Histogram(buckets) => {
                let count = buckets.last().map_or(0.0, |b| b.count);
                out.insert(key(&format!("{}_count", s.metric)), count);
            }
            Value::Summary(_) => {}
        }
    }
    out
}

fn admin(c: &Cluster, sid: u64) -> SocketAddr {
    c.servers[&sid].admin_addr().expect("admin port bound")
}

async fn write_some(addr: SocketAddr, first_port: u16, n: u16) {
    let mut client = Client::connect(addr).await;
    for p in first_port..first_port + n {
        client.call(add_backend("10.0.0.1", p)).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_of_a_three_node_cluster_under_a_write_load() {
    let mut c = Cluster::new(3, ADMIN);
    c.start_all().await;
    let leader = c.wait_stable(Duration::from_secs(20)).await;
    let load = tokio::spawn(write_some(c.addr(leader), 1000, 400));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut first = BTreeMap::new();
    for sid in 1..=3 {
        first.insert(sid, scrape(admin(&c, sid)).await);
    }
    load.await.unwrap();
    write_some(c.addr(leader), 2000, 50).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    for sid in 1..=3 {
        let (before, after) = (&first[&sid], scrape(admin(&c, sid)).await);
        let role = if sid == leader {
            "leading"
        } else {
            "following"
        };
        assert_eq!(after[&format!("zab_role{{role={role}}}")], 1.0, "sid {sid}");
        assert_eq!(after["zab_role{role=looking}"], 0.0, "sid {sid}");
        // The servers run on this test's runtime: its two workers, busy with the load.
        assert_eq!(after["fe_meta_server_threads{}"], 2.0, "sid {sid}");
        for grows in [
            "zab_commits_total{}",
            "fe_meta_applied_journal_id{}",
            "fe_meta_catalog_entries{}",
            "fe_meta_server_busy_seconds_total{}",
        ] {
            assert!(
                after[grows] > before[grows],
                "sid {sid} {grows}: {} → {}",
                before[grows],
                after[grows]
            );
        }
        assert!(after["process_resident_memory_bytes{}"] > 0.0);
        assert!(after.contains_key("process_cpu_seconds_total{}"));
        assert_eq!(after["fe_meta_fatal{}"], 0.0);
        assert!(
            after["fe_meta_timestamps_applied_total{}"] >= 1.0,
            "sid {sid}"
        );
        assert!(after["fe_meta_last_timestamp_ms{}"] > 0.0, "sid {sid}");
    }
    let (before, after) = (&first[&leader], scrape(admin(&c, leader)).await);
    let writes = "fe_meta_request_duration_us_count{class=write}";
    assert!(
        after[writes] >= before[writes] + 50.0,
        "{} → {}",
        before[writes],
        after[writes]
    );
    assert!(after["fe_meta_requests_total{class=write,status=OK}"] >= 450.0);
    assert_eq!(after["fe_meta_staleness_ms{}"], 0.0);
    assert!(after["zab_proposals_total{}"] >= 450.0);
    // mntr reads the same registry: the catalog gauge agrees once the load stopped.
    let mntr = four(c.addr(leader), "mntr").await;
    let line = format!(
        "fe_meta_catalog_entries\t{}\n",
        after["fe_meta_catalog_entries{}"]
    );
    assert!(mntr.contains(&line), "{line:?} not in {mntr}");
    assert!(mntr.contains("zab_commits_total\t"), "{mntr}");
    c.stop_all().await;
}

/// Polls `/ready` of `sid` until `want(code, body)` holds; panics after `limit`.
async fn until_ready(
    c: &Cluster,
    sid: u64,
    limit: Duration,
    want: impl Fn(u16, &Json) -> bool,
) -> Json {
    let start = Instant::now();
    loop {
        let (code, body) = json(admin(c, sid), "/ready").await;
        if want(code, &body) {
            return body;
        }
        assert!(
            start.elapsed() < limit,
            "sid {sid}: /ready stayed {code} {body}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_ready_across_a_leader_kill_and_a_quorum_loss() {
    let mut c = Cluster::new(3, ADMIN);
    c.start_all().await;
    let old = c.wait_stable(Duration::from_secs(20)).await;
    for sid in 1..=3 {
        until_ready(&c, sid, Duration::from_secs(20), |code, _| code == 200).await;
        assert_eq!(json(admin(&c, sid), "/health").await.0, 200);
    }
    let survivors: Vec<u64> = (1..=3).filter(|s| *s != old).collect();
    c.stop(old).await;
    // Each survivor loses its leader (not ready: no writes), then follows the new one.
    let mut new_leader = None;
    let mut saw_not_ready = false;
    for &sid in &survivors {
        let lost = until_ready(&c, sid, Duration::from_secs(20), |code, b| {
            code == 503 || b["writes"]["leader"] != old
        })
        .await;
        let back = until_ready(&c, sid, Duration::from_secs(30), |code, b| {
            code == 200 && b["writes"]["leader"] != old
        })
        .await;
        saw_not_ready |= lost["status"] == "not ready";
        new_leader = back["writes"]["leader"].as_u64();
        assert_eq!(json(admin(&c, sid), "/health").await.0, 200);
    }
    assert!(
        saw_not_ready,
        "no survivor was seen not ready while it had no leader"
    );
    // Quorum loss: the survivor is healthy, not ready (no writes), and says why.
    let gone = new_leader.unwrap();
    let last = *survivors.iter().find(|s| **s != gone).unwrap();
    c.stop(gone).await;
    let body = until_ready(&c, last, Duration::from_secs(20), |code, _| code == 503).await;
    assert_eq!(body["writes"]["ok"], false, "{body}");
    assert!(
        body["writes"]["reason"]
            .as_str()
            .unwrap()
            .contains("no leader"),
        "{body}"
    );
    assert_eq!(body["reads"]["ok"], true, "{body}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(json(admin(&c, last), "/ready").await.0, 503);
    let (code, health) = json(admin(&c, last), "/health").await;
    assert_eq!(
        (code, &health["status"]),
        (200, &Json::from("ok")),
        "{health}"
    );
    c.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_errors_and_the_whitelist() {
    let mut c = Cluster::new(1, &format!("{ADMIN}\n4lw.commands.whitelist=ruok, srvr"));
    c.start_all().await;
    c.wait_stable(Duration::from_secs(20)).await;
    let (a, addr) = (admin(&c, 1), c.addr(1));
    // Off the whitelist on the client port: refused in text; on it: answered.
    assert_eq!(four(addr, "ruok").await, "imok");
    assert!(four(addr, "srvr").await.contains("Mode: leader"));
    assert_eq!(
        four(addr, "stat").await,
        "stat is not executed because it is not in the whitelist.\n"
    );
    assert!(four(addr, "kill")
        .await
        .starts_with("kill is not executed because it is not a four-letter word"));
    // Every word as JSON, by AdminServer name and by alias.
    let (code, list) = json(a, "/commands").await;
    assert_eq!(code, 200);
    assert_eq!(list["commands"].as_array().unwrap().len(), 11);
    for (name, field) in [
        ("ruok", "command"),
        ("server_stats", "server_state"),
        ("stats", "connections"),
        ("monitor", "zk_server_state"),
        ("configuration", "clientPortAddress"),
        ("connections", "connections"),
        ("stat_reset", "command"),
        ("environment", "os.name"),
        ("dirs", "datadir_size"),
        ("is_read_only", "read_only"),
        ("watch_summary", "num_total_watches"),
        (
            "mntr",
            "fe_meta_requests_total{class=\"write\",status=\"OK\"}",
        ),
    ] {
        let (code, body) = json(a, &format!("/commands/{name}")).await;
        assert_eq!(code, 200, "{name}: {body}");
        assert!(body.get(field).is_some(), "{name} lacks {field}: {body}");
        assert_eq!(body["error"], Json::Null, "{name}");
    }
    let (_, dirs) = json(a, "/commands/dirs").await;
    assert!(dirs["datadir_size"].as_u64().unwrap() > 0, "{dirs}");
    let (_, isro) = json(a, "/commands/isro").await;
    assert_eq!(isro["read_only"], false);
    let (code, body) = json(a, "/commands/kill").await;
    assert_eq!(code, 404);
    assert!(body["error"].as_str().unwrap().contains("unknown command"));
    assert_eq!(json(a, "/nope").await.0, 404);
    assert_eq!(http(a, "POST", "/metrics").await.0, 405);
    c.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_admin_port_leaves_the_server_running_without_it() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let mut c = Cluster::new(
        1,
        &format!("admin.serverAddress=127.0.0.1\nadmin.serverPort={port}"),
    );
    c.start_all().await;
    c.wait_stable(Duration::from_secs(20)).await;
    assert_eq!(c.servers[&1].admin_addr(), None);
    assert_eq!(four(c.addr(1), "ruok").await, "imok");
    c.stop_all().await;
    let mut off = Cluster::new(1, "admin.enableServer=false");
    off.start_all().await;
    assert_eq!(off.servers[&1].admin_addr(), None);
    off.stop_all().await;
}
