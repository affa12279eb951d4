//! Writes through non-leaders on a 3-node cluster: a follower never writes locally (it forwards,
//! or answers NOT_LEADER naming the leader); a refused or failed forward answers at once and
//! never waits on a journal id; forwarded writes waiting for local apply run alongside many
//! reads and writes without deadlock; the ZAB epoch is visible and names the committing leader.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod server_support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use fe_meta::protocol::{
    encode_frame, encode_request, ErrorDetail, ReadOptions, Request, RequestBody, RequestMeta,
    ResponseBody, Status, StatusInfo, FORWARDED_BIT,
};
use fe_meta::Zxid;
use server_support::{add_backend, backends_of, call, four, Client, Cluster};

const PLAIN: ReadOptions = ReadOptions { sync: false };
const SYNC: ReadOptions = ReadOptions { sync: true };

async fn status(addr: SocketAddr) -> StatusInfo {
    match call(addr, RequestBody::Status).await.unwrap() {
        ResponseBody::Status(s) => s,
        other => panic!("{other:?}"),
    }
}

/// The value of `key` in a `mntr` answer.
fn mntr_value(mntr: &str, key: &str) -> u64 {
    mntr.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('\t')?.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {mntr}"))
}

fn written(r: &ResponseBody) -> Zxid {
    match r {
        ResponseBody::Written { journal_id, .. } => *journal_id,
        other => panic!("not Written: {other:?}"),
    }
}

/// PITFALLS E13: a follower cannot append to the journal. A write that reaches it marked as
/// already forwarded (so it may not forward it again) is answered NOT_LEADER with the leader's
/// sid and client address, and is logged nowhere; the same write from a client is forwarded,
/// committed by the leader (its journal id carries the leader's epoch) and applied on the
/// follower before the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_follower_never_writes_locally_it_forwards_or_answers_not_leader() {
    let mut c = Cluster::new(3, "meta_delay_toleration_second=60\nleader_wait_ms=3000");
    c.start_all().await;
    let leader = c.wait_stable(Duration::from_secs(20)).await;
    let follower = if leader == 1 { 2 } else { 1 };

    let mut client = Client::connect(c.addr(follower)).await;
    let id = FORWARDED_BIT | 1;
    let mut frame = Vec::new();
    encode_frame(
        &encode_request(&Request {
            id,
            meta: RequestMeta::default(),
            body: add_backend("local.example", 1),
        }),
        &mut frame,
    );
    client.raw(&frame).await;
    let r = client.recv().await.unwrap();
    assert_eq!(r.id, id);
    let e = r.result.unwrap_err();
    let ErrorDetail::Leader {
        leader_sid,
        leader_addr,
    } = &e.detail
    else {
        panic!("{e:?}")
    };
    assert_eq!(*leader_sid, Some(leader));
    assert_eq!(
        leader_addr.as_deref(),
        Some(c.addr(leader).to_string().as_str())
    );
    for sid in [1u64, 2, 3] {
        let r = call(c.addr(sid), RequestBody::ShowBackends(SYNC))
            .await
            .unwrap();
        assert!(backends_of(&r).is_empty(), "logged on {sid}: {r:?}");
    }

    let j = written(
        &call(c.addr(follower), add_backend("fwd.example", 2))
            .await
            .unwrap(),
    );
    let st = status(c.addr(leader)).await;
    assert_eq!(
        u64::from(j.epoch().0),
        st.epoch,
        "committed in the leader's epoch"
    );
    assert!(status(c.addr(follower)).await.applied_journal_id >= j);
    c.stop_all().await;
}

/// PITFALLS E12: a forward that is refused or fails never leaves the client waiting on a
/// journal id. With `write_timeout_ms` at 30 s: a write the leader refuses (duplicate backend)
/// comes back through the follower typed and at once; and with the leader and the other
/// follower gone, a write through the survivor fails within about `leader_wait_ms` (1 s), not
/// after the write timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_forward_answers_at_once_and_never_waits_on_a_journal_id() {
    let mut c = Cluster::new(
        3,
        "meta_delay_toleration_second=300\nleader_wait_ms=1000\nwrite_timeout_ms=30000",
    );
    c.start_all().await;
    let leader = c.wait_stable(Duration::from_secs(20)).await;
    let survivor = if leader == 3 { 1 } else { 3 };
    call(c.addr(survivor), add_backend("dup.example", 1))
        .await
        .unwrap();
    for _ in 0..3 {
        let t = Instant::now();
        let e = call(c.addr(survivor), add_backend("dup.example", 1))
            .await
            .unwrap_err();
        assert_eq!(e.status, Status::AlreadyExists, "{e:?}");
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    }

    for sid in [1u64, 2, 3] {
        if sid != survivor {
            c.stop(sid).await;
        }
    }
    for i in 0..3 {
        let t = Instant::now();
        let e = call(c.addr(survivor), add_backend("late.example", i))
            .await
            .unwrap_err();
        let took = t.elapsed();
        eprintln!(
            "write through a leaderless follower: {:?} after {took:?}",
            e.status
        );
        assert!(
            matches!(
                e.status,
                Status::QuorumUnavailable | Status::NotLeader | Status::Timeout
            ),
            "{e:?}"
        );
        assert!(
            !e.message.contains("journal id"),
            "waited on a journal id: {e:?}"
        );
        assert!(took < Duration::from_secs(4), "took {took:?}: {e:?}");
    }
    c.stop_all().await;
}

