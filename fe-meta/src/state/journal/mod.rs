//! The edit log: journal entries `{op code u16, payload}`, one per ZAB txn.
//!
//! An entry's bytes (the ZAB txn data) are `op u16 | payload`, big-endian. Every payload starts
//! with its format version (u8, 1 today) and then the fields below (entity layouts in
//! `catalog::codec`). The codes are fixed forever: a code is never reused for another meaning.
//!
//! | code | op                  | payload v1 after the version byte          | new id?       |
//! |-----:|---------------------|--------------------------------------------|---------------|
//! |    0 | SAVE_NEXTID         | next_id u64                                | raises it     |
//! |    1 | CREATE_DB           | Database (id, name)                        | id            |
//! |    2 | DROP_DB             | db_id u64                                  |               |
//! |    3 | RENAME_DB           | db_id u64, new name str                    |               |
//! |   10 | CREATE_TABLE        | Table (id, db_id, name, columns)           | id            |
//! |   11 | DROP_TABLE          | db_id u64, table_id u64                    |               |
//! |   50 | ADD_BACKEND         | Backend (id, host, port, state, capacity)  | id            |
//! |   51 | DROP_BACKEND        | backend_id u64                             |               |
//! |   52 | MODIFY_BACKEND      | Backend (the whole new record, same id)    |               |
//! |   55 | ADD_FRONTEND        | Frontend (sid, name, host, port, role)     |               |
//! |   57 | DROP_FRONTEND       | sid u64                                    |               |
//! |   60 | SET_GLOBAL_VARIABLE | name str, value str                        |               |
//! |   70 | TIMESTAMP           | v2: wall_ms u64, session_expiry_ms u64     |               |
//! |   80 | SESSION_WRITE       | client_id u64, seq u64, floor u64, then the inner entry (op u16, payload) | the inner op's |
//!
//! 50 is StarRocks' `OP_ADD_BACKEND`; the other codes are ours.
//!
//! TIMESTAMP is the leader's wall clock (ms since the Unix epoch) and, from payload version 2,
//! the client session expiry in force (0: sessions do not expire by time); a version-1
//! TIMESTAMP (older logs) reads as expiry 0. SESSION_WRITE wraps one client write with its
//! session tag (`catalog::SessionTag`, `floor <= seq`); replay decides with the session table
//! whether the inner op is applied (`catalog::sessions`). Its inner op is never another
//! SESSION_WRITE.
//!
//! INV-1: an entry carries every value its replay needs (ids, the leader's clock), so replay is
//! a pure function of (catalog, entry): it reads no clock, no RNG, nothing outside.
//! INV-2: `Op::from_entry(&op.to_entry()) == op` for every op within the limits, and decoding
//! rejects an unknown code, an unknown version, a short or long payload, or a field out of range
//! with a [`JournalError`] that names the op and what is wrong; it never panics.
//! INV-3: an encoded entry is at most [`ENTRY_LEN_MAX`] bytes (commands check it).

use std::fmt;

use bytes::{BufMut, Bytes};
use thiserror::Error;

use crate::state::catalog::{
    Backend, Codec, Database, Frontend, SessionTag, Table, NAME_LEN_MAX, VALUE_LEN_MAX,
};
use crate::wire::{Put, Reader, WireError};

/// Largest encoded entry, in bytes.
pub const ENTRY_LEN_MAX: usize = 16 * 1024 * 1024;

/// The payload format version this build writes and reads (every op but TIMESTAMP).
pub const PAYLOAD_VERSION: u8 = 1;
/// The TIMESTAMP payload version this build writes (it reads 1 too).
pub const TIMESTAMP_VERSION: u8 = 2;

/// Room reserved for a payload before it is written: most ops fit, larger ones grow once.
const PAYLOAD_CAPACITY: usize = 96;

/// A journal op code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpCode(pub u16);

