//! Group commit: [`LogWriter`] hands commands to a dedicated sync thread that owns the
//! [`TxnLog`].
//!
//! The thread blocks for one command, then drains everything else already queued (up to
//! `MAX_BATCH`), executes the commands in order — the appends queued back to back written
//! together, one `pwrite` per run (`log` INV-6) — and syncs once for all the appends of the
//! batch before reporting [`LogEvent::Persisted`]. While it syncs, new commands queue up and
//! form the next batch, so the number of syncs per second stays bounded by the disk while the
//! records per sync grow with the load.
//!
//! The command queue is a mutex-guarded deque with a condition variable: the thread parks at
//! once when the queue is empty (no spinning or `sched_yield` before parking, which on a
//! shared 2-core machine cost a context switch each), and a sender wakes it only when the
//! queue goes from empty to non-empty (the thread takes everything queued in one go).
//!
//! INV-1: commands take effect in the order they were sent (one channel, one thread).
//! INV-2: `Persisted { upto }` is reported only after every append up to `upto` is durable;
//! `Truncated`, `Reset` and `Purged` only after the removal is durable. Appends sent before a
//! truncate/reset/flush are synced (and reported) before it runs.
//! INV-4: an observer given in [`WriterOptions`] sees every sync of the batch's records
//! ([`SyncBatch`]: records, bytes, writes, time spent in the sync call) on the sync thread,
//! after the sync and before its `Persisted`/`Flushed` report; it must be cheap and must not
//! block.
//! INV-3: the first error stops the thread: it is reported as [`LogEvent::Failed`] (with the
//! error itself), later sends and [`SyncThread::join`] fail with [`StoreError::WriterStopped`]. The log is in
//! an unknown state then; the owner must stop the peer and reopen.
//! INV-5: a sync of [`crate::slow_sync::SLOW_SYNC`] or longer is logged at WARN (at most one
//! line per 10 s, `slow_sync`).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use tracing::warn;
use zab_core::{Input, Txn, Zxid};

use crate::error::{Result, StoreError};
use crate::log::TxnLog;
use crate::reader::LogReader;
use crate::record::encoded_len;
use crate::slow_sync::SlowSyncs;

const MAX_BATCH: usize = 64 * 1024;

/// A command for the sync thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogCommand {
    /// Append a txn (reported by a later `Persisted`).
    Append(Txn),
    /// Durably drop every record after `to` (TRUNC).
    Truncate {
        /// The last zxid kept.
        to: Zxid,
    },
    /// Durably drop every record; the log then follows `after` (an installed snapshot).
    Reset {
        /// The zxid the next record follows.
        after: Zxid,
    },
    /// Durably remove the oldest segments holding only records `<= upto`.
    Purge {
        /// The oldest kept snapshot's zxid.
        upto: Zxid,
    },
    /// Sync everything sent before, then answer with `Flushed { token }`.
    Flush {
        /// Echoed back.
        token: u64,
    },
}

/// What the sync thread reports, in command order.
#[derive(Debug)]
pub enum LogEvent {
    /// Every append up to `upto` is durable.
    Persisted {
        /// The last durable zxid.
        upto: Zxid,
    },
    /// A `Truncate` is durable; `last` is the log's last zxid now.
    Truncated {
        /// The truncate point asked for.
        to: Zxid,
        /// The last record left.
        last: Option<Zxid>,
    },
    /// A `Reset` is durable.
    Reset {
        /// The zxid the next record follows.
        after: Zxid,
    },
    /// A `Purge` is durable; `first` is the first zxid left on disk.
    Purged {
        /// The first record left.
        first: Option<Zxid>,
    },
    /// Everything sent before the `Flush` is durable.
    Flushed {
        /// The flush's token.
        token: u64,
        /// The last durable zxid.
        upto: Option<Zxid>,
    },
    /// The thread hit an error and stopped (INV-3).
    Failed(StoreError),
}

