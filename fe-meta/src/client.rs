//! An async client for the fe-meta client protocol (`docs/PROTOCOL.md`): one TCP connection to
//! any node, pipelined requests. It is also how a node forwards a write to the leader and asks
//! its peers for their status (`server::peer`), with [`ClientOptions::FORWARDING`].
//!
//! ```text
//! caller ─call()─▶ waiters[id] = oneshot ─frame─▶ writer task ─TCP─▶ node
//! caller ◀─oneshot── reader task (matches response id → waiter) ◀─TCP─┘
//! ```
//!
//! [`Client`] methods take `&self`: share one client (`Arc<Client>`) between tasks and their
//! requests are pipelined on the one connection, answered in any order. One method per request
//! kind ([`Client::add_backend`], [`Client::show_backends`], …) plus the generic
//! [`Client::call`], and [`Client::exchange`], which hands back the node's error reply as it
//! came. Failures are typed ([`ClientError`]): the server's error replies map one variant per
//! status code, with their fields.
//!
//! INV-1: every call ends — with its answer, its server error, [`ClientError::Timeout`] after
//! its timeout, or [`ClientError::Closed`] as soon as the connection is lost or discarded.
//! [`ClientError::Connect`] comes only from dialling: no request was sent.
//! INV-2: a call that ends early (timeout, or its future dropped) removes its waiter; a late
//! answer for it is dropped. Nothing grows without bound across calls.
//! INV-3: request ids are unique per connection (a counter from 1, so never 0 — the server's id
//! for "frame unreadable", which fails every call in flight and closes the connection); the
//! top bit ([`FORWARDED_BIT`]) is set on every id if [`ClientOptions::forwarded_ids`], and on
//! none otherwise.
//! INV-4 (deadline): every request of [`Client::call`] carries the client's request timeout as
//! its budget; the server refuses to propose a write whose budget ran out (DEADLINE_EXCEEDED).
//! INV-5 (session): every write carries the [`ClientSession`]'s id, a fresh sequence number,
//! and the session's floor — the lowest sequence number among its writes still waiting (on any
//! connection sharing the session). A write that ended (answered, timed out, dropped) leaves
//! the in-flight set at once, so a later write's floor fences it: if its bytes reach a leader
//! after that later write applied, it is refused (STALE_REQUEST), never applied.
//! INV-6 (no late delivery, [`OnTimeout::DiscardConnection`]): a call that times out after its
//! bytes may have been queued discards the connection at once: every call on it fails, later
//! ones too, and both socket tasks stop, so the socket (SO_LINGER 0) is reset and the kernel
//! drops what it had not delivered. Bytes the node already received are fenced there by the
//! request's deadline and session.

mod api;
mod connection;
mod error;
mod options;
mod session;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

pub use api::{Members, Read, Reconfigured, Written};
pub use error::ClientError;
pub use options::{ClientOptions, OnTimeout};
pub use session::ClientSession;

use crate::protocol::{
    encode_frame, encode_request, ErrorReply, Request, RequestBody, RequestMeta, Response,
    ResponseBody, FORWARDED_BIT,
};
use connection::{dial, read_loop, write_loop, Shared, WRITE_QUEUE};

