//! Client sessions in the replicated state (Raft dissertation §6.3): per client id, which of
//! its writes were applied and with what outcome, so that a retried write applies at most once
//! and a write the client has given up on is never applied later.
//!
//! A session write carries a [`SessionTag`]: the client's id, the write's sequence number
//! (`seq`, increasing per client) and the client's `floor` — the lowest sequence number it is
//! still waiting for (its oldest write in flight, or `seq` itself when it has nothing else in
//! flight). A write the client stopped waiting for (it timed out, or was answered) is below
//! every later floor, so when it arrives late it is refused as stale.
//!
//! Replay decides, per session write, with [`Sessions::admit`]:
//!
//! | condition                              | decision                     | state change        |
//! |----------------------------------------|------------------------------|---------------------|
//! | `seq < floor` of the client's record   | [`Admission::Stale`]          | none                |
//! | an outcome for `seq` is recorded       | [`Admission::Duplicate`]      | floor, activity     |
//! | otherwise                              | [`Admission::Fresh`]: apply  | outcome (if applied), floor, activity |
//!
//! INV-1 (determinism): the table changes only through replay of committed entries
//! ([`Sessions::record`], [`Sessions::touch`], [`Sessions::expire`]) and image restore; its
//! only clock is the leader-logged TIMESTAMP time, so every replica holds the same table at the
//! same journal id.
//! INV-2 (floor): a record's floor never decreases, and every recorded outcome has
//! `seq >= floor`; an outcome is dropped only when the floor passes it.
//! INV-3 (bounded): a record keeps at most [`OUTCOMES_MAX`] outcomes (when over, the lowest is
//! dropped and the floor raised past it: that write becomes stale, never applied twice). A
//! client whose every write has `seq - floor <` [`SEQ_SPAN_MAX`] (the request codec refuses
//! others) never has a write it still waits for dropped this way: all its later writes lie in
//! `[w, w + SEQ_SPAN_MAX)` for its oldest awaited write `w`, so an outcome is dropped only while
//! one below `w` is kept, and the floor stays at or below `w`. The
//! table keeps at most [`SESSIONS_MAX`] clients (when over, the least recently active one is
//! evicted, ties broken by the lowest client id).
//! INV-4 (index): `by_activity` holds exactly one `(last_active_ms, client_id)` per record
//! ([`Sessions::check`]).
//! INV-5 (in place): a write changes its client's record in place (`Arc::make_mut`) and the
//! activity index only when the activity moved. A record that a published catalog version
//! (or the planner's) still shares is copied once; later writes of the same client before the
//! next publish change that copy without copying again. Copying it on every write (and every
//! outcome map's path with it) was 15% of the servers' CPU under W2.

use std::sync::Arc;
use zab_net::Zxid;

use imbl::{OrdMap, OrdSet};

/// Most outcomes one client's record keeps (its writes in flight at once).
pub const OUTCOMES_MAX: usize = 1024;
/// How far above its floor a write's sequence number may be (`seq - floor <`
/// [`SEQ_SPAN_MAX`]): the outcomes of that many sequence numbers fit in a record, so while a
/// client waits for a write (its floor at most that write's `seq`), the writes it starts after
/// it cannot push that write's outcome out and make it stale (INV-3). The request codec
/// refuses a tag outside this window; the client library waits instead of sending one.
pub const SEQ_SPAN_MAX: u64 = OUTCOMES_MAX as u64;
/// Most clients the table keeps.
pub const SESSIONS_MAX: usize = 65_536;

/// The session fields of one write request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SessionTag {
    /// The client's id (random, chosen by the client).
    pub client_id: u64,
    /// This write's sequence number (increasing per client).
    pub seq: u64,
    /// The lowest sequence number the client still waits for (`floor <= seq`).
    pub floor: u64,
}

impl SessionTag {
    /// Whether the fields are consistent (`floor <= seq`).
    pub fn is_valid(&self) -> bool {
        self.floor <= self.seq
    }

    /// Whether `seq` is within [`SEQ_SPAN_MAX`] of the floor, as a request's tag must be.
    pub fn is_within_window(&self) -> bool {
        self.seq.saturating_sub(self.floor) < SEQ_SPAN_MAX
    }
}

