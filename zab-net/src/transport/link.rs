//! One link: this server's side of (peer, channel). A task that alternates between
//! *establishing* a connection and running a *session* on it.
//!
//! ```text
//!  idle ──(message queued | call-back request)──▶ dialing ──▶ session ──(ends)──▶ idle
//!    ▲                      (backoff on failure)      ▲                   reset outbox,
//!    └──────────── Adopt(inbound from higher sid) ────┘                   ConnectionLost
//! ```
//!
//! INV-1: at most one session per link at a time; its writer is the only task writing to the
//! peer on this channel, and it drains the one outbox of the current generation in order.
//! INV-2: a session's end is followed, in this order, by: its reader has stopped (so every
//! message it delivered is already in the event channel), the outbox is replaced (nothing
//! queued before the end is written later), `ConnectionLost` is emitted (quorum channel).
//! INV-3: a lower sid never sends messages on a connection it dialed: its dial only asks the
//! higher sid to call back (`ConnectBack`), and it waits `connect_back_wait` for that.
//! INV-5: the election channel reports `Unreachable` when the peer closed its connection (or
//! a write to it failed) and when a dial to it fails; a killed process closes its sockets, so
//! the others learn at once that it cannot vote (`zab_core` `looking` INV-12).
//! INV-4: a call-back request reaching an established session younger than
//! `connect_back_wait` is a simultaneous-connect race and is ignored; an older session is taken
//! to be stale (the peer lost it, e.g. restarted) and is replaced.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::{timeout, Instant};
use tracing::{debug, info, warn, Instrument};
use zab_core::{Message, ServerId};

use super::peer::Outbox;
use super::{bump, Channel, Control, Event, LinkHandle, LinkStart, Shared};
use crate::frame::FrameCodec;
use crate::handshake::{self, HandshakeError, Hello, Reply};
use crate::tls::Stream;

mod halves;
mod tls;

use halves::{read_loop, write_loop, WriterAcks};

/// Why a session ended.
enum SessionEnd {
    Shutdown,
    Closed,
    /// The peer closed the connection (or writing to it failed).
    PeerGone,
    Replaced(Stream),
}

/// Result of one dial attempt.
enum Attempt {
    Connected(Stream),
    Failed,
    /// The dial itself failed (refused, timed out, handshake broken).
    Unreachable,
    Shutdown,
}

/// Aborts the task when dropped, so a session's reader and writer never outlive their link
/// (even when the link task itself is aborted).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Capped exponential backoff.
struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    fn new(min: Duration, max: Duration) -> Backoff {
        Backoff {
            min,
            max,
            next: min,
        }
    }

    fn step(&mut self) -> Duration {
        let now = self.next;
        self.next = (self.next * 2).min(self.max);
        now
    }

    fn reset(&mut self) {
        self.next = self.min;
    }
}

pub(super) struct Link {
    shared: Arc<Shared>,
    peer: ServerId,
    channel: Channel,
    /// This link's shared side (its outbox slot and connected flag).
    handle: Arc<LinkHandle>,
    outbox: Option<mpsc::Receiver<Message>>,
    generation: u64,
    /// A message taken from the outbox while idle, to be written first.
    stash: Option<Message>,
    /// The lower-sid peer asked to be called back.
    dial_requested: bool,
    ctrl: mpsc::UnboundedReceiver<Control>,
    backoff: Backoff,
}

impl Link {
    pub(super) fn new(shared: Arc<Shared>, start: LinkStart) -> Link {
        let backoff = Backoff::new(shared.cfg.backoff_min, shared.cfg.backoff_max);
        Link {
            shared,
            peer: start.peer,
            channel: start.channel,
            handle: start.handle,
            outbox: Some(start.outbox),
            generation: 0,
            stash: None,
            dial_requested: false,
            ctrl: start.ctrl,
            backoff,
        }
    }

    fn i_am_higher(&self) -> bool {
        self.shared.cfg.sid > self.peer
    }

    pub(super) async fn run(mut self) {
        let mut adopted = None;
        loop {
            let stream = match adopted.take() {
                Some(s) => s,
                None => match self.establish().await {
                    Some(s) => s,
                    None => return,
                },
            };
            let end = self.session(stream).await;
            if let SessionEnd::Shutdown = end {
                return;
            }
            let gone = matches!(end, SessionEnd::PeerGone);
            if let SessionEnd::Replaced(s) = end {
                adopted = Some(s);
            }
            self.reset_outbox();
            if !self.report_lost().await || (gone && !self.report_unreachable().await) {
                return;
            }
        }
    }

