//! SHOW FRONTENDS as an operator reads it, on an in-process 3-node cluster: an idle caught-up
//! cluster shows lag 0 on every row, sample after sample; a follower answers the leader's
//! rows (forwarded); a paused node shows a positive lag while writes go on; a stopped node
//! shows ALIVE false with its last journal id and an ERR_MSG; with no leader a node answers
//! itself with lags unknown and says why.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod server_support;

use std::time::{Duration, Instant};

use fe_meta::command::Command;
use fe_meta::protocol::{MemberRow, ReadOptions, RequestBody, ResponseBody};
use server_support::{call, Cluster};
use zab_net::Zxid;

const PLAIN: ReadOptions = ReadOptions { sync: false };

async fn members(c: &Cluster, via: u64) -> (Zxid, Vec<MemberRow>) {
    match call(c.addr(via), RequestBody::ShowMembers(PLAIN))
        .await
        .unwrap()
    {
        ResponseBody::Members {
            journal_id, rows, ..
        } => (journal_id, rows),
        other => panic!("{other:?}"),
    }
}

fn row(rows: &[MemberRow], sid: u64) -> &MemberRow {
    rows.iter().find(|m| m.row.sid == sid).unwrap()
}

/// What a row says that does not depend on when it was asked.
fn settled(rows: &[MemberRow]) -> Vec<String> {
    rows.iter()
        .map(|m| {
            let f = &m.row;
            format!(
                "{} {} {} {} {:?} {:?} {:?} {:?} {:?} {}",
                f.sid,
                f.role_name(m.joining),
                f.is_leader,
                f.alive,
                f.quorum_port,
                f.last_start_time_ms,
                f.version,
                f.lag_entries,
                f.lag_ms,
                f.err_msg
            )
        })
        .collect()
}

fn create_db(name: &str) -> RequestBody {
    RequestBody::Write(Command::CreateDb { name: name.into() })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn show_frontends_tells_role_liveness_and_a_lag_that_means_what_it_says() {
    let mut c = Cluster::new(
        3,
        "meta_delay_toleration_second=300\npeer_status_timeout_ms=2000\nwrite_timeout_ms=3000",
    );
    c.start_all().await;
    let leader = c.wait_stable(Duration::from_secs(20)).await;
    let followers: Vec<u64> = (1..=3).filter(|s| *s != leader).collect();
    let (paused, stopped) = (followers[0], followers[1]);
    call(c.addr(leader), create_db("d0")).await.unwrap();
    for s in 1..=3 {
        call(c.addr(s), RequestBody::Sync).await.unwrap();
    }
    idle_rows_show_lag_zero(&c, leader, stopped).await;
    paused_node_lags_then_catches_up(&c, leader, paused).await;
    stopped_node_is_not_alive(&mut c, leader, stopped).await;
    without_a_leader_a_node_answers_itself(&mut c, leader, paused).await;
    c.stop_all().await;
}

/// Idle and caught up: lag 0 everywhere, sample after sample; a follower's (`via`) answer is
/// the leader's. A sample during which an entry (a TIMESTAMP) committed is not judged.
async fn idle_rows_show_lag_zero(c: &Cluster, leader: u64, via: u64) {
    let mut judged = 0;
    for _ in 0..8 {
        let (journal_id, rows) = members(c, leader).await;
        let (forwarded_journal_id, via_follower) = members(c, via).await;
        assert_eq!(rows.len(), 3, "{rows:?}");
        let idle = |rows: &[MemberRow]| {
            rows.iter()
                .all(|m| m.row.replayed_journal_id == Some(journal_id))
        };
        if forwarded_journal_id != journal_id || !idle(&rows) || !idle(&via_follower) {
            continue;
        }
        judged += 1;
        for m in &rows {
            assert_caught_up(m, leader);
        }
        assert_eq!(settled(&via_follower), settled(&rows));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(judged >= 4, "only {judged} of 8 samples were idle");
    match call(c.addr(leader), RequestBody::Status).await.unwrap() {
        ResponseBody::Status(s) => assert!(s.is_leader() && s.last_start_time_ms.is_some()),
        other => panic!("{other:?}"),
    }
}

/// A caught-up member's row on an idle cluster led by `leader`.
fn assert_caught_up(m: &MemberRow, leader: u64) {
    let f = &m.row;
    assert!(f.alive, "{f:?}");
    assert_eq!((f.lag_entries, f.lag_ms), (Some(0), Some(0)), "{f:?}");
    assert_eq!(f.err_msg, "", "{f:?}");
    assert!(f.last_heartbeat_ms.is_some() && f.last_start_time_ms.is_some());
    assert!(f.version.is_some() && f.quorum_port.is_some());
    let role = if f.sid == leader {
        "LEADER"
    } else {
        "FOLLOWER"
    };
    assert_eq!(f.role_name(m.joining), role);
    assert_eq!(f.is_leader, f.sid == leader);
}

/// A paused node falls behind while writes go on: it still answers STATUS, with its old
/// journal id, and its lag counts entries and time; resumed, it catches up to lag 0.
async fn paused_node_lags_then_catches_up(c: &Cluster, leader: u64, paused: u64) {
    c.servers[&paused].pause_node(Duration::from_secs(3)).await;
    let pause_start = Instant::now();
    for i in 0..5 {
        call(c.addr(leader), create_db(&format!("p{i}")))
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, rows) = members(c, leader).await;
    if pause_start.elapsed() < Duration::from_millis(2_500) {
        let f = &row(&rows, paused).row;
        assert!(f.alive, "{f:?}");
        assert!(f.lag_entries.is_some_and(|n| n >= 5), "{f:?}");
        assert!(f.lag_ms.is_some_and(|ms| ms >= 300), "{f:?}");
    } else {
        println!("SKIP (paused node): this machine took over 2.5 s for five writes");
    }
    let t0 = Instant::now();
    loop {
        let (_, rows) = members(c, leader).await;
        if row(&rows, paused).row.lag_ms == Some(0) {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "{rows:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A stopped node: not alive, its last journal id, why, and no lag.
async fn stopped_node_is_not_alive(c: &mut Cluster, leader: u64, stopped: u64) {
    let (_, before) = members(c, leader).await;
    let last_known = row(&before, stopped).row.replayed_journal_id;
    assert!(last_known.is_some());
    c.stop(stopped).await;
    let (_, rows) = members(c, leader).await;
    let f = &row(&rows, stopped).row;
    assert!(!f.alive, "{f:?}");
    assert_eq!(f.replayed_journal_id, last_known);
    assert!(f.err_msg.contains("no answer"), "{f:?}");
    assert_eq!((f.lag_entries, f.lag_ms), (None, None));
    assert!(f.last_heartbeat_ms.is_some());
}

/// No leader (`leader` stopped): the last node (`last`) answers itself, lags unknown, and
/// says why.
async fn without_a_leader_a_node_answers_itself(c: &mut Cluster, leader: u64, last: u64) {
    c.stop(leader).await;
    let (_, rows) = members(c, last).await;
    let f = &row(&rows, last).row;
    assert!(f.alive && f.lag_ms.is_none(), "{f:?}");
    assert!(f.err_msg.contains("lag unknown"), "{f:?}");
}
