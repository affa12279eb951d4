//! Unit tests of the leader, driven through a `Peer` fed by hand: peer 3 leads {1, 2, 3}.

use bytes::Bytes;

use crate::config::Config;
use crate::durable::DurableState;
use crate::io::{Action, Input};
use crate::message::{ElectionState, Message, Notification, RequestError, Vote};
use crate::types::{Epoch, LearnerType, RequestId, Role, ServerId, Txn, Zxid};
use crate::Peer;

fn z(e: u32, c: u32) -> Zxid {
    Zxid::new(Epoch(e), c)
}

fn s(n: u64) -> ServerId {
    ServerId(n)
}

/// Peer 3 of {1, 2, 3} with acceptedEpoch = currentEpoch = `epoch` and an empty log, elected.
fn leader(epoch: u32) -> Peer {
    let members = (1..=3)
        .map(|s| (ServerId(s), LearnerType::Participant))
        .collect();
    let mut cfg = Config::new(s(3), members);
    cfg.finalize_wait_ms = 10;
    let d = DurableState {
        accepted_epoch: Epoch(epoch),
        current_epoch: Epoch(epoch),
        ..DurableState::default()
    };
    let mut p = Peer::new(cfg, d, 0).unwrap();
    let vote = Vote {
        leader: s(3),
        zxid: Zxid::ZERO,
        peer_epoch: Epoch(epoch),
    };
    let n = Notification {
        vote,
        round: 1,
        state: ElectionState::Looking,
        config_version: Zxid::ZERO,
    };
    p.step(Input::Message {
        from: s(1),
        msg: Message::Notification(n),
    })
    .unwrap();
    p.step(Input::Tick { now_ms: 20 }).unwrap();
    assert_eq!(p.role(), Role::Leading);
    p.take_actions();
    p
}

fn recv(p: &mut Peer, from: u64, msg: Message) -> Vec<Action> {
    p.step(Input::Message { from: s(from), msg }).unwrap();
    p.take_actions()
}

fn info(accepted: u32) -> Message {
    Message::FollowerInfo {
        accepted_epoch: Epoch(accepted),
        protocol_version: 1,
    }
}

fn ack_epoch(current: u32, last: Zxid) -> Message {
    Message::AckEpoch {
        current_epoch: Epoch(current),
        last_zxid: last,
    }
}

/// A leader of epoch 2 established with follower 1.
fn established() -> Peer {
    let mut p = leader(1);
    recv(&mut p, 1, info(1));
    recv(&mut p, 1, ack_epoch(1, Zxid::ZERO));
    let a = recv(&mut p, 1, Message::Ack { zxid: z(2, 0) });
    assert!(
        !p.is_serving(),
        "a NEWLEADER quorum is confirmed by a PING round first"
    );
    recv(
        &mut p,
        1,
        Message::PingAck {
            round: ping_round(&a),
        },
    );
    assert!(p.is_serving());
    p
}

fn ping_round(actions: &[Action]) -> u64 {
    actions
        .iter()
        .find_map(|a| match a {
            Action::Send {
                msg: Message::Ping { round },
                ..
            } => Some(*round),
            _ => None,
        })
        .unwrap()
}

#[test]
fn newleader_quorum_needs_a_fresh_ping_round() {
    let mut p = leader(1);
    recv(&mut p, 1, info(1));
    recv(&mut p, 1, ack_epoch(1, Zxid::ZERO));
    let a = recv(&mut p, 1, Message::Ack { zxid: z(2, 0) });
    let round = ping_round(&a);
    // An answer to an older round (sent before the quorum) does not confirm.
    recv(&mut p, 1, Message::PingAck { round: round - 1 });
    assert!(!p.is_serving());
    // The follower left meanwhile: its ack no longer counts and nothing establishes.
    p.step(Input::ConnectionLost { peer: s(1) }).unwrap();
    p.take_actions();
    assert!(!p.is_serving());
}

#[test]
fn epoch_is_max_accepted_plus_one_and_persisted_before_leaderinfo() {
    let mut p = leader(1);
    let a = recv(&mut p, 1, info(4));
    assert_eq!(a[0], Action::PersistAcceptedEpoch(Epoch(5)));
    let li = Message::LeaderInfo {
        new_epoch: Epoch(5),
        protocol_version: 1,
    };
    assert_eq!(a[1], Action::Send { to: s(1), msg: li });
}

#[test]
fn leader_abdicates_when_a_follower_is_ahead() {
    let mut p = leader(1);
    recv(&mut p, 1, info(1));
    recv(&mut p, 1, ack_epoch(1, z(1, 5)));
    assert_eq!(p.role(), Role::Looking);
}

#[test]
fn ack_of_an_already_accepted_epoch_does_not_count() {
    let mut p = leader(1);
    recv(&mut p, 1, info(1));
    // Peer 2 already accepted epoch 2 (from another leader): synced, not counted.
    recv(&mut p, 2, info(2));
    recv(&mut p, 2, ack_epoch(1, Zxid::ZERO));
    assert!(p.current_epoch() < Epoch(2));
    let a = recv(&mut p, 1, ack_epoch(1, Zxid::ZERO));
    assert_eq!(p.current_epoch(), Epoch(2));
    assert!(a.contains(&Action::PersistCurrentEpoch(Epoch(2))));
}

