//! Property tests of the wire codec: every message round-trips, and no input — random bytes,
//! or a valid encoding with bits flipped, bytes cut or appended — makes `decode` panic.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use zab_core::codec::{
    decode, decode_shared, encode, encode_to_bytes, encoded_len, tag, DecodeError, EncodeError,
    FORMAT_VERSION, MAX_DATA_LEN,
};
use zab_core::{
    ElectionState, Epoch, Member, MemberRole, Membership, Message, Notification, RequestError,
    RequestId, ServerId, Txn, TxnKind, Vote, Zxid,
};

fn zxid() -> impl Strategy<Value = Zxid> {
    prop_oneof![
        Just(Zxid(0)),
        Just(Zxid(u64::MAX)),
        any::<u64>().prop_map(Zxid)
    ]
}

fn epoch() -> impl Strategy<Value = Epoch> {
    prop_oneof![
        Just(Epoch(0)),
        Just(Epoch(u32::MAX)),
        any::<u32>().prop_map(Epoch)
    ]
}

fn data() -> impl Strategy<Value = Bytes> {
    prop::collection::vec(any::<u8>(), 0..300).prop_map(Bytes::from)
}

fn txn() -> impl Strategy<Value = Txn> {
    let kind = prop_oneof![Just(TxnKind::App), Just(TxnKind::Membership)];
    (zxid(), data(), kind).prop_map(|(zxid, data, kind)| Txn { zxid, data, kind })
}

fn membership() -> impl Strategy<Value = Membership> {
    let role = prop_oneof![
        Just(MemberRole::Participant),
        Just(MemberRole::Observer),
        Just(MemberRole::Joining)
    ];
    (
        zxid(),
        prop::collection::btree_map(any::<u64>(), (role, "[a-z0-9.:;]{0,30}"), 0..6),
    )
        .prop_map(|(version, members)| {
            let mut members: BTreeMap<ServerId, Member> = members
                .into_iter()
                .map(|(sid, (role, address))| (ServerId(sid), Member { role, address }))
                .collect();
            members.insert(
                ServerId(u64::MAX),
                Member {
                    role: MemberRole::Participant,
                    address: String::new(),
                },
            );
            Membership { version, members }
        })
}

fn election_state() -> impl Strategy<Value = ElectionState> {
    prop_oneof![
        Just(ElectionState::Looking),
        Just(ElectionState::Following),
        Just(ElectionState::Leading),
        Just(ElectionState::Uninitialized),
        Just(ElectionState::Observing),
    ]
}

fn outcome() -> impl Strategy<Value = Result<Zxid, RequestError>> {
    prop_oneof![
        zxid().prop_map(Ok),
        proptest::option::of(any::<u64>().prop_map(ServerId))
            .prop_map(|leader| Err(RequestError::NotLeader { leader })),
        Just(Err(RequestError::QuorumLost)),
        Just(Err(RequestError::EpochExhausted)),
    ]
}

/// A notification with arbitrary field values.
fn notification() -> impl Strategy<Value = Message> {
    let fields = (
        any::<u64>(),
        zxid(),
        epoch(),
        any::<u64>(),
        election_state(),
        zxid(),
    );
    fields.prop_map(|(leader, zxid, peer_epoch, round, state, config_version)| {
        Message::Notification(Notification {
            vote: Vote {
                leader: ServerId(leader),
                zxid,
                peer_epoch,
            },
            round,
            state,
            config_version,
        })
    })
}

