//! The writes clients saw acknowledged: global variables (`SET_VAR name = value`) and created
//! databases (`CREATE_DB name` → the id answered), each with a unique name, so the end checks
//! can read each one back from every node — the value of a variable, the answered id of a
//! database: a `Written` answer must stand for an effect that replay made.
//!
//! INV: a write enters the ledger only after its `Written` answer arrived; a write whose
//! outcome is unknown (timeout, lost connection) or that was refused never does.

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
    databases: BTreeMap<String, AckedCreate>,
}

/// One acknowledged create.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckedCreate {
    /// The id the `Written` answer said was created.
    pub id: u64,
    /// The journal id the write was acknowledged with.
    pub journal_id: u64,
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

    /// Records an acknowledged `CREATE_DB name` that answered `id` at `journal_id`.
    pub fn record_database(&self, name: &str, id: u64, journal_id: u64) {
        let acked = AckedCreate { id, journal_id };
        self.lock().databases.insert(name.to_owned(), acked);
    }

    /// Acknowledged writes so far (variables and databases).
    pub fn len(&self) -> usize {
        let g = self.lock();
        g.vars.len() + g.databases.len()
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
        let g = self.lock();
        let vars = g.vars.values().map(|a| a.journal_id);
        let dbs = g.databases.values().map(|a| a.journal_id);
        vars.chain(dbs).max().unwrap_or(0)
    }

    /// A copy of every acknowledged variable write, by name.
    pub fn snapshot(&self) -> BTreeMap<String, Acked> {
        self.lock().vars.clone()
    }

    /// A copy of every acknowledged database create, by name.
    pub fn databases(&self) -> BTreeMap<String, AckedCreate> {
        self.lock().databases.clone()
    }
}
