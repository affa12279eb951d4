//! An answer reflects what replay did: a write whose client timed out stays planned on the
//! leader until it commits, so a later write cannot take its name or id; and no client is
//! answered `Written` for something that is not in the catalog.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod server_support;

use std::time::{Duration, Instant};

use fe_meta::command::Command;
use fe_meta::protocol::{ErrorReply, ReadOptions, RequestBody, ResponseBody, Status};
use server_support::{call, Cluster};

const SYNCED: ReadOptions = ReadOptions { sync: true };

fn create_db(name: &str) -> RequestBody {
    RequestBody::Write(Command::CreateDb {
        name: name.to_string(),
    })
}

/// Every node's databases after a sync read, as (name, id).
async fn databases(c: &Cluster, sid: u64) -> Vec<(String, u64)> {
    match call(c.addr(sid), RequestBody::ShowDatabases(SYNCED))
        .await
        .unwrap()
    {
        ResponseBody::Databases { databases, .. } => {
            databases.into_iter().map(|d| (d.name, d.id)).collect()
        }
        other => panic!("not a Databases answer: {other:?}"),
    }
}

/// The leader's node stands still (as if frozen) while its client port takes requests: a
/// create times out at the client with its entry queued. Right after, while it is still
/// pending, a create of another name goes through a follower and creates of the same name go
/// to the leader and through the follower (a forwarded write gets the leader's answer).
/// Before the fix the planner forgot the timed-out entry: the other name got the same id and
/// the same name was free again; all committed, replay ignored the later ones, and their
/// clients were answered `Written`. Now the creates of the pending name are refused with
/// ALREADY_EXISTS, the other name gets an id of its own, and every `Written` answer's
/// database is in every node's catalog with the answered id.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_planned_after_a_timed_out_one_is_not_acknowledged_for_a_conflict() {
    let timeout = Duration::from_millis(1500);
    let freeze = Duration::from_millis(2500);
    let mut c = Cluster::new(
        3,
        &format!(
            "write_timeout_ms={}\nleader_wait_ms=3000\nmeta_delay_toleration_second=300",
            timeout.as_millis()
        ),
    );
    // The frozen leader must not be given up by its followers (syncLimit × tickTime = 5 s).
    c.sync_limit = 50;
    c.start_all().await;
    let leader = c.wait_stable(Duration::from_secs(20)).await;
    let follower = if leader == 1 { 2 } else { 1 };
    call(c.addr(follower), create_db("before")).await.unwrap();

    c.servers[&leader].pause_node(freeze).await;
    let frozen_at = Instant::now();
    let first = call(c.addr(leader), create_db("first")).await;
    if frozen_at.elapsed() >= freeze {
        // Not a result: the scenario needs the first write to time out inside the freeze.
        println!(
            "SKIP: the first write's answer came {:?} after the freeze began (freeze {freeze:?}); \
             this machine stalled too long for the scenario: {first:?}",
            frozen_at.elapsed()
        );
        c.stop_all().await;
        return;
    }
    let e = first.expect_err("the leader's node stands still: the write cannot commit");
    assert_eq!(e.status, Status::Timeout, "{e:?}");

    // Planned while "first" is pending at the leader; answered once the node goes on.
    let other_name = tokio::spawn(call(c.addr(follower), create_db("second")));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let same_name = tokio::spawn(call(c.addr(leader), create_db("first")));
    let same_name_forwarded = tokio::spawn(call(c.addr(follower), create_db("first")));
    let answers: Vec<(&str, Result<ResponseBody, ErrorReply>)> = vec![
        ("second", other_name.await.unwrap()),
        ("first", same_name.await.unwrap()),
        ("first", same_name_forwarded.await.unwrap()),
    ];

    let catalogs = wait_everywhere(&c, "first").await;
    every_written_answer_is_in_every_catalog(&answers, &catalogs);
    for (_, same) in &answers[1..] {
        let e = same
            .as_ref()
            .expect_err("`first` was pending: another create of it cannot succeed");
        assert_eq!(e.status, Status::AlreadyExists, "{e:?}");
    }
    let ids = second_is_written_and_ids_are_unique(&answers[0].1, &catalogs);
    a_new_create_gets_a_fresh_id(&c, leader, follower, &ids).await;
    c.stop_all().await;
}

type Catalogs = Vec<(u64, Vec<(String, u64)>)>;

/// The timed-out write committed after all: waits (20 s at most) until every node has a
/// database named `name`; each node's databases then.
async fn wait_everywhere(c: &Cluster, name: &str) -> Catalogs {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut catalogs = Vec::new();
    for sid in 1..=3 {
        loop {
            let dbs = databases(c, sid).await;
            if dbs.iter().any(|(n, _)| n == name) {
                catalogs.push((sid, dbs));
                break;
            }
            assert!(
                Instant::now() < deadline,
                "node {sid}: `{name}` never landed"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    catalogs
}

/// Every `Written` answer's database is in every node's catalog with the answered id; the
/// errors are conflicts (or TIMEOUT, if this machine stalled past the write's timeout).
fn every_written_answer_is_in_every_catalog(
    answers: &[(&str, Result<ResponseBody, ErrorReply>)],
    catalogs: &Catalogs,
) {
    for (name, answer) in answers {
        match answer {
            Ok(ResponseBody::Written { created_id, .. }) => {
                let id = created_id.expect("a create answers the new id");
                for (sid, dbs) in catalogs {
                    assert!(
                        dbs.contains(&(name.to_string(), id)),
                        "node {sid}: `{name}` was answered Written with id {id}, but the \
                         catalog holds {dbs:?}"
                    );
                }
            }
            Ok(other) => panic!("`{name}`: not a write answer: {other:?}"),
            // TIMEOUT only if this machine stalled past the write's timeout (see below).
            Err(e) => assert!(
                matches!(
                    e.status,
                    Status::AlreadyExists | Status::NotFound | Status::Timeout
                ),
                "`{name}`: {e:?}"
            ),
        }
    }
}

/// `second` conflicts with nothing: Written, unless the machine stalled so long that it timed
/// out before the freeze ended (its outcome then unknown, which is no wrong answer). Every
/// node holds the same databases, with unique ids; those ids.
fn second_is_written_and_ids_are_unique(
    second: &Result<ResponseBody, ErrorReply>,
    catalogs: &Catalogs,
) -> std::collections::BTreeSet<u64> {
    match second {
        Ok(ResponseBody::Written { .. }) => {}
        Err(e) if e.status == Status::Timeout => {
            println!("NOTE: `second` timed out (machine stalled): {e:?}");
        }
        other => panic!("`second` conflicts with nothing: {other:?}"),
    }
    let ids: std::collections::BTreeSet<u64> = catalogs[0].1.iter().map(|(_, id)| *id).collect();
    assert_eq!(ids.len(), catalogs[0].1.len(), "ids are unique");
    for (sid, dbs) in catalogs {
        assert_eq!(dbs, &catalogs[0].1, "node {sid} differs");
    }
    ids
}

/// Everything settled (the timed-out entry too, by the node's late answer): the planner is
/// back on the applied catalog, and a new create gets an id no one has.
async fn a_new_create_gets_a_fresh_id(
    c: &Cluster,
    leader: u64,
    follower: u64,
    ids: &std::collections::BTreeSet<u64>,
) {
    let Ok(ResponseBody::Written {
        created_id: Some(id),
        ..
    }) = call(c.addr(leader), create_db("third")).await
    else {
        panic!("a create after everything settled must succeed");
    };
    assert!(!ids.contains(&id), "id {id} reused");
    assert!(databases(c, follower)
        .await
        .contains(&("third".to_string(), id)));
}
