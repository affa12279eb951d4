//! Validation and planning of each command against one catalog version (see the parent
//! module's invariants).

use super::{BackendRef, Command, CommandError, NodeCommand, RESERVE_IDS_MAX};
use crate::state::catalog::{
    Backend, BackendState, Catalog, Column, Database, Frontend, Table, COLUMNS_MAX, HOST_LEN_MAX,
    NAME_LEN_MAX, VALUE_LEN_MAX,
};
use crate::state::journal::Op;

type Plan = Result<(Op, Option<u64>), CommandError>;

/// The op for a client's `cmd` on catalog `c`, and the id it creates.
pub(super) fn plan_command(c: &Catalog, cmd: &Command) -> Plan {
    match cmd {
        Command::AddBackend {
            host,
            heartbeat_port,
            capacity_bytes,
        } => add_backend(c, host, *heartbeat_port, *capacity_bytes),
        Command::DropBackend(target) => {
            let backend_id = find_backend(c, target)?.id;
            Ok((Op::DropBackend { backend_id }, None))
        }
        Command::ModifyBackend {
            target,
            state,
            capacity_bytes,
        } => {
            let mut be = find_backend(c, target)?.clone();
            be.state = state.unwrap_or(be.state);
            be.capacity_bytes = capacity_bytes.unwrap_or(be.capacity_bytes);
            Ok((Op::ModifyBackend(be), None))
        }
        Command::CreateDb { name } => create_db(c, name),
        Command::DropDb { name } => Ok((
            Op::DropDb {
                db_id: find_db(c, name)?.id,
            },
            None,
        )),
        Command::RenameDb { name, new_name } => rename_db(c, name, new_name),
        Command::CreateTable { db, name, columns } => create_table(c, db, name, columns),
        Command::DropTable { db, name } => drop_table(c, db, name),
        Command::SetVar { name, value } => set_var(name, value),
    }
}

/// The op for the node's `cmd` on catalog `c`, and the id it creates (or the first id it
/// reserves).
pub(super) fn plan_node_command(c: &Catalog, cmd: &NodeCommand) -> Plan {
    match cmd {
        NodeCommand::AddFrontend(fe) => add_frontend(c, fe),
        NodeCommand::DropFrontend { sid } => match c.frontend(*sid) {
            Some(_) => Ok((Op::DropFrontend { sid: *sid }, None)),
            None => Err(CommandError::UnknownFrontend(*sid)),
        },
        NodeCommand::ReserveIds { count } => reserve_ids(c, *count),
        NodeCommand::Timestamp {
            wall_ms,
            session_expiry_ms,
        } => Ok((
            Op::Timestamp {
                wall_ms: *wall_ms,
                session_expiry_ms: *session_expiry_ms,
            },
            None,
        )),
    }
}

fn new_id(c: &Catalog) -> Result<u64, CommandError> {
    match c.next_id() {
        u64::MAX => Err(CommandError::IdsExhausted),
        id => Ok(id),
    }
}

fn add_backend(c: &Catalog, host: &str, port: u16, capacity_bytes: u64) -> Plan {
    check_addr(host, port)?;
    if let Some(be) = c.backend_by_addr(host, port) {
        return Err(CommandError::DuplicateBackend {
            host: host.to_owned(),
            port,
            id: be.id,
        });
    }
    let id = new_id(c)?;
    let be = Backend {
        id,
        host: host.to_owned(),
        heartbeat_port: port,
        state: BackendState::Normal,
        capacity_bytes,
    };
    Ok((Op::AddBackend(be), Some(id)))
}

fn create_db(c: &Catalog, name: &str) -> Plan {
    check_name("database name", name)?;
    if c.database_by_name(name).is_some() {
        return Err(CommandError::DatabaseExists(name.to_owned()));
    }
    let id = new_id(c)?;
    let db = Database {
        id,
        name: name.to_owned(),
    };
    Ok((Op::CreateDb(db), Some(id)))
}

fn rename_db(c: &Catalog, name: &str, new_name: &str) -> Plan {
    let db_id = find_db(c, name)?.id;
    check_name("database name", new_name)?;
    if c.database_by_name(new_name).is_some() {
        return Err(CommandError::DatabaseExists(new_name.to_owned()));
    }
    let new_name = new_name.to_owned();
    Ok((Op::RenameDb { db_id, new_name }, None))
}

fn create_table(c: &Catalog, db: &str, name: &str, columns: &[Column]) -> Plan {
    let db_id = find_db(c, db)?.id;
    check_name("table name", name)?;
    check_columns(columns)?;
    if c.table_by_name(db_id, name).is_some() {
        return Err(CommandError::TableExists {
            db: db.to_owned(),
            table: name.to_owned(),
        });
    }
    let id = new_id(c)?;
    let table = Table {
        id,
        db_id,
        name: name.to_owned(),
        columns: columns.into(),
    };
    Ok((Op::CreateTable(table), Some(id)))
}

