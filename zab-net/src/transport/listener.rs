//! The accept side: one loop per listening port, one short-lived task per inbound handshake.
//!
//! INV-1: an inbound connection reaches a link only after its hello passed every check (its
//! sid among the peers known at that moment, which may have been added at run time), and
//! only if the caller has the higher sid (then it is adopted); a caller with the lower sid is
//! answered `ConnectBack`, closed, and its link asked to dial (the higher sid's connection
//! wins, so there is one connection per pair and channel).
//! INV-2: at most `MAX_PENDING_HANDSHAKES` handshakes run at once per port, each bounded by
//! `handshake_timeout`; a refused or malformed hello is logged with the caller's address and
//! the reason, and closes that connection only.
//! INV-3: with TLS, the TLS handshake (client certificate required) completes before the hello
//! is read, within the same `handshake_timeout`; a connection that fails it, or whose
//! certificate does not name the `server.N` host of the sid its hello claims, is closed without
//! a reply, counted, and warned about (rate-limited, [`crate::tls::WarnLimit`]).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio::time::timeout;
use tracing::{debug, info, warn, Instrument};
use zab_core::ServerId;

use super::{bump, Channel, Control, Shared};
use crate::handshake::{self, Expect, HandshakeError, Hello, Reply};
use crate::tls::Stream;

/// Handshakes in progress per listener beyond which new connections are closed at once.
const MAX_PENDING_HANDSHAKES: usize = 64;

/// Accepts connections until shutdown.
pub(super) async fn accept_loop(shared: Arc<Shared>, listener: TcpListener, channel: Channel) {
    let mut handshakes = JoinSet::new();
    loop {
        tokio::select! {
            _ = shared.shutdown.cancelled() => break,
            Some(_) = handshakes.join_next(), if !handshakes.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, addr)) => {
                    if handshakes.len() >= MAX_PENDING_HANDSHAKES {
                        warn!(%addr, "too many handshakes in progress; closing connection");
                        continue;
                    }
                    handshakes.spawn(inbound(shared.clone(), stream, addr, channel).in_current_span());
                }
                Err(e) => {
                    // Typically out of file descriptors: wait a little rather than spin.
                    warn!(error = %e, "accept failed");
                    tokio::select! {
                        _ = shared.shutdown.cancelled() => break,
                        _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                    }
                }
            },
        }
    }
    handshakes.shutdown().await;
}

/// Runs the acceptor's side of one handshake and hands the connection on.
async fn inbound(shared: Arc<Shared>, tcp: TcpStream, addr: SocketAddr, channel: Channel) {
    let limit = shared.cfg.handshake_timeout;
    let me = shared.cfg.sid;
    let exchange = async {
        let mut stream = secure(&shared, tcp, addr).await?;
        let hello = read_hello(&shared, &mut stream, channel).await;
        Some((stream, hello))
    };
    let (mut stream, hello) = match timeout(limit, exchange).await {
        Err(_) => {
            // A TLS handshake that never finished counts as a TLS refusal.
            if shared.cfg.tls.is_some() {
                refuse_tls(
                    &shared,
                    addr,
                    "the handshake timed out",
                    TlsRefusal::Handshake,
                );
            }
            return;
        }
        Ok(None) => return,
        Ok(Some(r)) => r,
    };
    let hello = match hello {
        Ok(h) => h,
        Err(HandshakeError::Refused(refusal)) => {
            bump(&shared.counters.refused);
            count_hello_refusal(&shared);
            warn!(%addr, reason = %refusal, "refusing peer connection");
            let reply = Reply::Refused(refusal).encode();
            let _ = timeout(limit, handshake::write_frame(&mut stream, &reply)).await;
            return;
        }
        Err(e) => {
            bump(&shared.counters.refused);
            count_hello_refusal(&shared);
            warn!(%addr, error = %e, "bad handshake; closing connection");
            return;
        }
    };
    if !names_claimed_server(&shared, &stream, &hello, channel, addr) {
        return;
    }
    let Some(link) = shared.link(hello.from, channel) else {
        // validate() checked that the sid is known, and known sids keep their links (INV-5).
        warn!(%addr, from = hello.from.0, "no link for a validated peer; closing");
        return;
    };
    if hello.from > me {
        let accepted = Reply::Accepted.encode();
        match timeout(limit, handshake::write_frame(&mut stream, &accepted)).await {
            Ok(Ok(())) => {
                info!(%addr, peer = hello.from.0, "accepted connection");
                let _ = link.ctrl.send(Control::Adopt(stream));
            }
            Ok(Err(e)) => debug!(%addr, error = %e, "peer left during handshake"),
            Err(_) => debug!(%addr, "handshake reply timed out"),
        }
    } else {
        debug!(%addr, peer = hello.from.0, "lower sid called; asking to connect back");
        let back = Reply::ConnectBack.encode();
        let _ = timeout(limit, handshake::write_frame(&mut stream, &back)).await;
        let _ = link.ctrl.send(Control::DialRequested);
    }
}

