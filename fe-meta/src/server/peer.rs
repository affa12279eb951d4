//! Node-to-node calls over the client protocol: forwarded writes to the leader and STATUS
//! queries for SHOW FRONTENDS. One multiplexed connection per address (requests matched by id,
//! any number in flight), re-dialled when it breaks.
//!
//! INV-1: every call ends within twice its timeout (dial; write and answer); a broken
//! connection fails every call waiting on it at once. A dial failure ([`CallError::Connect`])
//! means the request was not sent.
//! INV-2: forwarded requests carry [`FORWARDED_BIT`] in their id; a node never forwards such a
//! request again, so a write is forwarded at most once (no NOT_LEADER loops, PITFALLS E12).
//! INV-3 (no late delivery): a call that times out after its bytes may have been queued
//! discards its connection at once: the pool forgets it, its reader stops, the calls waiting
//! on it fail, and the socket (SO_LINGER 0) is reset when its last user lets go, so the kernel
//! drops whatever it had not delivered yet instead of sending it after a partition heals.
//! Bytes the peer already received are fenced there by the request's deadline and session.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tracing::debug;

use crate::protocol::{
    decode_response, encode_frame, encode_request, FrameDecoder, Request, RequestBody, RequestMeta,
    Response,
};

/// The request-id bit that marks a request forwarded by another node (INV-2).
pub const FORWARDED_BIT: u64 = 1 << 63;

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Response>>>>;

#[derive(Debug)]
struct PeerConn {
    writer: tokio::sync::Mutex<Option<OwnedWriteHalf>>,
    pending: Pending,
    closed: Arc<AtomicBool>,
    reader: tokio::task::AbortHandle,
}

impl PeerConn {
    /// Discards the connection (INV-3): no new call uses it, the reader stops, waiting calls
    /// fail, and the write half is dropped now if no call is writing (else when that call
    /// ends); with SO_LINGER 0 the last drop resets the socket and its unsent bytes die.
    fn discard(&self) {
        self.closed.store(true, Ordering::Release);
        self.reader.abort();
        lock(&self.pending).clear();
        if let Ok(mut w) = self.writer.try_lock() {
            w.take();
        }
    }
}

/// Why a call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallError {
    /// No connection could be made: the request was not sent (safe to send elsewhere).
    Connect(String),
    /// Sent (or possibly sent) but not answered: the outcome is unknown.
    Unanswered(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Connect(m) | CallError::Unanswered(m) => f.write_str(m),
        }
    }
}

/// The pool of connections to other nodes.
#[derive(Debug, Default)]
pub struct PeerPool {
    conns: Mutex<HashMap<String, Arc<PeerConn>>>,
    next_id: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl PeerPool {
    /// Sends `body` with `meta` to the node at `addr` (a forwarded request: INV-2) and waits for
    /// the answer, at most `limit` in all (INV-1); on a timeout the connection is discarded
    /// (INV-3). The error says what failed.
    pub async fn call(
        &self,
        addr: &str,
        meta: RequestMeta,
        body: RequestBody,
        limit: Duration,
    ) -> Result<Response, CallError> {
        let conn = match tokio::time::timeout(limit, self.conn(addr)).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(CallError::Connect(e)),
            Err(_) => {
                return Err(CallError::Connect(format!(
                    "connecting to {addr}: timed out"
                )))
            }
        };
        let exchange = Self::exchange(&conn, addr, &self.next_id, meta, body);
        match tokio::time::timeout(limit, exchange).await {
            Ok(r) => r.map_err(CallError::Unanswered),
            Err(_) => {
                self.forget(addr, &conn);
                conn.discard();
                Err(CallError::Unanswered(format!(
                    "no answer from {addr} within {limit:?} (connection discarded, so the \
                     request is not delivered later)"
                )))
            }
        }
    }

    fn forget(&self, addr: &str, conn: &Arc<PeerConn>) {
        let mut conns = lock(&self.conns);
        if conns.get(addr).is_some_and(|c| Arc::ptr_eq(c, conn)) {
            conns.remove(addr);
        }
    }

    async fn exchange(
        conn: &PeerConn,
        addr: &str,
        next_id: &AtomicU64,
        meta: RequestMeta,
        body: RequestBody,
    ) -> Result<Response, String> {
        let id = FORWARDED_BIT | (next_id.fetch_add(1, Ordering::Relaxed) & !FORWARDED_BIT);
        let (tx, rx) = oneshot::channel();
        lock(&conn.pending).insert(id, tx);
        let mut frame = Vec::new();
        encode_frame(&encode_request(&Request { id, meta, body }), &mut frame);
        let written = match conn.writer.lock().await.as_mut() {
            Some(w) => w.write_all(&frame).await,
            None => Err(std::io::Error::other("the connection was discarded")),
        };
        if let Err(e) = written {
            lock(&conn.pending).remove(&id);
            conn.closed.store(true, Ordering::Release);
            return Err(format!("sending to {addr}: {e}"));
        }
        let answer = rx.await;
        lock(&conn.pending).remove(&id);
        answer.map_err(|_| format!("connection to {addr} closed before the answer"))
    }

    async fn conn(&self, addr: &str) -> Result<Arc<PeerConn>, String> {
        if let Some(c) = lock(&self.conns).get(addr) {
            if !c.closed.load(Ordering::Acquire) {
                return Ok(c.clone());
            }
        }
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connecting to {addr}: {e}"))?;
        let _ = stream.set_nodelay(true);
        // INV-3: closing resets the connection and drops unsent bytes (no FIN after them).
        stream
            .set_zero_linger()
            .map_err(|e| format!("connecting to {addr}: SO_LINGER: {e}"))?;
        let (mut reader, writer) = stream.into_split();
        let pending = Pending::default();
        let closed = Arc::new(AtomicBool::new(false));
        let (for_reader, closed_by_reader) = (pending.clone(), closed.clone());
        let peer = addr.to_owned();
        let read_task = tokio::spawn(async move {
            let (pending, closed) = (for_reader, closed_by_reader);
            let decoder = FrameDecoder::default();
            let mut buf = BytesMut::with_capacity(4096);
            'read: loop {
                match reader.read_buf(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                loop {
                    match decoder.decode(&mut buf) {
                        Ok(Some(payload)) => match decode_response(&payload) {
                            Ok(resp) => {
                                if let Some(tx) = lock(&pending).remove(&resp.id) {
                                    let _ = tx.send(resp);
                                }
                            }
                            Err(e) => {
                                debug!(peer, error = %e, "undecodable answer from a peer");
                                break 'read;
                            }
                        },
                        Ok(None) => break,
                        Err(_) => break 'read,
                    }
                }
            }
            closed.store(true, Ordering::Release);
            lock(&pending).clear();
        });
        let conn = Arc::new(PeerConn {
            writer: tokio::sync::Mutex::new(Some(writer)),
            pending,
            closed,
            reader: read_task.abort_handle(),
        });
        lock(&self.conns).insert(addr.to_owned(), conn.clone());
        Ok(conn)
    }
}
