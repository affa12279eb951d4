//! Per-peer outgoing FIFOs of the driver: plain messages, and *streams* (a DIFF range read from
//! the on-disk log, a SNAP produced from a state machine view; see `stream`) that may be far
//! larger than a link's outbox. While a stream to X runs, every later message to X waits in X's
//! queue and is sent when it ends. What each peer's output is doing (idle, streaming, closing,
//! muted) is an [`OutState`] moved only by `out_state::transition`; this module carries out the
//! transitions' effects with the transport.
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
//! INV-5: a learner's sync is flow-controlled from end to end: from the first message of a
//! sync to a peer (a DIFF or TRUNC header, a log range, a SNAP) until its UPTODATE is handed
//! to the transport, every quorum message to that peer leaves through a stream (consecutive
//! messages batched as [`Stream::Messages`]), which waits for room in the outbox instead of
//! overflowing it. A DIFF from memory can be far longer than the outbox (a restarted leader
//! holds every txn above its snapshot until its NEWLEADER quorum), and so can what queued
//! behind a SNAP or a log range; sent at once, they would drop the learner on every attempt.
//! Outside a sync a full outbox drops the connection, as before (admission relies on it).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tracing::{debug, warn, Instrument};
use zab_core::{Membership, Message, ServerId, Zxid};
use zab_store::LogReader;

use super::api::SnapshotSource;
use super::out_state::{transition, Delivery, Effect, OutEvent, OutState};
use super::stream::{forward, produce_range, produce_snapshot, StreamError, STREAM_BUFFER};
use crate::transport::{Channel, Transport};

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
    /// Messages already made (a sync's, INV-5), sent in order, each waiting for room.
    Messages(Vec<Message>),
    /// `Snap { zxid }` then the configuration and the view's bytes as `SnapChunk`s.
    Snapshot {
        /// The view's zxid.
        zxid: Zxid,
        /// The configuration committed at `zxid`.
        membership: Membership,
        /// The view.
        source: Box<dyn SnapshotSource>,
    },
}

enum Item {
    Msg(Message),
    Stream(Stream),
}

/// One peer's output: its state, what waits, and the running stream's task.
#[derive(Default)]
struct PeerOut {
    state: OutState,
    queue: VecDeque<Item>,
    /// The running stream's task; `Some` exactly while `state` is `Streaming`.
    task: Option<AbortHandle>,
    /// A sync to this peer is under way: its messages leave through streams (INV-5).
    sync: bool,
}

/// A stream task's end.
pub(super) struct StreamDone {
    to: ServerId,
    id: u64,
    result: Result<(), StreamError>,
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

    /// Sends (or queues behind a stream or a closing, or drops while muted) one message
    /// (INV-1).
    pub(super) fn send(&mut self, t: &Transport, to: ServerId, msg: Message) {
        if Channel::of(&msg) == Channel::Election {
            if let Err(e) = t.send(to, msg) {
                debug!(peer = to.0, error = %e, "election message dropped");
            }
            return;
        }
        let p = self.peers.entry(to).or_default();
        let delivery = p.state.delivery();
        if delivery != Delivery::Drop && matches!(msg, Message::Diff { .. } | Message::Trunc { .. })
        {
            p.sync = true;
        }
        match delivery {
            Delivery::Drop => {}
            Delivery::Queue => p.queue.push_back(Item::Msg(msg)),
            Delivery::Now if p.sync => {
                p.queue.push_back(Item::Msg(msg));
                self.pump(t, to);
            }
            Delivery::Now => {
                if let Err(e) = t.send(to, msg) {
                    self.sever(t, to, &e.to_string());
                }
            }
        }
    }

    /// Starts (or queues, or drops while muted) a stream to `to`.
    pub(super) fn stream(&mut self, t: &Transport, to: ServerId, s: Stream) {
        let p = self.peers.entry(to).or_default();
        let delivery = p.state.delivery();
        // A log range or a SNAP is only ever part of a sync (INV-5).
        p.sync |= delivery != Delivery::Drop;
        match delivery {
            Delivery::Drop => {}
            Delivery::Queue => p.queue.push_back(Item::Stream(s)),
            Delivery::Now => self.start(t, to, s),
        }
    }