/// Every variant of `Message`, each with arbitrary field values.
fn message() -> impl Strategy<Value = Message> {
    let rid = || any::<u64>().prop_map(RequestId);
    prop_oneof![
        notification(),
        membership().prop_map(Message::Membership),
        (epoch(), any::<u32>()).prop_map(|(accepted_epoch, protocol_version)| {
            Message::FollowerInfo {
                accepted_epoch,
                protocol_version,
            }
        }),
        (epoch(), any::<u32>()).prop_map(|(accepted_epoch, protocol_version)| {
            Message::ObserverInfo {
                accepted_epoch,
                protocol_version,
            }
        }),
        (epoch(), any::<u32>()).prop_map(|(new_epoch, protocol_version)| {
            Message::LeaderInfo {
                new_epoch,
                protocol_version,
            }
        }),
        (epoch(), zxid()).prop_map(|(current_epoch, last_zxid)| Message::AckEpoch {
            current_epoch,
            last_zxid
        }),
        zxid().prop_map(|last_zxid| Message::Diff { last_zxid }),
        zxid().prop_map(|zxid| Message::Trunc { zxid }),
        (zxid(), membership()).prop_map(|(zxid, membership)| Message::Snap { zxid, membership }),
        (data(), any::<bool>()).prop_map(|(data, last)| Message::SnapChunk { data, last }),
        zxid().prop_map(|zxid| Message::NewLeader { zxid }),
        Just(Message::UpToDate),
        txn().prop_map(Message::Proposal),
        zxid().prop_map(|zxid| Message::Ack { zxid }),
        zxid().prop_map(|zxid| Message::Commit { zxid }),
        txn().prop_map(Message::Inform),
        any::<u64>().prop_map(|round| Message::Ping { round }),
        any::<u64>().prop_map(|round| Message::PingAck { round }),
        (rid(), data()).prop_map(|(request_id, payload)| Message::Request {
            request_id,
            payload
        }),
        (rid(), outcome()).prop_map(|(request_id, outcome)| Message::RequestDone {
            request_id,
            outcome
        }),
        rid().prop_map(|request_id| Message::Sync { request_id }),
        (rid(), outcome()).prop_map(|(request_id, outcome)| Message::SyncReply {
            request_id,
            outcome
        }),
        (any::<u64>(), zxid(), epoch()).prop_map(|(leader, zxid, peer_epoch)| {
            Message::Transfer {
                nominee: Vote {
                    leader: ServerId(leader),
                    zxid,
                    peer_epoch,
                },
            }
        }),
    ]
}

/// A change to a valid encoding.
#[derive(Clone, Debug)]
enum Mutation {
    FlipBit { at: usize, bit: u8 },
    SetByte { at: usize, value: u8 },
    Truncate { keep: usize },
    Append { extra: Vec<u8> },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Mutation::FlipBit { at, bit }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, value)| Mutation::SetByte { at, value }),
        any::<usize>().prop_map(|keep| Mutation::Truncate { keep }),
        prop::collection::vec(any::<u8>(), 1..16).prop_map(|extra| Mutation::Append { extra }),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let len = bytes.len();
    match m {
        Mutation::FlipBit { at, bit } => bytes[at % len] ^= 1 << bit,
        Mutation::SetByte { at, value } => bytes[at % len] = *value,
        Mutation::Truncate { keep } => bytes.truncate(keep % len),
        Mutation::Append { extra } => bytes.extend_from_slice(extra),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn every_message_round_trips(msg in message()) {
        let mut buf = BytesMut::new();
        encode(&msg, &mut buf).unwrap();
        prop_assert_eq!(buf.len(), encoded_len(&msg));
        prop_assert_eq!(buf[0], FORMAT_VERSION);
        prop_assert_eq!(decode(&buf).unwrap(), msg.clone());
        prop_assert_eq!(decode_shared(&buf.freeze()).unwrap(), msg);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode(&bytes);
        let _ = decode_shared(&Bytes::from(bytes));
    }

    #[test]
    fn random_bodies_after_a_valid_header_never_panic(
        tag in 0u8..24,
        body in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut bytes = vec![FORMAT_VERSION, tag];
        bytes.extend_from_slice(&body);
        let _ = decode(&bytes);
    }

    #[test]
    fn mutated_encodings_never_panic(
        msg in message(),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let mut bytes = encode_to_bytes(&msg).unwrap().to_vec();
        for m in &mutations {
            if bytes.is_empty() {
                break;
            }
            apply(&mut bytes, m);
        }
        // Anything may come out, but a result that decodes must re-encode to the same bytes
        // (INV-3: no input has two meanings).
        if let Ok(decoded) = decode(&bytes) {
            prop_assert_eq!(encode_to_bytes(&decoded).unwrap().to_vec(), bytes);
        }
    }

    #[test]
    fn every_strict_prefix_is_truncated(msg in message()) {
        let bytes = encode_to_bytes(&msg).unwrap();
        for keep in 0..bytes.len() {
            let err = decode(&bytes[..keep]).unwrap_err();
            prop_assert!(
                matches!(err, DecodeError::Truncated { .. }),
                "prefix {} of {:?}: {:?}", keep, msg, err
            );
        }
    }
}

