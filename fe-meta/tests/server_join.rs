//! Joining a running cluster with `--helper` and leaving it: a node added first joins, syncs,
//! serves and is promoted; a node started before it is added waits, then joins; a node listed
//! with another address, or told another cluster id, is refused; a running node that is
//! dropped stops (`Stopped::Removed`) and its data dir then refuses to start; a dropped leader
//! answers the drop first.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod server_support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use fe_meta::client::Client;
use fe_meta::protocol::MemberState;
use fe_meta::server::meta_dir::MetaDir;
use fe_meta::server::{prepare_start, run, JoinError, Server, ServerError, StartMode, Stopped};
use fe_meta::state::catalog::FrontendRole;
use server_support::{free_port, Cluster};

const CLUSTER_ID: u64 = 0xfe_0001;
const LIMIT: Duration = Duration::from_secs(20);

/// A server that is not in the cluster's zoo.cfg files: its ports, data dir and minimal
/// zoo.cfg (dataDir, clientPort, its own line; the test-only forceSync/preAllocSize).
struct Newcomer {
    ports: (u16, u16, u16),
    dir: PathBuf,
    config: PathBuf,
}

impl Newcomer {
    fn new(c: &Cluster, sid: u64, extra: &str) -> Newcomer {
        let ports = (free_port(), free_port(), free_port());
        let dir = c.root.path().join(format!("fe{sid}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("myid"), format!("{sid}\n")).unwrap();
        let n = Newcomer {
            ports,
            dir: dir.clone(),
            config: c.root.path().join(format!("fe{sid}.cfg")),
        };
        let text = format!(
            "dataDir={}\nclientPort={}\nforceSync=no\npreAllocSize=1024\n{extra}\nserver.{sid}={}\n",
            dir.display(),
            ports.2,
            n.value()
        );
        std::fs::write(&n.config, text).unwrap();
        n
    }

    /// Its `server.N` value.
    fn value(&self) -> String {
        let (q, e, c) = self.ports;
        format!("127.0.0.1:{q}:{e};127.0.0.1:{c}")
    }

    fn client_addr(&self) -> String {
        format!("127.0.0.1:{}", self.ports.2)
    }
}

async fn client(addr: &str) -> Client {
    Client::connect(addr).await.unwrap()
}

/// Polls `addr` (server `sid`'s client port) until it answers a SYNC.
async fn wait_serving(addr: &str, sid: u64) {
    let start = Instant::now();
    loop {
        if let Ok(c) = Client::connect(addr).await {
            if c.sync().await.is_ok() {
                return;
            }
        }
        assert!(start.elapsed() < LIMIT, "server {sid} never served");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls `addr`'s GET_CONFIG until server `sid` has `state` there.
async fn wait_member_state(addr: &str, sid: u64, state: MemberState) {
    let start = Instant::now();
    loop {
        if let Ok(c) = Client::connect(addr).await {
            if let Ok(cfg) = c.get_config().await {
                if cfg.member(sid).map(|m| m.state) == Some(state) {
                    return;
                }
            }
        }
        assert!(
            start.elapsed() < LIMIT,
            "server {sid} not {state:?} at {addr} within {LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Grow 3 → 4: added on a member, the new node starts with a minimal zoo.cfg and a follower as
/// its helper; it learns the cluster id and the timing keys, syncs the data written before,
/// serves reads and forwards writes, and is promoted to participant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_added_first_joins_syncs_serves_and_is_promoted() {
    let mut c = Cluster::new(3, "");
    c.start_all().await;
    let leader = c.wait_stable(LIMIT).await;
    let follower = (1..=3).find(|s| *s != leader).unwrap();
    let first = client(&c.addr(leader).to_string()).await;
    first.create_db("before").await.unwrap();

    let n = Newcomer::new(&c, 4, "");
    let added = first
        .add_frontend(4, FrontendRole::Follower, &n.value())
        .await
        .unwrap();
    assert_eq!(
        added.config.member(4).map(|m| m.state),
        Some(MemberState::Joining)
    );

    let (cfg, opts) = prepare_start(&n.config, &StartMode::Helper(c.addr(follower).to_string()))
        .await
        .unwrap();
    // The keys its zoo.cfg does not set come from the helper.
    assert_eq!(cfg.cluster_id, CLUSTER_ID);
    assert_eq!(
        (
            cfg.node.tick_ms,
            cfg.node.init_limit_ticks,
            cfg.node.sync_limit_ticks
        ),
        (100, 20, 5)
    );
    assert!(opts.join_membership.is_some());
    let joined = Server::start_with(cfg, opts).await.unwrap();
    assert_eq!(
        MetaDir::new(&n.dir).read_cluster_id().unwrap(),
        Some(CLUSTER_ID)
    );
    assert_eq!(
        MetaDir::new(&n.dir).read_role().unwrap(),
        Some((FrontendRole::Follower, 4))
    );

    wait_member_state(&c.addr(leader).to_string(), 4, MemberState::Participant).await;
    wait_member_state(&n.client_addr(), 4, MemberState::Participant).await;
    let st = joined.node_status();
    assert!(!st.removed, "{st:?}");

    let mine = client(&n.client_addr()).await;
    let dbs = mine.show_databases(true).await.unwrap().value;
    assert!(dbs.iter().any(|d| d.name == "before"), "{dbs:?}");
    mine.create_db("after").await.unwrap();
    let dbs = first.show_databases(true).await.unwrap().value;
    assert!(dbs.iter().any(|d| d.name == "after"), "{dbs:?}");

    joined.shutdown().await;
    c.stop_all().await;
}

/// Started before it is added, the node waits (writing nothing), then joins once added.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_started_before_it_is_added_waits_then_joins() {
    let mut c = Cluster::new(3, "");
    c.start_all().await;
    let leader = c.wait_stable(LIMIT).await;
    let helper = c.addr(leader).to_string();
    let n = Newcomer::new(&c, 5, "");
    let config = n.config.clone();
    let mode = StartMode::Helper(helper.clone());
    let waiting = tokio::spawn(async move { prepare_start(&config, &mode).await });
    // Longer than one retry period: it asked at least twice and still waits.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!waiting.is_finished());
    assert_eq!(MetaDir::new(&n.dir).read_cluster_id().unwrap(), None);

    client(&helper)
        .await
        .add_frontend(5, FrontendRole::Follower, &n.value())
        .await
        .unwrap();
    let (cfg, opts) = tokio::time::timeout(LIMIT, waiting)
        .await
        .expect("still waiting after it was added")
        .unwrap()
        .unwrap();
    let joined = Server::start_with(cfg, opts).await.unwrap();
    wait_member_state(&n.client_addr(), 5, MemberState::Participant).await;
    joined.shutdown().await;
    c.stop_all().await;
}

/// A node the configuration lists with another address, and a node whose zoo.cfg names
/// another cluster, are refused before anything is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_address_or_cluster_id_is_refused() {
    let mut c = Cluster::new(3, "");
    c.start_all().await;
    let leader = c.wait_stable(LIMIT).await;
    let helper = c.addr(leader).to_string();
    let n = Newcomer::new(&c, 6, "");
    let other = format!(
        "127.0.0.1:{}:{};127.0.0.1:{}",
        free_port(),
        free_port(),
        n.ports.2
    );
    client(&helper)
        .await
        .add_frontend(6, FrontendRole::Follower, &other)
        .await
        .unwrap();
    let err = prepare_start(&n.config, &StartMode::Helper(helper.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ServerError::Join(JoinError::AddressMismatch { sid: 6, .. })
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains(&other) && msg.contains(&n.value()), "{msg}");
    assert_eq!(MetaDir::new(&n.dir).read_cluster_id().unwrap(), None);

    let foreign = Newcomer::new(&c, 7, "clusterId=12345");
    let err = prepare_start(&foreign.config, &StartMode::Helper(helper))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ServerError::Join(JoinError::ClusterIdMismatch {
                configured: 12345,
                ..
            })
        ),
        "{err:?}"
    );
    c.stop_all().await;
}

/// A running member that is dropped stops by itself (`Stopped::Removed`, exit status 6 in
/// the binary) and closes its client port; its data dir then refuses to start, naming the
/// configuration version and how to add the server again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_node_stops_and_its_data_dir_is_refused() {
    let mut c = Cluster::new(3, "");
    // Server 3 leads a fresh cluster (the highest sid wins a tie); server 1, run as the binary
    // runs it, is a follower.
    c.start(3).await;
    c.start(2).await;
    let path1 = c.write_config(1, CLUSTER_ID);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let p = path1.clone();
    let running = tokio::spawn(async move {
        run(&p, StartMode::Bootstrap, async {
            let _ = stop_rx.await;
        })
        .await
    });
    let addr3 = c.addr(3).to_string();
    let addr1 = format!("127.0.0.1:{}", c.ports[&1].2);
    // Server 1 serves before it is dropped.
    wait_serving(&addr1, 1).await;

    let dropped = client(&addr3).await.drop_frontend(1).await.unwrap();
    assert!(dropped.config.member(1).is_none());
    let stopped = tokio::time::timeout(LIMIT, running)
        .await
        .expect("the dropped server did not stop")
        .unwrap()
        .unwrap();
    assert_eq!(stopped, Stopped::Removed(dropped.version));
    assert_eq!(
        fe_meta::server::REMOVED_EXIT_STATUS,
        6,
        "the documented status"
    );
    assert!(
        Client::connect(&addr1).await.is_err(),
        "the client port is still open"
    );
    drop(stop_tx);

    let err = Server::start(&path1).await.unwrap_err();
    let ServerError::Removed(removal) = &err else {
        panic!("the dropped data dir started or failed otherwise: {err:?}");
    };
    assert_eq!((removal.sid, removal.version), (1, dropped.version));
    let msg = err.to_string();
    let parts = [
        format!(
            "removed from the cluster by configuration version {}",
            dropped.version
        ),
        "fe-meta add-follower \"server.1=127.0.0.1:".to_string(),
        "--helper".to_string(),
    ];
    for part in parts {
        assert!(msg.contains(&part), "{part}: {msg}");
    }
    // Without the REMOVED record (a crash right after the removal was applied), the removal
    // in the data dir's log still refuses the start.
    std::fs::remove_file(c.data_dir(1).join("REMOVED")).unwrap();
    let err = Server::start(&path1).await.unwrap_err();
    assert!(
        matches!(&err, ServerError::Removed(r) if r.version == dropped.version),
        "{err:?}"
    );
    // The survivors go on.
    client(&addr3).await.create_db("after").await.unwrap();
    c.stop_all().await;
}

/// The leader dropped through itself: it answers the drop, then stops
/// (`Stopped::Removed`); the two others elect a leader and take writes. (It once found a
/// liveness defect of the engine: members holding a removal that was not committed did not
/// follow the leader elected without it.)
///
/// Ignored: on a loaded machine the leader may step down before the drop commits (removing the
/// leader of three leaves {1, 2}, whose quorum needs both); the two others then commit it, but
/// the old leader, cut off from their configuration, does not learn it and stays up (LOOKING,
/// silent) instead of exiting. Run it with `-- --ignored` on an idle machine.
#[ignore = "engine: a leader that stepped down before its own removal committed does not learn it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_leader_answers_then_stops() {
    let mut c = Cluster::new(3, "");
    c.start(1).await;
    c.start(2).await;
    // Server 3 leads a fresh cluster (the highest sid wins a tie).
    let path3 = c.write_config(3, CLUSTER_ID);
    let (_stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        run(&path3, StartMode::Bootstrap, async {
            let _ = stop_rx.await;
        })
        .await
    });
    let addr3 = format!("127.0.0.1:{}", c.ports[&3].2);
    wait_serving(&addr3, 3).await;
    assert_eq!(c.servers[&1].node_status().leader.map(|l| l.0), Some(3));

