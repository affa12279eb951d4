//! A framed, pipelined session (`docs/PROTOCOL.md` §2): one task reads the client's frames,
//! runs its requests and writes their answers.
//!
//! The requests in flight are futures polled by the session's own task, not tasks of their
//! own, and their answers are written by that task too: a request costs no task spawn and no
//! hop to a writer task, which under many clients is a measurable share of the server's CPU
//! per write (docs/BENCHMARKS.md, "One task per connection"). One request runs in a slot of the
//! session's own future, the others in a `FuturesUnordered`: a client with one request at a
//! time (most of them) costs no allocation and no ready-queue bookkeeping per request. Answers
//! go out in the order they complete, batched: each write takes every answer encoded so far.
//!
//! Each catalog write takes a turn in the connection's write order as it is read (`order`), so
//! the writes are handed to the leader's planner in the order they were sent.
//!
//! INV-1 (bounded): at most [`IN_FLIGHT_MAX`] requests are in flight, and no more input is read
//! while [`UNWRITTEN_HIGH`] bytes of answers wait for a client that does not read them; what
//! was read and not yet admitted stays undecoded in the input buffer.
//! INV-2: reading, running requests and writing answers go on concurrently: answers are written
//! while later requests are read, within INV-1's bounds. A client that reads nothing until it
//! has sent its whole pipeline can therefore block on its own send (`docs/PROTOCOL.md` §2.1).
//! INV-3: the session ends when its input ended (the client closed it, or a frame ended it,
//! `conn` INV-1) and every request in flight was answered and written — or when writing to the
//! client failed: the requests in flight are then dropped, which passes their turns (`order`
//! INV-2) and settles their writes (a write handed on still commits; nobody is left to tell).
//! INV-4: no input crashes the server: a frame whose request id is readable but whose kind or
//! body is not gets an INVALID_ARGUMENT answer for that id and the session goes on; an
//! oversized length, a short header or a wrong version gets an error frame for id 0 and ends
//! the input (INV-3).
//!
//! Authentication (`auth`): each request passes the session's [`SessionAuth`] gate in read
//! order before it runs: an AUTH is answered there, a refusal is answered there (and ends the
//! input when `auth` says so). BACKUP streams its chunks (`backup`) through the session's
//! answer queue, flow-controlled by permits released once they are written.

use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use bytes::BytesMut;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, OwnedSemaphorePermit};
use zab_net::tls::Stream;

use super::super::auth::{Decision, Refusal, SessionAuth};
use super::super::metrics::RequestClass;
use super::super::order::{Turn, WriteOrder};
use super::super::session::RequestContext;
use super::super::stats::ConnStats;
use super::super::Shared;
use super::backup::{self, Answer};
use crate::protocol::{
    decode_request, encode_frame, encode_response_bounded, ErrorReply, FrameDecoder, Request,
    RequestBody, RequestKind, Response, ResponseBody, Status, FORWARDED_BIT,
};

/// Requests in flight per connection (INV-1).
pub const IN_FLIGHT_MAX: usize = 1024;
/// Bytes of unwritten answers above which no more input is read (INV-1).
pub const UNWRITTEN_HIGH: usize = 1 << 20;
/// Bytes of answer buffer an idle session keeps for its next answers.
const UNWRITTEN_KEPT: usize = 64 << 10;

/// Serves a framed session whose first four bytes, `first`, were already read.
pub async fn serve(
    shared: &Arc<Shared>,
    stream: Stream,
    first: [u8; 4],
    conn: &Arc<ConnStats>,
    peer: SocketAddr,
) {
    let (mut reader, mut writer) = stream.into_split();
    let mut intake = Intake::new(shared, conn, peer, first);
    let mut single = pin!(empty_slot(answer));
    let mut in_flight = FuturesUnordered::new();
    let mut out = Unwritten::default();
    loop {
        while in_flight.len() + usize::from(single.is_some()) < IN_FLIGHT_MAX {
            let Some(job) = intake.next_request() else {
                break;
            };
            let request = answer(shared.clone(), conn.clone(), job);
            if single.is_none() {
                single.set(Some(request));
            } else {
                in_flight.push(request);
            }
        }
        while let Ok(a) = intake.side.try_recv() {
            out.push(a);
        }
        let running = in_flight.len() + usize::from(single.is_some());
        if intake.ended && running == 0 && out.is_empty() {
            break;
        }
        let read_more = !intake.ended && running < IN_FLIGHT_MAX && out.len() < UNWRITTEN_HIGH;
        // In this order, so that every answer ready is encoded before the next write (one
        // write per batch, as one task per request and a writer task could not batch better).
        tokio::select! {
            biased;
            a = poll_fn(|cx| match single.as_mut().as_pin_mut() {
                Some(request) => request.poll(cx),
                None => Poll::Pending,
            }), if single.is_some() => {
                single.set(None);
                out.extend(a);
            }
            Some(a) = in_flight.next(), if !in_flight.is_empty() => out.extend(a),
            Some(a) = intake.side.recv() => out.push(a),
            n = writer.write(out.bytes()), if !out.is_empty() => match n {
                Ok(n) if n > 0 => out.wrote(n),
                _ => return,
            },
            n = reader.read_buf(&mut intake.input), if read_more => {
                if !matches!(n, Ok(k) if k > 0) {
                    intake.ended = true;
                }
            }
        }
    }
    let _ = writer.shutdown().await;
}

