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

mod fourlw;
mod frame;
mod read;
mod request;
mod response;
mod rows;

use std::fmt;

use thiserror::Error;

pub use fourlw::{
    render as render_four_letter_word, ClientStats, FourLetterWord, Mode, ServerStats,
};
pub use frame::{
    classify_start, encode_frame, ConnectionStart, FrameDecoder, FrameTooLong, FRAME_LEN_MAX,
};
pub use read::{answer_catalog_read, encode_response_bounded};
pub use request::{decode_request, encode_request, ReadOptions, Request, RequestBody, RequestMeta};
pub use response::{
    decode_response, encode_response, ErrorKind, ErrorReply, FrontendRow, Response, ResponseBody,
    StatusInfo,
};

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

impl RequestKind {
    /// The node's status.
    pub const STATUS: RequestKind = RequestKind(1);
    /// The catalog digest.
    pub const DIGEST: RequestKind = RequestKind(2);
    /// Catch up with the leader.
    pub const SYNC: RequestKind = RequestKind(3);
    /// Add a backend.
    pub const ADD_BACKEND: RequestKind = RequestKind(10);
    /// Drop a backend.
    pub const DROP_BACKEND: RequestKind = RequestKind(11);
    /// Change a backend.
    pub const MODIFY_BACKEND: RequestKind = RequestKind(12);
    /// List backends.
    pub const SHOW_BACKENDS: RequestKind = RequestKind(13);
    /// List frontends.
    pub const SHOW_FRONTENDS: RequestKind = RequestKind(20);
    /// Create a database.
    pub const CREATE_DB: RequestKind = RequestKind(30);
    /// Drop a database.
    pub const DROP_DB: RequestKind = RequestKind(31);
    /// List databases.
    pub const SHOW_DATABASES: RequestKind = RequestKind(32);
    /// Create a table.
    pub const CREATE_TABLE: RequestKind = RequestKind(40);
    /// Drop a table.
    pub const DROP_TABLE: RequestKind = RequestKind(41);
    /// List a database's tables.
    pub const SHOW_TABLES: RequestKind = RequestKind(42);
    /// Set a global variable.
    pub const SET_VAR: RequestKind = RequestKind(50);
    /// Read a global variable.
    pub const GET_VAR: RequestKind = RequestKind(51);
    /// List global variables.
    pub const SHOW_VARS: RequestKind = RequestKind(52);

    /// Every kind, ascending.
    pub const ALL: [RequestKind; 17] = [
        RequestKind::STATUS,
        RequestKind::DIGEST,
        RequestKind::SYNC,
        RequestKind::ADD_BACKEND,
        RequestKind::DROP_BACKEND,
        RequestKind::MODIFY_BACKEND,
        RequestKind::SHOW_BACKENDS,
        RequestKind::SHOW_FRONTENDS,
        RequestKind::CREATE_DB,
        RequestKind::DROP_DB,
        RequestKind::SHOW_DATABASES,
        RequestKind::CREATE_TABLE,
        RequestKind::DROP_TABLE,
        RequestKind::SHOW_TABLES,
        RequestKind::SET_VAR,
        RequestKind::GET_VAR,
        RequestKind::SHOW_VARS,
    ];

    /// The kind's name, if known.
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            RequestKind::STATUS => "STATUS",
            RequestKind::DIGEST => "DIGEST",
            RequestKind::SYNC => "SYNC",
            RequestKind::ADD_BACKEND => "ADD_BACKEND",
            RequestKind::DROP_BACKEND => "DROP_BACKEND",
            RequestKind::MODIFY_BACKEND => "MODIFY_BACKEND",
            RequestKind::SHOW_BACKENDS => "SHOW_BACKENDS",
            RequestKind::SHOW_FRONTENDS => "SHOW_FRONTENDS",
            RequestKind::CREATE_DB => "CREATE_DB",
            RequestKind::DROP_DB => "DROP_DB",
            RequestKind::SHOW_DATABASES => "SHOW_DATABASES",
            RequestKind::CREATE_TABLE => "CREATE_TABLE",
            RequestKind::DROP_TABLE => "DROP_TABLE",
            RequestKind::SHOW_TABLES => "SHOW_TABLES",
            RequestKind::SET_VAR => "SET_VAR",
            RequestKind::GET_VAR => "GET_VAR",
            RequestKind::SHOW_VARS => "SHOW_VARS",
            _ => return None,
        })
    }

    /// Whether requests of this kind are writes (answered with `ResponseBody::Written`).
    pub fn is_write(self) -> bool {
        matches!(
            self,
            RequestKind::ADD_BACKEND
                | RequestKind::DROP_BACKEND
                | RequestKind::MODIFY_BACKEND
                | RequestKind::CREATE_DB
                | RequestKind::DROP_DB
                | RequestKind::CREATE_TABLE
                | RequestKind::DROP_TABLE
                | RequestKind::SET_VAR
        )
    }
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
            result: Err(ErrorReply {
                kind: ErrorKind::InvalidArgument,
                message: self.to_string(),
            }),
        }
    }
}
