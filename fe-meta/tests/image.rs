//! Images: round trips (small, 200k entries, and an ignored 1,000,000-entry / 100 MB+ run),
//! canonical digests, and strict, panic-free restore of damaged images.
//!
//! The large run: `cargo test -p fe-meta --release --test image -- --ignored --nocapture`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

mod common;

use fe_meta::Zxid;
use std::io::{BufReader, Seek, SeekFrom};
use std::time::Instant;

use fe_meta::state::catalog::{
    Backend, BackendState, Catalog, Database, Frontend, FrontendRole, SessionTag, Table,
};
use fe_meta::state::image::{digest, digest_hex, read_image, write_image, ImageError};
use fe_meta::state::journal::Op;
use fe_meta::state::replay::apply;
use proptest::prelude::*;

/// A catalog of `backends` backends, `dbs` databases with `tables_per_db` tables of `cols`
/// columns each, three frontends and a few variables, built through replay.
fn build(backends: u64, dbs: u64, tables_per_db: u64, cols: usize) -> Catalog {
    let mut id = 10_000u64;
    let mut ops = backend_ops(backends, &mut id);
    ops.extend(database_ops(dbs, tables_per_db, cols, &mut id));
    ops.extend(frontend_variable_and_session_ops());
    ops.push(Op::SaveNextId { next_id: id + 1000 });
    let mut c = Catalog::new();
    for (zxid, op) in (1u64..).zip(ops) {
        apply(&mut c, Zxid(zxid), &op.to_entry()).unwrap();
    }
    c
}

/// `backends` backends, ids from `*id` on.
fn backend_ops(backends: u64, id: &mut u64) -> Vec<Op> {
    let mut ops = Vec::new();
    for i in 0..backends {
        let be = Backend {
            id: *id,
            host: format!("10.{}.{}.{}", i >> 16 & 255, i >> 8 & 255, i & 255),
            heartbeat_port: 9050 + (i >> 24) as u16,
            state: if i % 7 == 0 {
                BackendState::Offline
            } else {
                BackendState::Normal
            },
            capacity_bytes: i << 30,
        };
        *id += 1;
        ops.push(Op::AddBackend(be));
    }
    ops
}

/// `dbs` databases, each followed by its `tables_per_db` tables of `cols` columns; ids from
/// `*id` on.
fn database_ops(dbs: u64, tables_per_db: u64, cols: usize, id: &mut u64) -> Vec<Op> {
    let mut ops = Vec::new();
    let columns = common::bulk_columns(cols);
    for d in 0..dbs {
        let db_id = *id;
        *id += 1;
        ops.push(Op::CreateDb(Database {
            id: db_id,
            name: format!("db{d}"),
        }));
        for t in 0..tables_per_db {
            let table = Table {
                id: *id,
                db_id,
                name: format!("t{t}"),
                columns: columns.as_slice().into(),
            };
            *id += 1;
            ops.push(Op::CreateTable(table));
        }
    }
    ops
}

/// Three frontends (the third an observer), three variables, a TIMESTAMP and two session
/// writes of three clients.
fn frontend_variable_and_session_ops() -> Vec<Op> {
    let mut ops = Vec::new();
    for sid in 1..=3 {
        ops.push(Op::AddFrontend(Frontend {
            sid,
            name: format!("fe{sid}"),
            host: "127.0.0.1".into(),
            client_port: 2180 + sid as u16,
            role: if sid == 3 {
                FrontendRole::Observer
            } else {
                FrontendRole::Follower
            },
        }));
    }
    for (k, v) in [
        ("query_timeout", "300"),
        ("time_zone", "UTC"),
        ("empty", ""),
    ] {
        ops.push(Op::SetGlobalVariable {
            name: k.into(),
            value: v.into(),
        });
    }
    ops.push(Op::Timestamp {
        wall_ms: 1_700_000_000_123,
        session_expiry_ms: 600_000,
    });
    for client_id in [3u64, 1, u64::MAX] {
        for seq in 1..=2 {
            let tag = SessionTag {
                client_id,
                seq,
                floor: 1,
            };
            let inner = Box::new(Op::SetGlobalVariable {
                name: format!("s{client_id}"),
                value: seq.to_string(),
            });
            ops.push(Op::SessionWrite { tag, inner });
        }
    }
    ops
}

#[test]
fn small_catalog_round_trips_with_an_equal_digest() {
    let c = build(20, 3, 4, 5);
    let mut bytes = Vec::new();
    let n = write_image(&c, &mut bytes).unwrap();
    assert_eq!(n as usize, bytes.len());
    let back = read_image(&bytes[..]).unwrap();
    assert_eq!(back, c);
    back.check().unwrap();
    assert_eq!(digest(&back).unwrap(), digest(&c).unwrap());
    assert_eq!(digest_hex(&digest(&c).unwrap()).len(), 64);

    let mut other = c.clone();
    apply(
        &mut other,
        Zxid(c.journal_id().0 + 1),
        &Op::SetGlobalVariable {
            name: "empty".into(),
            value: "x".into(),
        }
        .to_entry(),
    )
    .unwrap();
    assert_ne!(digest(&other).unwrap(), digest(&c).unwrap());
    assert_eq!(
        read_image(&[][..]).unwrap_err().to_string(),
        "image truncated at byte 0 (in header)"
    );
}

