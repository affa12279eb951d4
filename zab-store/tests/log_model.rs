//! Property test: random append / sync / truncate / purge / reset / crash / reopen sequences
//! against an in-memory model.
//!
//! What "crash" simulates (honestly): the files are rewritten to the last *durable image* (the
//! bytes at the last point the log made them durable: `sync`, `truncate`, `reset`, `purge`, or a
//! segment rollover, which syncs the previous segment and creates the next one durably) plus a
//! random subset of the 4 KiB pages written since. That is what a power loss can leave when the
//! disk persists pages in any order. The log runs with `force_sync = false`, so the real
//! fsync/msync calls are not exercised here (the crash tests and the benchmark run them).
//!
//! Properties: every record reported persisted is there after a crash; what is there is a
//! prefix of what was appended (nothing else appears, order kept); truncated and reset records
//! never come back; a clean reopen loses nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

mod common;

use std::collections::BTreeMap;

use common::*;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use zab_core::{Epoch, Txn, Zxid};
use zab_store::TxnLog;

const PREALLOC: usize = 4096;
const PAGE: usize = 4096;

#[derive(Clone, Debug)]
enum Op {
    Append { len: usize, new_epoch: bool },
    Sync,
    Truncate { back: usize },
    Purge { back: usize },
    Reset,
    Crash { seed: u64 },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (0usize..700, proptest::bool::weighted(0.05))
            .prop_map(|(len, new_epoch)| Op::Append { len, new_epoch }),
        1 => Just(Op::Append { len: 9000, new_epoch: false }),
        4 => Just(Op::Sync),
        2 => (0usize..30).prop_map(|back| Op::Truncate { back }),
        1 => (0usize..30).prop_map(|back| Op::Purge { back }),
        1 => Just(Op::Reset),
        3 => any::<u64>().prop_map(|seed| Op::Crash { seed }),
        1 => Just(Op::Reopen),
    ]
}

struct Harness {
    dir: tempfile::TempDir,
    log: Option<TxnLog>,
    epoch: u32,
    counter: u32,
    /// Every record the log should hold, in order.
    all: Vec<Txn>,
    /// `all[..persisted]` was reported persisted.
    persisted: usize,
    /// The durable image of the files and how many records of `all` it holds.
    image: BTreeMap<String, Vec<u8>>,
    on_image: usize,
}

