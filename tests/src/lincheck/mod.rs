//! A linearizability checker for histories of register operations (`write(key, value)`,
//! `read(key) -> value`).
//!
//! - Registers are independent, so a history is linearizable iff each key's sub-history is
//!   (P-compositionality, Herlihy & Wing): [`check`] splits by key and checks each alone.
//! - Each key is checked with the Wing–Gong search and Lowe's memoization of
//!   (linearized set, register value) pairs ([`wgl`]), bounded by a deadline. A failing history
//!   makes that search exhaust every configuration before the violation, which takes seconds on
//!   thousands of ops; so a polynomial zone test ([`zones`]) first looks for two conflicting
//!   write clusters, and the exact search confirms the conflict on those clusters alone.
//! - Outcomes: a failed-for-sure operation is dropped; a read that did not complete told nothing
//!   and is dropped; a write with an unknown outcome stays, with return time +∞ (it may take
//!   effect at any point after its invocation, or never).
//! - A register starts without value; a read of an absent key observes `None`.
//! - On a violation the key's history is shrunk ([`shrink`]) to a small sub-history that still
//!   fails, which is what [`Violation`] shows.
//!
//! Writes should carry unique values (per key): a read then names the one write it saw.

mod history;
mod shrink;
mod wgl;
mod zones;

#[cfg(test)]
mod tests;

pub use history::{Kind, Operation, Outcome, Pending, Recorder};

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::{Duration, Instant};
use wgl::{search, RegOp, Search};

/// The checker's verdict on a whole history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every key's sub-history has a linearization.
    Linearizable,
    /// One key's sub-history has none.
    NotLinearizable(Violation),
    /// The time budget ran out while checking `key`; nothing is proven either way.
    Timeout {
        /// The key being checked when time ran out.
        key: String,
    },
}

/// Why a history is not linearizable: a small sub-history of one key that already fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The register.
    pub key: String,
    /// A failing sub-history, in invocation order.
    pub ops: Vec<Operation>,
    /// A one-line summary.
    pub reason: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "key {:?} is not linearizable: {}", self.key, self.reason)?;
        for op in &self.ops {
            writeln!(f, "  {op}")?;
        }
        Ok(())
    }
}

/// The result of [`check`], with the size of the history and the time it took.
#[derive(Debug, Clone)]
pub struct Report {
    /// The verdict.
    pub verdict: Verdict,
    /// Operations considered (failed operations and incomplete reads excluded).
    pub ops: usize,
    /// Distinct keys.
    pub keys: usize,
    /// Wall time of the check.
    pub elapsed: Duration,
}

/// Checks `history` for linearizability, giving up after `budget` (a violation found gets up to
/// a quarter of the budget again, at least 200 ms, to be shrunk).
pub fn check(history: &[Operation], budget: Duration) -> Report {
    let started = Instant::now();
    let deadline = started + budget;
    let mut by_key: BTreeMap<&str, Vec<&Operation>> = BTreeMap::new();
    for op in history.iter().filter(|op| counts(op)) {
        by_key.entry(op.key.as_str()).or_default().push(op);
    }
    let ops = by_key.values().map(Vec::len).sum();
    let keys = by_key.len();
    let mut verdict = Verdict::Linearizable;
    for (key, key_ops) in by_key {
        verdict = check_key(key, &key_ops, deadline, budget);
        if verdict != Verdict::Linearizable {
            break;
        }
    }
    Report {
        verdict,
        ops,
        keys,
        elapsed: started.elapsed(),
    }
}

/// Whether an operation can constrain the history at all.
fn counts(op: &Operation) -> bool {
    let says_nothing = matches!(
        (&op.kind, op.outcome),
        (_, Outcome::Failed) | (Kind::Read { .. }, Outcome::Unknown)
    );
    !says_nothing
}

fn check_key(key: &str, ops: &[&Operation], deadline: Instant, budget: Duration) -> Verdict {
    let mut ids: HashMap<&str, u32> = HashMap::new();
    for op in ops {
        if let Kind::Write { value } = &op.kind {
            let next = u32::try_from(ids.len() + 1).unwrap_or(u32::MAX);
            ids.entry(value.as_str()).or_insert(next);
        }
    }
    let mut reg_ops = Vec::with_capacity(ops.len());
    for (origin, op) in ops.iter().enumerate() {
        let (write, value) = match &op.kind {
            Kind::Write { value } => (true, ids.get(value.as_str()).copied().unwrap_or(0)),
            Kind::Read { observed: None } => (false, 0),
            Kind::Read { observed: Some(v) } => match ids.get(v.as_str()) {
                Some(&id) => (false, id),
                None => {
                    return violation(key, vec![(*op).clone()], "a read saw a value never written")
                }
            },
        };
        let ret = match op.outcome {
            Outcome::Ok { return_ns } => return_ns.max(op.invoke_ns),
            Outcome::Failed | Outcome::Unknown => u64::MAX,
        };
        reg_ops.push(RegOp {
            origin,
            write,
            value,
            invoke: op.invoke_ns,
            ret,
        });
    }
    if let Some(culprits) = zones::find_conflict(&reg_ops) {
        let sub: Vec<RegOp> = culprits.iter().map(|&i| reg_ops[i]).collect();
        if let Search::Violation { blocked, prefix } = search(&sub, deadline) {
            return explain(key, ops, &sub, blocked, prefix.len(), budget);
        }
    }
    match search(&reg_ops, deadline) {
        Search::Linearizable => Verdict::Linearizable,
        Search::Timeout => Verdict::Timeout {
            key: key.to_string(),
        },
        Search::Violation { blocked, prefix } => {
            explain(key, ops, &reg_ops, blocked, prefix.len(), budget)
        }
    }
}

/// Shrinks the failing `reg_ops` (positions `blocked`, a prefix of `linearized` ops reached)
/// and describes the result.
fn explain(
    key: &str,
    ops: &[&Operation],
    reg_ops: &[RegOp],
    blocked: usize,
    linearized: usize,
    budget: Duration,
) -> Verdict {
    let shrink_deadline = Instant::now() + (budget / 4).max(Duration::from_millis(200));
    let mut keep = shrink::shrink(reg_ops, blocked, shrink_deadline);
    keep.sort_by_key(|&i| (reg_ops[i].invoke, i));
    let reason = format!(
        "after linearizing {linearized} of the {} operations involved, no order lets `{}` take \
         effect before it returns",
        reg_ops.len(),
        ops[reg_ops[blocked].origin],
    );
    let shown = keep
        .iter()
        .map(|&i| ops[reg_ops[i].origin].clone())
        .collect();
    violation(key, shown, &reason)
}

fn violation(key: &str, ops: Vec<Operation>, reason: &str) -> Verdict {
    Verdict::NotLinearizable(Violation {
        key: key.to_string(),
        ops,
        reason: reason.to_string(),
    })
}
