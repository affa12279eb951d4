//! Losing the quorum: writes fail fast with QUORUM_UNAVAILABLE while reads go on (tolerance
//! high); with a 1 s tolerance the survivor's reads turn STALE and say how stale.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod server_support;

use std::time::{Duration, Instant};

use fe_meta::protocol::{ErrorDetail, ReadOptions, RequestBody, Status};
use server_support::{add_backend, backends_of, call, Cluster};

const PLAIN: ReadOptions = ReadOptions { sync: false };

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn majority_down_writes_fail_fast_reads_go_on() {
    let mut c = Cluster::new(
        3,
        "meta_delay_toleration_second=300\nleader_wait_ms=500\nwrite_timeout_ms=3000",
    );
    c.start_all().await;
    let leader = c.wait_stable(Duration::from_secs(20)).await;
    call(c.addr(leader), add_backend("be.example", 9050))
        .await
        .unwrap();
    let survivor = if leader == 3 { 1 } else { 3 };
    call(c.addr(survivor), RequestBody::Sync).await.unwrap();
    for sid in [1u64, 2, 3] {
        if sid != survivor {
            c.stop(sid).await;
        }
    }
    // Within a few seconds the survivor knows there is no quorum; from then on every write
    // fails fast with QUORUM_UNAVAILABLE.
    let t0 = Instant::now();
    loop {
        let e = call(c.addr(survivor), add_backend("late.example", 1))
            .await
            .unwrap_err();
        if e.status == Status::QuorumUnavailable {
            break;
        }
        assert!(
            matches!(e.status, Status::NotLeader | Status::Timeout),
            "{e:?}"
        );
        assert!(t0.elapsed() < Duration::from_secs(15), "still {e:?}");
    }
    for _ in 0..3 {
        let t = Instant::now();
        let e = call(c.addr(survivor), add_backend("late.example", 1))
            .await
            .unwrap_err();
        assert_eq!(e.status, Status::QuorumUnavailable, "{e:?}");
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "took {:?}",
            t.elapsed()
        );
        let e = call(c.addr(survivor), RequestBody::Sync).await.unwrap_err();
        assert_eq!(e.status, Status::QuorumUnavailable, "{e:?}");
    }
    let r = call(c.addr(survivor), RequestBody::ShowBackends(PLAIN))
        .await
        .unwrap();
    assert_eq!(backends_of(&r), vec![("be.example".to_string(), 9050)]);
    assert!(call(c.addr(survivor), RequestBody::Status).await.is_ok());
    c.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stale_follower_refuses_reads_and_says_how_stale() {
    let mut c = Cluster::new(3, "meta_delay_toleration_second=1\nleader_wait_ms=500");
    c.start_all().await;
    let leader = c.wait_stable(Duration::from_secs(20)).await;
    let survivor = if leader == 3 { 1 } else { 3 };
    // While the leader logs TIMESTAMPs every 500 ms, the follower serves plain reads.
    let t0 = Instant::now();
    loop {
        match call(c.addr(survivor), RequestBody::ShowBackends(PLAIN)).await {
            Ok(_) => break,
            Err(e) => assert!(t0.elapsed() < Duration::from_secs(10), "{e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        call(c.addr(survivor), RequestBody::ShowBackends(PLAIN))
            .await
            .unwrap();
    }
    for sid in [1u64, 2, 3] {
        if sid != survivor {
            c.stop(sid).await;
        }
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let e = call(c.addr(survivor), RequestBody::ShowBackends(PLAIN))
        .await
        .unwrap_err();
    let ErrorDetail::Lag {
        lag_ms,
        tolerance_ms,
    } = e.detail
    else {
        panic!("{e:?}")
    };
    assert_eq!(tolerance_ms, 1000);
    assert!(lag_ms > 1000, "{lag_ms}");
    assert!(e.message.contains("ms behind"), "{}", e.message);
    // Diagnostics still answer.
    assert!(call(c.addr(survivor), RequestBody::Status).await.is_ok());
    assert!(call(c.addr(survivor), RequestBody::ShowFrontends(PLAIN))
        .await
        .is_ok());
    c.stop_all().await;
}