    /// Waits for demand and connects. `None` on shutdown.
    async fn establish(&mut self) -> Option<Stream> {
        loop {
            if self.stash.is_none() && !self.dial_requested {
                let outbox = self.outbox.as_mut()?;
                let control = tokio::select! {
                    _ = self.shared.shutdown.cancelled() => return None,
                    msg = outbox.recv() => {
                        self.stash = Some(msg?);
                        continue;
                    }
                    c = self.ctrl.recv() => c,
                };
                if let Some(stream) = self.idle_control(control).await? {
                    return Some(stream);
                }
                continue;
            }
            let shutdown = self.shared.shutdown.clone();
            let attempt = tokio::select! {
                _ = shutdown.cancelled() => Attempt::Shutdown,
                a = self.attempt() => a,
            };
            match attempt {
                Attempt::Connected(stream) => {
                    self.backoff.reset();
                    return Some(stream);
                }
                Attempt::Shutdown => return None,
                a @ (Attempt::Failed | Attempt::Unreachable) => {
                    if matches!(a, Attempt::Unreachable) && !self.report_unreachable().await {
                        return None;
                    }
                    let pause = self.backoff.step();
                    if let Some(stream) = self.wait_for_adopt(pause).await? {
                        return Some(stream);
                    }
                }
            }
        }
    }

    /// Handles a control message while not connected. `None`: shut down; `Some(Some(s))`: a
    /// connection to adopt; `Some(None)`: carry on.
    async fn idle_control(&mut self, c: Option<Control>) -> Option<Option<Stream>> {
        match c? {
            Control::Adopt(stream) => return Some(Some(stream)),
            Control::DialRequested => self.dial_requested = true,
            Control::Disconnect => {
                self.reset_outbox();
                self.dial_requested = false;
            }
            Control::Overflow { generation } if generation == self.generation => {
                bump(&self.shared.counters.overflows);
                warn!("outbox full while connecting; discarding queued messages");
                self.reset_outbox();
                if !self.report_lost().await {
                    return None;
                }
            }
            Control::Overflow { .. } => {}
        }
        Some(None)
    }

    /// Sleeps up to `pause`, still taking control messages. `None` on shutdown.
    async fn wait_for_adopt(&mut self, pause: Duration) -> Option<Option<Stream>> {
        let deadline = Instant::now() + pause;
        loop {
            tokio::select! {
                _ = self.shared.shutdown.cancelled() => return None,
                _ = tokio::time::sleep_until(deadline) => return Some(None),
                c = self.ctrl.recv() => {
                    let call_back = matches!(c, Some(Control::DialRequested));
                    if let Some(stream) = self.idle_control(c).await? {
                        return Some(Some(stream));
                    }
                    if call_back && self.i_am_higher() {
                        // The peer is up and waiting for us: dial now, not after the pause.
                        self.backoff.reset();
                        return Some(None);
                    }
                }
            }
        }
    }

    /// Dials once. A higher sid gets its connection; a lower sid gets called back.
    async fn attempt(&mut self) -> Attempt {
        // Read at every dial, so a changed address is used from the next one on.
        let addr = self.shared.addr(self.peer, self.channel);
        let Some(addr) = addr.filter(|a| a.port() != 0) else {
            debug!("peer address not known yet");
            return Attempt::Failed;
        };
        let hello = Hello {
            cluster_id: self.shared.cfg.cluster_id,
            from: self.shared.cfg.sid,
            to: self.peer,
            channel: self.channel,
        };
        let (stream, reply) = match self.dial(addr, &hello).await {
            Ok(r) => r,
            Err(e) => {
                debug!(%addr, error = %e, "dial failed");
                return Attempt::Unreachable;
            }
        };
        match (reply, self.i_am_higher()) {
            (Reply::Accepted, true) => {
                self.dial_requested = false;
                Attempt::Connected(stream)
            }
            (Reply::ConnectBack, false) => {
                drop(stream);
                match self.wait_for_adopt(self.shared.cfg.connect_back_wait).await {
                    None => Attempt::Shutdown,
                    Some(Some(s)) => Attempt::Connected(s),
                    Some(None) => {
                        debug!("peer did not call back in time");
                        Attempt::Failed
                    }
                }
            }
            (Reply::Refused(refusal), _) => {
                bump(&self.shared.counters.refused_by_peer);
                warn!(%addr, reason = %refusal, "peer refused our connection");
                Attempt::Failed
            }
            (reply, _) => {
                warn!(%addr, ?reply, "peer disagrees on which side dials; check server ids");
                Attempt::Failed
            }
        }
    }

