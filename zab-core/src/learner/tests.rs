//! Unit tests of the learner, driven through a `Peer` fed by hand: peer 1 follows peer 3.

use bytes::Bytes;

use crate::config::Config;
use crate::durable::DurableState;
use crate::io::{Action, Input};
use crate::message::{ElectionState, Message, Notification, Vote};
use crate::sync_plan::SyncMode;
use crate::types::{Epoch, LearnerType, Role, ServerId, Txn, Zxid};
use crate::{Peer, StepError};

fn z(e: u32, c: u32) -> Zxid {
    Zxid::new(Epoch(e), c)
}

fn txn(e: u32, c: u32) -> Txn {
    Txn::app(z(e, c), Bytes::from_static(b"t"))
}

fn durable(accepted: u32, current: u32, log: &[Txn]) -> DurableState {
    DurableState {
        accepted_epoch: Epoch(accepted),
        current_epoch: Epoch(current),
        snapshot_zxid: Zxid::ZERO,
        log_index: log.iter().map(|t| t.zxid).collect(),
        log_bytes: log.iter().map(|t| t.data.len() as u32).collect(),
        snapshot_bytes: 0,
        log_tail: log.to_vec(),
        needs_initial_sync: false,
        membership: None,
    }
}

/// Peer 1 of {1, 2, 3}, elected to follow 3, having sent its FOLLOWERINFO.
fn follower(d: DurableState) -> Peer {
    let members = (1..=3)
        .map(|s| (ServerId(s), LearnerType::Participant))
        .collect();
    let mut cfg = Config::new(ServerId(1), members);
    cfg.finalize_wait_ms = 10;
    let mut p = Peer::new(cfg, d, 0).unwrap();
    let vote = Vote {
        leader: ServerId(3),
        zxid: z(9, 9),
        peer_epoch: Epoch(9),
    };
    for from in [2, 3] {
        let n = Notification {
            vote,
            round: 1,
            state: ElectionState::Looking,
            config_version: Zxid::ZERO,
        };
        let msg = Message::Notification(n);
        p.step(Input::Message {
            from: ServerId(from),
            msg,
        })
        .unwrap();
    }
    p.step(Input::Tick { now_ms: 20 }).unwrap();
    assert_eq!((p.role(), p.leader()), (Role::Following, Some(ServerId(3))));
    p.take_actions();
    p
}

fn from_leader(p: &mut Peer, msg: Message) -> Result<Vec<Action>, StepError> {
    p.step(Input::Message {
        from: ServerId(3),
        msg,
    })?;
    Ok(p.take_actions())
}

fn leader_info(e: u32) -> Message {
    Message::LeaderInfo {
        new_epoch: Epoch(e),
        protocol_version: 1,
    }
}

fn sent(actions: &[Action]) -> Vec<&Message> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send { msg, .. } => Some(msg),
            _ => None,
        })
        .collect()
}

#[test]
fn new_epoch_is_persisted_before_ackepoch() {
    let mut p = follower(durable(1, 1, &[txn(1, 1)]));
    let a = from_leader(&mut p, leader_info(2)).unwrap();
    assert_eq!(a[0], Action::PersistAcceptedEpoch(Epoch(2)));
    let ack = Message::AckEpoch {
        current_epoch: Epoch(1),
        last_zxid: z(1, 1),
    };
    assert_eq!(
        a[1],
        Action::Send {
            to: ServerId(3),
            msg: ack
        }
    );
}

#[test]
fn equal_epoch_is_acked_without_persisting_and_lower_is_refused() {
    let mut p = follower(durable(2, 1, &[]));
    let a = from_leader(&mut p, leader_info(2)).unwrap();
    assert!(!a
        .iter()
        .any(|a| matches!(a, Action::PersistAcceptedEpoch(_))));
    assert!(matches!(sent(&a)[..], [Message::AckEpoch { .. }]));

    let mut p = follower(durable(3, 1, &[]));
    let a = from_leader(&mut p, leader_info(2)).unwrap();
    assert_eq!(p.role(), Role::Looking);
    assert!(a.contains(&Action::Disconnect { peer: ServerId(3) }));
}

