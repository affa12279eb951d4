//! Images come from one immutable catalog version (PITFALLS D8, E9): an image whose writing
//! overlaps further applies holds exactly the version it was taken at, and taking it copies
//! nothing — the captured version shares its entities with the live catalog.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

use std::io::{self, Write};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;

use fe_meta::command::{self, Command, NodeCommand, Planner};
use fe_meta::state::catalog::{Catalog, SharedCatalog};
use fe_meta::state::image::{digest, read_image};
use fe_meta::state::machine::MetaState;
use zab_net::Zxid;

/// Plans `cmd` on `planner` and applies it through `sm` as txn `zxid`.
fn write(sm: &mut MetaState, planner: &mut Planner, zxid: u64, cmd: &command::Write) {
    let entry = planner.plan(cmd).unwrap().1.entry;
    sm.apply(Zxid(zxid), &entry).unwrap();
}

fn create_db(i: u64) -> command::Write {
    Command::CreateDb {
        name: format!("db{i}"),
    }
    .into()
}

/// A writer that reports its first write and then blocks until released, so that the test
/// can apply more txns while the image is half written.
struct Gated {
    out: Vec<u8>,
    started: Option<mpsc::Sender<()>>,
    go: mpsc::Receiver<()>,
}

impl Write for Gated {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(started) = self.started.take() {
            started.send(()).unwrap();
            self.go.recv().unwrap();
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// PITFALLS D8: a snapshot is taken at journal id 400, its image write starts and stalls,
/// 600 more txns (new databases, drops of databases in the image, variables, a TIMESTAMP) are
/// applied and published meanwhile, then the write finishes. The image restores to journal id
/// 400 with exactly the digest the catalog had at 400 — none of the later writes leaked in,
/// and the recorded zxid names exactly its content.
#[test]
fn an_image_written_during_applies_holds_exactly_its_version() {
    let shared = Arc::new(SharedCatalog::default());
    let mut sm = MetaState::new(shared.clone());
    let mut planner = Planner::new(Catalog::new());
    for i in 1..=400 {
        write(&mut sm, &mut planner, i, &create_db(i));
    }
    let at_400 = digest(&shared.load()).unwrap();
    let snap = sm.capture();

    let (started_tx, started) = mpsc::channel();
    let (go_tx, go) = mpsc::channel();
    let writer = thread::spawn(move || {
        let mut out = Gated {
            out: Vec::new(),
            started: Some(started_tx),
            go,
        };
        snap.write_image(&mut out).unwrap();
        out.out
    });
    started.recv().unwrap();
    let mut zxid = 400;
    for i in 401..=1_000u64 {
        zxid += 1;
        let cmd = match i % 4 {
            0 => command::Write::from(Command::DropDb {
                name: format!("db{}", (i - 400) / 4),
            }),
            1 => command::Write::from(Command::SetVar {
                name: format!("v{i}"),
                value: "x".into(),
            }),
            2 => command::Write::from(NodeCommand::Timestamp {
                wall_ms: i,
                session_expiry_ms: 0,
            }),
            _ => create_db(i),
        };
        write(&mut sm, &mut planner, zxid, &cmd);
    }
    assert_eq!(shared.journal_id(), Zxid(1_000));
    go_tx.send(()).unwrap();
    let image = writer.join().unwrap();

    let restored = read_image(&image[..]).unwrap();
    assert_eq!(
        restored.journal_id(),
        Zxid(400),
        "the image names its version"
    );
    assert_eq!(
        digest(&restored).unwrap(),
        at_400,
        "later applies leaked in"
    );
    assert_eq!(restored.databases().count(), 400);
    assert_ne!(digest(&shared.load()).unwrap(), at_400);

    // Restored as the snapshot of zxid 400 and replayed onwards, it reaches the live state.
    let mut other = MetaState::new(Arc::new(SharedCatalog::default()));
    other.restore(Zxid(400), &mut &image[..]).unwrap();
    assert_eq!(other.shared().journal_id(), Zxid(400));
}

/// PITFALLS E9: taking a checkpoint does not copy the catalog. The captured version and the
/// live catalog after more writes share every entity neither side changed (the same
/// allocation, not an equal copy), so holding an image's version costs only what changed
/// since; the image is then streamed from that version (`image` INV-1: bounded buffering).
#[test]
fn a_checkpoint_shares_the_catalog_instead_of_copying_it() {
    let shared = Arc::new(SharedCatalog::default());
    let mut sm = MetaState::new(shared.clone());
    let mut planner = Planner::new(Catalog::new());
    let mut zxid = 0;
    for i in 0..2_000 {
        zxid += 1;
        write(&mut sm, &mut planner, zxid, &create_db(i));
    }
    let snap = sm.capture();
    for i in 2_000..2_100 {
        zxid += 1;
        write(&mut sm, &mut planner, zxid, &create_db(i));
    }
    let live = shared.load();
    let held = &snap.0;
    assert_eq!(held.databases().count(), 2_000);
    assert_eq!(live.databases().count(), 2_100);
    let mut shared_entities = 0;
    for db in held.databases() {
        let other = live.database(db.id).unwrap();
        assert!(
            std::ptr::eq(db, other),
            "database {} was copied, not shared",
            db.id
        );
        shared_entities += 1;
    }
    assert_eq!(shared_entities, 2_000);
}
