//! The transport's errors: why a message was not queued ([`SendError`]) and why a transport (or
//! a node) could not start ([`NetError`]).

use std::net::SocketAddr;

use thiserror::Error;
use zab_core::ServerId;

use super::Channel;

/// Why a message was not queued.
#[derive(Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    /// The sid is not known to the transport (or is this server).
    #[error("sid {0} is not a peer of this server")]
    UnknownPeer(ServerId),
    /// The peer's outbox was full: its connection was dropped and its queue discarded.
    #[error("outbox to sid {0} is full; the connection is dropped")]
    Overflow(ServerId),
    /// The connection (outbox generation) a [`PeerSender`] was bound to is gone; nothing more
    /// goes out through it.
    #[error("the connection to sid {0} this sender was bound to is gone")]
    Closed(ServerId),
    /// The message's frame would exceed `max_frame_len`; nothing was queued.
    #[error("message of {len} bytes exceeds the frame limit of {max}")]
    TooLarge {
        /// The encoded length.
        len: usize,
        /// The limit.
        max: usize,
    },
}

/// Why a transport could not start.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum NetError {
    /// A listener could not bind.
    #[error("cannot listen on {addr} ({channel} port): {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Which listener.
        channel: Channel,
        /// The OS error.
        source: std::io::Error,
    },
    /// A `server.N` host did not resolve.
    #[error("cannot resolve the address of server.{sid}: {source}")]
    Resolve {
        /// The server.
        sid: ServerId,
        /// The resolver's error.
        source: std::io::Error,
    },
    /// This server's sid has no `server.N` line.
    #[error("server id {sid} has no server.{sid} line")]
    NotAMember {
        /// The sid.
        sid: ServerId,
    },
    /// A TLS file named by zoo.cfg is missing or unusable (a node's start).
    #[error("TLS configuration: {0}")]
    Tls(#[from] crate::tls::TlsError),
    /// The configuration does not fit (a node's start).
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The data directories could not be opened or loaded (a node's start).
    #[error("data directory: {0}")]
    Store(#[from] zab_store::StoreError),
    /// The protocol core refused the loaded state (a node's start).
    #[error("protocol core: {0}")]
    Core(#[from] zab_core::StepError),
    /// The state machine could not restore the loaded snapshot (a node's start).
    #[error("state machine: {0}")]
    StateMachine(String),
    /// The node's metrics could not be registered (a node's start): most often the registry
    /// given in `NodeOptions::metrics_registry` already holds another node's.
    #[error("metrics registry: {0}")]
    Metrics(#[from] prometheus::Error),
    /// The peer outbox cannot hold a sync from the committed-log window (a node's start). The
    /// floor dates from when a DIFF from memory was sent at once, so that a shorter outbox
    /// overflowed at every resync; a sync now waits for room in the outbox (`node::out`
    /// INV-5), and the floor is kept as a conservative minimum.
    #[error(
        "refusing to start: the peer outbox holds {outbox_len} messages, but a DIFF of the \
         committed-log window ({window} txns) sends up to {needed}; raise outbox_len to at \
         least {needed} or lower committed_log_window"
    )]
    OutboxTooSmall {
        /// The outbox capacity in force.
        outbox_len: usize,
        /// The core's committed-log window.
        window: usize,
        /// The least outbox that holds such a DIFF.
        needed: usize,
    },
    /// The loaded snapshot is another cluster's than zoo.cfg's `clusterId` (a node's start).
    #[error(
        "refusing to start: snapshot {path} belongs to cluster {found:#x}, but zoo.cfg's \
         clusterId is {expected:#x}; this data dir holds another cluster's data (restore a \
         backup with `fe-meta restore` into an empty data dir, or fix clusterId)"
    )]
    ForeignSnapshot {
        /// The snapshot file.
        path: std::path::PathBuf,
        /// Its cluster id.
        found: u64,
        /// zoo.cfg's.
        expected: u64,
    },
}
