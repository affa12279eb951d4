//! The client protocol on the client port: length-prefixed binary frames carrying requests and
//! responses matched by request id (pipelined: any number in flight, answered in any order),
//! plus ZooKeeper's four-letter words. `docs/PROTOCOL.md` is the full specification; this
//! module is its reference codec. It is sans-I/O: the server feeds bytes in and writes bytes
//! out.
//!
//! INV-1: no decoder here panics on any input (property-tested with random and mutated
//! frames); a malformed frame yields a [`ProtocolError`] that says whether the request id is
//! known ([`ProtocolError::request_id`]), so the server can answer with an error frame for that
//! id, or else with an error frame for id 0 followed by closing the connection.

mod auth;
mod backup;
mod command;
mod config;
mod fourlw;
mod frame;
mod read;
mod recovery;
mod request;
mod response;
mod rows;
mod status;

use std::fmt;

use thiserror::Error;

pub use auth::{valid_identity_name, AuthRequest, Role, Secret, IDENTITY_LEN_MAX, SECRET_LEN_MAX};
pub use config::{
    parse_server_line, ClusterConfig, ConfigMember, FrontendChange, MemberRow, MemberState,
    ServerLineError, ADDRESS_LEN_MAX,
};
pub use fourlw::{
    refuse_unknown_word, refuse_unlisted_word, render as render_four_letter_word, ClientStats,
    FourLetterWord, Mode, ServerStats, WordExtras,
};
pub use frame::{
    classify_start, encode_frame, ConnectionStart, FrameDecoder, FrameTooLong, FRAME_LEN_MAX,
};
pub use read::{answer_catalog_read, encode_response_bounded};
pub use recovery::RecoveryInfo;
pub use request::{decode_request, encode_request, ReadOptions, Request, RequestBody, RequestMeta};
pub use response::{
    decode_response, encode_response, FrontendRow, Response, ResponseBody, StatusInfo,
    BACKUP_CHUNK_MAX,
};
pub use status::{ErrorDetail, ErrorReply, Status};

use crate::wire::WireError;

/// The protocol version carried first in every response payload, and in requests without
/// version-2 fields.
pub const PROTOCOL_VERSION: u8 = 1;
/// The request version that carries a deadline and a client session ([`RequestMeta`]).
pub const PROTOCOL_VERSION_META: u8 = 2;
/// The request-id bit reserved for requests one node forwards to another (`docs/PROTOCOL.md`
/// §2.1): a node never forwards a request whose id carries it.
pub const FORWARDED_BIT: u64 = 1 << 63;

/// A request kind (u16 on the wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestKind(pub u16);

