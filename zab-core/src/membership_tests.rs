#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn three() -> Membership {
    let types = (1..=3)
        .map(|i| (ServerId(i), LearnerType::Participant))
        .collect();
    let addresses = (1..=3)
        .map(|i| {
            (
                ServerId(i),
                format!("127.0.0.1:{}:{};{}", 2000 + i, 3000 + i, 4000 + i),
            )
        })
        .collect();
    Membership::bootstrap(&types, &addresses)
}

fn add(sid: u64, learner_type: LearnerType) -> MembershipChange {
    MembershipChange::Add {
        sid: ServerId(sid),
        learner_type,
        address: format!("127.0.0.1:{}:{};{}", 2000 + sid, 3000 + sid, 4000 + sid),
    }
}

#[test]
fn bootstrap_has_version_zero_and_the_given_roles() {
    let mut types: BTreeMap<ServerId, LearnerType> = three().learner_types();
    types.insert(ServerId(9), LearnerType::Observer);
    let m = Membership::bootstrap(&types, &BTreeMap::new());
    assert_eq!(m.version, Zxid::ZERO);
    assert_eq!(m.role_of(ServerId(9)), Some(MemberRole::Observer));
    assert_eq!(m.participants().count(), 3);
    assert_eq!(m.learner_types(), types);
}

#[test]
fn an_added_follower_joins_without_a_vote_and_a_promotion_gives_it_one() {
    let m = three().changed(&add(4, LearnerType::Participant)).unwrap();
    assert_eq!(m.role_of(ServerId(4)), Some(MemberRole::Joining));
    assert_eq!(m.learner_types()[&ServerId(4)], LearnerType::Observer);
    assert_eq!(
        m.participants().count(),
        3,
        "a joining member does not vote (R5)"
    );
    let p = m
        .changed(&MembershipChange::Promote { sid: ServerId(4) })
        .unwrap();
    assert_eq!(p.role_of(ServerId(4)), Some(MemberRole::Participant));
    assert_eq!(p.participants().count(), 4);
}

#[test]
fn an_added_observer_is_an_observer() {
    let m = three().changed(&add(6, LearnerType::Observer)).unwrap();
    assert_eq!(m.role_of(ServerId(6)), Some(MemberRole::Observer));
}

#[test]
fn invalid_changes_are_refused_with_a_reason() {
    let m = three();
    let cases = [
        (add(2, LearnerType::Participant), "already a member"),
        (
            MembershipChange::Remove { sid: ServerId(7) },
            "not a member",
        ),
        (
            MembershipChange::Promote { sid: ServerId(2) },
            "not joining",
        ),
        (
            MembershipChange::Add {
                sid: ServerId(5),
                learner_type: LearnerType::Participant,
                address: m.members[&ServerId(1)].address.clone(),
            },
            "already has the address",
        ),
        (
            MembershipChange::Add {
                sid: ServerId(5),
                learner_type: LearnerType::Participant,
                address: "x".repeat(MAX_ADDRESS_LEN + 1),
            },
            "longer than",
        ),
    ];
    for (change, why) in cases {
        match m.changed(&change) {
            Err(MembershipError::Invalid(msg)) => assert!(msg.contains(why), "{msg}"),
            other => panic!("{change:?}: expected Invalid({why}), got {other:?}"),
        }
    }
}

#[test]
fn the_last_participant_cannot_be_removed() {
    let one: BTreeMap<_, _> = [
        (ServerId(1), LearnerType::Participant),
        (ServerId(2), LearnerType::Observer),
    ]
    .into();
    let m = Membership::bootstrap(&one, &BTreeMap::new());
    assert!(matches!(
        m.changed(&MembershipChange::Remove { sid: ServerId(1) }),
        Err(MembershipError::Invalid(_))
    ));
    let without_observer = m
        .changed(&MembershipChange::Remove { sid: ServerId(2) })
        .unwrap();
    assert_eq!(without_observer.members.len(), 1);
}