#[test]
fn trunc_below_committed_is_fatal() {
    let mut p = follower(durable(1, 1, &[txn(1, 1), txn(1, 2)]));
    from_leader(&mut p, leader_info(2)).unwrap();
    // A SNAP would set the applied point; emulate a learner that applied (1,2) by a SNAP.
    let membership = p.committed_membership().clone();
    from_leader(
        &mut p,
        Message::Snap {
            zxid: z(1, 2),
            membership,
        },
    )
    .unwrap();
    from_leader(
        &mut p,
        Message::SnapChunk {
            data: Bytes::new(),
            last: true,
        },
    )
    .unwrap();
    let membership = p.committed_membership().clone();
    p.step(Input::SnapshotInstalled {
        zxid: z(1, 2),
        membership,
    })
    .unwrap();
    let err = from_leader(&mut p, Message::Trunc { zxid: z(1, 1) }).unwrap_err();
    assert!(matches!(err, StepError::TruncateBelowCommitted { .. }));
}

#[test]
fn sync_is_applied_only_at_uptodate_and_acks_wait_for_the_disk() {
    let mut p = follower(durable(1, 1, &[txn(1, 1)]));
    from_leader(&mut p, leader_info(2)).unwrap();
    from_leader(&mut p, Message::Diff { last_zxid: z(1, 2) }).unwrap();
    let a = from_leader(&mut p, Message::Proposal(txn(1, 2))).unwrap();
    assert_eq!(a, vec![Action::AppendLog(txn(1, 2))]);
    from_leader(&mut p, Message::Commit { zxid: z(1, 2) }).unwrap();
    // An outstanding proposal of the new epoch, forwarded during sync (C14).
    from_leader(&mut p, Message::Proposal(txn(2, 1))).unwrap();
    let a = from_leader(&mut p, Message::NewLeader { zxid: z(2, 0) }).unwrap();
    assert!(
        a.is_empty(),
        "nothing is acked before the sync data is durable: {a:?}"
    );
    p.step(Input::LogPersisted { upto: z(1, 2) }).unwrap();
    assert!(p.take_actions().is_empty());
    p.step(Input::LogPersisted { upto: z(2, 1) }).unwrap();
    let a = p.take_actions();
    let to = ServerId(3);
    assert_eq!(
        a,
        vec![
            Action::PersistCurrentEpoch(Epoch(2)),
            Action::Send {
                to,
                msg: Message::Ack { zxid: z(2, 0) }
            },
            Action::Send {
                to,
                msg: Message::Ack { zxid: z(2, 1) }
            },
        ]
    );
    assert!(!p.is_serving());
    let a = from_leader(&mut p, Message::UpToDate).unwrap();
    assert_eq!(a[..2], [Action::Apply(txn(1, 1)), Action::Apply(txn(1, 2))]);
    assert!(p.is_serving());
    assert_eq!(p.last_applied_zxid(), z(1, 2));
    // The outstanding proposal commits later.
    let a = from_leader(&mut p, Message::Commit { zxid: z(2, 1) }).unwrap();
    assert_eq!(a, vec![Action::Apply(txn(2, 1))]);
}

