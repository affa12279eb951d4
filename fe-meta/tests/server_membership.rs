//! Membership changes through the client port of in-process 3-node clusters: a follower added
//! through a follower (forwarded to the leader) shows as joining, joins with the configuration
//! GET_CONFIG gave, is promoted and serves; every node's GET_CONFIG agrees after each change; a
//! member is dropped, the leader too (it hands over); a second change while one is in flight is
//! refused with CONFLICT; invalid changes are refused with INVALID_ARGUMENT and change nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod server_support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use fe_meta::command::Command;
use fe_meta::protocol::{
    ClusterConfig, FrontendChange, MemberRow, MemberState, ReadOptions, RequestBody, ResponseBody,
    Status,
};
use fe_meta::state::catalog::FrontendRole;
use fe_meta::Zxid;
use server_support::{call, Cluster};

const STABLE: Duration = Duration::from_secs(15);
const EXTRA: &str = "meta_delay_toleration_second=60\nleader_wait_ms=3000";

async fn get_config(addr: SocketAddr) -> ClusterConfig {
    match call(addr, RequestBody::GetConfig).await.unwrap() {
        ResponseBody::Config(c) => c,
        other => panic!("not a Config answer: {other:?}"),
    }
}

async fn sync(addr: SocketAddr) {
    match call(addr, RequestBody::Sync).await.unwrap() {
        ResponseBody::Synced { .. } => {}
        other => panic!("{other:?}"),
    }
}

fn add(sid: u64, role: FrontendRole, address: &str) -> RequestBody {
    RequestBody::ChangeMembership(FrontendChange::Add {
        sid,
        role,
        address: address.to_string(),
    })
}

fn drop_fe(sid: u64) -> RequestBody {
    RequestBody::ChangeMembership(FrontendChange::Drop { sid })
}

fn reconfigured(r: ResponseBody) -> (Zxid, ClusterConfig) {
    match r {
        ResponseBody::Reconfigured { version, config } => (version, config),
        other => panic!("not Reconfigured: {other:?}"),
    }
}

fn sids(c: &ClusterConfig) -> Vec<(u64, MemberState)> {
    c.members.iter().map(|m| (m.sid, m.state)).collect()
}

/// Every running node, synced, reports the same committed configuration; returns it.
async fn configs_agree(c: &Cluster) -> ClusterConfig {
    let mut seen: Option<ClusterConfig> = None;
    for sid in c.servers.keys() {
        sync(c.addr(*sid)).await;
        let got = get_config(c.addr(*sid)).await;
        if let Some(first) = &seen {
            assert_eq!(
                (got.version, &got.members),
                (first.version, &first.members),
                "server {sid} disagrees"
            );
        }
        seen = Some(got);
    }
    seen.unwrap()
}

