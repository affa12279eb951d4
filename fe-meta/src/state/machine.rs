//! The replicated state machine: committed ZAB txns in, published catalog versions out.
//! [`MetaState`] is what the node drives (it implements zab-net's [`StateMachine`], whose
//! snapshots are [`CatalogSnapshot`]s); its inherent methods are the same operations with
//! typed errors, for tools and tests that replay without a node.
//!
//! INV-1: a txn's data is exactly one encoded journal entry; its zxid is its journal id.
//! [`MetaState::apply`] decodes and applies it (`replay` INV-1..5) and then publishes the new
//! version; on error nothing is published and the caller must stop the node. Driven by a node
//! (the [`StateMachine`] impl), applies are published once per driver batch instead
//! ([`StateMachine::publish`], zab-net api INV-1): the node answers a batch's writes only after
//! that publish, and each publish costs a version, a pointer swap, a wake-up of the
//! read-your-writes waiters and the `on_applied` hook, and makes the next apply copy the paths
//! it changes again. A configuration
//! txn of the cluster ([`MetaState::apply_configuration`], zab-net's `apply_membership`) is no
//! journal entry: the catalog is unchanged, but a version with its zxid as journal id is
//! published, so the applied journal id — what reads report and read-your-writes waits on —
//! follows every committed txn, configuration changes included.
//! INV-2: [`MetaState::snapshot`] is O(1): it captures the current version, published or not
//! (a clone of its roots); the image is streamed later from that version by
//! [`CatalogSnapshot::write_image`], on any thread.
//! INV-3: [`MetaState::restore`] replaces the state only with a completely read and verified
//! image (`image` INV-3) whose journal id is not after the snapshot's zxid; a failed restore
//! leaves the state unchanged.
//! INV-4: the `on_applied` hook runs after every publish with the version just published and
//! the number of TIMESTAMP entries applied since the last publish, on the applying thread,
//! holding no lock (PITFALLS E11); it is how the server stamps the local clock when a
//! TIMESTAMP lands (E14).
//! INV-5: an entry that replay ignored is recorded in the [`RecentOutcomes`] (if one is set)
//! before the version that holds it is published (`outcomes` INV-1); a restore tells it which
//! ids the image covers (`outcomes` INV-3).
//! INV-6: a restore drops the replaced version's last references it holds (its own copy and
//! the published pointer) before it returns, and then asks the allocator to return freed
//! memory (`memory` INV-2), so a node restored from a SNAP does not keep two catalogs' worth
//! of heap.

use std::io::{self, Read, Write};
use std::sync::Arc;

use tracing::debug;
use zab_net::Zxid;
use zab_net::{ApplyError, Membership, SnapshotSource, StateMachine};

use crate::state::catalog::{Catalog, SharedCatalog};
use crate::state::image::{read_image, write_image, ImageError};
use crate::state::journal::JournalEntry;
use crate::state::outcomes::RecentOutcomes;
use crate::state::replay::{apply_entry, pass_over, Outcome, ReplayError};

/// A hook called with each newly published version and the TIMESTAMP entries applied since
/// the last publish (INV-4).
pub type AppliedHook = Box<dyn FnMut(&Arc<Catalog>, u64) + Send>;

/// The fe-meta state machine (see the module docs).
pub struct MetaState {
    shared: Arc<SharedCatalog>,
    current: Catalog,
    /// Whether `current` holds applies not yet published.
    unpublished: bool,
    /// TIMESTAMP entries applied since the last publish.
    new_timestamps: u64,
    on_applied: Option<AppliedHook>,
    outcomes: Option<Arc<RecentOutcomes>>,
}

impl std::fmt::Debug for MetaState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetaState")
            .field("journal_id", &self.current.journal_id())
            .finish_non_exhaustive()
    }
}

/// Why a restore failed.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// The image is unreadable or inconsistent.
    #[error("restoring snapshot {zxid}: {source}")]
    Image {
        /// The snapshot's zxid.
        zxid: Zxid,
        /// What is wrong.
        source: ImageError,
    },
    /// The image is newer than the snapshot that holds it.
    #[error("snapshot {zxid} holds an image of journal id {journal_id}, which is after it")]
    AheadOfSnapshot {
        /// The snapshot's zxid.
        zxid: Zxid,
        /// The image's journal id.
        journal_id: Zxid,
    },
}

impl MetaState {
    /// A state machine publishing to `shared`, starting from its current version.
    pub fn new(shared: Arc<SharedCatalog>) -> MetaState {
        let current = Catalog::clone(&shared.load());
        MetaState {
            shared,
            current,
            unpublished: false,
            new_timestamps: 0,
            on_applied: None,
            outcomes: None,
        }
    }

    /// Sets where ignored entries are recorded (INV-5).
    pub fn set_outcomes(&mut self, outcomes: Arc<RecentOutcomes>) {
        self.outcomes = Some(outcomes);
    }

    /// Sets the hook called after each publish (INV-4).
    pub fn set_on_applied(&mut self, hook: AppliedHook) {
        self.on_applied = Some(hook);
    }

    /// Where versions are published.
    pub fn shared(&self) -> &Arc<SharedCatalog> {
        &self.shared
    }

    /// Applies the committed txn `zxid` carrying `data` and publishes it (INV-1).
    pub fn apply(&mut self, zxid: Zxid, data: &[u8]) -> Result<(), ReplayError> {
        self.apply_unpublished(zxid, data)?;
        self.publish_applied();
        Ok(())
    }

    /// Passes over the committed configuration txn `zxid` (INV-1): publishes the unchanged
    /// catalog at journal id `zxid`.
    pub fn apply_configuration(&mut self, zxid: Zxid) -> Result<(), ReplayError> {
        self.pass_over_unpublished(zxid)?;
        self.publish_applied();
        Ok(())
    }

