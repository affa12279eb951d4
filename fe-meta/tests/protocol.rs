//! The client protocol codec: every request and response round-trips, through frames split at
//! random points; random and mutated frames never panic and yield errors that say whether the
//! request id is known.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

mod common;

use bytes::BytesMut;
use fe_meta::command::{BackendRef, Command};
use fe_meta::protocol::{
    classify_start, decode_request, decode_response, encode_frame, encode_request, encode_response,
    ClusterConfig, ConfigMember, ConnectionStart, ErrorReply, FrameDecoder, FrontendChange,
    FrontendRow, MemberRow, MemberState, Mode, ProtocolError, ReadOptions, Request, RequestBody,
    RequestKind, RequestMeta, Response, ResponseBody, Status, StatusInfo,
};
use fe_meta::state::catalog::{Database, SessionTag};
use fe_meta::Zxid;
use proptest::prelude::*;

fn opts() -> impl Strategy<Value = ReadOptions> {
    any::<bool>().prop_map(|sync| ReadOptions { sync })
}

fn backend_ref() -> impl Strategy<Value = BackendRef> {
    prop_oneof![
        any::<u64>().prop_map(BackendRef::Id),
        (common::name(), any::<u16>()).prop_map(|(host, port)| BackendRef::Addr { host, port }),
    ]
}

fn request_body() -> impl Strategy<Value = RequestBody> {
    let n = common::name;
    prop_oneof![
        Just(RequestBody::Status),
        opts().prop_map(RequestBody::Digest),
        Just(RequestBody::Sync),
        (n(), any::<u16>(), any::<u64>()).prop_map(|(host, heartbeat_port, capacity_bytes)| {
            RequestBody::Write(Command::AddBackend {
                host,
                heartbeat_port,
                capacity_bytes,
            })
        }),
        backend_ref().prop_map(|x| RequestBody::Write(Command::DropBackend(x))),
        (
            backend_ref(),
            proptest::option::of(common::backend_state()),
            proptest::option::of(any::<u64>())
        )
            .prop_map(|(target, state, capacity_bytes)| RequestBody::Write(
                Command::ModifyBackend {
                    target,
                    state,
                    capacity_bytes
                }
            )),
        opts().prop_map(RequestBody::ShowBackends),
        opts().prop_map(RequestBody::ShowFrontends),
        Just(RequestBody::GetConfig),
        (any::<u64>(), common::role(), common::any_text()).prop_map(|(sid, role, address)| {
            RequestBody::ChangeMembership(FrontendChange::Add { sid, role, address })
        }),
        any::<u64>().prop_map(|sid| RequestBody::ChangeMembership(FrontendChange::Drop { sid })),
        opts().prop_map(RequestBody::ShowMembers),
        n().prop_map(|name| RequestBody::Write(Command::CreateDb { name })),
        n().prop_map(|name| RequestBody::Write(Command::DropDb { name })),
        (n(), n())
            .prop_map(|(name, new_name)| RequestBody::Write(Command::RenameDb { name, new_name })),
        opts().prop_map(RequestBody::ShowDatabases),
        (n(), n(), common::columns()).prop_map(|(db, name, columns)| RequestBody::Write(
            Command::CreateTable { db, name, columns }
        )),
        (n(), n()).prop_map(|(db, name)| RequestBody::Write(Command::DropTable { db, name })),
        (opts(), n()).prop_map(|(opts, db)| RequestBody::ShowTables { opts, db }),
        (n(), common::any_text())
            .prop_map(|(name, value)| RequestBody::Write(Command::SetVar { name, value })),
        (opts(), n()).prop_map(|(opts, name)| RequestBody::GetVar { opts, name }),
        opts().prop_map(RequestBody::ShowVars),
    ]
}

fn request() -> impl Strategy<Value = Request> {
    let meta = (
        proptest::option::of(any::<u32>()),
        proptest::option::of((any::<u64>(), 1u64..u64::MAX, any::<u64>())),
    );
    (any::<u64>(), request_body(), meta).prop_map(|(id, body, (budget_ms, session))| {
        // INV-3 of the codec: a session only on a write, with floor <= seq.
        let session = session
            .filter(|_| body.kind().is_write())
            .map(|(client_id, seq, floor)| SessionTag {
                client_id,
                seq,
                floor: floor % (seq + 1),
            });
        Request {
            id,
            meta: RequestMeta { budget_ms, session },
            body,
        }
    })
}

