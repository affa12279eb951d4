//! The simulated network: FIFO links between every ordered pair of nodes.
//!
//! # Model
//! Each ordered pair `(a, b)` has two FIFO queues, like ZooKeeper's two ports:
//! - the **election** channel carries `Message::Notification` only; it is best effort (a cut or
//!   a crash drops its content silently) and never produces `ConnectionLost`; a crash or a cut
//!   leaves each other end with a pending `PeerUnreachable { peer }` notice, and so does an
//!   election message sent to a peer that is down or cut off (the runtime's refused dial);
//! - the **quorum** channel carries every other message and behaves like a TCP connection.
//!
//! A quorum connection that breaks (link cut, far end crashed, `Action::Disconnect` from the far
//! end) drops everything in flight both ways and leaves each affected end with a pending
//! `ConnectionLost { peer }` *notice*. Until an end has consumed its notice, what it sends to
//! that peer is written into the dead socket and dropped. Sending while the link is cut or the
//! peer is down breaks the sender's connection the same way. A new connection is opened
//! implicitly by the next send after the notice was consumed.
//!
//! Each ordered quorum link holds at most `outbox_len` *plain* messages, like zab-net's
//! bounded per-peer outbox (`TransportConfig::outbox_len`): a send that finds the link full
//! *overflows*, exactly as `Transport::send` returns `SendError::Overflow` and its link drops
//! the connection: the message and everything in flight both ways are dropped, and both ends
//! get a pending `ConnectionLost` notice, as for a `Disconnect` from the far end. Messages of a
//! stream ([`Network::send_streamed`]: a `SendLogRange` or `SendSnapshot`, and every message
//! of a learner's sync, from its DIFF/TRUNC header, log range or SNAP through UPTODATE, as
//! `exec` marks them) do not count: the node's driver writes them with a sender that waits
//! for room instead of overflowing (zab-net `node::out` INV-5), and queues later messages
//! behind the stream, so only plain messages can overflow a link. The
//! election channel is not bounded (a handful of notifications per election).
//!
//! INV-N1: per ordered pair and channel, messages are delivered in send order, without
//! duplicates, and never across a break: a message sent before a break is never delivered after
//! it.
//! INV-N2: a node consumes `ConnectionLost { peer }` before any quorum message `peer` sent on a
//! newer connection (see [`Network::pop`]).
//! INV-N3: nothing is queued to or from a node that is down.
//! INV-N4: a node consumes `PeerUnreachable { peer }` before any message `peer` sent after it
//! was reported (the old connection's end is seen before the new one's messages).
//! INV-N5: a quorum link never holds more than `outbox_len` plain messages; the send that
//! would exceed it breaks the connection (both ends' notices, both directions emptied) and
//! is itself dropped ([`Sent::Overflow`]).
//! INV-N6: a plain proposal ACK or PINGACK sent while one of its kind waits undelivered on
//! the same quorum link folds into it (it is not queued, the waiting one is delivered with
//! the newer value), by zab-net's own rule (`zab_net::transport::UnwrittenAcks`), as the
//! transport's outbox does: a learner's acknowledgements never fill a link.
//! INV-N7: a *slow* quorum link delivers nothing until its time ([`Network::slow`]: a reader
//! that falls behind); what is sent on it queues and counts against its capacity as usual,
//! and a break empties it as any other.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use zab_core::{Input, Message, ServerId};
use zab_net::transport::{cumulative, UnwrittenAcks};

/// Which of the two per-pair channels a message travels on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Channel {
    /// Fast leader election notifications.
    Election,
    /// The quorum protocol (discovery, sync, broadcast, heartbeats, requests).
    Quorum,
}

impl Channel {
    /// The channel `msg` travels on.
    pub fn of(msg: &Message) -> Channel {
        match msg {
            Message::Notification(_) | Message::Transfer { .. } => Channel::Election,
            _ => Channel::Quorum,
        }
    }
}

/// What [`Network::pop`] hands to the receiver.
#[derive(Debug)]
pub enum Delivery {
    /// A message from the link's sender.
    Message(Message),
    /// The receiver's pending `ConnectionLost` for the sender, which must come first (INV-N2).
    Lost,
    /// The receiver's pending `PeerUnreachable` for the sender, which comes first (INV-N4).
    Unreachable,
}

