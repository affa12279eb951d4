//! Unit tests of the simulation's own models (disk, network), independent of the core.

// Test code: a failed expectation aborts the test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use bytes::Bytes;
use tests::sim::disk::{Disk, Snapshot};
use tests::sim::net::{Delivery, Network};
use zab_core::{
    Epoch, LearnerType, Membership, MembershipChange, Message, ServerId, Txn, TxnKind, Zxid,
};

fn txn(e: u32, c: u32) -> Txn {
    Txn::app(Zxid::new(Epoch(e), c), Bytes::from(format!("{e}:{c}")))
}

#[test]
fn disk_loses_unsynced_appends_on_crash() {
    let mut d = Disk::default();
    assert!(d.append(txn(1, 1)));
    assert!(d.append(txn(1, 2)));
    assert!(!d.append(txn(1, 2)), "the log grows strictly");
    assert_eq!(d.fsync(1), Some(Zxid::new(Epoch(1), 1)));
    d.crash();
    assert_eq!(d.durable_upto(), Zxid::new(Epoch(1), 1));
    assert_eq!(d.load().0.log_index, vec![Zxid::new(Epoch(1), 1)]);
}

#[test]
fn truncate_flushes_in_order_then_cuts() {
    let mut d = Disk::default();
    for c in 1..=4 {
        assert!(d.append(txn(1, c)));
    }
    d.fsync(1);
    d.truncate(Zxid::new(Epoch(1), 2));
    assert_eq!(d.log.len(), 2);
    assert!(d.pending.is_empty(), "the kept records are durable (L2)");
    assert_eq!(
        d.fsync(0),
        Some(Zxid::new(Epoch(1), 4)),
        "the pre-truncate sync of 1:2..=1:4 is owed, naming the removed 1:4 as the real \
         writer does (L3)"
    );
    assert!(d.append(txn(2, 1)));
}

#[test]
fn snap_install_resets_the_log_and_orders_later_appends() {
    let mut d = Disk::default();
    assert!(d.append(txn(1, 1)));
    d.fsync(1);
    let snap = Snapshot::of(&[txn(1, 1), txn(1, 2), txn(1, 3)]);
    d.incoming = Some((snap.zxid, snap.encode().into()));
    assert!(d.end_snapshot(snap.zxid).is_some());
    assert!(
        d.append(txn(2, 1)),
        "appends after EndSnapshot queue behind the install"
    );
    assert!(d.pending.is_empty());
    d.crash();
    assert_eq!(
        d.snapshot_zxid(),
        Zxid::ZERO,
        "a crash before the install keeps the old state"
    );
    let mut d2 = Disk {
        incoming: Some((snap.zxid, snap.encode().into())),
        ..Disk::default()
    };
    d2.end_snapshot(snap.zxid);
    assert!(d2.append(txn(2, 1)));
    assert_eq!(d2.finish_install().map(|s| s.zxid), Some(snap.zxid));
    assert!(d2.log.is_empty());
    assert_eq!(d2.pending.len(), 1);
    assert_eq!(d2.fsync(1), Some(Zxid::new(Epoch(2), 1)));
    let (durable, state) = d2.load();
    assert_eq!(durable.snapshot_zxid, snap.zxid);
    assert_eq!(state.len(), 3);
    assert_eq!(durable.log_tail.len(), 1);
}

/// INV-D5: a snapshot keeps each txn's kind and the committed configuration through its
/// encoding; a restart loads that configuration, and a data dir that joined with a helper's
/// configuration loads the helper's until a snapshot carries one. Truncated or corrupted bytes
/// are refused, not misread.
#[test]
fn snapshots_carry_txn_kinds_and_the_committed_configuration() {
    let types: std::collections::BTreeMap<ServerId, LearnerType> = (1..=3)
        .map(|i| (ServerId(i), LearnerType::Participant))
        .collect();
    let bootstrap = Membership::bootstrap(&types, &Default::default());
    let change = MembershipChange::Add {
        sid: ServerId(4),
        learner_type: LearnerType::Observer,
        address: "sim-4".into(),
    };
    let mut grown = bootstrap.changed(&change).unwrap();
    grown.version = Zxid::new(Epoch(1), 2);
    let txns = vec![txn(1, 1), grown.to_txn(grown.version), txn(1, 3)];
    let snap = Snapshot::of(&txns).carrying(Some(grown.clone()));
    let decoded = Snapshot::decode(snap.zxid, snap.encode()).unwrap();
    assert_eq!(decoded, snap);
    assert_eq!(decoded.txns[1].kind, TxnKind::Membership);
    let bytes = snap.encode();
    for cut in 0..bytes.len() {
        let _ = Snapshot::decode(snap.zxid, bytes.slice(..cut));
    }
    let mut bad_kind = bytes.to_vec();
    let first_txn = bytes.len() - txns.iter().map(|t| 13 + t.data.len()).sum::<usize>();
    bad_kind[first_txn + 8] = 7;
    assert_eq!(Snapshot::decode(snap.zxid, bad_kind.into()), None);

    let mut d = Disk::default();
    d.wipe(Some(grown.clone()));
    assert_eq!(d.load().0.membership.as_ref(), Some(&grown), "the helper's");
    d.take_snapshot(snap.clone(), 2, 5);
    let mut newer = grown.clone();
    newer.version = Zxid::new(Epoch(1), 9);
    let later = Snapshot::of(&[txn(1, 9)]).carrying(Some(newer.clone()));
    d.take_snapshot(later, 2, 5);
    let (durable, _) = d.load();
    assert_eq!(durable.membership, Some(newer), "the newest snapshot's");
    assert!(durable.needs_initial_sync);
}

