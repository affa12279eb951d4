use proptest::prelude::*;

use super::*;

fn members() -> BTreeSet<ServerId> {
    [1, 2, 3].into_iter().map(ServerId).collect()
}

fn hello() -> Hello {
    Hello {
        cluster_id: 7,
        from: ServerId(3),
        to: ServerId(1),
        channel: Channel::Quorum,
    }
}

fn check(h: &Hello) -> Result<(), Refusal> {
    let m = members();
    h.validate(&Expect {
        me: ServerId(1),
        cluster_id: 7,
        members: &m,
        channel: Channel::Quorum,
    })
}

#[test]
fn hello_round_trips_and_validates() {
    let h = hello();
    assert_eq!(Hello::decode(&h.encode()).unwrap(), h);
    assert_eq!(check(&h), Ok(()));
}

/// PITFALLS E5: a hello from another cluster id is refused, naming both ids.
#[test]
fn other_cluster_is_refused() {
    let h = Hello {
        cluster_id: 8,
        ..hello()
    };
    let r = check(&h).unwrap_err();
    assert_eq!(
        r,
        Refusal::ClusterMismatch {
            dialer: 8,
            acceptor: 7
        }
    );
    assert_eq!(
        r.to_string(),
        "cluster mismatch: dialer is in cluster 0x8, acceptor in 0x7"
    );
}

#[test]
fn unknown_sid_is_refused() {
    let h = Hello {
        from: ServerId(9),
        ..hello()
    };
    assert_eq!(check(&h), Err(Refusal::UnknownSid { sid: 9 }));
    assert_eq!(
        check(&h).unwrap_err().to_string(),
        "sid 9 is not a member of this ensemble"
    );
}

#[test]
fn self_wrong_target_and_wrong_channel_are_refused() {
    let own = Hello {
        from: ServerId(1),
        ..hello()
    };
    assert_eq!(check(&own), Err(Refusal::SelfConnection { sid: 1 }));
    let misaddressed = Hello {
        to: ServerId(2),
        ..hello()
    };
    assert_eq!(
        check(&misaddressed),
        Err(Refusal::WrongTarget {
            addressed: 2,
            actual: 1
        })
    );
    let election = Hello {
        channel: Channel::Election,
        ..hello()
    };
    assert_eq!(
        check(&election),
        Err(Refusal::WrongChannel {
            requested: Channel::Election,
            port: Channel::Quorum
        })
    );
}

#[test]
fn bad_version_is_refused_at_decode() {
    let mut bytes = hello().encode().to_vec();
    bytes[5] = 9;
    let err = Hello::decode(&bytes).unwrap_err();
    assert!(
        matches!(
            err,
            HandshakeError::Refused(Refusal::BadVersion {
                found: 9,
                supported: HANDSHAKE_VERSION
            })
        ),
        "{err:?}"
    );
}

#[test]
fn bad_magic_and_malformed_bodies_are_errors() {
    let mut bytes = hello().encode().to_vec();
    bytes[0] = b'X';
    assert!(matches!(
        Hello::decode(&bytes),
        Err(HandshakeError::BadMagic { .. })
    ));
    let good = hello().encode().to_vec();
    assert!(matches!(
        Hello::decode(&good[..good.len() - 1]),
        Err(HandshakeError::Malformed("channel"))
    ));
    let mut long = good.clone();
    long.push(0);
    assert!(matches!(
        Hello::decode(&long),
        Err(HandshakeError::Malformed("trailing bytes"))
    ));
    let mut chan = good;
    *chan.last_mut().unwrap() = 5;
    assert!(matches!(
        Hello::decode(&chan),
        Err(HandshakeError::Malformed("unknown channel"))
    ));
}

#[test]
fn every_reply_round_trips() {
    let replies = [
        Reply::Accepted,
        Reply::ConnectBack,
        Reply::Refused(Refusal::BadVersion {
            found: 2,
            supported: 1,
        }),
        Reply::Refused(Refusal::ClusterMismatch {
            dialer: u64::MAX,
            acceptor: 0,
        }),
        Reply::Refused(Refusal::UnknownSid { sid: 4 }),
        Reply::Refused(Refusal::WrongTarget {
            addressed: 1,
            actual: 2,
        }),
        Reply::Refused(Refusal::WrongChannel {
            requested: Channel::Quorum,
            port: Channel::Election,
        }),
        Reply::Refused(Refusal::SelfConnection { sid: 3 }),
    ];
    for r in replies {
        assert_eq!(Reply::decode(&r.encode()).unwrap(), r);
    }
}

#[tokio::test]
async fn frames_travel_and_lengths_are_bounded() {
    let (mut a, mut b) = tokio::io::duplex(256);
    write_frame(&mut a, &hello().encode()).await.unwrap();
    let body = read_frame(&mut b).await.unwrap();
    assert_eq!(Hello::decode(&body).unwrap(), hello());

    write_frame(&mut a, &[0u8; HANDSHAKE_MAX_LEN + 1])
        .await
        .unwrap();
    assert!(matches!(
        read_frame(&mut b).await,
        Err(HandshakeError::BadLength { len }) if len == HANDSHAKE_MAX_LEN + 1
    ));
    drop(a);
    let (mut c, mut d) = tokio::io::duplex(16);
    write_frame(&mut c, &[]).await.unwrap();
    assert!(matches!(
        read_frame(&mut d).await,
        Err(HandshakeError::BadLength { len: 0 })
    ));
    drop(c);
    assert!(matches!(
        read_frame(&mut d).await,
        Err(HandshakeError::Io(_))
    ));
}

#[test]
fn channel_of_message() {
    use zab_core::{ElectionState, Epoch, Message, Notification, Vote, Zxid};
    let n = Message::Notification(Notification {
        vote: Vote {
            leader: ServerId(1),
            zxid: Zxid(0),
            peer_epoch: Epoch(0),
        },
        round: 1,
        state: ElectionState::Looking,
        config_version: Zxid::ZERO,
    });
    assert_eq!(Channel::of(&n), Channel::Election);
    let m = zab_core::Membership::bootstrap(
        &[(ServerId(1), zab_core::LearnerType::Participant)].into(),
        &Default::default(),
    );
    assert_eq!(Channel::of(&Message::Membership(m)), Channel::Election);
    assert_eq!(Channel::of(&Message::UpToDate), Channel::Quorum);
}

proptest! {
    #[test]
    fn random_handshake_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..80)) {
        let _ = Hello::decode(&bytes);
        let _ = Reply::decode(&bytes);
    }

    #[test]
    fn mutated_hellos_never_panic(at in 0usize..31, bit in 0u8..8) {
        let mut bytes = hello().encode().to_vec();
        bytes[at] ^= 1 << bit;
        if let Ok(h) = Hello::decode(&bytes) {
            prop_assert_eq!(h.encode().to_vec(), bytes);
        }
    }
}
