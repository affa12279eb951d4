//! Conformance of the simulated quorum link to zab-net's bounded outbox (`tests::sim::net`
//! INV-N5 against `zab_net::transport` INV-2 and `Transport::send`): the same capacity and the
//! same sends to a peer that reads nothing overflow at the same send, and leave the same
//! visible outcome: the sender loses the connection once, nothing queued before the overflow
//! is ever delivered, and what is sent after the loss reaches the peer, in order, on the next
//! connection. And the same acknowledgements sent while nothing drains the link fold the same
//! way (`tests::sim::net` INV-N6 against `zab_net::transport`'s `ack`): every send queued or
//! folded, the same messages delivered once the peer is reachable. (The log's conformance
//! test, `log_conformance.rs`, does the same for the simulated disk.)

// Test code: a failed expectation aborts the test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::time::Duration;

use tests::sim::net::{Channel, Delivery, Network, Sent};
use tokio::sync::mpsc;
use tokio::time::timeout;
use zab_core::{Epoch, Message, ServerId, Zxid};
use zab_net::transport::{Event, PeerAddrs, SendError, Transport, TransportConfig};

/// The outbox capacity both sides run with.
const CAPACITY: usize = 8;
/// Messages sent after the loss.
const AFTER: u64 = 5;
/// The longest the test waits for one event.
const WAIT: Duration = Duration::from_secs(10);

const SENDER: ServerId = ServerId(3);
const RECEIVER: ServerId = ServerId(2);

/// What one side did with the script.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    /// Per send until the first overflow: queued (true) or overflowed (false).
    sends: Vec<bool>,
    /// The sender lost its connection to the receiver.
    lost: bool,
    /// The messages the receiver got, in order.
    delivered: Vec<Message>,
}

fn msg(i: u64) -> Message {
    Message::Ping { round: i }
}

/// The simulated network: nothing is delivered until the overflow and the loss are seen.
fn simulated() -> Outcome {
    let mut net = Network::with_outbox_len(CAPACITY);
    let mut sends = Vec::new();
    for i in 0.. {
        let sent = net.send(SENDER, RECEIVER, msg(i));
        sends.push(sent == Sent::Queued);
        if sent != Sent::Queued {
            assert_eq!(sent, Sent::Overflow);
            break;
        }
    }
    let lost = matches!(net.pop_notice(SENDER), Some((RECEIVER, Delivery::Lost)));
    for i in 0..AFTER {
        assert_eq!(net.send(SENDER, RECEIVER, msg(1_000 + i)), Sent::Queued);
    }
    let mut delivered = Vec::new();
    while let Some(d) = net.pop((SENDER, RECEIVER, Channel::Quorum)) {
        if let Delivery::Message(m) = d {
            delivered.push(m);
        }
    }
    Outcome {
        sends,
        lost,
        delivered,
    }
}

fn config(sid: ServerId, peer: ServerId, peer_addrs: PeerAddrs) -> TransportConfig {
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    let listen = PeerAddrs {
        quorum: any,
        election: any,
    };
    let peers = BTreeMap::from([(peer, peer_addrs)]);
    let mut cfg = TransportConfig::new(sid, 0xC0, listen, peers);
    cfg.outbox_len = CAPACITY;
    cfg.backoff_min = Duration::from_millis(10);
    cfg.backoff_max = Duration::from_millis(100);
    cfg
}

/// A loopback address nothing listens on (dials are refused: nothing drains the outbox).
fn dead_addrs() -> PeerAddrs {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    PeerAddrs {
        quorum: addr,
        election: addr,
    }
}

async fn next_event(rx: &mut mpsc::Receiver<Event>) -> Event {
    timeout(WAIT, rx.recv()).await.unwrap().unwrap()
}

/// Starts the receiver's real transport and points the sender's link at it.
async fn start_receiver(sender: &Transport) -> (Transport, mpsc::Receiver<Event>) {
    let (receiver, receiver_rx) = Transport::start(config(RECEIVER, SENDER, sender.local_addrs()))
        .await
        .unwrap();
    sender
        .set_peer_addrs(RECEIVER, receiver.local_addrs())
        .unwrap();
    (receiver, receiver_rx)
}

/// The first `n` messages the receiver gets from the sender, and any that comes within 300 ms
/// after them (none, when the link behaved).
async fn receive(rx: &mut mpsc::Receiver<Event>, n: usize) -> Vec<Message> {
    let mut delivered = Vec::new();
    while delivered.len() < n {
        if let Event::Message { from, msg } = next_event(rx).await {
            assert_eq!(from, SENDER);
            delivered.push(msg);
        }
    }
    if let Ok(Some(Event::Message { msg, .. })) =
        timeout(Duration::from_millis(300), rx.recv()).await
    {
        delivered.push(msg);
    }
    delivered
}