#[test]
fn bad_version_is_named() {
    let mut bytes = encode_to_bytes(&Message::UpToDate).unwrap().to_vec();
    bytes[0] = 9;
    let err = decode(&bytes).unwrap_err();
    assert_eq!(
        err,
        DecodeError::BadVersion {
            found: 9,
            supported: FORMAT_VERSION
        }
    );
    assert!(err.to_string().contains("version 9"), "{err}");
}

#[test]
fn unknown_tag_is_named() {
    let err = decode(&[FORMAT_VERSION, 200]).unwrap_err();
    assert_eq!(err, DecodeError::UnknownTag { tag: 200 });
    assert_eq!(err.to_string(), "unknown message type tag 200");
}

#[test]
fn truncated_field_is_named() {
    let err = decode(&[FORMAT_VERSION, tag::COMMIT, 0, 0, 1]).unwrap_err();
    assert_eq!(
        err,
        DecodeError::Truncated {
            field: "commit.zxid",
            needed: 8,
            remaining: 3
        }
    );
    assert!(err.to_string().contains("commit.zxid"), "{err}");
    assert!(matches!(
        decode(&[]),
        Err(DecodeError::Truncated {
            field: "version",
            ..
        })
    ));
}

#[test]
fn trailing_bytes_are_an_error() {
    let mut bytes = encode_to_bytes(&Message::Ping { round: 7 })
        .unwrap()
        .to_vec();
    bytes.push(0);
    assert_eq!(
        decode(&bytes).unwrap_err(),
        DecodeError::TrailingBytes { count: 1 }
    );
}

#[test]
fn oversize_length_is_refused_before_reading() {
    let mut bytes = vec![FORMAT_VERSION, tag::PROPOSAL];
    bytes.extend_from_slice(&5u64.to_be_bytes());
    bytes.extend_from_slice(&u32::MAX.to_be_bytes());
    let err = decode(&bytes).unwrap_err();
    assert_eq!(
        err,
        DecodeError::Oversize {
            field: "proposal.data",
            len: u64::from(u32::MAX),
            max: MAX_DATA_LEN
        }
    );
}

#[test]
fn invalid_bool_and_enum_bytes_are_errors() {
    let mut chunk = vec![FORMAT_VERSION, tag::SNAP_CHUNK, 0, 0, 0, 0, 2];
    assert_eq!(
        decode(&chunk).unwrap_err(),
        DecodeError::InvalidValue {
            field: "snap_chunk.last",
            value: 2
        }
    );
    chunk[6] = 1;
    assert_eq!(
        decode(&chunk).unwrap(),
        Message::SnapChunk {
            data: Bytes::new(),
            last: true
        }
    );
    let mut done = vec![FORMAT_VERSION, tag::REQUEST_DONE];
    done.extend_from_slice(&1u64.to_be_bytes());
    done.push(4);
    assert!(matches!(
        decode(&done),
        Err(DecodeError::InvalidValue {
            field: "request_done.outcome",
            value: 4
        })
    ));
}

#[test]
fn encode_refuses_oversize_data_and_leaves_buf_unchanged() {
    let msg = Message::Request {
        request_id: RequestId(1),
        payload: Bytes::from(vec![0u8; MAX_DATA_LEN + 1]),
    };
    let mut buf = BytesMut::from(&b"keep"[..]);
    assert_eq!(
        encode(&msg, &mut buf).unwrap_err(),
        EncodeError::Oversize {
            field: "request.payload",
            len: MAX_DATA_LEN + 1,
            max: MAX_DATA_LEN
        }
    );
    assert_eq!(&buf[..], b"keep");
}

#[test]
fn layout_of_a_proposal_is_stable() {
    let msg = Message::Proposal(Txn::app(Zxid::new(Epoch(1), 2), Bytes::from_static(b"ab")));
    let bytes = encode_to_bytes(&msg).unwrap();
    assert_eq!(
        &bytes[..],
        &[1, 12, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 2, b'a', b'b'][..]
    );
}
