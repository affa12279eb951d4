//! The `fe-meta` binary end to end: `local-cluster` in a temp dir on free loopback ports, the
//! client commands against it (a write through one node seen on another, `--json` output,
//! exit codes per error kind, membership changes with `add-follower` / `add-observer` /
//! `drop-frontend` seen in `show-config`, `show-frontends` and `status`), a second run
//! reusing the folder, a killed node reported while
//! the other two take writes, and clean stops on SIGTERM and SIGINT that leave no process behind.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_fe-meta");

/// A base port whose 3 client, quorum and election ports are all free now.
fn free_base_port() -> u16 {
    for attempt in 0..200u32 {
        let base = 20_000 + ((std::process::id() * 97 + attempt * 331) % 40_000) as u16;
        let ports = (0..3).flat_map(|i| [base + i, base + 100 + i, base + 200 + i]);
        let listeners: Vec<_> = ports.map(|p| TcpListener::bind(("127.0.0.1", p))).collect();
        if listeners.iter().all(Result::is_ok) {
            return base;
        }
    }
    panic!("no free port range");
}

struct Cluster {
    child: Child,
    endpoints: Vec<String>,
    /// The supervisor's stderr lines so far.
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Cluster {
    /// Waits up to 10 s for a stderr line containing `needle`.
    fn wait_stderr(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(l) = self
                .stderr
                .lock()
                .unwrap()
                .iter()
                .find(|l| l.contains(needle))
            {
                return l.clone();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("local-cluster never said {needle:?}");
    }
}

/// Starts `local-cluster` and reads its endpoints (the stdout lines `127.0.0.1:PORT`).
fn start(dir: &Path, base: u16) -> Cluster {
    let mut child = Command::new(BIN)
        .args(["local-cluster", "--nodes", "3", "--wait-secs", "40"])
        .arg("--dir")
        .arg(dir)
        .arg("--base-port")
        .arg(base.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let (errs, pipe) = (stderr.clone(), child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            eprintln!("local-cluster (stderr): {line}");
            errs.lock().unwrap().push(line);
        }
    });
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            println!("local-cluster: {line}");
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut endpoints = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(45);
    while endpoints.len() < 3 {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.starts_with("127.0.0.1:") => endpoints.push(line),
            Ok(_) => {}
            Err(e) => {
                let _ = child.kill();
                panic!("local-cluster printed no endpoints: {e}");
            }
        }
    }
    Cluster {
        child,
        endpoints,
        stderr,
    }
}

/// Sends `sig` and expects a clean exit (code 0) within 20 s, with no process left that
/// runs from `dir`.
fn stop(mut c: Cluster, sig: Signal, dir: &Path) {
    kill(Pid::from_raw(c.child.id() as i32), sig).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = c.child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = c.child.kill();
            panic!("local-cluster did not stop on {sig}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "local-cluster exited with {status}");
    assert_eq!(
        processes_under(dir),
        Vec::<u32>::new(),
        "leftover processes"
    );
}

/// Pids of processes whose command line mentions `dir` (the nodes' `--config` paths).
fn processes_under(dir: &Path) -> Vec<u32> {
    let needle = dir.canonicalize().unwrap().to_string_lossy().into_owned();
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .map(|s| s.contains(") Z "))
            .unwrap_or(false);
        if cmdline.contains(&needle) && cmdline.contains(" server ") && !zombie {
            pids.push(pid);
        }
    }
    pids
}

