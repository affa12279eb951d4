//! [`ClientOptions`]: how a [`super::Client`] connects, how long it waits, and the two settings
//! a node forwarding its clients' requests to another node needs ([`ClientOptions::FORWARDING`]).

use std::sync::Arc;
use std::time::Duration;

use super::{ClientTls, Credentials};

/// Connection and request settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientOptions {
    /// How long to wait for the TCP connection.
    pub connect_timeout: Duration,
    /// How long to wait for each answer (writes wait for a quorum and for the answering node to
    /// apply them; the server has its own bounded waits, so this is a backstop).
    pub request_timeout: Duration,
    /// Whether request ids carry [`crate::protocol::FORWARDED_BIT`]: only a node forwarding
    /// its clients' requests sets it, and the node that receives such a request never
    /// forwards it again (so a write is forwarded at most once). Applications leave it off.
    pub forwarded_ids: bool,
    /// What a call that gets no answer in time does to the connection.
    pub on_timeout: OnTimeout,
    /// The identity every connection authenticates as (AUTH, its first request), for nodes
    /// that require authentication (`auth.identitiesFile`); `None`: no AUTH is sent.
    pub credentials: Option<Arc<Credentials>>,
    /// TLS to the node's client port (`client.secure=true` there); `None`: plain TCP.
    pub tls: Option<ClientTls>,
}

/// What a call that times out does to its connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnTimeout {
    /// The call fails alone and the connection stays in use (an answer that comes later is
    /// dropped). Its request may still reach the node afterwards (bytes held by a partition are
    /// delivered when it heals); a write is then fenced only by the client's session (a later
    /// write of the same session refuses it). The default: the connection multiplexes
    /// unrelated calls, and one slow answer does not fail the others.
    #[default]
    KeepConnection,
    /// No late delivery: the connection is discarded at once — every call on it fails
    /// ([`super::ClientError::Closed`]), later calls too — and its socket, opened with
    /// SO_LINGER 0, is reset, so the kernel drops whatever it had not delivered instead of
    /// sending it after a partition heals. For callers that re-dial (a node forwarding writes):
    /// what a timed-out request left unsent never arrives.
    DiscardConnection,
}

impl ClientOptions {
    /// The defaults: connect within 5 s, answers within 30 s, plain ids, keep the connection
    /// on a timeout. Usable in `const` items (`..ClientOptions::DEFAULT`).
    pub const DEFAULT: ClientOptions = ClientOptions {
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(30),
        forwarded_ids: false,
        on_timeout: OnTimeout::KeepConnection,
        credentials: None,
        tls: None,
    };

    /// A node's connection to another node for forwarded requests: forwarded ids, and a
    /// timed-out call discards the connection (no late delivery). Set the timeouts per use.
    pub const FORWARDING: ClientOptions = ClientOptions {
        forwarded_ids: true,
        on_timeout: OnTimeout::DiscardConnection,
        ..ClientOptions::DEFAULT
    };
}

impl Default for ClientOptions {
    fn default() -> ClientOptions {
        ClientOptions::DEFAULT
    }
}
