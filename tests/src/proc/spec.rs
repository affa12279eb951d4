//! [`ClusterSpec`]: how a test cluster is configured (the zoo.cfg of every node, where each
//! node keeps its data and which network it runs in).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use fe_meta::client::{ClientOptions, Credentials};

impl ClusterSpec {
    /// `base` with the harness's credentials and TLS, where the cluster needs them (TLS
    /// that `base` already carries is kept).
    pub fn client_options(&self, base: ClientOptions) -> ClientOptions {
        ClientOptions {
            credentials: self.credentials.clone(),
            tls: base.tls.clone().or_else(|| self.client_tls.clone()),
            ..base
        }
    }
}

/// How a cluster is configured (zoo.cfg of every node).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterSpec {
    /// Voters (sids 1..=nodes).
    pub nodes: u64,
    /// `tickTime`, ms.
    pub tick_ms: u64,
    /// `initLimit`, ticks (bounds a learner's whole sync, SNAP included).
    pub init_limit: u32,
    /// `syncLimit`, ticks (how long a silent peer is tolerated).
    pub sync_limit: u32,
    /// `forceSync`: fsync the log before acknowledging (`false` only for bulk loads, and the
    /// test says so).
    pub force_sync: bool,
    /// `snapCount` (background snapshot + purge every ~this many txns), default: the server's.
    pub snap_count: Option<u64>,
    /// `preAllocSize`, KiB (log segment size).
    pub pre_alloc_kib: u64,
    /// More zoo.cfg lines (`key=value`), e.g. fe-meta's `leader_wait_ms=1000`.
    pub extra: Vec<String>,
    /// More zoo.cfg lines for one node only (sid → lines), e.g. its own `dataLogDir`.
    pub node_extra: BTreeMap<u64, Vec<String>>,
    /// A node's dataDir elsewhere than `<test dir>/data<sid>` (e.g. on a filesystem the test
    /// made); the harness still writes its `myid` there.
    pub data_dirs: BTreeMap<u64, PathBuf>,
    /// Where each node listens and runs (default: 127.0.0.1, the test's own namespace); a
    /// partition test gives every node its address and namespace ([`super::NetLab`]).
    pub net: BTreeMap<u64, NodeNet>,
    /// The identity the harness's own clients (probes, monitor, load, end checks)
    /// authenticate as, for a cluster whose `extra` lines set `auth.identitiesFile`.
    pub credentials: Option<Arc<Credentials>>,
    /// More environment variables for one node's process (sid → `(name, value)`), e.g. the
    /// `LD_PRELOAD` of a [`super::DiskFault`].
    pub node_env: BTreeMap<u64, Vec<(String, String)>>,
    /// TLS for every client the harness opens (the nodes' zoo.cfg must say
    /// `client.secure=true`, through `extra`); `None`: plain TCP.
    pub client_tls: Option<fe_meta::client::ClientTls>,
}

/// A node's address and network namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeNet {
    /// The host it listens on (all three ports).
    pub host: String,
    /// The network namespace it runs in (`ip netns exec`), if not the test's own.
    pub netns: Option<String>,
}

impl Default for NodeNet {
    fn default() -> NodeNet {
        NodeNet {
            host: "127.0.0.1".into(),
            netns: None,
        }
    }
}

impl Default for ClusterSpec {
    fn default() -> ClusterSpec {
        ClusterSpec {
            nodes: 3,
            tick_ms: 100,
            init_limit: 50,
            sync_limit: 5,
            force_sync: true,
            snap_count: None,
            pre_alloc_kib: 4096,
            extra: Vec::new(),
            node_extra: BTreeMap::new(),
            data_dirs: BTreeMap::new(),
            net: BTreeMap::new(),
            credentials: None,
            node_env: BTreeMap::new(),
            client_tls: None,
        }
    }
}
