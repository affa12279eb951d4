//! VERSION and ROLE: made at the first bootstrap, kept across restarts, and a start with another
//! cluster id, another role or another sid is refused with a message that says why.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

use fe_meta::server::meta_dir::{MetaDir, MetaDirError, StartCheck, ROLE_FILE, VERSION_FILE};
use fe_meta::state::catalog::FrontendRole;

fn check(sid: u64, role: FrontendRole, cluster_id: Option<u64>, may_bootstrap: bool) -> StartCheck {
    StartCheck {
        sid,
        role,
        cluster_id,
        may_bootstrap,
    }
}

#[test]
fn first_bootstrap_makes_a_cluster_id_that_restarts_keep() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = MetaDir::new(tmp.path().join("meta"));
    let first = dir
        .open(&check(1, FrontendRole::Follower, None, true))
        .unwrap();
    assert!(first.bootstrapped);
    assert_ne!(first.cluster_id, 0);
    let text = std::fs::read_to_string(tmp.path().join("meta").join(VERSION_FILE)).unwrap();
    assert!(text.contains(&format!("cluster_id={}", first.cluster_id)));
    let role = std::fs::read_to_string(tmp.path().join("meta").join(ROLE_FILE)).unwrap();
    assert!(role.contains("role=FOLLOWER") && role.contains("sid=1"));

    let again = dir
        .open(&check(1, FrontendRole::Follower, None, true))
        .unwrap();
    assert_eq!(again.cluster_id, first.cluster_id);
    assert!(!again.bootstrapped);
    let told = dir
        .open(&check(
            1,
            FrontendRole::Follower,
            Some(first.cluster_id),
            false,
        ))
        .unwrap();
    assert_eq!(told.cluster_id, first.cluster_id);
}

#[test]
fn joining_node_takes_the_cluster_id_it_is_given() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = MetaDir::new(tmp.path());
    let id = dir
        .open(&check(3, FrontendRole::Observer, Some(42), false))
        .unwrap();
    assert_eq!(
        (id.cluster_id, id.role, id.bootstrapped),
        (42, FrontendRole::Observer, false)
    );
    assert_eq!(dir.read_cluster_id().unwrap(), Some(42));
    assert_eq!(dir.read_role().unwrap(), Some((FrontendRole::Observer, 3)));
}

/// PITFALLS E5: a data dir whose VERSION holds another cluster id refuses to start.
#[test]
fn another_cluster_id_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = MetaDir::new(tmp.path());
    dir.open(&check(1, FrontendRole::Follower, Some(7), false))
        .unwrap();
    let err = dir
        .open(&check(1, FrontendRole::Follower, Some(8), false))
        .unwrap_err();
    assert!(matches!(
        err,
        MetaDirError::ClusterIdMismatch {
            found: 7,
            expected: 8,
            ..
        }
    ));
    let msg = err.to_string();
    assert!(
        msg.starts_with("refusing to start:")
            && msg.contains("cluster 7")
            && msg.contains("cluster 8"),
        "{msg}"
    );
    assert!(msg.contains("VERSION"), "{msg}");
}

/// PITFALLS E5: with no cluster id and no bootstrap, a node refuses to start (no rogue group)
/// and writes nothing.
#[test]
fn missing_cluster_id_without_bootstrap_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let err = MetaDir::new(tmp.path())
        .open(&check(2, FrontendRole::Follower, None, false))
        .unwrap_err();
    assert!(matches!(err, MetaDirError::NoClusterId { .. }));
    assert!(
        err.to_string().contains("may not bootstrap a new cluster"),
        "{err}"
    );
    assert!(
        !tmp.path().join(ROLE_FILE).exists(),
        "nothing written on refusal"
    );
}

#[test]
fn another_role_or_sid_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = MetaDir::new(tmp.path());
    dir.open(&check(1, FrontendRole::Follower, Some(7), false))
        .unwrap();
    let err = dir
        .open(&check(1, FrontendRole::Observer, Some(7), false))
        .unwrap_err();
    assert!(matches!(
        err,
        MetaDirError::RoleMismatch {
            found: "FOLLOWER",
            configured: "OBSERVER",
            ..
        }
    ));
    let msg = err.to_string();
    assert!(
        msg.contains("is a FOLLOWER") && msg.contains("configured as a OBSERVER"),
        "{msg}"
    );
    let err = dir
        .open(&check(2, FrontendRole::Follower, Some(7), false))
        .unwrap_err();
    assert!(
        matches!(
            err,
            MetaDirError::SidMismatch {
                found: 1,
                configured: 2,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn malformed_files_name_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = MetaDir::new(tmp.path());
    std::fs::write(tmp.path().join(VERSION_FILE), "# c\ncluster_id=abc\n").unwrap();
    let err = dir.read_cluster_id().unwrap_err().to_string();
    assert!(err.contains("VERSION") && err.contains("\"abc\""), "{err}");
    std::fs::write(tmp.path().join(VERSION_FILE), "cluster_id=5\ncolor=blue\n").unwrap();
    let err = dir.read_cluster_id().unwrap_err().to_string();
    assert!(
        err.contains("line 2") && err.contains("unknown key \"color\""),
        "{err}"
    );
    std::fs::write(tmp.path().join(ROLE_FILE), "role=LEADER\nsid=1\n").unwrap();
    let err = dir.read_role().unwrap_err().to_string();
    assert!(err.contains("neither FOLLOWER nor OBSERVER"), "{err}");
}