/// Declares the op codes from one table: each code's constant, [`OpCode::ALL`] and
/// [`OpCode::name`].
macro_rules! op_codes {
    ($($(#[$doc:meta])* $name:ident = $code:literal;)*) => {
        impl OpCode {
            $($(#[$doc])* pub const $name: OpCode = OpCode($code);)*

            /// Every known code, ascending.
            pub const ALL: [OpCode; [$($code),*].len()] = [$(OpCode::$name),*];

            /// The op's name, if the code is known.
            pub fn name(self) -> Option<&'static str> {
                match self {
                    $(OpCode::$name => Some(stringify!($name)),)*
                    _ => None,
                }
            }
        }
    };
}

op_codes! {
    /// Raise the id allocator.
    SAVE_NEXTID = 0;
    /// Create a database.
    CREATE_DB = 1;
    /// Drop a database and its tables.
    DROP_DB = 2;
    /// Rename a database.
    RENAME_DB = 3;
    /// Create a table.
    CREATE_TABLE = 10;
    /// Drop a table.
    DROP_TABLE = 11;
    /// Add a backend (StarRocks' code).
    ADD_BACKEND = 50;
    /// Drop a backend.
    DROP_BACKEND = 51;
    /// Replace a backend's record.
    MODIFY_BACKEND = 52;
    /// Add or replace a frontend.
    ADD_FRONTEND = 55;
    /// Drop a frontend.
    DROP_FRONTEND = 57;
    /// Set a global variable.
    SET_GLOBAL_VARIABLE = 60;
    /// The leader's clock, for the staleness guard.
    TIMESTAMP = 70;
    /// A client write with its session tag.
    SESSION_WRITE = 80;
}

impl fmt::Display for OpCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name} ({})", self.0),
            None => write!(f, "unknown op {}", self.0),
        }
    }
}

/// Why an entry does not decode.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum JournalError {
    /// Fewer than 2 bytes: no op code.
    #[error("journal entry of {len} bytes has no op code")]
    TooShort {
        /// Its length.
        len: usize,
    },
    /// Over [`ENTRY_LEN_MAX`].
    #[error("journal entry of {len} bytes is over the limit of {ENTRY_LEN_MAX}")]
    TooLong {
        /// Its length.
        len: usize,
    },
    /// The op code is not one this build knows.
    #[error("{op}: this build does not know the op code")]
    UnknownOp {
        /// The code.
        op: OpCode,
    },
    /// The payload does not decode.
    #[error("{op} payload: {source}")]
    Payload {
        /// The op.
        op: OpCode,
        /// What is wrong.
        source: WireError,
    },
}

/// One journal entry as stored: an op code and its undecoded payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalEntry {
    /// The op code.
    pub op: OpCode,
    /// The payload (starting with its version byte).
    pub payload: Bytes,
}

impl JournalEntry {
    /// The entry's bytes: `op u16 | payload`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(2 + self.payload.len());
        out.put_u16(self.op.0);
        out.extend_from_slice(&self.payload);
        out
    }

    /// Splits an entry's bytes into op and payload (the payload is decoded by
    /// [`Op::from_entry`]).
    pub fn decode(bytes: &[u8]) -> Result<JournalEntry, JournalError> {
        if bytes.len() < 2 {
            return Err(JournalError::TooShort { len: bytes.len() });
        }
        if bytes.len() > ENTRY_LEN_MAX {
            return Err(JournalError::TooLong { len: bytes.len() });
        }
        Ok(JournalEntry {
            op: OpCode(u16::from_be_bytes([bytes[0], bytes[1]])),
            payload: Bytes::copy_from_slice(&bytes[2..]),
        })
    }

    /// The encoded length.
    pub fn encoded_len(&self) -> usize {
        2 + self.payload.len()
    }
}

/// A decoded journal op (see the table in the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// SAVE_NEXTID: raise the id allocator to at least `next_id`.
    SaveNextId {
        /// The new lower bound of the next id.
        next_id: u64,
    },
    /// CREATE_DB.
    CreateDb(Database),
    /// DROP_DB.
    DropDb {
        /// The database.
        db_id: u64,
    },
    /// RENAME_DB.
    RenameDb {
        /// The database.
        db_id: u64,
        /// Its new name.
        new_name: String,
    },
    /// CREATE_TABLE.
    CreateTable(Table),
    /// DROP_TABLE.
    DropTable {
        /// The database.
        db_id: u64,
        /// The table.
        table_id: u64,
    },
    /// ADD_BACKEND.
    AddBackend(Backend),
    /// DROP_BACKEND.
    DropBackend {
        /// The backend.
        backend_id: u64,
    },
    /// MODIFY_BACKEND: the backend's whole new record.
    ModifyBackend(Backend),
    /// ADD_FRONTEND.
    AddFrontend(Frontend),
    /// DROP_FRONTEND.
    DropFrontend {
        /// The frontend's server id.
        sid: u64,
    },
    /// SET_GLOBAL_VARIABLE.
    SetGlobalVariable {
        /// The variable.
        name: String,
        /// Its new value.
        value: String,
    },
    /// TIMESTAMP: the leader's wall clock when it wrote the entry.
    Timestamp {
        /// Milliseconds since the Unix epoch.
        wall_ms: u64,
        /// Client sessions idle for longer than this (by TIMESTAMP time) expire; 0: never.
        session_expiry_ms: u64,
    },
    /// SESSION_WRITE: a client write and its session tag.
    SessionWrite {
        /// The client's session fields.
        tag: SessionTag,
        /// The write (never another SESSION_WRITE).
        inner: Box<Op>,
    },
}

