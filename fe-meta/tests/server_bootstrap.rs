//! `fe-meta server --bootstrap` (PITFALLS B9): without it an empty data dir does not vote; a
//! brand-new cluster started that way never elects, and a wiped node restarted that way
//! resyncs from the leader, then votes; `mntr` shows the state.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod server_support;

use std::time::{Duration, Instant};

use server_support::{add_backend, call, Cluster};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zab_net::Role;

async fn mntr(addr: std::net::SocketAddr) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"mntr").await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_cluster_without_bootstrap_never_elects() {
    let mut c = Cluster::new(3, "");
    for sid in 1..=3 {
        c.start_bootstrap(sid, false).await;
    }
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(3) {
        for sid in 1..=3 {
            let st = c.servers[&sid].node_status();
            assert!(!st.initialized && !st.serving, "{st:?}");
            assert!(
                !matches!(st.role, Role::Leading | Role::Following),
                "{st:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(mntr(c.addr(1))
        .await
        .contains("fe_meta_zab_initialized\t0\n"));
    c.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wiped_node_without_bootstrap_resyncs_then_votes() {
    let mut c = Cluster::new(3, "");
    c.start_all().await;
    let leader = c.wait_stable(Duration::from_secs(20)).await;
    call(c.addr(leader), add_backend("be.example", 9050))
        .await
        .unwrap();
    let wiped = if leader == 1 { 2 } else { 1 };
    c.stop(wiped).await;
    std::fs::remove_dir_all(c.data_dir(wiped)).unwrap();
    c.start_bootstrap(wiped, false).await;
    let t0 = Instant::now();
    loop {
        let st = c.servers[&wiped].node_status();
        if st.initialized && st.role == Role::Following && st.serving {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "{st:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(mntr(c.addr(wiped))
        .await
        .contains("fe_meta_zab_initialized\t1\n"));
    // Restarting it with --bootstrap now changes nothing: its data dir is initialized.
    c.stop(wiped).await;
    c.start_bootstrap(wiped, true).await;
    c.wait_stable(Duration::from_secs(20)).await;
    c.stop_all().await;
}
