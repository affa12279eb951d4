//! [`ClientError`]: everything a client call can fail with — the connection (connect, closed,
//! no answer in time, bytes that do not decode) or the server's typed error reply
//! (`docs/PROTOCOL.md` §7), one variant per status code.
//!
//! INV-1: a server error keeps the server's message and every code-specific field, so a caller
//! can act on it (retry at `leader_addr`, wait out a stale node) without parsing text.

use std::time::Duration;

use thiserror::Error;

use crate::protocol::{ErrorKind, ErrorReply, RequestKind};

/// Why a client call failed.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ClientError {
    /// The TCP connection could not be made (refused, unreachable, timed out, bad address).
    #[error("cannot connect to {addr}: {reason}")]
    Connect {
        /// The address tried.
        addr: String,
        /// Why.
        reason: String,
    },
    /// The connection is gone (closed by the server, an I/O error, or a fatal protocol error
    /// the server answered for request id 0). Requests in flight fail with this.
    #[error("connection to {addr} lost: {reason}")]
    Closed {
        /// The server's address.
        addr: String,
        /// Why.
        reason: String,
    },
    /// No answer arrived within the request timeout (client side). A write's outcome is
    /// unknown: check with a (sync) read.
    #[error("{kind} got no answer within {after:?} (a write may or may not have been applied)")]
    Timeout {
        /// The request's kind.
        kind: RequestKind,
        /// The timeout.
        after: Duration,
    },
    /// The server's answer does not decode, or answers another kind.
    #[error("malformed answer: {0}")]
    Protocol(String),
    /// Status 1: the node cannot serve this now (no leader known, or forwarding failed).
    #[error("{message}{}", leader_hint(leader_sid, leader_addr))]
    NotLeader {
        /// The server's message.
        message: String,
        /// The leader's sid, if known.
        leader_sid: Option<u64>,
        /// The leader's client address, if known.
        leader_addr: Option<String>,
    },
    /// Status 2: the node's catalog is too far behind to serve reads.
    #[error("{message}")]
    Stale {
        /// The server's message.
        message: String,
        /// How far behind, in ms (`u64::MAX`: unknown).
        lag_ms: u64,
        /// The configured tolerance, in ms.
        tolerance_ms: u64,
    },
    /// Status 3: no quorum; writes and syncs cannot commit now (reads still work).
    #[error("{message}")]
    QuorumUnavailable {
        /// The server's message.
        message: String,
    },
    /// Status 4: malformed request or invalid argument; do not retry unchanged.
    #[error("{message}")]
    InvalidArgument {
        /// The server's message.
        message: String,
    },
    /// Status 5: the server did not finish in time; a write's outcome is unknown.
    #[error("{message}")]
    ServerTimeout {
        /// The server's message.
        message: String,
    },
    /// Status 6: a server-side failure.
    #[error("{message}")]
    Internal {
        /// The server's message.
        message: String,
    },
    /// Status 7: a named database, table, backend or frontend does not exist.
    #[error("{message}")]
    NotFound {
        /// The server's message.
        message: String,
    },
    /// Status 8: what a write would create already exists.
    #[error("{message}")]
    AlreadyExists {
        /// The server's message.
        message: String,
    },
    /// Status 9: the request's deadline passed before the server acted on it; a write was not
    /// proposed (it is not applied, now or later).
    #[error("{message}")]
    DeadlineExceeded {
        /// The server's message.
        message: String,
    },
    /// Status 10: a write older than one this client already had applied; it was refused and
    /// is never applied.
    #[error("{message}")]
    StaleRequest {
        /// The server's message.
        message: String,
    },
}

fn leader_hint(sid: &Option<u64>, addr: &Option<String>) -> String {
    match (sid, addr) {
        (Some(sid), Some(addr)) => format!(" (leader: server {sid} at {addr})"),
        (Some(sid), None) => format!(" (leader: server {sid})"),
        (None, Some(addr)) => format!(" (leader at {addr})"),
        (None, None) => String::new(),
    }
}

