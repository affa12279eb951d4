//! The CLI's exit codes, one per kind of failure (listed in `fe-meta --help`).
//!
//! INV: server errors exit with 10 + their protocol status code (`docs/PROTOCOL.md` §7), so a
//! script can tell "not found" from "no quorum" without parsing text.

use fe_meta::client::ClientError;

/// An exit code of `fe-meta`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCode {
    /// 0.
    Success,
    /// 1: anything not listed below.
    Other,
    /// 2: bad command line (clap's own code).
    Usage,
    /// 3: cannot connect, or the connection was lost.
    Connection,
    /// 4: `fe-meta server`: the node stopped on a fatal error (txn log, epoch file, SNAP
    /// install, state machine); fix what the ERROR line names and start it again
    /// ([`fe_meta::server::FATAL_EXIT_STATUS`]).
    NodeFatal,
    /// 5: an answer that does not decode.
    Protocol,
    /// 11: NOT_LEADER.
    NotLeader,
    /// 12: STALE.
    Stale,
    /// 13: QUORUM_UNAVAILABLE.
    QuorumUnavailable,
    /// 14: INVALID_ARGUMENT.
    InvalidArgument,
    /// 15: TIMEOUT (the client's or the server's).
    Timeout,
    /// 16: INTERNAL.
    Internal,
    /// 17: NOT_FOUND.
    NotFound,
    /// 18: ALREADY_EXISTS.
    AlreadyExists,
    /// 19: DEADLINE_EXCEEDED (the write was not proposed).
    DeadlineExceeded,
    /// 20: STALE_REQUEST (the write was refused and is never applied).
    StaleRequest,
}

impl ExitCode {
    /// The numeric code.
    pub fn code(self) -> u8 {
        match self {
            ExitCode::Success => 0,
            ExitCode::Other => 1,
            ExitCode::Usage => 2,
            ExitCode::Connection => 3,
            ExitCode::NodeFatal => fe_meta::server::FATAL_EXIT_STATUS,
            ExitCode::Protocol => 5,
            ExitCode::NotLeader => 11,
            ExitCode::Stale => 12,
            ExitCode::QuorumUnavailable => 13,
            ExitCode::InvalidArgument => 14,
            ExitCode::Timeout => 15,
            ExitCode::Internal => 16,
            ExitCode::NotFound => 17,
            ExitCode::AlreadyExists => 18,
            ExitCode::DeadlineExceeded => 19,
            ExitCode::StaleRequest => 20,
        }
    }
}

impl From<&ClientError> for ExitCode {
    fn from(e: &ClientError) -> ExitCode {
        match e {
            ClientError::Connect { .. } | ClientError::Closed { .. } => ExitCode::Connection,
            ClientError::Timeout { .. } | ClientError::ServerTimeout { .. } => ExitCode::Timeout,
            ClientError::Protocol(_) => ExitCode::Protocol,
            ClientError::NotLeader { .. } => ExitCode::NotLeader,
            ClientError::Stale { .. } => ExitCode::Stale,
            ClientError::QuorumUnavailable { .. } => ExitCode::QuorumUnavailable,
            ClientError::InvalidArgument { .. } => ExitCode::InvalidArgument,
            ClientError::Internal { .. } => ExitCode::Internal,
            ClientError::NotFound { .. } => ExitCode::NotFound,
            ClientError::AlreadyExists { .. } => ExitCode::AlreadyExists,
            ClientError::DeadlineExceeded { .. } => ExitCode::DeadlineExceeded,
            ClientError::StaleRequest { .. } => ExitCode::StaleRequest,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_exit_with_ten_plus_status() {
        let errors = [
            ClientError::NotLeader {
                message: String::new(),
                leader_sid: None,
                leader_addr: None,
            },
            ClientError::Stale {
                message: String::new(),
                lag_ms: 1,
                tolerance_ms: 1,
            },
            ClientError::QuorumUnavailable {
                message: String::new(),
            },
            ClientError::InvalidArgument {
                message: String::new(),
            },
            ClientError::ServerTimeout {
                message: String::new(),
            },
            ClientError::Internal {
                message: String::new(),
            },
            ClientError::NotFound {
                message: String::new(),
            },
            ClientError::AlreadyExists {
                message: String::new(),
            },
            ClientError::DeadlineExceeded {
                message: String::new(),
            },
            ClientError::StaleRequest {
                message: String::new(),
            },
        ];
        for e in errors {
            let status = e.status().map(|s| s as u8);
            assert_eq!(status.map(|s| s + 10), Some(ExitCode::from(&e).code()));
        }
    }
}