/// A request admitted to run: the request, when its frame was decoded, its place in the
/// connection's write order (catalog writes only), and the queue its streamed answers go to.
struct Job {
    req: Request,
    received: Instant,
    turn: Option<Turn>,
    side: mpsc::UnboundedSender<Answer>,
}

/// The session's reading side: the undecoded input, the frame decoder, the authentication
/// gate, the write order, and the queue for answers that are not a request's single return
/// value (the gate's, a bad frame's, BACKUP's chunks).
struct Intake<'a> {
    shared: &'a Shared,
    conn: &'a Arc<ConnStats>,
    peer: SocketAddr,
    input: BytesMut,
    decoder: FrameDecoder,
    auth: SessionAuth,
    order: Arc<WriteOrder>,
    side_tx: mpsc::UnboundedSender<Answer>,
    side: mpsc::UnboundedReceiver<Answer>,
    /// No more input is read or decoded (INV-3).
    ended: bool,
}

impl<'a> Intake<'a> {
    fn new(
        shared: &'a Shared,
        conn: &'a Arc<ConnStats>,
        peer: SocketAddr,
        first: [u8; 4],
    ) -> Intake<'a> {
        let mut input = BytesMut::with_capacity(4096);
        input.extend_from_slice(&first);
        let (side_tx, side) = mpsc::unbounded_channel();
        Intake {
            shared,
            conn,
            peer,
            input,
            decoder: FrameDecoder::default(),
            auth: SessionAuth::new(&shared.cfg.auth, conn.identity.as_deref()),
            order: WriteOrder::new(),
            side_tx,
            side,
            ended: false,
        }
    }

    /// The next request to run from the input decoded so far; `None` when a whole frame has
    /// not arrived yet or the input ended. Frames answered without running (bad ones, the
    /// gate's) are answered on the way.
    fn next_request(&mut self) -> Option<Job> {
        while !self.ended {
            let payload = match self.decoder.decode(&mut self.input) {
                Ok(Some(p)) => p,
                Ok(None) => return None,
                Err(e) => {
                    self.reply(error_payload(0, RequestKind(0), e.to_string()));
                    self.ended = true;
                    return None;
                }
            };
            let received = Instant::now();
            let req = match decode_request(&payload) {
                Ok(r) => r,
                Err(e) => {
                    self.reply(encode_response_bounded(&e.to_response()));
                    self.ended = e.request_id().is_none();
                    continue;
                }
            };
            match self.auth.decide(&req.body) {
                Decision::Run => {}
                Decision::Answer {
                    result,
                    close,
                    refusal,
                } => {
                    self.answer_here(&req, received, result, refusal);
                    self.ended = close;
                    continue;
                }
            }
            self.shared.stats.request(self.conn);
            let turn = is_write(&req.body).then(|| self.order.ticket());
            return Some(Job {
                req,
                received,
                turn,
                side: self.side_tx.clone(),
            });
        }
        None
    }

    fn reply(&self, payload: Vec<u8>) {
        // The receiver lives as long as `self`.
        let _ = self.side_tx.send(Answer::plain(payload));
    }

    /// Answers `req` with the gate's `result`, counted like any request (and as a refusal, if
    /// it is one).
    fn answer_here(
        &self,
        req: &Request,
        received: Instant,
        result: Result<ResponseBody, ErrorReply>,
        refusal: Option<Refusal>,
    ) {
        let shared = self.shared;
        shared.stats.request(self.conn);
        let status = result.as_ref().err().map(|e| e.status);
        if let (Some(refusal), Err(e)) = (refusal, &result) {
            shared.auth_refused(refusal, self.peer, &e.message);
        }
        let class = RequestClass::of(&req.body);
        self.reply(encode_response_bounded(&Response {
            id: req.id,
            kind: req.body.kind(),
            result,
        }));
        shared
            .stats
            .answered(self.conn, class, status, received.elapsed());
    }
}

/// An empty slot for one request's future: `answer` is an `async fn`, whose future type has no
/// name to write `Option<_>` with.
fn empty_slot<F: Future>(_: fn(Arc<Shared>, Arc<ConnStats>, Job) -> F) -> Option<F> {
    None
}

