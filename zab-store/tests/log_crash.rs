//! Crash and corruption tests on real files: torn tails at every offset, flipped bytes, deleted
//! segments, zero-filled tails, leftover temp files.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

mod common;

use std::fs;
use std::path::Path;

use common::*;
use zab_core::Zxid;
use zab_store::{StoreError, TxnLog};

const PREALLOC: usize = 4096;

/// Writes records 1..=n with varying sizes; returns them and the segment names.
fn build(dir: &Path, n: u64) -> (Vec<zab_core::Txn>, Vec<String>) {
    let (mut log, _) = open(dir, PREALLOC);
    let txns: Vec<_> = (1..=n)
        .map(|i| mixed_txn(i, 30 + (i as usize * 37) % 250))
        .collect();
    for t in &txns {
        log.append(t).unwrap();
    }
    log.sync().unwrap();
    drop(log);
    (txns, segments(dir))
}

/// Offsets of the records of one segment file (parsed with the public format description:
/// 32-byte segment header, then 20-byte record headers whose first 4 bytes are the kind bit
/// and the 31-bit length).
fn record_offsets(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut off = 32;
    let mut out = vec![];
    while off + 20 <= bytes.len() && bytes[off..off + 20].iter().any(|&b| b != 0) {
        let len =
            (u32::from_be_bytes(bytes[off..off + 4].try_into().unwrap()) & 0x7fff_ffff) as usize;
        out.push((off, 20 + len));
        off += 20 + len;
    }
    out
}

#[test]
fn cut_last_segment_at_every_offset_of_its_last_records() {
    let d = tempfile::tempdir().unwrap();
    let (txns, segs) = build(d.path(), 100);
    let last_name = segs.last().unwrap().clone();
    let image = read_dir_files(d.path());
    let last_bytes = &image[&last_name];
    let recs = record_offsets(last_bytes);
    assert!(recs.len() >= 3, "last segment holds several records");
    let first_in_last = zab_store::parse_segment_name(&last_name).unwrap().0 as usize - 1;
    let (from, _) = recs[recs.len() - 3];
    let (lo, len) = *recs.last().unwrap();
    let end = lo + len;
    let work = tempfile::tempdir().unwrap();
    for cut in from..=end {
        for truncate_file in [false, true] {
            let mut files = image.clone();
            let f = files.get_mut(&last_name).unwrap();
            if truncate_file {
                f.truncate(cut);
            } else {
                f[cut..].fill(0);
            }
            write_dir_files(work.path(), &files);
            let (log, rec) = TxnLog::open(work.path(), opts(PREALLOC))
                .unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
            // A record survives if the cut left its bytes unchanged (its tail may be zeros).
            let intact = |&(o, l): &(usize, usize)| {
                o + l <= cut
                    || (!truncate_file && last_bytes[cut.max(o)..o + l].iter().all(|&b| b == 0))
            };
            let whole = recs.iter().take_while(|r| intact(r)).count();
            let want = &txns[..first_in_last + whole];
            assert_eq!(contents(&log), want, "cut at {cut}");
            // A damaged record whose surviving header bytes are zeros reads as a clean end.
            let damaged = recs.get(whole).filter(|&&(o, _)| {
                o < cut && last_bytes[o..cut.min(o + 20)].iter().any(|&b| b != 0)
            });
            if !truncate_file {
                let reported = rec.cut.as_ref().map(|c| c.offset as usize);
                assert_eq!(reported, damaged.map(|&(o, _)| o), "cut at {cut}");
                if let Some(c) = &rec.cut {
                    assert_eq!(c.file, work.path().join(&last_name));
                }
            }
            log.check().unwrap();
            drop(log);
            // The repair is durable: a second open sees a clean log with the same records.
            let (mut log, rec2) = TxnLog::open(work.path(), opts(PREALLOC)).unwrap();
            assert_eq!(rec2.cut, None, "cut at {cut}: second open is clean");
            assert_eq!(contents(&log), want);
            // And the log accepts appends after the cut.
            log.append(&txn(1000, 10)).unwrap();
            log.sync().unwrap();
            drop(log);
            let (log, _) = TxnLog::open(work.path(), opts(PREALLOC)).unwrap();
            assert_eq!(contents(&log).last().unwrap().zxid, Zxid(1000));
        }
    }
}

