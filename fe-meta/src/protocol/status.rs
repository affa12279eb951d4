//! The error statuses of a response (`docs/PROTOCOL.md` §7) — one table, the source of every
//! list of them: the protocol's codes, the client's [`ClientError::status`], the command's
//! [`CommandError::status`] and the CLI's exit codes (10 + code) with their help text.
//!
//! An error body is `message str` and then the fields of its status: NOT_LEADER carries the
//! leader hint, STALE the lag ([`ErrorDetail`]).
//!
//! INV-1: codes are fixed forever; 0 is success and never a [`Status`].
//! INV-2: a decoded [`ErrorReply`]'s detail is the one of its status; encoding a reply whose
//! detail does not match its status writes the status's "unknown" fields (no leader known,
//! lag unknown), so a reply always encodes and decodes without a panic.
//!
//! [`ClientError::status`]: crate::client::ClientError::status
//! [`CommandError::status`]: crate::command::CommandError::status

use std::fmt;

use bytes::BufMut;

use crate::command::CommandError;
use crate::server::staleness::Stale;
use crate::state::catalog::{HOST_LEN_MAX, VALUE_LEN_MAX};
use crate::wire::{Put, Reader, WireError};

/// Declares [`Status`] from one table: variant, code, name and meaning.
macro_rules! statuses {
    ($($(#[$doc:meta])* $variant:ident = $code:literal, $name:literal, $meaning:literal;)*) => {
        /// An error status (u16 on the wire; see the module docs).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(u16)]
        pub enum Status {
            $($(#[$doc])* $variant = $code,)*
        }

        impl Status {
            /// Every status, by code.
            pub const ALL: [Status; [$($code),*].len()] = [$(Status::$variant),*];

            /// The status of `code`, if it is one (0 is success, not a status).
            pub fn from_code(code: u16) -> Option<Status> {
                match code {
                    $($code => Some(Status::$variant),)*
                    _ => None,
                }
            }

            /// The upper-case name (`NOT_FOUND`).
            pub fn name(self) -> &'static str {
                match self {
                    $(Status::$variant => $name,)*
                }
            }

            /// What it means and what to do, in a line.
            pub fn meaning(self) -> &'static str {
                match self {
                    $(Status::$variant => $meaning,)*
                }
            }
        }
    };
}

statuses! {
    /// The node cannot serve this now (no leader known, forwarding failed, a leader-only
    /// request); carries the leader hint.
    NotLeader = 1, "NOT_LEADER", "the node has no leader now (or forwarding failed): retry";
    /// The node's catalog is too far behind the leader to serve reads; carries the lag.
    Stale = 2, "STALE", "the node's catalog is too far behind: retry later or elsewhere";
    /// No quorum: writes (and syncs) cannot commit now.
    QuorumUnavailable = 3, "QUORUM_UNAVAILABLE",
        "no quorum: writes and syncs fail, plain reads still work";
    /// The request is malformed or its arguments are invalid.
    InvalidArgument = 4, "INVALID_ARGUMENT", "bad name, type, address...: fix the request";
    /// The request did not complete in time; a write's outcome is unknown.
    Timeout = 5, "TIMEOUT",
        "no answer in time (client or server): a write's outcome is unknown";
    /// A server-side failure.
    Internal = 6, "INTERNAL", "a server-side failure";
    /// Something named does not exist.
    NotFound = 7, "NOT_FOUND", "no such database / table / backend";
    /// Something to be created already exists.
    AlreadyExists = 8, "ALREADY_EXISTS", "what a write would create exists";
    /// The request's deadline passed before the server could act on it; a write was not
    /// proposed.
    DeadlineExceeded = 9, "DEADLINE_EXCEEDED",
        "the server got the write after its deadline: it was not proposed";
    /// A write older than one the same client already had applied (below the client's
    /// floor); it was not applied and never will be.
    StaleRequest = 10, "STALE_REQUEST",
        "an older write of the same client: refused, never applied";
    /// Another membership change is in progress (one at a time): retry once it committed.
    Conflict = 11, "CONFLICT",
        "another membership change is in progress: retry when it has committed";
    /// A leader transfer did not complete: the target did not catch up in time, or was not
    /// elected; the message says which server leads now.
    TransferFailed = 12, "TRANSFER_FAILED",
        "the leader did not hand over: see the message, check show-frontends, retry";
    /// The session has no valid identity: AUTH is missing, names an unknown identity or has
    /// the wrong secret (the node closes the connection after this answer).
    Unauthenticated = 13, "UNAUTHENTICATED",
        "no valid identity: give the credentials (or client certificate) of a known identity";
    /// The session's identity does not have the role this request needs.
    PermissionDenied = 14, "PERMISSION_DENIED",
        "the identity's role does not allow this request: use one with the role it needs";
}

impl Status {
    /// The status code.
    pub fn code(self) -> u16 {
        self as u16
    }

    /// Whether the same request may succeed if sent again later or elsewhere.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            Status::NotLeader
                | Status::Stale
                | Status::QuorumUnavailable
                | Status::Timeout
                | Status::DeadlineExceeded
                | Status::Conflict
        )
    }

    /// Whether a write that failed with this status may still be (or become) committed.
    pub fn may_be_applied(self) -> bool {
        matches!(self, Status::Timeout | Status::QuorumUnavailable)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

/// The typed fields some statuses carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorDetail {
    /// The status carries none.
    None,
    /// NOT_LEADER: where the leader is, if known.
    Leader {
        /// The leader's server id.
        leader_sid: Option<u64>,
        /// The leader's client address `host:port`.
        leader_addr: Option<String>,
    },
    /// STALE: how far behind the node is.
    Lag {
        /// How far behind, in ms (`u64::MAX`: unknown).
        lag_ms: u64,
        /// The tolerance, in ms.
        tolerance_ms: u64,
    },
}

impl ErrorDetail {
    /// The detail of `status` when nothing is known (INV-2).
    fn unknown(status: Status) -> ErrorDetail {
        match status {
            Status::NotLeader => ErrorDetail::Leader {
                leader_sid: None,
                leader_addr: None,
            },
            Status::Stale => ErrorDetail::Lag {
                lag_ms: u64::MAX,
                tolerance_ms: 0,
            },
            _ => ErrorDetail::None,
        }
    }
}

/// A failed request: its status, a human-readable explanation and the status's fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorReply {
    /// What kind of failure.
    pub status: Status,
    /// A human-readable explanation.
    pub message: String,
    /// The status's fields (INV-2).
    pub detail: ErrorDetail,
}

