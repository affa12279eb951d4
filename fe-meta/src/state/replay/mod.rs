//! Replay: applying committed journal entries to the catalog.
//!
//! INV-1 (purity): [`apply`] is a function of (catalog, journal id, entry) only. It reads no
//! clock, no RNG, no file, no config; every replica that applies the same entries in the same
//! order holds an equal catalog (and the same digest, `image::digest`).
//! INV-2 (nothing skipped): an entry with an unknown op code or a payload that does not decode
//! stops replay with a [`ReplayError`] naming the journal id and the op; the catalog is left as
//! it was before that entry (decode happens before any change).
//! INV-3 (never rejects a valid entry): validation happens on the leader before an entry is
//! logged (`command`). An entry that decodes but conflicts with the catalog (a name taken, a
//! missing id: possible only through a bug or a hand-edited log) is applied as a deterministic
//! no-op, logged at WARN, and reported as [`Change::Ignored`] — the same on every replica.
//! INV-4 (order): journal ids applied to one catalog strictly increase; an entry at or below the
//! catalog's journal id is refused with [`ReplayError::OutOfOrder`] and changes nothing.
//! Committed txns that are not journal entries (the cluster's configuration changes) are passed
//! over with [`pass_over`]: the catalog is unchanged but its journal id advances to theirs, so
//! waits on an applied journal id never hang on them; the same order rule holds.
//! INV-5 (ids): an entry that creates an entity raises the id allocator past the entity's id,
//! even when ignored, so ids are never reused.
//! INV-6 (outcome): [`apply_entry`] reports what replay did with the entry as an [`Outcome`]:
//! applied, or ignored with a typed [`Conflict`] — `AlreadyExists` when what it creates (or
//! the address it moves to) is taken, `NotFound` when what it names is missing. The class is
//! decided from the entry and the catalog alone, so it is the same on every replica; the
//! server answers the write's client with it (`server::write` INV-4).
//!
//! Rules per op (the entity must otherwise satisfy `catalog` INV-1..3):
//!
//! | op                  | applied when                                  | otherwise        |
//! |---------------------|-----------------------------------------------|------------------|
//! | SAVE_NEXTID         | always: next_id = max(next_id, value)         |                  |
//! | CREATE_DB           | id and name free (or the same db already)     | ignored          |
//! | DROP_DB             | db exists; its tables go with it              | ignored          |
//! | RENAME_DB           | db exists, new name free (or already its own); its tables stay with it | ignored |
//! | CREATE_TABLE        | db exists, id and name free (or same table)   | ignored          |
//! | DROP_TABLE          | table exists in that db                       | ignored          |
//! | ADD_BACKEND         | id and host:port free (or same backend)       | ignored          |
//! | MODIFY_BACKEND      | id exists, new host:port free or its own      | ignored          |
//! | DROP_BACKEND        | id exists                                     | ignored          |
//! | ADD_FRONTEND        | always (insert or replace by sid)             |                  |
//! | DROP_FRONTEND       | sid exists                                    | ignored          |
//! | SET_GLOBAL_VARIABLE | always                                        |                  |
//! | TIMESTAMP           | always: last_timestamp_ms = value; sessions idle for over its expiry expire | |
//! | SESSION_WRITE       | the session table admits it (fresh) and the inner op applies; the outcome is recorded | stale or duplicate: ignored (`catalog::sessions`) |

use thiserror::Error;
use tracing::warn;
use zab_net::Zxid;

use crate::state::catalog::{
    Admission, Catalog, Change, Outcome as SessionOutcome, SessionTag, SharedCatalog,
};
use crate::state::journal::{JournalEntry, JournalError, Op, OpCode};

/// Why replay stopped.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ReplayError {
    /// The entry does not decode (unknown op, bad payload).
    #[error("replay stopped at journal id {} ({op}): {source}", journal_id.0)]
    Undecodable {
        /// The entry's journal id.
        journal_id: Zxid,
        /// Its op code.
        op: OpCode,
        /// What is wrong.
        source: JournalError,
    },
    /// The entry is not after the catalog's last applied entry.
    #[error(
        "replay refused journal id {} ({op}): the catalog already applied up to {}; journal \
         ids must increase",
        journal_id.0,
        applied.0
    )]
    OutOfOrder {
        /// The entry's journal id.
        journal_id: Zxid,
        /// Its op code.
        op: OpCode,
        /// The catalog's journal id.
        applied: Zxid,
    },
    /// A configuration txn passed over ([`pass_over`]) is not after the catalog's last
    /// applied entry.
    #[error(
        "replay refused the configuration txn {}: the catalog already applied up to {}; \
         journal ids must increase",
        journal_id.0,
        applied.0
    )]
    ConfigurationOutOfOrder {
        /// The txn's journal id.
        journal_id: Zxid,
        /// The catalog's journal id.
        applied: Zxid,
    },
}

