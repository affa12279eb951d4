//! Node-to-node calls over the client protocol: forwarded writes to the leader and STATUS
//! queries for SHOW FRONTENDS, through the client library ([`Client`] with
//! [`ClientOptions::FORWARDING`]). The pool keeps one multiplexed client per address and
//! dials a new one when it is lost or discarded. With `client.secure=true` it dials with TLS,
//! presenting this node's client-port certificate (`conn::tls::ClientPortTls::forwarding`).
//!
//! INV-1: every call ends within twice its timeout (dial; write and answer); a broken
//! connection fails every call waiting on it at once. A dial failure ([`CallError::Connect`])
//! means the request was not sent; any later failure ([`CallError::Unanswered`]) leaves its
//! outcome unknown.
//! INV-2: forwarded requests carry [`FORWARDED_BIT`] in their id (client INV-3); a node never
//! forwards such a request again, so a write is forwarded at most once (no NOT_LEADER loops,
//! PITFALLS E12).
//! INV-3 (no late delivery, client INV-6): a call that times out after its bytes may have been
//! queued discards its connection at once: the calls waiting on it fail, the next call dials
//! anew, and the socket (SO_LINGER 0) is reset, so the kernel drops whatever it had not
//! delivered yet instead of sending it after a partition heals. Bytes the peer already
//! received are fenced there by the request's deadline and session.
//!
//! [`FORWARDED_BIT`]: crate::protocol::FORWARDED_BIT

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use thiserror::Error;

use super::ServerConfig;
use crate::client::{Client, ClientError, ClientOptions, ClientTls, Credentials};
use crate::protocol::{ErrorReply, RequestBody, RequestMeta, ResponseBody};

/// Why a call to another node failed.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum CallError {
    /// No connection could be made: the request was not sent (safe to send elsewhere).
    #[error("{0}")]
    Connect(ClientError),
    /// Sent (or possibly sent) but not answered: the outcome is unknown.
    #[error("{0}")]
    Unanswered(ClientError),
}

/// The clients connected to other nodes, by address.
#[derive(Debug, Default)]
pub struct PeerPool {
    clients: Mutex<HashMap<String, Arc<Client>>>,
    /// TLS to the other nodes' client ports, when they are TLS.
    tls: Option<ClientTls>,
    /// The identity calls are made as (`auth.nodeCredentialsFile`).
    credentials: Option<Arc<Credentials>>,
}

impl PeerPool {
    /// The pool of a node configured by `cfg`: its client TLS and its node credentials.
    pub fn for_config(cfg: &ServerConfig) -> PeerPool {
        let tls = cfg.client_tls.as_ref().map(|t| t.forwarding());
        PeerPool::new(tls, cfg.auth.credentials())
    }

    /// A pool that dials with `tls` (`None`: plain TCP) and authenticates as `credentials`,
    /// if any.
    pub fn new(tls: Option<ClientTls>, credentials: Option<Arc<Credentials>>) -> PeerPool {
        PeerPool {
            clients: Mutex::default(),
            tls,
            credentials,
        }
    }

    /// Sends `body` with `meta` to the node at `addr` as a forwarded request (INV-2) and waits
    /// for the answer, at most `limit` to connect and `limit` for the answer (INV-1); on a
    /// timeout the connection is discarded (INV-3). `Ok` is the node's answer as it came: its
    /// success body or its error reply.
    pub async fn call(
        &self,
        addr: &str,
        meta: RequestMeta,
        body: RequestBody,
        limit: Duration,
    ) -> Result<Result<ResponseBody, ErrorReply>, CallError> {
        self.call_noting_sent(addr, meta, body, limit, || {}).await
    }

    /// [`PeerPool::call`], calling `sent` once the request is queued on the connection to
    /// `addr` (requests queued on one connection are written in that order); not called when
    /// it is not queued.
    pub async fn call_noting_sent(
        &self,
        addr: &str,
        meta: RequestMeta,
        body: RequestBody,
        limit: Duration,
        sent: impl FnOnce(),
    ) -> Result<Result<ResponseBody, ErrorReply>, CallError> {
        let client = self.client(addr, limit).await.map_err(CallError::Connect)?;
        client
            .exchange_noting_sent(body, meta, limit, sent)
            .await
            .map_err(CallError::Unanswered)
    }

    /// The open client for `addr`, dialled (within `limit`) if there is none or it closed.
    async fn client(&self, addr: &str, limit: Duration) -> Result<Arc<Client>, ClientError> {
        if let Some(open) = self.lock().get(addr).filter(|c| !c.is_closed()) {
            return Ok(Arc::clone(open));
        }
        let options = ClientOptions {
            connect_timeout: limit,
            request_timeout: limit,
            credentials: self.credentials.clone(),
            tls: self.tls.clone(),
            ..ClientOptions::FORWARDING
        };
        let client = Arc::new(Client::connect_with(addr, options).await?);
        self.lock().insert(addr.to_owned(), Arc::clone(&client));
        Ok(client)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Client>>> {
        // A poisoned lock only means a holder panicked between two plain map operations.
        self.clients.lock().unwrap_or_else(|e| e.into_inner())
    }
}
