//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use bytes::Bytes;
use zab_core::{Txn, TxnKind, Zxid};
use zab_store::{LogOptions, Recovery, SyncBatch, SyncObserver, TxnLog};

/// A deterministic payload for `zxid` of `len` bytes (never all zero).
pub fn payload(zxid: Zxid, len: usize) -> Bytes {
    let mut x = zxid.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

pub fn txn(zxid: u64, len: usize) -> Txn {
    Txn::app(Zxid(zxid), payload(Zxid(zxid), len))
}

/// A txn of `kind` with the deterministic payload of `zxid`.
pub fn txn_of(kind: TxnKind, zxid: u64, len: usize) -> Txn {
    Txn {
        kind,
        ..txn(zxid, len)
    }
}

/// A txn whose kind follows from its zxid: every fifth one (counter divisible by 5) is a
/// membership txn, the rest app txns; logs built from these hold both kinds side by side.
pub fn mixed_txn(zxid: u64, len: usize) -> Txn {
    let kind = if zxid.is_multiple_of(5) {
        TxnKind::Membership
    } else {
        TxnKind::App
    };
    txn_of(kind, zxid, len)
}

pub fn opts(prealloc: usize) -> LogOptions {
    LogOptions {
        prealloc_bytes: prealloc,
        force_sync: false,
    }
}

pub fn open(dir: &Path, prealloc: usize) -> (TxnLog, Recovery) {
    TxnLog::open(dir, opts(prealloc)).expect("open log")
}

/// Every file of `dir` by name. A file that goes while it is listed (a discarded segment the
/// log's background thread unlinks) is left out.
pub fn read_dir_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut m = BTreeMap::new();
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        match fs::read(e.path()) {
            Ok(bytes) => {
                m.insert(e.file_name().into_string().unwrap(), bytes);
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => panic!("read {}: {err}", e.path().display()),
        }
    }
    m
}

/// Replaces the content of `dir` with `files`.
pub fn write_dir_files(dir: &Path, files: &BTreeMap<String, Vec<u8>>) {
    for e in fs::read_dir(dir).unwrap() {
        match fs::remove_file(e.unwrap().path()) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => panic!("remove: {err}"),
            _ => {}
        }
    }
    for (name, bytes) in files {
        fs::write(dir.join(name), bytes).unwrap();
    }
}

/// Segment file names, ascending.
pub fn segments(dir: &Path) -> Vec<String> {
    read_dir_files(dir)
        .into_keys()
        .filter(|n| zab_store::parse_segment_name(n).is_some())
        .collect()
}

/// All records of the log as (zxid, payload) via the reader.
pub fn contents(log: &TxnLog) -> Vec<Txn> {
    let r = log.reader();
    match r.last_zxid() {
        None => vec![],
        Some(last) => r.read_range(r.floor(), last).expect("read_range"),
    }
}

/// A sync observer that keeps every sync the writer thread reports.
#[derive(Default)]
pub struct Batches(pub std::sync::Mutex<Vec<SyncBatch>>);

impl SyncObserver for Batches {
    fn on_sync(&self, batch: &SyncBatch) {
        self.0.lock().expect("observer lock").push(*batch);
    }
}
