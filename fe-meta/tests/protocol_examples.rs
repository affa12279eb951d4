//! The client protocol on fixed examples: the bytes of `docs/PROTOCOL.md` (§4, §5.4, §9),
//! what decode errors say, how a connection's first bytes are told apart, and which answer
//! each request kind takes. The round-trip and fuzz properties are in `protocol.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

use fe_meta::command::Command;
use fe_meta::protocol::{
    classify_start, decode_request, encode_frame, encode_request, encode_response, ClusterConfig,
    ConfigMember, ConnectionStart, ErrorReply, FrontendChange, MemberState, ProtocolError,
    ReadOptions, Request, RequestBody, RequestKind, RequestMeta, Response, ResponseBody,
};
use fe_meta::Zxid;

#[test]
fn decode_errors_say_what_is_wrong() {
    assert!(matches!(decode_request(&[]), Err(ProtocolError::Header(_))));
    assert!(matches!(
        decode_request(&[9, 0]),
        Err(ProtocolError::UnsupportedVersion { found: 9 })
    ));
    let mut unknown = vec![1, 0, 0, 0, 0, 0, 0, 0, 5];
    unknown.extend_from_slice(&999u16.to_be_bytes());
    let err = decode_request(&unknown).unwrap_err();
    assert_eq!(
        err,
        ProtocolError::UnknownKind {
            request_id: 5,
            kind: RequestKind(999)
        }
    );
    assert!(err.to_string().contains("unknown kind 999"), "{err}");

    let mut trailing = encode_request(&Request {
        id: 6,
        meta: RequestMeta::default(),
        body: RequestBody::Status,
    });
    trailing.push(0);
    let err = decode_request(&trailing).unwrap_err();
    assert_eq!(err.request_id(), Some(6));
    assert!(
        err.to_string().contains("STATUS (1)") && err.to_string().contains("trailing"),
        "{err}"
    );

    let mut bad_flag = encode_request(&Request {
        id: 7,
        meta: RequestMeta::default(),
        body: RequestBody::ShowBackends(ReadOptions::default()),
    });
    *bad_flag.last_mut().unwrap() = 3;
    assert!(decode_request(&bad_flag)
        .unwrap_err()
        .to_string()
        .contains("read flags has invalid value 3"));

    let answer =
        ProtocolError::Header(fe_meta::wire::WireError::Trailing { count: 1 }).to_response();
    assert_eq!((answer.id, answer.kind), (0, RequestKind(0)));
}

#[test]
fn connection_start_tells_words_from_frames() {
    let mut frame = Vec::new();
    encode_frame(
        &encode_request(&Request {
            id: 1,
            meta: RequestMeta::default(),
            body: RequestBody::Status,
        }),
        &mut frame,
    );
    assert_eq!(
        classify_start(frame[..4].try_into().unwrap()),
        ConnectionStart::Frames
    );
    for w in [b"ruok", b"srvr", b"stat", b"mntr"] {
        assert!(matches!(
            classify_start(*w),
            ConnectionStart::FourLetterWord(_)
        ));
    }
}

#[test]
fn write_kinds_are_answered_with_written() {
    for kind in RequestKind::ALL {
        let written = ResponseBody::Written {
            journal_id: Zxid(1),
            created_id: None,
        };
        assert_eq!(written.answers(kind), kind.is_write(), "{kind}");
        let reconfigured = ResponseBody::Reconfigured {
            version: Zxid(1),
            config: sample_config(),
        };
        assert_eq!(
            reconfigured.answers(kind),
            kind.is_membership_change(),
            "{kind}"
        );
        assert!(!(kind.is_write() && kind.is_membership_change()), "{kind}");
    }
    assert!(RequestKind::ADD_FRONTEND.is_membership_change());
    assert!(RequestKind::DROP_FRONTEND.is_membership_change());
    assert!(!RequestKind::GET_CONFIG.is_membership_change());
}

fn sample_config() -> ClusterConfig {
    ClusterConfig {
        cluster_id: 0xfe,
        version: Zxid(0x1_0000_0003),
        in_force_version: Zxid(0x1_0000_0003),
        members: vec![
            ConfigMember {
                sid: 1,
                state: MemberState::Participant,
                address: "h1:1:2;3".into(),
            },
            ConfigMember {
                sid: 4,
                state: MemberState::Joining,
                address: "h4:1:2;3".into(),
            },
        ],
        tick_time_ms: 100,
        init_limit: 10,
        sync_limit: 5,
    }
}