/// Peer 1 applied up to (1,2) from a local snapshot; (1,3) logged but not known committed.
fn applied_to_1_2() -> Peer {
    let d = DurableState {
        snapshot_zxid: z(1, 2),
        log_index: vec![z(1, 1), z(1, 2), z(1, 3)],
        log_bytes: vec![8; 3],
        log_tail: vec![txn(1, 3)],
        ..durable(1, 1, &[])
    };
    let mut p = follower(d);
    assert_eq!(p.last_applied_zxid(), z(1, 2));
    from_leader(&mut p, leader_info(2)).unwrap();
    let membership = p.committed_membership().clone();
    let a = from_leader(
        &mut p,
        Message::Snap {
            zxid: z(1, 1),
            membership,
        },
    )
    .unwrap();
    let report = Action::SyncReceived {
        leader: ServerId(3),
        mode: SyncMode::Snap,
        zxid: z(1, 1),
    };
    assert_eq!(
        a,
        vec![report],
        "a SNAP below the applied point is not installed"
    );
    let a = from_leader(
        &mut p,
        Message::SnapChunk {
            data: Bytes::new(),
            last: true,
        },
    )
    .unwrap();
    assert!(a.is_empty());
    p
}

#[test]
fn snap_below_applied_point_cuts_only_on_real_conflict() {
    let mut p = applied_to_1_2();
    assert!(from_leader(&mut p, Message::Proposal(txn(1, 2)))
        .unwrap()
        .is_empty());
    let a = from_leader(&mut p, Message::Proposal(txn(2, 1))).unwrap();
    let cut = Action::TruncateLog { zxid: z(1, 2) };
    assert_eq!(a, vec![cut, Action::AppendLog(txn(2, 1))]);
    assert_eq!(p.last_logged_zxid(), z(2, 1));
}

#[test]
fn snap_below_applied_point_keeps_what_the_leader_streams() {
    let mut p = applied_to_1_2();
    assert!(from_leader(&mut p, Message::Proposal(txn(1, 3)))
        .unwrap()
        .is_empty());
    assert!(from_leader(&mut p, Message::Commit { zxid: z(1, 3) })
        .unwrap()
        .is_empty());
    let a = from_leader(&mut p, Message::NewLeader { zxid: z(2, 0) }).unwrap();
    assert_eq!(a[0], Action::PersistCurrentEpoch(Epoch(2)));
    assert_eq!(p.last_logged_zxid(), z(1, 3));
    // A stream that ends before (1,3): NEWLEADER cuts it.
    let mut p = applied_to_1_2();
    let a = from_leader(&mut p, Message::NewLeader { zxid: z(2, 0) }).unwrap();
    assert_eq!(a[0], Action::TruncateLog { zxid: z(1, 2) });
}

#[test]
fn messages_from_others_and_learner_kinds_are_dropped() {
    let mut p = follower(durable(1, 1, &[]));
    p.step(Input::Message {
        from: ServerId(2),
        msg: leader_info(2),
    })
    .unwrap();
    assert!(p.take_actions().is_empty());
    let info = Message::FollowerInfo {
        accepted_epoch: Epoch(1),
        protocol_version: 1,
    };
    assert!(from_leader(&mut p, info).unwrap().is_empty());
    // Silence from the leader (its infos do not count) ends the role after initLimit.
    p.step(Input::Tick {
        now_ms: 2000 * 10 + 100,
    })
    .unwrap();
    assert_eq!(p.role(), Role::Looking);
}

/// PITFALLS E13: a follower can never append a write of its own. A client write that reaches
/// it during sync is held (nothing logged); once in broadcast, that write and the next one are
/// sent to the leader as REQUESTs and nothing is appended to the local log until the leader
/// proposes it.
#[test]
fn a_follower_forwards_client_writes_and_never_appends_them() {
    let mut p = follower(durable(1, 1, &[txn(1, 1)]));
    from_leader(&mut p, leader_info(2)).unwrap();
    from_leader(&mut p, Message::Diff { last_zxid: z(1, 1) }).unwrap();
    let write = |p: &mut Peer, id: u64| {
        p.step(Input::ClientWrite {
            request_id: crate::types::RequestId(id),
            payload: Bytes::from_static(b"w"),
        })
        .unwrap();
        p.take_actions()
    };
    let a = write(&mut p, 1);
    assert!(a.is_empty(), "a write during sync waits: {a:?}");
    from_leader(&mut p, Message::NewLeader { zxid: z(2, 0) }).unwrap();
    p.step(Input::LogPersisted { upto: z(1, 1) }).unwrap();
    let mut all = p.take_actions();
    all.extend(from_leader(&mut p, Message::UpToDate).unwrap());
    assert!(p.is_serving());
    all.extend(write(&mut p, 2));
    let requests: Vec<u64> = all
        .iter()
        .filter_map(|a| match a {
            Action::Send {
                to,
                msg: Message::Request { request_id, .. },
            } => {
                assert_eq!(*to, ServerId(3), "requests go to the leader");
                Some(request_id.0)
            }
            _ => None,
        })
        .collect();
    assert_eq!(requests, vec![1, 2], "{all:?}");
    assert!(
        !all.iter().any(|a| matches!(a, Action::AppendLog(_))),
        "a follower appended on its own: {all:?}"
    );
    // Only the leader's proposal of the write is logged.
    let a = from_leader(&mut p, Message::Proposal(txn(2, 1))).unwrap();
    assert_eq!(a, vec![Action::AppendLog(txn(2, 1))]);
}

