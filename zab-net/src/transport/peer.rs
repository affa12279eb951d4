//! The known peers: where each listens and the shared side of its two links.
//!
//! INV-1: a [`Peer`] is made with both of its links' handles and the inputs of their tasks
//! ([`LinkStart`]); the caller spawns those tasks once the peer is in the table, so a hello
//! that finds the peer finds its links (transport INV-5).
//! INV-2: a link's [`Outbox`] is replaced, with the next generation, whenever its queue is
//! discarded; a `Control::Overflow` names the generation it is about, so a stale one is
//! ignored.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::mpsc;
use zab_core::{Message, ServerId};

use super::ack::UnwrittenAcks;
use super::{Channel, PeerAddrs};
use crate::tls::Stream;

/// The current outbox of a link; replaced (with a new generation) whenever its queue is
/// discarded, so that nothing queued before a loss is written after it (transport INV-2).
pub(super) struct Outbox {
    pub(super) generation: u64,
    pub(super) tx: mpsc::Sender<Message>,
    pub(super) overflow_signalled: bool,
    /// The acknowledgements queued and not written yet, which later ones fold into (`ack`).
    pub(super) unwritten_acks: UnwrittenAcks,
}

/// Requests to a link task.
pub(super) enum Control {
    /// An inbound connection from the higher-sid peer passed the handshake: use it.
    Adopt(Stream),
    /// The lower-sid peer wants a connection: dial it.
    DialRequested,
    /// Drop the connection and anything queued.
    Disconnect,
    /// The outbox of this generation overflowed.
    Overflow { generation: u64 },
}

/// The shared side of one link: where `send` puts messages and how to reach the task.
pub(super) struct LinkHandle {
    pub(super) outbox: Mutex<Outbox>,
    pub(super) ctrl: mpsc::UnboundedSender<Control>,
    pub(super) connected: AtomicBool,
}

/// A link's task inputs, made with its handle and handed to the task when it is spawned.
pub(super) struct LinkStart {
    pub(super) peer: ServerId,
    pub(super) channel: Channel,
    pub(super) handle: Arc<LinkHandle>,
    pub(super) outbox: mpsc::Receiver<Message>,
    pub(super) ctrl: mpsc::UnboundedReceiver<Control>,
}

/// One known peer: where it listens and its two links (transport INV-5).
pub(super) struct Peer {
    pub(super) addrs: PeerAddrs,
    /// Its `server.N` host from the start configuration, which its TLS certificate must name
    /// (`None` for a peer added at run time: its IP is used).
    pub(super) host: Option<String>,
    /// In the configuration last given to `set_peers` (or at start); false for a sid that
    /// left it, whose links stay.
    pub(super) configured: bool,
    pub(super) election: Arc<LinkHandle>,
    pub(super) quorum: Arc<LinkHandle>,
}

impl Peer {
    /// The peer and the inputs of its two link tasks, to be spawned.
    pub(super) fn new(
        sid: ServerId,
        addrs: PeerAddrs,
        outbox_len: usize,
    ) -> (Peer, [LinkStart; 2]) {
        let make = |channel: Channel| {
            let (tx, outbox) = mpsc::channel(outbox_len.max(1));
            let (ctrl, ctrl_rx) = mpsc::unbounded_channel();
            let handle = Arc::new(LinkHandle {
                outbox: Mutex::new(Outbox {
                    generation: 0,
                    tx,
                    overflow_signalled: false,
                    unwritten_acks: UnwrittenAcks::default(),
                }),
                ctrl,
                connected: AtomicBool::new(false),
            });
            LinkStart {
                peer: sid,
                channel,
                handle,
                outbox,
                ctrl: ctrl_rx,
            }
        };
        let (election, quorum) = (make(Channel::Election), make(Channel::Quorum));
        let peer = Peer {
            addrs,
            host: None,
            configured: true,
            election: election.handle.clone(),
            quorum: quorum.handle.clone(),
        };
        (peer, [election, quorum])
    }

    pub(super) fn link(&self, channel: Channel) -> &Arc<LinkHandle> {
        match channel {
            Channel::Election => &self.election,
            Channel::Quorum => &self.quorum,
        }
    }
}
