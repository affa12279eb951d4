//! Transports on loopback facing strangers and misbehaving peers: a peer of another cluster
//! or an unknown sid is refused at the handshake; a bad frame or a slow peer costs only its
//! own connection; a peer that never answers delays nobody else. (Ordered delivery,
//! reconnection and `disconnect`: `transport_delivery.rs`.)

// Test helpers outside #[test] fns fail loudly on purpose.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use common::transport::{
    cluster, config, expect_silence, init_tracing, loopback0, next_event, next_message,
    notification, Node, CLUSTER, WAIT,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::timeout;
use zab_core::{Message, RequestId, ServerId};
use zab_net::handshake::{self, Channel, Hello, Refusal, Reply};
use zab_net::transport::{Event, PeerAddrs, SendError, Transport, TransportConfig};

/// Sid 3 (started with `cfg`) wired to sid 1, a real transport, and to sid 2, whose quorum and
/// election ports are one listener that the caller controls (it may never accept or read).
struct SilentPeerSetup {
    sender: Transport,
    sender_rx: mpsc::Receiver<Event>,
    one: Transport,
    one_rx: mpsc::Receiver<Event>,
    silent: TcpListener,
}

async fn sender_with_a_silent_peer(cfg: TransportConfig) -> SilentPeerSetup {
    let (sender, sender_rx) = Transport::start(cfg).await.unwrap();
    let (one, one_rx) = Transport::start(config(1, CLUSTER, &[1, 2, 3], loopback0()))
        .await
        .unwrap();
    one.set_peer_addrs(ServerId(3), sender.local_addrs())
        .unwrap();
    sender
        .set_peer_addrs(ServerId(1), one.local_addrs())
        .unwrap();
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    sender
        .set_peer_addrs(
            ServerId(2),
            PeerAddrs {
                quorum: addr,
                election: addr,
            },
        )
        .unwrap();
    SilentPeerSetup {
        sender,
        sender_rx,
        one,
        one_rx,
        silent,
    }
}

/// PITFALLS E5: a peer of another cluster id is refused at the handshake: it never connects,
/// none of its messages (votes included) is delivered, and the refusal names both ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_from_another_cluster_is_refused() {
    init_tracing();
    let mut nodes = cluster(&[1, 2]).await;
    let target = nodes[0].0.local_addrs();
    let (stranger, _stranger_rx) = start_a_stranger_until_refused(target).await;
    assert!(nodes[0].0.stats().refused >= 1);
    expect_silence(&mut nodes[0].1, Duration::from_millis(300)).await;
    assert!(!stranger.is_connected(ServerId(1), Channel::Quorum));

    // The refusal says why, on the wire too.
    let mut raw = TcpStream::connect(target.quorum).await.unwrap();
    let hello = Hello {
        cluster_id: 99,
        from: ServerId(2),
        to: ServerId(1),
        channel: Channel::Quorum,
    };
    let reply = handshake_reply(&mut raw, &hello).await;
    assert_eq!(
        reply,
        Reply::Refused(Refusal::ClusterMismatch {
            dialer: 99,
            acceptor: CLUSTER
        })
    );
    // An unknown sid of the right cluster is refused too.
    let mut raw = TcpStream::connect(target.election).await.unwrap();
    let hello = Hello {
        cluster_id: CLUSTER,
        from: ServerId(7),
        to: ServerId(1),
        channel: Channel::Election,
    };
    let reply = handshake_reply(&mut raw, &hello).await;
    assert_eq!(reply, Reply::Refused(Refusal::UnknownSid { sid: 7 }));
    // Garbage instead of a hello just closes the connection.
    let mut raw = TcpStream::connect(target.quorum).await.unwrap();
    raw.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    assert_closed_by_the_acceptor(&mut raw).await;

    // The cluster still works.
    nodes[1]
        .0
        .send(ServerId(1), Message::Ping { round: 9 })
        .unwrap();
    assert_eq!(
        next_message(&mut nodes[0].1).await,
        (ServerId(2), Message::Ping { round: 9 })
    );
    stranger.shutdown().await;
}

