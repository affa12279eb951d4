//! Transports whose peers change while they run (`Transport::set_peers`): a sid added at run
//! time is refused before and accepted after, and exchanges messages both ways whichever side
//! dials; a changed address is used on the next dial; a sid that left the configuration keeps
//! its links.

// Test helpers outside #[test] fns fail loudly on purpose.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::transport::{
    cluster, config, init_tracing, loopback0, next_event, next_message, notification, Node,
    CLUSTER, WAIT,
};
use tokio::time::{sleep, timeout};
use zab_core::{Message, ServerId};
use zab_net::handshake::Channel;
use zab_net::transport::{Event, PeerAddrs, Transport};

/// The address book `{sid: where it listens}` of `nodes`.
fn book(nodes: &[&Node]) -> BTreeMap<ServerId, PeerAddrs> {
    nodes
        .iter()
        .map(|(t, _)| (t.sid(), t.local_addrs()))
        .collect()
}

/// Starts `sid` knowing `peers` (with their real addresses).
async fn start_knowing(sid: u64, peers: &[&Node]) -> Node {
    let sids: Vec<u64> = peers.iter().map(|(t, _)| t.sid().0).collect();
    let node = Transport::start(config(sid, CLUSTER, &sids, loopback0()))
        .await
        .unwrap();
    node.0.set_peers(&book(peers));
    node
}

/// The nodes of `cluster`, by position.
fn owned<const N: usize>(nodes: Vec<Node>) -> [Node; N] {
    match nodes.try_into() {
        Ok(all) => all,
        Err(v) => panic!("expected {N} nodes, got {}", v.len()),
    }
}

/// Waits (bounded by `WAIT`) until `cond` holds.
async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    timeout(WAIT, async {
        while !cond() {
            sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting until {what}"));
}

/// `from` sends a ping (quorum channel) and a notification (election channel) to `to`, which
/// receives both from `from`.
async fn exchange(from: &Node, to: &mut Node, round: u64) {
    let to_sid = to.0.sid();
    from.0.send(to_sid, Message::Ping { round }).unwrap();
    from.0.send(to_sid, notification(round)).unwrap();
    let mut got = vec![next_message(&mut to.1).await, next_message(&mut to.1).await];
    got.sort_by_key(|(_, m)| matches!(m, Message::Notification(_)));
    let from_sid = from.0.sid();
    assert_eq!(
        got,
        vec![
            (from_sid, Message::Ping { round }),
            (from_sid, notification(round))
        ],
        "{from_sid} -> {to_sid}"
    );
}

/// Sids 2 and 3 start as a pair; sid 1 (lower than both: they dial it and carry the
/// connections) and sid 4 (higher: it dials them, and they accept its hellos) are added at run
/// time. Before sid 4 is added its hello is refused and its message waits in its outbox.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_added_at_run_time_exchange_messages_both_ways() {
    init_tracing();
    let [mut two, mut three] = owned(cluster(&[2, 3]).await);
    let mut one = start_knowing(1, &[&two, &three]).await;
    let mut four = start_knowing(4, &[&two, &three]).await;

    // Unknown to sid 2 yet: refused at the handshake, nothing delivered.
    four.0
        .send(ServerId(2), Message::Ping { round: 40 })
        .unwrap();
    until("sid 2 refused sid 4", || two.0.stats().refused >= 1).await;
    until("sid 4 saw the refusal", || {
        four.0.stats().refused_by_peer >= 1
    })
    .await;
    assert!(!two.0.is_connected(ServerId(4), Channel::Quorum));

    // The configuration {1, 2, 3, 4} comes into force on sids 2 and 3.
    let all = book(&[&one, &two, &three, &four]);
    two.0.set_peers(&all);
    three.0.set_peers(&all);
    // Sid 4's queued ping goes out on its next retry, now accepted.
    assert_eq!(
        next_message(&mut two.1).await,
        (ServerId(4), Message::Ping { round: 40 })
    );

    for (round, old) in [(2u64, &mut two), (3, &mut three)] {
        exchange(old, &mut one, round).await;
        exchange(&one, old, 10 + round).await;
        exchange(old, &mut four, 20 + round).await;
        exchange(&four, old, 30 + round).await;
    }
    for peer in [ServerId(1), ServerId(4)] {
        for channel in [Channel::Quorum, Channel::Election] {
            assert!(two.0.is_connected(peer, channel), "2-{peer} {channel}");
            assert!(three.0.is_connected(peer, channel), "3-{peer} {channel}");
        }
    }
}

/// Sid 1 restarts on other ports (its old ones stay taken); sid 2 (the higher sid, so the one
/// that dials) keeps dialing the old address until `set_peers` names the new one, and its
/// queued message goes out on the next dial, to the new address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_address_is_used_on_the_next_dial() {
    init_tracing();
    let [mut old_one, mut two] = owned(cluster(&[1, 2]).await);
    exchange(&two, &mut old_one, 1).await;
    let old = old_one.0.local_addrs();
    old_one.0.shutdown().await;
    assert_eq!(
        next_event(&mut two.1).await,
        Event::ConnectionLost { peer: ServerId(1) }
    );
    // Hold the old ports: the restarted sid 1 gets others, and a dial to the old quorum port
    // is seen here.
    let held_quorum = tokio::net::TcpListener::bind(old.quorum).await.unwrap();
    let _held_election = tokio::net::TcpListener::bind(old.election).await.unwrap();

    two.0.send(ServerId(1), Message::Ping { round: 5 }).unwrap();
    let (dial, _) = timeout(WAIT, held_quorum.accept()).await.unwrap().unwrap();
    drop(dial);

    let mut one = start_knowing(1, &[&two]).await;
    assert_ne!(one.0.local_addrs().quorum, old.quorum);
    two.0.set_peers(&book(&[&one]));
    assert_eq!(
        next_message(&mut one.1).await,
        (ServerId(2), Message::Ping { round: 5 })
    );
    exchange(&two, &mut one, 6).await;
    exchange(&one, &mut two, 7).await;
}

