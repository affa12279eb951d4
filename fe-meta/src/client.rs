//! An async client for the fe-meta client protocol (`docs/PROTOCOL.md`): one TCP connection at
//! a time to any node, pipelined requests. It is also how a node forwards a write to the leader
//! and asks its peers for their status (`server::peer`), with [`ClientOptions::FORWARDING`].
//!
//! Endpoints: [`Client::connect`] (and `connect_with`, `connect_in_session`) holds one
//! connection to one node for its whole life. [`Client::connect_any`] (and
//! `connect_any_in_session`) takes several endpoints, as etcd and ZooKeeper clients do: it
//! connects to the first that accepts, and when that connection fails (refused, reset, connect
//! timeout, closed before an answer) a call moves to the next endpoint — in list order starting
//! after the one that failed, each at most once per call — and fails with
//! [`ClientError::AllEndpointsFailed`], naming every endpoint tried, when none answered. A
//! request is sent again on the new connection only when that cannot apply it twice: a read, a
//! write that was never sent, or a session write (every write of [`Client::call`] carries the
//! session: the retry sends the same client id and sequence number, which the cluster applies
//! at most once and answers with the first outcome). A write sent without a session (through
//! [`Client::call_with`]) or a membership change whose connection was lost fails with
//! [`ClientError::Closed`]: its outcome is unknown. A timeout never moves a call on.
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
//! its timeout, or [`ClientError::Closed`] as soon as the connection is lost or discarded (a
//! write of [`Client::call`] that first waited for room in its session's window, INV-5, has
//! the rest of the timeout, or fails unsent with [`ClientError::WindowFull`]).
//! [`ClientError::Connect`] comes only from dialling: no request was sent. With several
//! endpoints a call that moved on and still failed everywhere ends with
//! [`ClientError::AllEndpointsFailed`].
//! INV-2: a call that ends early (timeout, or its future dropped) removes its waiter; a late
//! answer for it is dropped. Nothing grows without bound across calls.
//! INV-3: request ids are unique per connection (a counter from 1, so never 0 — the server's id
//! for "frame unreadable", which fails every call in flight and closes the connection); the
//! top bit ([`crate::protocol::FORWARDED_BIT`]) is set on every id if [`ClientOptions::forwarded_ids`], and on
//! none otherwise.
//! INV-4 (deadline): every request of [`Client::call`] carries the client's request timeout as
//! its budget; the server refuses to propose a write whose budget ran out (DEADLINE_EXCEEDED).
//! INV-5 (session): every write carries the [`ClientSession`]'s id, a fresh sequence number,
//! and the session's floor — the lowest sequence number among its writes still waiting (on any
//! connection sharing the session). A write that ended (answered, timed out, dropped) leaves
//! the in-flight set at once, so a later write's floor fences it: if its bytes reach a leader
//! after that later write applied, it is refused (STALE_REQUEST), never applied. A write still
//! awaited is never refused so: a write starts only within [`SEQ_SPAN_MAX`] sequence numbers
//! of the oldest one in flight (the cluster keeps that many outcomes per client), waiting for
//! it at most the request timeout, then failing with [`ClientError::WindowFull`], unsent.
//! INV-6 (no late delivery, [`OnTimeout::DiscardConnection`]): a call that times out after its
//! bytes may have been queued discards the connection at once: every call on it fails, later
//! ones too, and both socket tasks stop, so the socket (SO_LINGER 0) is reset and the kernel
//! drops what it had not delivered. Bytes the node already received are fenced there by the
//! request's deadline and session. (A client with several endpoints moves its later calls to
//! a new connection, INV-7; the discarded one is never used again.)
//! INV-7 (endpoints): the rules of `failover` — each endpoint at most once per call, in order
//! after the failed one; a request resent elsewhere only if that cannot apply it twice.

mod api;
mod backup;
mod connection;
mod credentials;
mod error;
mod failover;
mod link;
mod options;
mod session;
mod tls;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub use api::{Members, Read, Reconfigured, Transferred, Written, TRANSFER_WAIT};
pub use credentials::{Credentials, CredentialsError};
pub use error::ClientError;
pub use options::{ClientOptions, OnTimeout};
pub use session::{ClientSession, InFlightWrite, SEQ_SPAN_MAX};
pub use tls::ClientTls;

use crate::protocol::{ErrorReply, RequestBody, RequestKind, RequestMeta, ResponseBody};
use link::Link;

