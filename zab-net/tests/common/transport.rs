//! Helpers of the transport tests (`transport.rs`, `transport_delivery.rs`): transports on
//! loopback with ephemeral ports, short reconnect backoffs, and bounded waits for events.
//!
//! INV-1: every wait is bounded by [`WAIT`] (or the caller's duration) and fails loudly.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::timeout;
use zab_core::{ElectionState, Epoch, Message, Notification, ServerId, Vote, Zxid};
use zab_net::transport::{Event, PeerAddrs, Transport, TransportConfig};

/// The cluster id of every transport that [`cluster`] starts.
pub const CLUSTER: u64 = 0xC1;
/// The longest a test waits for one event.
pub const WAIT: Duration = Duration::from_secs(10);

/// A started transport and its event stream.
pub type Node = (Transport, mpsc::Receiver<Event>);

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

pub fn loopback0() -> PeerAddrs {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    PeerAddrs {
        quorum: any,
        election: any,
    }
}

pub fn config(sid: u64, cluster: u64, peers: &[u64], listen: PeerAddrs) -> TransportConfig {
    let peers = peers
        .iter()
        .filter(|p| **p != sid)
        .map(|p| (ServerId(*p), PeerAddrs::UNKNOWN))
        .collect();
    let mut cfg = TransportConfig::new(ServerId(sid), cluster, listen, peers);
    cfg.backoff_min = Duration::from_millis(10);
    cfg.backoff_max = Duration::from_millis(200);
    cfg.connect_back_wait = Duration::from_millis(500);
    cfg
}

/// Starts transports for `sids` and tells each where the others listen.
pub async fn cluster(sids: &[u64]) -> Vec<Node> {
    let mut nodes = Vec::new();
    for sid in sids {
        nodes.push(
            Transport::start(config(*sid, CLUSTER, sids, loopback0()))
                .await
                .unwrap(),
        );
    }
    let addrs: Vec<(ServerId, PeerAddrs)> = nodes
        .iter()
        .map(|(t, _)| (t.sid(), t.local_addrs()))
        .collect();
    for (t, _) in &nodes {
        for (sid, a) in &addrs {
            if *sid != t.sid() {
                t.set_peer_addrs(*sid, *a).unwrap();
            }
        }
    }
    nodes
}

pub fn notification(round: u64) -> Message {
    Message::Notification(Notification {
        vote: Vote {
            leader: ServerId(1),
            zxid: Zxid(5),
            peer_epoch: Epoch(1),
        },
        round,
        state: ElectionState::Looking,
        config_version: Zxid::ZERO,
    })
}

pub async fn next_event(rx: &mut mpsc::Receiver<Event>) -> Event {
    loop {
        let ev = next_any_event(rx).await;
        if !matches!(ev, Event::Unreachable { .. }) {
            return ev;
        }
    }
}

/// Waits for the next event, `Unreachable` reports included (`next_event` skips them: they
/// depend on whether an election connection was open).
pub async fn next_any_event(rx: &mut mpsc::Receiver<Event>) -> Event {
    timeout(WAIT, rx.recv())
        .await
        .expect("timed out waiting for an event")
        .expect("event channel closed")
}

/// Waits for the next message event, skipping `ConnectionLost`s.
pub async fn next_message(rx: &mut mpsc::Receiver<Event>) -> (ServerId, Message) {
    loop {
        if let Event::Message { from, msg } = next_event(rx).await {
            return (from, msg);
        }
    }
}

/// No message and no lost connection for `for_` (`Unreachable` reports of failed dials are
/// allowed).
pub async fn expect_silence(rx: &mut mpsc::Receiver<Event>, for_: Duration) {
    let end = tokio::time::Instant::now() + for_;
    while let Ok(Some(ev)) = tokio::time::timeout_at(end, rx.recv()).await {
        if !matches!(ev, Event::Unreachable { .. }) {
            panic!("unexpected event {ev:?}");
        }
    }
}
