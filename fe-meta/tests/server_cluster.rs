//! A 3-node fe-meta cluster on loopback: read-your-writes through every node, forwarded
//! refusals, SHOW FRONTENDS and replica digests, four-letter words, and malformed frames that
//! never stop the server.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod server_support;

use std::time::Duration;

use fe_meta::command::Command;
use fe_meta::protocol::{Mode, ReadOptions, RequestBody, ResponseBody, Status};
use fe_meta::Zxid;
use server_support::{add_backend, backends_of, call, four, Client, Cluster};

const SYNC: ReadOptions = ReadOptions { sync: true };
const PLAIN: ReadOptions = ReadOptions { sync: false };

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_through_any_node_are_read_there_at_once() {
    let mut c = Cluster::new(3, "meta_delay_toleration_second=60\nleader_wait_ms=3000");
    c.start_all().await;
    let leader = c.wait_stable(Duration::from_secs(20)).await;
    each_node_reads_its_own_write_at_once(&c).await;
    let follower = if leader == 1 { 2 } else { 1 };
    refused_writes_are_typed(&c, follower).await;
    pipelined_writes_are_answered_by_id(&c, follower).await;
    replicas_agree(&c).await;
    frontends_show_one_leader(&c, leader, follower).await;
    status_and_four_letter_words(&c, leader, follower).await;
    c.stop_all().await;
}

/// A write through each node: the node that answered has applied it (a plain read there
/// sees it), every other node sees it with a sync read.
async fn each_node_reads_its_own_write_at_once(c: &Cluster) {
    for (i, sid) in [1u64, 2, 3].into_iter().enumerate() {
        let host = format!("be{i}.example");
        let mut client = Client::connect(c.addr(sid)).await;
        let w = client.call(add_backend(&host, 9050)).await.unwrap();
        let ResponseBody::Written {
            journal_id,
            created_id,
        } = w
        else {
            panic!("{w:?}")
        };
        assert!(created_id.is_some());
        // The node that answered has applied it: a plain read there sees it (no sync).
        let r = client.call(RequestBody::ShowBackends(PLAIN)).await.unwrap();
        assert!(
            backends_of(&r).contains(&(host.clone(), 9050)),
            "node {sid}: {r:?}"
        );
        if let ResponseBody::Backends { journal_id: j, .. } = r {
            assert!(j >= journal_id);
        }
        // Every other node sees it with a sync read.
        for other in [1u64, 2, 3] {
            let r = call(c.addr(other), RequestBody::ShowBackends(SYNC))
                .await
                .unwrap();
            assert!(
                backends_of(&r).contains(&(host.clone(), 9050)),
                "node {other}"
            );
        }
    }
}

/// A refused write through a follower comes back typed and logs nothing.
async fn refused_writes_are_typed(c: &Cluster, follower: u64) {
    let dup = call(c.addr(follower), add_backend("be0.example", 9050))
        .await
        .unwrap_err();
    assert_eq!(dup.status, Status::AlreadyExists, "{dup:?}");
    let unknown = RequestBody::Write(Command::DropDb {
        name: "nope".into(),
    });
    let e = call(c.addr(follower), unknown).await.unwrap_err();
    assert_eq!(e.status, Status::NotFound, "{e:?}");
}

/// Pipelining: many writes in flight on one connection, answered by id.
async fn pipelined_writes_are_answered_by_id(c: &Cluster, follower: u64) {
    let mut client = Client::connect(c.addr(follower)).await;
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(
            client
                .send(RequestBody::Write(Command::CreateDb {
                    name: format!("db{i}"),
                }))
                .await,
        );
    }
    let mut seen = Vec::new();
    for _ in 0..20 {
        let r = client.recv().await.unwrap();
        assert!(
            matches!(r.result, Ok(ResponseBody::Written { .. })),
            "{r:?}"
        );
        seen.push(r.id);
    }
    seen.sort_unstable();
    assert_eq!(seen, ids);
}

/// Replicas agree: same digest at the same journal id after sync.
async fn replicas_agree(c: &Cluster) {
    let mut digests = Vec::new();
    for sid in [1u64, 2, 3] {
        let _ = call(c.addr(sid), RequestBody::Sync).await.unwrap();
        digests.push(call(c.addr(sid), RequestBody::Digest(SYNC)).await.unwrap());
    }
    let key = |d: &ResponseBody| match d {
        ResponseBody::Digest {
            journal_id, digest, ..
        } => (*journal_id, *digest),
        other => panic!("{other:?}"),
    };
    // Journal ids may differ by a TIMESTAMP landing in between; equal ids mean equal digests.
    for a in &digests {
        for b in &digests {
            if key(a).0 == key(b).0 {
                assert_eq!(key(a).1, key(b).1);
            }
        }
    }
}

/// SHOW FRONTENDS on a follower: three rows, one leader, all alive.
async fn frontends_show_one_leader(c: &Cluster, leader: u64, follower: u64) {
    let r = call(c.addr(follower), RequestBody::ShowFrontends(PLAIN))
        .await
        .unwrap();
    let ResponseBody::Frontends { rows, .. } = r else {
        panic!("{r:?}")
    };
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows.iter().all(|f| f.alive), "{rows:?}");
    let leaders: Vec<u64> = rows.iter().filter(|f| f.is_leader).map(|f| f.sid).collect();
    assert_eq!(leaders, vec![leader]);
    assert!(rows
        .iter()
        .all(|f| f.replayed_journal_id.is_some_and(|z| z > Zxid::ZERO)));
}

