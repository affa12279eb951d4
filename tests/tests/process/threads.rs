//! Each node's runtime is sized by its zoo.cfg's `server_threads`: one thread by default, as
//! many as configured otherwise, shown by `mntr` (`fe_meta_server_threads`,
//! `fe_meta_server_busy_seconds_total`); a cluster that mixes both commits under load, loses
//! and regains a node, and converges.

use std::time::Duration;

use tests::proc::{ClusterSpec, Load, ProcCluster};

/// `mntr`'s `key` of node `sid` as a number.
async fn mntr_value(c: &ProcCluster, sid: u64, key: &str) -> f64 {
    let m = c.mntr(sid).await.unwrap();
    m.get(key)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("mntr of node {sid} lacks a number for {key}: {m:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_node_runs_the_server_threads_its_zoo_cfg_gives() {
    let spec = ClusterSpec {
        node_extra: [(2, vec!["server_threads=3".to_owned()])].into(),
        ..ClusterSpec::default()
    };
    let mut c = ProcCluster::start("server_threads", spec).await.unwrap();
    c.leader(Duration::from_secs(10)).await.unwrap();
    let load = Load::start(&c, 8, 64, Duration::from_secs(20));
    tokio::time::sleep(Duration::from_secs(1)).await;
    for sid in c.sids() {
        let want = if sid == 2 { 3.0 } else { 1.0 };
        assert_eq!(
            mntr_value(&c, sid, "fe_meta_server_threads").await,
            want,
            "sid {sid}"
        );
        assert!(mntr_value(&c, sid, "fe_meta_server_busy_seconds_total").await > 0.0);
    }
    c.kill(2).unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    c.restart(2).unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let report = load.stop().await;
    assert!(report.acked > 100, "{report:?}");
    c.finish().await.unwrap();
}
