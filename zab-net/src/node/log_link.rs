//! The driver's end of the txn log: the group-commit thread's command handle, a reader of the
//! durable records (for DIFF streams and purges), the thread itself, and its events.
//!
//! INV-1: `AppendLog` only queues (asynchronous, io.rs); `truncate` and `reset` return once the
//! thread reports them done (bounded by [`LOG_WAIT`]): the driver's epoch-file and TRUNC
//! durability promise (driver INV-1).
//! INV-2: events that arrive while waiting for a command's confirmation are handed to the
//! caller in arrival order (driver INV-2), never dropped; a `Failed` event is fatal.
//! INV-3: a command refused because the thread has stopped is fatal with the error the thread
//! stopped on (its `Failed` event, sent before it stops taking commands), not with "stopped":
//! the operator needs the cause (a full disk, a failed sync), whichever the driver meets first.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{debug, warn};
use zab_core::{Input, Txn, Zxid};
use zab_store::{LogEvent, LogReader, LogWriter, SyncThread, TxnLog, WriterOptions};

use crate::metrics::NodeMetrics;

use super::fatal::Fatal;

/// How long a synchronous log command (truncate, reset) may take before the node gives up.
pub(super) const LOG_WAIT: Duration = Duration::from_secs(60);

/// The txn log as the driver sees it (see the module docs).
pub(super) struct LogLink {
    writer: LogWriter,
    reader: LogReader,
    thread: Option<SyncThread>,
    events: mpsc::UnboundedReceiver<LogEvent>,
}

impl LogLink {
    /// Moves `log` into its group-commit thread.
    pub(super) fn spawn(log: TxnLog, metrics: &NodeMetrics) -> zab_store::Result<LogLink> {
        let (tx, events) = mpsc::unbounded_channel();
        let opts = WriterOptions {
            observer: Some(metrics.log_observer()),
        };
        let (writer, reader, thread) = LogWriter::spawn_with(log, opts, move |ev| {
            // The driver may be gone during shutdown; nobody is left to tell then.
            let _ = tx.send(ev);
        })?;
        Ok(LogLink {
            writer,
            reader,
            thread: Some(thread),
            events,
        })
    }

    /// A reader of the durable records.
    pub(super) fn reader(&self) -> &LogReader {
        &self.reader
    }

    /// A command handle (for background snapshots, which purge).
    pub(super) fn writer(&self) -> &LogWriter {
        &self.writer
    }

    /// Queues an append to the group commit (INV-1).
    pub(super) fn append(&mut self, txn: Txn) -> Result<(), Fatal> {
        match self.writer.append(txn) {
            Ok(()) => Ok(()),
            Err(refused) => Err(self.why_refused(refused)),
        }
    }

    /// Why the thread refused a command (INV-3): the error it stopped on, if it reported one.
    fn why_refused(&mut self, refused: zab_store::StoreError) -> Fatal {
        while let Ok(ev) = self.events.try_recv() {
            if let LogEvent::Failed(cause) = ev {
                return Fatal::LogFailed(cause);
            }
        }
        Fatal::LogCommand(refused)
    }

    /// Durably drops every record after `zxid`; later events go to `defer` (INV-1, INV-2).
    pub(super) async fn truncate(
        &mut self,
        zxid: Zxid,
        defer: impl FnMut(Input),
    ) -> Result<(), Fatal> {
        if let Err(refused) = self.writer.truncate(zxid) {
            return Err(self.why_refused(refused));
        }
        self.wait(|ev| matches!(ev, LogEvent::Truncated { .. }), defer)
            .await
    }

    /// Durably empties the log so the next record follows `zxid` (a SNAP installed).
    pub(super) async fn reset(
        &mut self,
        zxid: Zxid,
        defer: impl FnMut(Input),
    ) -> Result<(), Fatal> {
        if let Err(refused) = self.writer.reset(zxid) {
            return Err(self.why_refused(refused));
        }
        self.wait(|ev| matches!(ev, LogEvent::Reset { .. }), defer)
            .await
    }

    /// Waits for the event `want` (bounded by `LOG_WAIT`); other events go to `defer`.
    async fn wait(
        &mut self,
        want: fn(&LogEvent) -> bool,
        mut defer: impl FnMut(Input),
    ) -> Result<(), Fatal> {
        let deadline = Instant::now() + LOG_WAIT;
        // Bounded by the deadline.
        loop {
            let ev = tokio::time::timeout_at(deadline, self.events.recv())
                .await
                .map_err(|_| Fatal::LogTimeout(LOG_WAIT))?
                .ok_or(Fatal::LogGone)?;
            if want(&ev) {
                return Ok(());
            }
            if let Some(input) = to_input(ev)? {
                defer(input);
            }
        }
    }

    /// The next event (cancel-safe, for the driver's select).
    pub(super) async fn recv(&mut self) -> Option<LogEvent> {
        self.events.recv().await
    }

    /// An event already waiting, if any.
    pub(super) fn try_recv(&mut self) -> Option<LogEvent> {
        self.events.try_recv().ok()
    }

    /// Stops the thread once every command handle is gone, and waits for it.
    pub(super) async fn stop(mut self) {
        let thread = self.thread.take();
        drop(self);
        let Some(t) = thread else {
            return;
        };
        match tokio::task::spawn_blocking(move || t.join()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => warn!(error = %e, "txn log thread ended with an error"),
            Err(e) => warn!(error = %e, "txn log thread join"),
        }
    }
}

/// The core's input for a log event, if it has one; a failure is fatal (INV-2).
pub(super) fn to_input(ev: LogEvent) -> Result<Option<Input>, Fatal> {
    if let LogEvent::Failed(e) = ev {
        return Err(Fatal::LogFailed(e));
    }
    let input = ev.input();
    if input.is_none() {
        debug!(?ev, "log event");
    }
    Ok(input)
}