#[test]
fn torn_garbage_after_the_last_record_is_cut() {
    let d = tempfile::tempdir().unwrap();
    let (txns, segs) = build(d.path(), 100);
    let last = d.path().join(segs.last().unwrap());
    let mut bytes = fs::read(&last).unwrap();
    let recs = record_offsets(&bytes);
    let (o, l) = *recs.last().unwrap();
    // Half-written next record: a header-like prefix of garbage.
    bytes[o + l..o + l + 9].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5]);
    fs::write(&last, &bytes).unwrap();
    let (log, rec) = TxnLog::open(d.path(), opts(PREALLOC)).unwrap();
    assert_eq!(rec.cut.unwrap().offset as usize, o + l);
    assert_eq!(contents(&log), txns);
}

fn flip(path: &Path, offset: usize) {
    let mut b = fs::read(path).unwrap();
    b[offset] ^= 0x40;
    fs::write(path, b).unwrap();
}

fn assert_names(e: &StoreError, file: &str, offset: usize) {
    let msg = e.to_string();
    assert!(msg.contains(file), "{msg}");
    assert!(msg.contains(&format!("offset {offset}")), "{msg}");
}

#[test]
fn flipped_byte_in_a_middle_segment_is_an_error_naming_file_and_offset() {
    let d = tempfile::tempdir().unwrap();
    let (_, segs) = build(d.path(), 100);
    assert!(segs.len() >= 3);
    let mid = d.path().join(&segs[1]);
    let recs = record_offsets(&fs::read(&mid).unwrap());
    for (pos, (o, _)) in [(recs[0].0 + 25, recs[0]), (recs[1].0 + 2, recs[1])] {
        let saved = fs::read(&mid).unwrap();
        flip(&mid, pos);
        let e = TxnLog::open(d.path(), opts(PREALLOC)).unwrap_err();
        assert!(matches!(e, StoreError::Corrupt { .. }), "{e}");
        assert_names(&e, &segs[1], o);
        fs::write(&mid, saved).unwrap();
    }
    TxnLog::open(d.path(), opts(PREALLOC)).unwrap();
}

#[test]
fn flipped_byte_in_the_last_segment_before_valid_records_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let (_, segs) = build(d.path(), 100);
    let last = d.path().join(segs.last().unwrap());
    let recs = record_offsets(&fs::read(&last).unwrap());
    assert!(recs.len() >= 2);
    // In the payload (length trusted, next record checked) and in the header (found by scan).
    for pos in [recs[0].0 + 30, recs[0].0 + 14] {
        let saved = fs::read(&last).unwrap();
        flip(&last, pos);
        let e = TxnLog::open(d.path(), opts(PREALLOC)).unwrap_err();
        assert!(matches!(e, StoreError::Corrupt { .. }), "{e}");
        assert_names(&e, segs.last().unwrap(), recs[0].0);
        fs::write(&last, saved).unwrap();
    }
}

#[test]
fn flipped_byte_in_the_very_last_record_is_a_torn_tail() {
    let d = tempfile::tempdir().unwrap();
    let (txns, segs) = build(d.path(), 100);
    let last = d.path().join(segs.last().unwrap());
    let recs = record_offsets(&fs::read(&last).unwrap());
    let (o, _) = *recs.last().unwrap();
    flip(&last, o + 22);
    let (log, rec) = TxnLog::open(d.path(), opts(PREALLOC)).unwrap();
    assert_eq!(rec.cut.unwrap().offset as usize, o);
    assert_eq!(contents(&log), txns[..txns.len() - 1]);
}

#[test]
fn unwritten_page_inside_the_last_batch_is_a_torn_tail_even_with_valid_records_after() {
    // Pages of an unsynced batch can reach the disk out of order: a record whose payload page
    // never arrived (zeros) followed by records whose pages did.
    let d = tempfile::tempdir().unwrap();
    let (mut log, _) = open(d.path(), 1 << 20);
    for i in 1..=10 {
        log.append(&txn(i, 3000)).unwrap();
    }
    log.sync().unwrap();
    drop(log);
    let seg = d.path().join(&segments(d.path())[0]);
    let mut bytes = fs::read(&seg).unwrap();
    let recs = record_offsets(&bytes);
    let (o, _) = recs[5];
    let page = (o / 4096 + 1) * 4096;
    bytes[page..page + 4096].fill(0);
    fs::write(&seg, &bytes).unwrap();
    let (log, rec) = TxnLog::open(d.path(), opts(1 << 20)).unwrap();
    let cut = rec.cut.unwrap().offset as usize;
    assert!(cut <= page, "cut at {cut}, page at {page}");
    assert!(contents(&log).len() <= 6);
}