impl ErrorReply {
    /// A reply of `status` with no known detail (use [`ErrorReply::not_leader`] and
    /// [`ErrorReply::stale`] to give one).
    pub fn new(status: Status, message: impl Into<String>) -> ErrorReply {
        ErrorReply {
            status,
            message: message.into(),
            detail: ErrorDetail::unknown(status),
        }
    }

    /// NOT_LEADER with the leader hint.
    pub fn not_leader(
        leader_sid: Option<u64>,
        leader_addr: Option<String>,
        message: impl Into<String>,
    ) -> ErrorReply {
        ErrorReply {
            status: Status::NotLeader,
            message: message.into(),
            detail: ErrorDetail::Leader {
                leader_sid,
                leader_addr,
            },
        }
    }

    /// STALE with the lag.
    pub fn stale(lag_ms: u64, tolerance_ms: u64, message: impl Into<String>) -> ErrorReply {
        ErrorReply {
            status: Status::Stale,
            message: message.into(),
            detail: ErrorDetail::Lag {
                lag_ms,
                tolerance_ms,
            },
        }
    }
}

/// The message, and for NOT_LEADER the leader hint.
impl fmt::Display for ErrorReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        let ErrorDetail::Leader {
            leader_sid,
            leader_addr,
        } = &self.detail
        else {
            return Ok(());
        };
        match (leader_sid, leader_addr) {
            (Some(sid), Some(addr)) => write!(f, " (leader: server {sid} at {addr})"),
            (Some(sid), None) => write!(f, " (leader: server {sid})"),
            (None, Some(addr)) => write!(f, " (leader at {addr})"),
            (None, None) => Ok(()),
        }
    }
}