/// Sid 3 leaves the configuration of sid 1: its connections stay, and after one is dropped
/// both sides still reach each other (sid 1 still accepts sid 3's hellos). An unknown address
/// (port 0) for sid 2 does not replace the known one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_left_keeps_its_links() {
    init_tracing();
    let [mut one, mut two, mut three] = owned(cluster(&[1, 2, 3]).await);
    exchange(&three, &mut one, 1).await;

    let only_two = BTreeMap::from([(ServerId(2), PeerAddrs::UNKNOWN)]);
    one.0.set_peers(&only_two);
    assert!(one.0.is_connected(ServerId(3), Channel::Quorum));
    exchange(&one, &mut three, 2).await;
    exchange(&three, &mut one, 3).await;

    // A new quorum connection (the loss reported on both ends, so no ping goes out on the old
    // one): sid 3 dials (it is higher), and sid 1 accepts a sid it no longer lists.
    let refused = one.0.stats().refused;
    one.0.disconnect_channel(ServerId(3), Channel::Quorum);
    let lost = |peer| Event::ConnectionLost {
        peer: ServerId(peer),
    };
    assert_eq!(next_event(&mut one.1).await, lost(3));
    assert_eq!(next_event(&mut three.1).await, lost(1));
    three
        .0
        .send(ServerId(1), Message::Ping { round: 4 })
        .unwrap();
    assert_eq!(
        next_message(&mut one.1).await,
        (ServerId(3), Message::Ping { round: 4 })
    );
    one.0.send(ServerId(3), Message::Ping { round: 5 }).unwrap();
    assert_eq!(
        next_message(&mut three.1).await,
        (ServerId(1), Message::Ping { round: 5 })
    );
    assert_eq!(one.0.stats().refused, refused);

    // Sids 1 and 2 have not talked yet. Sid 1 (lower) dials sid 2's known address, not port 0,
    // to ask for a call back.
    exchange(&one, &mut two, 6).await;
    exchange(&two, &mut one, 7).await;
}
