//! A printing command whose reader went away (`fe-meta check-config FILE | head -0`) ends the
//! way `cat` does, by SIGPIPE, and never panics on the closed pipe; a server's behaviour is not
//! changed (it keeps SIGPIPE ignored and handles write errors itself).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

#[test]
fn check_config_into_a_closed_pipe_ends_by_sigpipe_without_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("zoo.cfg");
    std::fs::write(
        &cfg,
        "tickTime=2000\ninitLimit=10\nsyncLimit=5\nclientPort=9630\n",
    )
    .unwrap();
    // The read end is closed before the child starts, so its first write fails for certain.
    let (read_end, write_end) = nix::unistd::pipe().unwrap();
    drop(read_end);
    let out = Command::new(env!("CARGO_BIN_EXE_fe-meta"))
        .arg("check-config")
        .arg(&cfg)
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        out.status.signal(),
        Some(nix::sys::signal::Signal::SIGPIPE as i32),
        "{:?}, stderr: {stderr}",
        out.status
    );
}
