//! BACKUP's streamed answer (`docs/PROTOCOL.md` §10): the catalog version published last (the
//! node's applied, committed journal id) is taken as an `Arc` — O(1), the apply loop is never
//! held — and written as a backup file (`state::backup`) on a blocking thread, cut into chunk
//! answers of at most [`BACKUP_CHUNK_MAX`] bytes, then one final answer with the header.
//!
//! INV-1 (bounded memory): at most [`QUEUED_CHUNKS`] chunks wait on the connection's writer
//! (each carries a permit the writer drops once the chunk is on the socket) and at most
//! [`ENCODED_CHUNKS`] more wait between the encoding thread and this task, so a slow client
//! holds a few MiB, whatever the catalog's size.
//! INV-2: a client that goes away stops the encoding thread at its next chunk (the channel's
//! receiver is gone), and the request's other answers on the connection are unaffected: they
//! share the writer queue but not the permits.
//! INV-3: the final answer is sent only after every chunk; on any failure the stream ends with
//! one error answer for the request id instead (INTERNAL, or the sync's error).

use std::io::{self, Write};
use std::sync::Arc;

use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use super::super::machine::wall_ms;
use super::super::Shared;
use crate::protocol::{
    encode_response_bounded, ErrorReply, ReadOptions, RequestKind, Response, ResponseBody, Status,
    BACKUP_CHUNK_MAX,
};
use crate::state::backup::{write_backup, BackupHeader};

/// Chunks queued on the connection's writer per backup (INV-1).
pub const QUEUED_CHUNKS: usize = 4;
/// Chunks encoded ahead of the writer queue (INV-1).
pub const ENCODED_CHUNKS: usize = 2;

/// One frame payload for the connection's writer; the permit, if any, is dropped once the
/// payload was written (INV-1).
pub struct Answer {
    /// The response payload.
    pub payload: Vec<u8>,
    /// Released after the write.
    pub permit: Option<OwnedSemaphorePermit>,
}

impl Answer {
    /// A payload without flow control.
    pub fn plain(payload: Vec<u8>) -> Answer {
        Answer {
            payload,
            permit: None,
        }
    }
}

/// Streams the backup answer for request `id` into `tx`; the error status, if it failed.
pub async fn stream(
    shared: &Arc<Shared>,
    id: u64,
    opts: ReadOptions,
    tx: &mpsc::UnboundedSender<Answer>,
) -> Option<Status> {
    let result = match send_chunks(shared, id, opts, tx).await {
        Ok(Some(header)) => Ok(ResponseBody::BackupDone(header)),
        Ok(None) => return None,
        Err(e) => Err(e),
    };
    let status = result.as_ref().err().map(|e| e.status);
    let resp = Response {
        id,
        kind: RequestKind::BACKUP,
        result,
    };
    let _ = tx.send(Answer::plain(encode_response_bounded(&resp)));
    status
}

/// Sends every chunk; the header once all were queued, `None` if the client went away.
async fn send_chunks(
    shared: &Arc<Shared>,
    id: u64,
    opts: ReadOptions,
    tx: &mpsc::UnboundedSender<Answer>,
) -> Result<Option<BackupHeader>, ErrorReply> {
    shared.refuse_if_fatal()?;
    if opts.sync {
        shared.sync().await?;
    }
    let catalog = shared.catalog.load();
    shared.refuse_if_fatal()?;
    let cluster_id = shared.cfg.cluster_id;
    let (chunk_tx, mut chunks) = mpsc::channel::<Vec<u8>>(ENCODED_CHUNKS);
    let encoding = tokio::task::spawn_blocking(move || {
        let mut sink = ChunkSink {
            buf: Vec::with_capacity(BACKUP_CHUNK_MAX),
            tx: chunk_tx,
        };
        let header = write_backup(&catalog, cluster_id, wall_ms(), &mut sink)?;
        sink.send()?;
        Ok::<_, crate::state::backup::BackupError>(header)
    });
    let slots = Arc::new(Semaphore::new(QUEUED_CHUNKS));
    let mut offset = 0u64;
    while let Some(data) = chunks.recv().await {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return Ok(None);
        };
        let len = data.len() as u64;
        let resp = Response {
            id,
            kind: RequestKind::BACKUP,
            result: Ok(ResponseBody::BackupChunk { offset, data }),
        };
        let answer = Answer {
            payload: encode_response_bounded(&resp),
            permit: Some(permit),
        };
        if tx.send(answer).is_err() {
            return Ok(None);
        }
        offset += len;
    }
    let failed = |why: String| ErrorReply::new(Status::Internal, format!("backup failed: {why}"));
    match encoding.await {
        Ok(Ok(header)) if header.file_len() == offset => Ok(Some(header)),
        Ok(Ok(header)) => Err(failed(format!(
            "{offset} bytes sent, the header says {}",
            header.file_len()
        ))),
        Ok(Err(e)) => Err(failed(e.to_string())),
        Err(e) => Err(failed(e.to_string())),
    }
}

/// Cuts what is written into chunks of [`BACKUP_CHUNK_MAX`] bytes and sends them, waiting
/// while [`ENCODED_CHUNKS`] are queued (on a blocking thread).
struct ChunkSink {
    buf: Vec<u8>,
    tx: mpsc::Sender<Vec<u8>>,
}

impl ChunkSink {
    fn send(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let full = std::mem::replace(&mut self.buf, Vec::with_capacity(BACKUP_CHUNK_MAX));
        self.tx
            .blocking_send(full)
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client went away"))
    }
}

impl Write for ChunkSink {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let room = BACKUP_CHUNK_MAX - self.buf.len();
        let n = data.len().min(room);
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == BACKUP_CHUNK_MAX {
            self.send()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