/// A client of an fe-meta cluster: one connection at a time, to one of its endpoints (see the
/// module docs). Dropping it closes the connection.
pub struct Client {
    /// The endpoints, `host:port`, in the order given.
    endpoints: Vec<String>,
    /// Whether a lost connection is replaced by one to another endpoint (INV-7).
    moves_on: bool,
    /// The connection in use.
    link: Mutex<Arc<Link>>,
    /// Held while a call replaces the connection, so concurrent calls dial once between them.
    redial: tokio::sync::Mutex<()>,
    options: ClientOptions,
    session: Arc<ClientSession>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("addr", &self.addr())
            .field("endpoints", &self.endpoints)
            .finish_non_exhaustive()
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
    /// another node after this one stopped answering): its writes stay fenced (INV-5). The
    /// client stays on this one connection: once it is lost, every call fails.
    pub async fn connect_in_session(
        addr: &str,
        options: ClientOptions,
        session: Arc<ClientSession>,
    ) -> Result<Client, ClientError> {
        let link = Link::open(addr, 0, &options).await?;
        Ok(Client::with_link(
            vec![addr.to_owned()],
            false,
            link,
            options,
            session,
        ))
    }

    /// Connects to the first of `endpoints` (`host:port` each) that accepts, as a new client;
    /// a lost connection is replaced by one to the next endpoint (module docs, INV-7). Fails
    /// naming every endpoint when none accepts.
    pub async fn connect_any<S: AsRef<str>>(
        endpoints: &[S],
        options: ClientOptions,
    ) -> Result<Client, ClientError> {
        Client::connect_any_in_session(endpoints, options, Arc::new(ClientSession::new())).await
    }

    /// [`Client::connect_any`] as the client `session`.
    pub async fn connect_any_in_session<S: AsRef<str>>(
        endpoints: &[S],
        options: ClientOptions,
        session: Arc<ClientSession>,
    ) -> Result<Client, ClientError> {
        let endpoints: Vec<String> = endpoints.iter().map(|e| e.as_ref().to_owned()).collect();
        let mut attempts = Vec::new();
        for (index, addr) in endpoints.iter().enumerate() {
            match Link::open(addr, index, &options).await {
                Ok(link) => return Ok(Client::with_link(endpoints, true, link, options, session)),
                Err(e) if e.is_refused_identity() => return Err(e),
                Err(e) => attempts.push(e),
            }
        }
        Err(failover::all_failed(attempts))
    }

    fn with_link(
        endpoints: Vec<String>,
        moves_on: bool,
        link: Link,
        options: ClientOptions,
        session: Arc<ClientSession>,
    ) -> Client {
        Client {
            endpoints,
            moves_on,
            link: Mutex::new(Arc::new(link)),
            redial: tokio::sync::Mutex::new(()),
            options,
            session,
        }
    }

    /// The address of the endpoint the client is connected to now.
    pub fn addr(&self) -> String {
        self.current().addr().to_owned()
    }

    /// The endpoints given, in order (one for [`Client::connect`]).
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// The options in force.
    pub fn options(&self) -> ClientOptions {
        self.options.clone()
    }

    /// The client session this client writes in.
    pub fn session(&self) -> &Arc<ClientSession> {
        &self.session
    }

    /// Whether the connection in use is known to be lost or discarded (a single-endpoint
    /// client's every call would fail; one with several endpoints moves on at its next call).
    pub fn is_closed(&self) -> bool {
        self.current().is_closed()
    }

    /// Sends one request and waits for its answer: the success body (checked to be the one
    /// this kind answers with) or the typed error. A write carries the session (INV-5), the
    /// same fields on every endpoint it is sent to (INV-7).
    pub async fn call(&self, body: RequestBody) -> Result<ResponseBody, ClientError> {
        let budget_ms = u32::try_from(self.options.request_timeout.as_millis()).unwrap_or(u32::MAX);
        if !body.kind().is_write() {
            let meta = RequestMeta {
                budget_ms: Some(budget_ms),
                session: None,
            };
            return self.call_with(body, meta).await;
        }
        // The wait for room in the session's window counts against the request timeout, so
        // the call still ends within it (INV-1).
        let started = std::time::Instant::now();
        let write = self.begin_write(body.kind()).await?;
        let limit = self
            .options
            .request_timeout
            .saturating_sub(started.elapsed())
            .max(Duration::from_millis(1));
        let meta = RequestMeta {
            budget_ms: Some(u32::try_from(limit.as_millis()).unwrap_or(u32::MAX)),
            session: Some(write.tag()),
        };
        self.exchange(body, meta, limit)
            .await?
            .map_err(ClientError::from)
    }

