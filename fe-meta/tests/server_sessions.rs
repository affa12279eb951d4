//! Client sessions and deadlines through real (in-process) servers: a retried write applies once
//! and is answered with its first outcome on any node, a write below the client's floor is
//! refused, a write still awaited is never made stale by later writes of its client, and a write
//! whose deadline passed is not proposed (PROTOCOL §3.2, §7).

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
    session_of(0xc11e_0001, seq, floor)
}

fn session_of(client_id: u64, seq: u64, floor: u64) -> RequestMeta {
    RequestMeta {
        budget_ms: Some(10_000),
        session: Some(SessionTag {
            client_id,
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

/// A pipelining client whose oldest write, seq 1, reaches the leader after 1,099 later writes
/// (its request ran late there; `bench --workload large` saw it once, after a node rejoined),
/// all carrying floor 1 because the client still waits for seq 1: seq 1 is applied when it
/// comes, not refused as stale. The writes 1024 or more past the floor are refused unapplied
/// (INVALID_ARGUMENT): applied, they would push seq 1's place out of the session table.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_still_awaited_is_not_made_stale_by_the_writes_sent_after_it() {
    let mut c = Cluster::new(3, "leader_wait_ms=3000");
    c.start_all().await;
    let leader = c.wait_stable(Duration::from_secs(20)).await;
    let mut client = Client::connect(c.addr(leader)).await;
    let client_id = 0xc11e_0002;
    let mut later = Vec::new();
    for batch in (2..=1100u64).collect::<Vec<_>>().chunks(100) {
        let mut ids = Vec::new();
        for &seq in batch {
            let body = create_db(&format!("p{seq}"));
            ids.push((
                client.send_with(body, session_of(client_id, seq, 1)).await,
                seq,
            ));
        }
        for _ in batch {
            let r = client.recv().await.unwrap();
            let seq = ids.iter().find(|(id, _)| *id == r.id).unwrap().1;
            later.push((seq, r.result.err().map(|e| e.status)));
        }
    }
    let held = send(&mut client, create_db("held"), session_of(client_id, 1, 1)).await;
    assert!(
        held.result.is_ok(),
        "seq 1, still awaited, was refused: {:?}",
        held.result
    );
    later.sort_unstable();
    for (seq, status) in later {
        let want = (seq >= 1025).then_some(Status::InvalidArgument);
        assert_eq!(status, want, "seq {seq} (floor 1)");
    }
    c.stop_all().await;
}
