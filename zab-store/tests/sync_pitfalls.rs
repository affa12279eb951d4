//! PITFALLS C2, C6 and C7 against real files: truncation that is exact and survives a crash
//! at every point it can be interrupted, snapshots that are torn or missing, and logs without
//! a base snapshot.
//!
//! A crash is simulated by building the on-disk state the store can leave behind at each
//! point (the order of `TxnLog::truncate`, its INV-3: later segments removed newest first,
//! then the first dropped record's header zeroed, then the rest of the dropped bytes) and
//! reopening without a clean close.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;

use common::*;
use zab_core::{Txn, Zxid};
use zab_store::{DataDir, LogOptions, SnapDir, SnapshotReader, StoreError, TxnLog};

const PREALLOC: usize = 2048;
/// Segment header and record header sizes of the documented format.
const SEGMENT_HEADER: usize = 32;
const RECORD_HEADER: usize = 20;

/// Records with even zxids 2, 4, …, 2n over several small segments.
fn build(dir: &Path, n: u64) -> Vec<Txn> {
    let (mut log, _) = open(dir, PREALLOC);
    let txns: Vec<Txn> = (1..=n)
        .map(|i| txn(2 * i, 200 + (i as usize * 53) % 900))
        .collect();
    for t in &txns {
        log.append(t).unwrap();
        if t.zxid.0 % 10 == 0 {
            log.sync().unwrap();
        }
    }
    log.sync().unwrap();
    txns
}

/// (file name, offset) of every record, in zxid order.
fn record_positions(files: &BTreeMap<String, Vec<u8>>) -> Vec<(String, usize)> {
    let mut out = vec![];
    for (name, bytes) in files {
        if zab_store::parse_segment_name(name).is_none() {
            continue;
        }
        let mut off = SEGMENT_HEADER;
        while off + RECORD_HEADER <= bytes.len()
            && bytes[off..off + RECORD_HEADER].iter().any(|&b| b != 0)
        {
            let len = u32::from_be_bytes(bytes[off..off + 4].try_into().unwrap()) as usize;
            out.push((name.clone(), off));
            off += RECORD_HEADER + len;
        }
    }
    out
}

/// Every state a crash during `truncate(target)` can leave, in order, starting with the
/// untouched log and ending with the finished truncation.
fn crash_states(
    files: &BTreeMap<String, Vec<u8>>,
    txns: &[Txn],
    target: Zxid,
    finished: &BTreeMap<String, Vec<u8>>,
) -> Vec<(String, BTreeMap<String, Vec<u8>>)> {
    let mut states = vec![("before".to_string(), files.clone())];
    let mut cur = files.clone();
    let segs: Vec<(String, Zxid)> = files
        .keys()
        .filter_map(|n| zab_store::parse_segment_name(n).map(|b| (n.clone(), b)))
        .collect();
    for (name, base) in segs.iter().rev() {
        if *base > target {
            cur.remove(name);
            states.push((format!("removed {name}"), cur.clone()));
        }
    }
    let positions = record_positions(files);
    if let Some(i) = txns.iter().position(|t| t.zxid > target) {
        let (name, off) = &positions[i];
        if cur.contains_key(name) {
            let bytes = cur.get_mut(name).unwrap();
            bytes[*off..*off + RECORD_HEADER].fill(0);
            let end = bytes.len();
            states.push((format!("header zeroed in {name}"), cur.clone()));
            let mid = (*off + RECORD_HEADER + end) / 2;
            cur.get_mut(name).unwrap()[*off + RECORD_HEADER..mid].fill(0);
            states.push((format!("half of the tail zeroed in {name}"), cur.clone()));
        }
    }
    states.push(("finished".to_string(), finished.clone()));
    states
}

