//! The streams of `out`: a DIFF range read from the on-disk log, a SNAP produced from a state
//! machine view. A producer on a blocking thread feeds a small bounded channel in batches; a
//! task forwards the batches with the transport's flow-controlled [`PeerSender`].
//!
//! INV-1: memory stays bounded whatever the stream's size: at most `STREAM_BUFFER` batches in
//! the channel, the link's outbox bounded by the stream's `max_queued`, a SNAP cut into chunks
//! of `chunk` bytes (never the whole snapshot in memory).
//! INV-2: every wait is bounded by `stall` (no progress → [`StreamError`]).
//! INV-3: a DIFF stream that ends before the zxid it was asked for fails
//! ([`StreamError::RangeShort`]): a learner never gets a silently shortened DIFF.

use std::io::{self, Write};
use std::time::Duration;

use bytes::Bytes;
use thiserror::Error;
use tokio::sync::mpsc;
use tokio::time::timeout;
use zab_core::{Membership, Message, Zxid};
use zab_store::{LogReader, StoreError};

use super::api::SnapshotSource;
use crate::transport::{PeerSender, SendError};

/// Batches buffered between a stream's producer and its sender task (a SNAP chunk is a batch
/// of one; a DIFF batch holds `RANGE_BATCH` records).
pub(super) const STREAM_BUFFER: usize = 4;

/// Log records per batch of a DIFF stream (two messages each).
const RANGE_BATCH: usize = 128;

/// Why a stream to a peer failed (the peer is then disconnected).
#[derive(Debug, Error)]
pub(super) enum StreamError {
    /// The producer sent nothing for `stall`.
    #[error("stream producer made no progress in {0:?}")]
    ProducerStalled(Duration),
    /// The peer's link took nothing for `stall`.
    #[error("peer read nothing for {0:?}")]
    PeerStalled(Duration),
    /// The transport refused a message.
    #[error(transparent)]
    Send(#[from] SendError),
    /// Reading the on-disk log for a DIFF failed.
    #[error("DIFF from the log: {0}")]
    RangeRead(#[source] StoreError),
    /// The on-disk log ended before the DIFF's last zxid (INV-3).
    #[error("DIFF from the log ended at {ended}, expected {expected}")]
    RangeShort {
        /// The last zxid read.
        ended: Zxid,
        /// The zxid the DIFF was to end at.
        expected: Zxid,
    },
    /// The state machine's view failed to write the snapshot.
    #[error("writing the snapshot at {zxid}: {source}")]
    SnapshotWrite {
        /// The snapshot's zxid.
        zxid: Zxid,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// The producer's end: batches of messages, or why it stopped.
pub(super) type Tx = mpsc::Sender<Result<Vec<Message>, StreamError>>;

/// The forwarding task's end.
pub(super) type Rx = mpsc::Receiver<Result<Vec<Message>, StreamError>>;

/// Forwards a producer's messages with flow control (INV-1, INV-2).
pub(super) async fn forward(
    sender: PeerSender,
    mut rx: Rx,
    stall: Duration,
    max_queued: usize,
) -> Result<(), StreamError> {
    // Bounded by the producer: it ends, fails, or stalls.
    loop {
        let next = timeout(stall, rx.recv())
            .await
            .map_err(|_| StreamError::ProducerStalled(stall))?;
        let Some(item) = next else {
            return Ok(());
        };
        for msg in item? {
            timeout(stall, sender.send_within(msg, max_queued))
                .await
                .map_err(|_| StreamError::PeerStalled(stall))??;
        }
    }
}

/// Proposal + Commit for every logged txn in `(after, upto]` (blocking; INV-3).
pub(super) fn produce_range(reader: &LogReader, after: Zxid, upto: Zxid, tx: &Tx) {
    let fail = |e: StreamError| {
        let _ = tx.blocking_send(Err(e));
    };
    let iter = match reader.iter(after, upto) {
        Ok(it) => it,
        Err(e) => return fail(StreamError::RangeRead(e)),
    };
    let mut ended = after;
    let mut batch = Vec::with_capacity(2 * RANGE_BATCH);
    for r in iter {
        let txn = match r {
            Ok(txn) => txn,
            Err(e) => return fail(StreamError::RangeRead(e)),
        };
        let zxid = txn.zxid;
        ended = zxid;
        batch.push(Message::Proposal(txn));
        batch.push(Message::Commit { zxid });
        if batch.len() >= 2 * RANGE_BATCH {
            let full = std::mem::replace(&mut batch, Vec::with_capacity(2 * RANGE_BATCH));
            if tx.blocking_send(Ok(full)).is_err() {
                return;
            }
        }
    }
    if !batch.is_empty() && tx.blocking_send(Ok(batch)).is_err() {
        return;
    }
    if ended != upto && upto > after {
        fail(StreamError::RangeShort {
            ended,
            expected: upto,
        });
    }
}

/// `Snap { zxid, membership }`, then the view's bytes as `SnapChunk`s of `chunk` bytes
/// (blocking; INV-1).
pub(super) fn produce_snapshot(
    zxid: Zxid,
    membership: &Membership,
    source: Box<dyn SnapshotSource>,
    chunk: usize,
    tx: Tx,
) {
    let membership = membership.clone();
    if tx
        .blocking_send(Ok(vec![Message::Snap { zxid, membership }]))
        .is_err()
    {
        return;
    }
    let mut w = ChunkWriter {
        tx,
        buf: Vec::with_capacity(chunk),
        chunk: chunk.max(1),
    };
    let written = source.write_to(&mut w);
    let last = match written {
        Ok(()) => {
            let data = Bytes::from(std::mem::take(&mut w.buf));
            Ok(vec![Message::SnapChunk { data, last: true }])
        }
        Err(source) => Err(StreamError::SnapshotWrite { zxid, source }),
    };
    let _ = w.tx.blocking_send(last);
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