#[test]
fn purge_keeps_the_log_contiguous_and_ranges_are_checked() {
    let mut d = Disk::default();
    let txns: Vec<Txn> = (1..=10).map(|c| txn(1, c)).collect();
    for t in &txns {
        assert!(d.append(t.clone()));
    }
    d.fsync(10);
    assert_eq!(
        d.read_range(Zxid::ZERO, Zxid::new(Epoch(1), 3))
            .map(|v| v.len()),
        Some(3)
    );
    let first = d.take_snapshot(Snapshot::of(&txns[..8]), 1, 2);
    assert_eq!(first, Some(Zxid::new(Epoch(1), 7)));
    assert!(d.read_range(Zxid::ZERO, Zxid::new(Epoch(1), 9)).is_none());
    assert!(d
        .read_range(Zxid::new(Epoch(1), 6), Zxid::new(Epoch(1), 9))
        .is_some());
    assert!(d
        .read_range(Zxid::new(Epoch(1), 7), Zxid::new(Epoch(1), 11))
        .is_none());
}

#[test]
fn broken_connection_is_reported_before_newer_messages() {
    let (a, b) = (ServerId(1), ServerId(2));
    let mut n = Network::default();
    n.send(a, b, Message::UpToDate);
    n.disconnect(b, a);
    n.send(a, b, Message::Ping { round: 1 });
    assert!(n.pop((a, b, tests::sim::net::Channel::Quorum)).is_none());
    assert!(matches!(n.pop_notice(a), Some((p, Delivery::Lost)) if p == b));
    n.send(a, b, Message::Ping { round: 2 });
    assert!(matches!(
        n.pop((a, b, tests::sim::net::Channel::Quorum)),
        Some(Delivery::Message(Message::Ping { round: 2 }))
    ));
    n.cut(a, b);
    n.heal(a, b);
    n.send(a, b, Message::Ping { round: 3 });
    assert!(matches!(
        n.pop((a, b, tests::sim::net::Channel::Quorum)),
        Some(Delivery::Lost)
    ));
}

/// INV-N4: a crash leaves every other node a `PeerUnreachable` notice, which comes before any
/// message the restarted node sends; a notification to a node that is down leaves one too.
#[test]
fn a_crashed_peer_is_reported_unreachable_before_its_new_messages() {
    use tests::sim::net::Channel;
    let (a, b, c) = (ServerId(1), ServerId(2), ServerId(3));
    let mut n = Network::default();
    n.crash(a, &[a, b, c]);
    n.restart(a);
    n.send(a, b, Message::Ping { round: 1 });
    assert!(matches!(
        n.pop((a, b, Channel::Quorum)),
        Some(Delivery::Lost)
    ));
    assert!(matches!(
        n.pop((a, b, Channel::Quorum)),
        Some(Delivery::Unreachable)
    ));
    assert!(matches!(
        n.pop((a, b, Channel::Quorum)),
        Some(Delivery::Message(Message::Ping { round: 1 }))
    ));
    assert!(matches!(n.pop_notice(c), Some((p, Delivery::Lost)) if p == a));
    assert!(matches!(n.pop_notice(c), Some((p, Delivery::Unreachable)) if p == a));
    assert!(n.pop_notice(c).is_none());
    n.crash(c, &[a, b, c]);
    assert!(matches!(n.pop_notice(b), Some((p, Delivery::Lost)) if p == c));
    assert!(matches!(n.pop_notice(b), Some((p, Delivery::Unreachable)) if p == c));
    let vote = zab_core::Notification {
        vote: zab_core::Vote {
            leader: b,
            zxid: Zxid::ZERO,
            peer_epoch: Epoch(0),
        },
        round: 1,
        state: zab_core::ElectionState::Looking,
        config_version: Zxid::ZERO,
    };
    n.send(b, c, Message::Notification(vote));
    assert!(matches!(n.pop_notice(b), Some((p, Delivery::Unreachable)) if p == c));
}
