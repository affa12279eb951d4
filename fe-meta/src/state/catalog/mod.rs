//! The catalog: one immutable version of all metadata.
//!
//! A [`Catalog`] is a value built from persistent (structurally shared) ordered maps (`imbl`):
//! cloning it is O(1) and a change is O(log n) and copies only the touched path, so a writer
//! clones the published version, changes the clone and publishes it ([`SharedCatalog`]); a reader
//! holds its version for as long as it likes, a snapshot is a pointer copy, and nothing blocks.
//! Map values are `Arc`s so copied tree nodes share the entities themselves.
//!
//! Memory (a catalog of millions of entries must stay small): the name and address indexes
//! hold the entity's own `Arc`, ordered by the indexed field (`index`), so each name is stored
//! once; a table's columns are one compact buffer ([`Columns`]). The per-entry cost is guarded
//! by the `catalog_memory` test.
//!
//! INV-1 (indexes): `db_names`, `db_tables` and `backend_addrs` are exact inverses of the
//! entity maps: every database name maps to its id, every table is listed under its database by
//! name, every backend address maps to its id, and nothing else is listed ([`Catalog::check`]).
//! INV-2 (ownership): every table's database exists.
//! INV-3 (ids): every id in the catalog is below `next_id`; ids are never reused.
//! INV-4: the catalog changes only through `replay::apply` (and image restore, which rebuilds the
//! same state), so every replica that applied the same journal holds an equal catalog.
//! INV-5: the client sessions ([`Sessions`]) are part of the replicated state: they change only
//! through replay, and count in equality and in the image, not in [`Catalog::entry_count`].

mod codec;
mod columns;
mod index;
mod sessions;
mod shared;
mod types;

use std::sync::Arc;
use zab_net::Zxid;

use imbl::OrdMap;

use index::{Addr, ByAddr, ByName};

pub use codec::Codec;
pub use columns::{Columns, ColumnsIter};
pub use sessions::{
    Admission, Outcome, SessionRecord, SessionTag, Sessions, OUTCOMES_MAX, SEQ_SPAN_MAX,
    SESSIONS_MAX,
};
pub use shared::SharedCatalog;
pub use types::{
    Backend, BackendState, Column, ColumnType, ColumnTypeError, Database, Frontend, FrontendRole,
    Table, COLUMNS_MAX, HOST_LEN_MAX, NAME_LEN_MAX, VALUE_LEN_MAX,
};

/// The first id the allocator hands out (ids below are reserved, as in Doris).
pub const FIRST_ID: u64 = 10_000;

/// The result of one change: applied, or left alone for the reason given (deterministic on
/// every replica; see `replay`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// The catalog changed (or already held exactly this).
    Applied,
    /// The change conflicts with the catalog and was not made.
    Ignored(&'static str),
}

/// One immutable version of the metadata (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Catalog {
    journal_id: Zxid,
    next_id: u64,
    last_timestamp_ms: u64,
    dbs: OrdMap<u64, Arc<Database>>,
    db_names: OrdMap<Arc<str>, u64>,
    tables: OrdMap<u64, Arc<Table>>,
    db_tables: OrdMap<u64, OrdMap<ByName, ()>>,
    backends: OrdMap<u64, Arc<Backend>>,
    backend_addrs: OrdMap<ByAddr, ()>,
    frontends: OrdMap<u64, Arc<Frontend>>,
    vars: OrdMap<Arc<str>, Arc<str>>,
    sessions: Sessions,
}

impl Default for Catalog {
    fn default() -> Catalog {
        Catalog::new()
    }
}

impl Catalog {
    /// An empty catalog: journal id 0, next id [`FIRST_ID`].
    pub fn new() -> Catalog {
        Catalog {
            journal_id: Zxid::ZERO,
            next_id: FIRST_ID,
            last_timestamp_ms: 0,
            dbs: OrdMap::new(),
            db_names: OrdMap::new(),
            tables: OrdMap::new(),
            db_tables: OrdMap::new(),
            backends: OrdMap::new(),
            backend_addrs: OrdMap::new(),
            frontends: OrdMap::new(),
            vars: OrdMap::new(),
            sessions: Sessions::default(),
        }
    }

    /// The id (zxid) of the last journal entry applied ([`Zxid::ZERO`] before any).
    pub fn journal_id(&self) -> Zxid {
        self.journal_id
    }

    /// The next id the allocator hands out.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// The leader's wall clock (ms since the Unix epoch) in the last TIMESTAMP entry applied.
    pub fn last_timestamp_ms(&self) -> u64 {
        self.last_timestamp_ms
    }

    /// The database with id `id`.
    pub fn database(&self, id: u64) -> Option<&Database> {
        self.dbs.get(&id).map(|d| &**d)
    }

    /// The database named `name`.
    pub fn database_by_name(&self, name: &str) -> Option<&Database> {
        self.db_names.get(name).and_then(|id| self.database(*id))
    }