fn drop_table(c: &Catalog, db: &str, name: &str) -> Plan {
    let db_id = find_db(c, db)?.id;
    let table = c
        .table_by_name(db_id, name)
        .ok_or_else(|| CommandError::UnknownTable {
            db: db.to_owned(),
            table: name.to_owned(),
        })?;
    let op = Op::DropTable {
        db_id,
        table_id: table.id,
    };
    Ok((op, None))
}

fn add_frontend(c: &Catalog, fe: &Frontend) -> Plan {
    check_name("frontend name", &fe.name)?;
    check_addr(&fe.host, fe.client_port)?;
    if c.frontend(fe.sid).is_some() {
        return Err(CommandError::FrontendExists(fe.sid));
    }
    Ok((Op::AddFrontend(fe.clone()), None))
}

fn set_var(name: &str, value: &str) -> Plan {
    check_var_name(name)?;
    if value.len() > VALUE_LEN_MAX {
        let why = format!("longer than {VALUE_LEN_MAX} bytes");
        return Err(invalid("variable value", value, why));
    }
    let op = Op::SetGlobalVariable {
        name: name.to_owned(),
        value: value.to_owned(),
    };
    Ok((op, None))
}

fn reserve_ids(c: &Catalog, count: u64) -> Plan {
    if !(1..=RESERVE_IDS_MAX).contains(&count) {
        let why = format!("must be 1..={RESERVE_IDS_MAX}");
        return Err(invalid("id count", &count.to_string(), why));
    }
    let first = new_id(c)?;
    let next_id = first.checked_add(count).ok_or(CommandError::IdsExhausted)?;
    Ok((Op::SaveNextId { next_id }, Some(first)))
}

fn invalid(what: &'static str, value: &str, why: impl Into<String>) -> CommandError {
    let value = match value.char_indices().nth(64) {
        Some((cut, _)) => format!("{}…", &value[..cut]),
        None => value.to_owned(),
    };
    CommandError::Invalid {
        what,
        value,
        why: why.into(),
    }
}

/// Names of databases, tables, columns and frontends: 1..=256 bytes, a letter or `_` first,
/// then letters, digits, `_` or `-`.
fn check_name(what: &'static str, name: &str) -> Result<(), CommandError> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|ch| ch.is_ascii_alphabetic() || ch == '_');
    if name.len() > NAME_LEN_MAX {
        return Err(invalid(
            what,
            name,
            format!("longer than {NAME_LEN_MAX} bytes"),
        ));
    }
    if !first_ok || !chars.all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-') {
        return Err(invalid(
            what,
            name,
            "must start with a letter or '_' and hold only letters, digits, '_' and '-'",
        ));
    }
    Ok(())
}

/// Variable names: like [`check_name`], and `.` is allowed after the first character.
fn check_var_name(name: &str) -> Result<(), CommandError> {
    check_name("variable name", &name.replace('.', "_")).map_err(|_| {
        invalid(
            "variable name",
            name,
            "must start with a letter or '_' and hold only letters, digits, '_', '-' and '.'",
        )
    })
}

fn check_addr(host: &str, port: u16) -> Result<(), CommandError> {
    if host.is_empty() || host.len() > HOST_LEN_MAX {
        return Err(invalid(
            "host",
            host,
            format!("must be 1..={HOST_LEN_MAX} bytes"),
        ));
    }
    if !host
        .chars()
        .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '-' | '_' | ':' | '[' | ']'))
    {
        return Err(invalid(
            "host",
            host,
            "must be a host name or an IP address",
        ));
    }
    if port == 0 {
        return Err(invalid("port", "0", "must be 1..=65535"));
    }
    Ok(())
}

fn check_columns(columns: &[Column]) -> Result<(), CommandError> {
    if columns.is_empty() || columns.len() > COLUMNS_MAX {
        let n = columns.len().to_string();
        return Err(invalid(
            "column count",
            &n,
            format!("a table has 1..={COLUMNS_MAX} columns"),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for col in columns {
        check_name("column name", &col.name)?;
        if !seen.insert(col.name.to_ascii_lowercase()) {
            return Err(invalid(
                "column name",
                &col.name,
                "appears twice (names are case-insensitive)",
            ));
        }
        if !col.ty.is_valid() {
            return Err(invalid(
                "column type",
                &col.ty.to_string(),
                "parameters out of range",
            ));
        }
        if let Some(d) = &col.default {
            if d.len() > VALUE_LEN_MAX {
                return Err(invalid(
                    "column default",
                    d,
                    format!("longer than {VALUE_LEN_MAX} bytes"),
                ));
            }
        }
    }
    Ok(())
}

fn find_db<'c>(c: &'c Catalog, name: &str) -> Result<&'c Database, CommandError> {
    c.database_by_name(name)
        .ok_or_else(|| CommandError::UnknownDatabase(name.to_owned()))
}

fn find_backend<'c>(c: &'c Catalog, target: &BackendRef) -> Result<&'c Backend, CommandError> {
    let found = match target {
        BackendRef::Id(id) => c.backend(*id),
        BackendRef::Addr { host, port } => c.backend_by_addr(host, *port),
    };
    found.ok_or_else(|| CommandError::UnknownBackend(target.clone()))
}
