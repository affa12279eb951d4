//! The log durability contract of `zab_core::io` (L1–L4), held against both implementations
//! of the txn log: the real `zab_store::LogWriter` on a temp dir and the simulation's
//! `tests::sim::disk::Disk`.
//!
//! Each script is a list of driver batches (the actions of one `take_actions()`: appends, a
//! TRUNC's truncate, a SNAP's log reset) with settle points between them. Both sides run it:
//! - the real writer executes each batch as one group commit (the test holds the sync thread
//!   in its `Flushed` report while it queues the batch, so batching is deterministic), and its
//!   events become inputs through `LogEvent::input`, the mapping the node driver uses;
//! - the simulated disk executes the same actions and reports as the simulation's scheduler
//!   does (`LogPersisted` after an fsync step; here at settle points and at explicit partial
//!   syncs).
//!
//! A [`Tracker`] plays the peer that follows the contract: it derives, from the actions and
//! the inputs, the durable point it may count (L1–L3) and rejects any report the contract does
//! not allow. At every settle point both sides must derive the same durable point, equal to
//! their last appended record (once every report is in, the whole log is durable). Every real
//! report is also checked against the real log's durable records at the moment it was made
//! (L1, L2). At the end both logs must hold the same records after a reopen (the real log) and
//! after a power loss with everything synced (the simulated disk).

// Test code: a failed expectation aborts the test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeSet, VecDeque};
use std::sync::mpsc;

use bytes::{Bytes, BytesMut};
use tests::sim::disk::{Disk, Snapshot};
use zab_core::{Epoch, Input, Txn, Zxid};
use zab_store::{LogCommand, LogEvent, LogOptions, LogReader, LogWriter, SyncThread, TxnLog};

/// One step of a script.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// A driver batch: these actions, issued together.
    Batch(&'static [Act]),
    /// The simulated disk completes an fsync of its first `n` pending appends (the real writer
    /// syncs every batch as a group; it has no partial sync to mirror).
    SimSync(usize),
    /// Wait until every report of everything issued so far is in, then compare.
    Settle,
}

/// One action of a batch.
#[derive(Clone, Copy, Debug)]
enum Act {
    /// Append this many new records.
    Append(u32),
    /// TRUNC: keep the records up to the `k`-th record appended in the script (1-based;
    /// 0 = none).
    Truncate(usize),
    /// A SNAP installed at a new zxid above everything: the log is reset to follow it.
    Reset,
}

/// The peer side of the contract: what a peer that follows L1–L3 derives.
#[derive(Debug, Default)]
struct Tracker {
    /// The log as the peer sees it: every appended zxid not removed since.
    log: Vec<Zxid>,
    /// The zxid the log follows.
    base: Zxid,
    /// The durable point the peer counts.
    persisted: Zxid,
    /// Zxids a truncate or reset removed (a late report may name one: L3).
    removed: BTreeSet<Zxid>,
}

impl Tracker {
    fn last(&self) -> Zxid {
        self.log.last().copied().unwrap_or(self.base)
    }

    fn append(&mut self, z: Zxid) {
        assert!(z > self.last(), "script appends {z} after {}", self.last());
        self.log.push(z);
    }

    /// L2: a completed truncate leaves exactly the kept records, all durable.
    fn truncate(&mut self, to: Zxid) {
        self.removed.extend(self.log.iter().filter(|z| **z > to));
        self.log.retain(|z| *z <= to);
        self.base = self.base.min(to);
        self.persisted = self.last();
    }

    /// A SNAP install reset the log: it holds nothing and follows `after`, durably.
    fn reset(&mut self, after: Zxid) {
        self.removed.extend(self.log.drain(..));
        self.base = after;
        self.persisted = after;
    }

    /// Feeds one input; `Err` when the contract does not allow it.
    fn feed(&mut self, input: &Input) -> Result<(), String> {
        match input {
            Input::LogPersisted { upto } => {
                if self.log.contains(upto) {
                    // L1
                    self.persisted = self.persisted.max(*upto);
                    Ok(())
                } else if self.removed.contains(upto) {
                    // L3: issued before a truncate/reset that removed it; ignored
                    Ok(())
                } else {
                    Err(format!(
                        "LogPersisted {{ upto: {upto} }} names a zxid never appended (log {:?})",
                        self.log
                    ))
                }
            }
            other => Err(format!("unexpected input {other:?}")),
        }
    }

