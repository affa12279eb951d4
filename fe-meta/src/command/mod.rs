//! The leader's write path before logging: typed commands, validated against a catalog version,
//! turned into the journal entry to submit.
//!
//! INV-1: [`validate`] reads only the catalog it is given and the command: an error means
//! nothing is logged; success yields exactly one entry whose replay on that catalog is
//! [`Change::Applied`](crate::state::catalog::Change::Applied).
//! INV-2 (ids): a new entity's id is the catalog's `next_id`, carried inside the entry; replay
//! raises `next_id` past it (replay INV-5), so allocation is deterministic and needs no
//! separate SAVE_NEXTID (which remains for reserving id ranges, [`NodeCommand::ReserveIds`]).
//! INV-3 (pipelining): the leader validates against [`Planner`]'s *speculative* catalog — the
//! replayed catalog plus every entry planned but not yet settled — so two entries that may
//! both commit cannot take the same name or id. An entry leaves it only when the node reports
//! it applied or never proposed, or the epoch changes; never on a client's timeout
//! (`planner` INV-1..4).
//! INV-4: every entry produced is at most `journal::ENTRY_LEN_MAX` bytes.

use std::fmt;

use bytes::Bytes;
use thiserror::Error;

use crate::protocol::Status;
use crate::state::catalog::{BackendState, Catalog, Column, Frontend, Outcome};
use crate::state::journal::{JournalEntry, JournalError, Op, ENTRY_LEN_MAX};

mod plan;
mod planner;

use plan::{plan_command, plan_node_command};
pub use planner::{Planner, Ticket};

/// Most ids one [`NodeCommand::ReserveIds`] may reserve.
pub const RESERVE_IDS_MAX: u64 = 1_000_000;

/// A backend named by id or by address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendRef {
    /// By id.
    Id(u64),
    /// By `host:heartbeat_port`.
    Addr {
        /// Host.
        host: String,
        /// Heartbeat port.
        port: u16,
    },
}

impl fmt::Display for BackendRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendRef::Id(id) => write!(f, "id {id}"),
            BackendRef::Addr { host, port } => write!(f, "{host}:{port}"),
        }
    }
}

/// A write a client asks for: what the client library sends ([`Client::write`]), the protocol
/// encodes (one request kind per variant) and the [`Planner`] plans.
///
/// Adding a write: a variant here; its request kind (one line of the table in `protocol`) and
/// its arms in `protocol/command.rs` (kind, encode, decode); its plan arm (`plan.rs`); its
/// journal op (one line of the op table, an [`Op`] variant and its codec arms in
/// `state::journal`) and apply arm (`state::replay`); one CLI arm; its rows in
/// `docs/PROTOCOL.md` §4.
///
/// [`Client::write`]: crate::client::Client::write
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Add a backend in state NORMAL.
    AddBackend {
        /// Host.
        host: String,
        /// Heartbeat port.
        heartbeat_port: u16,
        /// Capacity in bytes (0 = unknown).
        capacity_bytes: u64,
    },
    /// Drop a backend.
    DropBackend(BackendRef),
    /// Change a backend's state and/or capacity.
    ModifyBackend {
        /// Which backend.
        target: BackendRef,
        /// New state, if changing.
        state: Option<BackendState>,
        /// New capacity, if changing.
        capacity_bytes: Option<u64>,
    },
    /// Create a database.
    CreateDb {
        /// Its name.
        name: String,
    },
    /// Drop a database and its tables.
    DropDb {
        /// Its name.
        name: String,
    },
    /// Rename a database (its tables go with it).
    RenameDb {
        /// Its name.
        name: String,
        /// The name it gets.
        new_name: String,
    },
    /// Create a table.
    CreateTable {
        /// The database's name.
        db: String,
        /// The table's name.
        name: String,
        /// Its columns.
        columns: Vec<Column>,
    },
    /// Drop a table.
    DropTable {
        /// The database's name.
        db: String,
        /// The table's name.
        name: String,
    },
    /// Set a global variable.
    SetVar {
        /// Its name.
        name: String,
        /// Its value.
        value: String,
    },
}

/// A write the node makes itself or that only embedders plan: it has no request kind, so no
/// client can send one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeCommand {
    /// Register a frontend.
    AddFrontend(Frontend),
    /// Unregister a frontend.
    DropFrontend {
        /// Its server id.
        sid: u64,
    },
    /// Reserve `count` ids for use outside the journal (SAVE_NEXTID); the first is returned.
    ReserveIds {
        /// How many.
        count: u64,
    },
    /// Log the leader's wall clock (the staleness guard's TIMESTAMP; the caller reads the clock)
    /// and the client session expiry in force.
    Timestamp {
        /// Milliseconds since the Unix epoch.
        wall_ms: u64,
        /// Sessions idle for longer than this expire (0: never).
        session_expiry_ms: u64,
    },
}

/// What the planner plans: a client's [`Command`] or a [`NodeCommand`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    /// A client's write.
    Client(Command),
    /// A write of the node's own.
    Node(NodeCommand),
}

impl From<Command> for Write {
    fn from(cmd: Command) -> Write {
        Write::Client(cmd)
    }
}