fn error_reply() -> impl Strategy<Value = ErrorReply> {
    let status = proptest::sample::select(Status::ALL.to_vec());
    let leader = (
        proptest::option::of(any::<u64>()),
        proptest::option::of("[a-z0-9.]{1,20}:[0-9]{1,5}"),
    );
    let lag = (any::<u64>(), any::<u64>());
    (status, leader, lag, common::any_text()).prop_map(
        |(status, (leader_sid, leader_addr), (lag_ms, tolerance_ms), message)| match status {
            Status::NotLeader => ErrorReply::not_leader(leader_sid, leader_addr, message),
            Status::Stale => ErrorReply::stale(lag_ms, tolerance_ms, message),
            _ => ErrorReply::new(status, message),
        },
    )
}

fn frontend_row() -> impl Strategy<Value = FrontendRow> {
    (
        common::frontend(),
        any::<bool>(),
        any::<bool>(),
        any::<u64>(),
        proptest::option::of(any::<u64>()),
    )
        .prop_map(
            |(f, is_leader, alive, replayed_journal_id, lag_ms)| FrontendRow {
                sid: f.sid,
                name: f.name,
                host: f.host,
                client_port: f.client_port,
                role: f.role,
                is_leader,
                alive,
                replayed_journal_id: Zxid(replayed_journal_id),
                lag_ms,
            },
        )
}

fn member_state() -> impl Strategy<Value = MemberState> {
    (0u8..3).prop_map(|t| MemberState::from_tag(t).unwrap())
}

