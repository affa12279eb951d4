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
mod tests;