/// The acceptor's TLS handshake, when the transport has TLS (INV-3). `None`: refused.
async fn secure(shared: &Shared, tcp: TcpStream, addr: SocketAddr) -> Option<Stream> {
    let _ = tcp.set_nodelay(true);
    let Some(tls) = &shared.cfg.tls else {
        return Some(Stream::Plain(tcp));
    };
    match tls.accept(tcp).await {
        Ok(stream) => Some(stream),
        Err(e) => {
            refuse_tls(shared, addr, &e.to_string(), TlsRefusal::Handshake);
            None
        }
    }
}

/// With TLS: whether the certificate of `stream` names the host of the server its hello
/// claims (INV-3); refuses it (counted, warned) when not. Always true without TLS.
fn names_claimed_server(
    shared: &Shared,
    stream: &Stream,
    hello: &Hello,
    channel: Channel,
    addr: SocketAddr,
) -> bool {
    let Some(tls) = &shared.cfg.tls else {
        return true;
    };
    let known = shared.addr(hello.from, channel).unwrap_or(addr);
    let host = shared.tls_host(hello.from, known);
    match tls.check_name(stream, &host) {
        Ok(()) => true,
        Err(why) => {
            let reason = format!("it claims to be server.{} but {why}", hello.from.0);
            refuse_tls(shared, addr, &reason, TlsRefusal::Name);
            false
        }
    }
}

/// Which TLS check refused a peer.
#[derive(Clone, Copy)]
enum TlsRefusal {
    /// The TLS handshake failed.
    Handshake,
    /// The certificate does not name the claimed server.
    Name,
}

/// Counts a TLS refusal and warns about it (rate-limited per address, INV-3).
fn refuse_tls(shared: &Shared, addr: SocketAddr, reason: &str, what: TlsRefusal) {
    bump(&shared.counters.tls_refused);
    if let Some(m) = &shared.cfg.metrics {
        match what {
            TlsRefusal::Handshake => m.tls.inc(),
            TlsRefusal::Name => m.name.inc(),
        }
    }
    if let Some(quiet) = shared.warn_limit.due(addr.ip()) {
        warn!(
            %addr,
            reason,
            repeats = quiet,
            "refusing peer connection: TLS check failed (a member needs a certificate issued \
             by the cluster CA that names its server.N host); nothing of the peer protocol was \
             exchanged"
        );
    }
}

fn count_hello_refusal(shared: &Shared) {
    if let Some(m) = &shared.cfg.metrics {
        m.hello.inc();
    }
}

async fn read_hello(
    shared: &Shared,
    stream: &mut Stream,
    channel: Channel,
) -> Result<Hello, HandshakeError> {
    let body = handshake::read_frame(stream).await?;
    let hello = Hello::decode(&body)?;
    // The peers known now: the set grows at run time (transport INV-5).
    let known: BTreeSet<ServerId> = shared.peers.read().keys().copied().collect();
    hello.validate(&Expect {
        me: shared.cfg.sid,
        cluster_id: shared.cfg.cluster_id,
        members: &known,
        channel,
    })?;
    Ok(hello)
}
