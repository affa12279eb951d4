//! The operator's path with the `fe-meta` binary: a fourth node started with `--helper` before
//! it is added says so (with the exact add-follower command), joins once `add-follower` ran,
//! is promoted; restarted with a zoo.cfg that lists only itself it logs where zoo.cfg differs
//! from the committed configuration and runs with the committed one; dropped with
//! `drop-frontend` it exits with status 6, and restarted on its old data it refuses with
//! status 6 and says how to add it again.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_fe-meta");
const LIMIT: Duration = Duration::from_secs(30);

/// A base port whose 4 client, quorum and election ports are all free now (local-cluster uses
/// base+i, base+100+i, base+200+i; the fourth node takes i = 3).
fn free_base_port() -> u16 {
    for attempt in 0..200u32 {
        let base = 20_000 + ((std::process::id() * 89 + attempt * 337) % 40_000) as u16;
        let ports = (0..4).flat_map(|i| [base + i, base + 100 + i, base + 200 + i]);
        let listeners: Vec<_> = ports.map(|p| TcpListener::bind(("127.0.0.1", p))).collect();
        if listeners.iter().all(Result::is_ok) {
            return base;
        }
    }
    panic!("no free port range");
}

/// A child process whose stderr lines are collected; killed when dropped.
struct Proc {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    name: String,
}

impl Proc {
    fn spawn(name: &str, cmd: &mut Command) -> Proc {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        for pipe in [
            Box::new(child.stderr.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stdout.take().unwrap()),
        ] {
            let (lines, name) = (lines.clone(), name.to_string());
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    eprintln!("{name}: {line}");
                    lines.lock().unwrap().push(line);
                }
            });
        }
        Proc {
            child,
            lines,
            name: name.to_string(),
        }
    }

    /// Waits for an output line containing every one of `needles`.
    fn wait_line(&self, needles: &[&str]) -> String {
        let deadline = Instant::now() + LIMIT;
        while Instant::now() < deadline {
            let lines = self.lines.lock().unwrap();
            if let Some(l) = lines.iter().find(|l| needles.iter().all(|n| l.contains(n))) {
                return l.clone();
            }
            drop(lines);
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("{} never printed a line with {needles:?}", self.name);
    }

    /// How many output lines so far contain every one of `needles`.
    fn count_lines(&self, needles: &[&str]) -> usize {
        let lines = self.lines.lock().unwrap();
        lines
            .iter()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .count()
    }

    fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + LIMIT;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "{} did not exit", self.name);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn terminate(&mut self) -> ExitStatus {
        kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM).unwrap();
        self.wait_exit()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `fe-meta ARGS` to completion: (exit code, stdout).
