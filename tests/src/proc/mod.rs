//! Multi-process fault tests: real `fe-meta server` processes on loopback (DESIGN §7).
//!
//! A [`ProcCluster`] starts N voters as child processes of the test, each with its own temp
//! data dir, its own zoo.cfg written here (small `tickTime`, `forceSync=yes` unless the
//! [`ClusterSpec`] says otherwise) and its stdout+stderr appended to `node<sid>.log` in the
//! test dir. Tests then inject faults per node and drive load through the Rust client
//! ([`fe_meta::client::Client`]):
//!
//! ```text
//! let mut c = ProcCluster::start("kill_leader", ClusterSpec::default()).await?;
//! let leader = c.leader(Duration::from_secs(10)).await?;     // one serving leader, all agree
//! let load = Load::start(&c, 3, Duration::from_secs(1));      // 3 writers over all nodes
//! c.kill(leader)?;                                            // SIGKILL; also stop/cont/terminate
//! c.restart(leader)?;                                         // same dir, never --bootstrap
//! let report = load.stop().await;                             // acked writes → c.ledger()
//! c.finish().await?;                                          // the shared end checks
//! ```
//!
//! Module map: [`binary`] (find `fe-meta`), [`ports`] (per-cluster
//! port blocks below the ephemeral range), [`node`] (one server process: spawn, signals,
//! wipe, file paths), [`cluster`] (the nodes, the slot that serializes clusters, leader
//! discovery, convergence, four-letter words), [`monitor`] (background journal-id poller),
//! [`ledger`] (writes acknowledged to clients), [`load`] (bounded write load, recovery
//! times), [`lin_load`] (clients recorded for the linearizability check), [`checks`] (the
//! end-of-test checks every scenario runs), [`small_fs`] (a
//! size-limited tmpfs for a node's disk to fill up), [`disk_fault`] (an `LD_PRELOAD` shim that
//! makes a node's syncs or writes fail with EIO, or its syncs slow), [`netlab`] (per-node
//! network namespaces for partitions; [`netlab_tc`]: one-way cuts, loss and delay with `tc`),
//! [`members`] (servers added with `--helper` and dropped while the cluster
//! runs).
//!
//! The end checks ([`ProcCluster::finish`]): after convergence every acknowledged write is
//! read back from every node; all nodes report the same digest at the same journal id; no
//! node answered a read at a lower journal id than an earlier read of it (the monitor's
//! plain reads every 100 ms, across restarts); no log contains `panicked at`.
//!
//! INV-1: every process started here is killed (SIGCONT first if stopped, then SIGKILL) and
//! reaped when its [`ProcCluster`] drops, also when the test panics; no process of anyone else
//! is ever signalled (signals go to the PIDs of our own children only).
//! INV-2: at most one cluster runs at a time in a test process (the slot in [`cluster`]), so a
//! test binary's clusters never compete for the 2 CI cores.
//! INV-3: every wait has a deadline; every load loop stops by itself.
//! INV-4: a brand-new cluster's nodes start with `--bootstrap`; a restart never passes it, so a
//! wiped node rejoins as a non-voting learner and takes a SNAP.
//! INV-5: a failed or panicking test keeps its dir and prints its path and each node's log
//! tail; a passing one removes it.

pub mod binary;
pub mod checks;
pub mod cluster;
pub mod disk_fault;
pub mod ledger;
pub mod lin_load;
pub mod load;
pub mod members;
pub mod monitor;
pub mod netlab;
pub mod netlab_tc;
pub mod node;
pub mod ports;
pub mod small_fs;
pub mod spec;

pub use checks::CheckFailure;
pub use cluster::ProcCluster;
pub use disk_fault::DiskFault;
pub use ledger::Ledger;
pub use load::{fill, Ack, Load, LoadReport};
pub use netlab::{NetLab, NetLabUnavailable};
pub use netlab_tc::{Impairment, TcError};
pub use node::{NodePorts, ProcNode, SyncCounts};
pub use small_fs::SmallFs;
pub use spec::{ClusterSpec, NodeNet};

use std::time::Duration;

use thiserror::Error;

/// Why a harness operation failed.
#[derive(Debug, Error)]
pub enum ProcError {
    /// The `fe-meta` binary is missing.
    #[error(
        "no fe-meta binary at {0}: build it with `cargo build --release -p fe-meta-cli` (or run \
         `cargo test --release` of the workspace), or point FE_META_BIN at it"
    )]
    NoBinary(String),
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// A signal could not be sent.
    #[error("signal {signal} to node {sid} (pid {pid}): {errno}")]
    Signal {
        /// The node.
        sid: u64,
        /// Its pid.
        pid: i32,
        /// The signal's name.
        signal: &'static str,
        /// The error.
        errno: nix::errno::Errno,
    },
    /// The node is not running (never started, killed, or exited).
    #[error("node {0} is not running")]
    NotRunning(u64),
    /// The node is already running.
    #[error("node {0} is already running")]
    Running(u64),
    /// No such node.
    #[error("no node {0} in this cluster")]
    NoNode(u64),
    /// A wait ran out of time.
    #[error("{what} did not happen within {within:?}{detail}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// The deadline.
        within: Duration,
        /// The last observation, `": ..."` or empty.
        detail: String,
    },
    /// No free block of ports was found below 32768.
    #[error("no free block of loopback ports between 20000 and 32000")]
    NoPorts,
    /// An end-of-test check failed.
    #[error(transparent)]
    Check(#[from] CheckFailure),
    /// A client request to a node failed.
    #[error("node {sid}: {source}")]
    Client {
        /// The node asked.
        sid: u64,
        /// The error.
        source: fe_meta::client::ClientError,
    },
}

impl ProcError {
    pub(crate) fn client(sid: u64) -> impl FnOnce(fe_meta::client::ClientError) -> ProcError {
        move |source| ProcError::Client { sid, source }
    }

    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ProcError {
        let what = what.into();
        move |source| ProcError::Io { what, source }
    }
}
