//! RENAME_DB end to end: sent through the client library to a follower of a real in-process
//! 3-node cluster, the rename is seen on every node with its tables, refusals carry their
//! statuses, and journal replay after a restart of every node keeps it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod server_support;

use std::time::Duration;

use fe_meta::client::Client;
use fe_meta::command::Command;
use fe_meta::protocol::Status;
use fe_meta::state::catalog::{Column, ColumnType};
use server_support::Cluster;

fn rename(name: &str, new_name: &str) -> Command {
    Command::RenameDb {
        name: name.into(),
        new_name: new_name.into(),
    }
}

/// Every node, after a sync, holds database `shop` with table `orders` and no `sales`.
async fn renamed_everywhere(c: &Cluster) {
    for sid in 1..=3 {
        let client = Client::connect(&c.addr(sid).to_string()).await.unwrap();
        let dbs = client.show_databases(true).await.unwrap().value;
        let names: Vec<&str> = dbs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["shop"], "node {sid}");
        let tables = client.show_tables("shop", true).await.unwrap().value;
        assert_eq!(tables.len(), 1, "node {sid}");
        assert_eq!(
            (tables[0].name.as_str(), tables[0].db_id),
            ("orders", dbs[0].id)
        );
        let gone = client.show_tables("sales", true).await.unwrap_err();
        assert_eq!(gone.status(), Some(Status::NotFound), "node {sid}: {gone}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rename_is_seen_on_every_node_and_survives_a_restart() {
    let mut c = Cluster::new(3, "");
    c.start_all().await;
    let leader = c.wait_stable(Duration::from_secs(20)).await;
    let follower = if leader == 1 { 2 } else { 1 };
    let client = Client::connect(&c.addr(follower).to_string())
        .await
        .unwrap();
    let sales = client.create_db("sales").await.unwrap().created_id;
    let key = Column {
        name: "id".into(),
        ty: ColumnType::BigInt,
        nullable: false,
        is_key: true,
        default: None,
    };
    client
        .create_table("sales", "orders", vec![key])
        .await
        .unwrap();
    client.create_db("archive").await.unwrap();

    let w = client.write(rename("sales", "shop")).await.unwrap();
    assert_eq!(w.created_id, None, "a rename creates nothing");
    let taken = client.write(rename("shop", "archive")).await.unwrap_err();
    assert_eq!(taken.status(), Some(Status::AlreadyExists), "{taken}");
    let unknown = client.write(rename("sales", "x")).await.unwrap_err();
    assert_eq!(unknown.status(), Some(Status::NotFound), "{unknown}");
    let bad = client.write(rename("shop", "9x")).await.unwrap_err();
    assert_eq!(bad.status(), Some(Status::InvalidArgument), "{bad}");
    client.drop_db("archive").await.unwrap();
    drop(client);
    renamed_everywhere(&c).await;

    // Every node restarts from its own data dir and replays its journal.
    c.stop_all().await;
    c.start_all().await;
    c.wait_stable(Duration::from_secs(20)).await;
    renamed_everywhere(&c).await;
    let any = Client::connect(&c.addr(3).to_string()).await.unwrap();
    let dbs = any.show_databases(true).await.unwrap().value;
    assert_eq!(Some(dbs[0].id), sales, "the database keeps its id");
    drop(any);
    c.stop_all().await;
}
