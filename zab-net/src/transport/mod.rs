//! Peer connections: listeners, lazy dialing with backoff, one connection per pair and channel,
//! bounded per-peer outboxes, and one inbound stream of [`Event`]s.
//!
//! Every server listens on two ports (quorum and election, from `server.N`). For each other
//! member and each [`Channel`] a *link* task owns at most one connection at a time:
//! - **Who connects.** Only the connection initiated by the higher sid carries messages. A
//!   lower sid that wants to talk dials, says hello, gets `ConnectBack` and waits; the higher
//!   sid dials back (ZooKeeper's `QuorumCnxManager` rule). Simultaneous connects therefore
//!   always end with the higher sid's connection, on both ends.
//! - **Lazy dialing.** A link dials only when it has something to send (or the lower peer
//!   asked to be called back), retrying with capped exponential backoff.
//! - **Outboxes.** [`Transport::send`] never blocks: it puts the message in the link's bounded
//!   outbox, which the link's writer task drains. When the outbox is full the peer is too slow:
//!   the connection is dropped, the queued messages discarded, and `send` returns
//!   [`SendError::Overflow`]. Other peers are unaffected — each has its own writer. A
//!   learner's cumulative ACKs and PINGACKs do not pile up there: one waiting unwritten takes
//!   the later ones of its kind in (`ack`), so a link that drains slowly holds one of each.
//! - **Inbound.** Each connection's reader task decodes frames and delivers
//!   `Event::Message { from, msg }` on the channel returned by [`Transport::start`]. A frame that
//!   does not decode, or is too large, closes that connection only.
//!
//! INV-1: per peer and channel, messages handed to `send` are written in order, on one
//! connection, and never after a message sent later (FIFO per link, as ZAB requires); the one
//! exception is a folded acknowledgement, written where the first one of its kind still
//! unwritten was queued (`ack` INV-2).
//! INV-2: a quorum-channel connection that was established and ends (peer closed, bad frame,
//! overflow, `disconnect`, replaced by a newer connection) produces exactly one
//! `Event::ConnectionLost { peer }`, after every message it delivered; an overflow while not
//! connected produces one too. After that event no message queued before it is written.
//! INV-3: only connections whose hello passed every check of [`crate::handshake`] deliver
//! messages; the `from` of an event is the sid authenticated by that hello. With TLS
//! ([`TransportConfig::tls`], `sslQuorum=true`) the TLS handshake comes first, on both ends:
//! no hello is written or read before the peer's certificate chained to the cluster CA, and an
//! accepted hello's sid must also be the one its certificate names (`crate::tls::PeerTls`).
//! Every refusal is counted and logged with a WARN, at most one per address every
//! [`crate::tls::WARN_EVERY`] (the ones in between are counted in the next).
//! INV-4: every task stops on [`Transport::shutdown`] (or when the `Transport` is dropped); every
//! wait is bounded by a timeout or by that cancellation. Links added at run time are tasks of
//! the same set, stopped and awaited the same way.
//! INV-5: the known peers only grow while the transport runs. [`Transport::set_peers`] adds
//! sids and changes addresses; it never removes a sid or its links. Every known sid has one
//! link per channel from the moment it is known, so a hello that names it (and passes the other
//! checks) always finds its link, and only known sids are accepted.
//!
//! # A membership that changes
//! The configuration in force is replicated (`zab_core::membership`), so the peers are not fixed
//! at start: the node hands every new configuration to [`Transport::set_peers`].
//! - A sid new to the transport gets its two links at once; like every link they dial only on
//!   demand.
//! - A changed address is used from the next dial on; an established connection stays.
//! - A sid that left the configuration keeps its links while the process runs: the leader
//!   still sends the removed server the COMMIT of its removal, and the core itself ignores
//!   messages from non-members. Its links dial only when this server sends to it or it calls
//!   (a lower sid asking to be called back); otherwise they cost nothing. Inbound hellos from
//!   it are still accepted. The next start knows only the members of the configuration then.

mod ack;
mod config;
mod error;
mod link;
mod listener;
mod peer;
mod sender;

pub use ack::{cumulative, UnwrittenAcks};
pub use config::{PeerAddrs, TransportConfig};
pub use error::{NetError, SendError};
pub use sender::PeerSender;

use peer::{Control, LinkHandle, LinkStart, Peer};

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use zab_core::codec::encoded_len;
use zab_core::{Message, ServerId};

pub use crate::handshake::Channel;