impl From<NodeCommand> for Write {
    fn from(cmd: NodeCommand) -> Write {
        Write::Node(cmd)
    }
}

/// Why a command was refused; nothing was logged.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum CommandError {
    /// A malformed argument.
    #[error("invalid {what} {value:?}: {why}")]
    Invalid {
        /// Which argument.
        what: &'static str,
        /// Its value (possibly shortened).
        value: String,
        /// What is wrong.
        why: String,
    },
    /// A backend already has this address.
    #[error("backend {host}:{port} already exists (id {id})")]
    DuplicateBackend {
        /// Host.
        host: String,
        /// Port.
        port: u16,
        /// The existing backend's id.
        id: u64,
    },
    /// No such backend.
    #[error("unknown backend {0}")]
    UnknownBackend(BackendRef),
    /// The database exists.
    #[error("database {0:?} already exists")]
    DatabaseExists(String),
    /// No such database.
    #[error("unknown database {0:?}")]
    UnknownDatabase(String),
    /// The table exists.
    #[error("table {db}.{table} already exists")]
    TableExists {
        /// Database.
        db: String,
        /// Table.
        table: String,
    },
    /// No such table.
    #[error("unknown table {db}.{table}")]
    UnknownTable {
        /// Database.
        db: String,
        /// Table.
        table: String,
    },
    /// The frontend is registered.
    #[error("frontend {0} already exists")]
    FrontendExists(u64),
    /// No such frontend.
    #[error("unknown frontend {0}")]
    UnknownFrontend(u64),
    /// The id allocator cannot go further.
    #[error("the id allocator is exhausted")]
    IdsExhausted,
    /// The client already had a write with a higher floor applied: this one is older than
    /// what the client still waits for, and is never applied.
    #[error(
        "stale request: client {client_id:#x} sequence number {seq} is below the client's \
         floor {floor} (a newer request of this client was already applied)"
    )]
    StaleRequest {
        /// The client.
        client_id: u64,
        /// The request's sequence number.
        seq: u64,
        /// The client's recorded floor.
        floor: u64,
    },
    /// The same client write (client id and sequence number) was planned before: nothing new is
    /// logged; `outcome.journal_id` is 0 while the first one has not committed yet.
    #[error("request {seq} of client {client_id:#x} was already submitted")]
    Duplicate {
        /// The client.
        client_id: u64,
        /// The request's sequence number.
        seq: u64,
        /// The first one's outcome.
        outcome: Outcome,
    },
    /// The entry would exceed the journal's size limit.
    #[error("the journal entry would be {len} bytes, over the limit of {ENTRY_LEN_MAX}")]
    EntryTooLarge {
        /// Its size.
        len: usize,
    },
}

impl CommandError {
    /// The status a client is answered with (`protocol::Status`); a retry of a write still in
    /// flight is TIMEOUT: its outcome is not known yet.
    pub fn status(&self) -> Status {
        match self {
            CommandError::Invalid { .. }
            | CommandError::IdsExhausted
            | CommandError::EntryTooLarge { .. } => Status::InvalidArgument,
            CommandError::UnknownBackend(_)
            | CommandError::UnknownDatabase(_)
            | CommandError::UnknownTable { .. }
            | CommandError::UnknownFrontend(_) => Status::NotFound,
            CommandError::DuplicateBackend { .. }
            | CommandError::DatabaseExists(_)
            | CommandError::TableExists { .. }
            | CommandError::FrontendExists(_) => Status::AlreadyExists,
            CommandError::StaleRequest { .. } => Status::StaleRequest,
            CommandError::Duplicate { .. } => Status::Timeout,
        }
    }
}

/// A validated command: the entry to submit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    /// Its journal entry's bytes, `op u16 | payload` (what is submitted to ZAB).
    pub entry: Bytes,
    /// The id of the entity created (or the first id reserved), if any.
    pub created_id: Option<u64>,
}

impl Planned {
    /// The entry of `op`, encoded once; refused when it is over the size limit (INV-4).
    fn encode(op: &Op, created_id: Option<u64>) -> Result<Planned, CommandError> {
        let entry = op.encode_entry();
        if entry.len() > ENTRY_LEN_MAX {
            return Err(CommandError::EntryTooLarge { len: entry.len() });
        }
        Ok(Planned {
            entry: Bytes::from(entry),
            created_id,
        })
    }

    /// The entry split into op code and payload, as replay reads it.
    pub fn journal_entry(&self) -> Result<JournalEntry, JournalError> {
        JournalEntry::decode(&self.entry)
    }
}

/// Validates `write` against `catalog` and plans its journal entry (INV-1, INV-2).
pub fn validate(catalog: &Catalog, write: &Write) -> Result<Planned, CommandError> {
    let (op, created_id) = plan_write(catalog, write)?;
    Planned::encode(&op, created_id)
}

/// The op of `write` against `catalog` and the id it creates, not yet encoded.
fn plan_write(catalog: &Catalog, write: &Write) -> Result<(Op, Option<u64>), CommandError> {
    match write {
        Write::Client(cmd) => plan_command(catalog, cmd),
        Write::Node(cmd) => plan_node_command(catalog, cmd),
    }
}
