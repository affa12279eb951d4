//! Start-up refusals: another cluster's data dir, a wrong ROLE, a config without clusterId.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod server_support;

use fe_meta::server::meta_dir::MetaDir;
use fe_meta::server::{Server, ServerError};
use fe_meta::state::catalog::FrontendRole;
use server_support::Cluster;

/// PITFALLS E5: a server whose data dir belongs to another cluster refuses to start, naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_cluster_id_refuses_to_start() {
    let c = Cluster::new(1, "");
    let path = c.write_config(1, 0xfe_0001);
    MetaDir::new(c.data_dir(1)).write_cluster_id(42).unwrap();
    let err = Server::start(&path).await.unwrap_err();
    assert!(matches!(err, ServerError::MetaDir(_)), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("cluster 42") && msg.contains("refusing to start"),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_role_refuses_to_start() {
    let c = Cluster::new(1, "");
    let path = c.write_config(1, 0xfe_0001);
    let dir = MetaDir::new(c.data_dir(1));
    dir.write_cluster_id(0xfe_0001).unwrap();
    dir.write_role(FrontendRole::Observer, 1).unwrap();
    let err = Server::start(&path).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("OBSERVER") && msg.contains("FOLLOWER"),
        "{msg}"
    );
}

/// PITFALLS E5: a config without `clusterId` is refused; the first start records the id in
/// VERSION and later starts with the same id succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_cluster_id_or_bad_key_is_named() {
    let c = Cluster::new(1, "");
    let path = c.write_config(1, 0);
    let err = Server::start(&path).await.unwrap_err();
    assert!(err.to_string().contains("clusterId"), "{err}");
    let c = Cluster::new(1, "meta_delay_toleration_second=soon");
    let path = c.write_config(1, 7);
    let err = Server::start(&path).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("meta_delay_toleration_second") && msg.contains("line"),
        "{msg}"
    );
    // The first start records the cluster id; a later start with the same config succeeds.
    let c = Cluster::new(1, "");
    let path = c.write_config(1, 9);
    let s = Server::start(&path).await.unwrap();
    s.shutdown().await;
    assert_eq!(
        MetaDir::new(c.data_dir(1)).read_cluster_id().unwrap(),
        Some(9)
    );
    let s = Server::start(&path).await.unwrap();
    s.shutdown().await;
}