    /// Starts a session write (INV-5): waits at most the request timeout for room in the
    /// session's window; [`ClientError::WindowFull`] (nothing sent) when none came.
    async fn begin_write(&self, kind: RequestKind) -> Result<InFlightWrite, ClientError> {
        let after = self.options.request_timeout;
        match tokio::time::timeout(after, self.session.begin()).await {
            Ok(write) => Ok(write),
            Err(_) => {
                let oldest = self.session.oldest_in_flight().unwrap_or(0);
                tracing::debug!(%kind, oldest, "session window full: write not sent");
                Err(ClientError::WindowFull { oldest, after })
            }
        }
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
    /// INV-6), a malformed answer, every endpoint failed (INV-7) — and never
    /// [`ClientError::Connect`]: the request may have been sent.
    pub async fn exchange(
        &self,
        body: RequestBody,
        meta: RequestMeta,
        limit: Duration,
    ) -> Result<Result<ResponseBody, ErrorReply>, ClientError> {
        let mut link = self.current();
        if !self.moves_on {
            return link.exchange(body, meta, limit).await.map_err(|f| f.error);
        }
        let resend_is_safe = failover::resend_is_safe(&body, &meta);
        let mut tried = vec![false; self.endpoints.len()];
        let mut attempts = Vec::new();
        if link.is_closed() {
            // Lost before this call (an earlier call found no endpoint): not an attempt of this
            // call, so its endpoint is dialled again too, last.
            match self.replace(&link, &mut tried, &mut attempts).await {
                Some(next) => link = next,
                None => return Err(failover::all_failed(attempts)),
            }
        }
        loop {
            if let Some(t) = tried.get_mut(link.index) {
                *t = true;
            }
            match link.exchange(body.clone(), meta, limit).await {
                Ok(answer) => return Ok(answer),
                Err(failed) if failover::moves_on(&failed, resend_is_safe) => {
                    attempts.push(failed.error)
                }
                Err(failed) => return Err(failed.error),
            }
            match self.replace(&link, &mut tried, &mut attempts).await {
                Some(next) => link = next,
                None => return Err(failover::all_failed(attempts)),
            }
        }
    }

    /// A connection to the next endpoint this call has not tried (INV-7), after `failed`:
    /// the one another call already opened, or a new one; `None` when every endpoint was
    /// tried. Each dial failure joins `attempts`.
    async fn replace(
        &self,
        failed: &Arc<Link>,
        tried: &mut [bool],
        attempts: &mut Vec<ClientError>,
    ) -> Option<Arc<Link>> {
        let _one_dialer = self.redial.lock().await;
        let now = self.current();
        let fresh = !Arc::ptr_eq(&now, failed) && !now.is_closed();
        if fresh && tried.get(now.index) == Some(&false) {
            return Some(now);
        }
        for index in failover::next_candidates(failed.index, tried) {
            tried[index] = true;
            let addr = &self.endpoints[index];
            match Link::open(addr, index, &self.options).await {
                Ok(link) => {
                    let link = Arc::new(link);
                    *self.lock_link() = Arc::clone(&link);
                    tracing::info!(from = failed.addr(), to = %addr, "client moved to the next endpoint");
                    return Some(link);
                }
                Err(e) if e.is_refused_identity() => {
                    attempts.push(e);
                    return None;
                }
                Err(e) => attempts.push(e),
            }
        }
        None
    }

    /// [`Client::exchange`] on the current connection only (no failover: for a node's
    /// forwarding clients, which have one endpoint), calling `sent` once the request is queued
    /// on it; requests queued on one connection are written in that order.
    pub(crate) async fn exchange_noting_sent(
        &self,
        body: RequestBody,
        meta: RequestMeta,
        limit: Duration,
        sent: impl FnOnce(),
    ) -> Result<Result<ResponseBody, ErrorReply>, ClientError> {
        self.current()
            .exchange_noting_sent(body, meta, limit, sent)
            .await
            .map_err(|f| f.error)
    }

    fn current(&self) -> Arc<Link> {
        Arc::clone(&self.lock_link())
    }

    fn lock_link(&self) -> MutexGuard<'_, Arc<Link>> {
        // A poisoned lock only means a holder panicked while swapping one Arc.
        self.link.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Sends a ZooKeeper four-letter word (`ruok`, `srvr`, `stat`, `mntr`) to `addr` and returns
/// the text answer (read until the server closes, at most 1 MiB).
pub async fn four_letter_word(
    addr: &str,
    word: &str,
    timeout: Duration,
) -> Result<String, ClientError> {
    four_letter_word_with(addr, word, timeout, None).await
}

/// [`four_letter_word`] to a TLS client port when `tls` is given.
pub async fn four_letter_word_with(
    addr: &str,
    word: &str,
    timeout: Duration,
    tls: Option<&ClientTls>,
) -> Result<String, ClientError> {
    let err = |reason: String| ClientError::Connect {
        addr: addr.to_owned(),
        reason,
    };
    let exchange = async {
        let tcp = TcpStream::connect(addr).await?;
        let mut s = match tls {
            Some(tls) => tls.connect(addr, tcp).await?,
            None => zab_net::tls::Stream::Plain(tcp),
        };
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