/// The real transport: the receiver's address is dead until the loss was reported, then its
/// real transport's.
async fn real() -> Outcome {
    let (sender, mut sender_rx) = Transport::start(config(SENDER, RECEIVER, dead_addrs()))
        .await
        .unwrap();
    let mut sends = Vec::new();
    for i in 0..=CAPACITY as u64 * 2 {
        match sender.send(RECEIVER, msg(i)) {
            Ok(()) => sends.push(true),
            Err(SendError::Overflow(peer)) => {
                assert_eq!(peer, RECEIVER);
                sends.push(false);
                break;
            }
            Err(e) => panic!("{e}"),
        }
    }
    let lost = next_event(&mut sender_rx).await == Event::ConnectionLost { peer: RECEIVER };
    let (receiver, mut receiver_rx) = start_receiver(&sender).await;
    for i in 0..AFTER {
        sender.send(RECEIVER, msg(1_000 + i)).unwrap();
    }
    // Nothing more: in particular nothing queued before the overflow.
    let delivered = receive(&mut receiver_rx, AFTER as usize).await;
    sender.shutdown().await;
    receiver.shutdown().await;
    Outcome {
        sends,
        lost,
        delivered,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_link_overflows_at_the_same_send_with_the_same_outcome_as_the_transport() {
    let sim = simulated();
    let mut expected = vec![true; CAPACITY];
    expected.push(false);
    assert_eq!(sim.sends, expected, "the simulated link");
    assert!(sim.lost);
    let after: Vec<Message> = (0..AFTER).map(|i| msg(1_000 + i)).collect();
    assert_eq!(sim.delivered, after);
    assert_eq!(
        real().await,
        sim,
        "the real transport and the simulation differ"
    );
}

fn ack(epoch: u32, counter: u32) -> Message {
    Message::Ack {
        zxid: Zxid::new(Epoch(epoch), counter),
    }
}

/// What a learner sends a leader that reads nothing: a NEWLEADER ACK, three outboxes' worth
/// of proposal ACKs and PINGACKs, a PING, ACKs of the next epoch and a PINGACK of rounds that
/// started again.
fn ack_script() -> Vec<Message> {
    let n = 3 * CAPACITY as u32;
    let mut script = vec![ack(2, 0), ack(2, 1), Message::PingAck { round: 1 }];
    for i in 2..=n {
        script.push(ack(2, i));
        script.push(Message::PingAck {
            round: u64::from(i),
        });
    }
    script.push(Message::Ping { round: 7 });
    script.extend([ack(3, 1), ack(3, 2), Message::PingAck { round: 1 }]);
    script
}

/// What the receiver gets (each send queued or folded, never overflowing).
fn expected_after_folding() -> Vec<Message> {
    let n = 3 * CAPACITY as u32;
    vec![
        ack(2, 0),
        ack(2, n),
        Message::PingAck {
            round: u64::from(n),
        },
        Message::Ping { round: 7 },
        ack(3, 1),
        ack(3, 2),
        Message::PingAck { round: 1 },
    ]
}

fn simulated_acks() -> Vec<Message> {
    let mut net = Network::with_outbox_len(CAPACITY);
    for m in ack_script() {
        assert_eq!(net.send(SENDER, RECEIVER, m), Sent::Queued);
    }
    let mut delivered = Vec::new();
    while let Some(d) = net.pop((SENDER, RECEIVER, Channel::Quorum)) {
        if let Delivery::Message(m) = d {
            delivered.push(m);
        }
    }
    delivered
}

/// The real transport: every send taken while the receiver's address is dead, then the
/// receiver started and given the link.
async fn real_acks() -> Vec<Message> {
    let (sender, _sender_rx) = Transport::start(config(SENDER, RECEIVER, dead_addrs()))
        .await
        .unwrap();
    for m in ack_script() {
        sender.send(RECEIVER, m).unwrap();
    }
    let (receiver, mut receiver_rx) = start_receiver(&sender).await;
    let delivered = receive(&mut receiver_rx, expected_after_folding().len()).await;
    sender.shutdown().await;
    receiver.shutdown().await;
    delivered
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledgements_fold_the_same_in_the_simulation_and_the_transport() {
    let sim = simulated_acks();
    assert_eq!(sim, expected_after_folding(), "the simulated link");
    assert_eq!(
        real_acks().await,
        sim,
        "the real transport and the simulation differ"
    );
}