    /// All databases, by id.
    pub fn databases(&self) -> impl Iterator<Item = &Database> + '_ {
        self.dbs.values().map(|d| &**d)
    }

    /// The table with id `id`.
    pub fn table(&self, id: u64) -> Option<&Table> {
        self.tables.get(&id).map(|t| &**t)
    }

    /// The table named `name` in database `db_id`.
    pub fn table_by_name(&self, db_id: u64, name: &str) -> Option<&Table> {
        let (t, ()) = self.db_tables.get(&db_id)?.get_key_value(name)?;
        Some(&t.0)
    }

    /// The tables of database `db_id`, by name.
    pub fn tables_of(&self, db_id: u64) -> impl Iterator<Item = &Table> + '_ {
        self.db_tables
            .get(&db_id)
            .into_iter()
            .flat_map(|names| names.keys())
            .map(|t| &*t.0)
    }

    /// All tables, by id.
    pub fn tables(&self) -> impl Iterator<Item = &Table> + '_ {
        self.tables.values().map(|t| &**t)
    }

    /// The backend with id `id`.
    pub fn backend(&self, id: u64) -> Option<&Backend> {
        self.backends.get(&id).map(|b| &**b)
    }

    /// The backend at `host:port`.
    pub fn backend_by_addr(&self, host: &str, port: u16) -> Option<&Backend> {
        let (b, ()) = self.backend_addrs.get_key_value(&Addr(host, port))?;
        Some(&b.0)
    }

    /// All backends, by id.
    pub fn backends(&self) -> impl Iterator<Item = &Backend> + '_ {
        self.backends.values().map(|b| &**b)
    }

    /// The frontend with server id `sid`.
    pub fn frontend(&self, sid: u64) -> Option<&Frontend> {
        self.frontends.get(&sid).map(|f| &**f)
    }

    /// All frontends, by sid.
    pub fn frontends(&self) -> impl Iterator<Item = &Frontend> + '_ {
        self.frontends.values().map(|f| &**f)
    }

    /// The global variable `name`.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(|v| &**v)
    }

    /// All global variables, by name.
    pub fn vars(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.vars.iter().map(|(k, v)| (&**k, &**v))
    }

    /// The client sessions (INV-5).
    pub fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// Number of databases, tables, backends, frontends and variables, in that order (O(1)).
    pub fn counts(&self) -> [usize; 5] {
        [
            self.dbs.len(),
            self.tables.len(),
            self.backends.len(),
            self.frontends.len(),
            self.vars.len(),
        ]
    }

    /// Entities held: databases + tables + backends + frontends + variables (ZooKeeper's
    /// "Node count").
    pub fn entry_count(&self) -> u64 {
        (self.dbs.len()
            + self.tables.len()
            + self.backends.len()
            + self.frontends.len()
            + self.vars.len()) as u64
    }

    /// Checks INV-1..3 and the sessions' invariants; returns the first violation found.
    pub fn check(&self) -> Result<(), String> {
        self.sessions.check()?;
        if self.db_names.len() != self.dbs.len() {
            return Err("db_names and dbs differ in size".into());
        }
        for db in self.databases() {
            if self.db_names.get(db.name.as_str()) != Some(&db.id) {
                return Err(format!("database {} missing from db_names", db.id));
            }
        }
        let indexed: usize = self.db_tables.values().map(|m| m.len()).sum();
        if indexed != self.tables.len() {
            return Err("db_tables and tables differ in size".into());
        }
        for t in self.tables() {
            if !self.dbs.contains_key(&t.db_id) {
                return Err(format!(
                    "table {} belongs to missing database {}",
                    t.id, t.db_id
                ));
            }
            if self.table_by_name(t.db_id, &t.name) != Some(t) {
                return Err(format!("table {} missing from db_tables", t.id));
            }
        }
        if self.backend_addrs.len() != self.backends.len() {
            return Err("backend_addrs and backends differ in size".into());
        }
        for b in self.backends() {
            if self.backend_by_addr(&b.host, b.heartbeat_port) != Some(b) {
                return Err(format!("backend {} missing from backend_addrs", b.id));
            }
        }
        let max_id = [
            self.dbs.keys().next_back(),
            self.tables.keys().next_back(),
            self.backends.keys().next_back(),
        ]
        .into_iter()
        .flatten()
        .max();
        match max_id {
            Some(&id) if id >= self.next_id => {
                Err(format!("id {id} is not below next_id {}", self.next_id))
            }
            _ => Ok(()),
        }
    }

    // ---- changes (used by replay and image restore only: INV-4) ----

    pub(crate) fn set_journal_id(&mut self, id: Zxid) {
        self.journal_id = id;
    }

    pub(crate) fn set_last_timestamp_ms(&mut self, ms: u64) {
        self.last_timestamp_ms = ms;
    }

    pub(crate) fn sessions_mut(&mut self) -> &mut Sessions {
        &mut self.sessions
    }

    /// Raises `next_id` to at least `next` (INV-3: never lowers it).
    pub(crate) fn raise_next_id(&mut self, next: u64) {
        self.next_id = self.next_id.max(next);
    }

    /// Raises `next_id` past `id`.
    fn saw_id(&mut self, id: u64) {
        self.raise_next_id(id.saturating_add(1));
    }

    pub(crate) fn create_db(&mut self, db: Database) -> Change {
        self.saw_id(db.id);
        if let Some(old) = self.dbs.get(&db.id) {
            return if **old == db {
                Change::Applied
            } else {
                Change::Ignored("database id already used")
            };
        }
        if self.db_names.contains_key(db.name.as_str()) {
            return Change::Ignored("database name already used");
        }
        self.db_names.insert(Arc::from(db.name.as_str()), db.id);
        self.dbs.insert(db.id, Arc::new(db));
        Change::Applied
    }

    /// Renames database `id` to `new_name` (its tables stay with it: they name it by id).
    pub(crate) fn rename_db(&mut self, id: u64, new_name: &str) -> Change {
        let Some(db) = self.dbs.get(&id) else {
            return Change::Ignored("no such database");
        };
        if db.name == new_name {
            return Change::Applied;
        }
        if self.db_names.contains_key(new_name) {
            return Change::Ignored("database name already used");
        }
        let renamed = Database {
            id,
            name: new_name.to_owned(),
        };
        self.db_names.remove(db.name.as_str());
        self.db_names.insert(Arc::from(new_name), id);
        self.dbs.insert(id, Arc::new(renamed));
        Change::Applied
    }

    pub(crate) fn drop_db(&mut self, id: u64) -> Change {
        let Some(db) = self.dbs.remove(&id) else {
            return Change::Ignored("no such database");
        };
        self.db_names.remove(db.name.as_str());
        if let Some(names) = self.db_tables.remove(&id) {
            for t in names.keys() {
                self.tables.remove(&t.0.id);
            }
        }
        Change::Applied
    }

    pub(crate) fn create_table(&mut self, table: Table) -> Change {
        self.saw_id(table.id);
        if let Some(old) = self.tables.get(&table.id) {
            return if **old == table {
                Change::Applied
            } else {
                Change::Ignored("table id already used")
            };
        }
        if !self.dbs.contains_key(&table.db_id) {
            return Change::Ignored("no such database");
        }
        let names = self.db_tables.entry(table.db_id).or_default();
        if names.contains_key(table.name.as_str()) {
            return Change::Ignored("table name already used in its database");
        }
        let table = Arc::new(table);
        names.insert(ByName(Arc::clone(&table)), ());
        self.tables.insert(table.id, table);
        Change::Applied
    }

    pub(crate) fn drop_table(&mut self, db_id: u64, table_id: u64) -> Change {
        match self.tables.get(&table_id) {
            Some(t) if t.db_id == db_id => {}
            Some(_) => return Change::Ignored("table belongs to another database"),
            None => return Change::Ignored("no such table"),
        }
        if let Some(t) = self.tables.remove(&table_id) {
            if let Some(names) = self.db_tables.get_mut(&db_id) {
                names.remove(t.name.as_str());
                if names.is_empty() {
                    self.db_tables.remove(&db_id);
                }
            }
        }
        Change::Applied
    }

    pub(crate) fn add_backend(&mut self, be: Backend) -> Change {
        self.saw_id(be.id);
        if let Some(old) = self.backends.get(&be.id) {
            return if **old == be {
                Change::Applied
            } else {
                Change::Ignored("backend id already used")
            };
        }
        if self
            .backend_addrs
            .contains_key(&Addr(&be.host, be.heartbeat_port))
        {
            return Change::Ignored("backend address already used");
        }
        let be = Arc::new(be);
        self.backend_addrs.insert(ByAddr(Arc::clone(&be)), ());
        self.backends.insert(be.id, be);
        Change::Applied
    }

    pub(crate) fn modify_backend(&mut self, be: Backend) -> Change {
        let Some(old) = self.backends.get(&be.id).cloned() else {
            return Change::Ignored("no such backend");
        };
        match self
            .backend_addrs
            .get_key_value(&Addr(&be.host, be.heartbeat_port))
        {
            Some((owner, ())) if owner.0.id != be.id => {
                return Change::Ignored("backend address already used")
            }
            _ => {}
        }
        self.backend_addrs
            .remove(&Addr(&old.host, old.heartbeat_port));
        let be = Arc::new(be);
        self.backend_addrs.insert(ByAddr(Arc::clone(&be)), ());
        self.backends.insert(be.id, be);
        Change::Applied
    }

    pub(crate) fn drop_backend(&mut self, id: u64) -> Change {
        let Some(be) = self.backends.remove(&id) else {
            return Change::Ignored("no such backend");
        };
        self.backend_addrs
            .remove(&Addr(&be.host, be.heartbeat_port));
        Change::Applied
    }

    pub(crate) fn put_frontend(&mut self, fe: Frontend) -> Change {
        self.frontends.insert(fe.sid, Arc::new(fe));
        Change::Applied
    }

    pub(crate) fn drop_frontend(&mut self, sid: u64) -> Change {
        match self.frontends.remove(&sid) {
            Some(_) => Change::Applied,
            None => Change::Ignored("no such frontend"),
        }
    }

    pub(crate) fn set_var(&mut self, name: &str, value: &str) -> Change {
        self.vars.insert(Arc::from(name), Arc::from(value));
        Change::Applied
    }
}
