//! The leader's speculative planner: validates each command against the applied catalog plus
//! every entry planned but not yet settled, so two entries that may both commit never take the
//! same name or id.
//!
//! An entry is *pending* from [`Planner::plan`] until the node says what became of it:
//! [`Planner::settled`] (committed and applied here: the applied catalog now holds its effect)
//! or [`Planner::failed`] (the node says for certain it was never proposed). Nothing else
//! removes it — in particular not a client's timeout: an entry whose client gave up is still
//! in the node's pipeline and may commit ahead of anything planned next. Only
//! [`Planner::new_epoch`] drops every pending entry at once: under a new epoch an old entry
//! either committed before the leader served (the applied catalog holds it) or never will.
//!
//! INV-1: the speculative catalog is the applied catalog (as of the last reset) with every
//! pending entry applied in plan order; an entry is validated against it and then applied to
//! it.
//! INV-2: pending entries are identified by a [`Ticket`] that is never reused, across epochs
//! too: a late word about an entry of an older epoch finds nothing and changes nothing.
//! INV-3: when the last pending entry settles or fails, the speculative catalog becomes the
//! applied one (which holds every settled entry), so drift from replay cannot accumulate.
//! INV-4: when an entry fails while others are pending, the speculative catalog is rebuilt as
//! the applied catalog plus the remaining pending entries. Some of those may already be
//! applied whose answers are not in yet; re-applying them is harmless for the idempotent ops
//! and, where it is not, the worst case is a plan that replay ignores — which its client is
//! told (`server::write` INV-4), never acknowledged.
//! INV-5 (memory): under a steady stream of writes the pending set may never empty, and the
//! speculative catalog, applied to on its own, would grow into a second full copy of every
//! entity written since the last reset. So after as many settles as there are pending entries
//! (at least [`REBASE_MIN`]) it is rebuilt as in INV-4 — the applied catalog plus the pending
//! entries — and shares all but the pending entries' paths with the applied one again; the
//! amortized cost is one extra apply per write.

use std::collections::BTreeMap;

use super::{plan_command, plan_write, Command, CommandError, Planned, Write};
use crate::state::catalog::{Admission, Catalog, SessionTag};
use crate::state::journal::Op;
use crate::state::replay::apply_op;

/// Names one planned entry until it settles or fails (INV-2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(u64);

/// The leader's planner (see the module docs).
#[derive(Clone, Debug)]
pub struct Planner {
    speculative: Catalog,
    pending: BTreeMap<Ticket, Op>,
    next_ticket: u64,
    /// Entries settled since the speculative catalog was last rebuilt or reset (INV-5).
    settled_since_rebase: usize,
}

/// The fewest settles between two rebuilds of the speculative catalog (INV-5).
pub const REBASE_MIN: usize = 256;

impl Planner {
    /// A planner whose speculative catalog is `applied` (the replayed catalog).
    pub fn new(applied: Catalog) -> Planner {
        Planner {
            speculative: applied,
            pending: BTreeMap::new(),
            next_ticket: 0,
            settled_since_rebase: 0,
        }
    }

    /// Validates `write` against the speculative catalog and, on success, applies it there and
    /// keeps it pending under the returned ticket (INV-1).
    pub fn plan(&mut self, write: &Write) -> Result<(Ticket, Planned), CommandError> {
        let (op, created_id) = plan_write(&self.speculative, write)?;
        let planned = Planned::encode(&op, created_id)?;
        apply_op(&mut self.speculative, &op);
        Ok((self.keep_pending(op), planned))
    }

    /// As [`Planner::plan`] for a client write with a session tag: refused early when the
    /// speculative session table says it is stale or a duplicate (replay would ignore it);
    /// otherwise the entry is a SESSION_WRITE wrapping the command's op, pending under the
    /// returned ticket.
    pub fn plan_tagged(
        &mut self,
        cmd: &Command,
        tag: SessionTag,
    ) -> Result<(Ticket, Planned), CommandError> {
        let (client_id, seq) = (tag.client_id, tag.seq);
        match self.speculative.sessions().admit(&tag) {
            Admission::Stale { floor } => Err(CommandError::StaleRequest {
                client_id,
                seq,
                floor,
            }),
            Admission::Duplicate(outcome) => Err(CommandError::Duplicate {
                client_id,
                seq,
                outcome,
            }),
            Admission::Fresh => {
                let (inner, created_id) = plan_command(&self.speculative, cmd)?;
                let op = Op::SessionWrite {
                    tag,
                    inner: Box::new(inner),
                };
                let planned = Planned::encode(&op, created_id)?;
                apply_op(&mut self.speculative, &op);
                Ok((self.keep_pending(op), planned))
            }
        }
    }

    fn keep_pending(&mut self, op: Op) -> Ticket {
        self.next_ticket += 1;
        let ticket = Ticket(self.next_ticket);
        self.pending.insert(ticket, op);
        ticket
    }

    /// The entry of `ticket` committed and is applied here; `applied` is read only when it
    /// was the last pending one (INV-3).
    pub fn settled(&mut self, ticket: Ticket, applied: impl FnOnce() -> Catalog) {
        if self.pending.remove(&ticket).is_none() {
            return;
        }
        if self.pending.is_empty() {
            self.speculative = applied();
            self.settled_since_rebase = 0;
            return;
        }
        self.settled_since_rebase += 1;
        if self.settled_since_rebase >= self.pending.len().max(REBASE_MIN) {
            self.rebuild(applied());
        }
    }

