//! Leader transfer on a running node: [`Node::transfer_leadership`] asks the core (zab-core
//! `transfer`) to hand the leadership over and waits for the outcome.
//!
//! INV-1: one transfer at a time per node: the driver keeps one reply slot; a second request
//! while one waits is refused with `InProgress` without reaching the core.
//! INV-2: the answer is sent after the status publish of the batch that decided it (driver
//! INV-4), so when `transfer_leadership` returns `Ok`, [`Node::status`] already shows this
//! node following the new leader.
//! INV-3: the call always returns: with the core's answer (within syncLimit + initLimit by the
//! core's bounds), or `Timeout`, `Shutdown`, `Fatal`.

use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;
use zab_core::{Epoch, ServerId, TransferError};

use super::{Node, Request};

/// A completed transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransferReport {
    /// The old leader (this node).
    pub from: ServerId,
    /// The new leader.
    pub to: ServerId,
    /// The epoch the new leader established.
    pub epoch: Epoch,
    /// From the request to this node serving under the new leader.
    pub elapsed: Duration,
}

/// Why a transfer did not complete.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransferFailure {
    /// The core refused or the handover failed (the error says which and what to do).
    #[error("{0}")]
    Refused(TransferError),
    /// No answer within the limit; check the leader with the node status.
    #[error("no answer within {0:?}; check which server leads now")]
    Timeout(Duration),
    /// The node is shutting down or stopped.
    #[error("the node is stopped")]
    Shutdown,
    /// The node stopped on a fatal error.
    #[error("the node stopped on a fatal error: {0}")]
    Fatal(String),
}

/// What the driver answers.
pub(crate) type TransferOutcome = Result<zab_core::TransferReport, TransferError>;

/// Where the driver sends the answer.
pub(crate) type TransferReply = oneshot::Sender<TransferOutcome>;

/// The driver's one transfer slot (INV-1, INV-2).
#[derive(Debug, Default)]
pub(crate) struct TransferSlot {
    waiting: Option<TransferReply>,
    decided: Option<(TransferReply, TransferOutcome)>,
}

impl TransferSlot {
    /// Takes `reply` if no transfer waits; else answers it `InProgress` and returns false.
    pub(crate) fn register(&mut self, reply: TransferReply) -> bool {
        if self.waiting.is_some() || self.decided.is_some() {
            let _ = reply.send(Err(TransferError::InProgress));
            return false;
        }
        self.waiting = Some(reply);
        true
    }

    /// The core answered (a `TransferDone` nobody waits for, from an earlier caller that gave
    /// up, is dropped).
    pub(crate) fn resolve(&mut self, outcome: TransferOutcome) {
        if let Some(reply) = self.waiting.take() {
            self.decided = Some((reply, outcome));
        }
    }

    /// Sends a decided answer (after the status publish).
    pub(crate) fn send_answer(&mut self) {
        if let Some((reply, outcome)) = self.decided.take() {
            let _ = reply.send(outcome);
        }
    }
}

impl Node {
    /// Asks this node, which must be the leader, to hand the leadership to `target` (or, with
    /// `None`, to the most up-to-date voting follower in sync) and waits until it serves under
    /// the new leader. Writes are refused (`NotLeader` naming the target) from the request
    /// until the handover; the usual unavailability is the new leader's discovery and sync.
    /// An application forwards the request to the leader, as it forwards its writes.
    pub async fn transfer_leadership(
        &self,
        target: Option<ServerId>,
    ) -> Result<TransferReport, TransferFailure> {
        if let Some(f) = self.status.borrow().fatal.clone() {
            return Err(TransferFailure::Fatal(f));
        }
        let started = Instant::now();
        let (tx, rx) = oneshot::channel();
        let limit = self.request_timeout.max(Duration::from_secs(60));
        let exchange = async {
            self.requests
                .send(Request::Transfer { target, reply: tx })
                .await
                .map_err(|_| TransferFailure::Shutdown)?;
            rx.await.map_err(|_| self.stopped_failure())
        };
        let outcome = tokio::time::timeout(limit, exchange)
            .await
            .map_err(|_| TransferFailure::Timeout(limit))??;
        let r = outcome.map_err(TransferFailure::Refused)?;
        Ok(TransferReport {
            from: r.from,
            to: r.to,
            epoch: r.epoch,
            elapsed: started.elapsed(),
        })
    }

    fn stopped_failure(&self) -> TransferFailure {
        match self.status.borrow().fatal.clone() {
            Some(f) => TransferFailure::Fatal(f),
            None => TransferFailure::Shutdown,
        }
    }
}