/// Declares the request kinds from one table: each kind's constant, [`RequestKind::ALL`],
/// [`RequestKind::name`], [`RequestKind::is_write`] and [`RequestKind::is_membership_change`].
/// A kind's class is `read`, `write` (a catalog command) or `membership` (a change of the
/// cluster configuration, forwarded to the leader like a write but not a catalog command).
macro_rules! request_kinds {
    ($($(#[$doc:meta])* $name:ident = $code:literal, $class:ident;)*) => {
        impl RequestKind {
            $($(#[$doc])* pub const $name: RequestKind = RequestKind($code);)*

            /// Every kind, ascending.
            pub const ALL: [RequestKind; [$(stringify!($name)),*].len()] =
                [$(RequestKind::$name),*];

            /// The kind's name, if known.
            pub fn name(self) -> Option<&'static str> {
                match self {
                    $(RequestKind::$name => Some(stringify!($name)),)*
                    _ => None,
                }
            }

            /// Whether requests of this kind are writes (a [`Command`](crate::command::Command),
            /// answered with `ResponseBody::Written`).
            pub fn is_write(self) -> bool {
                match self {
                    $(RequestKind::$name => request_kinds!(@is_write $class),)*
                    _ => false,
                }
            }

            /// Whether requests of this kind change the cluster configuration (answered with
            /// `ResponseBody::Reconfigured`).
            pub fn is_membership_change(self) -> bool {
                match self {
                    $(RequestKind::$name => request_kinds!(@is_membership $class),)*
                    _ => false,
                }
            }
        }
    };
    (@is_write write) => { true };
    (@is_write $other:ident) => { false };
    (@is_membership membership) => { true };
    (@is_membership $other:ident) => { false };
}

request_kinds! {
    /// The node's status.
    STATUS = 1, read;
    /// The catalog digest.
    DIGEST = 2, read;
    /// Catch up with the leader.
    SYNC = 3, read;
    /// The node's committed cluster configuration, cluster id and timing (for a joining
    /// node); answered by any node without forwarding.
    GET_CONFIG = 4, read;
    /// Add a backend.
    ADD_BACKEND = 10, write;
    /// Drop a backend.
    DROP_BACKEND = 11, write;
    /// Change a backend.
    MODIFY_BACKEND = 12, write;
    /// List backends.
    SHOW_BACKENDS = 13, read;
    /// List frontends.
    SHOW_FRONTENDS = 20, read;
    /// Add a frontend (follower or observer) to the cluster configuration.
    ADD_FRONTEND = 21, membership;
    /// Remove a frontend from the cluster configuration.
    DROP_FRONTEND = 22, membership;
    /// List the members of the committed configuration with its version (SHOW FRONTENDS
    /// that marks joining members).
    SHOW_MEMBERS = 23, read;
    /// A backup: the node's catalog image at its applied journal id, streamed as chunk
    /// answers and one final answer with the backup header (`docs/PROTOCOL.md`).
    BACKUP = 24, read;
    /// Make the leader hand over to a follower (optional target sid); forwarded to the
    /// leader once, like a write, but neither a catalog command nor a configuration change.
    TRANSFER_LEADER = 25, admin;
    /// What this node holds (epochs, last logged and committed zxid, committed
    /// configuration), for `fe-meta recover`; answered by any node without forwarding, with
    /// or without a quorum.
    RECOVERY_INFO = 26, read;
    /// Authenticate the session (identity and secret): the first request on a node that
    /// requires authentication; answered by the node itself, never forwarded.
    AUTH = 27, session;
    /// Create a database.
    CREATE_DB = 30, write;
    /// Drop a database.
    DROP_DB = 31, write;
    /// List databases.
    SHOW_DATABASES = 32, read;
    /// Rename a database.
    RENAME_DB = 33, write;
    /// Create a table.
    CREATE_TABLE = 40, write;
    /// Drop a table.
    DROP_TABLE = 41, write;
    /// List a database's tables.
    SHOW_TABLES = 42, read;
    /// Set a global variable.
    SET_VAR = 50, write;
    /// Read a global variable.
    GET_VAR = 51, read;
    /// List global variables.
    SHOW_VARS = 52, read;
}

impl fmt::Display for RequestKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name} ({})", self.0),
            None => write!(f, "unknown kind {}", self.0),
        }
    }
}

/// Why a frame payload does not decode.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ProtocolError {
    /// The payload is not protocol version [`PROTOCOL_VERSION`] (or, for requests,
    /// [`PROTOCOL_VERSION_META`]).
    #[error(
        "unsupported protocol version {found} (this server speaks {PROTOCOL_VERSION} and, for \
         requests, {PROTOCOL_VERSION_META})"
    )]
    UnsupportedVersion {
        /// The version byte found.
        found: u8,
    },
    /// The header (version, request id) is cut short.
    #[error("malformed frame header: {0}")]
    Header(WireError),
    /// The kind is not one this build knows.
    #[error("request {request_id}: {kind} is not a request kind this server knows")]
    UnknownKind {
        /// The request id.
        request_id: u64,
        /// The kind.
        kind: RequestKind,
    },
    /// The body does not decode.
    #[error("malformed {} body{}: {source}", kind.map_or("request".to_owned(), |k| k.to_string()), request_id.map_or(String::new(), |id| format!(" of request {id}")))]
    Body {
        /// The request id, if it was read.
        request_id: Option<u64>,
        /// The kind, if it was read.
        kind: Option<RequestKind>,
        /// What is wrong.
        source: WireError,
    },
}

impl ProtocolError {
    fn header(e: WireError) -> ProtocolError {
        ProtocolError::Header(e)
    }

    /// The request id, when the header was readable: answer with an error frame for it.
    /// `None`: answer with an error frame for id 0 and close the connection.
    pub fn request_id(&self) -> Option<u64> {
        match self {
            ProtocolError::UnknownKind { request_id, .. } => Some(*request_id),
            ProtocolError::Body { request_id, .. } => *request_id,
            _ => None,
        }
    }

    /// The error response the server sends for this decode error.
    pub fn to_response(&self) -> Response {
        let kind = match self {
            ProtocolError::UnknownKind { kind, .. } => *kind,
            ProtocolError::Body { kind: Some(k), .. } => *k,
            _ => RequestKind(0),
        };
        Response {
            id: self.request_id().unwrap_or(0),
            kind,
            result: Err(ErrorReply::new(Status::InvalidArgument, self.to_string())),
        }
    }
}