impl Harness {
    fn new() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = open(dir.path(), PREALLOC);
        Harness {
            dir,
            log: Some(log),
            epoch: 1,
            counter: 0,
            all: vec![],
            persisted: 0,
            image: BTreeMap::new(),
            on_image: 0,
        }
    }

    fn log(&mut self) -> &mut TxnLog {
        self.log.as_mut().unwrap()
    }

    fn next_zxid(&mut self, new_epoch: bool) -> Zxid {
        if new_epoch {
            self.epoch += 1;
            self.counter = 0;
        }
        self.counter += 1;
        Zxid::new(Epoch(self.epoch), self.counter)
    }

    fn capture_image(&mut self) {
        self.image = read_dir_files(self.dir.path());
        self.on_image = self.all.len();
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Append { len, new_epoch } => self.append(len, new_epoch),
            Op::Sync => {
                let last = self.log().sync().unwrap();
                assert_eq!(last, self.all.last().map(|t| t.zxid));
                self.persisted = self.all.len();
                self.capture_image();
            }
            Op::Truncate { back } => {
                let keep = self.all.len().saturating_sub(back);
                let to = match keep {
                    0 => self.all.first().map_or(Zxid(1), |t| Zxid(t.zxid.0 - 1)),
                    k => self.all[k - 1].zxid,
                };
                let last = self.log().truncate(to).unwrap();
                self.all.truncate(keep);
                assert_eq!(last, self.all.last().map(|t| t.zxid));
                self.persisted = self.all.len();
                self.capture_image();
            }
            Op::Purge { back } => self.purge(back),
            Op::Reset => {
                let after = Zxid::new(Epoch(self.epoch), self.counter);
                self.log().reset(after).unwrap();
                self.all.clear();
                self.persisted = 0;
                self.capture_image();
            }
            Op::Crash { seed } => self.crash(seed),
            Op::Reopen => {
                drop(self.log.take());
                let (log, rec) = open(self.dir.path(), PREALLOC);
                assert_eq!(rec.cut, None, "a clean reopen finds no torn tail");
                assert_eq!(contents(&log), self.all, "a clean reopen loses nothing");
                self.log = Some(log);
            }
        }
        let log = self.log.as_ref().unwrap();
        log.check().unwrap();
        let visible = log.reader().zxids();
        assert!(
            visible.len() >= self.persisted,
            "reported persisted must stay readable"
        );
        let want: Vec<Zxid> = self
            .all
            .iter()
            .map(|t| t.zxid)
            .take(visible.len())
            .collect();
        assert_eq!(visible, want, "readers see a prefix of the model");
    }

    fn append(&mut self, len: usize, new_epoch: bool) {
        let zxid = self.next_zxid(new_epoch);
        let t = mixed_txn(zxid.0, len);
        let before = segments(self.dir.path());
        self.log().append(&t).unwrap();
        self.all.push(t);
        let after = segments(self.dir.path());
        if after != before {
            // Rollover: the previous segments were synced and the new one was created durably
            // (header + zeros) before this record was written into it.
            let mut files = read_dir_files(self.dir.path());
            for name in after.iter().filter(|n| !before.contains(n)) {
                files.get_mut(name).unwrap()[32..].fill(0);
            }
            self.image = files;
            self.on_image = self.all.len() - 1;
        }
    }

    fn purge(&mut self, back: usize) {
        let Some(upto) = self
            .all
            .len()
            .checked_sub(back + 1)
            .map(|i| self.all[i].zxid)
        else {
            return;
        };
        let first = self.log().purge(upto).unwrap();
        let gone = self.all.iter().take_while(|t| Some(t.zxid) < first).count();
        assert!(
            self.all[..gone].iter().all(|t| t.zxid <= upto),
            "purged a needed record"
        );
        self.all.drain(..gone);
        // Exactly the needed segments: unless only the last one is left, the first kept
        // segment holds a record above `upto`.
        let segs = segments(self.dir.path());
        if let Some(second) = segs.get(1).and_then(|n| zab_store::parse_segment_name(n)) {
            let last_of_first = self
                .all
                .iter()
                .take_while(|t| t.zxid < second)
                .last()
                .unwrap();
            assert!(
                last_of_first.zxid > upto,
                "kept a segment holding only records <= {upto}"
            );
        }
        self.persisted = self.persisted.saturating_sub(gone);
        let present = read_dir_files(self.dir.path());
        self.image.retain(|n, _| present.contains_key(n));
        self.on_image = self.on_image.saturating_sub(gone);
    }

    fn crash(&mut self, seed: u64) {
        drop(self.log.take());
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let current = read_dir_files(self.dir.path());
        let mut crashed = BTreeMap::new();
        for (name, now) in &current {
            let Some(old) = self.image.get(name) else {
                panic!("{name} was created without being captured durable");
            };
            let mut bytes = old.clone();
            bytes.resize(now.len(), 0);
            for (i, page) in now.chunks(PAGE).enumerate() {
                let lo = i * PAGE;
                if bytes[lo..lo + page.len()] != *page && rng.gen_bool(0.5) {
                    bytes[lo..lo + page.len()].copy_from_slice(page);
                }
            }
            crashed.insert(name.clone(), bytes);
        }
        write_dir_files(self.dir.path(), &crashed);
        let (log, _rec) = TxnLog::open(self.dir.path(), opts(PREALLOC))
            .unwrap_or_else(|e| panic!("recovery after crash failed: {e}"));
        let got = contents(&log);
        assert!(
            got.len() >= self.on_image,
            "lost durable records: {} < {}",
            got.len(),
            self.on_image
        );
        assert!(
            got.len() >= self.persisted,
            "lost records reported persisted"
        );
        assert!(got.len() <= self.all.len(), "records appeared from nowhere");
        assert_eq!(
            got[..],
            self.all[..got.len()],
            "recovered log is a prefix of the model"
        );
        self.all = got;
        self.persisted = self.all.len();
        self.log = Some(log);
        self.capture_image();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn log_matches_model_across_crashes(ops in proptest::collection::vec(op(), 1..60)) {
        let mut h = Harness::new();
        for op in &ops {
            h.apply(op);
        }
        h.apply(&Op::Crash { seed: 7 });
    }
}
