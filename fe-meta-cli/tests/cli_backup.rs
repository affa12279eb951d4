//! `fe-meta backup` and `fe-meta restore` failures that need no cluster: a backup whose node
//! cannot be reached leaves neither FILE nor FILE.tmp; an existing FILE is never overwritten;
//! restore refuses a file that is not a backup and writes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_fe-meta");

fn fe_meta(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn an_unreachable_node_leaves_no_file() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("b.backup");
    let o = fe_meta(&[
        "backup",
        "--server",
        "127.0.0.1:1",
        "--connect-timeout",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(!out.exists());
    assert!(!d.path().join("b.backup.tmp").exists());
}

#[test]
fn an_existing_file_is_not_overwritten() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("b.backup");
    std::fs::write(&out, "keep").unwrap();
    let o = fe_meta(&[
        "backup",
        "--server",
        "127.0.0.1:1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("exists"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep");
}

#[test]
fn restore_refuses_what_is_not_a_backup_and_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("not.backup");
    std::fs::write(&file, b"FEMETAIM this is an image, not a backup").unwrap();
    let target = d.path().join("data");
    let cfg = d.path().join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "tickTime=100\ninitLimit=5\nsyncLimit=2\ndataDir={}\nclientPort=2\nclusterId=5\n\
             server.1=127.0.0.1:3:4\n",
            target.display()
        ),
    )
    .unwrap();
    let o = fe_meta(&[
        "restore",
        "--from",
        file.to_str().unwrap(),
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("not an fe-meta backup"),
        "{}",
        stderr(&o)
    );
    assert!(!target.exists(), "nothing written");
}
