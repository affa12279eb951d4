//! A majority down: writes fail with QUORUM_UNAVAILABLE within a bound while reads answer;
//! once the nodes are back, writes resume and nothing acknowledged is lost.

use std::time::{Duration, Instant};

use fe_meta::client::Client;
use fe_meta::protocol::Status;
use tests::proc::{fill, ClusterSpec, ProcCluster};

use crate::{ms, other_than, write_ok};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn majority_killed_writes_fail_fast_reads_answer_then_resume() {
    let spec = ClusterSpec {
        extra: vec!["leader_wait_ms=1000".into(), "write_timeout_ms=3000".into()],
        ..ClusterSpec::default()
    };
    let mut c = ProcCluster::start("majority_down", spec).await.unwrap();
    let leader = c.leader(Duration::from_secs(10)).await.unwrap();
    fill(&c, leader, "before-", 200, 64, 16, Duration::from_secs(20))
        .await
        .unwrap();
    let survivor = other_than(&c, &[leader]);
    c.client(survivor, None)
        .await
        .unwrap()
        .sync()
        .await
        .unwrap();
    let victims: Vec<u64> = c.sids().into_iter().filter(|s| *s != survivor).collect();
    for v in &victims {
        c.kill(*v).unwrap();
    }
    let killed_at = Instant::now();

    // Within a bound the survivor refuses writes with QUORUM_UNAVAILABLE, each one fast.
    let client = c.client(survivor, None).await.unwrap();
    let first_refusal = first_quorum_refusal(&client, killed_at).await;
    refusals_are_fast(&client).await;
    // Reads still answer, with everything acknowledged before.
    let vars = client.show_vars(false).await.unwrap().value;
    assert_eq!(
        vars.iter()
            .filter(|(k, _)| k.starts_with("before-"))
            .count(),
        200
    );

    for v in &victims {
        c.restart(*v).unwrap();
    }
    let restarted_at = Instant::now();
    write_ok(&c, survivor, "after", "y", Duration::from_secs(20))
        .await
        .unwrap();
    let resumed = restarted_at.elapsed();
    println!(
        "RECOVERY scenario=majority_down first_quorum_error_ms={} writes_resumed_after_restart_ms={}",
        ms(first_refusal),
        ms(resumed)
    );
    let get = c
        .client(survivor, None)
        .await
        .unwrap()
        .get_var("while-down", true)
        .await
        .unwrap();
    assert_eq!(get.value, None, "a refused write was applied");
    c.finish().await.unwrap();
}

/// Writes through `client` until one is refused with QUORUM_UNAVAILABLE (NOT_LEADER and
/// SERVER_TIMEOUT are the ways there; anything else fails the test), within 10 s of
/// `killed_at`; the time from `killed_at` to that refusal.
async fn first_quorum_refusal(client: &Client, killed_at: Instant) -> Duration {
    loop {
        match client.set_var("while-down", "x").await {
            Err(e) if e.status() == Some(Status::QuorumUnavailable) => break killed_at.elapsed(),
            Err(e) if matches!(e.status(), Some(Status::NotLeader | Status::Timeout)) => {}
            other => panic!("a write without quorum: {other:?}"),
        }
        assert!(
            killed_at.elapsed() < Duration::from_secs(10),
            "no QUORUM_UNAVAILABLE"
        );
    }
}

/// Three more writes through `client` are each refused with QUORUM_UNAVAILABLE within 2 s.
async fn refusals_are_fast(client: &Client) {
    for _ in 0..3 {
        let t = Instant::now();
        let e = client.set_var("while-down", "x").await.unwrap_err();
        assert_eq!(e.status(), Some(Status::QuorumUnavailable), "{e:?}");
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "refusal took {:?}",
            t.elapsed()
        );
    }
}