/// Starts sid 2 of another cluster, has it send to sid 1 at `target` and waits (bounded by
/// [`WAIT`]) until sid 1 has refused it; returns it with its event stream, kept open.
async fn start_a_stranger_until_refused(target: PeerAddrs) -> Node {
    // Sid 2 by number, but of another cluster.
    let (stranger, stranger_rx) = Transport::start(config(2, CLUSTER + 1, &[1, 2], loopback0()))
        .await
        .unwrap();
    stranger.set_peer_addrs(ServerId(1), target).unwrap();
    stranger
        .send(ServerId(1), Message::Ping { round: 1 })
        .unwrap();

    let deadline = tokio::time::Instant::now() + WAIT;
    while stranger.stats().refused_by_peer == 0 {
        assert!(tokio::time::Instant::now() < deadline, "never refused");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (stranger, stranger_rx)
}

/// Sends `hello` on a raw connection and returns the acceptor's reply.
async fn handshake_reply(raw: &mut TcpStream, hello: &Hello) -> Reply {
    handshake::write_frame(raw, &hello.encode()).await.unwrap();
    Reply::decode(&handshake::read_frame(raw).await.unwrap()).unwrap()
}

/// Asserts that the acceptor closes `raw` (within [`WAIT`]) without sending anything.
async fn assert_closed_by_the_acceptor(raw: &mut TcpStream) {
    let mut buf = [0u8; 16];
    let n = timeout(WAIT, raw.read(&mut buf))
        .await
        .unwrap()
        .unwrap_or(0);
    assert_eq!(n, 0, "expected the connection to close");
}

/// A fake higher-sid peer: dials `addr`, passes the handshake, returns the open stream.
async fn fake_peer(addr: SocketAddr, from: u64, to: u64) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let hello = Hello {
        cluster_id: CLUSTER,
        from: ServerId(from),
        to: ServerId(to),
        channel: Channel::Quorum,
    };
    let reply = handshake_reply(&mut s, &hello).await;
    assert_eq!(reply, Reply::Accepted);
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_frame_closes_only_its_connection() {
    init_tracing();
    let mut nodes = cluster(&[1, 2, 3]).await;
    let addr = nodes[0].0.local_addrs().quorum;
    // Sid 3 (higher than 1) connects by hand: one good frame, then an oversized one.
    let mut fake = fake_peer(addr, 3, 1).await;
    let mut good = Vec::new();
    let body = zab_core::codec::encode_to_bytes(&Message::Ping { round: 1 }).unwrap();
    good.extend_from_slice(&(body.len() as u32).to_be_bytes());
    good.extend_from_slice(&body);
    fake.write_all(&good).await.unwrap();
    fake.write_all(&u32::MAX.to_be_bytes()).await.unwrap();
    assert_eq!(
        next_event(&mut nodes[0].1).await,
        Event::Message {
            from: ServerId(3),
            msg: Message::Ping { round: 1 }
        }
    );
    assert_eq!(
        next_event(&mut nodes[0].1).await,
        Event::ConnectionLost { peer: ServerId(3) }
    );
    assert_eq!(nodes[0].0.stats().bad_frames, 1);
    let mut buf = [0u8; 8];
    let n = timeout(WAIT, fake.read(&mut buf))
        .await
        .unwrap()
        .unwrap_or(0);
    assert_eq!(n, 0, "expected the bad connection to close");

    // An undecodable body: same outcome.
    let mut fake = fake_peer(addr, 3, 1).await;
    fake.write_all(&[0, 0, 0, 3, 1, 99, 0]).await.unwrap();
    assert_eq!(
        next_event(&mut nodes[0].1).await,
        Event::ConnectionLost { peer: ServerId(3) }
    );
    assert_eq!(nodes[0].0.stats().bad_frames, 2);

    // Sid 2 is unaffected.
    nodes[1]
        .0
        .send(ServerId(1), Message::Ping { round: 2 })
        .unwrap();
    assert_eq!(
        next_message(&mut nodes[0].1).await,
        (ServerId(2), Message::Ping { round: 2 })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_peer_loses_its_connection_without_stalling_others() {
    init_tracing();
    // Sid 3 sends to 1 (a real transport) and to 2 (a socket that never reads).
    let mut cfg = config(3, CLUSTER, &[1, 2, 3], loopback0());
    cfg.outbox_len = 8;
    let SilentPeerSetup {
        sender,
        mut sender_rx,
        one: _one,
        mut one_rx,
        silent: sink,
    } = sender_with_a_silent_peer(cfg).await;
    let stuck = tokio::spawn(async move {
        let (mut s, _) = sink.accept().await.unwrap();
        let hello = handshake::read_frame(&mut s).await.unwrap();
        assert_eq!(Hello::decode(&hello).unwrap().from, ServerId(3));
        handshake::write_frame(&mut s, &Reply::Accepted.encode())
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(30)).await; // never reads
        drop(s);
    });

    let big = Message::Request {
        request_id: RequestId(0),
        payload: Bytes::from(vec![7u8; 256 * 1024]),
    };
    let mut overflowed = false;
    for i in 0..2000 {
        match sender.send(ServerId(2), big.clone()) {
            Ok(()) => {}
            Err(SendError::Overflow(peer)) => {
                assert_eq!(peer, ServerId(2));
                overflowed = true;
                break;
            }
            Err(e) => panic!("{e}"),
        }
        // Meanwhile sid 1 keeps receiving.
        sender
            .send(ServerId(1), Message::Ping { round: i })
            .unwrap();
        assert_eq!(
            next_message(&mut one_rx).await,
            (ServerId(3), Message::Ping { round: i })
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(overflowed, "the outbox to the stuck peer never filled");
    assert_eq!(
        next_event(&mut sender_rx).await,
        Event::ConnectionLost { peer: ServerId(2) }
    );
    assert_eq!(sender.stats().overflows, 1);
    sender
        .send(ServerId(1), Message::Ping { round: 10_000 })
        .unwrap();
    assert_eq!(
        next_message(&mut one_rx).await,
        (ServerId(3), Message::Ping { round: 10_000 })
    );
    stuck.abort();
}

/// PITFALLS B8 (ZOOKEEPER-2930): a peer address that never answers (a listener that never
/// accepts, so the handshake never gets its reply) costs only its own link: every link dials
/// in its own task, bounded by `connect_timeout` and `handshake_timeout`, so notifications to
/// the other peers go out at once instead of after the stuck dial gives up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_never_answers_does_not_delay_notifications_to_others() {
    init_tracing();
    let mut cfg = config(3, CLUSTER, &[1, 2, 3], loopback0());
    cfg.handshake_timeout = Duration::from_secs(5);
    cfg.connect_timeout = Duration::from_secs(5);
    // Sid 2's ports: the kernel completes the TCP handshake, nobody ever reads or answers.
    let SilentPeerSetup {
        sender,
        sender_rx: _sender_rx,
        one: _one,
        mut one_rx,
        silent,
    } = sender_with_a_silent_peer(cfg).await;

    for round in 1..=3 {
        let start = tokio::time::Instant::now();
        sender.send(ServerId(2), notification(round)).unwrap();
        sender.send(ServerId(1), notification(round)).unwrap();
        assert_eq!(
            next_message(&mut one_rx).await,
            (ServerId(3), notification(round))
        );
        let took = start.elapsed();
        assert!(
            took < Duration::from_secs(1),
            "a notification to a live peer waited {took:?} behind a dead one"
        );
    }
    drop(silent);
}
