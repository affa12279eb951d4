//! [`ClientError`]: everything a client call can fail with — the connection (connect, closed,
//! no answer in time, bytes that do not decode) or the server's typed error reply
//! (`docs/PROTOCOL.md` §7), which carries its [`Status`] and the status's fields.
//!
//! INV-1: a server error keeps the server's message and every code-specific field, so a caller
//! can act on it (retry at `leader_addr`, wait out a stale node) without parsing text.

use std::time::Duration;

use thiserror::Error;

use crate::protocol::{ErrorReply, RequestKind, Status};

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
    /// A session write was not sent: the session's oldest write in flight stayed unanswered
    /// for the whole request timeout, and a write may start only within
    /// [`super::session::SEQ_SPAN_MAX`] sequence numbers of it (`ClientSession` INV-3). Nothing
    /// was sent; send it again once that write ended.
    #[error(
        "write not sent: the client's oldest write in flight (seq {oldest}) got no answer \
         within {after:?}, and a write may start only within 1024 sequence numbers of it; \
         nothing was sent, so send it again later"
    )]
    WindowFull {
        /// The oldest write in flight when the wait ended.
        oldest: u64,
        /// How long the write waited.
        after: Duration,
    },
    /// The server's answer does not decode, or answers another kind.
    #[error("malformed answer: {0}")]
    Protocol(String),
    /// Every endpoint of a client with several failed in one call (refused, unreachable, or
    /// the connection lost): each attempt's error, in the order tried, one per endpoint.
    #[error("every endpoint failed: {}", list(attempts))]
    AllEndpointsFailed {
        /// Each attempt's error ([`ClientError::Connect`] or [`ClientError::Closed`]).
        attempts: Vec<ClientError>,
    },
    /// The server answered with an error status (`docs/PROTOCOL.md` §7): its message and the
    /// status's fields (the leader hint of NOT_LEADER, the lag of STALE).
    #[error("{0}")]
    Server(ErrorReply),
}

fn list(attempts: &[ClientError]) -> String {
    attempts
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl From<ErrorReply> for ClientError {
    fn from(reply: ErrorReply) -> ClientError {
        ClientError::Server(reply)
    }
}

impl ClientError {
    /// The protocol status, for errors the server sent.
    pub fn status(&self) -> Option<Status> {
        match self {
            ClientError::Server(reply) => Some(reply.status),
            _ => None,
        }
    }

    /// A short upper-case name: the protocol's status name for server errors (`NOT_FOUND`…),
    /// else `CONNECT`, `CLOSED`, `TIMEOUT`, `PROTOCOL`, `UNREACHABLE` (every endpoint
    /// failed) or `WINDOW_FULL` (a session write not sent).
    pub fn name(&self) -> &'static str {
        match self {
            ClientError::Connect { .. } => "CONNECT",
            ClientError::Closed { .. } => "CLOSED",
            ClientError::Timeout { .. } => Status::Timeout.name(),
            ClientError::Protocol(_) => "PROTOCOL",
            ClientError::AllEndpointsFailed { .. } => "UNREACHABLE",
            ClientError::WindowFull { .. } => "WINDOW_FULL",
            ClientError::Server(reply) => reply.status.name(),
        }
    }

    /// Whether a node refused the client's identity (UNAUTHENTICATED): the same credentials
    /// fail on every node, so a client does not move on to the next endpoint.
    pub fn is_refused_identity(&self) -> bool {
        self.status() == Some(Status::Unauthenticated)
    }

    /// Whether the same request may succeed if sent again later (or elsewhere): the node had
    /// no leader, was stale, had no quorum, or the connection failed. A write that failed with
    /// [`ClientError::may_be_applied`] should be checked with a read first.
    pub fn is_retryable(&self) -> bool {
        match self {
            ClientError::Connect { .. } | ClientError::Closed { .. } => true,
            ClientError::Timeout { .. } | ClientError::AllEndpointsFailed { .. } => true,
            ClientError::WindowFull { .. } => true,
            ClientError::Protocol(_) => false,
            ClientError::Server(reply) => reply.status.is_retryable(),
        }
    }

    /// Whether a write that failed this way may still be (or become) committed: its outcome
    /// is unknown (timeouts, a lost connection, a quorum lost after the proposal).
    pub fn may_be_applied(&self) -> bool {
        match self {
            ClientError::Closed { .. } | ClientError::Timeout { .. } => true,
            ClientError::Connect { .. } | ClientError::Protocol(_) => false,
            ClientError::WindowFull { .. } => false,
            ClientError::AllEndpointsFailed { attempts } => {
                attempts.iter().any(ClientError::may_be_applied)
            }
            ClientError::Server(reply) => reply.status.may_be_applied(),
        }
    }
}
