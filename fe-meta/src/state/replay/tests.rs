//! Unit tests of replay: errors name the journal id, conflicts are deterministic no-ops with
//! a typed class, session writes apply once, batches publish their prefix.

use bytes::Bytes;

use super::*;
use crate::state::catalog::Database;

fn db(id: u64, name: &str) -> JournalEntry {
    Op::CreateDb(Database {
        id,
        name: name.into(),
    })
    .to_entry()
}

#[test]
fn errors_name_journal_id_and_op_and_change_nothing() {
    let mut c = Catalog::new();
    apply(&mut c, Zxid(5), &db(10_000, "a")).unwrap();
    let before = c.clone();
    let unknown = JournalEntry {
        op: OpCode(999),
        payload: Bytes::new(),
    };
    let err = apply(&mut c, Zxid(6), &unknown).unwrap_err();
    assert_eq!(err.journal_id(), Zxid(6));
    assert!(
        err.to_string().contains("journal id 6 (unknown op 999)"),
        "{err}"
    );
    let bad = JournalEntry {
        op: OpCode::CREATE_DB,
        payload: Bytes::from_static(&[1, 0]),
    };
    let err = apply(&mut c, Zxid(7), &bad).unwrap_err().to_string();
    assert!(
        err.contains("journal id 7 (CREATE_DB (1))") && err.contains("database id"),
        "{err}"
    );
    let err = apply(&mut c, Zxid(5), &db(10_001, "b")).unwrap_err();
    assert!(matches!(
        err,
        ReplayError::OutOfOrder {
            applied: Zxid(5),
            ..
        }
    ));
    assert_eq!(c, before);
}

#[test]
fn conflicts_are_deterministic_no_ops_that_still_burn_ids() {
    let mut c = Catalog::new();
    apply(&mut c, Zxid(1), &db(10_000, "a")).unwrap();
    let change = apply(&mut c, Zxid(2), &db(20_000, "a")).unwrap();
    assert_eq!(change, Change::Ignored("database name already used"));
    assert_eq!(c.databases().count(), 1);
    assert_eq!(c.next_id(), 20_001);
    assert_eq!(c.journal_id(), Zxid(2));
    c.check().unwrap();
}

#[test]
fn an_ignored_entry_reports_a_typed_conflict() {
    use crate::state::catalog::{Column, ColumnType, Table};
    let mut c = Catalog::new();
    assert_eq!(
        apply_entry(&mut c, Zxid(1), &db(10_000, "a")).unwrap(),
        Outcome::Applied
    );
    let taken = apply_entry(&mut c, Zxid(2), &db(10_001, "a")).unwrap();
    assert_eq!(
        taken,
        Outcome::Ignored(Conflict {
            kind: ConflictKind::AlreadyExists,
            why: "database name already used"
        })
    );
    let same_id = apply_entry(&mut c, Zxid(3), &db(10_000, "b")).unwrap();
    assert!(matches!(
        same_id,
        Outcome::Ignored(Conflict {
            kind: ConflictKind::AlreadyExists,
            ..
        })
    ));
    let table = |db_id| {
        Op::CreateTable(Table {
            id: 20_000,
            db_id,
            name: "t".into(),
            columns: vec![Column {
                name: "k".into(),
                ty: ColumnType::Int,
                nullable: false,
                is_key: true,
                default: None,
            }]
            .into(),
        })
        .to_entry()
    };
    let no_db = apply_entry(&mut c, Zxid(4), &table(99)).unwrap();
    assert!(matches!(
        no_db,
        Outcome::Ignored(Conflict {
            kind: ConflictKind::NotFound,
            ..
        })
    ));
    let gone = apply_entry(&mut c, Zxid(5), &Op::DropDb { db_id: 99 }.to_entry()).unwrap();
    assert!(matches!(
        gone,
        Outcome::Ignored(Conflict {
            kind: ConflictKind::NotFound,
            ..
        })
    ));
    assert_eq!(c.databases().count(), 1);
}

#[test]
fn session_writes_apply_once_and_stale_ones_never() {
    let write = |seq: u64, floor: u64, value: &str| {
        Op::SessionWrite {
            tag: SessionTag {
                client_id: 42,
                seq,
                floor,
            },
            inner: Box::new(Op::SetGlobalVariable {
                name: "k".into(),
                value: value.into(),
            }),
        }
        .to_entry()
    };
    let mut c = Catalog::new();
    assert_eq!(
        apply(&mut c, Zxid(1), &write(1, 1, "old")).unwrap(),
        Change::Applied
    );
    assert_eq!(
        apply(&mut c, Zxid(2), &write(2, 2, "new")).unwrap(),
        Change::Applied
    );
    // The first write arrives again (a retry, or bytes delivered late): below the floor.
    let stale = apply(&mut c, Zxid(3), &write(1, 1, "old")).unwrap();
    assert!(matches!(stale, Change::Ignored(why) if why.contains("stale")));
    assert_eq!(c.var("k"), Some("new"));
    // A retry of the latest write: a duplicate, answered with the first outcome.
    let dup = apply(&mut c, Zxid(4), &write(2, 2, "new")).unwrap();
    assert!(matches!(dup, Change::Ignored(why) if why.contains("duplicate")));
    let rec = c.sessions().get(42).unwrap();
    assert_eq!(rec.outcomes.get(&2).map(|o| o.journal_id), Some(Zxid(2)));
    c.check().unwrap();
}

#[test]
fn timestamps_expire_idle_sessions_at_the_same_journal_id_everywhere() {
    let ts = |wall_ms: u64| {
        Op::Timestamp {
            wall_ms,
            session_expiry_ms: 1_000,
        }
        .to_entry()
    };
    let session = |client_id: u64| {
        Op::SessionWrite {
            tag: SessionTag {
                client_id,
                seq: 1,
                floor: 1,
            },
            inner: Box::new(Op::SetGlobalVariable {
                name: "k".into(),
                value: "v".into(),
            }),
        }
        .to_entry()
    };
    let mut c = Catalog::new();
    apply(&mut c, Zxid(1), &ts(10_000)).unwrap();
    apply(&mut c, Zxid(2), &session(1)).unwrap();
    apply(&mut c, Zxid(3), &ts(10_500)).unwrap();
    assert_eq!(c.sessions().len(), 1);
    apply(&mut c, Zxid(4), &ts(11_001)).unwrap();
    assert!(c.sessions().is_empty(), "idle since 10 000, expiry 1 000");
}

#[test]
fn batch_publishes_the_prefix_before_an_error() {
    let shared = SharedCatalog::default();
    let bad = JournalEntry {
        op: OpCode(7),
        payload: Bytes::new(),
    };
    let err = apply_batch(
        &shared,
        [
            (Zxid(1), db(10_000, "a")),
            (Zxid(2), bad),
            (Zxid(3), db(10_001, "b")),
        ],
    );
    assert_eq!(err.unwrap_err().journal_id(), Zxid(2));
    assert_eq!(shared.journal_id(), Zxid(1));
    assert_eq!(shared.load().databases().count(), 1);
}