/// What the transport delivers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A message from an authenticated peer.
    Message {
        /// The sender.
        from: ServerId,
        /// The message.
        msg: Message,
    },
    /// The quorum connection to `peer` ended (INV-2).
    ConnectionLost {
        /// The other end.
        peer: ServerId,
    },
    /// The election connection to `peer` was closed by it, or a dial to it failed: it is
    /// probably down (`link` INV-5). Any later message from it shows it is back.
    Unreachable {
        /// The other end.
        peer: ServerId,
    },
}

/// Counters, for tests and monitoring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransportStats {
    /// Connections that completed the handshake and carried messages, both directions.
    pub established: u64,
    /// Inbound hellos this server refused or could not parse.
    pub refused: u64,
    /// Dials the peer refused.
    pub refused_by_peer: u64,
    /// Connections closed because a frame was oversized or did not decode.
    pub bad_frames: u64,
    /// Outbox overflows.
    pub overflows: u64,
    /// Inbound connections refused by TLS: the handshake failed (no certificate, one from an
    /// untrusted CA, plaintext) or the certificate does not name the server its hello claims.
    pub tls_refused: u64,
    /// Dials whose TLS handshake failed (the peer's certificate refused here, or ours there).
    pub tls_dial_failures: u64,
    /// ACKs and PINGACKs folded into one still unwritten (`ack`) instead of being queued.
    pub acks_folded: u64,
}

#[derive(Default)]
struct Counters {
    established: AtomicU64,
    refused: AtomicU64,
    refused_by_peer: AtomicU64,
    bad_frames: AtomicU64,
    overflows: AtomicU64,
    tls_refused: AtomicU64,
    tls_dial_failures: AtomicU64,
    acks_folded: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// State shared by the handle, the listeners and the links.
struct Shared {
    /// The configuration; its `peers` are moved into `peers` at start.
    cfg: TransportConfig,
    /// Every known peer (INV-5: never shrinks).
    peers: RwLock<BTreeMap<ServerId, Peer>>,
    events: mpsc::Sender<Event>,
    shutdown: CancellationToken,
    counters: Counters,
    /// Rate limit of the refusal warnings.
    warn_limit: crate::tls::WarnLimit,
}

impl Shared {
    fn link(&self, peer: ServerId, channel: Channel) -> Option<Arc<LinkHandle>> {
        self.peers
            .read()
            .get(&peer)
            .map(|p| p.link(channel).clone())
    }

    /// The host a TLS peer's certificate must name: its `server.N` host when the start
    /// configuration gave one, otherwise the IP it is reached at (`addr`).
    fn tls_host(&self, peer: ServerId, addr: SocketAddr) -> String {
        self.peers
            .read()
            .get(&peer)
            .and_then(|p| p.host.clone())
            .unwrap_or_else(|| addr.ip().to_string())
    }

    /// Where `peer` listens on `channel`, if known.
    fn addr(&self, peer: ServerId, channel: Channel) -> Option<SocketAddr> {
        self.peers.read().get(&peer).map(|p| p.addrs.of(channel))
    }
}

/// A running transport. Dropping it stops every task; [`Transport::shutdown`] also waits.
pub struct Transport {
    shared: Arc<Shared>,
    local: PeerAddrs,
    /// Listener and link tasks; links of peers added at run time join it (INV-4).
    tasks: Mutex<JoinSet<()>>,
    /// The runtime the transport started on, where run-time links are spawned.
    runtime: tokio::runtime::Handle,
}

impl Transport {
    /// Binds both listeners and starts the link tasks. Returns the handle and the channel of
    /// inbound events.
    pub async fn start(
        mut cfg: TransportConfig,
    ) -> Result<(Transport, mpsc::Receiver<Event>), NetError> {
        let (quorum, election, local) = bind_listeners(&cfg).await?;
        let (events, events_rx) = mpsc::channel(cfg.inbound_len.max(1));
        let mut peers = BTreeMap::new();
        let mut link_starts = Vec::new();
        for (sid, addrs) in std::mem::take(&mut cfg.peers) {
            if sid == cfg.sid {
                continue;
            }
            let (mut peer, starts) = Peer::new(sid, addrs, cfg.outbox_len);
            peer.host = cfg.hosts.get(&sid).cloned();
            peers.insert(sid, peer);
            link_starts.extend(starts);
        }
        let shared = Arc::new(Shared {
            cfg,
            peers: RwLock::new(peers),
            events,
            shutdown: CancellationToken::new(),
            counters: Counters::default(),
            warn_limit: crate::tls::WarnLimit::default(),
        });

        let sid = shared.cfg.sid;
        let runtime = tokio::runtime::Handle::current();
        let mut tasks = JoinSet::new();
        for (listener, channel) in [(quorum, Channel::Quorum), (election, Channel::Election)] {
            let span = tracing::info_span!("listen", sid = sid.0, %channel);
            tasks.spawn_on(
                listener::accept_loop(shared.clone(), listener, channel).instrument(span),
                &runtime,
            );
        }
        let transport = Transport {
            shared,
            local,
            tasks: Mutex::new(tasks),
            runtime,
        };
        transport.spawn_links(link_starts);
        let tls = transport.shared.cfg.tls.is_some();
        tracing::info!(sid = sid.0, quorum = %local.quorum, election = %local.election, tls, "transport started");
        Ok((transport, events_rx))
    }