/// A connection to one fe-meta node. Dropping it closes the connection.
pub struct Client {
    shared: Arc<Shared>,
    frames: mpsc::Sender<Vec<u8>>,
    next_id: AtomicU64,
    options: ClientOptions,
    session: Arc<ClientSession>,
    /// The reader and writer tasks, which own the socket's halves (aborted: it closes).
    tasks: [JoinHandle<()>; 2],
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("addr", &self.shared.addr)
            .finish_non_exhaustive()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Client {
    /// Connects to `addr` (`host:port`) with the default options. Must be called within a
    /// tokio runtime.
    pub async fn connect(addr: &str) -> Result<Client, ClientError> {
        Client::connect_with(addr, ClientOptions::default()).await
    }

    /// Connects to `addr` (`host:port`) as a new client (a new random session, INV-5).
    pub async fn connect_with(addr: &str, options: ClientOptions) -> Result<Client, ClientError> {
        Client::connect_in_session(addr, options, Arc::new(ClientSession::new())).await
    }

    /// Connects to `addr` as the client `session` (shared with its other connections, e.g. to
    /// another node after this one stopped answering): its writes stay fenced (INV-5).
    pub async fn connect_in_session(
        addr: &str,
        options: ClientOptions,
        session: Arc<ClientSession>,
    ) -> Result<Client, ClientError> {
        let discard = options.on_timeout == OnTimeout::DiscardConnection;
        let stream = dial(addr, options.connect_timeout, discard).await?;
        let (rd, wr) = stream.into_split();
        let shared = Arc::new(Shared::new(addr));
        let (frames, queue) = mpsc::channel(WRITE_QUEUE);
        let reader = tokio::spawn(read_loop(rd, Arc::clone(&shared)));
        let writer = tokio::spawn(write_loop(wr, queue, Arc::clone(&shared)));
        Ok(Client {
            shared,
            frames,
            next_id: AtomicU64::new(1),
            options,
            session,
            tasks: [reader, writer],
        })
    }

    /// The address this client connected to.
    pub fn addr(&self) -> &str {
        &self.shared.addr
    }

    /// The options in force.
    pub fn options(&self) -> ClientOptions {
        self.options
    }

    /// The client session this connection writes in.
    pub fn session(&self) -> &Arc<ClientSession> {
        &self.session
    }

    /// Whether the connection is known to be lost or discarded (every call would fail).
    pub fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// Sends one request and waits for its answer: the success body (checked to be the one
    /// this kind answers with) or the typed error.
    pub async fn call(&self, body: RequestBody) -> Result<ResponseBody, ClientError> {
        let budget_ms = u32::try_from(self.options.request_timeout.as_millis()).unwrap_or(u32::MAX);
        if !body.kind().is_write() {
            let meta = RequestMeta {
                budget_ms: Some(budget_ms),
                session: None,
            };
            return self.call_with(body, meta).await;
        }
        let write = self.session.begin();
        let meta = RequestMeta {
            budget_ms: Some(budget_ms),
            session: Some(write.tag()),
        };
        self.call_with(body, meta).await
    }

    /// Sends one request with the given deadline and session fields as they are (a retry of a
    /// write sends the same session fields again: it applies at most once), and waits for its
    /// answer as [`Client::call`] does.
    pub async fn call_with(
        &self,
        body: RequestBody,
        meta: RequestMeta,
    ) -> Result<ResponseBody, ClientError> {
        self.exchange(body, meta, self.options.request_timeout)
            .await?
            .map_err(ClientError::from)
    }

    /// Sends one request with `meta` as it is and waits at most `limit` for the answer: the
    /// success body (checked to be the one this kind answers with) or the node's error reply
    /// unchanged (a node forwarding a write passes the leader's answer on as it came). `Err`
    /// is a failure of the exchange only — the connection closed, no answer in time (INV-1,
    /// INV-6), a malformed answer — and never [`ClientError::Connect`]: the request may have
    /// been sent.
    pub async fn exchange(
        &self,
        body: RequestBody,
        meta: RequestMeta,
        limit: Duration,
    ) -> Result<Result<ResponseBody, ErrorReply>, ClientError> {
        let kind = body.kind();
        let id = self.next_request_id();
        let (_guard, answer) = self.shared.register(id)?;
        let mut frame = Vec::new();
        encode_frame(&encode_request(&Request { id, meta, body }), &mut frame);
        let resp = match tokio::time::timeout(limit, self.send_and_wait(frame, answer)).await {
            Ok(resp) => resp?,
            Err(_) => {
                self.on_timeout(limit);
                return Err(ClientError::Timeout { kind, after: limit });
            }
        };
        match resp.result {
            Err(reply) => Ok(Err(reply)),
            Ok(body) if resp.kind == kind && body.answers(kind) => Ok(Ok(body)),
            Ok(_) => Err(ClientError::Protocol(format!(
                "request {id} ({kind}) was answered as {}",
                resp.kind
            ))),
        }
    }

    /// The next request id (INV-3).
    fn next_request_id(&self) -> u64 {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed) & !FORWARDED_BIT;
        if self.options.forwarded_ids {
            n | FORWARDED_BIT
        } else {
            n
        }
    }

    async fn send_and_wait(
        &self,
        frame: Vec<u8>,
        answer: oneshot::Receiver<Result<Response, ClientError>>,
    ) -> Result<Response, ClientError> {
        if self.frames.send(frame).await.is_err() {
            return Err(self.shared.closed("the writer stopped"));
        }
        match answer.await {
            Ok(r) => r,
            Err(_) => Err(self.shared.closed("the reader stopped")),
        }
    }

    /// What a call that got no answer within `limit` does to the connection (INV-6).
    fn on_timeout(&self, limit: Duration) {
        if self.options.on_timeout == OnTimeout::KeepConnection {
            return;
        }
        self.shared.close(self.shared.closed(format!(
            "discarded after a call got no answer within {limit:?} (what it had not \
             delivered is dropped, not delivered later)"
        )));
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Sends a ZooKeeper four-letter word (`ruok`, `srvr`, `stat`, `mntr`) to `addr` and returns
/// the text answer (read until the server closes, at most 1 MiB).
pub async fn four_letter_word(
    addr: &str,
    word: &str,
    timeout: Duration,
) -> Result<String, ClientError> {
    let err = |reason: String| ClientError::Connect {
        addr: addr.to_owned(),
        reason,
    };
    let exchange = async {
        let mut s = TcpStream::connect(addr).await?;
        s.write_all(word.as_bytes()).await?;
        let mut out = Vec::new();
        (&mut s).take(1024 * 1024).read_to_end(&mut out).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&out).into_owned())
    };
    match tokio::time::timeout(timeout, exchange).await {
        Err(_) => Err(err(format!("no answer within {timeout:?}"))),
        Ok(Err(e)) => Err(err(e.to_string())),
        Ok(Ok(text)) => Ok(text),
    }
}
