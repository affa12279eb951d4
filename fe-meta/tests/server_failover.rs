//! The leader stops: writes through a follower go to the new leader; SHOW FRONTENDS shows the
//! stopped node as not alive; the old leader restarts from its data and catches up.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod server_support;

use std::time::{Duration, Instant};

use fe_meta::protocol::{ReadOptions, RequestBody, ResponseBody, Status};
use server_support::{add_backend, backends_of, call, Cluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_go_on_after_the_leader_stops_and_it_catches_up_on_restart() {
    let mut c = Cluster::new(3, "meta_delay_toleration_second=60\nleader_wait_ms=3000");
    c.start_all().await;
    let old = c.wait_stable(Duration::from_secs(20)).await;
    let via = if old == 1 { 2 } else { 1 };
    call(c.addr(via), add_backend("a.example", 1))
        .await
        .unwrap();
    c.stop(old).await;
    let t0 = Instant::now();
    loop {
        match call(c.addr(via), add_backend("b.example", 2)).await {
            Ok(ResponseBody::Written { .. }) => break,
            Ok(other) => panic!("{other:?}"),
            Err(e) => {
                // A write whose outcome is unknown (TIMEOUT) may have committed: stop retrying.
                assert!(
                    matches!(e.status, Status::QuorumUnavailable | Status::NotLeader),
                    "{e:?}"
                );
                assert!(t0.elapsed() < Duration::from_secs(15), "{e:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    eprintln!(
        "write through a follower after the leader stopped: {:?}",
        t0.elapsed()
    );
    let r = call(
        c.addr(via),
        RequestBody::ShowFrontends(ReadOptions::default()),
    )
    .await
    .unwrap();
    let ResponseBody::Frontends { rows, .. } = r else {
        panic!()
    };
    let dead: Vec<u64> = rows.iter().filter(|f| !f.alive).map(|f| f.sid).collect();
    assert_eq!(dead, vec![old], "{rows:?}");
    assert!(rows.iter().filter(|f| f.is_leader).all(|f| f.sid != old));

    c.start(old).await;
    let sync = RequestBody::ShowBackends(ReadOptions { sync: true });
    let t0 = Instant::now();
    let r = loop {
        match call(c.addr(old), sync.clone()).await {
            Ok(r) => break r,
            Err(e) => assert!(t0.elapsed() < Duration::from_secs(15), "{e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut got = backends_of(&r);
    got.sort();
    assert_eq!(
        got,
        vec![("a.example".to_string(), 1), ("b.example".to_string(), 2)]
    );
    c.stop_all().await;
}