/// C2 (ZOOKEEPER-1156/1489): truncation keeps exactly the records ≤ the target (also when the
/// target is not itself a record, before the first record, on a segment boundary or past the
/// end), is durable, and is idempotent across a crash at every point: reopening any state it
/// can leave gives a prefix of the old log that still holds every kept record, truncating
/// again gives exactly the kept records, and appending after that works and survives a reopen.
#[test]
fn c2_truncation_is_exact_durable_and_crash_idempotent() {
    let d = tempfile::tempdir().unwrap();
    let txns = build(d.path(), 40);
    let original = read_dir_files(d.path());
    assert!(
        segments(d.path()).len() >= 4,
        "the test needs several segments"
    );
    let bases: Vec<u64> = segments(d.path())
        .iter()
        .map(|n| zab_store::parse_segment_name(n).unwrap().0)
        .collect();
    let mut targets = vec![0, 1, 2, 3, 41, 42, 79, 80, 1000];
    for b in &bases[1..] {
        targets.extend([b - 2, b - 1, *b]);
    }
    for t in targets {
        let target = Zxid(t);
        let kept: Vec<Txn> = txns.iter().filter(|x| x.zxid <= target).cloned().collect();
        write_dir_files(d.path(), &original);
        let (mut log, _) = open(d.path(), PREALLOC);
        let last = log.truncate(target).unwrap();
        assert_eq!(
            last,
            kept.last().map(|x| x.zxid),
            "truncate({t}) returns the new end"
        );
        assert_eq!(contents(&log), kept, "truncate({t})");
        drop(log);
        let finished = read_dir_files(d.path());
        for (what, state) in crash_states(&original, &txns, target, &finished) {
            write_dir_files(d.path(), &state);
            let (mut log, _) = TxnLog::open(d.path(), opts(PREALLOC))
                .unwrap_or_else(|e| panic!("reopen after crash ({what}, target {t}): {e}"));
            let found = contents(&log);
            assert!(
                found.len() >= kept.len() && txns.starts_with(&found),
                "after a crash ({what}, target {t}) the log is not a prefix of the old one \
                 holding every kept record: {} records",
                found.len()
            );
            log.truncate(target).unwrap();
            assert_eq!(contents(&log), kept, "truncate again ({what}, target {t})");
            let next = txn(1001, 64);
            log.append(&next).unwrap();
            log.sync().unwrap();
            drop(log);
            let (log, _) = open(d.path(), PREALLOC);
            let mut want = kept.clone();
            want.push(next);
            assert_eq!(
                contents(&log),
                want,
                "reopen after truncate+append ({what}, target {t})"
            );
        }
    }
}

fn write_snap(snaps: &SnapDir, zxid: u64, body: &[u8]) {
    let mut w = snaps.create(Zxid(zxid), 7, None).unwrap();
    w.write_all(body).unwrap();
    w.finish().unwrap();
}

fn read_body(r: &mut SnapshotReader) -> std::io::Result<Vec<u8>> {
    let mut v = vec![];
    r.read_to_end(&mut v)?;
    Ok(v)
}

fn data_opts() -> LogOptions {
    LogOptions {
        prealloc_bytes: PREALLOC,
        force_sync: false,
    }
}

/// Log records 1..=n, synced; the log directory is `datalog`, snapshots in `data`.
fn data_dir_with_log(root: &Path, n: u64) {
    let mut dd = DataDir::open(root.join("data"), root.join("datalog"), data_opts()).unwrap();
    for c in 1..=n {
        dd.log.append(&txn(c, 700)).unwrap();
    }
    dd.log.sync().unwrap();
}

fn load(root: &Path) -> Result<(zab_core::DurableState, Vec<u8>), StoreError> {
    let mut dd = DataDir::open(root.join("data"), root.join("datalog"), data_opts())?;
    let mut body = vec![];
    let st = dd.load(|r| {
        body = read_body(r)?;
        Ok(())
    })?;
    Ok((st, body))
}

fn tail(st: &zab_core::DurableState) -> Vec<u64> {
    st.log_tail.iter().map(|t| t.zxid.0).collect()
}

