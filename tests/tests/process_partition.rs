//! Network partitions and degraded links on real `fe-meta server` processes, each node in its
//! own network namespace (`tests::proc::NetLab`): the leader isolated, a follower isolated,
//! five nodes split 3 + 2 with the leader on the small side, one-way cuts (leader → follower,
//! follower → leader, leader → both followers), a bridge node that sees both halves, a
//! flapping link, and a link with delay and loss.
//!
//! Every scenario runs client load on both sides of the fault (clients live in the host
//! namespace and reach every node over the bridge: linearizability clients, ledger writers
//! and write-then-sync-read probes pinned to each node), and checks: no acknowledged write
//! lost (the ledger read back from every node), set/sync-get linearizable
//! (`tests::lincheck`), the cut-off side refusing writes within its bound and a deposed
//! leader answering no sync read after a new leader could commit (`process_partition/figures.rs`),
//! and, after the heal, equal digests on every node. Each prints a `PARTITION ...` line with
//! its figures (election, step-down, refusal, rejoin and convergence times, against tickTime
//! and syncLimit) and a `LINCHECK ...` line (`-- --nocapture`).
//!
//! Needs root and iproute2 (`ip`, `tc`); prints a SKIP line and passes otherwise. The delay
//! phase needs the kernel's netem qdisc and says SKIP without it. `PARTITION_REPS=<n>` sets
//! the repetitions of the ignored measuring test.
//!
//! Needs the `fe-meta` binary: `cargo build --release -p fe-meta-cli` (the workspace's
//! `cargo test --release` builds it) or `FE_META_BIN`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod process_partition {
    pub mod driver;
    pub mod figures;
    pub mod links;
    pub mod probe;
    pub mod repeat;
    pub mod splits;
    pub mod watch;
}