impl Delivery {
    /// The input this delivery from `from` feeds the receiver.
    pub fn into_input(self, from: ServerId) -> Input {
        match self {
            Delivery::Message(msg) => Input::Message { from, msg },
            Delivery::Lost => Input::ConnectionLost { peer: from },
            Delivery::Unreachable => Input::PeerUnreachable { peer: from },
        }
    }
}

/// Key of one FIFO queue: (from, to, channel).
pub type LinkKey = (ServerId, ServerId, Channel);

/// What became of a send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// Queued on the link.
    Queued,
    /// Dropped: the receiver is down or cut off, or the sender's connection is broken and its
    /// notice not consumed yet.
    Dropped,
    /// Dropped because the link was full: the connection broke (INV-N5).
    Overflow,
}

/// One FIFO queue: its messages (each marked when part of a stream) and how many of them are
/// stream messages, which the capacity does not count.
#[derive(Debug, Default)]
struct Queue {
    messages: VecDeque<(Message, bool)>,
    streamed: usize,
    /// The acknowledgements queued last and not delivered yet, which later ones fold into
    /// (INV-N6).
    unwritten_acks: UnwrittenAcks,
}

impl Queue {
    fn plain(&self) -> usize {
        self.messages.len() - self.streamed
    }
}

/// All links of the cluster.
#[derive(Debug)]
pub struct Network {
    queues: BTreeMap<LinkKey, Queue>,
    /// Most plain messages one quorum link holds (INV-N5).
    outbox_len: usize,
    /// (from, to): that quorum link delivers nothing before this virtual time (INV-N7).
    slow_until: BTreeMap<(ServerId, ServerId), u64>,
    /// Acknowledgements fold (INV-N6); off only to show what folding prevents.
    fold_acks: bool,
    /// Unordered pairs (low, high) whose link is cut.
    cut: BTreeSet<(ServerId, ServerId)>,
    /// (holder, peer): `holder` has a pending, unconsumed `ConnectionLost { peer }`.
    broken: BTreeSet<(ServerId, ServerId)>,
    /// Pending `ConnectionLost` notices per node, in the order they happened.
    notices: BTreeMap<ServerId, VecDeque<ServerId>>,
    /// Pending `PeerUnreachable` notices per node (at most one per peer).
    gone: BTreeMap<ServerId, VecDeque<ServerId>>,
    down: BTreeSet<ServerId>,
    /// Messages dropped so far (statistics).
    pub dropped: u64,
    /// Connections broken by a full link so far (INV-N5).
    pub overflows: u64,
}

impl Default for Network {
    /// Unbounded links.
    fn default() -> Network {
        Network::with_outbox_len(usize::MAX)
    }
}

