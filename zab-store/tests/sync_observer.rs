//! The txn log writer's sync observer (`WriterOptions::observer`): one report per sync the
//! group-commit thread makes, with the records and encoded bytes it made durable and the time
//! the sync call took.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

mod common;

use common::*;
use zab_store::{LogEvent, LogWriter};

#[test]
fn the_sync_observer_sees_every_sync_with_its_records_bytes_and_duration() {
    // force_sync = true: the durations are those of real msync/fsync calls.
    let d = tempfile::tempdir().unwrap();
    let opts = zab_store::LogOptions {
        prealloc_bytes: 64 * 1024,
        force_sync: true,
    };
    let (log, _) = zab_store::TxnLog::open(d.path(), opts).unwrap();
    let observer = std::sync::Arc::new(Batches::default());
    let wopts = zab_store::WriterOptions {
        observer: Some(observer.clone()),
    };
    let (etx, events) = std::sync::mpsc::channel();
    let (w, _r, thread) = LogWriter::spawn_with(log, wopts, move |ev| {
        let _ = etx.send(ev);
    })
    .unwrap();
    let payload = 100;
    for c in 1..=300 {
        w.append(txn(c, payload)).unwrap();
    }
    w.flush(1).unwrap();
    // A flush with nothing new still syncs: the observer sees it with 0 records.
    w.flush(2).unwrap();
    drop(w);
    thread.join().unwrap();
    let evs: Vec<LogEvent> = events.iter().collect();
    let persisted = evs
        .iter()
        .filter(|e| matches!(e, LogEvent::Persisted { .. }))
        .count();
    let flushed = evs
        .iter()
        .filter(|e| matches!(e, LogEvent::Flushed { .. }))
        .count();
    assert_eq!(flushed, 2, "{evs:?}");
    let batches = observer.0.lock().unwrap().clone();
    assert_eq!(
        batches.len(),
        persisted + flushed,
        "one report per sync: {batches:?}"
    );
    let records: u64 = batches.iter().map(|b| b.records).sum();
    assert_eq!(records, 300, "every append counted once: {batches:?}");
    let bytes: u64 = batches.iter().map(|b| b.bytes).sum();
    assert!(
        bytes > 300 * payload as u64,
        "payloads plus headers: {bytes}"
    );
    assert!(
        batches.iter().all(|b| b.records > 0 || b.bytes == 0),
        "{batches:?}"
    );
    assert_eq!(batches.last().map(|b| b.records), Some(0), "{batches:?}");
    assert!(
        batches
            .iter()
            .filter(|b| b.records > 0)
            .all(|b| !b.duration.is_zero()),
        "each real sync of records takes time: {batches:?}"
    );
}
