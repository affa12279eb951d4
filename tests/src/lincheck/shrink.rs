//! Shrinks a non-linearizable register history to a small one that still fails.
//!
//! Soundness: dropping a read from a linearizable history leaves it linearizable, and so does
//! dropping a write together with every read of the value it wrote (its slot in the order is
//! simply skipped). So any sub-history built by such removals that still fails proves the whole
//! history non-linearizable — an honest explanation, never one that invents a violation (for
//! instance by dropping the write a read saw).
//!
//! The shrinking is greedy (chunks of halving size, as in delta debugging) and bounded by a
//! deadline; when the deadline passes it returns the smallest failing history found so far.

use super::wgl::{search, RegOp, Search};
use std::time::Instant;

/// Positions (into `ops`) of a small sub-history that is still not linearizable.
///
/// `ops` must itself be non-linearizable; `blocked` is the operation the search got stuck on.
pub(crate) fn shrink(ops: &[RegOp], blocked: usize, deadline: Instant) -> Vec<usize> {
    let mut keep: Vec<usize> = (0..ops.len()).collect();
    // First cut: nothing invoked after the blocked operation returned is needed, usually.
    let cut = ops[blocked].ret;
    let early: Vec<usize> = keep
        .iter()
        .copied()
        .filter(|&i| ops[i].invoke <= cut)
        .collect();
    let early = close_removal(ops, &keep, &early);
    if early.len() < keep.len() && fails(ops, &early, deadline) {
        keep = early;
    }
    let mut chunk = keep.len().div_ceil(2).max(1);
    loop {
        let mut start = 0;
        while start < keep.len() {
            if Instant::now() >= deadline {
                return keep;
            }
            let end = (start + chunk).min(keep.len());
            let candidate: Vec<usize> = keep[..start].iter().chain(&keep[end..]).copied().collect();
            let candidate = close_removal(ops, &keep, &candidate);
            if !candidate.is_empty() && fails(ops, &candidate, deadline) {
                keep = candidate;
            } else {
                start = end;
            }
        }
        if chunk == 1 {
            return keep;
        }
        chunk = chunk.div_ceil(2);
    }
}

/// `candidate` minus every read whose value was written by a write that `keep` has and
/// `candidate` drops.
fn close_removal(ops: &[RegOp], keep: &[usize], candidate: &[usize]) -> Vec<usize> {
    let mut in_candidate = vec![false; ops.len()];
    for &i in candidate {
        in_candidate[i] = true;
    }
    let mut dropped_values: Vec<u32> = keep
        .iter()
        .filter(|&&i| ops[i].write && !in_candidate[i])
        .map(|&i| ops[i].value)
        .collect();
    dropped_values.sort_unstable();
    candidate
        .iter()
        .copied()
        .filter(|&i| ops[i].write || dropped_values.binary_search(&ops[i].value).is_err())
        .collect()
}

fn fails(ops: &[RegOp], subset: &[usize], deadline: Instant) -> bool {
    let sub: Vec<RegOp> = subset.iter().map(|&i| ops[i]).collect();
    matches!(search(&sub, deadline), Search::Violation { .. })
}