#[test]
fn commits_in_order_after_a_quorum_of_durable_acks() {
    let mut p = established();
    for id in 1..=2 {
        let payload = Bytes::from_static(b"w");
        p.step(Input::ClientWrite {
            request_id: RequestId(id),
            payload,
        })
        .unwrap();
    }
    p.take_actions();
    // Follower acks both cumulatively; the leader's own disk has only the first.
    let a = recv(&mut p, 1, Message::Ack { zxid: z(2, 2) });
    assert!(a.is_empty());
    p.step(Input::LogPersisted { upto: z(2, 1) }).unwrap();
    let a = p.take_actions();
    let txn = Txn::app(z(2, 1), Bytes::from_static(b"w"));
    assert_eq!(
        a,
        vec![
            Action::Send {
                to: s(1),
                msg: Message::Commit { zxid: z(2, 1) }
            },
            Action::Apply(txn),
            Action::WriteDone {
                request_id: RequestId(1),
                outcome: Ok(z(2, 1))
            },
        ]
    );
    p.step(Input::LogPersisted { upto: z(2, 2) }).unwrap();
    let a = p.take_actions();
    assert!(a.contains(&Action::WriteDone {
        request_id: RequestId(2),
        outcome: Ok(z(2, 2))
    }));
}

#[test]
fn sync_waits_for_a_quorum_round() {
    let mut p = established();
    p.step(Input::ClientSync {
        request_id: RequestId(7),
    })
    .unwrap();
    let a = p.take_actions();
    let round = a
        .iter()
        .find_map(|a| match a {
            Action::Send {
                msg: Message::Ping { round },
                ..
            } => Some(*round),
            _ => None,
        })
        .unwrap();
    assert!(!a.iter().any(|a| matches!(a, Action::SyncDone { .. })));
    let a = recv(&mut p, 1, Message::PingAck { round: round - 1 });
    assert!(a.is_empty());
    let a = recv(&mut p, 1, Message::PingAck { round });
    assert_eq!(
        a,
        vec![Action::SyncDone {
            request_id: RequestId(7),
            outcome: Ok(Zxid::ZERO)
        }]
    );
}

#[test]
fn steps_down_and_fails_writes_when_the_quorum_is_silent() {
    let mut p = established();
    let payload = Bytes::from_static(b"w");
    p.step(Input::ClientWrite {
        request_id: RequestId(1),
        payload,
    })
    .unwrap();
    p.take_actions();
    p.step(Input::Tick {
        now_ms: 20 + 5 * 2000 + 1,
    })
    .unwrap();
    let a = p.take_actions();
    assert_eq!(p.role(), Role::Looking);
    let failed = Action::WriteDone {
        request_id: RequestId(1),
        outcome: Err(RequestError::QuorumLost),
    };
    assert!(a.contains(&failed));
    assert!(a.contains(&Action::Disconnect { peer: s(1) }));
}

#[test]
fn counter_exhaustion_fails_the_write_and_forces_a_new_epoch() {
    let members = (1..=1)
        .map(|s| (ServerId(s), LearnerType::Participant))
        .collect();
    let mut cfg = Config::new(s(1), members);
    cfg.finalize_wait_ms = 0;
    cfg.max_counter = 1;
    let mut p = Peer::new(cfg, DurableState::default(), 0).unwrap();
    assert!(p.is_serving());
    for id in 1..=2 {
        let payload = Bytes::from_static(b"w");
        p.step(Input::ClientWrite {
            request_id: RequestId(id),
            payload,
        })
        .unwrap();
        p.step(Input::LogPersisted {
            upto: p.last_logged_zxid(),
        })
        .unwrap();
    }
    let a = p.take_actions();
    assert!(a.contains(&Action::WriteDone {
        request_id: RequestId(1),
        outcome: Ok(z(1, 1))
    }));
    let exhausted = Err(RequestError::EpochExhausted);
    assert!(a.contains(&Action::WriteDone {
        request_id: RequestId(2),
        outcome: exhausted
    }));
    p.step(Input::Tick { now_ms: 1 }).unwrap();
    assert!(p.is_serving());
    assert_eq!(p.current_epoch(), Epoch(2));
}

fn looking_from_voter(round: u64) -> Message {
    Message::Notification(Notification {
        vote: Vote {
            leader: s(2),
            zxid: Zxid::ZERO,
            peer_epoch: Epoch(1),
        },
        round,
        state: ElectionState::Looking,
        config_version: Zxid::ZERO,
    })
}

/// PITFALLS B7: still short of a FOLLOWERINFO quorum, the prospective leader answers a LOOKING
/// voter and keeps waiting until `epoch_wait_ticks` (2 × 2000 ms) have passed since it took
/// the lead; the first LOOKING notification after that makes it re-elect, long before
/// initLimit (20 s). Time alone does not (the voter may be on its way).
#[test]
fn abandons_discovery_when_a_voter_reports_looking_after_the_epoch_wait() {
    let mut p = leader(1);
    p.step(Input::Tick { now_ms: 3_000 }).unwrap();
    let out = recv(&mut p, 1, looking_from_voter(2));
    assert!(out.iter().any(|a| matches!(
        a,
        Action::Send { to, msg: Message::Notification(n) } if *to == s(1)
            && n.state == ElectionState::Leading
    )));
    assert_eq!(p.role(), Role::Leading);
    p.step(Input::Tick { now_ms: 4_100 }).unwrap();
    assert_eq!(p.role(), Role::Leading);
    recv(&mut p, 1, looking_from_voter(3));
    assert_eq!(p.role(), Role::Looking);
}

/// PITFALLS B7: once the FOLLOWERINFO quorum is there (the epoch is chosen), a LOOKING voter
/// does not make the leader give up: discovery is over and initLimit alone bounds the rest.
#[test]
fn keeps_the_epoch_once_the_followerinfo_quorum_is_there() {
    let mut p = leader(1);
    recv(&mut p, 1, info(1));
    p.step(Input::Tick { now_ms: 5_000 }).unwrap();
    recv(&mut p, 2, looking_from_voter(2));
    assert_eq!(p.role(), Role::Leading);
}