/// PITFALLS E11: forwarded writes wait for local apply with no state-machine lock held. Four
/// clients write through the two followers (each write waits until its follower applied it,
/// then a plain read there must see it) while four others read plain and synced on every
/// node; everything ends, bounded, with all 80 writes seen everywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forwarded_writes_and_many_reads_run_together_without_deadlock() {
    let mut c = Cluster::new(3, "meta_delay_toleration_second=60\nleader_wait_ms=3000");
    c.start_all().await;
    let leader = c.wait_stable(Duration::from_secs(20)).await;
    let followers: Vec<u64> = [1u64, 2, 3].into_iter().filter(|s| *s != leader).collect();
    let addrs: Vec<SocketAddr> = [1u64, 2, 3].iter().map(|s| c.addr(*s)).collect();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));

    let run = async {
        let mut writers = Vec::new();
        for w in 0..4u16 {
            let addr = c.addr(followers[usize::from(w) % 2]);
            writers.push(tokio::spawn(async move {
                let mut client = Client::connect(addr).await;
                for i in 0..20u16 {
                    let host = format!("w{w}.example");
                    let j = written(&client.call(add_backend(&host, i + 1)).await.unwrap());
                    let r = client.call(RequestBody::ShowBackends(PLAIN)).await.unwrap();
                    assert!(backends_of(&r).contains(&(host, i + 1)), "at {j}");
                }
            }));
        }
        let readers: Vec<_> = (0..4usize)
            .map(|r| tokio::spawn(read_until(addrs.clone(), r, done.clone())))
            .collect();
        for w in writers {
            w.await.unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::Release);
        let mut reads = 0;
        for r in readers {
            reads += r.await.unwrap();
        }
        reads
    };
    let t = Instant::now();
    let reads = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("forwarded writes and reads did not finish within 60 s");
    eprintln!(
        "80 forwarded writes with {reads} concurrent reads: {:?}",
        t.elapsed()
    );
    assert!(reads > 0);
    for a in &addrs {
        let r = call(*a, RequestBody::ShowBackends(SYNC)).await.unwrap();
        assert_eq!(backends_of(&r).len(), 80);
    }
    c.stop_all().await;
}

/// Reads SHOW BACKENDS round-robin over `addrs` (every third synced, offset by `r`) until
/// `done`; how many reads it made.
async fn read_until(
    addrs: Vec<SocketAddr>,
    r: usize,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> u64 {
    let mut clients = Vec::new();
    for a in &addrs {
        clients.push(Client::connect(*a).await);
    }
    let mut n = 0u64;
    while !done.load(std::sync::atomic::Ordering::Acquire) {
        let opts = if (n + r as u64).is_multiple_of(3) {
            SYNC
        } else {
            PLAIN
        };
        let k = (n as usize + r) % clients.len();
        clients[k]
            .call(RequestBody::ShowBackends(opts))
            .await
            .unwrap();
        n += 1;
    }
    n
}

/// PITFALLS E15: the ZAB epoch is exposed for fencing. STATUS (`fe-meta status`) and `mntr`
/// (`fe_meta_epoch`) show the epoch on every node; every journal id carries in its high 32
/// bits the epoch of the leader that committed it; after the leader stops, the new leader's
/// epoch is higher and the next write's journal id carries it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_zab_epoch_is_visible_and_names_the_committing_leader() {
    let mut c = Cluster::new(3, "meta_delay_toleration_second=60\nleader_wait_ms=3000");
    c.start_all().await;
    let old = c.wait_stable(Duration::from_secs(20)).await;
    let via = if old == 1 { 2 } else { 1 };
    let j1 = written(
        &call(c.addr(via), add_backend("a.example", 1))
            .await
            .unwrap(),
    );
    let e1 = u64::from(j1.epoch().0);
    assert!(e1 > 0);
    for sid in [1u64, 2, 3] {
        assert_eq!(status(c.addr(sid)).await.epoch, e1, "sid {sid}");
        let mntr = four(c.addr(sid), "mntr").await;
        assert_eq!(mntr_value(&mntr, "fe_meta_epoch"), e1, "sid {sid}");
    }

    c.stop(old).await;
    let t0 = Instant::now();
    let j2 = loop {
        match call(c.addr(via), add_backend("b.example", 2)).await {
            Ok(r) => break written(&r),
            Err(e) => {
                assert!(
                    matches!(e.status, Status::QuorumUnavailable | Status::NotLeader),
                    "{e:?}"
                );
                assert!(t0.elapsed() < Duration::from_secs(15), "{e:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let e2 = u64::from(j2.epoch().0);
    assert!(e2 > e1, "epoch {e2} after {e1}");
    for sid in [1u64, 2, 3].into_iter().filter(|s| *s != old) {
        let st = status(c.addr(sid)).await;
        assert_eq!(st.epoch, e2, "sid {sid}: {st:?}");
        let mntr = four(c.addr(sid), "mntr").await;
        assert_eq!(mntr_value(&mntr, "fe_meta_epoch"), e2, "sid {sid}");
    }
    c.stop_all().await;
}
