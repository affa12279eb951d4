//! The writes clients saw acknowledged: global variables (`SET_VAR name = value`) with unique
//! names, so the end checks can read each one back from every node.
//!
//! INV: a write enters the ledger only after its `Written` answer arrived; a write whose
//! outcome is unknown (timeout, lost connection) never does.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Acknowledged `SET_VAR` writes, shared by the load tasks and the checks (cheap to clone).
#[derive(Clone, Debug, Default)]
pub struct Ledger {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    vars: BTreeMap<String, Acked>,
    value_bytes: u64,
}

/// One acknowledged write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acked {
    /// The value written.
    pub value: String,
    /// The journal id the write was acknowledged with.
    pub journal_id: u64,
}

impl Ledger {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records an acknowledged `SET_VAR name = value` at `journal_id`.
    pub fn record(&self, name: &str, value: &str, journal_id: u64) {
        let mut g = self.lock();
        g.value_bytes += value.len() as u64;
        let acked = Acked {
            value: value.to_owned(),
            journal_id,
        };
        if let Some(old) = g.vars.insert(name.to_owned(), acked) {
            g.value_bytes -= old.value.len() as u64;
        }
    }

    /// Acknowledged writes so far.
    pub fn len(&self) -> usize {
        self.lock().vars.len()
    }

    /// Whether nothing was acknowledged.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Total bytes of the values acknowledged.
    pub fn value_bytes(&self) -> u64 {
        self.lock().value_bytes
    }

    /// The highest journal id acknowledged.
    pub fn max_journal_id(&self) -> u64 {
        self.lock()
            .vars
            .values()
            .map(|a| a.journal_id)
            .max()
            .unwrap_or(0)
    }

    /// A copy of every acknowledged write, by name.
    pub fn snapshot(&self) -> BTreeMap<String, Acked> {
        self.lock().vars.clone()
    }
}