/// PITFALLS B7 (the failover-time side of discovery): a learner's first FOLLOWERINFO is often
/// dropped because its leader has not finished its own election yet. With ZooKeeper's
/// `tickTime` of 2000 ms, the learner still resends it within `info_resend_ms` (about one
/// driver tick), not after half a tick (1 s, which used to add straight to every failover),
/// and stops resending once LEADERINFO arrived.
#[test]
fn a_learner_in_discovery_resends_its_info_within_info_resend_ms() {
    let mut p = follower(durable(1, 1, &[]));
    let is_info = |m: &&Message| matches!(m, Message::FollowerInfo { .. });
    let mut resent_at = None;
    for now_ms in (30..=2000).step_by(10) {
        p.step(Input::Tick { now_ms }).unwrap();
        if sent(&p.take_actions()).iter().any(is_info) {
            resent_at = Some(now_ms);
            break;
        }
    }
    let resent_at = resent_at.expect("FOLLOWERINFO never resent");
    assert!(
        resent_at <= 20 + 50 + 10,
        "FOLLOWERINFO resent only at {resent_at} ms (first sent at 20 ms)"
    );
    from_leader(&mut p, leader_info(2)).unwrap();
    for now_ms in (resent_at + 10..=resent_at + 1000).step_by(10) {
        p.step(Input::Tick { now_ms }).unwrap();
        let a = p.take_actions();
        assert!(
            !sent(&a).iter().any(is_info),
            "info resent after LEADERINFO"
        );
    }
}

/// INV-7: the sync mode is reported once, at the sync's first header: a TRUNC+DIFF at its
/// TRUNC (the DIFF that follows is part of it), a DIFF alone at the DIFF.
#[test]
fn the_sync_mode_is_reported_once_at_the_first_header() {
    let mut p = follower(durable(1, 1, &[txn(1, 1), txn(1, 2)]));
    from_leader(&mut p, leader_info(2)).unwrap();
    let a = from_leader(&mut p, Message::Trunc { zxid: z(1, 1) }).unwrap();
    let report = Action::SyncReceived {
        leader: ServerId(3),
        mode: SyncMode::TruncDiff,
        zxid: z(1, 1),
    };
    assert_eq!(a, vec![report, Action::TruncateLog { zxid: z(1, 1) }]);
    let a = from_leader(&mut p, Message::Diff { last_zxid: z(1, 1) }).unwrap();
    assert!(
        a.is_empty(),
        "the DIFF after a TRUNC is not reported: {a:?}"
    );

    let mut p = follower(durable(1, 1, &[txn(1, 1)]));
    from_leader(&mut p, leader_info(2)).unwrap();
    let a = from_leader(&mut p, Message::Diff { last_zxid: z(1, 2) }).unwrap();
    let report = Action::SyncReceived {
        leader: ServerId(3),
        mode: SyncMode::Diff,
        zxid: z(1, 2),
    };
    assert_eq!(a, vec![report]);
}
