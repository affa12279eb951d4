//! Per-peer outgoing FIFOs of the driver: plain messages, and *streams* (a DIFF range read from
//! the on-disk log, a SNAP produced from a state machine view) that may be far larger than a
//! link's outbox.
//!
//! A stream runs as a task: a producer on a blocking thread (reading the log, or serialising
//! the snapshot into `SnapChunk`s) feeds a small bounded channel; the task forwards it with
//! the transport's flow-controlled [`PeerSender`], so memory stays bounded (one chunk in the
//! writer, a few in the channel, the outbox) whatever the stream's size. While a stream to X
//! runs, every later message to X waits in X's queue and is sent when it ends.
//!
//! INV-1: the quorum messages to one peer leave in exactly the order the core emitted them
//! (io.rs: FIFO per link, including after `SendLogRange` / `SendSnapshot`).
//! INV-2: nothing queued for a connection leaks onto a later one: a lost connection, a
//! `Disconnect` or a failed send clears the peer's queue and aborts its stream; after a failed
//! send the peer is *muted* (its messages dropped) until the transport's `ConnectionLost` for
//! it is fed to the core, or `MUTE_MAX` passes and the driver feeds one itself.
//! INV-3: every stream wait is bounded by `stall` (no progress → the stream fails, the peer
//! is disconnected).
//! INV-4: after the core's `Disconnect` of an established connection, messages to that peer
//! wait until the transport reports the connection's end (or `MUTE_MAX` passes), so none is
//! written into the outbox being discarded; that `ConnectionLost` is not fed to the core,
//! which already dropped the connection (it would otherwise end a newer session with the
//! same peer).

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Write};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio::time::{timeout, Instant};
use tracing::{debug, warn, Instrument};
use zab_core::{Message, ServerId, Zxid};
use zab_store::LogReader;

use super::api::SnapshotSource;
use crate::transport::{Channel, PeerSender, SendError, Transport};

/// How long a peer stays muted without the transport reporting its loss.
pub(super) const MUTE_MAX: Duration = Duration::from_secs(3);

/// Batches buffered between a stream's producer and its sender task (a SNAP chunk is a batch
/// of one; a DIFF batch holds `RANGE_BATCH` records).
const STREAM_BUFFER: usize = 4;

/// Most stream messages waiting in a link's outbox: SNAP chunks (up to `chunk_bytes` each)
/// and log records. With the producer's buffer this bounds a stream's memory to about
/// `(STREAM_BUFFER + SNAP_QUEUED) × chunk_bytes` whatever the snapshot's size.
const SNAP_QUEUED: usize = 4;
const RANGE_QUEUED: usize = 1024;

/// A stream the core asked for.
pub(super) enum Stream {
    /// Proposal + Commit for every logged txn in `(after, upto]`.
    Range {
        /// Exclusive lower bound.
        after: Zxid,
        /// Inclusive upper bound.
        upto: Zxid,
    },
    /// `Snap { zxid }` then the view's bytes as `SnapChunk`s.
    Snapshot {
        /// The view's zxid.
        zxid: Zxid,
        /// The view.
        source: Box<dyn SnapshotSource>,
    },
}

enum Item {
    Msg(Message),
    Stream(Stream),
}

#[derive(Default)]
struct PeerOut {
    stream: Option<(u64, AbortHandle)>,
    queue: VecDeque<Item>,
    muted_since: Option<Instant>,
    /// The core closed the connection; messages wait until the transport reports its end.
    closing_since: Option<Instant>,
}

impl PeerOut {
    fn clear(&mut self) {
        if let Some((_, h)) = self.stream.take() {
            h.abort();
        }
        self.queue.clear();
    }
}

/// A stream task's end.
pub(super) struct StreamDone {
    to: ServerId,
    id: u64,
    result: Result<(), String>,
}

/// The per-peer queues (see the module docs).
pub(super) struct OutQueues {
    peers: BTreeMap<ServerId, PeerOut>,
    next_id: u64,
    done_tx: mpsc::UnboundedSender<StreamDone>,
    reader: LogReader,
    chunk_bytes: usize,
    stall: Duration,
}

impl OutQueues {
    pub(super) fn new(
        reader: LogReader,
        chunk_bytes: usize,
        stall: Duration,
    ) -> (OutQueues, mpsc::UnboundedReceiver<StreamDone>) {
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        let q = OutQueues {
            peers: BTreeMap::new(),
            next_id: 0,
            done_tx,
            reader,
            chunk_bytes: chunk_bytes.max(1),
            stall,
        };
        (q, done_rx)
    }

