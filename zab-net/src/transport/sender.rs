//! [`PeerSender`]: a flow-controlled sender bound to one outbox generation of one link.
//!
//! INV-1: a `PeerSender` only ever queues into the outbox that was current when it was made;
//! once the link discards that outbox (the connection ended), every send fails with
//! [`SendError::Closed`], so nothing it sends reaches a later connection.
//! INV-2: `send` waits for space instead of overflowing, so a long stream (a SNAP, a DIFF from
//! the on-disk log) never drops the connection of a peer that reads slowly; `send_within`
//! also keeps the outbox short (the outbox is bounded in messages, not bytes), so a stream of
//! large chunks holds only a few of them in memory.

use tokio::sync::mpsc;
use zab_core::codec::encoded_len;
use zab_core::{Message, ServerId};

use super::SendError;

/// See [`Transport::peer_sender`](super::Transport::peer_sender).
#[derive(Clone, Debug)]
pub struct PeerSender {
    to: ServerId,
    tx: mpsc::Sender<Message>,
    max_frame_len: usize,
}

impl PeerSender {
    pub(super) fn new(to: ServerId, tx: mpsc::Sender<Message>, max_frame_len: usize) -> Self {
        PeerSender {
            to,
            tx,
            max_frame_len,
        }
    }

    /// Like [`PeerSender::send`], but first waits until fewer than `max_queued` messages wait
    /// in the outbox (polling every millisecond; bound the wait with a timeout).
    pub async fn send_within(&self, msg: Message, max_queued: usize) -> Result<(), SendError> {
        // Bounded by the caller's timeout (and ends at once when the connection goes).
        loop {
            if self.tx.is_closed() {
                return Err(SendError::Closed(self.to));
            }
            let queued = self.tx.max_capacity() - self.tx.capacity();
            if queued < max_queued.max(1) {
                return self.send(msg).await;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    /// The peer this sender queues for.
    pub fn to(&self) -> ServerId {
        self.to
    }

    /// Queues `msg`, waiting while the outbox is full. Cancel-safe: dropping the future queues
    /// nothing.
    pub async fn send(&self, msg: Message) -> Result<(), SendError> {
        let (len, max) = (encoded_len(&msg), self.max_frame_len);
        if len > max {
            return Err(SendError::TooLarge { len, max });
        }
        let permit = self
            .tx
            .reserve()
            .await
            .map_err(|_| SendError::Closed(self.to))?;
        permit.send(msg);
        Ok(())
    }
}