impl ReplayError {
    /// The journal id replay stopped at.
    pub fn journal_id(&self) -> Zxid {
        match self {
            ReplayError::Undecodable { journal_id, .. }
            | ReplayError::OutOfOrder { journal_id, .. }
            | ReplayError::ConfigurationOutOfOrder { journal_id, .. } => *journal_id,
        }
    }
}

/// Why replay ignored an entry, as a client is told (INV-6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConflictKind {
    /// What the entry creates (a name, an id, an address) is already taken.
    AlreadyExists,
    /// What the entry names (a database, table, backend, frontend) does not exist.
    NotFound,
    /// The client's session refused it: a write below the client's floor, or a retry of one
    /// already applied (the session table tells which, and holds the first outcome).
    Session,
}

/// An entry that replay ignored: its class and the catalog's reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The class (INV-6).
    pub kind: ConflictKind,
    /// The catalog's reason, e.g. "database name already used".
    pub why: &'static str,
}

/// What replay did with one entry (INV-6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The catalog changed (or already held exactly this).
    Applied,
    /// The entry conflicted with the catalog and changed nothing but the id allocator.
    Ignored(Conflict),
}

impl Outcome {
    /// The catalog-level [`Change`] this outcome stands for.
    pub fn change(self) -> Change {
        match self {
            Outcome::Applied => Change::Applied,
            Outcome::Ignored(c) => Change::Ignored(c.why),
        }
    }
}

/// Applies the committed entry `entry` with id `journal_id` to `state` (see the module docs).
pub fn apply(
    state: &mut Catalog,
    journal_id: Zxid,
    entry: &JournalEntry,
) -> Result<Change, ReplayError> {
    apply_entry(state, journal_id, entry).map(Outcome::change)
}

/// Passes over the committed txn `journal_id` that is not a journal entry (a configuration
/// change of the cluster): only the catalog's journal id changes, to `journal_id` (INV-4).
pub fn pass_over(state: &mut Catalog, journal_id: Zxid) -> Result<(), ReplayError> {
    if journal_id <= state.journal_id() {
        return Err(ReplayError::ConfigurationOutOfOrder {
            journal_id,
            applied: state.journal_id(),
        });
    }
    state.set_journal_id(journal_id);
    Ok(())
}

/// [`apply`], reporting the typed [`Outcome`] (INV-6).
pub fn apply_entry(
    state: &mut Catalog,
    journal_id: Zxid,
    entry: &JournalEntry,
) -> Result<Outcome, ReplayError> {
    if journal_id <= state.journal_id() {
        return Err(ReplayError::OutOfOrder {
            journal_id,
            op: entry.op,
            applied: state.journal_id(),
        });
    }
    let op = Op::from_entry(entry).map_err(|source| ReplayError::Undecodable {
        journal_id,
        op: entry.op,
        source,
    })?;
    let outcome = match apply_op_at(state, journal_id, &op) {
        Change::Applied => Outcome::Applied,
        Change::Ignored(why) => {
            warn!(journal_id = journal_id.0, op = %entry.op, why, "journal entry conflicts with the catalog; ignored");
            Outcome::Ignored(Conflict {
                kind: conflict_kind(state, &op),
                why,
            })
        }
    };
    state.set_journal_id(journal_id);
    Ok(outcome)
}

/// The class of a conflict of `op`, read from the catalog it was ignored by (an ignored op
/// changed nothing it looks at). Creates conflict on something taken; drops on something
/// missing; a table's database and a modified backend can be missing too.
fn conflict_kind(state: &Catalog, op: &Op) -> ConflictKind {
    match op {
        Op::SessionWrite { tag, .. } if state.sessions().admit(tag) != Admission::Fresh => {
            ConflictKind::Session
        }
        Op::SessionWrite { inner, .. } => conflict_kind(state, inner),
        Op::CreateTable(t) if state.database(t.db_id).is_none() => ConflictKind::NotFound,
        Op::ModifyBackend(be) if state.backend(be.id).is_none() => ConflictKind::NotFound,
        Op::RenameDb { db_id, .. } if state.database(*db_id).is_none() => ConflictKind::NotFound,
        Op::CreateDb(_)
        | Op::CreateTable(_)
        | Op::AddBackend(_)
        | Op::ModifyBackend(_)
        | Op::RenameDb { .. }
        | Op::AddFrontend(_) => ConflictKind::AlreadyExists,
        Op::DropDb { .. }
        | Op::DropTable { .. }
        | Op::DropBackend { .. }
        | Op::DropFrontend { .. }
        | Op::SaveNextId { .. }
        | Op::SetGlobalVariable { .. }
        | Op::Timestamp { .. } => ConflictKind::NotFound,
    }
}