/// STATUS and the four-letter words.
async fn status_and_four_letter_words(c: &Cluster, leader: u64, follower: u64) {
    let st = call(c.addr(leader), RequestBody::Status).await.unwrap();
    let ResponseBody::Status(st) = st else {
        panic!()
    };
    assert_eq!(st.mode, Mode::Leader);
    assert_eq!(st.cluster_id, 0xfe_0001);
    assert_eq!(four(c.addr(follower), "ruok").await, "imok");
    let srvr = four(c.addr(leader), "srvr").await;
    assert!(
        srvr.contains("Mode: leader\n") && srvr.contains("Zxid: 0x"),
        "{srvr}"
    );
    assert!(srvr.contains("Node count: 23\n"), "{srvr}");
    let mntr = four(c.addr(follower), "mntr").await;
    assert!(mntr.contains("zk_server_state\tfollower\n"), "{mntr}");
    assert!(mntr.contains("zk_znode_count\t23\n"), "{mntr}");
    let mntr = four(c.addr(leader), "mntr").await;
    assert!(mntr.contains("zk_synced_followers\t2\n"), "{mntr}");
    let stat = four(c.addr(leader), "stat").await;
    assert!(stat.contains("Clients:\n"), "{stat}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn malformed_frames_get_error_frames_and_the_server_keeps_serving() {
    let mut c = Cluster::new(1, "meta_delay_toleration_second=60");
    c.start_all().await;
    c.wait_stable(Duration::from_secs(20)).await;
    let addr = c.addr(1);

    // Unknown kind with a readable id: error for that id, connection stays open.
    let mut cl = Client::connect(addr).await;
    let mut f = vec![0, 0, 0, 11, 1];
    f.extend_from_slice(&7u64.to_be_bytes());
    f.extend_from_slice(&999u16.to_be_bytes());
    cl.raw(&f).await;
    let r = cl.recv().await.unwrap();
    assert_eq!(r.id, 7);
    assert_eq!(r.result.unwrap_err().status, Status::InvalidArgument);
    // A short body (ADD_BACKEND with nothing): error for id 8, still open.
    let mut f = vec![0, 0, 0, 11, 1];
    f.extend_from_slice(&8u64.to_be_bytes());
    f.extend_from_slice(&10u16.to_be_bytes());
    cl.raw(&f).await;
    let r = cl.recv().await.unwrap();
    assert_eq!(
        (r.id, r.result.unwrap_err().status),
        (8, Status::InvalidArgument)
    );
    assert!(matches!(
        cl.call(RequestBody::Status).await,
        Ok(ResponseBody::Status(_))
    ));

    // Fatal cases: error frame for id 0, then the connection closes.
    let fatal: Vec<Vec<u8>> = vec![
        vec![0x04, 0x00, 0x00, 0x01],                       // over 64 MiB
        b"Envi".to_vec(), // not lowercase, so not a word: an oversized length
        vec![0, 0, 0, 3, 1, 0, 0], // header cut short
        vec![0, 0, 0, 11, 9, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1], // version 9
        vec![0, 0, 0, 0], // empty payload
    ];
    for bytes in fatal {
        let mut cl = Client::connect(addr).await;
        cl.raw(&bytes).await;
        let r = cl.recv().await.unwrap();
        assert_eq!(r.id, 0, "{bytes:?}");
        assert_eq!(r.result.unwrap_err().status, Status::InvalidArgument);
        assert!(
            cl.recv().await.is_none(),
            "connection not closed after {bytes:?}"
        );
    }
    // Garbage and abrupt closes.
    for seed in 0u8..20 {
        let mut cl = Client::connect(addr).await;
        let junk: Vec<u8> = (0..64u8)
            .map(|i| i.wrapping_mul(31).wrapping_add(seed))
            .collect();
        cl.raw(&junk[..(seed as usize * 3) % 64]).await;
        drop(cl);
    }
    assert_eq!(four(addr, "ruok").await, "imok");
    assert!(call(addr, RequestBody::Status).await.is_ok());
    c.stop_all().await;
}

/// Answers completing together on one connection (conn: one writer, answers in completion
/// order): none is lost or duplicated. 3,000 requests (plain reads, which answer at once on many runtime
/// threads, interleaved with writes) are sent back to back on one connection, then every
/// answer is read: each id exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_pipelined_answers_on_one_connection_are_each_written_once() {
    let mut c = Cluster::new(1, "meta_delay_toleration_second=60");
    c.start_all().await;
    c.wait_stable(Duration::from_secs(20)).await;
    let mut client = Client::connect(c.addr(1)).await;
    let mut ids = Vec::new();
    for i in 0..3_000 {
        let body = if i % 10 == 0 {
            RequestBody::Write(Command::CreateDb {
                name: format!("pipelined{i}"),
            })
        } else {
            RequestBody::ShowBackends(PLAIN)
        };
        ids.push(client.send(body).await);
    }
    let mut seen = Vec::with_capacity(ids.len());
    for _ in 0..ids.len() {
        let r = tokio::time::timeout(Duration::from_secs(20), client.recv())
            .await
            .expect("an answer within 20 s")
            .expect("the connection stays open");
        assert!(r.result.is_ok(), "{r:?}");
        seen.push(r.id);
    }
    seen.sort_unstable();
    assert_eq!(seen, ids);
    c.stop_all().await;
}
