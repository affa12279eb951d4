//! Writes pipelined on one connection are planned in the order they were sent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod server_support;

use std::time::Duration;

use fe_meta::command::Command;
use fe_meta::protocol::RequestBody;
use fe_meta::state::catalog::{Column, ColumnType};
use server_support::{Client, Cluster};

fn create_db(name: &str) -> RequestBody {
    RequestBody::Write(Command::CreateDb { name: name.into() })
}

fn create_table(db: &str) -> RequestBody {
    RequestBody::Write(Command::CreateTable {
        db: db.into(),
        name: "t".into(),
        columns: vec![Column {
            name: "k".into(),
            ty: ColumnType::Int,
            nullable: true,
            is_key: false,
            default: None,
        }],
    })
}

/// Sends `pairs` (create database, create a table in it) back to back on one connection to
/// `sid` and returns the errors answered.
async fn pipelined_pairs(c: &Cluster, sid: u64, prefix: &str, pairs: usize) -> Vec<String> {
    let mut client = Client::connect(c.addr(sid)).await;
    for i in 0..pairs {
        let db = format!("{prefix}{i}");
        client.send(create_db(&db)).await;
        client.send(create_table(&db)).await;
    }
    let mut errors = Vec::new();
    for _ in 0..2 * pairs {
        let r = client.recv().await.expect("connection closed");
        if let Err(e) = r.result {
            errors.push(format!("request {}: {e}", r.id));
        }
    }
    errors
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pipelined_writes_on_one_connection_apply_in_the_order_sent() {
    let mut c = Cluster::new(3, "");
    c.start_all().await;
    let leader = c.wait_stable(Duration::from_secs(20)).await;
    let follower = if leader == 1 { 2 } else { 1 };
    let on_leader = pipelined_pairs(&c, leader, "l", 300).await;
    assert!(on_leader.is_empty(), "through the leader: {on_leader:?}");
    let through_follower = pipelined_pairs(&c, follower, "f", 300).await;
    assert!(
        through_follower.is_empty(),
        "through a follower: {through_follower:?}"
    );
    c.stop_all().await;
}