impl LogEvent {
    /// The input a driver feeds its peer for this event, following the log durability
    /// contract of `zab_core::io`: `Persisted` becomes `LogPersisted` (possibly naming a zxid a
    /// later truncate removed; the peer ignores that), `Purged` becomes `LogPurged`. A
    /// completed truncate, reset or flush tells the peer nothing beyond what the synchronous
    /// action already did, so it maps to `None`; so does `Failed`, which the caller must handle
    /// itself (the peer must stop, INV-3).
    pub fn input(&self) -> Option<Input> {
        match self {
            LogEvent::Persisted { upto } => Some(Input::LogPersisted { upto: *upto }),
            LogEvent::Purged {
                first: Some(first_zxid),
            } => Some(Input::LogPurged {
                first_zxid: *first_zxid,
            }),
            LogEvent::Purged { first: None }
            | LogEvent::Truncated { .. }
            | LogEvent::Reset { .. }
            | LogEvent::Flushed { .. }
            | LogEvent::Failed(_) => None,
        }
    }
}

/// One sync of the txn log by the sync thread (INV-4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncBatch {
    /// Records appended since the previous sync (0 for a flush with nothing new).
    pub records: u64,
    /// Their encoded size in the log, headers included.
    pub bytes: u64,
    /// The `pwrite` calls that wrote them (one per run of records in one segment, `log`
    /// INV-6): fewer than `records` when appends were queued together.
    pub writes: u64,
    /// Time spent in the sync call (fdatasync of each segment written to).
    pub duration: Duration,
}

/// Sees every sync of the log (INV-4): for metrics, without this crate knowing how they are
/// kept. Called on the sync thread: keep it to a few atomic updates.
pub trait SyncObserver: Send + Sync {
    /// One sync done.
    fn on_sync(&self, batch: &SyncBatch);
}

/// Options of the sync thread ([`LogWriter::spawn_with`]).
#[derive(Clone, Default)]
pub struct WriterOptions {
    /// Sees every sync (INV-4); `None`: nobody.
    pub observer: Option<Arc<dyn SyncObserver>>,
}

impl std::fmt::Debug for WriterOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterOptions")
            .field("observer", &self.observer.is_some())
            .finish()
    }
}

/// The command queue shared by the handles and the sync thread.
#[derive(Debug, Default)]
struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
}

#[derive(Debug, Default)]
struct QueueState {
    cmds: VecDeque<LogCommand>,
    /// Live [`LogWriter`] handles; the thread ends when this is 0 and the queue is empty.
    senders: usize,
    /// The thread has stopped: sends fail.
    stopped: bool,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        // A poisoned lock only means a holder panicked between two plain deque operations.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A cloneable handle that sends commands to the sync thread. The thread ends when every
/// handle is dropped (after finishing what was queued).
///
/// The queue is unbounded: the caller bounds how many appends it has in flight (the
/// protocol's pipeline), as the benchmark's appenders do with their window.
#[derive(Debug)]
pub struct LogWriter {
    queue: Arc<Queue>,
    dir: PathBuf,
}

impl Clone for LogWriter {
    fn clone(&self) -> LogWriter {
        self.queue.lock().senders += 1;
        LogWriter {
            queue: Arc::clone(&self.queue),
            dir: self.dir.clone(),
        }
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        let mut st = self.queue.lock();
        st.senders = st.senders.saturating_sub(1);
        if st.senders == 0 {
            self.queue.ready.notify_one();
        }
    }
}

/// The sync thread; join it to learn how it ended.
#[derive(Debug)]
pub struct SyncThread {
    handle: JoinHandle<Result<()>>,
    dir: PathBuf,
}

impl LogWriter {
    /// Moves `log` into a new sync thread that reports to `on_event`; returns the command
    /// handle, a reader of the durable records, and the thread.
    pub fn spawn<F>(log: TxnLog, on_event: F) -> Result<(LogWriter, LogReader, SyncThread)>
    where
        F: FnMut(LogEvent) + Send + 'static,
    {
        LogWriter::spawn_with(log, WriterOptions::default(), on_event)
    }