fn cli(args: &[&str]) -> (i32, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    eprintln!(
        "fe-meta {args:?} -> {:?}\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Member `sid`'s state in `server`'s committed configuration (show-config --json).
fn member_state(server: &str, sid: u64) -> Option<String> {
    let (code, out) = cli(&["show-config", "--json", "--server", server]);
    if code != 0 {
        return None;
    }
    let v: Value = serde_json::from_str(&out).ok()?;
    v["members"]
        .as_array()?
        .iter()
        .find(|m| m["sid"] == sid)
        .and_then(|m| m["state"].as_str().map(str::to_string))
}

fn wait_state(server: &str, sid: u64, state: &str) {
    let deadline = Instant::now() + LIMIT;
    while member_state(server, sid).as_deref() != Some(state) {
        assert!(
            Instant::now() < deadline,
            "server {sid} not {state} at {server}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn start_server(name: &str, config: &Path, helper: Option<&str>) -> Proc {
    let mut cmd = Command::new(BIN);
    cmd.env("RUST_LOG", "info")
        .arg("server")
        .arg("--config")
        .arg(config);
    if let Some(h) = helper {
        cmd.args(["--helper", h]);
    }
    Proc::spawn(name, &mut cmd)
}

/// `fe-meta local-cluster` of three servers in `dir`, client ports from `base`.
fn start_local_cluster(dir: &Path, base: u16) -> Proc {
    Proc::spawn(
        "local-cluster",
        Command::new(BIN)
            .args(["local-cluster", "--nodes", "3", "--wait-secs", "40"])
            .arg("--dir")
            .arg(dir)
            .arg("--base-port")
            .arg(base.to_string()),
    )
}

/// The cluster-wide zoo.cfg keys as `server`'s show-config prints them, as zoo.cfg lines.
fn cluster_keys(server: &str) -> String {
    let (_, out) = cli(&["show-config", "--json", "--server", server]);
    let shown: Value = serde_json::from_str(&out).unwrap();
    format!(
        "tickTime={}\ninitLimit={}\nsyncLimit={}\nclusterId={}\n",
        shown["tick_time_ms"], shown["init_limit"], shown["sync_limit"], shown["cluster_id"]
    )
}

/// Runs `fe-meta sync` against `server` until it succeeds; `what` names it in the failure.
fn wait_serving(server: &str, what: &str) {
    let deadline = Instant::now() + LIMIT;
    while cli(&["sync", "--server", server]).0 != 0 {
        assert!(Instant::now() < deadline, "{what} never served");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The server that joins: its `server.4=...` line, its minimal zoo.cfg text and its client
/// address.
struct Server4 {
    line: String,
    minimal: String,
    me: String,
}

/// Server 4's data dir under `root` (with its myid), and a zoo.cfg with dataDir, clientPort
/// and its own line only; its ports are `base` + 103, + 203 and + 3.
fn server_4(root: &Path, base: u16) -> Server4 {
    let dir: PathBuf = root.join("fe4");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("myid"), "4\n").unwrap();
    let (q, e, c) = (base + 103, base + 203, base + 3);
    let line = format!("server.4=127.0.0.1:{q}:{e};127.0.0.1:{c}");
    let minimal = format!("dataDir={}\nclientPort={c}\n{line}\n", dir.display());
    Server4 {
        line,
        minimal,
        me: format!("127.0.0.1:{c}"),
    }
}

#[test]
fn a_node_joins_with_a_helper_and_leaves_with_status_6() {
    let tmp = tempfile::tempdir().unwrap();
    let base = free_base_port();
    let cluster = start_local_cluster(&tmp.path().join("lc"), base);
    let helper = format!("127.0.0.1:{base}");
    cluster.wait_line(&[&format!("127.0.0.1:{}", base + 2)]);
    wait_state(&helper, 3, "participant");

    let Server4 { line, minimal, me } = server_4(tmp.path(), base);
    let config = tmp.path().join("fe4.cfg");
    std::fs::write(&config, &minimal).unwrap();

    // Started before it is added: it waits and names the command.
    let mut node4 = start_server("fe4", &config, Some(&helper));
    node4.wait_line(&[
        "server 4 is not a member of cluster",
        &format!("fe-meta add-follower \"{line}\""),
    ]);
    assert!(node4.child.try_wait().unwrap().is_none());
    assert_eq!(cli(&["add-follower", &line, "--server", &helper]).0, 0);
    node4.wait_line(&["fe-meta server started"]);
    wait_state(&helper, 4, "participant");
    wait_state(&me, 4, "participant");
    assert_eq!(cli(&["create-db", "joined", "--server", &me]).0, 0);

    // Restarted without --helper, its zoo.cfg listing only itself (with the cluster's keys,
    // as show-config prints them): one line says where it differs from the committed
    // configuration, and it runs with the committed one.
    assert!(node4.terminate().success());
    let keys = cluster_keys(&helper);
    std::fs::write(&config, format!("{minimal}{keys}")).unwrap();
    let mut node4 = start_server("fe4 (restart)", &config, None);
    let stale = [
        "zoo.cfg's server.N lines differ from the cluster's configuration in the data dir",
        "only in the data dir: [1, 2, 3]",
    ];
    node4.wait_line(&stale);
    node4.wait_line(&["fe-meta server started"]);
    assert_eq!(node4.count_lines(&stale[..1]), 1, "one line, not more");
    wait_serving(&me, "the restarted node");

    // Dropped while running: one line, then exit status 6.
    assert_eq!(cli(&["drop-frontend", "4", "--server", &helper]).0, 0);
    let status = node4.wait_exit();
    assert_eq!(status.code(), Some(6), "{status:?}");
    node4.wait_line(&[
        "this server was removed from the cluster by configuration version",
        ": closing the client port and exiting with status 6 (do not restart it",
    ]);

    // Its data dir refuses to start (with --helper too), status 6, with the way back.
    let mut again = start_server("fe4 (old data)", &config, Some(&helper));
    let status = again.wait_exit();
    assert_eq!(status.code(), Some(6), "{status:?}");
    again.wait_line(&[
        "refusing to start: server 4 was removed",
        &format!("fe-meta add-follower \"{line}\""),
        "--helper",
    ]);

    // The cluster goes on without it.
    assert_eq!(cli(&["create-db", "after", "--server", &helper]).0, 0);
    let mut cluster = cluster;
    assert!(cluster.terminate().success());
}
