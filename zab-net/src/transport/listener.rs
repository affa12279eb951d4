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
async fn inbound(shared: Arc<Shared>, mut stream: TcpStream, addr: SocketAddr, channel: Channel) {
    let limit = shared.cfg.handshake_timeout;
    let me = shared.cfg.sid;
    let hello = match timeout(limit, read_hello(&shared, &mut stream, channel)).await {
        Err(_) => Err(HandshakeError::Timeout),
        Ok(r) => r,
    };
    let hello = match hello {
        Ok(h) => h,
        Err(HandshakeError::Refused(refusal)) => {
            bump(&shared.counters.refused);
            warn!(%addr, reason = %refusal, "refusing peer connection");
            let reply = Reply::Refused(refusal).encode();
            let _ = timeout(limit, handshake::write_frame(&mut stream, &reply)).await;
            return;
        }
        Err(e) => {
            bump(&shared.counters.refused);
            warn!(%addr, error = %e, "bad handshake; closing connection");
            return;
        }
    };
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

async fn read_hello(
    shared: &Shared,
    stream: &mut TcpStream,
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