    fn spawn_links(&self, starts: Vec<LinkStart>) {
        let sid = self.shared.cfg.sid;
        let mut tasks = self.tasks.lock();
        for start in starts {
            let span = tracing::info_span!("link", sid = sid.0, peer = start.peer.0, channel = %start.channel);
            let link = link::Link::new(self.shared.clone(), start);
            tasks.spawn_on(link.run().instrument(span), &self.runtime);
        }
    }

    /// Makes `peers` the configuration in force (see the module docs): a sid not known yet gets
    /// its links, a changed address is used from the next dial on, and a known sid missing from
    /// `peers` keeps its links (INV-5) but is logged as having left. This server's own sid is
    /// ignored, and so is an unknown address (port 0, [`PeerAddrs::UNKNOWN`]) in place of a
    /// known one.
    pub fn set_peers(&self, peers: &BTreeMap<ServerId, PeerAddrs>) {
        let me = self.shared.cfg.sid;
        let mut starts = Vec::new();
        {
            let mut known = self.shared.peers.write();
            for (sid, peer) in known.iter_mut() {
                let configured = peers.contains_key(sid);
                if peer.configured && !configured {
                    tracing::info!(
                        peer = sid.0,
                        "peer left the configuration; its links stay, used only if a message \
                         goes to it or it calls"
                    );
                }
                peer.configured = configured;
            }
            for (sid, addrs) in peers.iter().filter(|(sid, _)| **sid != me) {
                match known.get_mut(sid) {
                    Some(peer) => {
                        if peer.addrs != *addrs && addrs.is_known() {
                            tracing::info!(
                                peer = sid.0,
                                quorum = %addrs.quorum,
                                election = %addrs.election,
                                "peer address changed; used from the next dial"
                            );
                            peer.addrs = *addrs;
                        }
                    }
                    None => {
                        tracing::info!(
                            peer = sid.0,
                            quorum = %addrs.quorum,
                            election = %addrs.election,
                            "peer joined the configuration"
                        );
                        let (peer, links) = Peer::new(*sid, *addrs, self.shared.cfg.outbox_len);
                        known.insert(*sid, peer);
                        starts.extend(links);
                    }
                }
            }
        }
        self.spawn_links(starts);
    }

    /// This server's sid.
    pub fn sid(&self) -> ServerId {
        self.shared.cfg.sid
    }

    /// The addresses actually bound (ports chosen by the OS when the config said 0).
    pub fn local_addrs(&self) -> PeerAddrs {
        self.local
    }

    /// Queues `msg` for `to` on the message's channel ([`Channel::of`]). Never blocks.
    pub fn send(&self, to: ServerId, msg: Message) -> Result<(), SendError> {
        let channel = Channel::of(&msg);
        let (len, max) = (encoded_len(&msg), self.shared.cfg.max_frame_len);
        if len > max {
            return Err(SendError::TooLarge { len, max });
        }
        let link = self
            .shared
            .link(to, channel)
            .ok_or(SendError::UnknownPeer(to))?;
        let mut outbox = link.outbox.lock();
        let ack = cumulative(&msg);
        if ack.is_some_and(|c| outbox.unwritten_acks.fold(c)) {
            bump(&self.shared.counters.acks_folded);
            if let Some(m) = &self.shared.cfg.metrics {
                m.acks_folded.inc();
            }
            return Ok(());
        }
        match outbox.tx.try_send(msg) {
            Ok(()) => {
                if let Some(c) = ack {
                    outbox.unwritten_acks.queued(c);
                }
                Ok(())
            }
            // The link is between a lost connection and its new outbox; the loss is (or will
            // be) reported by ConnectionLost, and this message goes with the discarded queue.
            Err(mpsc::error::TrySendError::Closed(_)) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => {
                if !outbox.overflow_signalled {
                    outbox.overflow_signalled = true;
                    let generation = outbox.generation;
                    let _ = link.ctrl.send(Control::Overflow { generation });
                }
                Err(SendError::Overflow(to))
            }
        }
    }