/// Polls `addr`'s GET_CONFIG until `ok` holds.
async fn wait_config(addr: SocketAddr, what: &str, ok: impl Fn(&ClusterConfig) -> bool) {
    let start = Instant::now();
    loop {
        let got = get_config(addr).await;
        if ok(&got) {
            return;
        }
        assert!(start.elapsed() < STABLE, "{what}: still {got:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn members(addr: SocketAddr) -> (Zxid, Vec<MemberRow>) {
    let body = RequestBody::ShowMembers(ReadOptions { sync: false });
    match call(addr, body).await.unwrap() {
        ResponseBody::Members {
            config_version,
            rows,
            ..
        } => (config_version, rows),
        other => panic!("{other:?}"),
    }
}

/// Server 4, added as a follower at configuration `version` and not started yet:
/// SHOW_MEMBERS at `follower` marks it joining (not started: not alive), and only it;
/// SHOW_FRONTENDS at `leader` lists it.
async fn assert_server_4_listed_joining(c: &Cluster, follower: u64, leader: u64, version: Zxid) {
    let (shown, rows) = members(c.addr(follower)).await;
    assert_eq!(shown, version);
    let row4 = rows.iter().find(|r| r.row.sid == 4).unwrap();
    assert!(row4.joining && !row4.row.alive, "{row4:?}");
    assert_eq!(row4.row.role, FrontendRole::Follower);
    assert_eq!(row4.row.client_port, c.ports[&4].2);
    assert!(rows.iter().filter(|r| r.row.sid != 4).all(|r| !r.joining));
    let body = RequestBody::ShowFrontends(ReadOptions { sync: false });
    match call(c.addr(leader), body).await.unwrap() {
        ResponseBody::Frontends { rows, .. } => {
            assert_eq!(rows.iter().map(|r| r.sid).collect::<Vec<_>>(), [1, 2, 3, 4]);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_follower_added_through_a_follower_joins_is_promoted_and_serves() {
    let mut c = Cluster::new(3, EXTRA);
    let value = c.reserve(4);
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    let follower = if leader == 1 { 2 } else { 1 };

    let before = get_config(c.addr(follower)).await;
    assert_eq!(before.version, Zxid::ZERO, "the bootstrap configuration");
    assert_eq!(before.cluster_id, 0xfe_0001);
    assert_eq!(
        (before.tick_time_ms, before.init_limit, before.sync_limit),
        (100, 20, 5)
    );
    assert_eq!(before.member(2).unwrap().address, c.server_value(2));

    // Added through a follower: forwarded to the leader, answered once committed and applied
    // on the follower.
    let answer = call(c.addr(follower), add(4, FrontendRole::Follower, &value)).await;
    let (version, config) = reconfigured(answer.unwrap());
    assert!(version > Zxid::ZERO);
    assert_eq!(config.version, version);
    let four = config.member(4).unwrap();
    assert_eq!(
        (four.state, four.address.as_str()),
        (MemberState::Joining, &*value)
    );
    let here = get_config(c.addr(follower)).await;
    assert_eq!(here.version, version, "applied on the forwarding node");
    assert!(
        c.servers[&follower].applied_journal_id() >= version,
        "the journal id follows the configuration txn"
    );
    let agreed = configs_agree(&c).await;
    assert_eq!(agreed.version, version);

    assert_server_4_listed_joining(&c, follower, leader, version).await;

    // The new node joins with what GET_CONFIG said, is promoted, and serves writes.
    let join = get_config(c.addr(leader)).await;
    c.start_joining(4, &join).await;
    wait_config(c.addr(leader), "server 4 promoted", |cfg| {
        cfg.member(4).map(|m| m.state) == Some(MemberState::Participant)
    })
    .await;
    let promoted = get_config(c.addr(leader)).await.version;
    assert!(promoted > version);
    let create = RequestBody::Write(Command::CreateDb {
        name: "after_join".into(),
    });
    let written = match call(c.addr(4), create).await.unwrap() {
        ResponseBody::Written { journal_id, .. } => journal_id,
        other => panic!("{other:?}"),
    };
    assert!(written > promoted);
    let agreed = configs_agree(&c).await;
    assert_eq!(
        sids(&agreed),
        [1, 2, 3, 4].map(|s| (s, MemberState::Participant))
    );
    let (_, rows) = members(c.addr(4)).await;
    assert!(rows.iter().all(|r| !r.joining && r.row.alive), "{rows:?}");
    c.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_is_dropped_and_invalid_changes_change_nothing() {
    let mut c = Cluster::new(3, EXTRA);
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    let followers: Vec<u64> = (1..=3).filter(|s| *s != leader).collect();
    let (gone, stays) = (followers[0], followers[1]);

    // Invalid changes: refused before anything is proposed.
    let existing = c.server_value(gone);
    let cases = [
        (
            add(gone, FrontendRole::Follower, "127.0.0.1:1:2;3"),
            "already a member",
        ),
        (
            add(7, FrontendRole::Follower, "127.0.0.1:1"),
            "bad server address",
        ),
        (
            add(7, FrontendRole::Follower, "127.0.0.1:61001:61002"),
            "no client port",
        ),
        (
            add(
                7,
                FrontendRole::Follower,
                "127.0.0.1:61001:61002:observer;61003",
            ),
            "observer",
        ),
        (add(7, FrontendRole::Observer, &existing), "already uses"),
        (drop_fe(9), "not a member"),
    ];
    for (body, says) in cases {
        let e = call(c.addr(stays), body.clone()).await.unwrap_err();
        assert_eq!(e.status, Status::InvalidArgument, "{body:?}: {e:?}");
        assert!(e.message.contains(says), "{body:?}: {}", e.message);
    }
    assert_eq!(
        configs_agree(&c).await.version,
        Zxid::ZERO,
        "nothing changed"
    );

    // Drop a follower through the leader.
    let (version, config) = reconfigured(call(c.addr(leader), drop_fe(gone)).await.unwrap());
    assert_eq!(config.version, version);
    assert!(config.member(gone).is_none());
    c.stop(gone).await;
    let agreed = configs_agree(&c).await;
    assert_eq!(agreed.version, version);
    assert_eq!(agreed.members.len(), 2);
    let (shown, rows) = members(c.addr(stays)).await;
    assert_eq!(shown, version);
    assert!(rows.iter().all(|r| r.row.sid != gone), "{rows:?}");

    // Two participants left: writes through the follower still commit.
    let create = RequestBody::Write(Command::CreateDb { name: "d".into() });
    match call(c.addr(stays), create).await.unwrap() {
        ResponseBody::Written { journal_id, .. } => assert!(journal_id > version),
        other => panic!("{other:?}"),
    }
    // Dropping it again is invalid now.
    let e = call(c.addr(leader), drop_fe(gone)).await.unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument, "{e:?}");
    c.stop_all().await;
}

/// With both followers standing still, the leader's change cannot commit; a second change sent
/// meanwhile is refused with CONFLICT (retryable, nothing proposed); once the followers are
/// back, the first change commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_second_change_while_one_is_in_flight_is_a_conflict() {
    let mut c = Cluster::new(3, EXTRA);
    // The followers stand still for 2 s; the leader keeps its quorum for syncLimit (4 s).
    c.sync_limit = 40;
    let observer = c.reserve(6);
    let follower = c.reserve(5);
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    let addr = c.addr(leader);

    let pause = Duration::from_secs(2);
    let followers: Vec<u64> = (1..=3).filter(|s| *s != leader).collect();
    for s in &followers {
        c.servers[s].pause_node(pause).await;
    }
    let first = tokio::spawn(call(addr, add(6, FrontendRole::Observer, &observer)));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = call(addr, add(5, FrontendRole::Follower, &follower))
        .await
        .unwrap_err();
    assert_eq!(second.status, Status::Conflict, "{second:?}");
    assert!(second.status.is_retryable());
    assert!(second.message.contains("in progress"), "{}", second.message);

    let (version, config) = reconfigured(first.await.unwrap().unwrap());
    assert_eq!(config.member(6).unwrap().state, MemberState::Observer);
    assert!(
        config.member(5).is_none(),
        "the refused change was not proposed"
    );
    let agreed = configs_agree(&c).await;
    assert_eq!(agreed.version, version);
    c.stop_all().await;
}

/// The leader dropped through a follower: the follower gets the committed change, the leader
/// hands over, and the two left elect a leader and take writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_leader_dropped_through_a_follower_hands_over() {
    let mut c = Cluster::new(3, EXTRA);
    c.start_all().await;
    let leader = c.wait_stable(STABLE).await;
    let follower = if leader == 1 { 2 } else { 1 };

    let answer = call(c.addr(follower), drop_fe(leader)).await.unwrap();
    let (version, config) = reconfigured(answer);
    assert!(config.member(leader).is_none(), "{config:?}");
    c.stop(leader).await;
    let next = c.wait_stable(STABLE).await;
    assert_ne!(next, leader);
    let create = RequestBody::Write(Command::CreateDb {
        name: "after_the_leader".into(),
    });
    match call(c.addr(follower), create).await.unwrap() {
        ResponseBody::Written { journal_id, .. } => assert!(journal_id > version),
        other => panic!("{other:?}"),
    }
    let agreed = configs_agree(&c).await;
    assert_eq!(agreed.version, version);
    c.stop_all().await;
}
