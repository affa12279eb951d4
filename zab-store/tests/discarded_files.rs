//! Files that leave the log or the snapshot directory (purged, truncated, reset) are renamed
//! to `discarded.<name>.<n>` and freed in the background (`discard` INV-1..3): out of the listing
//! at once, gone once the log is dropped, and removed at the next open if a crash left them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

mod common;

use std::fs;
use std::io::Write;
use std::path::Path;

use common::*;
use zab_core::Zxid;
use zab_store::SnapDir;

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn discarded(dir: &Path) -> Vec<String> {
    names(dir)
        .into_iter()
        .filter(|n| n.starts_with("discarded."))
        .collect()
}

/// A log in `dir` (4 KiB segments) holding records 1..=`n`, synced.
fn synced_log(dir: &Path, n: u64) -> zab_store::TxnLog {
    let (mut log, _) = open(dir, 4096);
    for c in 1..=n {
        log.append(&txn(c, 300)).unwrap();
    }
    log.sync().unwrap();
    log
}

#[test]
fn purged_and_truncated_segments_leave_the_log_at_once_and_the_disk_once_it_is_dropped() {
    let d = tempfile::tempdir().unwrap();
    let mut log = synced_log(d.path(), 200);
    let before = segments(d.path());
    assert!(before.len() >= 10, "{before:?}");

    let first = log.purge(Zxid(100)).unwrap().unwrap();
    let after_purge = segments(d.path());
    assert_eq!(
        zab_store::parse_segment_name(&after_purge[0]),
        Some(first),
        "the first segment listed is the first one kept"
    );
    for gone in before.iter().filter(|n| !after_purge.contains(n)) {
        assert!(!d.path().join(gone).exists(), "{gone} left its name");
    }

    log.truncate(Zxid(150)).unwrap();
    let after_truncate = segments(d.path());
    assert!(after_truncate.len() < after_purge.len());
    drop(log);
    assert_eq!(discarded(d.path()), Vec::<String>::new(), "all freed");

    let (log, rec) = open(d.path(), 4096);
    assert_eq!(segments(d.path()), after_truncate);
    assert_eq!(log.reader().first_zxid(), Some(first));
    assert_eq!(log.last_zxid(), Some(Zxid(150)));
    assert!(rec.removed.is_empty(), "{:?}", rec.removed);
}

#[test]
fn a_discarded_segment_left_by_a_crash_is_removed_at_open_and_holds_nothing_of_the_log() {
    let d = tempfile::tempdir().unwrap();
    let log = synced_log(d.path(), 60);
    drop(log);
    // As a crash between the rename and the freeing leaves it: a whole segment's bytes under the
    // discarded name (here a copy of the first one, records 1.. included).
    let first = segments(d.path())[0].clone();
    let leftover = format!("discarded.{first}.7");
    fs::copy(d.path().join(&first), d.path().join(&leftover)).unwrap();

    let (log, rec) = open(d.path(), 4096);
    assert_eq!(rec.removed, vec![d.path().join(&leftover)]);
    assert!(!d.path().join(&leftover).exists());
    assert_eq!(contents(&log).len(), 60, "the log itself is untouched");
    let offline = zab_store::read_log(d.path(), |_| {}).unwrap();
    assert!(offline.temp_files.is_empty());
}

#[test]
fn the_offline_reader_reports_a_discarded_segment_as_a_temp_file() {
    let d = tempfile::tempdir().unwrap();
    let log = synced_log(d.path(), 30);
    drop(log);
    let leftover = d.path().join("discarded.log.0000000000000001.0");
    fs::write(&leftover, b"anything").unwrap();
    let mut records = 0;
    let offline = zab_store::read_log(d.path(), |_| records += 1).unwrap();
    assert_eq!(offline.temp_files, vec![leftover]);
    assert_eq!(records, 30);
}

fn write_snap(snaps: &SnapDir, zxid: u64) {
    let mut w = snaps.create(Zxid(zxid), 42, None).unwrap();
    w.write_all(&vec![7u8; 64 * 1024]).unwrap();
    w.finish().unwrap();
}

#[test]
fn purged_snapshots_are_out_of_the_listing_and_freed_and_leftovers_go_at_start_up() {
    let d = tempfile::tempdir().unwrap();
    let snaps = SnapDir::open(d.path(), true).unwrap();
    for z in [10, 20, 30, 40] {
        write_snap(&snaps, z);
    }
    assert_eq!(snaps.purge(2).unwrap(), Some(Zxid(30)));
    assert_eq!(snaps.list().unwrap(), vec![Zxid(30), Zxid(40)]);
    assert_eq!(discarded(d.path()), Vec::<String>::new(), "freed by purge");

    let leftover = d.path().join("discarded.snapshot.0000000000000005.0");
    fs::write(&leftover, b"half freed").unwrap();
    assert_eq!(
        snaps.list().unwrap(),
        vec![Zxid(30), Zxid(40)],
        "not listed"
    );
    let removed = snaps.remove_temp().unwrap();
    assert_eq!(removed, vec![leftover.clone()]);
    assert!(!leftover.exists());
    assert_eq!(snaps.list().unwrap(), vec![Zxid(30), Zxid(40)]);
}