    /// The capacity of every outbox, in messages (beyond it [`Transport::send`] overflows).
    pub fn outbox_capacity(&self) -> usize {
        self.shared.cfg.outbox_len.max(1)
    }

    /// How many messages wait in the outbox of (`to`, `channel`) (`None`: not a peer).
    pub fn outbox_len(&self, to: ServerId, channel: Channel) -> Option<usize> {
        let link = self.shared.link(to, channel)?;
        let outbox = link.outbox.lock();
        Some(outbox.tx.max_capacity() - outbox.tx.capacity())
    }

    /// Drops the connections (both channels) to `peer` and discards what is queued for it.
    pub fn disconnect(&self, peer: ServerId) {
        for channel in [Channel::Election, Channel::Quorum] {
            self.disconnect_channel(peer, channel);
        }
    }

    /// Drops the connection to `peer` on one channel and discards what is queued on it.
    pub fn disconnect_channel(&self, peer: ServerId, channel: Channel) {
        if let Some(link) = self.shared.link(peer, channel) {
            let _ = link.ctrl.send(Control::Disconnect);
        }
    }

    /// A flow-controlled sender bound to the current outbox of (`to`, `channel`): its
    /// [`PeerSender::send`] waits for outbox space instead of dropping the connection, and
    /// fails with [`SendError::Closed`] once that outbox is discarded (connection lost), so
    /// nothing it sends can leak onto a later connection (INV-2). Messages queued through it
    /// and through [`Transport::send`] share one FIFO.
    pub fn peer_sender(&self, to: ServerId, channel: Channel) -> Result<PeerSender, SendError> {
        let link = self
            .shared
            .link(to, channel)
            .ok_or(SendError::UnknownPeer(to))?;
        let tx = link.outbox.lock().tx.clone();
        Ok(PeerSender::new(to, tx, self.shared.cfg.max_frame_len))
    }

    /// Sets where a known `peer` listens (for peers whose ports are chosen at run time); used
    /// from the next dial on. [`Transport::set_peers`] is the way to add peers.
    pub fn set_peer_addrs(&self, peer: ServerId, addrs: PeerAddrs) -> Result<(), SendError> {
        match self.shared.peers.write().get_mut(&peer) {
            Some(known) => {
                known.addrs = addrs;
                Ok(())
            }
            None => Err(SendError::UnknownPeer(peer)),
        }
    }

    /// True while a connection to `peer` on `channel` is established.
    pub fn is_connected(&self, peer: ServerId, channel: Channel) -> bool {
        self.shared
            .link(peer, channel)
            .is_some_and(|l| l.connected.load(Ordering::Acquire))
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> TransportStats {
        let c = &self.shared.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        TransportStats {
            established: get(&c.established),
            refused: get(&c.refused),
            refused_by_peer: get(&c.refused_by_peer),
            bad_frames: get(&c.bad_frames),
            overflows: get(&c.overflows),
            tls_refused: get(&c.tls_refused),
            tls_dial_failures: get(&c.tls_dial_failures),
            acks_folded: get(&c.acks_folded),
        }
    }

    /// Stops every task and waits for them; every connection and listener is closed on return.
    pub async fn shutdown(self) {
        self.shared.shutdown.cancel();
        let mut tasks = std::mem::take(&mut *self.tasks.lock());
        while tasks.join_next().await.is_some() {}
        tracing::info!(sid = self.shared.cfg.sid.0, "transport stopped");
    }
}

/// Binds the quorum and election listeners of `cfg`; returns them and where they listen.
async fn bind_listeners(
    cfg: &TransportConfig,
) -> Result<(TcpListener, TcpListener, PeerAddrs), NetError> {
    let bind = |channel: Channel| {
        let addr = cfg.listen.of(channel);
        async move {
            TcpListener::bind(addr)
                .await
                .map_err(|source| NetError::Bind {
                    addr,
                    channel,
                    source,
                })
        }
    };
    let quorum = bind(Channel::Quorum).await?;
    let election = bind(Channel::Election).await?;
    let local_addr = |l: &TcpListener, channel: Channel| {
        l.local_addr().map_err(|source| NetError::Bind {
            addr: cfg.listen.of(channel),
            channel,
            source,
        })
    };
    let local = PeerAddrs {
        quorum: local_addr(&quorum, Channel::Quorum)?,
        election: local_addr(&election, Channel::Election)?,
    };
    Ok((quorum, election, local))
}

impl Drop for Transport {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}