    /// The transport lost the quorum connection to `peer`: its queue is void; unmute.
    ///
    /// Returns true when the loss is the end of a connection the core itself closed
    /// (`Disconnect`, INV-4): the core already forgot it and must not hear of it again, and
    /// what it sent since goes out now, on the next connection.
    pub(super) fn connection_lost(&mut self, t: &Transport, peer: ServerId) -> bool {
        if !self.peers.contains_key(&peer) {
            return false;
        }
        self.apply(t, peer, OutEvent::LinkDown) == Effect::Pump
    }

    /// The core closed the connection to `peer` (INV-4).
    pub(super) fn disconnect(&mut self, t: &Transport, peer: ServerId) {
        let connected = t.is_connected(peer, Channel::Quorum);
        let now = Instant::now();
        self.apply(t, peer, OutEvent::Disconnect { connected, now });
        t.disconnect_channel(peer, Channel::Quorum);
    }

    /// Peers muted longer than `MUTE_MAX` (unmuted now; the caller tells the core). Closings
    /// that did not end within `MUTE_MAX` stop holding messages back.
    pub(super) fn expired_mutes(&mut self, t: &Transport) -> Vec<ServerId> {
        let now = Instant::now();
        let sids: Vec<ServerId> = self.peers.keys().copied().collect();
        sids.into_iter()
            .filter(|sid| self.apply(t, *sid, OutEvent::Tick { now }) == Effect::TellCore)
            .collect()
    }

    /// Aborts every stream and drops every queue (shutdown).
    pub(super) fn abort_all(&mut self) {
        for p in self.peers.values_mut() {
            clear(p);
        }
    }

    /// A stream ended: on success send what waited behind it (INV-1), else sever (INV-2).
    pub(super) fn on_done(&mut self, t: &Transport, done: StreamDone) {
        if !self.peers.contains_key(&done.to) {
            return;
        }
        let id = done.id;
        let event = match &done.result {
            Ok(()) => OutEvent::StreamFinished { id },
            Err(_) => OutEvent::StreamFailed {
                id,
                now: Instant::now(),
            },
        };
        if let (Err(e), Effect::Sever) = (&done.result, self.apply(t, done.to, event)) {
            warn_sever(done.to, &e.to_string());
        }
    }

    /// Messages and streams waiting behind a running stream in `peer`'s driver-side queue.
    pub(super) fn waiting(&self, peer: ServerId) -> usize {
        self.peers.get(&peer).map_or(0, |p| p.queue.len())
    }

    /// Moves `peer`'s state by `event` and carries out the effect; returns the effect.
    fn apply(&mut self, t: &Transport, peer: ServerId, event: OutEvent) -> Effect {
        let p = self.peers.entry(peer).or_default();
        let (next, effect) = match transition(p.state, event) {
            Ok(step) => step,
            Err(illegal) => {
                // Never with this module's calls; kept as it was rather than guessed at.
                warn!(peer = peer.0, error = %illegal, "peer output event ignored");
                return Effect::Nothing;
            }
        };
        if matches!(effect, Effect::Clear | Effect::TellCore | Effect::Sever) {
            clear(p);
        }
        if !matches!(next, OutState::Streaming { .. }) {
            // A stream that ended by itself: its task is over, nothing to abort.
            p.task = None;
        }
        p.state = next;
        match effect {
            Effect::Sever => t.disconnect_channel(peer, Channel::Quorum),
            Effect::Pump => self.pump(t, peer),
            Effect::Nothing | Effect::Clear | Effect::TellCore => {}
        }
        effect
    }

    fn pump(&mut self, t: &Transport, to: ServerId) {
        // Bounded by the queue's length.
        loop {
            let Some(p) = self.peers.get_mut(&to) else {
                return;
            };
            if p.state.delivery() != Delivery::Now {
                return;
            }
            if let Some(batch) = sync_batch(p) {
                self.start(t, to, Stream::Messages(batch));
                continue;
            }
            let Some(item) = p.queue.pop_front() else {
                return;
            };
            match item {
                Item::Msg(m) => {
                    if let Err(e) = t.send(to, m) {
                        return self.sever(t, to, &e.to_string());
                    }
                }
                Item::Stream(s) => self.start(t, to, s),
            }
        }
    }

