//! [`Link`]: one open connection to one endpoint — the socket tasks, the request id counter,
//! and one request/answer exchange on it. [`super::Client`] holds one link at a time and, with
//! several endpoints, replaces a lost one (`super::failover`).
//!
//! INV-1: request ids are unique per link (a counter from 1, never 0); the top bit
//! ([`FORWARDED_BIT`]) is set on every id if [`ClientOptions::forwarded_ids`], on none
//! otherwise.
//! INV-2: an exchange that fails says whether its frame may have left ([`Failed::sent`]):
//! `false` only when the link was already closed before the frame was queued, so nothing of
//! this request can reach the node.
//! INV-3: dropping a link aborts both socket tasks, which closes the socket.
//! INV-4: with [`ClientOptions::credentials`], a link is returned only after the node
//! answered its AUTH (the first request on the connection) with success; a refusal is the
//! node's UNAUTHENTICATED reply as [`ClientError::Server`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::connection::{dial, read_loop, write_loop, Shared, WRITE_QUEUE};
use super::{ClientError, ClientOptions, ClientTls, Credentials, OnTimeout};
use crate::protocol::{
    encode_frame, encode_request, ErrorReply, Request, RequestBody, RequestMeta, Response,
    ResponseBody, FORWARDED_BIT,
};
use zab_net::tls::Stream;

/// How one exchange on a link failed.
#[derive(Debug)]
pub(super) struct Failed {
    /// Why.
    pub(super) error: ClientError,
    /// Whether the request's frame may have been sent (INV-2).
    pub(super) sent: bool,
}

/// The TLS handshake of a new connection, within `limit`; a failure is a
/// [`ClientError::Connect`] (nothing was sent).
async fn secure(
    tls: &ClientTls,
    addr: &str,
    tcp: tokio::net::TcpStream,
    limit: Duration,
) -> Result<Stream, ClientError> {
    let err = |reason: String| ClientError::Connect {
        addr: addr.to_owned(),
        reason,
    };
    match tokio::time::timeout(limit, tls.connect(addr, tcp)).await {
        Err(_) => Err(err(format!("TLS handshake timed out after {limit:?}"))),
        Ok(Err(e)) => Err(err(format!("TLS handshake failed: {e}"))),
        Ok(Ok(s)) => Ok(s),
    }
}

/// One open connection (see the module docs).
pub(super) struct Link {
    /// The endpoint's position in the client's list.
    pub(super) index: usize,
    shared: Arc<Shared>,
    frames: mpsc::Sender<Vec<u8>>,
    next_id: AtomicU64,
    options: ClientOptions,
    /// The reader and writer tasks, which own the socket's halves (aborted: it closes).
    tasks: [JoinHandle<()>; 2],
}

impl Drop for Link {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Link {
    /// Dials `addr` (the endpoint at `index`) and starts the socket tasks.
    pub(super) async fn open(
        addr: &str,
        index: usize,
        options: &ClientOptions,
    ) -> Result<Link, ClientError> {
        let options = options.clone();
        let discard = options.on_timeout == OnTimeout::DiscardConnection;
        let credentials = options.credentials.clone();
        let tcp = dial(addr, options.connect_timeout, discard).await?;
        let stream = match &options.tls {
            None => Stream::Plain(tcp),
            Some(tls) => secure(tls, addr, tcp, options.connect_timeout).await?,
        };
        let (rd, wr) = stream.into_split();
        let shared = Arc::new(Shared::new(addr));
        let (frames, queue) = mpsc::channel(WRITE_QUEUE);
        let reader = tokio::spawn(read_loop(rd, Arc::clone(&shared)));
        let writer = tokio::spawn(write_loop(wr, queue, Arc::clone(&shared)));
        let link = Link {
            index,
            shared,
            frames,
            next_id: AtomicU64::new(1),
            options,
            tasks: [reader, writer],
        };
        if let Some(credentials) = credentials {
            link.authenticate(&credentials).await?;
        }
        Ok(link)
    }

    /// Sends AUTH (INV-4): an error reply becomes [`ClientError::Server`].
    async fn authenticate(&self, credentials: &Credentials) -> Result<(), ClientError> {
        let body = RequestBody::Auth(credentials.auth_request());
        let limit = self.options.connect_timeout;
        match self.exchange(body, RequestMeta::default(), limit).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(reply)) => Err(ClientError::Server(reply)),
            Err(failed) => Err(failed.error),
        }
    }

    /// The endpoint this link is connected to.
    pub(super) fn addr(&self) -> &str {
        &self.shared.addr
    }

    /// Whether the link is known to be lost or discarded.
    pub(super) fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// Sends one request with `meta` as it is and waits at most `limit` for its answer: the
    /// success body (checked to be the one its kind answers with) or the node's error reply.
    pub(super) async fn exchange(
        &self,
        body: RequestBody,
        meta: RequestMeta,
        limit: Duration,
    ) -> Result<Result<ResponseBody, ErrorReply>, Failed> {
        self.exchange_noting_sent(body, meta, limit, || {}).await
    }

    /// [`Link::exchange`], calling `sent` once the request's frame is queued for the writer
    /// task (frames are written in the order queued); not called when it is not queued.
    pub(super) async fn exchange_noting_sent(
        &self,
        body: RequestBody,
        meta: RequestMeta,
        limit: Duration,
        sent: impl FnOnce(),
    ) -> Result<Result<ResponseBody, ErrorReply>, Failed> {
        let kind = body.kind();
        let id = self.next_request_id();
        let not_sent = |error| Failed { error, sent: false };
        let was_sent = |error| Failed { error, sent: true };
        let (_guard, answer) = self.shared.register(id).map_err(not_sent)?;
        let mut frame = Vec::new();
        encode_frame(&encode_request(&Request { id, meta, body }), &mut frame);
        if self.frames.send(frame).await.is_err() {
            return Err(not_sent(self.shared.closed("the writer stopped")));
        }
        sent();
        let resp = match tokio::time::timeout(limit, Self::wait(&self.shared, answer)).await {
            Ok(resp) => resp.map_err(was_sent)?,
            Err(_) => {
                self.on_timeout(limit);
                return Err(was_sent(ClientError::Timeout { kind, after: limit }));
            }
        };
        match resp.result {
            Err(reply) => Ok(Err(reply)),
            Ok(body) if resp.kind == kind && body.answers(kind) => Ok(Ok(body)),
            Ok(_) => Err(was_sent(ClientError::Protocol(format!(
                "request {id} ({kind}) was answered as {}",
                resp.kind
            )))),
        }
    }

    /// The next request id (INV-1).
    fn next_request_id(&self) -> u64 {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed) & !FORWARDED_BIT;
        if self.options.forwarded_ids {
            n | FORWARDED_BIT
        } else {
            n
        }
    }

    async fn wait(
        shared: &Shared,
        answer: oneshot::Receiver<Result<Response, ClientError>>,
    ) -> Result<Response, ClientError> {
        match answer.await {
            Ok(r) => r,
            Err(_) => Err(shared.closed("the reader stopped")),
        }
    }

    /// What a call that got no answer within `limit` does to the link (the client's INV-6).
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
