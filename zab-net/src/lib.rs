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

pub mod config;
pub mod frame;
pub mod handshake;
pub mod transport;
