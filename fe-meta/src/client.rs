//! An async client for the fe-meta client protocol (`docs/PROTOCOL.md`): one TCP connection to
//! any node, pipelined requests.
//!
//! ```text
//! caller ─call()─▶ pending[id] = oneshot ─frame─▶ writer task ─TCP─▶ node
//! caller ◀─oneshot── reader task (matches response id → pending) ◀─TCP─┘
//! ```
//!
//! [`Client`] methods take `&self`: share one client (`Arc<Client>`) between tasks and their
//! requests are pipelined on the one connection, answered in any order. One method per request
//! kind ([`Client::add_backend`], [`Client::show_backends`], …) plus the generic
//! [`Client::call`]. Failures are typed ([`ClientError`]): the server's error replies map one
//! variant per status code, with their fields.
//!
//! INV-1: every call ends — with its answer, its server error, [`ClientError::Timeout`] after
//! the request timeout, or [`ClientError::Closed`] as soon as the connection is lost.
//! INV-2: a call that ends early (timeout, or its future dropped) removes its waiter; a late
//! answer for it is dropped. Nothing grows without bound across calls.
//! INV-3: request ids are unique per connection (a counter from 1, so never 0 — the server's id
//! for "frame unreadable", which fails every call in flight and closes the connection — and
//! never with the top bit set, which the protocol reserves for forwarded writes).
//! INV-4 (deadline): every request carries the client's request timeout as its budget; the
//! server refuses to propose a write whose budget ran out (DEADLINE_EXCEEDED).
//! INV-5 (session): every write carries the [`ClientSession`]'s id, a fresh sequence number,
//! and the session's floor — the lowest sequence number among its writes still waiting (on any
//! connection sharing the session). A write that ended (answered, timed out, dropped) leaves
//! the in-flight set at once, so a later write's floor fences it: if its bytes reach a leader
//! after that later write applied, it is refused (STALE_REQUEST), never applied.

mod api;
mod error;
mod session;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

pub use api::{Read, Written};
pub use error::ClientError;
pub use session::ClientSession;

use crate::protocol::{
    decode_response, encode_frame, encode_request, FrameDecoder, Request, RequestBody, RequestMeta,
    Response, ResponseBody,
};

/// Connection and request timeouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientOptions {
    /// How long to wait for the TCP connection.
    pub connect_timeout: Duration,
    /// How long to wait for each answer (writes wait for a quorum and for the answering node to
    /// apply them; the server has its own bounded waits, so this is a backstop).
    pub request_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> ClientOptions {
        ClientOptions {
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// Frames queued to the writer task before `call` waits (back-pressure).
const WRITE_QUEUE: usize = 1024;
/// Bytes the writer gathers from queued frames into one write.
const WRITE_BATCH: usize = 256 * 1024;

type Waiter = oneshot::Sender<Result<Response, ClientError>>;

/// Calls in flight and the connection's fate, shared by callers and the reader/writer tasks.
#[derive(Default)]
struct Pending {
    waiters: HashMap<u64, Waiter>,
    /// Set once the connection is lost; every later call fails with it.
    closed: Option<ClientError>,
}

struct Shared {
    addr: String,
    pending: Mutex<Pending>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        // A poisoned lock only means a holder panicked between two plain map operations.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks the connection lost and fails every call in flight with `err` (first reason wins).
    fn close(&self, err: ClientError) {
        let mut p = self.lock();
        let err = p.closed.get_or_insert(err).clone();
        for (_, w) in p.waiters.drain() {
            let _ = w.send(Err(err.clone()));
        }
    }

    fn closed(&self, reason: impl Into<String>) -> ClientError {
        ClientError::Closed {
            addr: self.addr.clone(),
            reason: reason.into(),
        }
    }

    /// Hands one response payload to its waiter. Returns `false` when the connection cannot
    /// go on (the server answered for request id 0).
    fn deliver(&self, payload: &[u8]) -> bool {
        match decode_response(payload) {
            Ok(resp) if resp.id == 0 => {
                let reason = match resp.result {
                    Err(reply) => format!("the server rejected a frame: {}", reply.message),
                    Ok(_) => "the server answered request id 0".to_owned(),
                };
                self.close(self.closed(reason));
                false
            }
            Ok(resp) => {
                if let Some(w) = self.lock().waiters.remove(&resp.id) {
                    let _ = w.send(Ok(resp));
                } else {
                    tracing::debug!(id = resp.id, "answer for a call that already ended");
                }
                true
            }
            Err(e) => match e.request_id() {
                Some(id) => {
                    if let Some(w) = self.lock().waiters.remove(&id) {
                        let _ = w.send(Err(ClientError::Protocol(e.to_string())));
                    }
                    true
                }
                None => {
                    self.close(self.closed(format!("undecodable answer: {e}")));
                    false
                }
            },
        }
    }
}

/// Removes a call's waiter when the call ends, however it ends (INV-2).
struct WaiterGuard<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        self.shared.lock().waiters.remove(&self.id);
    }
}

