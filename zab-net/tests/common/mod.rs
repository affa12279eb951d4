//! An in-process cluster of real nodes on loopback for the node tests: ephemeral ports, temp
//! data dirs, tickTime 100 ms, **forceSync=no** (tests only: no fsync, so a crash of the
//! machine could lose acknowledged writes; the node stops here are clean shutdowns).
//! The transport tests' helpers (bare transports, no nodes) are in `transport`.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod kv;
pub mod ports;
pub mod transport;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use zab_core::{Membership, Role, ServerId, Zxid};
use zab_net::config::parse;
use zab_net::transport::PeerAddrs;
use zab_net::{NetError, Node, NodeOptions, NodeStatus, SubmitError};

pub use kv::Kv;

/// How long a test waits for a stable leader or an apply.
pub const STABLE: Duration = Duration::from_secs(10);

/// A submit failure that a client retries (an election or a lost quorum, not a refusal).
pub fn retryable(e: &SubmitError) -> bool {
    matches!(
        e,
        SubmitError::NoLeader
            | SubmitError::NotLeader { .. }
            | SubmitError::QuorumLost
            | SubmitError::Timeout(_)
    )
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
}

pub struct Cluster {
    pub root: tempfile::TempDir,
    pub voters: u64,
    pub observers: u64,
    pub snap_count: u64,
    pub pre_alloc_kib: u64,
    /// `snapSizeLimitInKb`; `None` leaves the key out (ZooKeeper's 4 GiB default).
    pub snap_size_limit_kib: Option<i64>,
    /// `snapshotSizeFactor`; `None` leaves the key out (0.33).
    pub snapshot_size_factor: Option<f64>,
    /// `snapCpuPercent`; `None` leaves the key out (the default).
    pub snap_cpu_percent: Option<u8>,
    pub opts: NodeOptions,
    /// `clusterId`; `None` leaves the key out.
    pub cluster_id: Option<u64>,
    pub nodes: BTreeMap<ServerId, Node>,
    pub kvs: BTreeMap<ServerId, Kv>,
    pub addrs: BTreeMap<ServerId, PeerAddrs>,
}

impl Cluster {
    /// A cluster of `voters` participants and `observers` observers (sids after the voters),
    /// not started.
    pub fn new(voters: u64, observers: u64) -> Cluster {
        init_tracing();
        let mut opts = NodeOptions::default();
        opts.request_timeout = Duration::from_secs(10);
        opts.exact_snap_count = true;
        opts.stream_stall_timeout = Duration::from_secs(5);
        opts.bootstrap = true;
        Cluster {
            root: tempfile::tempdir().unwrap(),
            voters,
            observers,
            snap_count: 100_000,
            pre_alloc_kib: 1024,
            snap_size_limit_kib: None,
            snapshot_size_factor: None,
            snap_cpu_percent: None,
            opts,
            cluster_id: None,
            nodes: BTreeMap::new(),
            kvs: BTreeMap::new(),
            addrs: BTreeMap::new(),
        }
    }

    pub fn sids(&self) -> Vec<ServerId> {
        (1..=self.voters + self.observers).map(ServerId).collect()
    }

    fn config_text(&self, sid: ServerId) -> String {
        let mut t = format!(
            "tickTime=100\ninitLimit=20\nsyncLimit=5\nforceSync=no\npreAllocSize={}\n\
             snapCount={}\ndataDir={}\n",
            self.pre_alloc_kib,
            self.snap_count,
            self.root.path().join(format!("n{}", sid.0)).display()
        );
        if let Some(id) = self.cluster_id {
            t += &format!("clusterId={id}\n");
        }
        if let Some(kib) = self.snap_size_limit_kib {
            t += &format!("snapSizeLimitInKb={kib}\n");
        }
        if let Some(f) = self.snapshot_size_factor {
            t += &format!("snapshotSizeFactor={f}\n");
        }
        if let Some(p) = self.snap_cpu_percent {
            t += &format!("snapCpuPercent={p}\n");
        }
        // Placeholder ports, never bound: the nodes listen where `ports` puts them (NodeOptions).
        for s in self.sids() {
            let obs = if s.0 > self.voters { ":observer" } else { "" };
            t += &format!(
                "server.{}=127.0.0.1:{}:{}{obs}\n",
                s.0,
                10_000 + s.0,
                20_000 + s.0
            );
        }
        t
    }

    /// Two free loopback ports for a node whose address text must be real (see `ports`).
    pub fn free_addrs() -> PeerAddrs {
        ports::free_addrs()
    }

    pub async fn start_all(&mut self) {
        for sid in self.sids() {
            self.start(sid).await;
        }
    }

    /// Starts (or restarts, on its old ports and data) one node.
    pub async fn start(&mut self, sid: ServerId) {
        self.try_start(sid).await.unwrap();
    }

    /// Like [`Cluster::start`], returning why the node did not start.
    pub async fn try_start(&mut self, sid: ServerId) -> Result<(), NetError> {
        let cfg = parse(&self.config_text(sid)).unwrap();
        let kv = Kv::default();
        let mut opts = self.opts.clone();
        // Fixed ports from the first start on, so a restart binds the same ones (`ports`).
        opts.listen = Some(
            self.addrs
                .get(&sid)
                .copied()
                .unwrap_or_else(ports::free_addrs),
        );
        opts.peer_addrs = self
            .sids()
            .into_iter()
            .filter(|s| *s != sid)
            .map(|s| (s, self.addrs.get(&s).copied().unwrap_or(PeerAddrs::UNKNOWN)))
            .collect();
        let node = Node::start_with(cfg, sid, kv.clone(), opts).await?;
        let local = node.local_addrs();
        if self.addrs.insert(sid, local) != Some(local) {
            for (other, n) in &self.nodes {
                if *other != sid {
                    n.set_peer_addrs(sid, local).await;
                }
            }
        }
        self.nodes.insert(sid, node);
        self.kvs.insert(sid, kv);
        Ok(())
    }

