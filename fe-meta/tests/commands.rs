//! Leader-side validation: clear typed errors and nothing planned for invalid commands; ids
//! allocated deterministically; pipelined writes validated against the speculative catalog.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

mod common;

use fe_meta::command::{validate, BackendRef, Command, CommandError, NodeCommand, Planner, Write};
use fe_meta::protocol::{ErrorReply, Status};
use fe_meta::state::catalog::{BackendState, Catalog, Column, ColumnType};
use fe_meta::state::journal::{JournalEntry, Op};
use fe_meta::state::replay::apply;
use fe_meta::Zxid;

fn run(
    planner: &mut Planner,
    replayed: &mut Catalog,
    cmd: impl Into<Write>,
) -> Result<Option<u64>, CommandError> {
    let (_, planned) = planner.plan(&cmd.into())?;
    let next = Zxid(replayed.journal_id().0 + 1);
    apply(replayed, next, &planned.journal_entry().unwrap()).unwrap();
    Ok(planned.created_id)
}

fn create_db(name: &str) -> Write {
    Command::CreateDb { name: name.into() }.into()
}

fn add_be(host: &str, port: u16) -> Command {
    Command::AddBackend {
        host: host.into(),
        heartbeat_port: port,
        capacity_bytes: 0,
    }
}

fn table(db: &str, name: &str, cols: &[&str]) -> Command {
    Command::CreateTable {
        db: db.into(),
        name: name.into(),
        columns: cols
            .iter()
            .map(|c| Column {
                name: (*c).into(),
                ty: ColumnType::Int,
                nullable: true,
                is_key: false,
                default: None,
            })
            .collect(),
    }
}

#[test]
fn ids_come_from_the_allocator_and_ride_in_the_entry() {
    let mut p = Planner::new(Catalog::new());
    let mut c = Catalog::new();
    assert_eq!(
        run(&mut p, &mut c, add_be("h1", 9050)).unwrap(),
        Some(10_000)
    );
    assert_eq!(
        run(&mut p, &mut c, Command::CreateDb { name: "d".into() }).unwrap(),
        Some(10_001)
    );
    assert_eq!(
        run(&mut p, &mut c, NodeCommand::ReserveIds { count: 50 }).unwrap(),
        Some(10_002)
    );
    assert_eq!(
        run(&mut p, &mut c, table("d", "t", &["a"])).unwrap(),
        Some(10_052)
    );
    assert_eq!(c.next_id(), 10_053);
    assert_eq!(
        c.backend_by_addr("h1", 9050).unwrap().state,
        BackendState::Normal
    );
}

#[test]
fn invalid_commands_are_refused_with_typed_errors() {
    let mut p = Planner::new(Catalog::new());
    let mut c = Catalog::new();
    run(&mut p, &mut c, add_be("h1", 9050)).unwrap();
    run(&mut p, &mut c, Command::CreateDb { name: "d".into() }).unwrap();
    run(&mut p, &mut c, table("d", "t", &["a"])).unwrap();
    let before = c.clone();

    let mut cases = backend_and_database_refusals();
    cases.extend(table_variable_and_node_refusals());
    for (cmd, kind, text) in cases {
        let err = p.plan(&cmd).unwrap_err();
        assert_eq!(err.status(), kind, "{cmd:?}: {err}");
        assert!(
            err.to_string().contains(text),
            "{cmd:?}: {err} lacks {text:?}"
        );
        let reply = ErrorReply::from(&err);
        assert_eq!(reply.message, err.to_string());
        assert_ne!(reply.status, Status::Internal);
    }
    // Nothing was planned: the speculative catalog equals the replayed one.
    assert_eq!(
        p.speculative().databases().count(),
        before.databases().count()
    );
    assert_eq!(p.speculative().next_id(), before.next_id());
    assert!(validate(&c, &table("d", "u", &["a"]).into()).is_ok());
}

