//! Readers never block replay and always see a whole version: while one thread replays
//! thousands of entries through `MetaState`, readers load versions and check that each is
//! internally consistent and that journal ids never go backwards.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use fe_meta::command::{Command, Planner};
use fe_meta::state::catalog::{Catalog, SharedCatalog};
use fe_meta::state::journal::JournalEntry;
use fe_meta::state::machine::MetaState;
use zab_net::Zxid;

/// PITFALLS E11 (in-process half): replay publishes versions without a lock readers hold, so
/// readers never block it; the server-side waits are in `server_forward`.
#[test]
fn readers_see_whole_versions_while_replay_runs() {
    let shared = Arc::new(SharedCatalog::default());
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (shared, done) = (shared.clone(), done.clone());
            thread::spawn(move || {
                let (mut last, mut versions) = (Zxid::ZERO, 0u64);
                while !done.load(Ordering::Acquire) {
                    let v = shared.load();
                    assert!(v.journal_id() >= last, "journal ids went backwards");
                    last = v.journal_id();
                    v.check().unwrap();
                    // Every database created so far holds exactly its two tables.
                    for db in v.databases() {
                        assert_eq!(v.tables_of(db.id).count(), 2, "half-applied version seen");
                    }
                    versions += 1;
                }
                versions
            })
        })
        .collect();

    let mut planner = Planner::new(Catalog::new());
    let mut zxid = 0u64;
    // A database and its two tables are published as one batch: no reader may see the
    // database without both tables.
    for i in 0..3_000 {
        let cmds = [
            Command::CreateDb {
                name: format!("db{i}"),
            },
            table(i, "a"),
            table(i, "b"),
        ];
        let entries: Vec<_> = cmds
            .iter()
            .map(|c| {
                zxid += 1;
                (Zxid(zxid), planned_entry(&mut planner, c))
            })
            .collect();
        fe_meta::state::replay::apply_batch(&shared, entries).unwrap();
    }
    // Then one entry per publish through the state machine.
    let mut sm = MetaState::new(shared.clone());
    for i in 0..2_000 {
        zxid += 1;
        let set = Command::SetVar {
            name: format!("v{i}"),
            value: i.to_string(),
        };
        sm.apply(Zxid(zxid), &planner.plan(&set.into()).unwrap().1.entry)
            .unwrap();
    }
    drop(sm);
    done.store(true, Ordering::Release);
    for r in readers {
        let versions = r.join().unwrap();
        assert!(versions > 0);
    }
    let last = shared.load();
    assert_eq!(last.databases().count(), 3_000);
    assert_eq!(last.vars().count(), 2_000);
    assert_eq!(last.journal_id(), Zxid(zxid));
}

/// The journal entry `planner` plans for `cmd`.
fn planned_entry(planner: &mut Planner, cmd: &Command) -> JournalEntry {
    let (_, planned) = planner.plan(&cmd.clone().into()).unwrap();
    planned.journal_entry().unwrap()
}

fn table(i: usize, name: &str) -> Command {
    Command::CreateTable {
        db: format!("db{i}"),
        name: name.into(),
        columns: vec![fe_meta::state::catalog::Column {
            name: "c".into(),
            ty: fe_meta::state::catalog::ColumnType::Int,
            nullable: true,
            is_key: false,
            default: None,
        }],
    }
}