/// Whether `body` takes a place in its connection's write order (`order` INV-4): catalog
/// writes do; a membership change is proposed by the node itself, not planned, and takes none.
fn is_write(body: &RequestBody) -> bool {
    matches!(body, RequestBody::Write(_))
}

/// Runs `job` to its answer, counted in the connection's stats; `None` for BACKUP, whose
/// whole stream went to the side queue.
async fn answer(shared: Arc<Shared>, conn: Arc<ConnStats>, job: Job) -> Option<Answer> {
    let Job {
        req,
        received,
        turn,
        side,
    } = job;
    let started = Instant::now();
    let class = RequestClass::of(&req.body);
    let (id, kind) = (req.id, req.body.kind());
    let (status, reply) = if let RequestBody::Backup(opts) = req.body {
        (backup::stream(&shared, id, opts, &side).await, None)
    } else {
        let forwarded = id & FORWARDED_BIT != 0;
        let ctx = RequestContext::new(received, &req.meta);
        let ctx = match turn {
            Some(turn) => ctx.in_turn(turn),
            None => ctx,
        };
        let result = shared.handle(&ctx, &req.body, forwarded).await;
        let status = result.as_ref().err().map(|e| e.status);
        let payload = encode_response_bounded(&Response { id, kind, result });
        (status, Some(Answer::plain(payload)))
    };
    shared
        .stats
        .answered(&conn, class, status, started.elapsed());
    reply
}

fn error_payload(id: u64, kind: RequestKind, message: String) -> Vec<u8> {
    encode_response_bounded(&Response {
        id,
        kind,
        result: Err(ErrorReply::new(Status::InvalidArgument, message)),
    })
}

/// Answers encoded and not yet written, and the permits of the backup chunks among them
/// (released once everything queued so far was written).
#[derive(Default)]
struct Unwritten {
    buf: Vec<u8>,
    written: usize,
    permits: Vec<OwnedSemaphorePermit>,
}

impl Unwritten {
    fn extend(&mut self, a: Option<Answer>) {
        if let Some(a) = a {
            self.push(a);
        }
    }

    fn push(&mut self, a: Answer) {
        encode_frame(&a.payload, &mut self.buf);
        self.permits.extend(a.permit);
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[self.written..]
    }

    fn len(&self) -> usize {
        self.buf.len() - self.written
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `n` more bytes were written.
    fn wrote(&mut self, n: usize) {
        self.written += n;
        if self.written == self.buf.len() {
            self.buf.clear();
            self.buf.shrink_to(UNWRITTEN_KEPT);
            self.written = 0;
            self.permits.clear();
        } else if self.written >= UNWRITTEN_HIGH {
            self.buf.drain(..self.written);
            self.written = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::sync::Semaphore;

    use super::*;

    fn framed(payloads: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in payloads {
            encode_frame(p, &mut out);
        }
        out
    }

    #[test]
    fn partial_writes_leave_the_rest_and_a_full_one_releases_the_permits() {
        let slots = Arc::new(Semaphore::new(2));
        let mut out = Unwritten::default();
        let payloads = [vec![1u8; 10], vec![2u8; 20], vec![3u8; 30]];
        out.push(Answer::plain(payloads[0].clone()));
        for p in &payloads[1..] {
            let permit = slots.clone().try_acquire_owned().ok();
            out.push(Answer {
                payload: p.clone(),
                permit,
            });
        }
        let all = framed(&payloads);
        assert_eq!(out.bytes(), &all[..]);
        out.wrote(17);
        assert_eq!(out.bytes(), &all[17..]);
        assert_eq!(
            slots.available_permits(),
            0,
            "held until everything is written"
        );
        out.wrote(all.len() - 17);
        assert!(out.is_empty());
        assert_eq!(slots.available_permits(), 2);
    }

    #[test]
    fn a_backlog_past_the_mark_is_compacted_and_still_written_in_order() {
        let slots = Arc::new(Semaphore::new(1));
        let mut out = Unwritten::default();
        let payloads: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; UNWRITTEN_HIGH / 3]).collect();
        for (i, p) in payloads.iter().enumerate() {
            let permit = (i == 0)
                .then(|| slots.clone().try_acquire_owned().ok())
                .flatten();
            out.push(Answer {
                payload: p.clone(),
                permit,
            });
        }
        let all = framed(&payloads);
        let first = UNWRITTEN_HIGH + 100;
        out.wrote(first);
        assert_eq!(out.written, 0, "the written part was dropped");
        assert_eq!(out.bytes(), &all[first..]);
        assert_eq!(out.len(), all.len() - first);
        assert_eq!(slots.available_permits(), 0);
        out.wrote(all.len() - first);
        assert!(out.is_empty());
        assert_eq!(slots.available_permits(), 1);
        assert!(
            out.buf.capacity() <= UNWRITTEN_KEPT,
            "an idle session keeps little"
        );
    }
}