    /// The speculative catalog becomes `applied` plus every pending entry (INV-4, INV-5).
    fn rebuild(&mut self, mut rebuilt: Catalog) {
        for op in self.pending.values() {
            apply_op(&mut rebuilt, op);
        }
        self.speculative = rebuilt;
        self.settled_since_rebase = 0;
    }

    /// The entry of `ticket` will never commit (INV-3, INV-4).
    pub fn failed(&mut self, ticket: Ticket, applied: impl FnOnce() -> Catalog) {
        if self.pending.remove(&ticket).is_none() {
            return;
        }
        self.rebuild(applied());
    }

    /// A new epoch: every pending entry is forgotten and the speculative catalog is `applied`.
    pub fn new_epoch(&mut self, applied: Catalog) {
        self.pending.clear();
        self.speculative = applied;
        self.settled_since_rebase = 0;
    }

    /// How many entries are pending.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The speculative catalog.
    pub fn speculative(&self) -> &Catalog {
        &self.speculative
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::catalog::Database;
    use crate::state::replay::apply;

    fn create(name: &str) -> Write {
        Command::CreateDb { name: name.into() }.into()
    }

    fn commit(applied: &mut Catalog, journal_id: u64, planned: &Planned) {
        apply(
            applied,
            zab_net::Zxid(journal_id),
            &planned.journal_entry().unwrap(),
        )
        .unwrap();
    }

    #[test]
    fn a_pending_entry_keeps_its_name_and_id_until_it_settles() {
        let mut applied = Catalog::new();
        let mut p = Planner::new(applied.clone());
        let (t1, a) = p.plan(&create("a")).unwrap();
        // The client of `a` gave up; nothing tells the planner, so `a` stays pending.
        assert_eq!(
            p.plan(&create("a")).unwrap_err(),
            CommandError::DatabaseExists("a".into())
        );
        let (t2, b) = p.plan(&create("b")).unwrap();
        assert_ne!(a.created_id, b.created_id);
        commit(&mut applied, 1, &a);
        commit(&mut applied, 2, &b);
        p.settled(t2, || applied.clone());
        assert_eq!(p.pending(), 1);
        p.settled(t1, || applied.clone());
        assert_eq!(p.pending(), 0);
        assert_eq!(p.speculative(), &applied);
    }

    #[test]
    fn a_failed_entry_is_forgotten_and_the_rest_replanned_on_the_applied_catalog() {
        let applied = Catalog::new();
        let mut p = Planner::new(applied.clone());
        let (t1, _) = p.plan(&create("a")).unwrap();
        let (_t2, b) = p.plan(&create("b")).unwrap();
        p.failed(t1, || applied.clone());
        assert_eq!(p.pending(), 1);
        assert!(p.speculative().database_by_name("a").is_none());
        let kept: &Database = p.speculative().database_by_name("b").unwrap();
        assert_eq!(Some(kept.id), b.created_id);
        let (_t3, a) = p.plan(&create("a")).unwrap();
        assert_ne!(
            a.created_id, b.created_id,
            "ids of pending entries stay taken"
        );
    }

    #[test]
    fn a_new_epoch_forgets_everything_and_old_tickets_change_nothing() {
        let mut applied = Catalog::new();
        let mut p = Planner::new(applied.clone());
        let (t1, a) = p.plan(&create("a")).unwrap();
        commit(&mut applied, 1, &a);
        p.new_epoch(applied.clone());
        let (_t2, _b) = p.plan(&create("b")).unwrap();
        let before = p.speculative().clone();
        p.settled(t1, Catalog::new);
        p.failed(t1, Catalog::new);
        assert_eq!(p.pending(), 1);
        assert_eq!(p.speculative(), &before);
    }

    /// INV-5: with entries always pending (one planned per one settled), the speculative
    /// catalog is rebuilt from the applied one now and then and stays the applied catalog plus
    /// the pending entries; names of pending entries stay taken across a rebuild.
    #[test]
    fn a_steady_stream_rebuilds_the_speculative_catalog_on_the_applied_one() {
        let mut applied = Catalog::new();
        let mut p = Planner::new(applied.clone());
        let mut window = std::collections::VecDeque::new();
        let mut zxid = 0;
        for i in 0..(3 * REBASE_MIN + 17) {
            window.push_back(p.plan(&create(&format!("db{i}"))).unwrap());
            if window.len() > 8 {
                let (t, planned) = window.pop_front().unwrap();
                zxid += 1;
                commit(&mut applied, zxid, &planned);
                p.settled(t, || applied.clone());
            }
        }
        assert_eq!(p.pending(), 8);
        let mut expected = applied.clone();
        for (k, (_, planned)) in (1..).zip(&window) {
            commit(&mut expected, zxid + k, planned);
        }
        assert_eq!(
            p.speculative().databases().collect::<Vec<_>>(),
            expected.databases().collect::<Vec<_>>()
        );
        let last = format!("db{}", 3 * REBASE_MIN + 16);
        assert_eq!(
            p.plan(&create(&last)).unwrap_err(),
            CommandError::DatabaseExists(last)
        );
        while let Some((t, planned)) = window.pop_front() {
            zxid += 1;
            commit(&mut applied, zxid, &planned);
            p.settled(t, || applied.clone());
        }
        assert_eq!(p.speculative(), &applied);
    }
}
