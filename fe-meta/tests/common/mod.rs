//! Shared proptest strategies and helpers for fe-meta's integration tests.
#![allow(dead_code, missing_docs)]

use fe_meta::command::{BackendRef, Command, NodeCommand, Write};
use fe_meta::state::catalog::{
    Backend, BackendState, Column, ColumnType, Database, Frontend, FrontendRole, SessionTag, Table,
};
use fe_meta::state::journal::Op;
use proptest::prelude::*;

pub fn name() -> impl Strategy<Value = String> {
    "[a-z_][a-z0-9_-]{0,11}"
}

pub fn any_text() -> impl Strategy<Value = String> {
    ".{0,24}"
}

pub fn column_type() -> impl Strategy<Value = ColumnType> {
    prop_oneof![
        Just(ColumnType::Boolean),
        Just(ColumnType::Int),
        Just(ColumnType::BigInt),
        Just(ColumnType::LargeInt),
        Just(ColumnType::Double),
        Just(ColumnType::Date),
        Just(ColumnType::DateTime),
        Just(ColumnType::String),
        (1u8..=38)
            .prop_flat_map(|p| (Just(p), 0..=p))
            .prop_map(|(precision, scale)| ColumnType::Decimal { precision, scale }),
        (1u16..=255).prop_map(ColumnType::Char),
        (1u32..=65_535).prop_map(ColumnType::Varchar),
    ]
}

pub fn column() -> impl Strategy<Value = Column> {
    (
        name(),
        column_type(),
        any::<bool>(),
        any::<bool>(),
        proptest::option::of(any_text()),
    )
        .prop_map(|(name, ty, nullable, is_key, default)| Column {
            name,
            ty,
            nullable,
            is_key,
            default,
        })
}

pub fn columns() -> impl Strategy<Value = Vec<Column>> {
    proptest::collection::vec(column(), 0..6)
}

pub fn backend_state() -> impl Strategy<Value = BackendState> {
    prop_oneof![
        Just(BackendState::Normal),
        Just(BackendState::Decommissioning),
        Just(BackendState::Offline),
    ]
}

pub fn role() -> impl Strategy<Value = FrontendRole> {
    prop_oneof![Just(FrontendRole::Follower), Just(FrontendRole::Observer)]
}

pub fn backend() -> impl Strategy<Value = Backend> {
    (
        any::<u64>(),
        name(),
        any::<u16>(),
        backend_state(),
        any::<u64>(),
    )
        .prop_map(
            |(id, host, heartbeat_port, state, capacity_bytes)| Backend {
                id,
                host,
                heartbeat_port,
                state,
                capacity_bytes,
            },
        )
}

pub fn frontend() -> impl Strategy<Value = Frontend> {
    (any::<u64>(), name(), name(), any::<u16>(), role()).prop_map(
        |(sid, name, host, client_port, role)| Frontend {
            sid,
            name,
            host,
            client_port,
            role,
        },
    )
}

/// Every op, with arbitrary field values; some wrapped in a SESSION_WRITE (floor <= seq).
pub fn op() -> impl Strategy<Value = Op> {
    let tag =
        (any::<u64>(), 1u64..1000, 0u64..1000).prop_map(|(client_id, seq, floor)| SessionTag {
            client_id: client_id % 4,
            seq,
            floor: floor % (seq + 1),
        });
    prop_oneof![
        4 => plain_op(),
        1 => (tag, plain_op()).prop_map(|(tag, inner)| Op::SessionWrite {
            tag,
            inner: Box::new(inner)
        }),
    ]
}