    /// Publishes the applies made since the last publish, if any (INV-1, INV-4).
    pub fn publish_applied(&mut self) {
        if !self.unpublished {
            return;
        }
        self.unpublished = false;
        let timestamps = std::mem::take(&mut self.new_timestamps);
        self.publish(self.current.clone(), timestamps);
    }

    /// The current version, published or not, to be written as an image later (INV-2).
    pub fn capture(&self) -> CatalogSnapshot {
        CatalogSnapshot(Arc::new(self.current.clone()))
    }

    fn apply_unpublished(&mut self, zxid: Zxid, data: &[u8]) -> Result<(), ReplayError> {
        let entry = JournalEntry::decode(data).map_err(|source| ReplayError::Undecodable {
            journal_id: zxid,
            op: op_of(data),
            source,
        })?;
        let timestamp_before = self.current.last_timestamp_ms();
        let outcome = apply_entry(&mut self.current, zxid, &entry)?;
        if let (Outcome::Ignored(conflict), Some(outcomes)) = (outcome, &self.outcomes) {
            outcomes.record(zxid, conflict);
        }
        if self.current.last_timestamp_ms() != timestamp_before {
            self.new_timestamps += 1;
        }
        self.unpublished = true;
        Ok(())
    }

    fn pass_over_unpublished(&mut self, zxid: Zxid) -> Result<(), ReplayError> {
        pass_over(&mut self.current, zxid)?;
        self.unpublished = true;
        Ok(())
    }

    /// Replaces the state with the image read from `src`, the snapshot at `zxid` (INV-3).
    pub fn restore(&mut self, zxid: Zxid, src: &mut dyn Read) -> Result<(), RestoreError> {
        let mut catalog = read_image(src).map_err(|source| RestoreError::Image { zxid, source })?;
        if catalog.journal_id() > zxid {
            return Err(RestoreError::AheadOfSnapshot {
                zxid,
                journal_id: catalog.journal_id(),
            });
        }
        if catalog.journal_id() < zxid {
            debug!(
                zxid = zxid.0,
                image = catalog.journal_id().0,
                "image older than its snapshot zxid"
            );
            catalog.set_journal_id(zxid);
        }
        if let Some(outcomes) = &self.outcomes {
            outcomes.restored(zxid);
        }
        self.current = catalog.clone();
        self.unpublished = false;
        self.new_timestamps = 0;
        let published = Arc::new(catalog);
        self.shared.reset_arc(published.clone());
        if let Some(hook) = self.on_applied.as_mut() {
            hook(&published, 0);
        }
        crate::state::memory::release_freed();
        Ok(())
    }

    fn publish(&mut self, next: Catalog, timestamps: u64) {
        let published = Arc::new(next);
        self.shared.reset_arc(published.clone());
        if let Some(hook) = self.on_applied.as_mut() {
            hook(&published, timestamps);
        }
    }
}

impl StateMachine for MetaState {
    fn apply(&mut self, zxid: Zxid, data: &[u8]) -> Result<(), ApplyError> {
        self.apply_unpublished(zxid, data)
            .map_err(|e| ApplyError::new(e.to_string()))
    }

    fn apply_membership(&mut self, zxid: Zxid, membership: &Membership) -> Result<(), ApplyError> {
        debug!(
            zxid = zxid.0,
            members = membership.members.len(),
            "configuration txn applied"
        );
        self.pass_over_unpublished(zxid)
            .map_err(|e| ApplyError::new(e.to_string()))
    }

    fn publish(&mut self) {
        self.publish_applied();
    }

    fn snapshot(&self) -> Box<dyn SnapshotSource> {
        Box::new(self.capture())
    }

    fn restore(&mut self, zxid: Zxid, src: &mut dyn Read) -> Result<(), ApplyError> {
        MetaState::restore(self, zxid, src).map_err(|e| ApplyError::new(e.to_string()))
    }
}

/// A captured catalog version, written as an image on demand.
#[derive(Clone, Debug)]
pub struct CatalogSnapshot(pub Arc<Catalog>);

impl CatalogSnapshot {
    /// Streams the image to `out` (`image` INV-1: bounded memory).
    pub fn write_image(&self, out: &mut dyn Write) -> io::Result<()> {
        write_image(&self.0, out).map(|_| ()).map_err(|e| match e {
            ImageError::Io { source, .. } => source,
            other => io::Error::other(other.to_string()),
        })
    }
}

impl SnapshotSource for CatalogSnapshot {
    fn write_to(self: Box<Self>, out: &mut dyn Write) -> io::Result<()> {
        self.write_image(out)
    }
}

fn op_of(data: &[u8]) -> crate::state::journal::OpCode {
    match data {
        [a, b, ..] => crate::state::journal::OpCode(u16::from_be_bytes([*a, *b])),
        _ => crate::state::journal::OpCode(u16::MAX),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::state::catalog::Database;
    use crate::state::journal::Op;

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
        let db = Op::CreateDb(Database {
            id: 10_000,
            name: "d".into(),
        });
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
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = seen.clone();
        sm.set_on_applied(Box::new(move |c, _| {
            s2.lock().unwrap().push(c.journal_id())
        }));
        let db = Op::CreateDb(Database {
            id: 10_000,
            name: "d".into(),
        });
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
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = seen.clone();
        sm.set_on_applied(Box::new(move |c, _| {
            s2.lock().unwrap().push(c.journal_id())
        }));
        let mut waiter = shared.watch_applied();
        let db = Op::CreateDb(Database {
            id: 10_000,
            name: "d".into(),
        });
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
}
