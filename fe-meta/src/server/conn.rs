//! The client listener: one task per connection; a connection is a four-letter word or a
//! framed, pipelined session (`docs/PROTOCOL.md` §1–§2).
//!
//! A request's deadline starts when its frame is decoded ([`RequestContext::new`]).
//!
//! In a framed session the reader decodes frames and spawns one task per request (at most
//! [`IN_FLIGHT_MAX`] per connection: the reader waits for a slot, so a client cannot make the
//! server queue unboundedly); answers go through one writer task in the order they complete.
//! Each write takes a turn in the connection's write order as it is read (`order`), so the
//! writes are handed to the leader's planner in the order they were sent.
//!
//! INV-1: no input crashes the server. A frame whose request id is readable but whose kind or
//! body is not gets an INVALID_ARGUMENT answer for that id and the session goes on; an oversized
//! length, a short header or a wrong version gets an error frame for id 0 and the connection
//! is closed (after the answers in flight are written).
//! INV-2: every connection task ends when the server shuts down.
//! Four-letter words off `4lw.commands.whitelist` are refused in text, as ZooKeeper does.
//!
//! INV-3: a four-letter word's connection is closed only after the client's remaining input is
//! read (at most [`DRAIN_MAX`] bytes, [`DRAIN_WAIT`]): closing a socket with unread input makes
//! the kernel reset it, and the client may then drop the answer it had not read yet.
//!
//! Authentication (`auth`): each session's requests pass its [`SessionAuth`] gate in the
//! reader, in order, before they are spawned: an AUTH is answered there, a refusal is
//! answered there (and ends the session when `auth` says so).
//!
//! With `client.secure=true` every connection first completes a TLS handshake (`tls`); the
//! four-letter words then work over TLS too (`openssl s_client`), not over plain `nc`.
//!
//! BACKUP is the one request answered by a stream of frames (`backup`): its chunks go through
//! the same writer, flow-controlled by permits the writer releases once they are written.

mod backup;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::{debug, Instrument};
use zab_net::tls::{Stream, WriteHalf};

use super::auth::{Decision, Refusal, SessionAuth};
use super::metrics::RequestClass;
use super::order::{Turn, WriteOrder};
use super::session::RequestContext;
use super::stats::ConnStats;
use super::Shared;
use crate::protocol::{
    classify_start, decode_request, encode_frame, encode_response_bounded, refuse_unknown_word,
    refuse_unlisted_word, ConnectionStart, ErrorReply, FrameDecoder, Request, RequestBody,
    RequestKind, Response, Status, FORWARDED_BIT,
};
use backup::Answer;

/// Requests in flight per connection.
pub const IN_FLIGHT_MAX: usize = 1024;

/// Accepts connections until `stop` is cancelled.
pub async fn run_listener(shared: Arc<Shared>, listener: TcpListener, stop: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, peer)) => {
                let (shared, stop) = (shared.clone(), stop.clone());
                let span = tracing::debug_span!("client", %peer);
                tokio::spawn(
                    async move {
                        tokio::select! {
                            () = stop.cancelled() => {}
                            () = serve(shared, stream, peer) => {}
                        }
                    }
                    .instrument(span),
                );
            }
            Err(e) => {
                debug!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    }
}

async fn serve(shared: Arc<Shared>, tcp: TcpStream, peer: SocketAddr) {
    let _ = tcp.set_nodelay(true);
    let (mut stream, identity) = match &shared.cfg.client_tls {
        None => (Stream::Plain(tcp), None),
        Some(tls) => match tls.accept(tcp, peer).await {
            Some(accepted) => accepted,
            None => return shared.stats.tls_refused(),
        },
    };
    let mut first = [0u8; 4];
    if stream.read_exact(&mut first).await.is_err() {
        return;
    }
    match classify_start(first) {
        ConnectionStart::FourLetterWord(word) => {
            let text = if shared.cfg.four_letter_words.contains(&word) {
                shared.word_text(word).await
            } else {
                refuse_unlisted_word(word)
            };
            answer_and_close(stream, &text).await;
        }
        ConnectionStart::UnknownWord(word) => {
            answer_and_close(stream, &refuse_unknown_word(word)).await;
        }
        ConnectionStart::Frames => {
            let (id, conn) = shared.stats.open(peer.to_string(), identity);
            if let Some(who) = &conn.identity {
                debug!(identity = %who, "client authenticated by its TLS certificate");
            }
            session(&shared, stream, first, &conn, peer).await;
            shared.stats.close(id);
        }
    }
}

