//! The codec of a write: a [`Command`] is one request kind, its body the command's fields
//! (layouts: `docs/PROTOCOL.md` §4).
//!
//! INV-1: every [`Command`] has exactly one request kind ([`Command::request_kind`]), a write
//! kind; [`get_command`] decodes exactly the write kinds, so a request's kind says whether it
//! is a write and which.
//! INV-2: `get_command(cmd.request_kind(), put_command(cmd)) == cmd` for every command within
//! the limits; decoding never panics and never reserves memory beyond what the bytes can hold.

use bytes::BufMut;

use super::RequestKind;
use crate::command::{BackendRef, Command};
use crate::state::catalog::{
    BackendState, Codec, Column, COLUMNS_MAX, HOST_LEN_MAX, NAME_LEN_MAX, VALUE_LEN_MAX,
};
use crate::wire::{Put, Reader, WireError};

impl Command {
    /// The request kind that carries this command (INV-1).
    pub fn request_kind(&self) -> RequestKind {
        match self {
            Command::AddBackend { .. } => RequestKind::ADD_BACKEND,
            Command::DropBackend(_) => RequestKind::DROP_BACKEND,
            Command::ModifyBackend { .. } => RequestKind::MODIFY_BACKEND,
            Command::CreateDb { .. } => RequestKind::CREATE_DB,
            Command::DropDb { .. } => RequestKind::DROP_DB,
            Command::RenameDb { .. } => RequestKind::RENAME_DB,
            Command::CreateTable { .. } => RequestKind::CREATE_TABLE,
            Command::DropTable { .. } => RequestKind::DROP_TABLE,
            Command::SetVar { .. } => RequestKind::SET_VAR,
        }
    }
}

/// Appends `cmd`'s body (its kind is in the request header).
pub(super) fn put_command(o: &mut Vec<u8>, cmd: &Command) {
    match cmd {
        Command::AddBackend {
            host,
            heartbeat_port,
            capacity_bytes,
        } => {
            o.put_str(host);
            o.put_u16(*heartbeat_port);
            o.put_u64(*capacity_bytes);
        }
        Command::DropBackend(target) => put_backend_ref(o, target),
        Command::ModifyBackend {
            target,
            state,
            capacity_bytes,
        } => {
            put_backend_ref(o, target);
            match state {
                Some(s) => {
                    o.put_u8(1);
                    o.put_u8(s.tag());
                }
                None => o.put_u8(0),
            }
            o.put_opt_u64(*capacity_bytes);
        }
        Command::CreateDb { name } | Command::DropDb { name } => o.put_str(name),
        Command::RenameDb { name, new_name } => {
            o.put_str(name);
            o.put_str(new_name);
        }
        Command::CreateTable { db, name, columns } => {
            o.put_str(db);
            o.put_str(name);
            o.put_len(columns.len());
            for c in columns {
                c.encode(o);
            }
        }
        Command::DropTable { db, name } => {
            o.put_str(db);
            o.put_str(name);
        }
        Command::SetVar { name, value } => {
            o.put_str(name);
            o.put_str(value);
        }
    }
}

/// Decodes the body of the write of `kind` (INV-1, INV-2); a kind that is not a write is a
/// `BadValue` of the field "request kind".
pub(super) fn get_command(kind: RequestKind, r: &mut Reader<'_>) -> Result<Command, WireError> {
    let name = |r: &mut Reader<'_>, field| r.str(field, NAME_LEN_MAX);
    Ok(match kind {
        RequestKind::ADD_BACKEND => Command::AddBackend {
            host: r.str("host", HOST_LEN_MAX)?,
            heartbeat_port: r.u16("heartbeat_port")?,
            capacity_bytes: r.u64("capacity_bytes")?,
        },
        RequestKind::DROP_BACKEND => Command::DropBackend(get_backend_ref(r)?),
        RequestKind::MODIFY_BACKEND => get_modify_backend(r)?,
        RequestKind::CREATE_DB => Command::CreateDb {
            name: name(r, "database name")?,
        },
        RequestKind::DROP_DB => Command::DropDb {
            name: name(r, "database name")?,
        },
        RequestKind::RENAME_DB => Command::RenameDb {
            name: name(r, "database name")?,
            new_name: name(r, "new database name")?,
        },
        RequestKind::CREATE_TABLE => get_create_table(r)?,
        RequestKind::DROP_TABLE => Command::DropTable {
            db: name(r, "database name")?,
            name: name(r, "table name")?,
        },
        RequestKind::SET_VAR => Command::SetVar {
            name: name(r, "variable name")?,
            value: r.str("variable value", VALUE_LEN_MAX)?,
        },
        RequestKind(k) => {
            return Err(WireError::BadValue {
                field: "request kind",
                value: u64::from(k),
            })
        }
    })
}

fn get_modify_backend(r: &mut Reader<'_>) -> Result<Command, WireError> {
    let target = get_backend_ref(r)?;
    let state = if r.bool("state present")? {
        let tag = r.u8("state")?;
        Some(BackendState::from_tag(tag).ok_or(WireError::BadValue {
            field: "state",
            value: u64::from(tag),
        })?)
    } else {
        None
    };
    Ok(Command::ModifyBackend {
        target,
        state,
        capacity_bytes: r.opt_u64("capacity_bytes")?,
    })
}

fn get_create_table(r: &mut Reader<'_>) -> Result<Command, WireError> {
    let db = r.str("database name", NAME_LEN_MAX)?;
    let name = r.str("table name", NAME_LEN_MAX)?;
    let n = r.len("column count", COLUMNS_MAX)?;
    // A column takes at least 8 bytes: a lying count cannot make us reserve much.
    let mut columns = Vec::with_capacity(n.min(r.remaining() / 8));
    for _ in 0..n {
        columns.push(Column::decode(r)?);
    }
    Ok(Command::CreateTable { db, name, columns })
}

fn put_backend_ref(out: &mut Vec<u8>, target: &BackendRef) {
    match target {
        BackendRef::Id(id) => {
            out.put_u8(0);
            out.put_u64(*id);
        }
        BackendRef::Addr { host, port } => {
            out.put_u8(1);
            out.put_str(host);
            out.put_u16(*port);
        }
    }
}

fn get_backend_ref(r: &mut Reader<'_>) -> Result<BackendRef, WireError> {
    match r.u8("backend ref")? {
        0 => Ok(BackendRef::Id(r.u64("backend id")?)),
        1 => Ok(BackendRef::Addr {
            host: r.str("host", HOST_LEN_MAX)?,
            port: r.u16("port")?,
        }),
        v => Err(WireError::BadValue {
            field: "backend ref",
            value: u64::from(v),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_kinds_are_exactly_the_commands_kinds() {
        for kind in RequestKind::ALL {
            let decodes = get_command(kind, &mut Reader::new(&[])) != Err(bad_kind(kind));
            assert_eq!(decodes, kind.is_write(), "{kind}");
        }
        let cmd = Command::SetVar {
            name: "a".into(),
            value: "b".into(),
        };
        assert!(cmd.request_kind().is_write());
    }

    fn bad_kind(kind: RequestKind) -> WireError {
        WireError::BadValue {
            field: "request kind",
            value: u64::from(kind.0),
        }
    }
}