impl From<ErrorReply> for ClientError {
    fn from(reply: ErrorReply) -> ClientError {
        let message = reply.message;
        match reply.kind {
            ErrorKind::NotLeader {
                leader_sid,
                leader_addr,
            } => ClientError::NotLeader {
                message,
                leader_sid,
                leader_addr,
            },
            ErrorKind::Stale {
                lag_ms,
                tolerance_ms,
            } => ClientError::Stale {
                message,
                lag_ms,
                tolerance_ms,
            },
            ErrorKind::QuorumUnavailable => ClientError::QuorumUnavailable { message },
            ErrorKind::InvalidArgument => ClientError::InvalidArgument { message },
            ErrorKind::Timeout => ClientError::ServerTimeout { message },
            ErrorKind::Internal => ClientError::Internal { message },
            ErrorKind::NotFound => ClientError::NotFound { message },
            ErrorKind::AlreadyExists => ClientError::AlreadyExists { message },
            ErrorKind::DeadlineExceeded => ClientError::DeadlineExceeded { message },
            ErrorKind::StaleRequest => ClientError::StaleRequest { message },
        }
    }
}

impl ClientError {
    /// The protocol status code, for errors the server sent.
    pub fn status(&self) -> Option<u16> {
        Some(match self {
            ClientError::NotLeader { .. } => 1,
            ClientError::Stale { .. } => 2,
            ClientError::QuorumUnavailable { .. } => 3,
            ClientError::InvalidArgument { .. } => 4,
            ClientError::ServerTimeout { .. } => 5,
            ClientError::Internal { .. } => 6,
            ClientError::NotFound { .. } => 7,
            ClientError::AlreadyExists { .. } => 8,
            ClientError::DeadlineExceeded { .. } => 9,
            ClientError::StaleRequest { .. } => 10,
            _ => return None,
        })
    }

    /// A short upper-case name: the protocol's status name for server errors (`NOT_FOUND`…),
    /// else `CONNECT`, `CLOSED`, `TIMEOUT` or `PROTOCOL`.
    pub fn name(&self) -> &'static str {
        match self {
            ClientError::Connect { .. } => "CONNECT",
            ClientError::Closed { .. } => "CLOSED",
            ClientError::Timeout { .. } | ClientError::ServerTimeout { .. } => "TIMEOUT",
            ClientError::Protocol(_) => "PROTOCOL",
            ClientError::NotLeader { .. } => "NOT_LEADER",
            ClientError::Stale { .. } => "STALE",
            ClientError::QuorumUnavailable { .. } => "QUORUM_UNAVAILABLE",
            ClientError::InvalidArgument { .. } => "INVALID_ARGUMENT",
            ClientError::Internal { .. } => "INTERNAL",
            ClientError::NotFound { .. } => "NOT_FOUND",
            ClientError::AlreadyExists { .. } => "ALREADY_EXISTS",
            ClientError::DeadlineExceeded { .. } => "DEADLINE_EXCEEDED",
            ClientError::StaleRequest { .. } => "STALE_REQUEST",
        }
    }

    /// Whether the same request may succeed if sent again later (or elsewhere): the node had
    /// no leader, was stale, had no quorum, or the connection failed. A write that failed with
    /// [`ClientError::may_be_applied`] should be checked with a read first.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ClientError::Connect { .. }
                | ClientError::Closed { .. }
                | ClientError::Timeout { .. }
                | ClientError::ServerTimeout { .. }
                | ClientError::NotLeader { .. }
                | ClientError::Stale { .. }
                | ClientError::QuorumUnavailable { .. }
                | ClientError::DeadlineExceeded { .. }
        )
    }

    /// Whether a write that failed this way may still be (or become) committed: its outcome
    /// is unknown (timeouts, a lost connection, a quorum lost after the proposal).
    pub fn may_be_applied(&self) -> bool {
        matches!(
            self,
            ClientError::Closed { .. }
                | ClientError::Timeout { .. }
                | ClientError::ServerTimeout { .. }
                | ClientError::QuorumUnavailable { .. }
        )
    }
}
