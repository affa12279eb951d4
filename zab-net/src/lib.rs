//! The running ZAB node: zoo.cfg, framed TCP and the peer connections that carry
//! [`zab_core::Message`]s between servers.
//!
//! Reading order:
//! - [`config`]: zoo.cfg → [`config::NodeConfig`] → [`zab_core::Config`].
//! - [`frame`]: length-prefixed frames of messages, with a maximum size.
//! - [`handshake`]: the first frame of every peer connection: who is calling, from which
//!   cluster, on which channel; refusals with a reason.
//! - [`transport`]: listeners, lazy dialing with backoff, one connection per pair and channel,
//!   per-peer bounded outboxes, inbound messages and `ConnectionLost` events on one channel.
//! - [`node`]: the running node — [`Node::start`] with a [`StateMachine`], [`Node::submit`],
//!   [`Node::sync`], [`Node::watch`]; the driver task that runs `zab_core::Peer` with the
//!   transport and `zab_store`.
//!
//! A runnable example, a 3-node key-value cluster in one process on loopback:
//! `cargo run -p zab-net --example kv` (see `examples/kv.rs`).
//!
//! Measurements (printed, not asserted): `cargo test -p zab-net --test node -- --nocapture`
//! prints the failover time (leader stopped, or hung past syncLimit → next committed write)
//! and the catch-up rate of a restarted follower (`ZAB_CATCHUP_TXNS=50000` for a longer run).

pub mod config;
pub mod frame;
pub mod handshake;
pub mod node;
pub mod transport;

pub use node::{
    ApplyError, Node, NodeOptions, NodeStatus, RoleStatus, SnapshotSource, StateMachine,
    SubmitError, SyncCounters,
};
pub use transport::NetError;