fn cluster_config() -> impl Strategy<Value = ClusterConfig> {
    let member =
        (any::<u64>(), member_state(), common::any_text()).prop_map(|(sid, state, address)| {
            ConfigMember {
                sid,
                state,
                address,
            }
        });
    (
        any::<[u64; 4]>(),
        small_vec(member),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(|(n, members, init_limit, sync_limit)| ClusterConfig {
            cluster_id: n[0],
            version: Zxid(n[1]),
            in_force_version: Zxid(n[2]),
            members,
            tick_time_ms: n[3],
            init_limit,
            sync_limit,
        })
}

fn small_vec<S: Strategy>(s: S) -> proptest::collection::VecStrategy<S> {
    proptest::collection::vec(s, 0..4)
}

/// A success body for `kind`.
fn body_for(kind: RequestKind) -> BoxedStrategy<ResponseBody> {
    let j = any::<u64>().prop_map(Zxid);
    match kind {
        RequestKind::STATUS => (
            any::<u64>(),
            0u8..4,
            proptest::option::of(any::<u64>()),
            any::<[u64; 5]>(),
            proptest::option::of(any::<u64>()),
            common::name(),
        )
            .prop_map(|(sid, mode, leader_sid, n, staleness_ms, version)| {
                ResponseBody::Status(StatusInfo {
                    sid,
                    mode: Mode::from_tag(mode).unwrap(),
                    leader_sid,
                    epoch: n[0],
                    applied_journal_id: Zxid(n[1]),
                    last_timestamp_ms: n[2],
                    staleness_ms,
                    entry_count: n[3],
                    cluster_id: n[4],
                    version,
                })
            })
            .boxed(),
        RequestKind::DIGEST => (j, any::<[u8; 32]>(), any::<u64>())
            .prop_map(|(journal_id, digest, entry_count)| ResponseBody::Digest {
                journal_id,
                digest,
                entry_count,
            })
            .boxed(),
        RequestKind::SYNC => j
            .prop_map(|journal_id| ResponseBody::Synced { journal_id })
            .boxed(),
        RequestKind::SHOW_BACKENDS => (j, small_vec(common::backend()))
            .prop_map(|(journal_id, backends)| ResponseBody::Backends {
                journal_id,
                backends,
            })
            .boxed(),
        RequestKind::SHOW_FRONTENDS => (j, small_vec(frontend_row()))
            .prop_map(|(journal_id, rows)| ResponseBody::Frontends { journal_id, rows })
            .boxed(),
        RequestKind::GET_CONFIG => cluster_config().prop_map(ResponseBody::Config).boxed(),
        RequestKind::ADD_FRONTEND | RequestKind::DROP_FRONTEND => (j, cluster_config())
            .prop_map(|(version, config)| ResponseBody::Reconfigured { version, config })
            .boxed(),
        RequestKind::SHOW_MEMBERS => (
            j,
            any::<u64>().prop_map(Zxid),
            small_vec(
                (frontend_row(), any::<bool>())
                    .prop_map(|(row, joining)| MemberRow { row, joining }),
            ),
        )
            .prop_map(|(journal_id, config_version, rows)| ResponseBody::Members {
                journal_id,
                config_version,
                rows,
            })
            .boxed(),
        RequestKind::SHOW_DATABASES => (j, small_vec((any::<u64>(), common::name())))
            .prop_map(|(journal_id, dbs)| ResponseBody::Databases {
                journal_id,
                databases: dbs
                    .into_iter()
                    .map(|(id, name)| Database { id, name })
                    .collect(),
            })
            .boxed(),
        RequestKind::SHOW_TABLES => (j, small_vec(common::op()))
            .prop_map(|(journal_id, ops)| ResponseBody::Tables {
                journal_id,
                tables: ops
                    .into_iter()
                    .filter_map(|op| match op {
                        fe_meta::state::journal::Op::CreateTable(t) => Some(t),
                        _ => None,
                    })
                    .collect(),
            })
            .boxed(),
        RequestKind::GET_VAR => (j, proptest::option::of(common::any_text()))
            .prop_map(|(journal_id, value)| ResponseBody::Var { journal_id, value })
            .boxed(),
        RequestKind::SHOW_VARS => (j, small_vec((common::name(), common::any_text())))
            .prop_map(|(journal_id, vars)| ResponseBody::Vars { journal_id, vars })
            .boxed(),
        _ => (j, proptest::option::of(any::<u64>()))
            .prop_map(|(journal_id, created_id)| ResponseBody::Written {
                journal_id,
                created_id,
            })
            .boxed(),
    }
}

fn response() -> impl Strategy<Value = Response> {
    (
        any::<u64>(),
        proptest::sample::select(RequestKind::ALL.to_vec()),
        any::<bool>(),
    )
        .prop_flat_map(|(id, kind, ok)| {
            let result = if ok {
                body_for(kind).prop_map(Ok).boxed()
            } else {
                error_reply().prop_map(Err).boxed()
            };
            result.prop_map(move |result| Response { id, kind, result })
        })
}

/// Frames `payloads`, feeds them to a decoder in chunks cut at `cuts`, returns what it yields.
fn through_frames(payloads: &[Vec<u8>], cuts: &[prop::sample::Index]) -> Vec<Vec<u8>> {
    let mut stream = Vec::new();
    for p in payloads {
        encode_frame(p, &mut stream);
    }
    let mut points: Vec<usize> = cuts.iter().map(|c| c.index(stream.len() + 1)).collect();
    points.push(stream.len());
    points.sort();
    let (decoder, mut buf, mut out, mut from) =
        (FrameDecoder::default(), BytesMut::new(), Vec::new(), 0);
    for to in points {
        buf.extend_from_slice(&stream[from..to]);
        from = to;
        while let Some(frame) = decoder.decode(&mut buf).unwrap() {
            out.push(frame.to_vec());
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn requests_round_trip_through_split_frames(
        reqs in proptest::collection::vec(request(), 1..5),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let payloads: Vec<Vec<u8>> = reqs.iter().map(encode_request).collect();
        let got = through_frames(&payloads, &cuts);
        let decoded: Vec<Request> = got.iter().map(|p| decode_request(p).unwrap()).collect();
        prop_assert_eq!(decoded, reqs);
    }

    #[test]
    fn responses_round_trip(resp in response()) {
        if let Ok(body) = &resp.result {
            prop_assert!(body.answers(resp.kind));
        }
        let bytes = encode_response(&resp);
        prop_assert_eq!(decode_response(&bytes).unwrap(), resp);
    }

    #[test]
    fn random_payloads_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
        let _ = decode_request(&bytes);
        let _ = decode_response(&bytes);
        let mut buf = BytesMut::from(&bytes[..]);
        while let Ok(Some(frame)) = FrameDecoder::new(64).decode(&mut buf) {
            let _ = decode_request(&frame);
        }
    }

    #[test]
    fn mutated_requests_never_panic_and_keep_their_id(
        req in request(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = encode_request(&req);
        let header_len = 11;
        for (at, v) in flips {
            // Mutate only the kind and body: the header stays readable.
            let i = header_len - 2 + at.index(bytes.len() - (header_len - 2));
            bytes[i] = v;
        }
        let cut = header_len + cut.index(bytes.len() - header_len + 1);
        for candidate in [&bytes[..], &bytes[..cut]] {
            match decode_request(candidate) {
                Ok(r) => prop_assert_eq!(decode_request(&encode_request(&r)).unwrap(), r),
                Err(e) => {
                    prop_assert_eq!(e.request_id(), Some(req.id), "{}", e);
                    let answer = e.to_response();
                    prop_assert_eq!(answer.id, req.id);
                    prop_assert_eq!(decode_response(&encode_response(&answer)).unwrap(), answer);
                }
            }
        }
    }

    #[test]
    fn mutated_responses_never_panic(
        resp in response(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = encode_response(&resp);
        for (at, v) in flips {
            let i = at.index(bytes.len());
            bytes[i] = v;
        }
        let _ = decode_response(&bytes);
        let _ = decode_response(&bytes[..cut.index(bytes.len() + 1)]);
    }
}

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