    /// L1/L2 against the durable records of the log at the moment of a report: everything the
    /// peer may count durable is durable.
    fn check_durable(&self, durable: &[Zxid]) -> Result<(), String> {
        for z in self.log.iter().filter(|z| **z <= self.persisted) {
            if !durable.contains(z) {
                return Err(format!(
                    "the peer counts {z} durable (persisted {}) but the log's durable records \
                     are {durable:?}",
                    self.persisted
                ));
            }
        }
        Ok(())
    }
}

/// An event of the real writer with the log's durable records when it was reported.
type Observed = (LogEvent, Vec<Zxid>);

/// The real writer, driven as the node driver drives it.
struct Real {
    writer: Option<LogWriter>,
    thread: Option<SyncThread>,
    events: mpsc::Receiver<Observed>,
    gate: mpsc::Sender<()>,
    next_token: u64,
    tracker: Tracker,
    /// The records each issued truncate/reset keeps, in issue order (checked on its event).
    expect_kept: VecDeque<Vec<Zxid>>,
    dir: tempfile::TempDir,
}

impl Real {
    fn new() -> Real {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = TxnLog::open(dir.path(), log_options()).unwrap();
        let reader: LogReader = log.reader();
        let (tx, events) = mpsc::channel();
        let (gate, gate_rx) = mpsc::channel::<()>();
        let (writer, _, thread) = LogWriter::spawn(log, move |ev| {
            // runs on the sync thread, right after the event's effect: what is durable now
            let hold = matches!(ev, LogEvent::Flushed { .. });
            let _ = tx.send((ev, reader.zxids()));
            if hold {
                // the test queues a whole batch while the thread waits here
                let _ = gate_rx.recv();
            }
        })
        .unwrap();
        Real {
            writer: Some(writer),
            thread: Some(thread),
            events,
            gate,
            next_token: 0,
            tracker: Tracker::default(),
            expect_kept: VecDeque::new(),
            dir,
        }
    }

    fn writer(&self) -> &LogWriter {
        self.writer.as_ref().unwrap()
    }

    /// Sends a flush and feeds every event up to its `Flushed`; the sync thread then waits in
    /// the `Flushed` report until [`Real::release`].
    fn hold(&mut self) {
        self.next_token += 1;
        let token = self.next_token;
        self.writer().flush(token).unwrap();
        loop {
            let (ev, durable) = self.events.recv().unwrap();
            if let LogEvent::Flushed { token: t, .. } = ev {
                assert_eq!(t, token);
                return;
            }
            self.observe(ev, &durable);
        }
    }

    fn release(&self) {
        self.gate.send(()).unwrap();
    }

    /// Feeds one event as the node driver does, and checks it against the durable records.
    fn observe(&mut self, ev: LogEvent, durable: &[Zxid]) {
        match &ev {
            LogEvent::Failed(e) => panic!("real writer failed: {e}"),
            LogEvent::Truncated { .. } | LogEvent::Reset { .. } => {
                // L2: the removal is durable and the kept records are all durable
                let kept = self.expect_kept.pop_front().unwrap();
                assert_eq!(
                    durable, kept,
                    "after {ev:?} the real log's durable records differ from the kept ones"
                );
            }
            _ => {}
        }
        if let Some(input) = ev.input() {
            self.tracker
                .feed(&input)
                .unwrap_or_else(|e| panic!("real writer: {e}"));
            self.tracker
                .check_durable(durable)
                .unwrap_or_else(|e| panic!("real writer after {input:?}: {e}"));
        }
    }

    /// Runs one batch as one group commit.
    fn batch(&mut self, cmds: &[LogCommand]) {
        self.hold();
        for cmd in cmds {
            match cmd {
                LogCommand::Append(t) => self.tracker.append(t.zxid),
                LogCommand::Truncate { to } => {
                    self.tracker.truncate(*to);
                    self.expect_kept.push_back(self.tracker.log.clone());
                }
                LogCommand::Reset { after } => {
                    self.tracker.reset(*after);
                    self.expect_kept.push_back(Vec::new());
                }
                other => panic!("not a batch command: {other:?}"),
            }
            self.writer().send(cmd.clone()).unwrap();
        }
        self.release();
    }

