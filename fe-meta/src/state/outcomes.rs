//! What replay did with recent entries, by journal id: how the leader's write path learns
//! whether the entry it submitted was applied or ignored (`replay` INV-6) before it answers.
//!
//! Design: the node answers a submitted write with its zxid once the entry is committed and
//! applied here; the answer carries no more than that. So the state machine records each
//! *ignored* entry's [`Conflict`] here while it applies it, before it publishes the version,
//! and the write path looks its zxid up right after the answer. Applied entries (all but a
//! rare few) are not recorded: the commit path pays nothing for them, and only an ignored
//! entry takes the lock. The map is bounded; what it can no longer tell is said so.
//!
//! INV-1: [`RecentOutcomes::record`] is called for an entry before the version holding it is
//! published, so a waiter answered for journal id `j` finds `j`'s conflict if it had one.
//! INV-2 (bounded): at most [`RecentOutcomes::CAPACITY`] conflicts are kept; when one more
//! comes, the lowest journal id goes and [`RecentOutcomes::lookup`] answers
//! [`Lookup::Unknown`] for every id at or below it that is not kept — never `Applied` for an
//! entry whose conflict was dropped.
//! INV-3: a restore (a snapshot installed) makes every id at or below the snapshot's
//! [`Lookup::Unknown`] unless a conflict is kept for it: what the image covers was not seen
//! entry by entry.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use zab_net::Zxid;

use crate::state::replay::{Conflict, Outcome};

/// What is known of one applied journal id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Replay's outcome.
    Known(Outcome),
    /// No longer known (INV-2, INV-3): the caller must not claim either way.
    Unknown,
}

/// The conflicts of recently applied entries (see the module docs).
#[derive(Debug, Default)]
pub struct RecentOutcomes {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    conflicts: BTreeMap<Zxid, Conflict>,
    /// Ids at or below this may have had a conflict that is no longer kept.
    forgotten_upto: Zxid,
}

impl RecentOutcomes {
    /// Most conflicts kept (INV-2).
    pub const CAPACITY: usize = 4096;

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that replay ignored `journal_id` for `conflict` (INV-1, INV-2).
    pub fn record(&self, journal_id: Zxid, conflict: Conflict) {
        let mut g = self.lock();
        g.conflicts.insert(journal_id, conflict);
        while g.conflicts.len() > Self::CAPACITY {
            if let Some((dropped, _)) = g.conflicts.pop_first() {
                g.forgotten_upto = g.forgotten_upto.max(dropped);
            }
        }
    }

    /// A restore replaced the catalog with an image of everything up to `journal_id` (INV-3).
    pub fn restored(&self, journal_id: Zxid) {
        let mut g = self.lock();
        g.forgotten_upto = g.forgotten_upto.max(journal_id);
    }

    /// What replay did with `journal_id`, which the caller knows was applied here.
    pub fn lookup(&self, journal_id: Zxid) -> Lookup {
        let g = self.lock();
        match g.conflicts.get(&journal_id) {
            Some(c) => Lookup::Known(Outcome::Ignored(*c)),
            None if journal_id <= g.forgotten_upto => Lookup::Unknown,
            None => Lookup::Known(Outcome::Applied),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::replay::ConflictKind;

    const TAKEN: Conflict = Conflict {
        kind: ConflictKind::AlreadyExists,
        why: "database name already used",
    };

    #[test]
    fn ignored_entries_are_found_others_are_applied() {
        let o = RecentOutcomes::default();
        o.record(Zxid(7), TAKEN);
        assert_eq!(o.lookup(Zxid(7)), Lookup::Known(Outcome::Ignored(TAKEN)));
        assert_eq!(o.lookup(Zxid(6)), Lookup::Known(Outcome::Applied));
        assert_eq!(o.lookup(Zxid(8)), Lookup::Known(Outcome::Applied));
    }

    #[test]
    fn a_dropped_conflict_makes_older_ids_unknown_never_applied() {
        let o = RecentOutcomes::default();
        let n = RecentOutcomes::CAPACITY as u64;
        for j in 1..=n + 2 {
            o.record(Zxid(j * 10), TAKEN);
        }
        assert_eq!(o.lookup(Zxid(10)), Lookup::Unknown, "dropped");
        assert_eq!(
            o.lookup(Zxid(15)),
            Lookup::Unknown,
            "at or below a dropped id"
        );
        assert_eq!(o.lookup(Zxid(20)), Lookup::Unknown, "dropped");
        assert_eq!(o.lookup(Zxid(30)), Lookup::Known(Outcome::Ignored(TAKEN)));
        assert_eq!(o.lookup(Zxid(35)), Lookup::Known(Outcome::Applied));
    }

    #[test]
    fn a_restore_makes_what_the_image_covers_unknown() {
        let o = RecentOutcomes::default();
        o.record(Zxid(5), TAKEN);
        o.restored(Zxid(100));
        assert_eq!(o.lookup(Zxid(5)), Lookup::Known(Outcome::Ignored(TAKEN)));
        assert_eq!(o.lookup(Zxid(50)), Lookup::Unknown);
        assert_eq!(o.lookup(Zxid(101)), Lookup::Known(Outcome::Applied));
    }
}