    /// Like [`LogWriter::spawn`], with [`WriterOptions`] (an observer of the syncs).
    pub fn spawn_with<F>(
        log: TxnLog,
        opts: WriterOptions,
        on_event: F,
    ) -> Result<(LogWriter, LogReader, SyncThread)>
    where
        F: FnMut(LogEvent) + Send + 'static,
    {
        let dir = log.dir().to_path_buf();
        let reader = log.reader();
        let queue = Arc::new(Queue::default());
        queue.lock().senders = 1;
        let rx = Arc::clone(&queue);
        let handle = thread::Builder::new()
            .name("zab-log-sync".into())
            .spawn(move || run(log, &rx, opts.observer, on_event))
            .map_err(|e| StoreError::io("spawn sync thread for", &dir, e))?;
        let writer = LogWriter {
            queue,
            dir: dir.clone(),
        };
        Ok((writer, reader, SyncThread { handle, dir }))
    }

    /// Like [`LogWriter::spawn`], reporting to a channel.
    pub fn spawn_with_channel(
        log: TxnLog,
    ) -> Result<(LogWriter, LogReader, SyncThread, Receiver<LogEvent>)> {
        let (etx, erx) = crossbeam_channel::unbounded();
        let (w, r, t) = LogWriter::spawn(log, move |ev| {
            // The receiver may be gone during shutdown; nobody is left to tell then.
            let _ = etx.send(ev);
        })?;
        Ok((w, r, t, erx))
    }

    /// Sends any command.
    pub fn send(&self, cmd: LogCommand) -> Result<()> {
        let mut st = self.queue.lock();
        if st.stopped {
            return Err(StoreError::WriterStopped {
                path: self.dir.clone(),
            });
        }
        st.cmds.push_back(cmd);
        // The thread waits only on an empty queue (checked under the lock, so this wake-up
        // cannot be missed) and takes all of it when it wakes. Woken after the lock is
        // released: woken under it, the thread would block again at once on the lock.
        let wake = st.cmds.len() == 1;
        drop(st);
        if wake {
            self.queue.ready.notify_one();
        }
        Ok(())
    }

    /// Queues an append.
    pub fn append(&self, txn: Txn) -> Result<()> {
        self.send(LogCommand::Append(txn))
    }

    /// Queues a durable truncate.
    pub fn truncate(&self, to: Zxid) -> Result<()> {
        self.send(LogCommand::Truncate { to })
    }

    /// Queues a durable reset.
    pub fn reset(&self, after: Zxid) -> Result<()> {
        self.send(LogCommand::Reset { after })
    }

    /// Queues a purge.
    pub fn purge(&self, upto: Zxid) -> Result<()> {
        self.send(LogCommand::Purge { upto })
    }

    /// Queues a flush.
    pub fn flush(&self, token: u64) -> Result<()> {
        self.send(LogCommand::Flush { token })
    }
}

impl SyncThread {
    /// Waits for the thread (drop every [`LogWriter`] first) and returns its outcome.
    pub fn join(self) -> Result<()> {
        match self.handle.join() {
            Ok(r) => r,
            Err(_) => Err(StoreError::WriterStopped { path: self.dir }),
        }
    }
}

/// Marks the queue stopped when the thread ends, however it ends: later sends fail and
/// nothing queued is kept.
struct StopOnExit<'a>(&'a Queue);

impl Drop for StopOnExit<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.stopped = true;
        st.cmds.clear();
    }
}

/// The next batch (at most `MAX_BATCH` commands, in order); `false` once every handle is
/// dropped and the queue is empty.
fn next_batch(queue: &Queue, batch: &mut Vec<LogCommand>) -> bool {
    let mut st = queue.lock();
    while st.cmds.is_empty() {
        if st.senders == 0 {
            return false;
        }
        st = queue.ready.wait(st).unwrap_or_else(|e| e.into_inner());
    }
    let n = st.cmds.len().min(MAX_BATCH);
    batch.extend(st.cmds.drain(..n));
    true
}

