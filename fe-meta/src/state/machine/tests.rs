//! MetaState: applies, publishes, snapshots and restores.

use std::sync::Mutex;

use super::*;
use crate::state::catalog::Database;
use crate::state::journal::Op;

/// Records the journal id of every version `sm` publishes.
fn record_published(sm: &mut MetaState) -> Arc<Mutex<Vec<Zxid>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    sm.set_on_applied(Box::new(move |c, _| {
        s2.lock().unwrap().push(c.journal_id())
    }));
    seen
}

/// Creates database "d" (id 10,000).
fn create_db() -> Op {
    Op::CreateDb(Database {
        id: 10_000,
        name: "d".into(),
    })
}

#[test]
fn applies_driven_by_a_node_are_published_once_per_batch() {
    let shared = Arc::new(SharedCatalog::default());
    let mut sm = MetaState::new(shared.clone());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    sm.set_on_applied(Box::new(move |c, timestamps| {
        s2.lock().unwrap().push((c.journal_id(), timestamps));
    }));
    let node: &mut dyn StateMachine = &mut sm;
    let ts = |wall_ms| {
        Op::Timestamp {
            wall_ms,
            session_expiry_ms: 0,
        }
        .to_entry()
        .encode()
    };
    let db = create_db();
    node.apply(Zxid(1), &ts(7)).unwrap();
    node.apply(Zxid(2), &db.to_entry().encode()).unwrap();
    node.apply(Zxid(3), &ts(9)).unwrap();
    assert_eq!(shared.journal_id(), Zxid(0), "nothing published mid-batch");
    assert!(seen.lock().unwrap().is_empty());
    let snap = node.snapshot();
    let mut image = Vec::new();
    snap.write_to(&mut image).unwrap();
    let from_image = read_image(&mut &image[..]).unwrap();
    assert_eq!(
        from_image.journal_id(),
        Zxid(3),
        "a snapshot has every apply"
    );
    node.publish();
    assert_eq!(shared.journal_id(), Zxid(3));
    assert_eq!(shared.load().databases().count(), 1);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(Zxid(3), 2)],
        "one publish, two TIMESTAMPs"
    );
    node.publish();
    assert_eq!(
        seen.lock().unwrap().len(),
        1,
        "nothing new, nothing published"
    );
    let config = Membership {
        version: Zxid(4),
        members: std::collections::BTreeMap::new(),
    };
    node.apply_membership(Zxid(4), &config).unwrap();
    assert_eq!(shared.journal_id(), Zxid(3));
    node.publish();
    assert_eq!(shared.journal_id(), Zxid(4));
    assert_eq!(*seen.lock().unwrap(), vec![(Zxid(3), 2), (Zxid(4), 0)]);
}

#[test]
fn apply_publishes_snapshot_is_a_pointer_restore_replaces() {
    let shared = Arc::new(SharedCatalog::default());
    let mut sm = MetaState::new(shared.clone());
    let seen = record_published(&mut sm);
    let db = create_db();
    sm.apply(Zxid(5), &db.to_entry().encode()).unwrap();
    assert_eq!(shared.journal_id(), Zxid(5));
    let snap = sm.capture();
    let ts = Op::Timestamp {
        wall_ms: 9,
        session_expiry_ms: 0,
    };
    sm.apply(Zxid(6), &ts.to_entry().encode()).unwrap();
    assert_eq!(
        snap.0.journal_id(),
        Zxid(5),
        "a snapshot is a fixed version"
    );

    let err = sm.apply(Zxid(7), &[0, 99, 1]).unwrap_err();
    assert!(err.to_string().contains("journal id 7"), "{err}");
    assert_eq!(shared.journal_id(), Zxid(6), "nothing published on error");

    let mut image = Vec::new();
    snap.write_image(&mut image).unwrap();
    let mut other = MetaState::new(Arc::new(SharedCatalog::default()));
    other.restore(Zxid(5), &mut &image[..]).unwrap();
    assert_eq!(*other.shared().load(), *snap.0);
    let err = other.restore(Zxid(4), &mut &image[..]).unwrap_err();
    assert!(matches!(err, RestoreError::AheadOfSnapshot { .. }));
    assert!(other.restore(Zxid(5), &mut &image[..9]).is_err());
    assert_eq!(
        other.shared().journal_id(),
        Zxid(5),
        "a failed restore changes nothing"
    );
    assert_eq!(*seen.lock().unwrap(), vec![Zxid(5), Zxid(6)]);
}

