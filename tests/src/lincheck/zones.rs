//! A fast necessary condition for a register history with unique write values: the zone test
//! of Gibbons & Korach (as stated by Golab, Li and Shah, PODC 2011), used to find a violation's
//! culprits without a full backtracking search.
//!
//! Ops are grouped into clusters by value: a write and the reads that saw it (value 0: the reads
//! of "no value", with a virtual write before everything). A cluster's zone runs between the
//! earliest return `f` and the latest invocation `s` of its ops: forward if `f < s` (the value
//! must be current across all of `[f, s]`), backward otherwise. Two clusters conflict when their
//! forward zones overlap, or when one's backward zone lies inside the other's forward zone (its
//! write would have to overwrite a value that must still be current); a read that returns before
//! its write is invoked is a conflict on its own.
//!
//! The result is only a guide: [`super::check`] confirms every conflict with the exact search on
//! the two clusters before reporting it, so tie conventions here cannot produce a false verdict.

use super::wgl::RegOp;
use std::collections::BTreeMap;

/// One cluster's zone; `lo..hi` with `forward` telling which kind.
#[derive(Debug, Clone, Copy)]
struct Zone {
    value: u32,
    lo: i128,
    hi: i128,
    forward: bool,
}

/// Positions (into `ops`) of the ops of two conflicting clusters (or of a read and the write it
/// saw, when the read returned first), if any conflict exists.
pub(crate) fn find_conflict(ops: &[RegOp]) -> Option<Vec<usize>> {
    // value → (write, reads); value 0 has no write.
    let mut clusters: BTreeMap<u32, (Option<usize>, Vec<usize>)> = BTreeMap::new();
    for (i, op) in ops.iter().enumerate() {
        let entry = clusters.entry(op.value).or_default();
        if op.write {
            entry.0 = Some(i);
        } else {
            entry.1.push(i);
        }
    }
    let mut zones = Vec::with_capacity(clusters.len());
    for (&value, (write, reads)) in &clusters {
        if let Some(w) = *write {
            if let Some(&r) = reads.iter().find(|&&r| ops[r].ret < ops[w].invoke) {
                return Some(vec![w, r]);
            }
        }
        // The virtual initial write sits at -1, before every real op.
        let members = write.iter().chain(reads);
        let (mut f, mut s) = if value == 0 {
            (-1, -1)
        } else {
            (i128::MAX, i128::MIN)
        };
        for &i in members {
            f = f.min(i128::from(ops[i].ret));
            s = s.max(i128::from(ops[i].invoke));
        }
        if f == i128::MAX {
            continue; // a cluster without ops cannot happen; nothing to constrain
        }
        let zone = if f < s {
            Zone {
                value,
                lo: f,
                hi: s,
                forward: true,
            }
        } else {
            Zone {
                value,
                lo: s,
                hi: f,
                forward: false,
            }
        };
        zones.push(zone);
    }
    let pair = conflicting_pair(&zones)?;
    let members = |v: u32| {
        clusters
            .get(&v)
            .into_iter()
            .flat_map(|(w, r)| w.iter().chain(r).copied())
    };
    let mut positions: Vec<usize> = members(pair.0).chain(members(pair.1)).collect();
    positions.sort_unstable();
    Some(positions)
}

/// Values of two conflicting zones, if any.
fn conflicting_pair(zones: &[Zone]) -> Option<(u32, u32)> {
    let mut forward: Vec<Zone> = zones.iter().copied().filter(|z| z.forward).collect();
    forward.sort_by_key(|z| z.lo);
    for pair in forward.windows(2) {
        if pair[1].lo < pair[0].hi {
            return Some((pair[0].value, pair[1].value));
        }
    }
    // Forward zones are now disjoint and sorted: the only candidate to contain a backward zone
    // is the last forward zone starting before it.
    for b in zones.iter().filter(|z| !z.forward) {
        let at = forward.partition_point(|f| f.lo < b.lo);
        if let Some(f) = at.checked_sub(1).map(|i| forward[i]) {
            if b.hi < f.hi {
                return Some((f.value, b.value));
            }
        }
    }
    None
}
