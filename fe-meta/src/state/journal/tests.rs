//! Unit tests of the journal codec: errors name the op, codes are stable, session writes
//! round-trip.

use super::*;

#[test]
fn errors_name_the_op_and_the_problem() {
    let entry = JournalEntry {
        op: OpCode::ADD_BACKEND,
        payload: Bytes::from_static(&[1, 0, 0]),
    };
    let err = Op::from_entry(&entry).unwrap_err().to_string();
    assert!(
        err.contains("ADD_BACKEND (50)") && err.contains("backend id"),
        "{err}"
    );

    let err = Op::decode(&[0x12, 0x34, 1]).unwrap_err().to_string();
    assert!(err.contains("unknown op 4660"), "{err}");

    let bad_version = Op::decode(&[0, 70, 3, 0, 0, 0, 0, 0, 0, 0, 1]).unwrap_err();
    assert!(
        bad_version.to_string().contains("version 3"),
        "{bad_version}"
    );
    let v1 = Op::decode(&[0, 70, 1, 0, 0, 0, 0, 0, 0, 0, 1]).unwrap();
    assert_eq!(
        v1,
        Op::Timestamp {
            wall_ms: 1,
            session_expiry_ms: 0
        },
        "a version-1 TIMESTAMP reads as expiry 0"
    );

    let trailing = Op::decode(&[0, 70, 1, 0, 0, 0, 0, 0, 0, 0, 1, 9]).unwrap_err();
    assert!(trailing
        .to_string()
        .contains("TIMESTAMP (70) payload: 1 unexpected"));
    assert!(matches!(
        Op::decode(&[1]),
        Err(JournalError::TooShort { len: 1 })
    ));
}

#[test]
fn codes_are_stable() {
    let codes: Vec<u16> = OpCode::ALL.iter().map(|c| c.0).collect();
    assert_eq!(codes, [0, 1, 2, 3, 10, 11, 50, 51, 52, 55, 57, 60, 70, 80]);
    assert!(OpCode::ALL.iter().all(|c| c.name().is_some()));
}

#[test]
fn session_writes_round_trip_and_refuse_nesting_and_a_floor_above_seq() {
    let tag = SessionTag {
        client_id: 0xfeed,
        seq: 9,
        floor: 4,
    };
    let op = Op::SessionWrite {
        tag,
        inner: Box::new(Op::SetGlobalVariable {
            name: "a".into(),
            value: "b".into(),
        }),
    };
    let bytes = op.to_entry().encode();
    assert_eq!(Op::decode(&bytes).unwrap(), op);

    let mut high_floor = bytes.clone();
    high_floor[3 + 16..3 + 24].copy_from_slice(&10u64.to_be_bytes());
    let err = Op::decode(&high_floor).unwrap_err().to_string();
    assert!(err.contains("floor (above seq)"), "{err}");

    let nested = Op::SessionWrite {
        tag,
        inner: Box::new(op),
    };
    let err = Op::decode(&nested.to_entry().encode())
        .unwrap_err()
        .to_string();
    assert!(err.contains("inner op code has invalid value 80"), "{err}");
}
