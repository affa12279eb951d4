//! `--server a,b,c` and `FE_META_SERVER=a,b,c` against a real 3-node `local-cluster`: a closed
//! port first in the list is skipped, a SIGKILLed node first in the list is skipped for reads
//! and writes, every endpoint down fails with exit code 3 naming each of them, and an empty
//! endpoint in the list is a usage error (exit 2) before anything connects.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

const BIN: &str = env!("CARGO_BIN_EXE_fe-meta");

/// A base port whose 3 client, quorum and election ports are all free now.
fn free_base_port() -> u16 {
    for attempt in 0..200u32 {
        let base = 20_000 + ((std::process::id() * 89 + attempt * 347) % 40_000) as u16;
        let ports = (0..3).flat_map(|i| [base + i, base + 100 + i, base + 200 + i]);
        let listeners: Vec<_> = ports.map(|p| TcpListener::bind(("127.0.0.1", p))).collect();
        if listeners.iter().all(Result::is_ok) {
            return base;
        }
    }
    panic!("no free port range");
}

/// A loopback address nothing listens on (bound, then closed).
fn closed_port() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// A running `local-cluster`; dropped (also when a test fails), it is stopped with SIGTERM,
/// which stops its nodes, and waited for (SIGKILL after 20 s).
struct LocalCluster {
    child: Child,
    endpoints: Vec<String>,
}

impl LocalCluster {
    fn start(dir: &Path) -> LocalCluster {
        let mut child = Command::new(BIN)
            .args(["local-cluster", "--nodes", "3", "--wait-secs", "40"])
            .arg("--dir")
            .arg(dir)
            .arg("--base-port")
            .arg(free_base_port().to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut c = LocalCluster {
            child,
            endpoints: Vec::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(45);
        while c.endpoints.len() < 3 {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) if line.starts_with("127.0.0.1:") => c.endpoints.push(line),
                Ok(_) => {}
                Err(e) => panic!("local-cluster printed no endpoints: {e}"),
            }
        }
        c
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        let pid = Pid::from_raw(self.child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The pid of the `fe-meta server` process whose command line mentions `dir`.
fn node_pid(dir: &Path) -> i32 {
    let needle = dir.canonicalize().unwrap().to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(&needle) && cmdline.contains(" server ") {
            found.push(pid);
        }
    }
    assert_eq!(found.len(), 1, "server processes under {needle}: {found:?}");
    found[0]
}

/// Runs `fe-meta ARGS`, with `FE_META_SERVER` set to `env_server` if given.
fn fe_meta(args: &[&str], env_server: Option<&str>) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args).env_remove("FE_META_SERVER");
    if let Some(s) = env_server {
        cmd.env("FE_META_SERVER", s);
    }
    let out = cmd.output().unwrap();
    println!(
        "$ {}fe-meta {}  -> {:?}\n{}{}",
        env_server.map_or(String::new(), |s| format!("FE_META_SERVER={s} ")),
        args.join(" "),
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_cli_moves_to_the_next_endpoint_when_the_first_is_down() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cluster");
    let c = LocalCluster::start(&dir);
    let [n1, n2, n3] = [&c.endpoints[0], &c.endpoints[1], &c.endpoints[2]];

    // A closed port first: skipped, for a write and a read, by flag and by environment.
    let refused = closed_port();
    let list = format!("{refused},{n2},{n3}");
    let w = fe_meta(&["create-db", "first", "--server", &list], None);
    assert!(w.status.success());
    let r = fe_meta(&["show-databases", "--sync", "--json"], Some(&list));
    assert!(r.status.success());
    assert!(stdout(&r).contains("\"first\""), "{}", stdout(&r));

    // Node 1 killed: a list starting with it moves on, for writes and reads.
    kill(Pid::from_raw(node_pid(&dir.join("node1"))), Signal::SIGKILL).unwrap();
    let list = format!("{n1},{n2},{n3}");
    let w = fe_meta(
        &[
            "create-db",
            "after_kill",
            "--server",
            &list,
            "--timeout",
            "20",
        ],
        None,
    );
    assert!(w.status.success());
    let status = fe_meta(&["status", "--json"], Some(&list));
    assert!(status.status.success());
    assert!(
        !stdout(&status).contains(n1.as_str()),
        "status came from the killed node"
    );
    let r = fe_meta(&["show-databases", "--sync", "--server", &list], None);
    assert!(r.status.success());
    assert!(stdout(&r).contains("after_kill"), "{}", stdout(&r));

    // Every endpoint down: exit 3, each named.
    let down = [refused.clone(), n1.clone(), closed_port()];
    let out = fe_meta(&["show-databases", "--server", &down.join(",")], None);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("UNREACHABLE"), "{err}");
    for e in &down {
        assert!(err.contains(e.as_str()), "{e} not named: {err}");
    }
}

#[test]
fn an_empty_endpoint_is_a_usage_error() {
    let out = fe_meta(
        &["show-databases", "--server", "127.0.0.1:1,,127.0.0.1:2"],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("empty endpoint"), "{err}");
}