    /// A send to `to` failed: drop its connection and mute it (INV-2).
    fn sever(&mut self, t: &Transport, to: ServerId, why: &str) {
        warn_sever(to, why);
        self.apply(
            t,
            to,
            OutEvent::SendFailed {
                now: Instant::now(),
            },
        );
    }

    fn start(&mut self, t: &Transport, to: ServerId, s: Stream) {
        let sender = match t.peer_sender(to, Channel::Quorum) {
            Ok(sender) => sender,
            Err(e) => return self.sever(t, to, &e.to_string()),
        };
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        let max_queued = match &s {
            Stream::Range { .. } | Stream::Messages(_) => RANGE_QUEUED,
            Stream::Snapshot { .. } => SNAP_QUEUED,
        };
        match s {
            Stream::Messages(batch) => {
                // The whole batch is made: the sender task ends when it is forwarded.
                let _ = tx.try_send(Ok(batch));
            }
            Stream::Range { after, upto } => {
                let reader = self.reader.clone();
                tokio::task::spawn_blocking(move || produce_range(&reader, after, upto, &tx));
            }
            Stream::Snapshot {
                zxid,
                membership,
                source,
            } => {
                let chunk = self.chunk_bytes;
                tokio::task::spawn_blocking(move || {
                    produce_snapshot(zxid, &membership, source, chunk, tx);
                });
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
        self.apply(t, to, OutEvent::StreamStarted { id });
        if let Some(p) = self.peers.get_mut(&to) {
            p.task = Some(task.abort_handle());
        }
    }
}

/// Drops a peer's queue and aborts its stream (INV-2); a sync ends with its connection.
fn clear(p: &mut PeerOut) {
    if let Some(h) = p.task.take() {
        h.abort();
    }
    p.queue.clear();
    p.sync = false;
}

/// During a sync, the messages at the front of `p`'s queue, taken as one batch to stream
/// (INV-5); the sync ends with the batch that holds its UPTODATE.
fn sync_batch(p: &mut PeerOut) -> Option<Vec<Message>> {
    if !p.sync {
        return None;
    }
    let mut batch = Vec::new();
    // Bounded by the queue's length.
    while let Some(Item::Msg(_)) = p.queue.front() {
        if let Some(Item::Msg(m)) = p.queue.pop_front() {
            p.sync &= !matches!(m, Message::UpToDate);
            batch.push(m);
        }
    }
    (!batch.is_empty()).then_some(batch)
}

fn warn_sever(to: ServerId, why: &str) {
    warn!(
        peer = to.0,
        error = why,
        "send to peer failed; dropping its connection"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(p: &PeerOut) -> usize {
        p.queue.len()
    }

    #[test]
    fn a_sync_batch_takes_the_messages_before_a_stream_and_ends_with_uptodate() {
        let mut p = PeerOut::default();
        p.queue.push_back(Item::Msg(Message::UpToDate));
        assert!(sync_batch(&mut p).is_none(), "no sync: nothing is batched");
        assert_eq!(msgs(&p), 1);
        p.queue.clear();
        p.sync = true;
        p.queue.push_back(Item::Msg(Message::Diff {
            last_zxid: Zxid::ZERO,
        }));
        p.queue.push_back(Item::Stream(Stream::Range {
            after: Zxid::ZERO,
            upto: Zxid::ZERO,
        }));
        p.queue.push_back(Item::Msg(Message::UpToDate));
        p.queue.push_back(Item::Msg(Message::Ping { round: 1 }));
        let first = sync_batch(&mut p).unwrap();
        assert!(matches!(first[..], [Message::Diff { .. }]));
        assert!(sync_batch(&mut p).is_none(), "a stream is next");
        p.queue.pop_front();
        let second = sync_batch(&mut p).unwrap();
        assert!(matches!(
            second[..],
            [Message::UpToDate, Message::Ping { .. }]
        ));
        assert!(!p.sync, "UPTODATE ends the sync");
    }
}
