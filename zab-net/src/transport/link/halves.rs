//! A session's two halves: the reader delivering the peer's frames as events, and the writer
//! draining the outbox (link INV-1), writing a folded acknowledgement's newest value (`ack`).

use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, FramedWrite};
use tracing::{debug, warn};
use zab_core::{Message, ServerId};

use super::super::ack::cumulative;
use super::super::{bump, Event, LinkHandle, Shared};
use crate::frame::{FrameCodec, FrameError};
use crate::tls::{ReadHalf, WriteHalf};

/// Delivers the connection's messages until it closes or sends a bad frame.
pub(super) async fn read_loop(
    shared: Arc<Shared>,
    from: ServerId,
    rd: ReadHalf,
    codec: FrameCodec,
) {
    let mut frames = FramedRead::new(rd, codec);
    // Bounded by the connection: ends at EOF, on the first error, or when aborted.
    loop {
        match frames.next().await {
            Some(Ok(msg)) => {
                if shared
                    .events
                    .send(Event::Message { from, msg })
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Some(Err(FrameError::Io(e))) => {
                debug!(error = %e, "read failed");
                return;
            }
            Some(Err(e)) => {
                bump(&shared.counters.bad_frames);
                warn!(error = %e, "bad frame from peer; closing connection");
                return;
            }
            None => {
                debug!("peer closed the connection");
                return;
            }
        }
    }
}

/// The writer's access to its outbox's unwritten acknowledgements (`ack`), for one
/// generation.
pub(super) struct WriterAcks {
    pub(super) handle: Arc<LinkHandle>,
    pub(super) generation: u64,
}

impl WriterAcks {
    /// The message to write for `msg` (an acknowledgement carries what was folded into it).
    fn take(&self, msg: Message) -> Message {
        if cumulative(&msg).is_none() {
            return msg;
        }
        let mut outbox = self.handle.outbox.lock();
        if outbox.generation != self.generation {
            return msg;
        }
        outbox.unwritten_acks.take(msg)
    }
}

/// Writes the stash and then the outbox, in order, flushing whenever the outbox is empty.
pub(super) async fn write_loop(
    wr: WriteHalf,
    codec: FrameCodec,
    first: Option<Message>,
    mut outbox: mpsc::Receiver<Message>,
    acks: WriterAcks,
) -> Result<(), FrameError> {
    let mut frames = FramedWrite::new(wr, codec);
    if let Some(m) = first {
        frames.feed(acks.take(m)).await?;
    }
    // Bounded by the connection: ends on a write error, or when aborted.
    loop {
        let msg = match outbox.try_recv() {
            Ok(m) => m,
            Err(_) => {
                frames.flush().await?;
                match outbox.recv().await {
                    Some(m) => m,
                    None => return Ok(()),
                }
            }
        };
        frames.feed(acks.take(msg)).await?;
    }
}