fn hex(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The membership kinds of `docs/PROTOCOL.md` §4 and §5.4, byte for byte: GET_CONFIG,
/// ADD_FRONTEND, DROP_FRONTEND and a GET_CONFIG answer; their configuration converts to the
/// node's `Membership` and back.
#[test]
fn membership_kinds_bytes() {
    let frame = |body: RequestBody| {
        let mut out = Vec::new();
        let req = Request {
            id: 2,
            meta: RequestMeta::default(),
            body,
        };
        encode_frame(&encode_request(&req), &mut out);
        hex(&out)
    };
    assert_eq!(
        frame(RequestBody::GetConfig),
        "00 00 00 0b 01 00 00 00 00 00 00 00 02 00 04"
    );
    let add = RequestBody::ChangeMembership(FrontendChange::Add {
        sid: 4,
        role: fe_meta::state::catalog::FrontendRole::Observer,
        address: "h:1:2;3".into(),
    });
    assert_eq!(
        frame(add),
        [
            "00 00 00 1f 01 00 00 00 00 00 00 00 02 00 15", // header, kind 21
            "00 00 00 00 00 00 00 04 01",                   // sid 4, observer
            "00 00 00 07 68 3a 31 3a 32 3b 33",             // "h:1:2;3"
        ]
        .join(" ")
    );
    assert_eq!(
        frame(RequestBody::ChangeMembership(FrontendChange::Drop {
            sid: 4
        })),
        "00 00 00 13 01 00 00 00 00 00 00 00 02 00 16 00 00 00 00 00 00 00 04"
    );
    let config = ClusterConfig {
        cluster_id: 7,
        version: Zxid(0x1_0000_0002),
        in_force_version: Zxid(0x1_0000_0002),
        members: vec![ConfigMember {
            sid: 1,
            state: MemberState::Joining,
            address: "a:1:2;3".into(),
        }],
        tick_time_ms: 100,
        init_limit: 10,
        sync_limit: 5,
    };
    let resp = Response {
        id: 2,
        kind: RequestKind::GET_CONFIG,
        result: Ok(ResponseBody::Config(config.clone())),
    };
    let mut out = Vec::new();
    encode_frame(&encode_response(&resp), &mut out);
    let expect = [
        "00 00 00 4d 01 00 00 00 00 00 00 00 02 00 04 00 00", // header, status 0
        "00 00 00 00 00 00 00 07",                            // cluster id
        "00 00 00 01 00 00 00 02 00 00 00 01 00 00 00 02",    // version, in force
        "00 00 00 01 00 00 00 00 00 00 00 01 02",             // 1 member: sid 1, joining
        "00 00 00 07 61 3a 31 3a 32 3b 33",                   // "a:1:2;3"
        "00 00 00 00 00 00 00 64 00 00 00 0a 00 00 00 05",    // tickTime, limits
    ]
    .join(" ");
    assert_eq!(hex(&out), expect);
    let membership = config.membership();
    assert_eq!(membership.version, Zxid(0x1_0000_0002));
    assert_eq!(ClusterConfig::members_of(&membership), config.members);
}

/// RECOVERY_INFO as `docs/PROTOCOL.md` §5.5 shows it, byte for byte.
#[test]
fn recovery_info_bytes() {
    let mut out = Vec::new();
    let req = Request {
        id: 2,
        meta: RequestMeta::default(),
        body: RequestBody::RecoveryInfo,
    };
    encode_frame(&encode_request(&req), &mut out);
    assert_eq!(hex(&out), "00 00 00 0b 01 00 00 00 00 00 00 00 02 00 1a");
}

/// The worked example of `docs/PROTOCOL.md` §9, byte for byte.
#[test]
fn protocol_md_example_bytes() {
    let mut req = Vec::new();
    let create = Request {
        id: 1,
        meta: RequestMeta::default(),
        body: RequestBody::Write(Command::CreateDb {
            name: "sales".into(),
        }),
    };
    encode_frame(&encode_request(&create), &mut req);
    assert_eq!(
        hex(&req),
        "00 00 00 14 01 00 00 00 00 00 00 00 01 00 1e 00 00 00 05 73 61 6c 65 73"
    );
    let ok = Response {
        id: 1,
        kind: RequestKind::CREATE_DB,
        result: Ok(ResponseBody::Written {
            journal_id: Zxid(0x1_0000_0001),
            created_id: Some(10_001),
        }),
    };
    let mut resp = Vec::new();
    encode_frame(&encode_response(&ok), &mut resp);
    assert_eq!(
        hex(&resp),
        "00 00 00 1e 01 00 00 00 00 00 00 00 01 00 1e 00 00 00 00 00 01 00 00 00 01 01 00 00 00 00 00 00 27 11"
    );
    let err = fe_meta::command::CommandError::DatabaseExists("sales".into());
    let exists = Response {
        id: 1,
        kind: RequestKind::CREATE_DB,
        result: Err(ErrorReply::from(&err)),
    };
    let mut resp = Vec::new();
    encode_frame(&encode_response(&exists), &mut resp);
    let mut expect = hex(&[
        0, 0, 0, 0x30, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0x1e, 0, 8, 0, 0, 0, 0x1f,
    ]);
    expect.push(' ');
    expect.push_str(&hex(b"database \"sales\" already exists"));
    assert_eq!(hex(&resp), expect);
}