/// C6 (ZOOKEEPER-2310): a snapshot that did not become durable is never relied on. A power
/// loss can leave the newest snapshot empty or cut short under its final name (or only as a
/// temp file): loading ignores it, falls back to the older snapshot and replays the log from
/// there, so no txn is missing. When nothing older can cover the gap (the log was purged
/// behind the torn snapshot), loading fails naming the problem instead of starting with a
/// hole.
#[test]
fn c6_a_torn_snapshot_is_ignored_and_the_log_still_replays() {
    for (what, damage) in [
        ("empty", 0usize),
        ("cut after the header", 40),
        ("cut in the body", 900),
        ("temp file only", usize::MAX),
    ] {
        let d = tempfile::tempdir().unwrap();
        data_dir_with_log(d.path(), 30);
        let snaps = SnapDir::open(d.path().join("data"), false).unwrap();
        write_snap(&snaps, 10, b"state at 10");
        if damage == usize::MAX {
            let mut w = snaps.create(Zxid(25), 7, None).unwrap();
            w.write_all(&[9u8; 2000]).unwrap();
            w.flush().unwrap();
            std::mem::forget(w);
        } else {
            write_snap(&snaps, 25, &[9u8; 2000]);
            let p = snaps.path(Zxid(25));
            let bytes = std::fs::read(&p).unwrap();
            std::fs::write(&p, &bytes[..damage.min(bytes.len())]).unwrap();
        }
        let (st, body) = load(d.path()).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(body, b"state at 10", "{what}");
        assert_eq!(st.snapshot_zxid, Zxid(10), "{what}");
        assert_eq!(
            tail(&st),
            (11..=30).collect::<Vec<_>>(),
            "{what}: txns missing"
        );
    }

    // Nothing older covers what the torn snapshot claimed: refuse to start.
    let d = tempfile::tempdir().unwrap();
    {
        let mut dd =
            DataDir::open(d.path().join("data"), d.path().join("datalog"), data_opts()).unwrap();
        for c in 1..=30 {
            dd.log.append(&txn(c, 700)).unwrap();
        }
        dd.log.sync().unwrap();
        dd.log.purge(Zxid(25)).unwrap();
        assert!(
            dd.log.reader().floor() > Zxid(10),
            "the test needs a purged log"
        );
        write_snap(&dd.snaps, 10, b"state at 10");
        write_snap(&dd.snaps, 25, &[9u8; 2000]);
    }
    let p = SnapDir::open(d.path().join("data"), false)
        .unwrap()
        .path(Zxid(25));
    std::fs::write(&p, b"").unwrap();
    let e = load(d.path()).expect_err("a hole between snapshot 10 and the purged log");
    assert!(
        matches!(e, StoreError::NotOnDisk { .. }),
        "a clear error naming the log, got {e}"
    );
}

/// C7 (ZOOKEEPER-2325/3644/3781): a log that does not start at the beginning of history but
/// has no snapshot below it means the base state is lost: loading refuses with an error
/// naming the log directory, never starts "empty". A log that does start at the beginning
/// needs no snapshot and is replayed whole; an empty snapshot (at zxid 0, or with an empty
/// body) is never a reason to skip the log: every record after it is replayed.
#[test]
fn c7_logs_without_a_base_snapshot_and_empty_snapshots() {
    // Log purged at its front, no snapshot at all.
    let d = tempfile::tempdir().unwrap();
    {
        let mut dd =
            DataDir::open(d.path().join("data"), d.path().join("datalog"), data_opts()).unwrap();
        for c in 1..=30 {
            dd.log.append(&txn(c, 700)).unwrap();
        }
        dd.log.sync().unwrap();
        dd.log.purge(Zxid(20)).unwrap();
        assert!(
            dd.log.reader().floor() > Zxid::ZERO,
            "the test needs a purged log"
        );
    }
    let e = load(d.path()).expect_err("logs without a base snapshot");
    match &e {
        StoreError::NotOnDisk { path, .. } => {
            assert!(path.ends_with("datalog"), "names the log dir: {e}")
        }
        other => panic!("expected NotOnDisk, got {other}"),
    }

    // The same with every snapshot unreadable: also an error, not an empty start.
    let snaps = SnapDir::open(d.path().join("data"), false).unwrap();
    write_snap(&snaps, 22, b"x");
    std::fs::write(snaps.path(Zxid(22)), b"garbage").unwrap();
    assert!(load(d.path()).is_err(), "an unreadable base snapshot");

    // A log from the very beginning without any snapshot: replayed whole.
    let d = tempfile::tempdir().unwrap();
    data_dir_with_log(d.path(), 12);
    let (st, body) = load(d.path()).unwrap();
    assert!(body.is_empty());
    assert_eq!(st.snapshot_zxid, Zxid::ZERO);
    assert_eq!(tail(&st), (1..=12).collect::<Vec<_>>());

    // An empty snapshot at zxid 0 plus the log: the log is replayed.
    let snaps = SnapDir::open(d.path().join("data"), false).unwrap();
    write_snap(&snaps, 0, b"");
    let (st, _) = load(d.path()).unwrap();
    assert_eq!(tail(&st), (1..=12).collect::<Vec<_>>());

    // A snapshot with an empty body at 5: everything after it is still replayed.
    write_snap(&snaps, 5, b"");
    let (st, body) = load(d.path()).unwrap();
    assert!(body.is_empty());
    assert_eq!(st.snapshot_zxid, Zxid(5));
    assert_eq!(tail(&st), (6..=12).collect::<Vec<_>>());
}