/// Applies a decoded op without journal-id bookkeeping: the leader's `command::Planner` keeps
/// its speculative catalog ahead of the replayed one with it (session outcomes recorded there
/// carry journal id [`Zxid::ZERO`]: not committed yet).
pub fn apply_op(state: &mut Catalog, op: &Op) -> Change {
    apply_op_at(state, Zxid::ZERO, op)
}

/// Applies a decoded op that is (or will be, for [`Zxid::ZERO`]) journal entry `journal_id`.
fn apply_op_at(state: &mut Catalog, journal_id: Zxid, op: &Op) -> Change {
    match op {
        Op::SaveNextId { next_id } => {
            state.raise_next_id(*next_id);
            Change::Applied
        }
        Op::CreateDb(db) => state.create_db(db.clone()),
        Op::DropDb { db_id } => state.drop_db(*db_id),
        Op::RenameDb { db_id, new_name } => state.rename_db(*db_id, new_name),
        Op::CreateTable(t) => state.create_table(t.clone()),
        Op::DropTable { db_id, table_id } => state.drop_table(*db_id, *table_id),
        Op::AddBackend(be) => state.add_backend(be.clone()),
        Op::ModifyBackend(be) => state.modify_backend(be.clone()),
        Op::DropBackend { backend_id } => state.drop_backend(*backend_id),
        Op::AddFrontend(fe) => state.put_frontend(fe.clone()),
        Op::DropFrontend { sid } => state.drop_frontend(*sid),
        Op::SetGlobalVariable { name, value } => state.set_var(name, value),
        Op::Timestamp {
            wall_ms,
            session_expiry_ms,
        } => {
            state.set_last_timestamp_ms(*wall_ms);
            state.sessions_mut().expire(*wall_ms, *session_expiry_ms);
            Change::Applied
        }
        Op::SessionWrite { tag, inner } => apply_session_write(state, journal_id, tag, inner),
    }
}

/// A client write with its session tag: applied only if the session table admits it as fresh
/// (`catalog::sessions`); the clock is the leader-logged TIMESTAMP time (INV-1).
fn apply_session_write(
    state: &mut Catalog,
    journal_id: Zxid,
    tag: &SessionTag,
    inner: &Op,
) -> Change {
    let now_ms = state.last_timestamp_ms();
    match state.sessions().admit(tag) {
        Admission::Stale { .. } => {
            Change::Ignored("stale client request (below the client's floor)")
        }
        Admission::Duplicate(_) => {
            state.sessions_mut().touch(tag, now_ms);
            Change::Ignored("duplicate client request (applied before)")
        }
        Admission::Fresh => {
            state.sessions_mut().touch(tag, now_ms);
            let change = apply_op_at(state, journal_id, inner);
            if change == Change::Applied {
                let outcome = SessionOutcome {
                    journal_id,
                    created_id: created_id_of(inner),
                };
                state.sessions_mut().record(tag, outcome);
            }
            change
        }
    }
}

/// The id an op creates, if any (what a `Written` answer reports).
pub fn created_id_of(op: &Op) -> Option<u64> {
    match op {
        Op::CreateDb(db) => Some(db.id),
        Op::CreateTable(t) => Some(t.id),
        Op::AddBackend(be) => Some(be.id),
        Op::SessionWrite { inner, .. } => created_id_of(inner),
        _ => None,
    }
}

/// Applies a batch of committed entries to the published catalog: one copy, one publish (the
/// replayer's loop). On error the entries before the failing one are published and the error
/// is returned; the failing entry and those after it are not applied.
pub fn apply_batch<I>(shared: &SharedCatalog, entries: I) -> Result<Zxid, ReplayError>
where
    I: IntoIterator<Item = (Zxid, JournalEntry)>,
{
    let mut next = Catalog::clone(&shared.load());
    let mut result = Ok(());
    for (journal_id, entry) in entries {
        if let Err(e) = apply(&mut next, journal_id, &entry) {
            result = Err(e);
            break;
        }
    }
    let applied = next.journal_id();
    shared.publish(next);
    result.map(|()| applied)
}

#[cfg(test)]
mod tests;
