//! The connection core under [`super::Client`]: the dial, the table of calls waiting for an
//! answer, and the reader and writer tasks that own the socket's two halves.
//!
//! ```text
//! call ─waiter(id)─▶ Waiters ◀─deliver(id)── reader task ◀─TCP─ node
//! call ─frame─▶ queue ─▶ writer task (gathers queued frames into one write) ─TCP─▶ node
//! ```
//!
//! INV-1: once the connection is closed (lost, or discarded) every waiting call fails with
//! the first reason, and so does every later call; a waiter is registered only while open.
//! INV-2: a waiter leaves the table when its call ends, however it ends ([`WaiterGuard`]).
//! INV-3: the socket lives only in the two tasks: aborting both closes it (a reset, and the
//! kernel drops unsent bytes, when it was dialled with SO_LINGER 0).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use zab_net::tls::{ReadHalf, WriteHalf};

use super::ClientError;
use crate::protocol::{decode_response, FrameDecoder, Response};

/// Frames queued to the writer task before a call waits (back-pressure).
pub(super) const WRITE_QUEUE: usize = 1024;
/// Bytes the writer gathers from queued frames into one write.
const WRITE_BATCH: usize = 256 * 1024;

type Waiter = oneshot::Sender<Result<Response, ClientError>>;

/// Calls in flight and the connection's fate.
#[derive(Default)]
struct Waiters {
    by_id: HashMap<u64, Waiter>,
    /// Set once the connection is closed; every later call fails with it.
    closed: Option<ClientError>,
}

/// What the caller side and the reader/writer tasks share.
pub(super) struct Shared {
    pub(super) addr: String,
    waiters: Mutex<Waiters>,
}

impl Shared {
    pub(super) fn new(addr: &str) -> Shared {
        Shared {
            addr: addr.to_owned(),
            waiters: Mutex::new(Waiters::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Waiters> {
        // A poisoned lock only means a holder panicked between two plain map operations.
        self.waiters.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the connection is closed (INV-1).
    pub(super) fn is_closed(&self) -> bool {
        self.lock().closed.is_some()
    }

    /// Registers the waiter of call `id`, unless the connection is closed (INV-1).
    pub(super) fn register(
        &self,
        id: u64,
    ) -> Result<
        (
            WaiterGuard<'_>,
            oneshot::Receiver<Result<Response, ClientError>>,
        ),
        ClientError,
    > {
        let (tx, rx) = oneshot::channel();
        let mut w = self.lock();
        if let Some(e) = &w.closed {
            return Err(e.clone());
        }
        w.by_id.insert(id, tx);
        Ok((WaiterGuard { shared: self, id }, rx))
    }

    /// Marks the connection closed and fails every call in flight with `err` (first reason
    /// wins).
    pub(super) fn close(&self, err: ClientError) {
        let mut w = self.lock();
        let err = w.closed.get_or_insert(err).clone();
        for (_, waiter) in w.by_id.drain() {
            let _ = waiter.send(Err(err.clone()));
        }
    }

    /// The error of a closed connection, with `reason`.
    pub(super) fn closed(&self, reason: impl Into<String>) -> ClientError {
        ClientError::Closed {
            addr: self.addr.clone(),
            reason: reason.into(),
        }
    }

    /// Hands one response payload to its waiter. Returns `false` when the connection cannot
    /// go on (the server answered for request id 0, or the id cannot be read).
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
                if let Some(w) = self.lock().by_id.remove(&resp.id) {
                    let _ = w.send(Ok(resp));
                } else {
                    tracing::debug!(id = resp.id, "answer for a call that already ended");
                }
                true
            }
            Err(e) => match e.request_id() {
                Some(id) => {
                    if let Some(w) = self.lock().by_id.remove(&id) {
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
pub(super) struct WaiterGuard<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        self.shared.lock().by_id.remove(&self.id);
    }
}

/// Dials `addr` within `timeout`; with `zero_linger`, closing the socket resets it and drops
/// unsent bytes (no FIN after them). Every failure is a [`ClientError::Connect`].
pub(super) async fn dial(
    addr: &str,
    timeout: Duration,
    zero_linger: bool,
) -> Result<TcpStream, ClientError> {
    let err = |reason: String| ClientError::Connect {
        addr: addr.to_owned(),
        reason,
    };
    let stream = match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
        Err(_) => return Err(err(format!("timed out after {timeout:?}"))),
        Ok(Err(e)) => return Err(err(e.to_string())),
        Ok(Ok(s)) => s,
    };
    stream.set_nodelay(true).map_err(|e| err(e.to_string()))?;
    if zero_linger {
        stream
            .set_zero_linger()
            .map_err(|e| err(format!("SO_LINGER: {e}")))?;
    }
    Ok(stream)
}

/// Reads answers and hands them to their waiters until the connection ends.
pub(super) async fn read_loop(mut rd: ReadHalf, shared: Arc<Shared>) {
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
            Err(e) if looks_like_tls(&buf) => {
                break shared.closed(format!(
                    "bad frame from the server ({e}): it answers in TLS (client.secure=true \
                     there); connect with TLS (--tls-ca, FE_META_TLS_CA)"
                ))
            }
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

/// Whether `buf` starts like a TLS record (an alert or a handshake, TLS 1.0-1.3): what a TLS
/// server sends a client that spoke plain TCP to it.
fn looks_like_tls(buf: &[u8]) -> bool {
    matches!(buf, [0x15 | 0x16, 0x03, 0x01..=0x04, ..])
}

/// The write half, which closes with the socket only: dropped (the writer task aborted), it
/// does not shut the socket's write side down first, so a socket with SO_LINGER 0 is reset at
/// once instead of sending a FIN before the reset (INV-3). (A TLS half never shuts down on
/// drop.)
struct QuietWrite(Option<WriteHalf>);

impl Drop for QuietWrite {
    fn drop(&mut self) {
        if let Some(WriteHalf::Plain(wr)) = self.0.take() {
            wr.forget();
        }
    }
}

/// Writes queued frames, gathering what is queued into one write, until the queue closes.
pub(super) async fn write_loop(
    wr: WriteHalf,
    mut queue: mpsc::Receiver<Vec<u8>>,
    shared: Arc<Shared>,
) {
    let mut half = QuietWrite(Some(wr));
    let Some(wr) = half.0.as_mut() else {
        return;
    };
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