    fn settle(&mut self) {
        self.hold();
        self.release();
    }

    /// Stops the writer and returns the records a reopen finds.
    fn reopen(mut self) -> Vec<Zxid> {
        self.settle();
        assert!(
            self.expect_kept.is_empty(),
            "a truncate/reset was never reported"
        );
        drop(self.writer.take());
        self.thread.take().unwrap().join().unwrap();
        let (log, _) = TxnLog::open(self.dir.path(), log_options()).unwrap();
        log.reader().zxids()
    }
}

/// The simulated disk, driven as `tests::sim::exec` drives it.
#[derive(Default)]
struct Sim {
    disk: Disk,
    tracker: Tracker,
}

impl Sim {
    fn batch(&mut self, cmds: &[LogCommand]) {
        for cmd in cmds {
            match cmd {
                LogCommand::Append(t) => {
                    self.tracker.append(t.zxid);
                    assert!(self.disk.append(t.clone()), "sim disk refuses {t:?}");
                }
                LogCommand::Truncate { to } => {
                    self.tracker.truncate(*to);
                    self.disk.truncate(*to);
                    self.check_kept("truncate");
                }
                LogCommand::Reset { after } => {
                    // a SNAP's stream, its end and its install, as the sim's driver runs them
                    let snap = Snapshot::of(&[txn(*after)]);
                    self.disk.incoming = Some((*after, BytesMut::from(&snap.encode()[..])));
                    assert!(self.disk.end_snapshot(*after).is_some());
                    assert!(self.disk.finish_install().is_some());
                    self.tracker.reset(*after);
                    self.check_kept("reset");
                }
                other => panic!("not a batch command: {other:?}"),
            }
        }
    }

    /// L2 on the sim: after a truncate or reset the disk holds exactly the kept records, all
    /// durable.
    fn check_kept(&self, what: &str) {
        let durable: Vec<Zxid> = self.disk.log.iter().map(|t| t.zxid).collect();
        assert_eq!(durable, self.tracker.log, "sim disk after {what}");
        assert!(self.disk.pending.is_empty(), "sim disk after {what}");
    }

    /// An fsync step of the simulation's scheduler.
    fn fsync(&mut self, n: usize) {
        if let Some(upto) = self.disk.fsync(n) {
            let input = Input::LogPersisted { upto };
            self.tracker
                .feed(&input)
                .unwrap_or_else(|e| panic!("sim disk: {e}"));
            let durable: Vec<Zxid> = self.disk.log.iter().map(|t| t.zxid).collect();
            self.tracker
                .check_durable(&durable)
                .unwrap_or_else(|e| panic!("sim disk after {input:?}: {e}"));
        }
    }

    fn settle(&mut self) {
        self.fsync(self.disk.pending.len());
    }

    /// What a restart finds after a power loss with everything synced.
    fn reopen(mut self) -> Vec<Zxid> {
        self.settle();
        self.disk.crash();
        self.disk.load().0.log_index
    }
}

fn log_options() -> LogOptions {
    LogOptions {
        prealloc_bytes: 64 << 10,
        force_sync: true,
    }
}

fn txn(zxid: Zxid) -> Txn {
    Txn {
        zxid,
        data: Bytes::from(format!("t{zxid}")),
    }
}

