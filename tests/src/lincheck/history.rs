//! A concurrent history of register operations, and a thread-safe recorder that builds one.
//!
//! Every operation is one `write(key, value)` or `read(key) -> value` by one client, with the
//! monotonic time it was invoked and how it ended:
//! - [`Outcome::Ok`]: it took effect between its invocation and its return;
//! - [`Outcome::Failed`]: it certainly did not take effect (a typed refusal from the service);
//! - [`Outcome::Unknown`]: a timeout or a lost connection — a write may or may not have taken
//!   effect, at any time after its invocation (its return time is +∞); a read told nothing.
//!
//! Times are nanoseconds on one monotonic clock, shared by all clients of a history.

use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// What an operation did (and, for a completed read, what it saw).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// Set the register to `value`.
    Write {
        /// The value written; histories give every write a unique value.
        value: String,
    },
    /// Read the register; `observed` is `None` when the key had no value (never written).
    Read {
        /// What the read returned; meaningful only when the outcome is [`Outcome::Ok`].
        observed: Option<String>,
    },
}

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Completed successfully at `return_ns`.
    Ok {
        /// Return time, on the history's clock.
        return_ns: u64,
    },
    /// Certainly had no effect.
    Failed,
    /// May or may not have taken effect (timeout, connection lost); never returned.
    Unknown,
}

/// One operation of a history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// The client (process/thread) that issued it; used only in explanations.
    pub client: u32,
    /// The register.
    pub key: String,
    /// Write or read.
    pub kind: Kind,
    /// Invocation time, on the history's clock.
    pub invoke_ns: u64,
    /// How it ended.
    pub outcome: Outcome,
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match (&self.kind, self.outcome) {
            (Kind::Write { value }, _) => format!("write({}, {value})", self.key),
            (Kind::Read { observed }, Outcome::Ok { .. }) => {
                format!(
                    "read({}) -> {}",
                    self.key,
                    observed.as_deref().unwrap_or("<none>")
                )
            }
            (Kind::Read { .. }, _) => format!("read({})", self.key),
        };
        let end = match self.outcome {
            Outcome::Ok { return_ns } => format!("{return_ns}"),
            Outcome::Failed => "failed".to_string(),
            Outcome::Unknown => "unknown (+inf)".to_string(),
        };
        write!(
            f,
            "client {} {what} [{} .. {end}]",
            self.client, self.invoke_ns
        )
    }
}

/// A handle for an invoked, not yet completed operation of a [`Recorder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending(usize);

/// Records a history from many threads: `invoke` before sending, `complete` after the answer.
///
/// An operation never completed is recorded as [`Outcome::Unknown`].
#[derive(Debug)]
pub struct Recorder {
    start: Instant,
    ops: Mutex<Vec<Operation>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    /// A recorder whose clock starts now.
    pub fn new() -> Self {
        Recorder {
            start: Instant::now(),
            ops: Mutex::new(Vec::new()),
        }
    }

    /// The instant its clock counts from (`invoke_ns` and `return_ns` are nanoseconds since).
    pub fn started(&self) -> Instant {
        self.start
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Notes the invocation of an operation; call right before sending the request.
    pub fn invoke(&self, client: u32, key: &str, kind: Kind) -> Pending {
        let mut ops = self.ops.lock().unwrap_or_else(PoisonError::into_inner);
        let invoke_ns = self.now_ns();
        ops.push(Operation {
            client,
            key: key.to_string(),
            kind,
            invoke_ns,
            outcome: Outcome::Unknown,
        });
        Pending(ops.len() - 1)
    }

    /// A write or read completed successfully; `observed` is what a read returned.
    pub fn ok(&self, pending: Pending, observed: Option<String>) {
        let return_ns = self.now_ns();
        let mut ops = self.ops.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(op) = ops.get_mut(pending.0) {
            if let Kind::Read { observed: seen } = &mut op.kind {
                *seen = observed;
            }
            op.outcome = Outcome::Ok { return_ns };
        }
    }

    /// The operation certainly had no effect.
    pub fn failed(&self, pending: Pending) {
        let mut ops = self.ops.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(op) = ops.get_mut(pending.0) {
            op.outcome = Outcome::Failed;
        }
    }

    /// The outcome is not known (timeout, lost connection); the default for a pending op.
    pub fn unknown(&self, pending: Pending) {
        let mut ops = self.ops.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(op) = ops.get_mut(pending.0) {
            op.outcome = Outcome::Unknown;
        }
    }

    /// The operations recorded so far.
    pub fn history(&self) -> Vec<Operation> {
        self.ops
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
