//! The client protocol codec: every request and response round-trips, through frames split at
//! random points; random and mutated frames never panic and yield errors that say whether the
//! request id is known. Fixed byte-for-byte examples are in `protocol_examples.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

mod common;

use bytes::BytesMut;
use fe_meta::command::{BackendRef, Command};
use fe_meta::protocol::{
    decode_request, decode_response, encode_frame, encode_request, encode_response, AuthRequest,
    ClusterConfig, ConfigMember, ErrorReply, FrameDecoder, FrontendChange, FrontendRow, MemberRow,
    MemberState, Mode, ReadOptions, RecoveryInfo, Request, RequestBody, RequestKind, RequestMeta,
    Response, ResponseBody, Role, Secret, Status, StatusInfo, BACKUP_CHUNK_MAX,
};
use fe_meta::state::backup::BackupHeader;
use fe_meta::state::catalog::{Database, SessionTag, SEQ_SPAN_MAX};
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
        Just(RequestBody::RecoveryInfo),
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
        opts().prop_map(RequestBody::Backup),
        proptest::option::of(any::<u64>())
            .prop_map(|target| RequestBody::TransferLeader { target }),
        ("[a-z0-9._@-]{1,40}", "[ -~]{1,80}").prop_map(|(identity, secret)| {
            RequestBody::Auth(AuthRequest {
                identity,
                secret: Secret::new(secret),
            })
        }),
    ]
}

fn request() -> impl Strategy<Value = Request> {
    let meta = (
        proptest::option::of(any::<u32>()),
        proptest::option::of((any::<u64>(), 1u64..u64::MAX, any::<u64>())),
    );
    (any::<u64>(), request_body(), meta).prop_map(|(id, body, (budget_ms, session))| {
        // INV-3 of the codec: a session only on a write, with floor <= seq < floor + 1024.
        let session = session
            .filter(|_| body.kind().is_write())
            .map(|(client_id, seq, floor)| SessionTag {
                client_id,
                seq,
                floor: seq - floor % (seq.min(SEQ_SPAN_MAX - 1) + 1),
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
    let o64 = || proptest::option::of(any::<u64>());
    let o16 = || proptest::option::of(any::<u16>());
    (
        (
            common::frontend(),
            any::<bool>(),
            any::<bool>(),
            o16(),
            o16(),
        ),
        (o64(), o64(), o64(), o64(), o64()),
        (proptest::option::of(common::name()), common::any_text()),
    )
        .prop_map(
            |(
                (f, is_leader, alive, quorum_port, election_port),
                (last_heartbeat_ms, replayed, last_start_time_ms, lag_entries, lag_ms),
                (version, err_msg),
            )| FrontendRow {
                sid: f.sid,
                name: f.name,
                host: f.host,
                client_port: f.client_port,
                quorum_port,
                election_port,
                role: f.role,
                is_leader,
                alive,
                last_heartbeat_ms,
                replayed_journal_id: replayed.map(Zxid),
                last_start_time_ms,
                version,
                err_msg,
                lag_entries,
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
            proptest::option::of(any::<u64>()),
        )
            .prop_map(
                |(sid, mode, leader_sid, n, staleness_ms, version, last_start_time_ms)| {
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
                        last_start_time_ms,
                    })
                },
            )
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
        RequestKind::RECOVERY_INFO => (
            (any::<u64>(), 0..4u8, any::<bool>()),
            (any::<u32>(), any::<u32>(), any::<u64>(), any::<u64>()),
            cluster_config(),
        )
            .prop_map(
                |((sid, mode, initialized), (ae, ce, logged, committed), config)| {
                    ResponseBody::RecoveryInfo(RecoveryInfo {
                        sid,
                        mode: Mode::from_tag(mode).unwrap(),
                        initialized,
                        accepted_epoch: ae,
                        current_epoch: ce,
                        last_logged: Zxid(logged),
                        last_committed: Zxid(committed),
                        config,
                    })
                },
            )
            .boxed(),
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
        RequestKind::BACKUP => prop_oneof![
            (any::<u64>(), proptest::collection::vec(any::<u8>(), 0..64))
                .prop_map(|(offset, data)| ResponseBody::BackupChunk { offset, data }),
            (any::<[u64; 5]>(), j, any::<[u8; 32]>()).prop_map(|(n, journal_id, digest)| {
                ResponseBody::BackupDone(BackupHeader {
                    cluster_id: n[0],
                    journal_id,
                    entry_count: n[1],
                    digest,
                    image_len: n[2],
                    created_ms: n[3],
                })
            }),
        ]
        .boxed(),
        RequestKind::TRANSFER_LEADER => (any::<u64>(), any::<u64>(), any::<u32>(), any::<u64>())
            .prop_map(|(from, to, epoch, elapsed_ms)| ResponseBody::Transferred {
                from,
                to,
                epoch,
                elapsed_ms,
            })
            .boxed(),
        RequestKind::AUTH => (
            "[a-z0-9._@-]{1,40}",
            proptest::sample::select(Role::ALL.to_vec()),
        )
            .prop_map(|(identity, role)| ResponseBody::Authenticated { identity, role })
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

/// A BACKUP chunk is at most `BACKUP_CHUNK_MAX` bytes; one declaring more is refused before
/// its bytes are read, and an unknown part tag is refused.
#[test]
fn backup_chunks_are_bounded_and_parts_checked() {
    let resp = |data: Vec<u8>| Response {
        id: 9,
        kind: RequestKind::BACKUP,
        result: Ok(ResponseBody::BackupChunk { offset: 0, data }),
    };
    let full = resp(vec![7; BACKUP_CHUNK_MAX]);
    assert_eq!(decode_response(&encode_response(&full)).unwrap(), full);
    let over = encode_response(&resp(vec![7; BACKUP_CHUNK_MAX + 1]));
    let e = decode_response(&over).unwrap_err();
    assert_eq!(e.request_id(), Some(9), "{e}");
    assert!(e.to_string().contains("chunk length"), "{e}");
    let mut bad_part = encode_response(&resp(vec![1, 2, 3]));
    bad_part[13] = 3; // version 1 | id 8 | kind 2 | status 2 | part
    let e = decode_response(&bad_part).unwrap_err();
    assert!(e.to_string().contains("backup part"), "{e}");
}