#[test]
fn deleting_a_middle_segment_is_a_gap_error_naming_the_range() {
    let d = tempfile::tempdir().unwrap();
    let (_, segs) = build(d.path(), 100);
    assert!(segs.len() >= 3);
    let next_base = zab_store::parse_segment_name(&segs[2]).unwrap();
    let gone_base = zab_store::parse_segment_name(&segs[1]).unwrap();
    fs::remove_file(d.path().join(&segs[1])).unwrap();
    let e = TxnLog::open(d.path(), opts(PREALLOC)).unwrap_err();
    let StoreError::LogGap {
        after,
        before,
        prev_file,
        next_file,
        ..
    } = &e
    else {
        panic!("expected a gap, got {e}")
    };
    assert_eq!(*after, Zxid(gone_base.0 - 1));
    assert_eq!(*before, Zxid(next_base.0 - 1));
    assert!(
        prev_file.ends_with(&segs[0]) && next_file.ends_with(&segs[2]),
        "{e}"
    );
}

#[test]
fn deleting_the_first_segment_looks_like_a_purge_and_the_last_is_undetectable() {
    let d = tempfile::tempdir().unwrap();
    let (txns, segs) = build(d.path(), 100);
    fs::remove_file(d.path().join(&segs[0])).unwrap();
    let (log, _) = TxnLog::open(d.path(), opts(PREALLOC)).unwrap();
    let second = zab_store::parse_segment_name(&segs[1]).unwrap();
    assert_eq!(log.reader().first_zxid(), Some(second));
    assert_eq!(log.reader().floor(), Zxid(second.0 - 1));
    drop(log);
    // Documented limitation: nothing refers to the last segment, so losing it just shortens
    // the log.
    let last = segs.last().unwrap();
    fs::remove_file(d.path().join(last)).unwrap();
    let (log, _) = TxnLog::open(d.path(), opts(PREALLOC)).unwrap();
    let last_base = zab_store::parse_segment_name(last).unwrap();
    assert_eq!(log.reader().last_zxid(), Some(Zxid(last_base.0 - 1)));
    assert!(contents(&log).len() < txns.len());
}

#[test]
fn zero_filled_preallocated_tail_is_a_clean_end() {
    let d = tempfile::tempdir().unwrap();
    let (mut log, _) = TxnLog::open(
        d.path(),
        zab_store::LogOptions {
            prealloc_bytes: 256 * 1024,
            force_sync: true,
        },
    )
    .unwrap();
    for i in 1..=5 {
        log.append(&txn(i, 100)).unwrap();
    }
    log.sync().unwrap();
    drop(log);
    let seg = d.path().join(&segments(d.path())[0]);
    assert_eq!(
        fs::metadata(&seg).unwrap().len(),
        256 * 1024,
        "preallocated"
    );
    let (log, rec) = TxnLog::open(d.path(), opts(PREALLOC)).unwrap();
    assert_eq!(rec.cut, None);
    assert_eq!(rec.records, 5);
    assert_eq!(contents(&log).len(), 5);
}

#[test]
fn empty_last_segment_and_temp_segments_are_removed() {
    let d = tempfile::tempdir().unwrap();
    let (txns, segs) = build(d.path(), 100);
    let last = d.path().join(segs.last().unwrap());
    let mut bytes = fs::read(&last).unwrap();
    bytes[32..].fill(0);
    fs::write(&last, &bytes).unwrap();
    fs::write(d.path().join("log.00000000000000ff.tmp"), b"half made").unwrap();
    let (log, rec) = TxnLog::open(d.path(), opts(PREALLOC)).unwrap();
    assert_eq!(rec.removed.len(), 2, "{rec:?}");
    assert!(!last.exists());
    let base = zab_store::parse_segment_name(segs.last().unwrap()).unwrap();
    assert_eq!(contents(&log), txns[..base.0 as usize - 1]);
}

#[test]
fn bad_segment_header_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let (_, segs) = build(d.path(), 10);
    let first = d.path().join(&segs[0]);
    flip(&first, 9);
    let e = TxnLog::open(d.path(), opts(PREALLOC)).unwrap_err();
    assert!(e.to_string().contains(&segs[0]), "{e}");
    // A file renamed to the wrong zxid.
    let d2 = tempfile::tempdir().unwrap();
    let (_, segs) = build(d2.path(), 10);
    fs::rename(
        d2.path().join(&segs[0]),
        d2.path().join("log.0000000000000009"),
    )
    .unwrap();
    let e = TxnLog::open(d2.path(), opts(PREALLOC)).unwrap_err();
    assert!(e.to_string().contains("log.0000000000000009"), "{e}");
}
