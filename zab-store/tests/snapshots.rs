//! Snapshot files: round trip, verification on read, fallback to an older snapshot, temp files,
//! purge together with the log, epoch files next to them, and `DataDir` boot.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

mod common;

use std::fs;
use std::io::{Read, Write};

use common::*;
use zab_core::{Epoch, Zxid};
use zab_store::{DataDir, EpochKind, LogOptions, LogWriter, SnapDir, SnapshotReader, StoreError};

fn write_snap(snaps: &SnapDir, zxid: u64, body: &[u8]) {
    let mut w = snaps.create(Zxid(zxid), 42, None).unwrap();
    w.write_all(body).unwrap();
    let info = w.finish().unwrap();
    assert_eq!(info.zxid, Zxid(zxid));
}

fn read_all(r: &mut SnapshotReader) -> std::io::Result<Vec<u8>> {
    let mut v = vec![];
    r.read_to_end(&mut v)?;
    Ok(v)
}

#[test]
fn round_trip_and_header() {
    let d = tempfile::tempdir().unwrap();
    let snaps = SnapDir::open(d.path(), false).unwrap();
    write_snap(&snaps, 0x1_0000_0005, b"state machine bytes");
    assert_eq!(snaps.list().unwrap(), vec![Zxid(0x1_0000_0005)]);
    assert!(d.path().join("snapshot.0000000100000005").exists());
    let mut r = snaps.open_reader(Zxid(0x1_0000_0005)).unwrap();
    assert_eq!(r.info().cluster_id, 42);
    assert_eq!(read_all(&mut r).unwrap(), b"state machine bytes");
    r.finish().unwrap();
}

#[test]
fn every_corruption_is_detected_by_the_reader() {
    let d = tempfile::tempdir().unwrap();
    let snaps = SnapDir::open(d.path(), false).unwrap();
    let body: Vec<u8> = payload(Zxid(9), 100_000).to_vec();
    write_snap(&snaps, 9, &body);
    let path = snaps.path(Zxid(9));
    let good = fs::read(&path).unwrap();
    let total = good.len();
    // Flip a byte anywhere, or cut the file anywhere: reading never succeeds.
    let positions = [
        0,
        5,
        12,
        20,
        31,
        32,
        1000,
        total / 2,
        total - 20,
        total - 9,
        total - 1,
    ];
    for &p in &positions {
        let mut b = good.clone();
        b[p] ^= 0x01;
        fs::write(&path, &b).unwrap();
        let res = SnapshotReader::open(&path, Some(Zxid(9)))
            .and_then(|mut r| read_all(&mut r).map_err(|e| StoreError::from_io("read", &path, e)));
        let e = res.expect_err(&format!("flip at {p} went unnoticed"));
        assert!(e.to_string().contains("snapshot.0000000000000009"), "{e}");
    }
    for cut in [10, 40, total / 2, total - 16, total - 1] {
        fs::write(&path, &good[..cut]).unwrap();
        let res = SnapshotReader::open(&path, Some(Zxid(9)))
            .and_then(|mut r| read_all(&mut r).map_err(|e| StoreError::from_io("read", &path, e)));
        assert!(res.is_err(), "cut at {cut} went unnoticed");
    }
}

#[test]
fn the_last_read_fails_rather_than_returning_bad_bytes_as_complete() {
    let d = tempfile::tempdir().unwrap();
    let snaps = SnapDir::open(d.path(), false).unwrap();
    write_snap(&snaps, 3, b"abcdef");
    let path = snaps.path(Zxid(3));
    let mut b = fs::read(&path).unwrap();
    // Header (32), empty configuration section (its 4-byte length), then the body.
    b[36 + 2] ^= 0xff;
    fs::write(&path, &b).unwrap();
    let mut r = snaps.open_reader(Zxid(3)).unwrap();
    let mut buf = [0u8; 6];
    assert!(
        r.read(&mut buf).is_err(),
        "the read delivering the last byte reports the mismatch"
    );
}

