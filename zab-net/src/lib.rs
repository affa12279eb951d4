//! The running ZAB node: zoo.cfg, framed TCP and the peer connections that carry
//! [`zab_core::Message`]s between servers.
//!
//! Reading order:
//! - [`config`]: zoo.cfg → [`config::NodeConfig`] → [`zab_core::Config`].
//! - [`frame`]: length-prefixed frames of messages, with a maximum size.
//! - [`handshake`]: the first frame of every peer connection: who is calling, from which
//!   cluster, on which channel; refusals with a reason.
//! - [`tls`]: the connection type ([`tls::Stream`], plain TCP or TLS), mutual TLS between
//!   members (`sslQuorum`), PEM loading, and what a client port's TLS reuses.
//! - [`transport`]: listeners, lazy dialing with backoff, one connection per pair and channel,
//!   per-peer bounded outboxes, inbound messages and `ConnectionLost` events on one channel;
//!   with TLS, the TLS handshake precedes the hello on both ends.
//! - [`admission`]: the intake limit on client requests (backpressure), a pure function of
//!   the peers' backlogs that the node's driver and the deterministic simulation both run.
//! - [`node`]: the running node — [`Node::start`] with a [`StateMachine`], [`Node::submit`],
//!   [`Node::sync`], [`Node::watch`], membership changes ([`Node::add_member`],
//!   [`Node::remove_member`], [`Node::change_membership`]; joining with
//!   [`NodeOptions::join_membership`]); the driver task that runs `zab_core::Peer` with the
//!   transport and `zab_store`.
//!
//! The vocabulary an embedder needs is re-exported here, so an application depends on this
//! crate alone: [`Zxid`] (a txn's id: epoch and counter), [`Epoch`], [`ServerId`], [`Role`]
//! (looking, following, leading, observing), [`LearnerType`] (participant or observer, from
//! zoo.cfg), and the replicated configuration: [`Membership`] (its version and [`Member`]s,
//! each with a [`MemberRole`] and its address text, a zoo.cfg `server.N` value),
//! [`MembershipChange`], [`MembershipError`] and [`TxnKind`]. The protocol core itself (`zab_core::Peer`, its messages and actions) is the
//! driver's business, not the embedder's.
//!
//! Public structs and enums that may grow (statuses, options, configurations, errors,
//! transport events) are `#[non_exhaustive]`: read their fields, build them with their
//! constructors or `Default` and set the fields, and give matches a `_` arm.
//!
//! # Metrics
//! Every node keeps Prometheus metrics named `zab_*` (role, epoch, zxids, commits, proposals
//! and commit latency, txn log syncs, queue depths, snapshots, learner syncs, elections; the
//! full list with units and meanings is in [`metrics`]). They are registered in the registry
//! given in [`NodeOptions::metrics_registry`], so an embedder serves them beside its own, or
//! else in a registry of the node's own; either way [`Node::metrics_registry`] returns it.
//! One registry holds one node's metrics: a second node started with the same registry is
//! refused ([`NetError::Metrics`]). Serving them is the embedder's part:
//! ```no_run
//! # fn serve(node: &zab_net::Node) -> Result<String, Box<dyn std::error::Error>> {
//! use prometheus::{Encoder, TextEncoder};
//! let mut body = Vec::new();
//! TextEncoder::new().encode(&node.metrics_registry().gather(), &mut body)?;
//! // answer GET /metrics with `body`, Content-Type prometheus::TEXT_FORMAT
//! # Ok(String::from_utf8(body)?)
//! # }
//! ```
//! `registry.gather()` also reads the values back (a counter's value, a histogram's count and
//! sum), for text reports such as ZooKeeper's `mntr`. Latencies are histograms in
//! microseconds (`_us`, buckets [`metrics::LATENCY_BUCKETS_US`], 50 µs to 10 s). Updating
//! them on the commit path costs atomic operations only.
//!
//! Long work is logged at INFO with its numbers: at start the snapshot loaded (zxid, file,
//! bytes, restore time) and the txn log's range; the logged txns applied once a leader
//! confirms them (count, time, progress every 5 s while it lasts); each learner sync when it
//! ends, on the leader (mode, zxids, txns, time, rate) and on the learner (SNAP bytes or DIFF
//! txns, time, rate); each election ("elected leader N for epoch E in X ms (this node: ...)").
//!
//! Test-only handles (`Node::pause`) exist only with the `test-support` feature, which the
//! tests of this crate and of its embedders enable.
//!
//! A runnable example, a 3-node key-value cluster in one process on loopback:
//! `cargo run -p zab-net --example kv` (see `examples/kv.rs`).
//!
//! Measurements (printed, not asserted): `cargo test -p zab-net --test node -- --nocapture`
//! prints the failover time (leader stopped, or hung past syncLimit → next committed write);
//! `cargo test -p zab-net --test sync_and_snapshots -- --nocapture` the catch-up rate of a
//! restarted follower (`ZAB_CATCHUP_TXNS=50000` for a longer run).

pub mod admission;
pub mod config;
pub mod frame;
pub mod handshake;
pub mod metrics;
pub mod node;
pub mod tls;
pub mod transport;

pub use metrics::NodeMetrics;
pub use node::{
    ApplyError, Node, NodeError, NodeOptions, NodeStatus, RoleStatus, SnapshotSource, StateMachine,
    SubmitError, SyncCounters, TransferFailure, TransferReport,
};
pub use transport::NetError;
pub use zab_core::{
    Epoch, LearnerType, Member, MemberRole, Membership, MembershipChange, MembershipError, Role,
    ServerId, TransferError, TxnKind, Zxid,
};