/// Every op but SESSION_WRITE, with arbitrary field values.
pub fn plain_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        any::<u64>().prop_map(|next_id| Op::SaveNextId { next_id }),
        (any::<u64>(), name()).prop_map(|(id, name)| Op::CreateDb(Database { id, name })),
        any::<u64>().prop_map(|db_id| Op::DropDb { db_id }),
        (any::<u64>(), name()).prop_map(|(db_id, new_name)| Op::RenameDb { db_id, new_name }),
        (any::<u64>(), any::<u64>(), name(), columns()).prop_map(|(id, db_id, name, columns)| {
            Op::CreateTable(Table {
                id,
                db_id,
                name,
                columns: columns.into(),
            })
        }),
        (any::<u64>(), any::<u64>())
            .prop_map(|(db_id, table_id)| Op::DropTable { db_id, table_id }),
        backend().prop_map(Op::AddBackend),
        any::<u64>().prop_map(|backend_id| Op::DropBackend { backend_id }),
        backend().prop_map(Op::ModifyBackend),
        frontend().prop_map(Op::AddFrontend),
        any::<u64>().prop_map(|sid| Op::DropFrontend { sid }),
        (name(), any_text()).prop_map(|(name, value)| Op::SetGlobalVariable { name, value }),
        (any::<u64>(), any::<u64>()).prop_map(|(wall_ms, session_expiry_ms)| Op::Timestamp {
            wall_ms,
            session_expiry_ms
        }),
    ]
}

/// Writes (client and node commands) over a small name space, so that they collide often (duplicates, unknowns).
pub fn command() -> impl Strategy<Value = Write> {
    let db = prop_oneof![Just("db1"), Just("db2"), Just("db3")].prop_map(String::from);
    let table = prop_oneof![Just("t1"), Just("t2")].prop_map(String::from);
    let host = prop_oneof![Just("10.0.0.1"), Just("10.0.0.2"), Just("be3")].prop_map(String::from);
    let port = prop_oneof![Just(9050u16), Just(9051u16)];
    let target = prop_oneof![
        (10_000u64..10_040).prop_map(BackendRef::Id),
        (host.clone(), port.clone()).prop_map(|(host, port)| BackendRef::Addr { host, port }),
    ];
    prop_oneof![
        (host, port, any::<u64>()).prop_map(|(host, heartbeat_port, capacity_bytes)| {
            Write::from(Command::AddBackend {
                host,
                heartbeat_port,
                capacity_bytes,
            })
        }),
        target
            .clone()
            .prop_map(|t| Write::from(Command::DropBackend(t))),
        (
            target,
            proptest::option::of(backend_state()),
            proptest::option::of(any::<u64>())
        )
            .prop_map(|(target, state, capacity_bytes)| Write::from(
                Command::ModifyBackend {
                    target,
                    state,
                    capacity_bytes,
                }
            )),
        db.clone()
            .prop_map(|name| Write::from(Command::CreateDb { name })),
        db.clone()
            .prop_map(|name| Write::from(Command::DropDb { name })),
        (db.clone(), db.clone())
            .prop_map(|(name, new_name)| Write::from(Command::RenameDb { name, new_name })),
        (
            db.clone(),
            table.clone(),
            proptest::collection::vec(column(), 1..4)
        )
            .prop_map(|(db, name, columns)| Write::from(Command::CreateTable {
                db,
                name,
                columns
            })),
        (db, table).prop_map(|(db, name)| Write::from(Command::DropTable { db, name })),
        (1u64..4, role()).prop_map(
            |(sid, role)| Write::from(NodeCommand::AddFrontend(Frontend {
                sid,
                name: format!("fe{sid}"),
                host: "127.0.0.1".into(),
                client_port: 2180 + sid as u16,
                role,
            }))
        ),
        (1u64..4).prop_map(|sid| Write::from(NodeCommand::DropFrontend { sid })),
        (prop_oneof![Just("query_timeout"), Just("a.b")], any_text()).prop_map(|(name, value)| {
            Write::from(Command::SetVar {
                name: name.into(),
                value,
            })
        }),
        (1u64..100).prop_map(|count| Write::from(NodeCommand::ReserveIds { count })),
        any::<u64>().prop_map(|wall_ms| Write::from(NodeCommand::Timestamp {
            wall_ms,
            session_expiry_ms: 0
        })),
    ]
}

/// Deterministic columns for bulk catalogs.
pub fn bulk_columns(n: usize) -> Vec<Column> {
    (0..n)
        .map(|i| Column {
            name: format!("c{i}"),
            ty: if i % 2 == 0 {
                ColumnType::BigInt
            } else {
                ColumnType::Varchar(64)
            },
            nullable: i % 3 == 0,
            is_key: i == 0,
            default: None,
        })
        .collect()
}