#[test]
fn pipelined_writes_see_each_other_and_failed_ones_are_forgotten() {
    let replayed = Catalog::new();
    let mut p = Planner::new(replayed.clone());
    let (t1, first) = p.plan(&create_db("d")).unwrap();
    // Not yet applied anywhere: a second create of the same name must still be refused...
    let err = p.plan(&create_db("d")).unwrap_err();
    assert_eq!(err, CommandError::DatabaseExists("d".into()));
    // ...a table in it is accepted, and ids never collide.
    let (t2, second) = p.plan(&table("d", "t", &["a"]).into()).unwrap();
    assert_ne!(first.created_id, second.created_id);
    match Op::decode(&second.entry).unwrap() {
        Op::CreateTable(t) => assert_eq!(Some(t.db_id), first.created_id),
        other => panic!("unexpected {other:?}"),
    }
    // Both were never proposed (the node said so): forget them.
    p.failed(t1, || replayed.clone());
    p.failed(t2, || replayed.clone());
    assert_eq!(p.pending(), 0);
    assert!(p.plan(&create_db("d")).is_ok());
}

#[test]
fn modify_backend_keeps_unset_fields() {
    let mut p = Planner::new(Catalog::new());
    let mut c = Catalog::new();
    run(
        &mut p,
        &mut c,
        Command::AddBackend {
            host: "h".into(),
            heartbeat_port: 1,
            capacity_bytes: 99,
        },
    )
    .unwrap();
    let cmd = Command::ModifyBackend {
        target: BackendRef::Addr {
            host: "h".into(),
            port: 1,
        },
        state: Some(BackendState::Decommissioning),
        capacity_bytes: None,
    };
    run(&mut p, &mut c, cmd).unwrap();
    let be = c.backend(10_000).unwrap();
    assert_eq!(
        (be.state, be.capacity_bytes),
        (BackendState::Decommissioning, 99)
    );
    let bytes =
        JournalEntry::decode(&Op::DropBackend { backend_id: 10_000 }.to_entry().encode()).unwrap();
    apply(&mut c, Zxid(100), &bytes).unwrap();
    assert!(c.backend_by_addr("h", 1).is_none());
    c.check().unwrap();
}

fn rename(name: &str, new_name: &str) -> Write {
    Command::RenameDb {
        name: name.into(),
        new_name: new_name.into(),
    }
    .into()
}

#[test]
fn rename_db_moves_the_name_and_the_tables_follow() {
    let mut p = Planner::new(Catalog::new());
    let mut c = Catalog::new();
    let sales = run(&mut p, &mut c, create_db("sales")).unwrap().unwrap();
    run(&mut p, &mut c, table("sales", "orders", &["id"])).unwrap();
    run(&mut p, &mut c, create_db("archive")).unwrap();
    assert_eq!(run(&mut p, &mut c, rename("sales", "shop")).unwrap(), None);
    let shop = c.database_by_name("shop").unwrap();
    assert_eq!(shop.id, sales, "the database keeps its id");
    assert!(c.database_by_name("sales").is_none());
    let tables: Vec<&str> = c.tables_of(sales).map(|t| t.name.as_str()).collect();
    assert_eq!(tables, ["orders"]);
    c.check().unwrap();
    // The name is free again, and a table can be created in the renamed database.
    run(&mut p, &mut c, create_db("sales")).unwrap();
    run(&mut p, &mut c, table("shop", "lines", &["id"])).unwrap();

    let refusals = [
        (
            rename("nope", "x"),
            Status::NotFound,
            "unknown database \"nope\"",
        ),
        (
            rename("shop", "archive"),
            Status::AlreadyExists,
            "\"archive\" already exists",
        ),
        (
            rename("shop", "shop"),
            Status::AlreadyExists,
            "\"shop\" already exists",
        ),
        (
            rename("shop", "9x"),
            Status::InvalidArgument,
            "invalid database name",
        ),
    ];
    for (write, status, text) in refusals {
        let err = p.plan(&write).unwrap_err();
        assert_eq!(err.status(), status, "{write:?}: {err}");
        assert!(err.to_string().contains(text), "{err} lacks {text}");
    }
}