#[test]
fn corrupted_newest_falls_back_to_older() {
    let d = tempfile::tempdir().unwrap();
    let snaps = SnapDir::open(d.path(), false).unwrap();
    write_snap(&snaps, 10, b"old state");
    write_snap(&snaps, 20, b"new state");
    let newest = snaps.path(Zxid(20));
    let mut b = fs::read(&newest).unwrap();
    let n = b.len();
    b[n - 20] ^= 0x10;
    fs::write(&newest, b).unwrap();
    let mut attempts = vec![];
    let (info, body) = snaps
        .load_newest(|r| {
            attempts.push(r.info().zxid);
            read_all(r)
        })
        .unwrap()
        .unwrap();
    assert_eq!(attempts, vec![Zxid(20), Zxid(10)]);
    assert_eq!(info.zxid, Zxid(10));
    assert_eq!(body, b"old state");
    // A consumer that stops early still gets the whole file verified before success.
    let (info, ()) = snaps.load_newest(|_| Ok(())).unwrap().unwrap();
    assert_eq!(info.zxid, Zxid(10));
    // All bad: an error, never a silent empty start.
    fs::write(snaps.path(Zxid(10)), b"junk").unwrap();
    let e = snaps.load_newest(read_all).unwrap_err();
    assert!(matches!(e, StoreError::BadSnapshot { .. }), "{e}");
    // No snapshot at all is fine.
    let empty = tempfile::tempdir().unwrap();
    assert!(SnapDir::open(empty.path(), false)
        .unwrap()
        .load_newest(read_all)
        .unwrap()
        .is_none());
}

#[test]
fn truncated_temp_file_is_ignored_and_cleaned() {
    let d = tempfile::tempdir().unwrap();
    let snaps = SnapDir::open(d.path(), false).unwrap();
    write_snap(&snaps, 10, b"good");
    // A crash in the middle of writing snapshot 20.
    let mut w = snaps.create(Zxid(20), 42, None).unwrap();
    w.write_all(&[7u8; 5000]).unwrap();
    w.flush().unwrap();
    std::mem::forget(w);
    assert!(d.path().join("snapshot.0000000000000014.tmp").exists());
    assert_eq!(snaps.list().unwrap(), vec![Zxid(10)]);
    let (info, body) = snaps.load_newest(read_all).unwrap().unwrap();
    assert_eq!((info.zxid, body.as_slice()), (Zxid(10), &b"good"[..]));
    assert_eq!(snaps.remove_temp().unwrap().len(), 1);
    assert!(!d.path().join("snapshot.0000000000000014.tmp").exists());
}

#[test]
fn abandoned_writer_removes_its_temp_file() {
    let d = tempfile::tempdir().unwrap();
    let snaps = SnapDir::open(d.path(), false).unwrap();
    let mut w = snaps.create(Zxid(5), 1, None).unwrap();
    w.write_all(b"partial").unwrap();
    drop(w);
    assert!(fs::read_dir(d.path()).unwrap().next().is_none());
}

#[test]
fn purge_keeps_newest_snapshots_and_the_log_they_need() {
    let d = tempfile::tempdir().unwrap();
    let snaps = SnapDir::open(d.path(), false).unwrap();
    let (mut log, _) = open(d.path(), 4096);
    for c in 1..=100 {
        log.append(&txn(c, 300)).unwrap();
        if c % 20 == 0 {
            log.sync().unwrap();
            write_snap(&snaps, c, format!("state at {c}").as_bytes());
        }
    }
    let (w, r, thread, events) = LogWriter::spawn_with_channel(log).unwrap();
    let oldest = zab_store::purge(&snaps, &w, 2).unwrap();
    assert_eq!(oldest, Some(Zxid(80)));
    assert_eq!(snaps.list().unwrap(), vec![Zxid(80), Zxid(100)]);
    drop(w);
    thread.join().unwrap();
    let first = match events.recv().unwrap() {
        zab_store::LogEvent::Purged { first } => first.unwrap(),
        other => panic!("{other:?}"),
    };
    assert!(first <= Zxid(81), "the segment holding 81 is kept");
    assert!(r.read_range(Zxid(80), Zxid(100)).is_ok());
    // Exactly: the segment before the first kept one holds only records <= 80 ... and it is gone.
    assert!(
        r.floor() <= Zxid(80) && r.floor() >= Zxid(60),
        "floor {}",
        r.floor()
    );
}