/// Runs `script` on both sides; panics at the first difference or contract violation.
fn run(name: &str, script: &[Step]) {
    let mut real = Real::new();
    let mut sim = Sim::default();
    let mut appended: Vec<Zxid> = Vec::new();
    let mut epoch = 1;
    let mut last = Zxid::ZERO;
    for (i, step) in script.iter().enumerate() {
        let at = format!("{name}, step {i} ({step:?})");
        match step {
            Step::Batch(acts) => {
                let mut cmds = Vec::new();
                for act in *acts {
                    match act {
                        Act::Append(n) => {
                            for _ in 0..*n {
                                let counter = if last.epoch() == Epoch(epoch) {
                                    last.counter() + 1
                                } else {
                                    1
                                };
                                last = Zxid::new(Epoch(epoch), counter);
                                appended.push(last);
                                cmds.push(LogCommand::Append(txn(last)));
                            }
                        }
                        Act::Truncate(k) => {
                            let to = k.checked_sub(1).map_or(Zxid::ZERO, |k| appended[k]);
                            cmds.push(LogCommand::Truncate { to });
                            // what follows a TRUNC comes from a newer leader
                            epoch += 1;
                        }
                        Act::Reset => {
                            epoch += 1;
                            last = Zxid::new(Epoch(epoch), 50);
                            cmds.push(LogCommand::Reset { after: last });
                        }
                    }
                }
                real.batch(&cmds);
                sim.batch(&cmds);
            }
            Step::SimSync(n) => sim.fsync(*n),
            Step::Settle => {
                real.settle();
                sim.settle();
                assert_eq!(real.tracker.log, sim.tracker.log, "{at}: logs differ");
                assert_eq!(
                    real.tracker.persisted, sim.tracker.persisted,
                    "{at}: the durable point a peer derives differs: real writer {}, sim disk {}",
                    real.tracker.persisted, sim.tracker.persisted
                );
                assert_eq!(
                    real.tracker.persisted,
                    real.tracker.last(),
                    "{at}: every report is in, yet a peer counts its log durable only up to {} \
                     of {}",
                    real.tracker.persisted,
                    real.tracker.last()
                );
            }
        }
    }
    let expected = real.tracker.log.clone();
    assert_eq!(real.reopen(), expected, "{name}: the real log after reopen");
    assert_eq!(
        sim.reopen(),
        expected,
        "{name}: the sim disk after a power loss"
    );
}

use Act::{Append, Reset, Truncate};
use Step::{Batch, Settle, SimSync};

#[test]
fn append_runs_settle_to_the_last_record() {
    run(
        "append runs",
        &[
            Batch(&[Append(3)]),
            Settle,
            Batch(&[Append(2)]),
            Batch(&[Append(4)]),
            SimSync(1),
            Settle,
        ],
    );
}

/// Bug 2's shape: the writer syncs a, b, c before the truncate and reports c, which the
/// truncate removes; only L2 tells the peer that a and b are durable.
#[test]
fn truncate_into_pending_appends() {
    run(
        "truncate into pending appends",
        &[Batch(&[Append(3), Truncate(2)]), Settle],
    );
}

#[test]
fn truncate_into_appends_pending_since_an_earlier_batch() {
    run(
        "truncate into appends of an earlier batch",
        &[
            Batch(&[Append(2)]),
            Settle,
            Batch(&[Append(3)]),
            SimSync(1),
            Batch(&[Truncate(3)]),
            Settle,
        ],
    );
}

#[test]
fn truncate_below_synced_records() {
    run(
        "truncate below synced records",
        &[Batch(&[Append(5)]), Settle, Batch(&[Truncate(2)]), Settle],
    );
}

#[test]
fn truncate_to_the_last_record() {
    run(
        "truncate to the last record",
        &[
            Batch(&[Append(3)]),
            Settle,
            Batch(&[Truncate(3)]),
            Settle,
            Batch(&[Append(2), Truncate(5)]),
            Settle,
        ],
    );
}

#[test]
fn truncate_everything_then_append() {
    run(
        "truncate everything then append",
        &[
            Batch(&[Append(3)]),
            Settle,
            Batch(&[Append(1), Truncate(0), Append(2)]),
            Settle,
            Batch(&[Append(1)]),
            Settle,
        ],
    );
}

#[test]
fn truncate_then_append_in_one_batch() {
    run(
        "truncate then append",
        &[
            Batch(&[Append(4), Truncate(2), Append(2)]),
            Settle,
            Batch(&[Append(1), Truncate(6), Append(1)]),
            Settle,
        ],
    );
}

#[test]
fn reset_after_snapshot() {
    run(
        "reset after a SNAP",
        &[
            Batch(&[Append(3)]),
            Settle,
            Batch(&[Append(2), Reset]),
            Settle,
            Batch(&[Append(2)]),
            Batch(&[Append(1)]),
            Settle,
        ],
    );
}

#[test]
fn several_batches_between_settle_points() {
    run(
        "several batches",
        &[
            Batch(&[Append(2)]),
            Batch(&[Append(2)]),
            SimSync(3),
            Batch(&[Truncate(3)]),
            Batch(&[Append(1)]),
            Batch(&[Append(2), Truncate(5)]),
            Settle,
            Batch(&[Append(3)]),
            Batch(&[Reset, Append(1)]),
            Settle,
        ],
    );
}