impl Op {
    /// The op's code.
    pub fn code(&self) -> OpCode {
        match self {
            Op::SaveNextId { .. } => OpCode::SAVE_NEXTID,
            Op::CreateDb(_) => OpCode::CREATE_DB,
            Op::DropDb { .. } => OpCode::DROP_DB,
            Op::RenameDb { .. } => OpCode::RENAME_DB,
            Op::CreateTable(_) => OpCode::CREATE_TABLE,
            Op::DropTable { .. } => OpCode::DROP_TABLE,
            Op::AddBackend(_) => OpCode::ADD_BACKEND,
            Op::DropBackend { .. } => OpCode::DROP_BACKEND,
            Op::ModifyBackend(_) => OpCode::MODIFY_BACKEND,
            Op::AddFrontend(_) => OpCode::ADD_FRONTEND,
            Op::DropFrontend { .. } => OpCode::DROP_FRONTEND,
            Op::SetGlobalVariable { .. } => OpCode::SET_GLOBAL_VARIABLE,
            Op::Timestamp { .. } => OpCode::TIMESTAMP,
            Op::SessionWrite { .. } => OpCode::SESSION_WRITE,
        }
    }

    /// The op as a journal entry (payload version [`PAYLOAD_VERSION`]).
    pub fn to_entry(&self) -> JournalEntry {
        let mut p = Vec::with_capacity(PAYLOAD_CAPACITY);
        self.write_payload(&mut p);
        JournalEntry {
            op: self.code(),
            payload: Bytes::from(p),
        }
    }

    /// The op's entry bytes, `op u16 | payload`, written in one buffer: what
    /// [`JournalEntry::encode`] of [`Op::to_entry`] gives, without the second copy.
    pub fn encode_entry(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(2 + PAYLOAD_CAPACITY);
        out.put_u16(self.code().0);
        self.write_payload(&mut out);
        out
    }

    /// Appends the op's payload (its version byte, then its fields) to `p`; a SESSION_WRITE's
    /// inner entry is written in place.
    fn write_payload(&self, p: &mut Vec<u8>) {
        p.put_u8(match self {
            Op::Timestamp { .. } => TIMESTAMP_VERSION,
            _ => PAYLOAD_VERSION,
        });
        match self {
            Op::SaveNextId { next_id } => p.put_u64(*next_id),
            Op::CreateDb(db) => db.encode(p),
            Op::DropDb { db_id } => p.put_u64(*db_id),
            Op::RenameDb { db_id, new_name } => {
                p.put_u64(*db_id);
                p.put_str(new_name);
            }
            Op::CreateTable(t) => t.encode(p),
            Op::DropTable { db_id, table_id } => {
                p.put_u64(*db_id);
                p.put_u64(*table_id);
            }
            Op::AddBackend(be) | Op::ModifyBackend(be) => be.encode(p),
            Op::DropBackend { backend_id } => p.put_u64(*backend_id),
            Op::AddFrontend(fe) => fe.encode(p),
            Op::DropFrontend { sid } => p.put_u64(*sid),
            Op::SetGlobalVariable { name, value } => {
                p.put_str(name);
                p.put_str(value);
            }
            Op::Timestamp {
                wall_ms,
                session_expiry_ms,
            } => {
                p.put_u64(*wall_ms);
                p.put_u64(*session_expiry_ms);
            }
            Op::SessionWrite { tag, inner } => {
                p.put_u64(tag.client_id);
                p.put_u64(tag.seq);
                p.put_u64(tag.floor);
                p.put_u16(inner.code().0);
                inner.write_payload(p);
            }
        }
    }