/// The outcome of an applied session write, kept to answer its retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The journal id the write was applied at ([`Zxid::ZERO`] in the leader's speculative
    /// catalog, before it committed).
    pub journal_id: Zxid,
    /// The id it created, if any.
    pub created_id: Option<u64>,
}

/// One client's record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionRecord {
    /// Writes below this sequence number are refused (INV-2).
    pub floor: u64,
    /// The leader-logged time (TIMESTAMP, ms) when the client last wrote.
    pub last_active_ms: u64,
    /// Outcomes of applied writes at or above the floor, by sequence number.
    pub outcomes: OrdMap<u64, Outcome>,
}

impl SessionRecord {
    /// Raises the floor to `floor` (never lowers it) and drops the outcomes it passed, lowest
    /// first: O(log n) each, and each outcome is dropped once (splitting the map instead would
    /// rebuild it on every write).
    fn raise_floor(&mut self, floor: u64) {
        self.floor = self.floor.max(floor);
        while let Some(&(lowest, _)) = self.outcomes.get_min() {
            if lowest >= self.floor {
                break;
            }
            self.outcomes.remove(&lowest);
        }
    }
}

/// What replay does with a session write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Not seen before: apply it.
    Fresh,
    /// Applied before with this outcome: do nothing, answer with it.
    Duplicate(Outcome),
    /// Below the client's floor: refuse, never apply.
    Stale {
        /// The client's floor.
        floor: u64,
    },
}

/// The table of client sessions (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sessions {
    by_client: OrdMap<u64, Arc<SessionRecord>>,
    by_activity: OrdSet<(u64, u64)>,
}

impl Sessions {
    /// The record of `client_id`.
    pub fn get(&self, client_id: u64) -> Option<&SessionRecord> {
        self.by_client.get(&client_id).map(|r| &**r)
    }

    /// Number of clients with a record.
    pub fn len(&self) -> usize {
        self.by_client.len()
    }

    /// Whether no client has a record.
    pub fn is_empty(&self) -> bool {
        self.by_client.is_empty()
    }