fn pair(a: ServerId, b: ServerId) -> (ServerId, ServerId) {
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

impl Network {
    /// A network whose quorum links hold at most `outbox_len` plain messages (INV-N5).
    pub fn with_outbox_len(outbox_len: usize) -> Network {
        Network {
            queues: BTreeMap::new(),
            outbox_len: outbox_len.max(1),
            slow_until: BTreeMap::new(),
            fold_acks: true,
            cut: BTreeSet::new(),
            broken: BTreeSet::new(),
            notices: BTreeMap::new(),
            gone: BTreeMap::new(),
            down: BTreeSet::new(),
            dropped: 0,
            overflows: 0,
        }
    }

    /// The same network with INV-N6 on (the default) or off: every acknowledgement queued as
    /// it is (a test-only switch, to show what folding prevents).
    pub fn folding_acks(mut self, on: bool) -> Network {
        self.fold_acks = on;
        self
    }

    /// Most plain messages one quorum link holds.
    pub fn outbox_len(&self) -> usize {
        self.outbox_len
    }

    /// True when the link between `a` and `b` is cut.
    pub fn is_cut(&self, a: ServerId, b: ServerId) -> bool {
        self.cut.contains(&pair(a, b))
    }

    /// True when `id` is down.
    pub fn is_down(&self, id: ServerId) -> bool {
        self.down.contains(&id)
    }

    fn break_end(&mut self, holder: ServerId, peer: ServerId) {
        if self.down.contains(&holder) {
            return;
        }
        if self.broken.insert((holder, peer)) {
            self.notices.entry(holder).or_default().push_back(peer);
        }
    }

    fn unreachable_to(&mut self, holder: ServerId, peer: ServerId) {
        if self.down.contains(&holder) || holder == peer {
            return;
        }
        let q = self.gone.entry(holder).or_default();
        if !q.contains(&peer) {
            q.push_back(peer);
        }
    }

    fn clear_queue(&mut self, key: LinkKey) {
        if let Some(q) = self.queues.get_mut(&key) {
            self.dropped += q.messages.len() as u64;
            q.messages.clear();
            q.streamed = 0;
            q.unwritten_acks = UnwrittenAcks::default();
        }
    }

    /// Queues `msg` from `from` to `to`, or drops it as described in the module docs (a full
    /// quorum link overflows: INV-N5).
    pub fn send(&mut self, from: ServerId, to: ServerId, msg: Message) -> Sent {
        self.enqueue(from, to, msg, false)
    }

    /// Like [`Network::send`] for a message of a stream, which the capacity does not count.
    pub fn send_streamed(&mut self, from: ServerId, to: ServerId, msg: Message) -> Sent {
        self.enqueue(from, to, msg, true)
    }

    fn enqueue(&mut self, from: ServerId, to: ServerId, msg: Message, streamed: bool) -> Sent {
        let channel = Channel::of(&msg);
        let ack = cumulative(&msg).filter(|_| self.fold_acks && !streamed);
        let unreachable = self.down.contains(&to) || self.is_cut(from, to) || from == to;
        if channel == Channel::Quorum {
            if self.broken.contains(&(from, to)) {
                self.dropped += 1;
                return Sent::Dropped;
            }
            if unreachable {
                self.dropped += 1;
                self.break_end(from, to);
                return Sent::Dropped;
            }
            let q = self.queues.entry((from, to, channel)).or_default();
            if ack.is_some_and(|c| q.unwritten_acks.fold(c)) {
                return Sent::Queued;
            }
            if q.plain() >= self.outbox_len && !streamed {
                self.overflow(from, to);
                return Sent::Overflow;
            }
        } else if unreachable {
            self.dropped += 1;
            self.unreachable_to(from, to);
            return Sent::Dropped;
        }
        let q = self.queues.entry((from, to, channel)).or_default();
        q.messages.push_back((msg, streamed));
        q.streamed += usize::from(streamed);
        if let Some(c) = ack {
            q.unwritten_acks.queued(c);
        }
        Sent::Queued
    }

    /// A send from `from` found its link to `to` full (INV-N5): the connection breaks as the
    /// transport drops it, both directions emptied, both ends told.
    fn overflow(&mut self, from: ServerId, to: ServerId) {
        self.overflows += 1;
        self.dropped += 1;
        self.clear_queue((from, to, Channel::Quorum));
        self.clear_queue((to, from, Channel::Quorum));
        self.break_end(from, to);
        self.break_end(to, from);
    }

    /// `from` closed its quorum connection to `peer` (`Action::Disconnect`).
    pub fn disconnect(&mut self, from: ServerId, peer: ServerId) {
        self.clear_queue((from, peer, Channel::Quorum));
        self.clear_queue((peer, from, Channel::Quorum));
        self.break_end(peer, from);
    }

    /// Cuts the link between `a` and `b`: both channels lose their content, both ends lose
    /// the quorum connection.
    pub fn cut(&mut self, a: ServerId, b: ServerId) {
        if a == b || !self.cut.insert(pair(a, b)) {
            return;
        }
        for ch in [Channel::Election, Channel::Quorum] {
            self.clear_queue((a, b, ch));
            self.clear_queue((b, a, ch));
        }
        self.break_end(a, b);
        self.break_end(b, a);
        self.unreachable_to(a, b);
        self.unreachable_to(b, a);
    }

    /// Heals the link between `a` and `b`.
    pub fn heal(&mut self, a: ServerId, b: ServerId) {
        self.cut.remove(&pair(a, b));
    }

    /// Heals every link.
    pub fn heal_all(&mut self) {
        self.cut.clear();
    }

    /// Number of cut links.
    pub fn cut_count(&self) -> usize {
        self.cut.len()
    }

    /// `id` crashed: everything to and from it is lost; its peers lose their connection.
    pub fn crash(&mut self, id: ServerId, peers: &[ServerId]) {
        for &p in peers {
            if p == id {
                continue;
            }
            for ch in [Channel::Election, Channel::Quorum] {
                self.clear_queue((id, p, ch));
                self.clear_queue((p, id, ch));
            }
            self.break_end(p, id);
            self.unreachable_to(p, id);
        }
        self.notices.remove(&id);
        self.gone.remove(&id);
        self.broken.retain(|(holder, _)| *holder != id);
        self.down.insert(id);
    }

    /// `id` is up again, with no connection.
    pub fn restart(&mut self, id: ServerId) {
        self.down.remove(&id);
    }

    /// Every non-empty queue that is not slow at `now_ms` (INV-N7).
    pub fn ready_links(&self, now_ms: u64) -> impl Iterator<Item = LinkKey> + '_ {
        self.queues
            .iter()
            .filter(|(_, q)| !q.messages.is_empty())
            .map(|(k, _)| *k)
            .filter(move |&(from, to, channel)| {
                channel == Channel::Election
                    || self
                        .slow_until
                        .get(&(from, to))
                        .is_none_or(|until| *until <= now_ms)
            })
    }

    /// The quorum link from `from` to `to` delivers nothing before `until_ms` (INV-N7).
    pub fn slow(&mut self, from: ServerId, to: ServerId, until_ms: u64) {
        self.slow_until.insert((from, to), until_ms);
    }

    /// Every link delivers again.
    pub fn end_slow_links(&mut self) {
        self.slow_until.clear();
    }

    /// Every node with a pending notice.
    pub fn ready_notices(&self) -> impl Iterator<Item = ServerId> + '_ {
        let mut ids: BTreeSet<ServerId> = BTreeSet::new();
        for map in [&self.notices, &self.gone] {
            ids.extend(map.iter().filter(|(_, q)| !q.is_empty()).map(|(k, _)| *k));
        }
        ids.into_iter()
    }

    /// Messages queued on one link.
    pub fn queue_len(&self, key: LinkKey) -> usize {
        self.queues.get(&key).map_or(0, |q| q.messages.len())
    }

    /// Total messages in flight.
    pub fn in_flight(&self) -> usize {
        self.queues.values().map(|q| q.messages.len()).sum()
    }

    /// Takes the head of a link, or the receiver's pending notice for the sender first.
    pub fn pop(&mut self, key: LinkKey) -> Option<Delivery> {
        let (from, to, channel) = key;
        if channel == Channel::Quorum && self.broken.contains(&(to, from)) {
            self.consume_notice(to, from);
            return Some(Delivery::Lost);
        }
        let has_message = self
            .queues
            .get(&key)
            .is_some_and(|q| !q.messages.is_empty());
        if let Some(q) = self.gone.get_mut(&to).filter(|_| has_message) {
            if let Some(at) = q.iter().position(|p| *p == from) {
                q.remove(at);
                return Some(Delivery::Unreachable);
            }
        }
        let q = self.queues.get_mut(&key)?;
        let (msg, streamed) = q.messages.pop_front()?;
        q.streamed -= usize::from(streamed);
        Some(Delivery::Message(q.unwritten_acks.take(msg)))
    }

    /// Takes the oldest pending notice of `id`: the peer whose connection it lost, else one
    /// it heard is unreachable.
    pub fn pop_notice(&mut self, id: ServerId) -> Option<(ServerId, Delivery)> {
        if let Some(peer) = self.notices.get_mut(&id).and_then(VecDeque::pop_front) {
            self.broken.remove(&(id, peer));
            return Some((peer, Delivery::Lost));
        }
        let peer = self.gone.get_mut(&id)?.pop_front()?;
        Some((peer, Delivery::Unreachable))
    }

    fn consume_notice(&mut self, holder: ServerId, peer: ServerId) {
        self.broken.remove(&(holder, peer));
        if let Some(q) = self.notices.get_mut(&holder) {
            q.retain(|p| *p != peer);
        }
    }
}