    /// Decodes an entry's payload according to its op code (INV-2).
    pub fn from_entry(entry: &JournalEntry) -> Result<Op, JournalError> {
        let op = entry.op;
        if op.name().is_none() {
            return Err(JournalError::UnknownOp { op });
        }
        if entry.encoded_len() > ENTRY_LEN_MAX {
            return Err(JournalError::TooLong {
                len: entry.encoded_len(),
            });
        }
        decode_payload(op, &entry.payload).map_err(|source| JournalError::Payload { op, source })
    }

    /// Decodes an entry's bytes (`op u16 | payload`) in one step.
    pub fn decode(bytes: &[u8]) -> Result<Op, JournalError> {
        Op::from_entry(&JournalEntry::decode(bytes)?)
    }
}

fn decode_payload(op: OpCode, payload: &[u8]) -> Result<Op, WireError> {
    let mut r = Reader::new(payload);
    let supported = match op {
        OpCode::TIMESTAMP => TIMESTAMP_VERSION,
        _ => PAYLOAD_VERSION,
    };
    let version = r.u8("format version")?;
    if !(1..=supported).contains(&version) {
        return Err(WireError::Version {
            found: version,
            supported,
        });
    }
    let out = match op {
        OpCode::SAVE_NEXTID => Op::SaveNextId {
            next_id: r.u64("next_id")?,
        },
        OpCode::CREATE_DB => Op::CreateDb(Database::decode(&mut r)?),
        OpCode::DROP_DB => Op::DropDb {
            db_id: r.u64("db_id")?,
        },
        OpCode::RENAME_DB => Op::RenameDb {
            db_id: r.u64("db_id")?,
            new_name: r.str("database name", NAME_LEN_MAX)?,
        },
        OpCode::CREATE_TABLE => Op::CreateTable(Table::decode(&mut r)?),
        OpCode::DROP_TABLE => Op::DropTable {
            db_id: r.u64("db_id")?,
            table_id: r.u64("table_id")?,
        },
        OpCode::ADD_BACKEND => Op::AddBackend(Backend::decode(&mut r)?),
        OpCode::DROP_BACKEND => Op::DropBackend {
            backend_id: r.u64("backend_id")?,
        },
        OpCode::MODIFY_BACKEND => Op::ModifyBackend(Backend::decode(&mut r)?),
        OpCode::ADD_FRONTEND => Op::AddFrontend(Frontend::decode(&mut r)?),
        OpCode::DROP_FRONTEND => Op::DropFrontend { sid: r.u64("sid")? },
        OpCode::SET_GLOBAL_VARIABLE => Op::SetGlobalVariable {
            name: r.str("variable name", NAME_LEN_MAX)?,
            value: r.str("variable value", VALUE_LEN_MAX)?,
        },
        OpCode::TIMESTAMP => Op::Timestamp {
            wall_ms: r.u64("wall_ms")?,
            session_expiry_ms: match version {
                1 => 0,
                _ => r.u64("session_expiry_ms")?,
            },
        },
        OpCode::SESSION_WRITE => decode_session_write(&mut r)?,
        _ => {
            return Err(WireError::BadValue {
                field: "op code",
                value: u64::from(op.0),
            })
        }
    };
    r.finish()?;
    Ok(out)
}

fn decode_session_write(r: &mut Reader<'_>) -> Result<Op, WireError> {
    let tag = SessionTag {
        client_id: r.u64("client_id")?,
        seq: r.u64("seq")?,
        floor: r.u64("floor")?,
    };
    if !tag.is_valid() {
        return Err(WireError::BadValue {
            field: "floor (above seq)",
            value: tag.floor,
        });
    }
    let inner_op = OpCode(r.u16("inner op code")?);
    if inner_op == OpCode::SESSION_WRITE || inner_op.name().is_none() {
        return Err(WireError::BadValue {
            field: "inner op code",
            value: u64::from(inner_op.0),
        });
    }
    let rest = r.take("inner payload", r.remaining())?;
    let inner = decode_payload(inner_op, rest)?;
    Ok(Op::SessionWrite {
        tag,
        inner: Box::new(inner),
    })
}

#[cfg(test)]
mod tests;
