//! Transports on loopback with ephemeral ports: messages flow between three servers, FIFO per
//! link, one connection per pair and channel; strangers are refused; a bad frame or a slow peer
//! costs only its own connection; a restarted server is reconnected.

// Test helpers outside #[test] fns fail loudly on purpose.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::timeout;
use zab_core::{ElectionState, Epoch, Message, Notification, RequestId, ServerId, Vote, Zxid};
use zab_net::handshake::{self, Channel, Hello, Refusal, Reply};
use zab_net::transport::{Event, PeerAddrs, SendError, Transport, TransportConfig};

const CLUSTER: u64 = 0xC1;
const WAIT: Duration = Duration::from_secs(10);

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

fn loopback0() -> PeerAddrs {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    PeerAddrs {
        quorum: any,
        election: any,
    }
}

fn config(sid: u64, cluster: u64, peers: &[u64], listen: PeerAddrs) -> TransportConfig {
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

type Node = (Transport, mpsc::Receiver<Event>);

/// Starts transports for `sids` and tells each where the others listen.
async fn cluster(sids: &[u64]) -> Vec<Node> {
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

fn notification(round: u64) -> Message {
    Message::Notification(Notification {
        vote: Vote {
            leader: ServerId(1),
            zxid: Zxid(5),
            peer_epoch: Epoch(1),
        },
        round,
        state: ElectionState::Looking,
    })
}

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

async fn next_event(rx: &mut mpsc::Receiver<Event>) -> Event {
    timeout(WAIT, rx.recv())
        .await
        .expect("timed out waiting for an event")
        .expect("event channel closed")
}

/// Waits for the next message event, skipping `ConnectionLost`s.
async fn next_message(rx: &mut mpsc::Receiver<Event>) -> (ServerId, Message) {
    loop {
        if let Event::Message { from, msg } = next_event(rx).await {
            return (from, msg);
        }
    }
}

async fn expect_silence(rx: &mut mpsc::Receiver<Event>, for_: Duration) {
    if let Ok(Some(ev)) = timeout(for_, rx.recv()).await {
        panic!("unexpected event {ev:?}");
    }
}

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

/// PITFALLS E5: a peer of another cluster id is refused at the handshake: it never connects,
/// none of its messages (votes included) is delivered, and the refusal names both ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_from_another_cluster_is_refused() {
    init_tracing();
    let mut nodes = cluster(&[1, 2]).await;
    let target = nodes[0].0.local_addrs();
    // Sid 2 by number, but of another cluster.
    let (stranger, _stranger_rx) = Transport::start(config(2, CLUSTER + 1, &[1, 2], loopback0()))
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
    handshake::write_frame(&mut raw, &hello.encode())
        .await
        .unwrap();
    let reply = Reply::decode(&handshake::read_frame(&mut raw).await.unwrap()).unwrap();
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
    handshake::write_frame(&mut raw, &hello.encode())
        .await
        .unwrap();
    let reply = Reply::decode(&handshake::read_frame(&mut raw).await.unwrap()).unwrap();
    assert_eq!(reply, Reply::Refused(Refusal::UnknownSid { sid: 7 }));
    // Garbage instead of a hello just closes the connection.
    let mut raw = TcpStream::connect(target.quorum).await.unwrap();
    raw.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 16];
    let n = timeout(WAIT, raw.read(&mut buf))
        .await
        .unwrap()
        .unwrap_or(0);
    assert_eq!(n, 0, "expected the connection to close");

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

/// A fake higher-sid peer: dials `addr`, passes the handshake, returns the open stream.
async fn fake_peer(addr: SocketAddr, from: u64, to: u64) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let hello = Hello {
        cluster_id: CLUSTER,
        from: ServerId(from),
        to: ServerId(to),
        channel: Channel::Quorum,
    };
    handshake::write_frame(&mut s, &hello.encode())
        .await
        .unwrap();
    let reply = Reply::decode(&handshake::read_frame(&mut s).await.unwrap()).unwrap();
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