#[test]
fn client_sessions_round_trip_and_a_version_1_image_reads_without_them() {
    let c = build(2, 1, 1, 1);
    assert_eq!(c.sessions().len(), 3);
    let mut bytes = Vec::new();
    write_image(&c, &mut bytes).unwrap();
    let back = read_image(&bytes[..]).unwrap();
    assert_eq!(back.sessions(), c.sessions());
    assert_eq!(back.sessions().get(u64::MAX).unwrap().outcomes.len(), 2);

    // The same catalog without sessions, written as version 1 had it: no section 6.
    let mut plain = Catalog::new();
    apply(
        &mut plain,
        Zxid(1),
        &Op::SetGlobalVariable {
            name: "a".into(),
            value: "b".into(),
        }
        .to_entry(),
    )
    .unwrap();
    let mut v2 = Vec::new();
    write_image(&plain, &mut v2).unwrap();
    let end = v2.len() - 13;
    assert_eq!(&v2[end - 9..end], &[6, 0, 0, 0, 0, 0, 0, 0, 0]);
    let mut v1 = [&v2[..end - 9], &v2[end..]].concat();
    v1[8..12].copy_from_slice(&1u32.to_be_bytes());
    reseal(&mut v1);
    assert_eq!(read_image(&v1[..]).unwrap(), plain);
}

#[test]
fn two_hundred_thousand_entries_round_trip() {
    // 150k backends + 50k tables (+ 250 databases): 200k+ entries.
    let c = build(150_000, 250, 200, 4);
    assert!(c.entry_count() >= 200_000);
    let mut bytes = Vec::new();
    let started = Instant::now();
    write_image(&c, &mut bytes).unwrap();
    let wrote = started.elapsed();
    let back = read_image(&bytes[..]).unwrap();
    eprintln!(
        "200k entries: {} bytes, write {wrote:?}, read {:?}",
        bytes.len(),
        started.elapsed() - wrote
    );
    assert_eq!(back, c);
}

/// 1,000,000 entries and over 100 MB of image, streamed through a file. Ignored by default
/// (minutes in debug builds); run it in release as shown in the module docs. Measured on 2
/// cores: building the catalog by replay 7 s, writing the 108 MB image 1 s, reading it back
/// 6 s; neither side buffers more than one record beyond the catalog itself.
#[test]
#[ignore = "large: run with --release -- --ignored"]
fn one_million_entries_and_100_mb_through_a_file() {
    // 800k backends + 200k tables of 28 columns (2,000 databases).
    let started = Instant::now();
    let c = build(800_000, 2_000, 100, 28);
    assert!(c.entry_count() >= 1_000_000);
    let built = started.elapsed();
    let mut file = tempfile::tempfile().unwrap();
    let len = write_image(&c, &mut file).unwrap();
    let wrote = started.elapsed();
    eprintln!(
        "1M entries: build {built:?}, write {:?}, {len} bytes",
        wrote - built
    );
    assert!(len > 100_000_000, "image is {len} bytes");
    file.seek(SeekFrom::Start(0)).unwrap();
    let back = read_image(BufReader::new(file)).unwrap();
    let read = started.elapsed();
    eprintln!("1M entries: read {:?}", read - wrote);
    assert_eq!(back, c);
    assert_eq!(digest(&back).unwrap(), digest(&c).unwrap());
}

fn reseal(bytes: &mut [u8]) {
    let n = bytes.len();
    let crc = crc32c::crc32c(&bytes[..n - 4]);
    bytes[n - 4..].copy_from_slice(&crc.to_be_bytes());
}

#[test]
fn damaged_images_are_refused_with_reasons() {
    let c = build(3, 1, 2, 2);
    let mut good = Vec::new();
    write_image(&c, &mut good).unwrap();

    let mut bad = good.clone();
    bad[0] = b'X';
    assert!(matches!(
        read_image(&bad[..]),
        Err(ImageError::BadMagic { .. })
    ));

    let mut bad = good.clone();
    bad[11] = 3;
    assert!(matches!(
        read_image(&bad[..]),
        Err(ImageError::UnsupportedVersion { found: 3 })
    ));

    let mut bad = good.clone();
    let last_data = bad.len() - 20;
    bad[last_data] ^= 0x40;
    let err = read_image(&bad[..]).unwrap_err();
    assert!(
        matches!(err, ImageError::Checksum { .. } | ImageError::Record { .. }),
        "{err}"
    );

    // next_id (bytes 20..28) below the ids present, with a valid CRC: inconsistent.
    let mut bad = good.clone();
    bad[20..28].copy_from_slice(&10_001u64.to_be_bytes());
    reseal(&mut bad);
    let err = read_image(&bad[..]).unwrap_err().to_string();
    assert!(err.contains("next_id 10001 is not above every id"), "{err}");

    let mut bad = good.clone();
    bad.push(0);
    assert!(read_image(&bad[..])
        .unwrap_err()
        .to_string()
        .contains("bytes follow the end"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn truncated_or_mutated_images_never_panic(
        cut in any::<prop::sample::Index>(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        reseal_it in any::<bool>(),
    ) {
        let c = build(4, 2, 2, 3);
        let mut good = Vec::new();
        write_image(&c, &mut good).unwrap();
        let at = cut.index(good.len());
        prop_assert!(read_image(&good[..at]).is_err());
        let mut bad = good.clone();
        for (i, v) in flips {
            let i = i.index(bad.len() - 4);
            bad[i] = v;
        }
        if reseal_it {
            reseal(&mut bad);
        }
        if let Ok(back) = read_image(&bad[..]) {
            // A mutation that still reads must yield a catalog satisfying its invariants.
            back.check().unwrap();
        }
    }
}