/// A connection to one fe-meta node. Dropping it closes the connection.
pub struct Client {
    shared: Arc<Shared>,
    frames: mpsc::Sender<Vec<u8>>,
    next_id: AtomicU64,
    options: ClientOptions,
    session: Arc<ClientSession>,
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
        let err = |reason: String| ClientError::Connect {
            addr: addr.to_owned(),
            reason,
        };
        let stream =
            match tokio::time::timeout(options.connect_timeout, TcpStream::connect(addr)).await {
                Err(_) => {
                    return Err(err(format!(
                        "timed out after {:?}",
                        options.connect_timeout
                    )))
                }
                Ok(Err(e)) => return Err(err(e.to_string())),
                Ok(Ok(s)) => s,
            };
        stream.set_nodelay(true).map_err(|e| err(e.to_string()))?;
        let (rd, wr) = stream.into_split();
        let shared = Arc::new(Shared {
            addr: addr.to_owned(),
            pending: Mutex::new(Pending::default()),
        });
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

    /// Whether the connection is known to be lost (every call would fail).
    pub fn is_closed(&self) -> bool {
        self.shared.lock().closed.is_some()
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
        let kind = body.kind();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut p = self.shared.lock();
            if let Some(e) = &p.closed {
                return Err(e.clone());
            }
            p.waiters.insert(id, tx);
        }
        let _guard = WaiterGuard {
            shared: &self.shared,
            id,
        };
        let mut frame = Vec::new();
        encode_frame(&encode_request(&Request { id, meta, body }), &mut frame);
        let after = self.options.request_timeout;
        let exchange = async {
            if self.frames.send(frame).await.is_err() {
                return Err(self.shared.closed("the writer stopped"));
            }
            match rx.await {
                Ok(r) => r,
                Err(_) => Err(self.shared.closed("the reader stopped")),
            }
        };
        let resp = match tokio::time::timeout(after, exchange).await {
            Err(_) => return Err(ClientError::Timeout { kind, after }),
            Ok(r) => r?,
        };
        match resp.result {
            Err(reply) => Err(ClientError::from(reply)),
            Ok(body) if resp.kind == kind && body.answers(kind) => Ok(body),
            Ok(_) => Err(ClientError::Protocol(format!(
                "request {id} ({kind}) was answered as {}",
                resp.kind
            ))),
        }
    }
}

async fn read_loop(mut rd: OwnedReadHalf, shared: Arc<Shared>) {
    let decoder = FrameDecoder::default();
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let err = loop {
        match decoder.decode(&mut buf) {
            Ok(Some(payload)) => {
                if !shared.deliver(&payload) {
                    return;
                }
                continue;
            }
            Ok(None) => {}
            Err(e) => break shared.closed(format!("bad frame from the server: {e}")),
        }
        match rd.read_buf(&mut buf).await {
            Ok(0) => break shared.closed("the server closed the connection"),
            Ok(_) => {}
            Err(e) => break shared.closed(e.to_string()),
        }
    };
    shared.close(err);
}

async fn write_loop(
    mut wr: OwnedWriteHalf,
    mut queue: mpsc::Receiver<Vec<u8>>,
    shared: Arc<Shared>,
) {
    let mut batch = Vec::with_capacity(WRITE_BATCH);
    while let Some(frame) = queue.recv().await {
        batch.clear();
        batch.extend_from_slice(&frame);
        while batch.len() < WRITE_BATCH {
            match queue.try_recv() {
                Ok(more) => batch.extend_from_slice(&more),
                Err(_) => break,
            }
        }
        if let Err(e) = wr.write_all(&batch).await {
            shared.close(shared.closed(format!("write failed: {e}")));
            return;
        }
    }
    let _ = wr.shutdown().await;
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