    pub async fn stop(&mut self, sid: ServerId) {
        if let Some(n) = self.nodes.remove(&sid) {
            n.shutdown().await;
        }
    }

    pub fn node(&self, sid: ServerId) -> &Node {
        &self.nodes[&sid]
    }

    pub fn status(&self, sid: ServerId) -> NodeStatus {
        self.nodes[&sid].status()
    }

    /// Waits until one running node leads and every running node serves; returns the leader.
    pub async fn wait_stable(&self, limit: Duration) -> ServerId {
        let start = Instant::now();
        while start.elapsed() < limit {
            let st: Vec<NodeStatus> = self.nodes.values().map(|n| n.status()).collect();
            let leaders: Vec<&NodeStatus> = st
                .iter()
                .filter(|s| s.role == Role::Leading && s.serving)
                .collect();
            if leaders.len() == 1 && st.iter().all(|s| s.serving) {
                return leaders[0].sid;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let st: Vec<NodeStatus> = self.nodes.values().map(|n| n.status()).collect();
        panic!("no stable leader within {limit:?}: {st:#?}");
    }

    pub fn followers(&self, leader: ServerId) -> Vec<ServerId> {
        self.nodes
            .keys()
            .copied()
            .filter(|s| *s != leader)
            .collect()
    }

    /// Waits until `sid` applied `zxid`.
    pub async fn wait_applied(&self, sid: ServerId, zxid: Zxid, limit: Duration) {
        let mut w = self.nodes[&sid].watch();
        // `is_ok` at once: a held watch `Ref` would block the node's status publish.
        let applied = tokio::time::timeout(limit, w.wait_for(|s| s.last_applied >= zxid))
            .await
            .is_ok();
        assert!(
            applied,
            "{sid} did not apply {zxid} in {limit:?}: {:?}",
            self.status(sid)
        );
    }

    /// Waits until `sid`'s status satisfies `want` (snapshots are taken in the background, so
    /// their count lags the writes that triggered them).
    pub async fn wait_status(
        &self,
        sid: ServerId,
        what: &str,
        want: impl Fn(&NodeStatus) -> bool,
        limit: Duration,
    ) {
        let mut w = self.nodes[&sid].watch();
        // The watch's `Ref` is dropped at once: held, it would block the node's next publish.
        let reached = tokio::time::timeout(limit, w.wait_for(|s| want(s)))
            .await
            .is_ok_and(|r| r.is_ok());
        assert!(
            reached,
            "{sid}: {what} not reached in {limit:?}: {:?}",
            self.status(sid)
        );
    }

    /// Submits `key=value` through `sid`.
    pub async fn put(&self, sid: ServerId, key: &str, value: &str) -> Result<Zxid, SubmitError> {
        self.nodes[&sid]
            .submit(Bytes::from(format!("{key}={value}")))
            .await
    }

    /// Submits `count` writes through `sid`, `window` at a time; returns the last zxid.
    pub async fn put_many(&self, sid: ServerId, prefix: &str, count: usize, window: usize) -> Zxid {
        let node = &self.nodes[&sid];
        let mut last = Zxid::ZERO;
        let mut i = 0;
        while i < count {
            let n = window.min(count - i);
            let futs = (i..i + n).map(|j| node.submit(Bytes::from(format!("{prefix}{j}={j}"))));
            for r in futures::future::join_all(futs).await {
                last = last.max(r.unwrap());
            }
            i += n;
        }
        last
    }

    /// Starts `sid` as a new member joining the running cluster: a zoo.cfg that lists only
    /// itself at `listen` (real ports, so the members reach it through its address text), and
    /// the cluster's configuration `join` learned from a member (`None`: a restart that relies
    /// on what its data dir kept).
    pub async fn start_joining(
        &mut self,
        sid: ServerId,
        listen: PeerAddrs,
        join: Option<Membership>,
    ) {
        let text = format!(
            "tickTime=100\ninitLimit=20\nsyncLimit=5\nforceSync=no\npreAllocSize={}\n\
             snapCount={}\ndataDir={}\nserver.{}=127.0.0.1:{}:{}\n",
            self.pre_alloc_kib,
            self.snap_count,
            self.root.path().join(format!("n{}", sid.0)).display(),
            sid.0,
            listen.quorum.port(),
            listen.election.port(),
        );
        let cfg = parse(&text).unwrap();
        let kv = Kv::default();
        let mut opts = self.opts.clone();
        opts.bootstrap = false;
        opts.join_membership = join;
        opts.listen = Some(listen);
        // The original members' zoo.cfg ports are placeholders: reach them where they listen.
        opts.peer_addrs = self.addrs.clone();
        let node = Node::start_with(cfg, sid, kv.clone(), opts).await.unwrap();
        self.addrs.insert(sid, node.local_addrs());
        self.nodes.insert(sid, node);
        self.kvs.insert(sid, kv);
    }

    /// Stops every running node.
    pub async fn shutdown(mut self) {
        let sids: Vec<ServerId> = self.nodes.keys().copied().collect();
        for sid in sids {
            self.stop(sid).await;
        }
    }
}