    /// Sends (or queues behind a stream) one message (INV-1).
    pub(super) fn send(&mut self, t: &Transport, to: ServerId, msg: Message) {
        if Channel::of(&msg) == Channel::Election {
            if let Err(e) = t.send(to, msg) {
                debug!(peer = to.0, error = %e, "election message dropped");
            }
            return;
        }
        let p = self.peers.entry(to).or_default();
        if p.muted_since.is_some() {
            return;
        }
        if p.stream.is_some() || p.closing_since.is_some() {
            p.queue.push_back(Item::Msg(msg));
            return;
        }
        if let Err(e) = t.send(to, msg) {
            self.sever(t, to, &e.to_string());
        }
    }

    /// Starts (or queues) a stream to `to`.
    pub(super) fn stream(&mut self, t: &Transport, to: ServerId, s: Stream) {
        let p = self.peers.entry(to).or_default();
        if p.muted_since.is_some() {
            return;
        }
        if p.stream.is_some() || p.closing_since.is_some() {
            p.queue.push_back(Item::Stream(s));
            return;
        }
        self.start(t, to, s);
    }

    /// The transport lost the quorum connection to `peer`: its queue is void; unmute.
    ///
    /// Returns true when the loss is the end of a connection the core itself closed
    /// (`Disconnect`, INV-4): the core already forgot it and must not hear of it again, and
    /// what it sent since goes out now, on the next connection.
    pub(super) fn connection_lost(&mut self, t: &Transport, peer: ServerId) -> bool {
        let Some(p) = self.peers.get_mut(&peer) else {
            return false;
        };
        if p.closing_since.take().is_some() {
            self.pump(t, peer);
            return true;
        }
        p.clear();
        p.muted_since = None;
        false
    }

    /// The core closed the connection to `peer` (INV-4).
    pub(super) fn disconnect(&mut self, t: &Transport, peer: ServerId) {
        let p = self.peers.entry(peer).or_default();
        p.clear();
        if p.muted_since.is_none() && t.is_connected(peer, Channel::Quorum) {
            p.closing_since = Some(Instant::now());
        }
        t.disconnect_channel(peer, Channel::Quorum);
    }

    /// Peers muted longer than `MUTE_MAX` (unmuted now; the caller tells the core). Closings
    /// that did not end within `MUTE_MAX` stop holding messages back.
    pub(super) fn expired_mutes(&mut self, t: &Transport) -> Vec<ServerId> {
        let mut out = Vec::new();
        let mut closed = Vec::new();
        for (sid, p) in &mut self.peers {
            if p.muted_since.is_some_and(|t| t.elapsed() >= MUTE_MAX) {
                p.muted_since = None;
                out.push(*sid);
            }
            if p.closing_since.is_some_and(|t| t.elapsed() >= MUTE_MAX) {
                p.closing_since = None;
                closed.push(*sid);
            }
        }
        for sid in closed {
            self.pump(t, sid);
        }
        out
    }

    /// Aborts every stream (shutdown).
    pub(super) fn abort_all(&mut self) {
        for p in self.peers.values_mut() {
            p.clear();
        }
    }

    /// A stream ended: on success send what waited behind it (INV-1), else sever (INV-2).
    pub(super) fn on_done(&mut self, t: &Transport, done: StreamDone) {
        let Some(p) = self.peers.get_mut(&done.to) else {
            return;
        };
        if p.stream.as_ref().map(|s| s.0) != Some(done.id) {
            return;
        }
        p.stream = None;
        match done.result {
            Ok(()) => self.pump(t, done.to),
            Err(e) => self.sever(t, done.to, &e),
        }
    }

    fn pump(&mut self, t: &Transport, to: ServerId) {
        // Bounded by the queue's length.
        loop {
            let Some(item) = self.peers.get_mut(&to).and_then(|p| p.queue.pop_front()) else {
                return;
            };
            match item {
                Item::Msg(m) => {
                    if let Err(e) = t.send(to, m) {
                        self.sever(t, to, &e.to_string());
                        return;
                    }
                }
                Item::Stream(s) => {
                    self.start(t, to, s);
                    return;
                }
            }
        }
    }

    fn sever(&mut self, t: &Transport, to: ServerId, why: &str) {
        warn!(
            peer = to.0,
            error = why,
            "send to peer failed; dropping its connection"
        );
        let p = self.peers.entry(to).or_default();
        p.clear();
        p.muted_since = Some(Instant::now());
        t.disconnect_channel(to, Channel::Quorum);
    }