    // The leader may answer QUORUM_UNAVAILABLE ("may or may not commit"): removing it leaves
    // {1, 2}, whose quorum needs both, so one follower slow to answer its pings makes it step
    // down. As the README says, the operator then checks the configuration on a member that
    // stays and runs the drop again only if it did not commit.
    let addr1 = c.addr(1).to_string();
    let start = Instant::now();
    let version = loop {
        let answer = match Client::connect(&addr3).await {
            Ok(leader) => leader.drop_frontend(3).await.map(|d| {
                assert!(d.config.member(3).is_none());
                d.version
            }),
            Err(e) => Err(e),
        };
        match answer {
            Ok(v) => break v,
            Err(e) => {
                let committed = client(&addr1).await.get_config().await.ok();
                if let Some(cfg) = committed.filter(|cfg| cfg.members.iter().all(|m| m.sid != 3)) {
                    break cfg.version;
                }
                assert!(start.elapsed() < LIMIT, "drop-frontend 3: {e}");
                eprintln!("drop-frontend 3: {e}; not committed, again");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    let stopped = tokio::time::timeout(LIMIT, running)
        .await
        .expect("the dropped leader did not stop")
        .unwrap()
        .unwrap();
    assert_eq!(stopped, Stopped::Removed(version));
    let start = Instant::now();
    while client(&addr1).await.create_db("after").await.is_err() {
        assert!(start.elapsed() < LIMIT, "no write after the leader left");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    c.stop_all().await;
}
