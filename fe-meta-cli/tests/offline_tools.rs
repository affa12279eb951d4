//! The offline tools end to end through the `fe-meta` binary: `dump-log` of a txn log whose
//! last segment is cut mid-record (the torn tail and every record before it), of a log with a
//! damaged record in the middle (reported by zxid, exit 1), `check-config` listing every error
//! of one file, `verify-image` of a good and a damaged snapshot, and `inspect` of a fresh
//! 3-node `local-cluster` data dir after a write.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fe_meta::state::catalog::Database;
use fe_meta::Op;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use zab_core::{Epoch, Txn, TxnKind, Zxid};
use zab_store::{LogOptions, TxnLog};

const BIN: &str = env!("CARGO_BIN_EXE_fe-meta");

fn fe_meta(args: &[&str]) -> Output {
    let out = Command::new(BIN).args(args).output().unwrap();
    println!(
        "$ fe-meta {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn z(counter: u32) -> Zxid {
    Zxid::new(Epoch(1), counter)
}

/// The journal op of record `i`: CREATE_DB of database `db<i>`.
fn op(i: u32) -> Op {
    Op::CreateDb(Database {
        id: u64::from(i) + 100,
        name: format!("db{i}"),
    })
}

/// A log in `dir` of `n` CREATE_DB records (zxids 1..=n of epoch 1) in one segment; the
/// segment's path and each record's end offset.
fn write_log(dir: &Path, n: u32) -> (PathBuf, Vec<u64>) {
    let opts = LogOptions {
        prealloc_bytes: 1 << 16,
        force_sync: false,
    };
    let (mut log, _) = TxnLog::open(dir, opts).unwrap();
    let mut ends = Vec::new();
    let mut end = 32u64;
    for i in 1..=n {
        let data = op(i).to_entry().encode();
        end += 20 + data.len() as u64;
        ends.push(end);
        log.append(&Txn {
            zxid: z(i),
            data: data.into(),
            kind: TxnKind::App,
        })
        .unwrap();
    }
    log.sync().unwrap();
    drop(log);
    let seg = dir.join(format!("log.{:016x}", z(1).0));
    assert!(seg.exists());
    (seg, ends)
}

/// Cuts `file` to `len` bytes.
fn cut(file: &Path, len: u64) {
    let f = std::fs::OpenOptions::new().write(true).open(file).unwrap();
    f.set_len(len).unwrap();
}

/// The zxids of a `dump-log --json` document's records, in order.
fn json_zxids(json: &Value) -> Vec<u64> {
    json["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["zxid"].as_u64().unwrap())
        .collect()
}

#[test]
fn dump_log_reports_a_torn_tail_and_every_record_before_it() {
    let d = tempfile::tempdir().unwrap();
    let (seg, ends) = write_log(d.path(), 5);
    // Cut the file in the middle of record 5's payload (its header is whole).
    cut(&seg, ends[3] + 20 + 5);
    let before = std::fs::read(&seg).unwrap();
    // The torn tail's size: up to its last non-zero byte (what a start zeroes).
    let torn = usize::try_from(ends[3]).unwrap();
    let dirty = before[torn..].iter().rposition(|&b| b != 0).unwrap() + 1;
    assert!(dirty > 20, "the whole header and some payload");

    let dir = d.path().to_str().unwrap();
    check_torn_tail_text(dir, &seg, ends[3], dirty);
    assert_eq!(
        std::fs::read(&seg).unwrap(),
        before,
        "dump-log wrote nothing"
    );
    check_torn_tail_json(dir, ends[3], dirty);

    // Cut inside record 4's header: too short for a header, still reported.
    cut(&seg, ends[2] + 10);
    let text = stdout(&fe_meta(&["dump-log", dir]));
    assert!(text.contains(&format!("last_valid={}", z(3))), "{text}");
    assert!(
        text.contains(&format!(
            "torn tail in {} at offset {}: 10 bytes after the last valid record (the file \
             ends 10 bytes into a record header",
            seg.display(),
            ends[2]
        )),
        "{text}"
    );
}

/// `dump-log` of the log of 5 records torn inside record 5 at offset `torn`, `dirty` bytes
/// long: success, records 1..=4 decoded, the torn tail named.
fn check_torn_tail_text(dir: &str, seg: &Path, torn: u64, dirty: usize) {
    let out = fe_meta(&["dump-log", dir]);
    assert!(out.status.success(), "a torn tail does not stop a start");
    let text = stdout(&out);
    for i in 1..=4 {
        assert!(
            text.contains(&format!("zxid={} kind=app", z(i))),
            "record {i} missing:\n{text}"
        );
        assert!(text.contains(&format!("name: \"db{i}\"")), "{text}");
    }
    assert!(!text.contains(&format!("zxid={} kind", z(5))), "{text}");
    assert!(text.contains("op=CREATE_DB"), "{text}");
    assert!(text.contains(&format!("last_valid={}", z(4))), "{text}");
    assert!(
        text.contains(&format!(
            "torn tail in {} at offset {torn}: {dirty} bytes",
            seg.display(),
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("record of zxid {} claims", z(5))),
        "{text}"
    );
}

/// The same log as JSON: the same records and damage; `--from` and `--limit` select what is
/// printed while the state still covers the whole log.
fn check_torn_tail_json(dir: &str, torn: u64, dirty: usize) {
    let json: Value = serde_json::from_slice(&fe_meta(&["dump-log", dir, "--json"]).stdout)
        .expect("one JSON document");
    assert_eq!(
        json_zxids(&json),
        (1..=4).map(|i| z(i).0).collect::<Vec<_>>()
    );
    assert_eq!(json["records"][0]["op"], "CREATE_DB");
    assert_eq!(json["log"]["last_valid_zxid"], z(4).0);
    assert_eq!(json["log"]["damage"]["kind"], "torn_tail");
    assert_eq!(json["log"]["damage"]["offset"], torn);
    assert_eq!(json["log"]["damage"]["bytes"], dirty);

    let from = z(2).to_string();
    let json: Value = serde_json::from_slice(
        &fe_meta(&["dump-log", dir, "--json", "--from", &from, "--limit", "2"]).stdout,
    )
    .unwrap();
    assert_eq!(json_zxids(&json), vec![z(2).0, z(3).0]);
    assert_eq!(json["log"]["records"], 4);
}

#[test]
fn dump_log_names_the_zxid_of_a_damaged_record() {
    let d = tempfile::tempdir().unwrap();
    let (seg, ends) = write_log(d.path(), 5);
    // Flip a payload byte of record 3: records 4 and 5 after it are valid, so this is
    // corruption, not a torn write.
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = usize::try_from(ends[2]).unwrap() - 2;
    bytes[at] ^= 0x40;
    std::fs::write(&seg, &bytes).unwrap();

    let out = fe_meta(&["dump-log", d.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "a node would refuse this log");
    let text = stdout(&out);
    assert!(text.contains(&format!("zxid={} kind=app", z(2))), "{text}");
    assert!(!text.contains(&format!("zxid={} kind", z(3))), "{text}");
    assert!(
        text.contains(&format!(
            "CORRUPT: {} at offset {}: payload checksum mismatch in record of zxid {}",
            seg.display(),
            ends[1],
            z(3)
        )),
        "{text}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("would not start"), "{stderr}");

    // inspect agrees: a node would refuse this data dir, and says why.
    let out = fe_meta(&["inspect", d.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("would start: NO: txn log: CORRUPT"), "{text}");
    assert_eq!(std::fs::read(&seg).unwrap(), bytes, "nothing was repaired");
}

#[test]
fn check_config_lists_every_error_of_a_file() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("myid"), "1\n").unwrap();
    let cfg = d.path().join("zoo.cfg");
    let good = format!(
        "tickTime=100\ninitLimit=10\nsyncLimit=5\ndataDir={}\n\
         server.1=127.0.0.1:2888:3888;9031\nclusterId=0x5\n",
        data.display()
    );
    std::fs::write(&cfg, &good).unwrap();
    let out = fe_meta(&["check-config", cfg.to_str().unwrap()]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(text.contains("OK; effective configuration"), "{text}");
    assert!(text.contains("clientListen=127.0.0.1:9031"), "{text}");
    assert!(text.contains("snapCount=100000"), "{text}");

    // Three errors on three lines: a bad number, an unknown key, a bad fe-meta value.
    let bad = good.replace("tickTime=100", "tickTime=fast") + "no_such_key=1\nwrite_timeout_ms=0\n";
    std::fs::write(&cfg, bad).unwrap();
    let out = fe_meta(&["check-config", cfg.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["valid"], false);
    let errors: Vec<&str> = json["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors[0].contains("line 1") && errors[0].contains("tickTime"));
    assert!(errors[1].contains("line 7") && errors[1].contains("no_such_key"));
    assert!(errors[2].contains("line 8") && errors[2].contains("write_timeout_ms"));
}

#[test]
fn verify_image_checks_a_snapshot_end_to_end() {
    let d = tempfile::tempdir().unwrap();
    let catalog = fe_meta::Catalog::default();
    let mut w = zab_store::SnapshotWriter::create(d.path(), z(7), 42, None, false).unwrap();
    fe_meta::state::image::write_image(&catalog, &mut w).unwrap();
    let info = w.finish().unwrap();
    let path = info.path.to_str().unwrap();
    let out = fe_meta(&["verify-image", path, "--json"]);
    assert!(out.status.success());
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["valid"], true);
    assert_eq!(json["snapshot"]["zxid"], z(7).0);
    assert_eq!(json["snapshot"]["cluster_id"], 42);
    let digest = fe_meta::state::image::digest(&catalog).unwrap();
    assert_eq!(
        json["digest"],
        fe_meta::state::image::digest_hex(&digest).as_str()
    );

    let mut bytes = std::fs::read(&info.path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    std::fs::write(&info.path, &bytes).unwrap();
    let out = fe_meta(&["verify-image", path]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("INVALID"), "{}", stdout(&out));
}

/// A base port whose 3 client, quorum and election ports are all free now.
fn free_base_port() -> u16 {
    for attempt in 0..200u32 {
        let base = 20_000 + ((std::process::id() * 89 + attempt * 337) % 40_000) as u16;
        let ports = (0..3).flat_map(|i| [base + i, base + 100 + i, base + 200 + i]);
        let listeners: Vec<_> = ports.map(|p| TcpListener::bind(("127.0.0.1", p))).collect();
        if listeners.iter().all(Result::is_ok) {
            return base;
        }
    }
    panic!("no free port range");
}

/// Starts `fe-meta local-cluster` of 3 nodes in `dir`; the child and the first client
/// endpoint it prints (the child is killed if none comes within 45 s).
fn start_local_cluster(dir: &Path) -> (Child, String) {
    let mut child = Command::new(BIN)
        .args([
            "local-cluster",
            "--nodes",
            "3",
            "--wait-secs",
            "40",
            "--dir",
        ])
        .arg(dir)
        .args(["--base-port", &free_base_port().to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout_pipe = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout_pipe).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(45);
    let endpoint = loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) if line.starts_with("127.0.0.1:") => break line,
            Ok(_) => {}
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("local-cluster printed no endpoint: {e}");
            }
        }
    };
    (child, endpoint)
}

/// Stops `child` with SIGTERM, killing it if it has not exited within 20 s.
fn stop(mut child: Child) {
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let stop_deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > stop_deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.wait();
}

#[test]
fn inspect_shows_what_a_fresh_local_cluster_node_would_do() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cluster");
    let (child, endpoint) = start_local_cluster(&dir);
    let w = fe_meta(&[
        "create-db",
        "inspected",
        "--server",
        &endpoint,
        "--timeout",
        "20",
    ]);
    stop(child);
    assert!(w.status.success(), "the write succeeded");

    let data = dir.join("node1").join("data");
    check_inspect_json(&data);
    let dump = fe_meta(&["dump-log", data.to_str().unwrap()]);
    assert!(dump.status.success());
    assert!(
        stdout(&dump).contains("name: \"inspected\""),
        "the CREATE_DB is decoded"
    );

    let text = stdout(&fe_meta(&["inspect", data.to_str().unwrap()]));
    assert!(text.contains("would start: yes"), "{text}");
}

/// `inspect --json` of a stopped node's data dir after one write: it would start, with its
/// epochs, valid snapshots, an undamaged log and the write in the log or a snapshot.
fn check_inspect_json(data: &Path) {
    let out = fe_meta(&["inspect", data.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "a stopped node's dir starts");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(json["cluster_id"].as_u64().unwrap() != 0, "{json}");
    assert_eq!(json["removed"], Value::Null);
    assert!(json["current_epoch"].as_u64().unwrap() >= 1, "{json}");
    assert!(json["accepted_epoch"].as_u64() >= json["current_epoch"].as_u64());
    assert_eq!(json["start"]["would_start"], true);
    assert_eq!(json["log"]["damage"], Value::Null);
    for s in json["snapshots"].as_array().unwrap() {
        assert_eq!(s["valid"], true, "{s}");
    }
    // The write is in the log after the loaded snapshot (or in the snapshot).
    let last = json["log"]["last_valid_zxid"].as_u64().unwrap_or(0);
    let snap = json["start"]["snapshot"].as_u64().unwrap_or(0);
    assert!(last.max(snap) > 0, "{json}");
    // No snapshot yet: the configuration is zoo.cfg's, and every log record is replayed.
    if snap == 0 {
        assert_eq!(
            json["start"]["configuration"],
            "zoo.cfg's server.N lines (bootstrap)"
        );
        assert_eq!(json["start"]["replay_records"], json["log"]["records"]);
    }
}