fn run<F: FnMut(LogEvent)>(
    log: TxnLog,
    queue: &Queue,
    observer: Option<Arc<dyn SyncObserver>>,
    mut on_event: F,
) -> Result<()> {
    let _stop = StopOnExit(queue);
    let mut batch = Vec::new();
    let mut appends = Vec::new();
    let mut syncer = Syncer {
        log,
        observer,
        records: 0,
        bytes: 0,
        writes_before: 0,
        slow: SlowSyncs::default(),
    };
    while next_batch(queue, &mut batch) {
        if let Err(e) = run_batch(&mut syncer, &mut batch, &mut appends, &mut on_event) {
            let log = &syncer.log;
            // WARN, not ERROR: the error itself goes to the owner in `LogEvent::Failed`
            // (INV-3), which decides what it means and reports it once (fe-meta: one ERROR
            // line saying what to do).
            warn!(dir = %log.dir().display(), error = %e, "txn log sync thread stops");
            let report = StoreError::WriterStopped {
                path: log.dir().to_path_buf(),
            };
            on_event(LogEvent::Failed(e));
            return Err(report);
        }
    }
    Ok(())
}

/// The log with what was appended since its last sync, for the observer (INV-4).
struct Syncer {
    log: TxnLog,
    observer: Option<Arc<dyn SyncObserver>>,
    records: u64,
    bytes: u64,
    /// `log.runs_written()` at the previous sync.
    writes_before: u64,
    slow: SlowSyncs,
}

impl Syncer {
    /// Appends and empties `txns` (one `pwrite` per run, `log` INV-6).
    fn append_all(&mut self, txns: &mut Vec<Txn>) -> Result<()> {
        self.log.append_all(txns)?;
        self.records += txns.len() as u64;
        for txn in txns.drain(..) {
            self.bytes += u64::try_from(encoded_len(txn.data.len())).unwrap_or(u64::MAX);
        }
        Ok(())
    }

    /// Syncs the log, tells the observer and warns of a slow disk (`slow_sync`).
    fn sync(&mut self) -> Result<Option<Zxid>> {
        let started = Instant::now();
        let upto = self.log.sync()?;
        let duration = started.elapsed();
        if let Some(slow) = self.slow.observe(duration, Instant::now()) {
            warn!(
                dir = %self.log.dir().display(),
                slow_syncs = slow.count,
                slowest_ms = slow.slowest.as_millis(),
                "txn log sync took {} ms: the disk is slow; this node's acks wait for it (commits \
                 too if a quorum needs this node): check the disk's load and health",
                duration.as_millis()
            );
        }
        if let Some(o) = &self.observer {
            o.on_sync(&SyncBatch {
                records: self.records,
                bytes: self.bytes,
                writes: self.log.runs_written() - self.writes_before,
                duration,
            });
        }
        self.records = 0;
        self.bytes = 0;
        self.writes_before = self.log.runs_written();
        Ok(upto)
    }
}

fn run_batch<F: FnMut(LogEvent)>(
    s: &mut Syncer,
    batch: &mut Vec<LogCommand>,
    appends: &mut Vec<Txn>,
    on_event: &mut F,
) -> Result<()> {
    for cmd in batch.drain(..) {
        if !matches!(cmd, LogCommand::Append(_)) {
            write_and_sync(s, appends, on_event)?;
        }
        match cmd {
            LogCommand::Append(txn) => appends.push(txn),
            LogCommand::Truncate { to } => {
                let last = s.log.truncate(to)?;
                on_event(LogEvent::Truncated { to, last });
            }
            LogCommand::Reset { after } => {
                s.log.reset(after)?;
                on_event(LogEvent::Reset { after });
            }
            LogCommand::Purge { upto } => {
                let first = s.log.purge(upto)?;
                on_event(LogEvent::Purged { first });
            }
            LogCommand::Flush { token } => {
                let upto = s.sync()?;
                on_event(LogEvent::Flushed { token, upto });
            }
        }
    }
    write_and_sync(s, appends, on_event)
}

/// Writes the appends gathered so far, if any, syncs them and reports them persisted.
fn write_and_sync<F: FnMut(LogEvent)>(
    s: &mut Syncer,
    appends: &mut Vec<Txn>,
    on_event: &mut F,
) -> Result<()> {
    if appends.is_empty() {
        return Ok(());
    }
    s.append_all(appends)?;
    sync_and_report(s, on_event)
}

fn sync_and_report<F: FnMut(LogEvent)>(s: &mut Syncer, on_event: &mut F) -> Result<()> {
    if let Some(upto) = s.sync()? {
        on_event(LogEvent::Persisted { upto });
    }
    Ok(())
}
