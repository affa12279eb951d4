//! The real side: `zab_store::LogWriter` on a temp dir, driven as the node driver drives it.
//! The sync thread is held in each `Flushed` report while the test queues a batch, so every
//! batch is one group commit; each event is checked against the log's durable records at the
//! moment it was reported.

use std::collections::VecDeque;
use std::sync::mpsc;

use zab_core::Zxid;
use zab_store::{LogCommand, LogEvent, LogReader, LogWriter, SyncThread, TxnLog};

use super::tracker::Tracker;
use crate::log_options;

/// An event of the real writer with the log's durable records when it was reported.
pub type Observed = (LogEvent, Vec<Zxid>);

/// The real writer, driven as the node driver drives it.
pub struct Real {
    writer: Option<LogWriter>,
    thread: Option<SyncThread>,
    events: mpsc::Receiver<Observed>,
    gate: mpsc::Sender<()>,
    next_token: u64,
    /// What a peer fed by this writer derives.
    pub tracker: Tracker,
    /// The records each issued truncate/reset keeps, in issue order (checked on its event).
    expect_kept: VecDeque<Vec<Zxid>>,
    dir: tempfile::TempDir,
}

impl Real {
    /// A writer on a fresh temp dir, its events reported with the durable records.
    pub fn new() -> Real {
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

    /// The running writer (taken only by `reopen`).
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

    /// Lets the sync thread go on from its held `Flushed` report.
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
    pub fn batch(&mut self, cmds: &[LogCommand]) {
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

    /// Waits until every report of everything issued so far is in.
    pub fn settle(&mut self) {
        self.hold();
        self.release();
    }

    /// Stops the writer and returns the records a reopen finds.
    pub fn reopen(mut self) -> Vec<Zxid> {
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
