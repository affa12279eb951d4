//! Node-to-node calls over the client protocol: forwarded writes to the leader and STATUS
//! queries for SHOW FRONTENDS. One multiplexed connection per address (requests matched by id,
//! any number in flight), re-dialled when it breaks.
//!
//! INV-1: every call ends within twice its timeout (dial; write and answer); a broken
//! connection fails every call waiting on it at once. A dial failure ([`CallError::Connect`])
//! means the request was not sent.
//! INV-2: forwarded requests carry [`FORWARDED_BIT`] in their id; a node never forwards such a
//! request again, so a write is forwarded at most once (no NOT_LEADER loops, PITFALLS E12).

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
    decode_response, encode_frame, encode_request, FrameDecoder, Request, RequestBody, Response,
};

/// The request-id bit that marks a request forwarded by another node (INV-2).
pub const FORWARDED_BIT: u64 = 1 << 63;

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Response>>>>;

#[derive(Debug)]
struct PeerConn {
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    pending: Pending,
    closed: Arc<AtomicBool>,
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
    /// Sends `body` to the node at `addr` (a forwarded request: INV-2) and waits for the answer,
    /// at most `limit` in all (INV-1). The error says what failed.
    pub async fn call(
        &self,
        addr: &str,
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
        match tokio::time::timeout(limit, Self::exchange(&conn, addr, &self.next_id, body)).await {
            Ok(r) => r.map_err(CallError::Unanswered),
            Err(_) => Err(CallError::Unanswered(format!(
                "no answer from {addr} within {limit:?}"
            ))),
        }
    }

    async fn exchange(
        conn: &PeerConn,
        addr: &str,
        next_id: &AtomicU64,
        body: RequestBody,
    ) -> Result<Response, String> {
        let id = FORWARDED_BIT | (next_id.fetch_add(1, Ordering::Relaxed) & !FORWARDED_BIT);
        let (tx, rx) = oneshot::channel();
        lock(&conn.pending).insert(id, tx);
        let mut frame = Vec::new();
        encode_frame(&encode_request(&Request { id, body }), &mut frame);
        let written = conn.writer.lock().await.write_all(&frame).await;
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
        let (mut reader, writer) = stream.into_split();
        let conn = Arc::new(PeerConn {
            writer: tokio::sync::Mutex::new(writer),
            pending: Pending::default(),
            closed: Arc::new(AtomicBool::new(false)),
        });
        let (pending, closed, peer) = (conn.pending.clone(), conn.closed.clone(), addr.to_owned());
        tokio::spawn(async move {
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
        lock(&self.conns).insert(addr.to_owned(), conn.clone());
        Ok(conn)
    }
}