#[test]
fn replay_ignores_a_rename_that_conflicts_and_reports_its_class() {
    use fe_meta::state::catalog::{Change, Database};
    use fe_meta::state::replay::{apply_entry, ConflictKind, Outcome};
    let mut c = Catalog::new();
    for (j, (id, name)) in [(10_000, "a"), (10_001, "b")].into_iter().enumerate() {
        let db = Op::CreateDb(Database {
            id,
            name: name.into(),
        });
        apply(&mut c, Zxid(j as u64 + 1), &db.to_entry()).unwrap();
    }
    let rename = |db_id, new_name: &str| {
        Op::RenameDb {
            db_id,
            new_name: new_name.into(),
        }
        .to_entry()
    };
    let taken = apply_entry(&mut c, Zxid(3), &rename(10_000, "b")).unwrap();
    assert!(matches!(taken, Outcome::Ignored(k) if k.kind == ConflictKind::AlreadyExists));
    let missing = apply_entry(&mut c, Zxid(4), &rename(99, "z")).unwrap();
    assert!(matches!(missing, Outcome::Ignored(k) if k.kind == ConflictKind::NotFound));
    assert_eq!(
        apply(&mut c, Zxid(5), &rename(10_000, "z")).unwrap(),
        Change::Applied
    );
    // Applied again (a re-planned entry): already its name, nothing changes.
    assert_eq!(
        apply(&mut c, Zxid(6), &rename(10_000, "z")).unwrap(),
        Change::Applied
    );
    assert_eq!(c.database(10_000).unwrap().name, "z");
    c.check().unwrap();
}

/// What `invalid_commands_are_refused_with_typed_errors` expects of backend and database
/// writes: (write, status, a part of the message).
fn backend_and_database_refusals() -> Vec<(Write, Status, &'static str)> {
    vec![
        (
            add_be("h1", 9050).into(),
            Status::AlreadyExists,
            "backend h1:9050 already exists (id 10000)",
        ),
        (
            add_be("h1", 0).into(),
            Status::InvalidArgument,
            "invalid port",
        ),
        (
            add_be("", 1).into(),
            Status::InvalidArgument,
            "invalid host",
        ),
        (
            add_be("a b", 1).into(),
            Status::InvalidArgument,
            "invalid host",
        ),
        (
            Write::from(Command::DropBackend(BackendRef::Id(7))),
            Status::NotFound,
            "unknown backend id 7",
        ),
        (
            Write::from(Command::ModifyBackend {
                target: BackendRef::Addr {
                    host: "h2".into(),
                    port: 1,
                },
                state: None,
                capacity_bytes: Some(1),
            }),
            Status::NotFound,
            "unknown backend h2:1",
        ),
        (
            Write::from(Command::CreateDb { name: "d".into() }),
            Status::AlreadyExists,
            "database \"d\" already exists",
        ),
        (
            Write::from(Command::CreateDb { name: "1x".into() }),
            Status::InvalidArgument,
            "invalid database name",
        ),
        (
            Write::from(Command::CreateDb {
                name: "x".repeat(300),
            }),
            Status::InvalidArgument,
            "longer than 256",
        ),
        (
            Write::from(Command::DropDb {
                name: "nope".into(),
            }),
            Status::NotFound,
            "unknown database \"nope\"",
        ),
    ]
}

/// The same for table, variable and node writes.
fn table_variable_and_node_refusals() -> Vec<(Write, Status, &'static str)> {
    vec![
        (
            table("nope", "t", &["a"]).into(),
            Status::NotFound,
            "unknown database \"nope\"",
        ),
        (
            table("d", "t", &["a"]).into(),
            Status::AlreadyExists,
            "table d.t already exists",
        ),
        (
            table("d", "u", &[]).into(),
            Status::InvalidArgument,
            "invalid column count",
        ),
        (
            table("d", "u", &["a", "A"]).into(),
            Status::InvalidArgument,
            "appears twice",
        ),
        (
            Write::from(Command::DropTable {
                db: "d".into(),
                name: "zz".into(),
            }),
            Status::NotFound,
            "unknown table d.zz",
        ),
        (
            Write::from(NodeCommand::DropFrontend { sid: 9 }),
            Status::NotFound,
            "unknown frontend 9",
        ),
        (
            Write::from(Command::SetVar {
                name: "bad name".into(),
                value: String::new(),
            }),
            Status::InvalidArgument,
            "invalid variable name",
        ),
        (
            Write::from(Command::SetVar {
                name: "v".into(),
                value: "x".repeat(70_000),
            }),
            Status::InvalidArgument,
            "invalid variable value",
        ),
        (
            Write::from(NodeCommand::ReserveIds { count: 0 }),
            Status::InvalidArgument,
            "invalid id count",
        ),
    ]
}