impl From<&CommandError> for ErrorReply {
    fn from(e: &CommandError) -> ErrorReply {
        ErrorReply::new(e.status(), e.to_string())
    }
}

impl From<Stale> for ErrorReply {
    fn from(e: Stale) -> ErrorReply {
        let (lag_ms, tolerance_ms) = match e {
            Stale::Unknown { tolerance_ms } | Stale::NotSynced { tolerance_ms } => {
                (u64::MAX, tolerance_ms)
            }
            Stale::Behind {
                lag_ms,
                tolerance_ms,
            } => (lag_ms, tolerance_ms),
        };
        ErrorReply::stale(lag_ms, tolerance_ms, e.to_string())
    }
}

/// Appends `e`'s status and error body (INV-2).
pub(super) fn put_error(o: &mut Vec<u8>, e: &ErrorReply) {
    o.put_u16(e.status.code());
    o.put_str(&e.message);
    let unknown;
    let detail = if ErrorDetail::unknown(e.status).same_kind(&e.detail) {
        &e.detail
    } else {
        unknown = ErrorDetail::unknown(e.status);
        &unknown
    };
    match detail {
        ErrorDetail::None => {}
        ErrorDetail::Leader {
            leader_sid,
            leader_addr,
        } => {
            o.put_opt_u64(*leader_sid);
            o.put_opt_str(leader_addr.as_deref());
        }
        ErrorDetail::Lag {
            lag_ms,
            tolerance_ms,
        } => {
            o.put_u64(*lag_ms);
            o.put_u64(*tolerance_ms);
        }
    }
}

impl ErrorDetail {
    fn same_kind(&self, other: &ErrorDetail) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }
}

/// Decodes the error body of status `code` (INV-2).
pub(super) fn get_error(code: u16, r: &mut Reader<'_>) -> Result<ErrorReply, WireError> {
    let message = r.str("error message", VALUE_LEN_MAX)?;
    let status = Status::from_code(code).ok_or(WireError::BadValue {
        field: "status",
        value: u64::from(code),
    })?;
    let detail = match status {
        Status::NotLeader => ErrorDetail::Leader {
            leader_sid: r.opt_u64("leader sid")?,
            leader_addr: r.opt_str("leader address", HOST_LEN_MAX + 6)?,
        },
        Status::Stale => ErrorDetail::Lag {
            lag_ms: r.u64("lag_ms")?,
            tolerance_ms: r.u64("tolerance_ms")?,
        },
        _ => ErrorDetail::None,
    };
    Ok(ErrorReply {
        status,
        message,
        detail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable_and_names_unique() {
        let codes: Vec<u16> = Status::ALL.iter().map(|s| s.code()).collect();
        assert_eq!(codes, (1..=14).collect::<Vec<u16>>());
        for s in Status::ALL {
            assert_eq!(Status::from_code(s.code()), Some(s));
            assert_eq!(
                Status::ALL.iter().filter(|t| t.name() == s.name()).count(),
                1
            );
        }
        assert_eq!(Status::from_code(0), None);
        assert_eq!(Status::from_code(15), None);
    }

    #[test]
    fn a_detail_that_does_not_match_its_status_encodes_as_unknown() {
        let odd = ErrorReply {
            status: Status::Stale,
            message: "m".into(),
            detail: ErrorDetail::None,
        };
        let mut bytes = Vec::new();
        put_error(&mut bytes, &odd);
        let got = get_error(2, &mut Reader::new(&bytes[2..])).unwrap();
        assert_eq!(got, ErrorReply::new(Status::Stale, "m"));
        let hint = ErrorReply::not_leader(Some(2), Some("h:1".into()), "no");
        assert_eq!(hint.to_string(), "no (leader: server 2 at h:1)");
    }
}
