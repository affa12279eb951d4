//! The published catalog version: an atomic pointer to an immutable [`Catalog`].
//!
//! INV-1: one writer (the replayer) publishes whole versions; readers load a version with a
//! lock-free pointer read and never see a half-applied entry.
//! INV-2: published journal ids never go down (a version with a lower journal id than the
//! current one is refused by [`SharedCatalog::publish`]).
//! INV-3: the published version's journal id is the node's one applied point: waiters
//! ([`SharedCatalog::watch_applied`]) are woken after the version is stored, so a waiter woken
//! for id `j` loads a catalog that has `j`. Nobody else keeps an applied journal id.

use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio::sync::watch;
use zab_net::Zxid;

use super::Catalog;

/// The current catalog version, shared between the replayer and any number of readers.
#[derive(Debug)]
pub struct SharedCatalog {
    current: ArcSwap<Catalog>,
    applied: watch::Sender<Zxid>,
}

impl SharedCatalog {
    /// Publishes `initial`.
    pub fn new(initial: Catalog) -> SharedCatalog {
        SharedCatalog {
            applied: watch::Sender::new(initial.journal_id()),
            current: ArcSwap::from_pointee(initial),
        }
    }

    /// The current version; holding it blocks nobody.
    pub fn load(&self) -> Arc<Catalog> {
        self.current.load_full()
    }

    /// The journal id of the current version.
    pub fn journal_id(&self) -> Zxid {
        self.current.load().journal_id()
    }

    /// Makes `next` the current version. Returns false (and publishes nothing) if `next` is older
    /// than the current version (INV-2). Only the single replayer calls this.
    pub fn publish(&self, next: Catalog) -> bool {
        if next.journal_id() < self.journal_id() {
            return false;
        }
        self.store(Arc::new(next));
        true
    }

    /// Publishes an already shared version unconditionally (the state machine keeps the `Arc`
    /// it hands to its hook).
    pub fn reset_arc(&self, next: Arc<Catalog>) {
        self.store(next);
    }

    /// Replaces the current version unconditionally (loading an image, e.g. after a SNAP from
    /// the leader or a TRUNC that forces a rebuild).
    pub fn reset(&self, next: Catalog) {
        self.store(Arc::new(next));
    }

    /// The published journal id, watchable: a waiter woken for id `j` loads a catalog that
    /// has `j` (INV-3).
    pub fn watch_applied(&self) -> watch::Receiver<Zxid> {
        self.applied.subscribe()
    }

    fn store(&self, next: Arc<Catalog>) {
        let journal_id = next.journal_id();
        self.current.store(next);
        self.applied.send_replace(journal_id);
    }
}

impl Default for SharedCatalog {
    fn default() -> SharedCatalog {
        SharedCatalog::new(Catalog::new())
    }
}