    /// All records, by client id.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &SessionRecord)> + '_ {
        self.by_client.iter().map(|(id, r)| (*id, &**r))
    }

    /// What replay does with a write tagged `tag` (table in the module docs).
    pub fn admit(&self, tag: &SessionTag) -> Admission {
        let Some(rec) = self.get(tag.client_id) else {
            return Admission::Fresh;
        };
        if tag.seq < rec.floor {
            return Admission::Stale { floor: rec.floor };
        }
        match rec.outcomes.get(&tag.seq) {
            Some(outcome) => Admission::Duplicate(*outcome),
            None => Admission::Fresh,
        }
    }

    /// After a fresh or duplicate write: raises the client's floor to the tag's and marks it
    /// active at `now_ms` (creating the record, and evicting the least recently active client
    /// when the table is full: INV-3). Changes the record in place (INV-5).
    pub(crate) fn touch(&mut self, tag: &SessionTag, now_ms: u64) {
        let client = tag.client_id;
        let Some(shared) = self.by_client.get_mut(&client) else {
            let mut rec = SessionRecord {
                last_active_ms: now_ms,
                ..SessionRecord::default()
            };
            rec.raise_floor(tag.floor);
            return self.insert_new(client, rec);
        };
        let rec = Arc::make_mut(shared);
        let before = rec.last_active_ms;
        rec.last_active_ms = before.max(now_ms);
        rec.raise_floor(tag.floor);
        if rec.last_active_ms != before {
            self.by_activity.remove(&(before, client));
            self.by_activity.insert((rec.last_active_ms, client));
        }
    }

    /// Records the outcome of a fresh write that was applied (call [`Sessions::touch`] first).
    /// Changes the record in place (INV-5).
    pub(crate) fn record(&mut self, tag: &SessionTag, outcome: Outcome) {
        let Some(shared) = self.by_client.get_mut(&tag.client_id) else {
            return;
        };
        if tag.seq < shared.floor {
            return;
        }
        let rec = Arc::make_mut(shared);
        rec.outcomes.insert(tag.seq, outcome);
        while rec.outcomes.len() > OUTCOMES_MAX {
            let Some(&(lowest, _)) = rec.outcomes.get_min() else {
                break;
            };
            rec.outcomes.remove(&lowest);
            rec.floor = rec.floor.max(lowest.saturating_add(1));
        }
    }

    /// Drops every client idle since before `now_ms - expiry_ms` (by leader-logged time);
    /// `expiry_ms == 0` keeps every session. Returns how many were dropped.
    pub(crate) fn expire(&mut self, now_ms: u64, expiry_ms: u64) -> usize {
        if expiry_ms == 0 {
            return 0;
        }
        let cutoff = now_ms.saturating_sub(expiry_ms);
        let mut dropped = 0;
        while let Some(&(active, client)) = self.by_activity.get_min() {
            if active >= cutoff {
                break;
            }
            self.by_activity.remove(&(active, client));
            self.by_client.remove(&client);
            dropped += 1;
        }
        dropped
    }

    /// Adds a record read from an image; refuses a second record for one client or a record
    /// that breaks INV-2/INV-3.
    pub(crate) fn restore(&mut self, client_id: u64, rec: SessionRecord) -> Result<(), String> {
        if self.by_client.contains_key(&client_id) {
            return Err(format!("client {client_id:#x} appears twice"));
        }
        if rec.outcomes.len() > OUTCOMES_MAX {
            return Err(format!(
                "client {client_id:#x} has {} outcomes, over {OUTCOMES_MAX}",
                rec.outcomes.len()
            ));
        }
        if rec.outcomes.keys().next().is_some_and(|s| *s < rec.floor) {
            return Err(format!(
                "client {client_id:#x} has an outcome below its floor"
            ));
        }
        if self.by_client.len() >= SESSIONS_MAX {
            return Err(format!("more than {SESSIONS_MAX} sessions"));
        }
        self.insert_new(client_id, rec);
        Ok(())
    }

    /// Checks INV-2..4; returns the first violation found.
    pub fn check(&self) -> Result<(), String> {
        if self.by_activity.len() != self.by_client.len() || self.by_client.len() > SESSIONS_MAX {
            return Err("session indexes differ in size or exceed the limit".into());
        }
        for (client, rec) in self.iter() {
            if !self.by_activity.contains(&(rec.last_active_ms, client)) {
                return Err(format!(
                    "session {client:#x} missing from the activity index"
                ));
            }
            if rec.outcomes.len() > OUTCOMES_MAX
                || rec.outcomes.keys().next().is_some_and(|s| *s < rec.floor)
            {
                return Err(format!("session {client:#x} breaks its outcome bounds"));
            }
        }
        Ok(())
    }

    /// Adds `rec` for `client_id`, which has no record yet, evicting the least recently active
    /// client first if the table is full (INV-3).
    fn insert_new(&mut self, client_id: u64, rec: SessionRecord) {
        while self.by_client.len() >= SESSIONS_MAX {
            let Some((_, victim)) = self.by_activity.remove_min() else {
                break;
            };
            self.by_client.remove(&victim);
        }
        self.by_activity.insert((rec.last_active_ms, client_id));
        self.by_client.insert(client_id, Arc::new(rec));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(client_id: u64, seq: u64, floor: u64) -> SessionTag {
        SessionTag {
            client_id,
            seq,
            floor,
        }
    }

    fn apply(s: &mut Sessions, t: SessionTag, journal_id: u64, now_ms: u64) -> Admission {
        let a = s.admit(&t);
        if !matches!(a, Admission::Stale { .. }) {
            s.touch(&t, now_ms);
        }
        if a == Admission::Fresh {
            let outcome = Outcome {
                journal_id: Zxid(journal_id),
                created_id: None,
            };
            s.record(&t, outcome);
        }
        s.check().unwrap();
        a
    }

    #[test]
    fn retries_are_duplicates_and_writes_below_the_floor_are_stale() {
        let mut s = Sessions::default();
        assert_eq!(apply(&mut s, tag(7, 1, 1), 100, 5), Admission::Fresh);
        let first = Outcome {
            journal_id: Zxid(100),
            created_id: None,
        };
        assert_eq!(
            apply(&mut s, tag(7, 1, 1), 101, 5),
            Admission::Duplicate(first)
        );
        // Pipelined: 3 arrives before 2, both in flight (floor 2).
        assert_eq!(apply(&mut s, tag(7, 3, 2), 102, 6), Admission::Fresh);
        assert_eq!(apply(&mut s, tag(7, 2, 2), 103, 6), Admission::Fresh);
        // The client gave up on 4 and wrote 5 with nothing else in flight.
        assert_eq!(apply(&mut s, tag(7, 5, 5), 104, 7), Admission::Fresh);
        assert_eq!(
            apply(&mut s, tag(7, 4, 4), 105, 8),
            Admission::Stale { floor: 5 }
        );
        let rec = s.get(7).unwrap();
        assert_eq!(rec.floor, 5);
        assert_eq!(rec.outcomes.keys().copied().collect::<Vec<_>>(), [5]);
        assert_eq!(rec.last_active_ms, 7, "a stale write changes nothing");
        assert_eq!(apply(&mut s, tag(8, 4, 1), 106, 8), Admission::Fresh);
    }

    #[test]
    fn outcomes_and_clients_are_bounded_and_expire_by_logged_time() {
        let mut s = Sessions::default();
        for seq in 1..=(OUTCOMES_MAX as u64 + 2) {
            apply(&mut s, tag(1, seq, 1), seq, 0);
        }
        let rec = s.get(1).unwrap();
        assert_eq!(rec.outcomes.len(), OUTCOMES_MAX);
        assert_eq!(rec.floor, 3, "the two dropped outcomes are now stale");
        assert_eq!(
            apply(&mut s, tag(1, 2, 2), 9, 0),
            Admission::Stale { floor: 3 }
        );

        apply(&mut s, tag(2, 1, 1), 1, 1_000);
        apply(&mut s, tag(3, 1, 1), 1, 5_000);
        assert_eq!(s.expire(6_000, 0), 0, "expiry 0 keeps everything");
        assert_eq!(
            s.expire(6_000, 2_000),
            2,
            "clients 1 (at 0) and 2 (at 1000)"
        );
        assert!(s.get(3).is_some() && s.get(2).is_none());
        s.check().unwrap();
    }

    #[test]
    fn the_activity_index_keeps_one_entry_per_client_at_its_latest_activity() {
        let mut s = Sessions::default();
        for (client, seq, now_ms) in [(7, 1, 100), (7, 2, 100), (8, 1, 150), (7, 3, 200)] {
            assert_eq!(
                apply(&mut s, tag(client, seq, 0), seq, now_ms),
                Admission::Fresh
            );
        }
        apply(&mut s, tag(7, 4, 0), 4, 180);
        let index: Vec<_> = s.by_activity.iter().copied().collect();
        assert_eq!(index, vec![(150, 8), (200, 7)]);
        assert_eq!(s.expire(1_151, 1_000), 1, "client 8, idle since 150");
        assert_eq!(s.get(7).map(|r| r.last_active_ms), Some(200));
        assert_eq!(s.check(), Ok(()));
    }

    #[test]
    fn a_write_in_place_leaves_a_copy_of_the_table_as_it_was() {
        let mut s = Sessions::default();
        apply(&mut s, tag(7, 1, 0), 1, 100);
        let published = s.clone();
        apply(&mut s, tag(7, 2, 0), 2, 200);
        apply(&mut s, tag(7, 3, 0), 3, 200);
        apply(&mut s, tag(7, 4, 4), 4, 300);
        let before = published.get(7).unwrap();
        assert_eq!((before.floor, before.last_active_ms), (0, 100));
        assert_eq!(before.outcomes.keys().copied().collect::<Vec<_>>(), vec![1]);
        assert_eq!(published.admit(&tag(7, 2, 0)), Admission::Fresh);
        let after = s.get(7).unwrap();
        assert_eq!((after.floor, after.last_active_ms), (4, 300));
        assert_eq!(after.outcomes.keys().copied().collect::<Vec<_>>(), vec![4]);
        assert_eq!(published.check(), Ok(()));
    }

    #[test]
    fn a_full_table_evicts_the_least_recently_active_client() {
        let mut s = Sessions::default();
        for c in 0..SESSIONS_MAX as u64 {
            s.touch(&tag(c, 1, 1), 10 + c % 3);
        }
        s.touch(&tag(u64::MAX, 1, 1), 50);
        assert_eq!(s.len(), SESSIONS_MAX);
        assert!(
            s.get(0).is_none(),
            "client 0 was idle longest (time 10, lowest id)"
        );
        assert!(s.get(3).is_some() && s.get(u64::MAX).is_some());
        s.check().unwrap();
    }
}