/// Most bytes read and dropped after a four-letter word's answer (INV-3).
const DRAIN_MAX: usize = 4096;
/// How long the rest of a four-letter word's input is waited for (INV-3).
const DRAIN_WAIT: Duration = Duration::from_secs(1);

/// Writes a four-letter word's answer, closes the sending side, then reads and drops what the
/// client sent after the word (`echo srvr | nc` sends a newline) until it closes too (INV-3).
async fn answer_and_close(mut stream: Stream, text: &str) {
    let _ = stream.write_all(text.as_bytes()).await;
    let _ = stream.shutdown().await;
    let drain = async {
        let mut rest = [0u8; 512];
        let mut drained = 0;
        while drained < DRAIN_MAX {
            match stream.read(&mut rest).await {
                Ok(0) | Err(_) => break,
                Ok(n) => drained += n,
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_WAIT, drain).await;
}

async fn session(
    shared: &Arc<Shared>,
    stream: Stream,
    first: [u8; 4],
    conn: &Arc<ConnStats>,
    peer: SocketAddr,
) {
    let mut auth = SessionAuth::new(&shared.cfg.auth, conn.identity.as_deref());
    let (mut reader, writer) = stream.into_split();
    let (tx, rx) = mpsc::unbounded_channel::<Answer>();
    let writing = tokio::spawn(write_answers(writer, rx));
    let slots = Arc::new(Semaphore::new(IN_FLIGHT_MAX));
    let order = WriteOrder::new();
    let decoder = FrameDecoder::default();
    let mut buf = BytesMut::with_capacity(4096);
    buf.extend_from_slice(&first);
    'session: loop {
        loop {
            let payload = match decoder.decode(&mut buf) {
                Ok(Some(p)) => p,
                Ok(None) => break,
                Err(e) => {
                    let _ = tx.send(Answer::plain(error_payload(
                        0,
                        RequestKind(0),
                        e.to_string(),
                    )));
                    break 'session;
                }
            };
            let received = Instant::now();
            let req = match decode_request(&payload) {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.send(Answer::plain(encode_response_bounded(&e.to_response())));
                    if e.request_id().is_none() {
                        break 'session;
                    }
                    continue;
                }
            };
            let gate = Gate::new(conn, peer, &tx);
            match gate.pass(shared, &mut auth, &req, received) {
                Passed::Run => {}
                Passed::Answered => continue,
                Passed::Close => break 'session,
            }
            let Ok(permit) = slots.clone().acquire_owned().await else {
                break 'session;
            };
            shared.stats.request(conn);
            let turn = is_write(&req.body).then(|| order.ticket());
            let task = Task {
                conn: conn.clone(),
                tx: tx.clone(),
                turn,
                permit,
            };
            spawn_answer(shared.clone(), req, received, task);
        }
        match reader.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    drop(tx);
    let _ = writing.await;
}

/// What a request's task holds besides the request: its connection's stats and answer queue,
/// its place in the connection's write order (writes only, `order`) and its in-flight slot.
struct Task {
    conn: Arc<ConnStats>,
    tx: mpsc::UnboundedSender<Answer>,
    turn: Option<Turn>,
    permit: OwnedSemaphorePermit,
}

/// Whether `body` takes a place in its connection's write order (`order` INV-4): catalog
/// writes do; a membership change is proposed by the node itself, not planned, and takes none.
fn is_write(body: &RequestBody) -> bool {
    matches!(body, RequestBody::Write(_))
}

/// Answers `req` in a task of its own, which holds its in-flight slot until it is answered.
fn spawn_answer(shared: Arc<Shared>, req: Request, received: Instant, task: Task) {
    tokio::spawn(
        async move {
            let Task {
                conn,
                tx,
                turn,
                permit,
            } = task;
            let started = Instant::now();
            let class = RequestClass::of(&req.body);
            let status = answer(&shared, req, received, turn, &tx).await;
            shared
                .stats
                .answered(&conn, class, status, started.elapsed());
            drop(permit);
        }
        .in_current_span(),
    );
}

/// What the authentication gate did with a request.
enum Passed {
    /// Run it.
    Run,
    /// The gate answered it; the session goes on.
    Answered,
    /// The gate answered it; the session ends.
    Close,
}

/// Where the authentication gate answers a request itself (`auth`).
struct Gate<'a> {
    conn: &'a Arc<ConnStats>,
    peer: SocketAddr,
    tx: &'a mpsc::UnboundedSender<Answer>,
}

