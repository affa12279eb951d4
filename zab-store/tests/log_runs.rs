//! Records appended together are written with one `pwrite` per run in a segment (`log`
//! INV-6), and read, recovered and refused exactly as records appended one by one.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

mod common;

use common::*;
use zab_core::Zxid;
use zab_store::{LogEvent, LogWriter, StoreError, WriterOptions};

#[test]
fn records_appended_together_take_one_write_per_segment_and_read_back_the_same() {
    let d = tempfile::tempdir().unwrap();
    let (mut log, _) = open(d.path(), 64 * 1024);
    let txns: Vec<_> = (1..=1000).map(|c| mixed_txn(c, 100)).collect();
    log.append_all(&txns[..200]).unwrap();
    assert_eq!(
        log.runs_written(),
        1,
        "200 records in one segment: one write"
    );
    assert_eq!(log.sync().unwrap(), Some(Zxid(200)));
    assert!(contents(&log) == txns[..200], "the run reads back");
    let segments_before = segments(d.path()).len();
    log.append_all(&txns[200..]).unwrap();
    let segments_after = segments(d.path()).len();
    assert!(
        segments_after > segments_before,
        "800 more records roll over"
    );
    assert_eq!(
        log.runs_written(),
        1 + (segments_after - segments_before + 1) as u64,
        "one write per segment the run touched"
    );
    assert_eq!(log.sync().unwrap(), Some(Zxid(1000)));
    drop(log);
    let (log, rec) = open(d.path(), 64 * 1024);
    assert_eq!((rec.records, rec.cut), (1000, None));
    assert!(
        contents(&log) == txns,
        "every record reads back after a reopen"
    );
    log.check().unwrap();
}

#[test]
fn a_refused_record_keeps_the_ones_before_it_and_drops_the_rest() {
    let d = tempfile::tempdir().unwrap();
    let (mut log, _) = open(d.path(), 64 * 1024);
    let batch = [txn(1, 10), txn(2, 10), txn(2, 10), txn(3, 10)];
    let e = log.append_all(&batch).unwrap_err();
    assert!(matches!(e, StoreError::NotIncreasing { .. }), "{e}");
    assert_eq!(log.sync().unwrap(), Some(Zxid(2)));
    assert!(
        contents(&log) == batch[..2],
        "the records before the refused one"
    );
    log.append_all(&[txn(3, 10)]).unwrap();
    assert_eq!(log.sync().unwrap(), Some(Zxid(3)));
    log.check().unwrap();
}

#[test]
fn the_sync_thread_writes_the_appends_it_finds_queued_together() {
    let d = tempfile::tempdir().unwrap();
    let (log, _) = open(d.path(), 1 << 20);
    let observer = std::sync::Arc::new(Batches::default());
    let opts = WriterOptions {
        observer: Some(observer.clone()),
    };
    let (w, _r, thread) = LogWriter::spawn_with(log, opts, |_: LogEvent| {}).unwrap();
    for c in 1..=5000 {
        w.append(txn(c, 50)).unwrap();
    }
    w.flush(1).unwrap();
    drop(w);
    thread.join().unwrap();
    let batches = observer.0.lock().unwrap().clone();
    let records: u64 = batches.iter().map(|b| b.records).sum();
    assert_eq!(records, 5000);
    let syncs = batches.iter().filter(|b| b.records > 0).count() as u64;
    let writes: u64 = batches.iter().map(|b| b.writes).sum();
    assert!(
        batches.iter().all(|b| b.writes <= b.records.max(1)),
        "{batches:?}"
    );
    // One segment: one write per sync, however many records each sync took.
    assert_eq!(writes, syncs, "{batches:?}");
}
