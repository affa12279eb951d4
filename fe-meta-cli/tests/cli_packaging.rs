//! The files of `packaging/` agree with the code: the sample zoo.cfg loads as a server
//! configuration with the documented ports, and the systemd unit's exit-status rules and paths
//! match the server's exit codes and that zoo.cfg.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::PathBuf;

use fe_meta::server::{ServerConfig, FATAL_EXIT_STATUS, REMOVED_EXIT_STATUS};

fn packaging(file: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../packaging")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The value of the first `key=` line of `text`.
fn value<'t>(text: &'t str, key: &str) -> &'t str {
    text.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key}= line"))
}

#[test]
fn the_sample_zoo_cfg_loads_with_the_documented_ports() {
    let text = packaging("zoo.cfg");
    assert_eq!(value(&text, "dataDir"), "/var/lib/fe-meta");
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("myid"), "2\n").unwrap();
    let cfg = tmp.path().join("zoo.cfg");
    let moved = text.replace(
        "dataDir=/var/lib/fe-meta",
        &format!("dataDir={}", data.display()),
    );
    std::fs::write(&cfg, moved).unwrap();

    let c = ServerConfig::load(&cfg).unwrap();
    assert_eq!(c.sid, 2);
    assert_ne!(c.cluster_id, 0);
    assert!(c.client_listen.ends_with(":9630"), "{}", c.client_listen);
    assert_eq!(c.admin_listen.as_deref(), Some("0.0.0.0:9930"));
    assert_eq!(c.members.len(), 3);
    for (sid, m) in &c.members {
        assert_eq!(m.client_port, 9630, "server.{sid}");
    }
    assert_eq!(c.node.servers.len(), 3);
    for s in c.node.servers.values() {
        assert_eq!((s.quorum_port, s.election_port), (9730, 9830), "{s:?}");
    }
}

#[test]
fn the_systemd_unit_restarts_on_failure_but_not_a_removed_server() {
    let unit = packaging("fe-meta.service");
    assert_eq!(value(&unit, "Restart"), "on-failure");
    let prevented: Vec<i32> = value(&unit, "RestartPreventExitStatus")
        .split_whitespace()
        .map(|s| s.parse().unwrap())
        .collect();
    assert!(
        prevented.contains(&i32::from(REMOVED_EXIT_STATUS)),
        "{prevented:?}"
    );
    assert!(
        !prevented.contains(&i32::from(FATAL_EXIT_STATUS)),
        "{prevented:?}"
    );
    assert_eq!(
        value(&unit, "ExecStart"),
        "/usr/local/bin/fe-meta server --config /etc/fe-meta/zoo.cfg"
    );
    let data_dir = value(&packaging("zoo.cfg"), "dataDir").to_owned();
    assert_eq!(value(&unit, "ReadWritePaths"), data_dir);
    assert_eq!(value(&unit, "User"), "fe-meta");
    let nofile: u64 = value(&unit, "LimitNOFILE").parse().unwrap();
    assert!(nofile >= 4096, "{nofile}");
}