    fn start(&mut self, t: &Transport, to: ServerId, s: Stream) {
        let sender = match t.peer_sender(to, Channel::Quorum) {
            Ok(sender) => sender,
            Err(e) => return self.sever(t, to, &e.to_string()),
        };
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        let max_queued = match s {
            Stream::Range { .. } => RANGE_QUEUED,
            Stream::Snapshot { .. } => SNAP_QUEUED,
        };
        match s {
            Stream::Range { after, upto } => {
                let reader = self.reader.clone();
                tokio::task::spawn_blocking(move || produce_range(&reader, after, upto, &tx));
            }
            Stream::Snapshot { zxid, source } => {
                let chunk = self.chunk_bytes;
                tokio::task::spawn_blocking(move || produce_snapshot(zxid, source, chunk, tx));
            }
        }
        self.next_id += 1;
        let id = self.next_id;
        let done_tx = self.done_tx.clone();
        let stall = self.stall;
        let task = tokio::spawn(
            async move {
                let result = forward(sender, rx, stall, max_queued).await;
                let _ = done_tx.send(StreamDone { to, id, result });
            }
            .in_current_span(),
        );
        self.peers.entry(to).or_default().stream = Some((id, task.abort_handle()));
    }
}

/// Forwards a producer's messages with flow control (INV-3).
async fn forward(
    sender: PeerSender,
    mut rx: mpsc::Receiver<Result<Vec<Message>, String>>,
    stall: Duration,
    max_queued: usize,
) -> Result<(), String> {
    // Bounded by the producer: it ends, fails, or stalls.
    loop {
        let next = timeout(stall, rx.recv())
            .await
            .map_err(|_| format!("stream producer made no progress in {stall:?}"))?;
        let Some(item) = next else {
            return Ok(());
        };
        for msg in item? {
            timeout(stall, sender.send_within(msg, max_queued))
                .await
                .map_err(|_| format!("peer read nothing for {stall:?}"))?
                .map_err(|e: SendError| e.to_string())?;
        }
    }
}

/// A stream's messages travel from the producer thread in batches: one hand-off (and at most
/// one wake-up of each side) per batch rather than per message.
type Tx = mpsc::Sender<Result<Vec<Message>, String>>;

/// Log records per batch of a DIFF stream (two messages each).
const RANGE_BATCH: usize = 128;

fn produce_range(reader: &LogReader, after: Zxid, upto: Zxid, tx: &Tx) {
    let fail = |e: String| {
        let _ = tx.blocking_send(Err(e));
    };
    let iter = match reader.iter(after, upto) {
        Ok(it) => it,
        Err(e) => return fail(format!("DIFF from the log: {e}")),
    };
    let mut expected_last = after;
    let mut batch = Vec::with_capacity(2 * RANGE_BATCH);
    for r in iter {
        match r {
            Ok(txn) => {
                let zxid = txn.zxid;
                expected_last = zxid;
                batch.push(Message::Proposal(txn));
                batch.push(Message::Commit { zxid });
                if batch.len() >= 2 * RANGE_BATCH {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(2 * RANGE_BATCH));
                    if tx.blocking_send(Ok(full)).is_err() {
                        return;
                    }
                }
            }
            Err(e) => return fail(format!("DIFF from the log: {e}")),
        }
    }
    if !batch.is_empty() && tx.blocking_send(Ok(batch)).is_err() {
        return;
    }
    if expected_last != upto && upto > after {
        fail(format!(
            "DIFF from the log ended at {expected_last}, expected {upto}"
        ));
    }
}

fn produce_snapshot(zxid: Zxid, source: Box<dyn SnapshotSource>, chunk: usize, tx: Tx) {
    if tx.blocking_send(Ok(vec![Message::Snap { zxid }])).is_err() {
        return;
    }
    let mut w = ChunkWriter {
        tx,
        buf: Vec::with_capacity(chunk),
        chunk,
    };
    match source.write_to(&mut w) {
        Ok(()) => {
            let data = Bytes::from(std::mem::take(&mut w.buf));
            let last = Message::SnapChunk { data, last: true };
            let _ = w.tx.blocking_send(Ok(vec![last]));
        }
        Err(e) => {
            let _ =
                w.tx.blocking_send(Err(format!("writing the snapshot at {zxid}: {e}")));
        }
    }
}

/// Cuts the snapshot's bytes into `SnapChunk`s of `chunk` bytes (never the whole snapshot).
struct ChunkWriter {
    tx: Tx,
    buf: Vec<u8>,
    chunk: usize,
}

impl Write for ChunkWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(self.chunk - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() >= self.chunk {
            let full = std::mem::replace(&mut self.buf, Vec::with_capacity(self.chunk));
            let msg = Message::SnapChunk {
                data: Bytes::from(full),
                last: false,
            };
            self.tx
                .blocking_send(Ok(vec![msg]))
                .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "stream abandoned"))?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