impl<'a> Gate<'a> {
    fn new(
        conn: &'a Arc<ConnStats>,
        peer: SocketAddr,
        tx: &'a mpsc::UnboundedSender<Answer>,
    ) -> Gate<'a> {
        Gate { conn, peer, tx }
    }

    /// Passes `req` through the session's `auth` (an AUTH or a refusal is answered here).
    fn pass(
        &self,
        shared: &Shared,
        auth: &mut SessionAuth,
        req: &Request,
        received: Instant,
    ) -> Passed {
        match auth.decide(&req.body) {
            Decision::Run => Passed::Run,
            Decision::Answer {
                result,
                close,
                refusal,
            } => {
                self.answer(shared, req, received, result, refusal);
                if close {
                    Passed::Close
                } else {
                    Passed::Answered
                }
            }
        }
    }

    /// Answers `req` with `result`, counted like any request (and as a refusal, if it is one).
    fn answer(
        &self,
        shared: &Shared,
        req: &Request,
        received: Instant,
        result: Result<crate::protocol::ResponseBody, ErrorReply>,
        refusal: Option<Refusal>,
    ) {
        shared.stats.request(self.conn);
        let status = result.as_ref().err().map(|e| e.status);
        if let (Some(refusal), Err(e)) = (refusal, &result) {
            shared.auth_refused(refusal, self.peer, &e.message);
        }
        let resp = Response {
            id: req.id,
            kind: req.body.kind(),
            result,
        };
        let _ = self.tx.send(Answer::plain(encode_response_bounded(&resp)));
        let class = RequestClass::of(&req.body);
        shared
            .stats
            .answered(self.conn, class, status, received.elapsed());
    }
}

/// Answers `req` (received at `received`) into `tx`; the error status, if it failed.
async fn answer(
    shared: &Arc<Shared>,
    req: Request,
    received: Instant,
    turn: Option<Turn>,
    tx: &mpsc::UnboundedSender<Answer>,
) -> Option<Status> {
    if let RequestBody::Backup(opts) = req.body {
        return backup::stream(shared, req.id, opts, tx).await;
    }
    let forwarded = req.id & FORWARDED_BIT != 0;
    let ctx = RequestContext::new(received, &req.meta);
    let ctx = match turn {
        Some(turn) => ctx.in_turn(turn),
        None => ctx,
    };
    let result = shared.handle(&ctx, &req.body, forwarded).await;
    let status = result.as_ref().err().map(|e| e.status);
    let resp = Response {
        id: req.id,
        kind: req.body.kind(),
        result,
    };
    let _ = tx.send(Answer::plain(encode_response_bounded(&resp)));
    status
}

fn error_payload(id: u64, kind: RequestKind, message: String) -> Vec<u8> {
    encode_response_bounded(&Response {
        id,
        kind,
        result: Err(ErrorReply::new(Status::InvalidArgument, message)),
    })
}

/// Writes answers in the order queued, batching what is queued (up to about 1 MiB); a
/// backup chunk's permit is released once the batch holding it was written.
async fn write_answers(mut writer: WriteHalf, mut rx: mpsc::UnboundedReceiver<Answer>) {
    let mut out = Vec::new();
    let mut permits = Vec::new();
    while let Some(first) = rx.recv().await {
        out.clear();
        encode_frame(&first.payload, &mut out);
        permits.extend(first.permit);
        while out.len() <= 1 << 20 {
            let Ok(more) = rx.try_recv() else { break };
            encode_frame(&more.payload, &mut out);
            permits.extend(more.permit);
        }
        if writer.write_all(&out).await.is_err() {
            return;
        }
        permits.clear();
    }
    let _ = writer.shutdown().await;
}