fn cli(server: &str, args: &[&str]) -> Output {
    let out = Command::new(BIN)
        .args(args)
        .args(["--server", server])
        .output()
        .unwrap();
    println!(
        "$ fe-meta {} --server {server}  -> {:?}\n{}{}",
        args.join(" "),
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn json(server: &str, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = cli(server, &all);
    assert!(out.status.success(), "{args:?} failed");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn local_cluster_serves_the_cli_and_stops_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cluster");
    let base = free_base_port();
    let c = start(&dir, base);
    let [a, b, _] = [&c.endpoints[0], &c.endpoints[1], &c.endpoints[2]];
    assert_eq!(*a, format!("127.0.0.1:{base}"));
    writes_through_one_node_are_read_on_another(a, b);
    error_kinds_have_their_exit_codes(a, b, base);
    membership_changes_through_the_cli(a, b, base);
    stop(c, Signal::SIGTERM, &dir);

    // A second run reuses the folder: same ports, same data.
    let c = start(&dir, free_base_port());
    assert_eq!(c.endpoints[0], format!("127.0.0.1:{base}"));
    let shown = json(&c.endpoints[2], &["show-backends", "--sync"]);
    assert_eq!(shown["backends"].as_array().unwrap().len(), 1);

    // A node that dies is reported; the other two still take writes.
    let node3 = processes_under(&dir.join("node3"));
    assert_eq!(node3.len(), 1, "{node3:?}");
    kill(Pid::from_raw(node3[0] as i32), Signal::SIGKILL).unwrap();
    let said = c.wait_stderr(&format!("node 3 (pid {}) exited", node3[0]));
    assert!(said.contains("signal 9"), "{said}");
    let w = cli(
        &c.endpoints[0],
        &["create-db", "after_node3", "--timeout", "20"],
    );
    assert!(w.status.success());
    stop(c, Signal::SIGINT, &dir);
}

/// A write through one node is seen on another (sync read), in tables and JSON.
fn writes_through_one_node_are_read_on_another(a: &str, b: &str) {
    let w = json(a, &["add-backend", "10.0.0.7:9050"]);
    assert!(w["journal_id"].as_u64().unwrap() > 0);
    let shown = json(b, &["show-backends", "--sync"]);
    let backends = shown["backends"].as_array().unwrap();
    assert_eq!(backends.len(), 1);
    assert_eq!(backends[0]["host"], "10.0.0.7");
    assert_eq!(backends[0]["heartbeat_port"], 9050);
    assert_eq!(backends[0]["state"], "NORMAL");
    let table = cli(b, &["show-backends"]);
    assert!(String::from_utf8_lossy(&table.stdout).contains("10.0.0.7"));

    assert!(cli(a, &["create-db", "sales"]).status.success());
    let columns = ["-C", "id:BIGINT:key", "-C", "note:VARCHAR(64):null"];
    let mut create = vec!["create-table", "sales", "orders"];
    create.extend(columns);
    assert!(cli(b, &create).status.success());
    let tables = json(a, &["show-tables", "sales", "--sync"]);
    assert_eq!(tables["tables"][0]["columns"][1]["type"], "VARCHAR(64)");
    // A database renamed through one node keeps its tables, on every node.
    let renamed = json(b, &["rename-db", "sales", "shop"]);
    assert!(renamed["journal_id"].as_u64().unwrap() > 0);
    let tables = json(a, &["show-tables", "shop", "--sync"]);
    assert_eq!(tables["tables"][0]["name"], "orders");
    assert!(cli(b, &["set-var", "query_timeout", "300"])
        .status
        .success());
    let v = json(a, &["get-var", "query_timeout", "--sync"]);
    assert_eq!(v["value"], "300");
    let fe = json(b, &["show-frontends"]);
    let rows = fe["frontends"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows.iter().filter(|r| r["is_leader"] == true).count(), 1);
    let st = json(a, &["status"]);
    assert!(["leader", "follower"].contains(&st["mode"].as_str().unwrap()));
}

/// A follower and an observer added through one node (neither started: the follower stays
/// joining) show in every view with the new configuration version; dropped again, the
/// configuration is the original three; malformed lines are usage errors, a drop of a
/// non-member is INVALID_ARGUMENT.
fn membership_changes_through_the_cli(a: &str, b: &str, base: u16) {
    let before = json(b, &["show-config"]);
    assert_eq!(before["members"].as_array().unwrap().len(), 3);
    assert_eq!(before["tick_time_ms"].as_u64().map(|t| t > 0), Some(true));

    // Ports nothing listens on: the new members are never started.
    let [q, e, p] = [base + 300, base + 301, base + 302];
    let follower = format!("server.8=127.0.0.1:{q}:{e};127.0.0.1:{p}");
    let added = json(a, &["add-follower", &follower]);
    let version = added["version"].as_u64().unwrap();
    assert!(version > before["version"].as_u64().unwrap());
    let members = added["config"]["members"].as_array().unwrap();
    let eight = members.iter().find(|m| m["sid"] == 8).unwrap();
    assert_eq!(eight["state"], "joining");
    assert_eq!(eight["address"], follower.trim_start_matches("server.8="));
    let observer = format!(
        "server.7=127.0.0.1:{}:{};127.0.0.1:{}",
        base + 303,
        base + 304,
        base + 305
    );
    let added = json(b, &["add-observer", &observer]);
    let version = added["version"].as_u64().unwrap();

    let shown = json(a, &["show-frontends", "--sync"]);
    assert_eq!(shown["config_version"].as_u64(), Some(version));
    let rows = shown["frontends"].as_array().unwrap();
    assert_eq!(rows.len(), 5);
    let row = |sid: u64| rows.iter().find(|r| r["sid"] == sid).unwrap();
    assert_eq!(
        (row(8)["joining"].clone(), row(8)["alive"].clone()),
        (true.into(), false.into())
    );
    assert_eq!(
        (row(7)["role"].clone(), row(7)["joining"].clone()),
        ("OBSERVER".into(), false.into())
    );
    let table = String::from_utf8_lossy(&cli(a, &["show-frontends"]).stdout).into_owned();
    assert!(table.contains("JOINING"), "{table}");
    let st = json(a, &["status"]);
    assert_eq!(st["config_version"].as_u64(), Some(version));
    let text = String::from_utf8_lossy(&cli(b, &["show-config"]).stdout).into_owned();
    assert!(
        text.contains(&follower) && text.contains("JOINING"),
        "{text}"
    );

    for sid in ["8", "7"] {
        let dropped = json(b, &["drop-frontend", sid]);
        assert!(dropped["version"].as_u64().unwrap() > version);
    }
    let after = json(a, &["show-config"]);
    assert_eq!(after["members"], before["members"]);

    let code = |args: &[&str], server: &str| cli(server, args).status.code();
    assert_eq!(code(&["drop-frontend", "9"], a), Some(14));
    assert_eq!(code(&["add-follower", "bogus"], a), Some(2));
    // Checked before connecting: a usage error even where nothing listens.
    let closed = format!("127.0.0.1:{}", base + 9);
    assert_eq!(code(&["add-observer", "server.9=h:1:2"], &closed), Some(2));
    let no_client = format!("server.9=127.0.0.1:{q}:{e}");
    let err = cli(a, &["add-follower", &no_client]);
    assert_eq!(err.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&err.stderr).contains("no client port"));
}

/// Server errors exit with 10 + their status, usage errors with 2, connection errors with 3;
/// the error is one line on stderr.
fn error_kinds_have_their_exit_codes(a: &str, b: &str, base: u16) {
    let code = |args: &[&str], server: &str| cli(server, args).status.code();
    assert_eq!(code(&["add-backend", "10.0.0.7:9050"], b), Some(18));
    assert_eq!(code(&["drop-db", "nope"], a), Some(17));
    assert_eq!(code(&["rename-db", "nope", "x"], a), Some(17));
    assert_eq!(code(&["rename-db", "shop", "9bad"], a), Some(14));
    assert_eq!(code(&["create-db", "9bad name"], a), Some(14));
    assert_eq!(code(&["add-backend", "no-port"], a), Some(2));
    let closed = format!("127.0.0.1:{}", base + 9);
    assert_eq!(
        code(&["status", "--connect-timeout", "2"], &closed),
        Some(3)
    );
    let err = cli(a, &["drop-db", "nope"]);
    let msg = String::from_utf8_lossy(&err.stderr);
    assert_eq!(msg.lines().count(), 1, "one line: {msg}");
    assert!(msg.contains("NOT_FOUND"), "{msg}");
}