#[test]
fn a_configuration_txn_advances_the_journal_id_and_publishes() {
    use std::collections::BTreeMap;
    use zab_net::{Member, MemberRole, ServerId};
    let shared = Arc::new(SharedCatalog::default());
    let mut sm = MetaState::new(shared.clone());
    let seen = record_published(&mut sm);
    let mut waiter = shared.watch_applied();
    let db = create_db();
    sm.apply(Zxid(5), &db.to_entry().encode()).unwrap();
    let before = shared.load();
    let member = Member {
        role: MemberRole::Joining,
        address: "h:1:2;3".into(),
    };
    let config = Membership {
        version: Zxid(6),
        members: BTreeMap::from([(ServerId(4), member)]),
    };
    StateMachine::apply_membership(&mut sm, Zxid(6), &config).unwrap();
    StateMachine::publish(&mut sm);
    assert_eq!(
        shared.journal_id(),
        Zxid(6),
        "the applied journal id follows it"
    );
    assert_eq!(
        *waiter.borrow_and_update(),
        Zxid(6),
        "read-your-writes waiters wake"
    );
    assert_eq!(*seen.lock().unwrap(), vec![Zxid(5), Zxid(6)]);
    let after = shared.load();
    assert_eq!(after.databases().count(), before.databases().count());
    assert_eq!(
        after.entry_count(),
        before.entry_count(),
        "the catalog is unchanged"
    );

    // The next entry follows the configuration txn, and order is still enforced.
    let ts = Op::Timestamp {
        wall_ms: 9,
        session_expiry_ms: 0,
    };
    sm.apply(Zxid(7), &ts.to_entry().encode()).unwrap();
    let err = StateMachine::apply_membership(&mut sm, Zxid(7), &config).unwrap_err();
    assert!(err.to_string().contains("configuration txn 7"), "{err}");
    assert_eq!(shared.journal_id(), Zxid(7), "nothing published on error");

    // A snapshot taken after a configuration txn restores at its journal id.
    StateMachine::apply_membership(&mut sm, Zxid(8), &config).unwrap();
    StateMachine::publish(&mut sm);
    let mut image = Vec::new();
    sm.capture().write_image(&mut image).unwrap();
    let mut other = MetaState::new(Arc::new(SharedCatalog::default()));
    other.restore(Zxid(8), &mut &image[..]).unwrap();
    assert_eq!(other.shared().journal_id(), Zxid(8));
    assert_eq!(*other.shared().load(), *shared.load());
}

std::thread_local! {
    /// The version a test watches, and whether it was gone when the hook ran.
    static WATCHED: std::cell::RefCell<Option<(std::sync::Weak<Catalog>, Option<bool>)>> =
        const { std::cell::RefCell::new(None) };
}

fn note_released() {
    WATCHED.with(|w| {
        if let Some((old, seen)) = w.borrow_mut().as_mut() {
            *seen = Some(old.upgrade().is_none());
        }
    });
}

/// INV-6: the release hook runs on the restoring thread once the replaced version is gone.
#[test]
fn a_restore_lets_go_of_the_old_version_then_releases_memory() {
    assert!(crate::state::memory::set_release_hook(note_released));
    let mut source = MetaState::new(Arc::new(SharedCatalog::default()));
    let db = |id: u64, name: &str| {
        Op::CreateDb(Database {
            id,
            name: name.into(),
        })
        .to_entry()
        .encode()
    };
    source.apply(Zxid(9), &db(10_001, "new")).unwrap();
    let mut image = Vec::new();
    source.capture().write_image(&mut image).unwrap();

    let shared = Arc::new(SharedCatalog::default());
    let mut sm = MetaState::new(shared.clone());
    sm.apply(Zxid(3), &db(10_000, "old")).unwrap();
    WATCHED.with(|w| *w.borrow_mut() = Some((Arc::downgrade(&shared.load()), None)));
    sm.restore(Zxid(9), &mut &image[..]).unwrap();
    let seen = WATCHED
        .with(|w| w.borrow_mut().take())
        .and_then(|(_, seen)| seen);
    assert_eq!(
        seen,
        Some(true),
        "the hook ran, after the old version was dropped"
    );
    assert!(shared.load().database_by_name("new").is_some());
}

#[test]
fn an_ignored_entry_is_recorded_before_its_version_is_published() {
    use crate::state::outcomes::{Lookup, RecentOutcomes};
    use crate::state::replay::{ConflictKind, Outcome};
    let shared = Arc::new(SharedCatalog::default());
    let outcomes = Arc::new(RecentOutcomes::default());
    let mut sm = MetaState::new(shared);
    sm.set_outcomes(outcomes.clone());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (s2, o2) = (seen.clone(), outcomes.clone());
    sm.set_on_applied(Box::new(move |c, _| {
        s2.lock().unwrap().push(o2.lookup(c.journal_id()));
    }));
    let db = |id, name: &str| {
        Op::CreateDb(Database {
            id,
            name: name.into(),
        })
        .to_entry()
        .encode()
    };
    sm.apply(Zxid(1), &db(10_000, "d")).unwrap();
    sm.apply(Zxid(2), &db(10_001, "d")).unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0], Lookup::Known(Outcome::Applied));
    assert!(
        matches!(seen[1], Lookup::Known(Outcome::Ignored(c)) if c.kind == ConflictKind::AlreadyExists),
        "{seen:?}"
    );
}