#[test]
fn the_txn_carries_the_configuration_and_its_zxid_is_the_version() {
    let m = three().changed(&add(4, LearnerType::Participant)).unwrap();
    let z = Zxid::new(crate::types::Epoch(3), 7);
    let txn = m.to_txn(z);
    assert_eq!(txn.kind, TxnKind::Membership);
    let back = Membership::from_txn(&txn).unwrap();
    assert_eq!(back.version, z);
    assert_eq!(back.members, m.members);
}

#[test]
fn malformed_encodings_are_errors() {
    let good = three().encode().to_vec();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![], "encoding version"),
        (vec![9], "unknown encoding version"),
        (good[..good.len() - 1].to_vec(), "address"),
        ([good.clone(), vec![0]].concat(), "after the last member"),
        (
            {
                let mut b = good.clone();
                b[5 + 8] = 7; // the first member's role byte
                b
            },
            "unknown role",
        ),
        (
            {
                // one member, an observer: no participant
                let mut b = vec![1, 0, 0, 0, 1];
                b.extend_from_slice(&5u64.to_be_bytes());
                b.extend_from_slice(&[1, 0, 0]);
                b
            },
            "no participant",
        ),
        (
            {
                let mut b = vec![1, 0, 0, 0, 2];
                for _ in 0..2 {
                    b.extend_from_slice(&5u64.to_be_bytes());
                    b.extend_from_slice(&[0, 0, 0]);
                }
                b
            },
            "out of order",
        ),
    ];
    for (bytes, why) in cases {
        let err = Membership::decode(Zxid(1), &bytes).unwrap_err();
        assert!(err.reason.contains(why), "{why}: got {}", err.reason);
    }
}

proptest! {
    #[test]
    fn encode_decode_round_trips(
        roles in proptest::collection::btree_map(1u64..50, 0u8..3, 1..8),
        addr in "[a-z0-9.:;]{0,40}",
    ) {
        let mut members: BTreeMap<ServerId, Member> = roles
            .iter()
            .map(|(sid, code)| (ServerId(*sid), Member {
                role: MemberRole::from_code(*code).unwrap(),
                address: format!("{addr}{sid}"),
            }))
            .collect();
        if let Some(m) = members.values_mut().next() {
            m.role = MemberRole::Participant;
        }
        let m = Membership { version: Zxid(42), members };
        prop_assert_eq!(Membership::decode(Zxid(42), &m.encode()).unwrap(), m);
    }

    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = Membership::decode(Zxid(1), &bytes);
    }

    /// The overlap argument of the module docs, checked: a majority of a configuration and
    /// a majority of one that differs by one participant always share a voter.
    #[test]
    fn majorities_of_configurations_one_voter_apart_intersect(
        n in 1usize..8,
        q in any::<u64>(),
        q2 in any::<u64>(),
        grow in any::<bool>(),
    ) {
        let old: Vec<u64> = (1..=n as u64).collect();
        let new: Vec<u64> = if grow {
            (1..=n as u64 + 1).collect()
        } else if n > 1 {
            (1..n as u64).collect()
        } else {
            return Ok(());
        };
        let pick = |set: &[u64], bits: u64| -> Vec<u64> {
            set.iter().enumerate().filter(|(i, _)| bits >> i & 1 == 1).map(|(_, s)| *s).collect()
        };
        let (a, b) = (pick(&old, q), pick(&new, q2));
        let majority = |part: &[u64], of: &[u64]| part.len() * 2 > of.len();
        if majority(&a, &old) && majority(&b, &new) {
            prop_assert!(a.iter().any(|s| b.contains(s)), "{a:?} of {old:?} and {b:?} of {new:?}");
        }
    }
}

#[test]
fn a_joining_follower_is_what_its_zoo_cfg_line_says_but_an_observer_is_not() {
    let zoo_cfg = three();
    let mut data = three();
    let joining = data.members.get_mut(&ServerId(3)).unwrap();
    joining.role = MemberRole::Joining;
    assert_eq!(zoo_cfg.differences(&data), None);
    data.members.get_mut(&ServerId(3)).unwrap().role = MemberRole::Observer;
    assert_eq!(
        zoo_cfg.differences(&data).as_deref(),
        Some("role or address differs: [3]")
    );
}