    async fn dial(
        &self,
        addr: std::net::SocketAddr,
        hello: &Hello,
    ) -> Result<(Stream, Reply), HandshakeError> {
        let tcp = timeout(self.shared.cfg.connect_timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| HandshakeError::Timeout)??;
        let _ = tcp.set_nodelay(true);
        let mut stream = self.secure(addr, tcp).await?;
        let exchange = async {
            handshake::write_frame(&mut stream, &hello.encode()).await?;
            let body = handshake::read_frame(&mut stream).await?;
            Reply::decode(&body)
        };
        let reply = timeout(self.shared.cfg.handshake_timeout, exchange)
            .await
            .map_err(|_| HandshakeError::Timeout)?;
        match reply {
            // TLS 1.3: the acceptor checks our certificate after our side of the handshake
            // completed, so its refusal (an alert) shows up here, on the first read.
            Err(HandshakeError::Io(e))
                if self.shared.cfg.tls.is_some() && e.kind() == std::io::ErrorKind::InvalidData =>
            {
                let host = self.shared.tls_host(self.peer, addr);
                self.tls_dial_failed(addr, &host, &e);
                Err(HandshakeError::Io(e))
            }
            reply => Ok((stream, reply?)),
        }
    }

    /// Runs one established connection until it ends.
    async fn session(&mut self, stream: Stream) -> SessionEnd {
        let started = Instant::now();
        let _ = stream.set_nodelay(true);
        let peer_addr = stream.peer_addr().ok();
        let (rd, wr) = stream.into_split();
        let Some(outbox) = self.outbox.take() else {
            return SessionEnd::Shutdown;
        };
        let codec = FrameCodec::new(self.shared.cfg.max_frame_len);
        let mut reader = AbortOnDrop(tokio::spawn(
            read_loop(self.shared.clone(), self.peer, rd, codec).in_current_span(),
        ));
        let mut writer = AbortOnDrop(tokio::spawn(
            write_loop(wr, codec, self.stash.take(), outbox, self.acks()).in_current_span(),
        ));
        self.dial_requested = false;
        self.link_connected(true);
        bump(&self.shared.counters.established);
        info!(addr = ?peer_addr, "connection established");

        let (mut reader_done, mut writer_done) = (false, false);
        let end = loop {
            tokio::select! {
                _ = self.shared.shutdown.cancelled() => break SessionEnd::Shutdown,
                _ = &mut reader.0, if !reader_done => {
                    reader_done = true;
                    break SessionEnd::PeerGone;
                }
                w = &mut writer.0, if !writer_done => {
                    writer_done = true;
                    if let Ok(Err(e)) = w {
                        info!(error = %e, "write failed; closing connection");
                    }
                    break SessionEnd::PeerGone;
                }
                c = self.ctrl.recv() => match c {
                    None => break SessionEnd::Shutdown,
                    Some(Control::Adopt(s)) => {
                        info!("peer reconnected; replacing the connection");
                        break SessionEnd::Replaced(s);
                    }
                    Some(Control::Disconnect) => break SessionEnd::Closed,
                    Some(Control::Overflow { generation }) if generation == self.generation => {
                        bump(&self.shared.counters.overflows);
                        warn!("outbox full: peer too slow; dropping the connection");
                        break SessionEnd::Closed;
                    }
                    Some(Control::Overflow { .. }) => {}
                    Some(Control::DialRequested) => {
                        if started.elapsed() >= self.shared.cfg.connect_back_wait {
                            info!("peer asks for a connection it lost; reconnecting");
                            self.dial_requested = true;
                            break SessionEnd::Closed;
                        }
                    }
                },
            }
        };
        reader.0.abort();
        writer.0.abort();
        if !reader_done {
            let _ = (&mut reader.0).await;
        }
        if !writer_done {
            let _ = (&mut writer.0).await;
        }
        self.link_connected(false);
        info!("connection closed");
        end
    }

    fn link_connected(&self, up: bool) {
        self.handle.connected.store(up, Ordering::Release);
    }

    /// Discards the queue: a new outbox of a new generation replaces the old one.
    fn reset_outbox(&mut self) {
        let (tx, rx) = mpsc::channel(self.shared.cfg.outbox_len.max(1));
        let mut slot = self.handle.outbox.lock();
        let generation = slot.generation.wrapping_add(1);
        *slot = Outbox {
            generation,
            tx,
            overflow_signalled: false,
            unwritten_acks: Default::default(),
        };
        drop(slot);
        self.generation = generation;
        self.outbox = Some(rx);
        self.stash = None;
    }

    /// The current generation's unwritten acknowledgements, for its writer (`ack` INV-3).
    fn acks(&self) -> WriterAcks {
        WriterAcks {
            handle: self.handle.clone(),
            generation: self.generation,
        }
    }

    /// Emits `ConnectionLost` for the quorum channel. False on shutdown.
    async fn report_lost(&self) -> bool {
        self.channel != Channel::Quorum
            || self.emit(Event::ConnectionLost { peer: self.peer }).await
    }

    /// Emits `Unreachable` for the election channel (INV-5). False on shutdown.
    async fn report_unreachable(&self) -> bool {
        self.channel != Channel::Election || self.emit(Event::Unreachable { peer: self.peer }).await
    }

    async fn emit(&self, event: Event) -> bool {
        tokio::select! {
            _ = self.shared.shutdown.cancelled() => false,
            sent = self.shared.events.send(event) => sent.is_ok(),
        }
    }
}
