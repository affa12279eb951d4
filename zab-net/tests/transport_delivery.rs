//! Transports on loopback with ephemeral ports: messages flow between three servers, FIFO per
//! link, one connection per pair and channel; a restarted server is reconnected; a
//! `disconnect` is reported to both ends and the next send reconnects. (Strangers, bad frames
//! and slow or silent peers: `transport.rs`.)

// Test helpers outside #[test] fns fail loudly on purpose.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use common::transport::{
    cluster, config, expect_silence, init_tracing, next_any_event, next_event, next_message,
    notification, CLUSTER,
};
use zab_core::{Epoch, Message, RequestId, ServerId, Zxid};
use zab_net::handshake::Channel;
use zab_net::transport::{Event, SendError, Transport};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_transports_exchange_messages_in_order_on_one_connection_per_pair() {
    init_tracing();
    let mut nodes = cluster(&[1, 2, 3]).await;
    const N: u64 = 200;
    // Everyone sends to everyone, on both channels, at the same time.
    for (t, _) in &nodes {
        for to in [1, 2, 3]
            .map(ServerId)
            .into_iter()
            .filter(|s| *s != t.sid())
        {
            for round in 0..N {
                t.send(to, Message::Ping { round }).unwrap();
                t.send(to, notification(round)).unwrap();
            }
        }
    }
    for (t, rx) in &mut nodes {
        let me = t.sid();
        let mut pings: BTreeMap<ServerId, u64> = BTreeMap::new();
        let mut votes: BTreeMap<ServerId, u64> = BTreeMap::new();
        for _ in 0..(4 * N) {
            let (from, msg) = next_message(rx).await;
            assert_ne!(from, me);
            match msg {
                Message::Ping { round } => {
                    let next = pings.entry(from).or_default();
                    assert_eq!(round, *next, "quorum FIFO from {from} to {me}");
                    *next += 1;
                }
                Message::Notification(n) => {
                    let next = votes.entry(from).or_default();
                    assert_eq!(n.round, *next, "election FIFO from {from} to {me}");
                    *next += 1;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(pings.values().chain(votes.values()).all(|n| *n == N));
    }
    for (t, rx) in &mut nodes {
        expect_silence(rx, Duration::from_millis(300)).await;
        for peer in [1, 2, 3]
            .map(ServerId)
            .into_iter()
            .filter(|s| *s != t.sid())
        {
            assert!(t.is_connected(peer, Channel::Quorum));
            assert!(t.is_connected(peer, Channel::Election));
        }
        // 2 peers × 2 channels, each connection counted once on each end, none replaced.
        assert_eq!(t.stats().established, 4, "sid {}", t.sid());
    }
    for (t, _) in nodes {
        t.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_transport_is_reconnected() {
    init_tracing();
    let mut nodes = cluster(&[1, 2, 3]).await;
    for (from, to) in [(0usize, 1usize), (1, 0), (2, 0), (1, 2)] {
        let to_sid = nodes[to].0.sid();
        nodes[from]
            .0
            .send(to_sid, Message::Ping { round: 1 })
            .unwrap();
        assert_eq!(
            next_message(&mut nodes[to].1).await.1,
            Message::Ping { round: 1 }
        );
    }
    // Kill sid 2 (between 1 and 3): both neighbours lose their quorum connection to it.
    let (two, _) = nodes.remove(1);
    let two_addrs = two.local_addrs();
    two.shutdown().await;
    for (_, rx) in &mut nodes {
        assert_eq!(
            next_event(rx).await,
            Event::ConnectionLost { peer: ServerId(2) }
        );
    }
    // While it is down, sends are queued; sid 1 (lower) and sid 3 (higher) both try.
    nodes[0]
        .0
        .send(ServerId(2), Message::Ping { round: 10 })
        .unwrap();
    nodes[1]
        .0
        .send(ServerId(2), Message::Ping { round: 30 })
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Restart it on the same ports.
    let (two, mut two_rx) = Transport::start(config(2, CLUSTER, &[1, 2, 3], two_addrs))
        .await
        .unwrap();
    for (t, _) in &nodes {
        two.set_peer_addrs(t.sid(), t.local_addrs()).unwrap();
    }
    let mut got = vec![
        next_message(&mut two_rx).await,
        next_message(&mut two_rx).await,
    ];
    got.sort_by_key(|(from, _)| *from);
    assert_eq!(
        got,
        vec![
            (ServerId(1), Message::Ping { round: 10 }),
            (ServerId(3), Message::Ping { round: 30 })
        ]
    );
    // And back.
    two.send(ServerId(1), Message::Ping { round: 21 }).unwrap();
    two.send(ServerId(3), Message::Ping { round: 23 }).unwrap();
    assert_eq!(
        next_message(&mut nodes[0].1).await,
        (ServerId(2), Message::Ping { round: 21 })
    );
    assert_eq!(
        next_message(&mut nodes[1].1).await,
        (ServerId(2), Message::Ping { round: 23 })
    );
    two.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnect_reports_loss_and_reconnects_on_demand() {
    init_tracing();
    let mut nodes = cluster(&[1, 2]).await;
    nodes[0]
        .0
        .send(ServerId(2), Message::Ping { round: 1 })
        .unwrap();
    assert_eq!(
        next_message(&mut nodes[1].1).await.1,
        Message::Ping { round: 1 }
    );
    nodes[0].0.disconnect(ServerId(2));
    assert_eq!(
        next_event(&mut nodes[0].1).await,
        Event::ConnectionLost { peer: ServerId(2) }
    );
    assert_eq!(
        next_event(&mut nodes[1].1).await,
        Event::ConnectionLost { peer: ServerId(1) }
    );
    nodes[0]
        .0
        .send(ServerId(2), Message::Ping { round: 2 })
        .unwrap();
    assert_eq!(
        next_message(&mut nodes[1].1).await,
        (ServerId(1), Message::Ping { round: 2 })
    );
    assert_eq!(
        nodes[0].0.send(ServerId(9), Message::UpToDate),
        Err(SendError::UnknownPeer(ServerId(9)))
    );
    let huge = Message::Request {
        request_id: RequestId(1),
        payload: Bytes::from(vec![0u8; zab_core::codec::MAX_DATA_LEN + 100]),
    };
    assert!(matches!(
        nodes[0].0.send(ServerId(2), huge),
        Err(SendError::TooLarge { .. })
    ));
    // Nothing was lost: the connection is still up and in order.
    nodes[0]
        .0
        .send(ServerId(2), Message::Ping { round: 3 })
        .unwrap();
    assert_eq!(
        next_event(&mut nodes[1].1).await,
        Event::Message {
            from: ServerId(1),
            msg: Message::Ping { round: 3 }
        }
    );
}

/// Waits for `Unreachable { peer }`, skipping other events.
async fn until_unreachable(rx: &mut tokio::sync::mpsc::Receiver<Event>, peer: u64) {
    while next_any_event(rx).await
        != (Event::Unreachable {
            peer: ServerId(peer),
        })
    {}
}

/// `link` INV-5: a peer whose process ends closes its election connection, and a dial to it is
/// refused; both are reported as `Unreachable` (what lets a LOOKING voter skip the finalize
/// wait after a leader is killed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_stops_is_reported_unreachable() {
    init_tracing();
    let mut nodes = cluster(&[1, 2]).await;
    let (two, mut two_rx) = nodes.pop().unwrap();
    let (one, mut one_rx) = nodes.pop().unwrap();
    two.send(ServerId(1), notification(1)).unwrap();
    assert_eq!(next_message(&mut one_rx).await.0, ServerId(2));
    one.send(ServerId(2), notification(2)).unwrap();
    assert_eq!(next_message(&mut two_rx).await.0, ServerId(1));
    two.shutdown().await;
    until_unreachable(&mut one_rx, 2).await;
    // Nothing listens any more: the next dial is refused.
    one.send(ServerId(2), notification(3)).unwrap();
    until_unreachable(&mut one_rx, 2).await;
    one.shutdown().await;
}

/// A learner's cumulative ACKs to a peer that reads nothing fold into one (transport `ack`):
/// four outboxes' worth of them never overflow the link, and once the peer is up it gets one
/// ACK carrying the highest zxid, where the first was queued (before the PING queued after
/// it), then the rest in order. A NEWLEADER ACK (counter 0) is not folded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_to_a_peer_that_is_down_fold_into_one_instead_of_overflowing() {
    init_tracing();
    let mut nodes = cluster(&[1, 2, 3]).await;
    let (two, _) = nodes.remove(1);
    let two_addrs = two.local_addrs();
    two.shutdown().await;
    let three = &nodes[1].0;
    let ack = |counter| Message::Ack {
        zxid: Zxid::new(Epoch(5), counter),
    };
    let cap = u32::try_from(three.outbox_capacity()).unwrap();
    three.send(ServerId(2), ack(0)).unwrap();
    three.send(ServerId(2), ack(1)).unwrap();
    three.send(ServerId(2), Message::Ping { round: 1 }).unwrap();
    for counter in 2..=4 * cap {
        three.send(ServerId(2), ack(counter)).unwrap();
    }
    three.send(ServerId(2), Message::Ping { round: 2 }).unwrap();
    let queued = three.outbox_len(ServerId(2), Channel::Quorum).unwrap();
    assert!(queued <= 4, "{queued} messages queued");
    assert_eq!(three.stats().acks_folded, u64::from(4 * cap - 1));

    let (two, mut two_rx) = Transport::start(config(2, CLUSTER, &[1, 2, 3], two_addrs))
        .await
        .unwrap();
    for (t, _) in &nodes {
        two.set_peer_addrs(t.sid(), t.local_addrs()).unwrap();
    }
    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(next_message(&mut two_rx).await);
    }
    let from3 = |m| (ServerId(3), m);
    assert_eq!(
        got,
        vec![
            from3(ack(0)),
            from3(ack(4 * cap)),
            from3(Message::Ping { round: 1 }),
            from3(Message::Ping { round: 2 }),
        ]
    );
    expect_silence(&mut two_rx, Duration::from_millis(300)).await;
    // Written: the next ACK is queued and written again.
    three.send(ServerId(2), ack(4 * cap + 1)).unwrap();
    assert_eq!(next_message(&mut two_rx).await, from3(ack(4 * cap + 1)));
    two.shutdown().await;
}
