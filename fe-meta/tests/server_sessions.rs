//! Client sessions and deadlines through real (in-process) servers: a retried write applies once
//! and is answered with its first outcome on any node, a write below the client's floor is
//! refused, and a write whose deadline passed is not proposed (PROTOCOL §3.2, §7).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod server_support;

use std::time::Duration;

use fe_meta::command::Command;
use fe_meta::protocol::{ReadOptions, RequestBody, RequestMeta, Response, ResponseBody, Status};
use fe_meta::state::catalog::SessionTag;
use server_support::{Client, Cluster};

fn create_db(name: &str) -> RequestBody {
    RequestBody::Write(Command::CreateDb { name: name.into() })
}

fn session(seq: u64, floor: u64) -> RequestMeta {
    RequestMeta {
        budget_ms: Some(10_000),
        session: Some(SessionTag {
            client_id: 0xc11e_0001,
            seq,
            floor,
        }),
    }
}

async fn send(client: &mut Client, body: RequestBody, meta: RequestMeta) -> Response {
    let id = client.send_with(body, meta).await;
    let r = client.recv().await.unwrap();
    assert_eq!(r.id, id);
    r
}

fn written(r: &Response) -> (fe_meta::Zxid, Option<u64>) {
    match &r.result {
        Ok(ResponseBody::Written {
            journal_id,
            created_id,
        }) => (*journal_id, *created_id),
        other => panic!("not Written: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retried_write_applies_once_and_an_older_one_is_refused() {
    let mut c = Cluster::new(3, "leader_wait_ms=3000");
    c.start_all().await;
    let leader = c.wait_stable(Duration::from_secs(20)).await;
    let follower = if leader == 1 { 2 } else { 1 };
    let mut on_leader = Client::connect(c.addr(leader)).await;
    let mut on_follower = Client::connect(c.addr(follower)).await;

    let first = written(&send(&mut on_leader, create_db("sales"), session(1, 1)).await);
    assert!(first.1.is_some(), "CREATE_DB reports the new id");
    // The same request again, through another node: the first outcome, nothing created twice
    // (a plain second CREATE_DB would be ALREADY_EXISTS).
    let retry = written(&send(&mut on_follower, create_db("sales"), session(1, 1)).await);
    assert_eq!(retry, first);

    // seq 3 with floor 3: the client no longer waits for seq 2, which is then refused.
    written(&send(&mut on_follower, create_db("hr"), session(3, 3)).await);
    let old = send(&mut on_leader, create_db("old"), session(2, 2)).await;
    let e = old.result.unwrap_err();
    assert_eq!(e.status, Status::StaleRequest, "{}", e.message);
    let dbs = on_follower
        .call(RequestBody::ShowDatabases(ReadOptions { sync: true }))
        .await
        .unwrap();
    let ResponseBody::Databases { databases, .. } = dbs else {
        panic!("{dbs:?}")
    };
    let names: Vec<&str> = databases.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["sales", "hr"]);

    // A deadline that has passed on arrival: not proposed, on the leader or via a follower.
    let late = RequestMeta {
        budget_ms: Some(0),
        session: None,
    };
    for client in [&mut on_leader, &mut on_follower] {
        let r = send(client, create_db("late"), late).await;
        assert_eq!(r.result.unwrap_err().status, Status::DeadlineExceeded);
    }
    let r = on_leader
        .call(RequestBody::ShowDatabases(ReadOptions { sync: true }))
        .await
        .unwrap();
    let ResponseBody::Databases { databases, .. } = r else {
        panic!("{r:?}")
    };
    assert!(databases.iter().all(|d| d.name != "late"));
    c.stop_all().await;
}
