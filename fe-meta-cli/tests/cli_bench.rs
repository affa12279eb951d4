//! `fe-meta bench` end to end with tiny parameters: it launches its own 3-node cluster on free
//! loopback ports, runs a read, a pipelined write, one leader kill (W4) and one follower
//! catch-up (W5), and reports every figure with the anchors' keys; the cluster's processes
//! and folder are gone afterwards.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_fe-meta");

/// A base port whose client, quorum and election ports are free now, below the ephemeral
/// range (32768..) so no outgoing connection can take one meanwhile.
fn free_base_port() -> u16 {
    for attempt in 0..200u32 {
        let base = 21_000 + ((std::process::id() * 53 + attempt * 331) % 11_000) as u16;
        let ports = (0..3).flat_map(|i| [base + i, base + 100 + i, base + 200 + i]);
        let listeners: Vec<_> = ports.map(|p| TcpListener::bind(("127.0.0.1", p))).collect();
        if listeners.iter().all(Result::is_ok) {
            return base;
        }
    }
    panic!("no free port range");
}

fn num(row: &Value, key: &str) -> f64 {
    row[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {row}"))
}

#[test]
fn bench_runs_reads_writes_a_failover_and_a_catch_up_on_its_own_cluster() {
    let tmp = tempfile::tempdir().unwrap();
    let doc = run_bench(tmp.path());
    let rows = doc["results"].as_array().unwrap();
    let find = |w: &str, pred: &dyn Fn(&Value) -> bool| -> Value {
        rows.iter()
            .find(|r| r["workload"] == w && pred(r))
            .unwrap_or_else(|| panic!("no {w} row in {doc:#}"))
            .clone()
    };
    check_steady(&find("W0", &|_| true), &find("W2", &|_| true));
    check_failover(
        &find("W4", &|r| r.get("trial").is_some()),
        &find("W4", &|r| r.get("summary").is_some()),
    );
    for label in ["ens-set", "ens-create"] {
        check_catchup(&find("W5", &|r| r["label"] == label));
    }
    // The launched cluster's folder is removed with it.
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "bench left {left:?} behind");
}

/// Runs a short W0, W2, W4, W5 bench on its own cluster under `dir` (150 s at most); its
/// JSON document.
fn run_bench(dir: &std::path::Path) -> Value {
    let base = free_base_port();
    let mut child = Command::new(BIN)
        .args(["bench", "--workload", "W0,W2,W4,W5", "--warm", "0.2"])
        .args(["--run", "0.6", "--trials", "1", "--w5-txns", "300"])
        .args(["--w2-outstanding", "50", "--quiet-max-wait", "0", "--json"])
        .args(["--base-port", &base.to_string()])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(150);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("bench did not finish within 150 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench failed: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn check_steady(w0: &Value, w2: &Value) {
    assert_eq!(w0["label"], "ens-leader");
    assert!(num(w0, "ops") > 0.0 && num(w0, "p50_us") > 0.0, "{w0}");
    assert_eq!(w0["pre_busy_cores"], "NA", "the gate was off");
    assert_eq!(num(w2, "errors"), 0.0, "{w2}");
    assert!(
        num(w2, "ops") > 0.0 && num(w2, "outstanding") == 50.0,
        "{w2}"
    );
    // The latency histogram: every measured W0 read in exactly one bucket, bounds rising.
    let buckets = w0["histogram"].as_array().expect("W0 has a histogram");
    let total: u64 = buckets.iter().map(|b| b["count"].as_u64().unwrap()).sum();
    assert_eq!(total as f64, num(w0, "ops"), "{w0}");
    let bounds: Vec<f64> = buckets
        .iter()
        .map(|b| b["le_us"].as_f64().unwrap())
        .collect();
    assert!(bounds.windows(2).all(|w| w[0] < w[1]), "{bounds:?}");
    assert!(
        bounds.last().copied().unwrap_or(0.0) >= num(w0, "max_us"),
        "{w0}"
    );
    assert!(
        w2["histogram"].as_array().is_some_and(|b| !b.is_empty()),
        "{w2}"
    );
}

fn check_failover(trial: &Value, summary: &Value) {
    assert_ne!(trial["killed"], trial["new_leader"], "{trial}");
    assert!(num(trial, "new_leader_reported_ms") > 0.0, "{trial}");
    assert!(num(trial, "fresh_client_first_write_ms") > 0.0, "{trial}");
    assert!(num(trial, "unavail_ms") > 0.0, "{trial}");
    assert!(
        num(trial, "ops_after") > num(trial, "ops_before"),
        "{trial}"
    );
    assert_eq!(num(summary, "trials"), 1.0);
}

fn check_catchup(w5: &Value) {
    assert_eq!(num(w5, "txns"), 300.0, "{w5}");
    assert_eq!(num(w5, "write_errors"), 0.0, "{w5}");
    assert!(num(w5, "restart_to_caught_up_ms") >= 0.0, "{w5}");
    assert!(
        num(w5, "restart_to_caught_up_ms") >= num(w5, "restart_to_serving_ms"),
        "{w5}"
    );
    assert!(w5["leader_zxid"].as_str().unwrap().starts_with("0x"));
}