#[test]
fn data_dir_boots_the_durable_state() {
    let d = tempfile::tempdir().unwrap();
    let snap_dir = d.path().join("data");
    let log_dir = d.path().join("datalog");
    let opts = LogOptions {
        prealloc_bytes: 8192,
        force_sync: false,
    };
    {
        let mut dd = DataDir::open(&snap_dir, &log_dir, opts.clone()).unwrap();
        dd.epochs.write(EpochKind::Accepted, Epoch(3)).unwrap();
        dd.epochs.write(EpochKind::Current, Epoch(2)).unwrap();
        for c in 1..=30 {
            dd.log.append(&txn(c, 50)).unwrap();
        }
        dd.log.sync().unwrap();
        write_snap(&dd.snaps, 25, b"snap at 25");
    }
    let mut dd = DataDir::open(&snap_dir, &log_dir, opts).unwrap();
    let mut restored = vec![];
    let st = dd
        .load(|r| r.read_to_end(&mut restored).map(|_| ()))
        .unwrap();
    assert_eq!(restored, b"snap at 25");
    assert_eq!(st.accepted_epoch, Epoch(3));
    assert_eq!(st.current_epoch, Epoch(2));
    assert_eq!(st.snapshot_zxid, Zxid(25));
    assert_eq!(st.log_index.len(), 30);
    // The sizes the leader weighs a DIFF from the log against a SNAP with.
    assert_eq!(st.log_bytes, vec![50; 30]);
    let snap_file = std::fs::read_dir(&snap_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("snapshot.")
        })
        .unwrap();
    assert_eq!(
        st.snapshot_bytes,
        std::fs::metadata(snap_file).unwrap().len()
    );
    assert!(st.snapshot_bytes > 10);
    assert_eq!(
        st.log_tail.iter().map(|t| t.zxid.0).collect::<Vec<_>>(),
        (26..=30).collect::<Vec<_>>()
    );
}

/// A node applied txns a quorum had made durable before its own log synced them, snapshotted
/// them and crashed: the log (synced to 5) ends before the snapshot (8). Loading must restart
/// the log at the snapshot; otherwise the next epoch's records would follow 5 and a DIFF from
/// the log after 5 would silently skip 6..=8.
#[test]
fn a_log_ending_before_the_snapshot_restarts_at_it() {
    let d = tempfile::tempdir().unwrap();
    let (snap_dir, log_dir) = (d.path().join("data"), d.path().join("datalog"));
    let opts = LogOptions {
        prealloc_bytes: 8192,
        force_sync: false,
    };
    {
        let mut dd = DataDir::open(&snap_dir, &log_dir, opts.clone()).unwrap();
        for c in 1..=5 {
            dd.log.append(&txn(c, 50)).unwrap();
        }
        dd.log.sync().unwrap();
        write_snap(&dd.snaps, 8, b"snap at 8");
    }
    {
        let mut dd = DataDir::open(&snap_dir, &log_dir, opts.clone()).unwrap();
        let st = dd.load(|r| read_all(r).map(|_| ())).unwrap();
        assert_eq!(st.snapshot_zxid, Zxid(8));
        assert!(st.log_index.is_empty(), "stale records: {:?}", st.log_index);
        assert!(st.log_tail.is_empty());
        let next = Zxid((2 << 32) | 1);
        dd.log.append(&txn(next.0, 50)).unwrap();
        dd.log.sync().unwrap();
    }
    let mut dd = DataDir::open(&snap_dir, &log_dir, opts).unwrap();
    let st = dd.load(|r| read_all(r).map(|_| ())).unwrap();
    assert_eq!(
        st.log_index,
        vec![Zxid((2 << 32) | 1)],
        "no hole below the new epoch"
    );
    assert_eq!(st.log_tail.len(), 1);
    let r = dd.log.reader();
    assert!(
        r.read_range(Zxid(5), Zxid((2 << 32) | 1)).is_err(),
        "a range from before the snapshot is not served from the log"
    );
}
