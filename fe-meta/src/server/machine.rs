//! zab-net's `StateMachine` for fe-meta (one delegation per method to [`MetaState`]) and the
//! node's replay progress as the request handlers see it.
//!
//! INV-1: [`Progress::applied`] is the journal id of the last published catalog version; it is
//! updated by the applied hook right after the publish (on the node's driver, holding no lock
//! the readers need: PITFALLS E11), so a waiter woken for id `j` reads a catalog that has `j`.
//! INV-2: the staleness guard is fed only from applied TIMESTAMP entries (a change of
//! `Catalog::last_timestamp_ms`), with the local wall clock and the entry's epoch (the high
//! 32 bits of its journal id) for the offset-corrected age at apply and the server's monotonic
//! clock for the time since (PITFALLS E14).
//! INV-3: [`Progress::outcome`] tells what replay did with an applied journal id: the state
//! machine records every ignored entry before it publishes (`state_machine` INV-5), so the
//! write path, answered by the node once the entry is applied, reads a settled outcome.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use zab_core::Zxid;
use zab_net::{ApplyError, SnapshotSource, StateMachine};

use crate::server::staleness::{Stale, StalenessGuard};
use crate::state::catalog::{Catalog, SharedCatalog};
use crate::state::machine::{CatalogSnapshot, MetaState};
use crate::state::outcomes::{Lookup, RecentOutcomes};

/// Replay progress: the applied journal id (watchable) and the staleness guard.
#[derive(Debug)]
pub struct Progress {
    applied: watch::Sender<u64>,
    guard: Mutex<StalenessGuard>,
    started: Instant,
    outcomes: Arc<RecentOutcomes>,
}

impl Progress {
    /// Progress starting at `journal_id`, with a staleness tolerance.
    pub fn new(journal_id: u64, tolerance_ms: u64) -> Progress {
        Progress {
            applied: watch::Sender::new(journal_id),
            guard: Mutex::new(StalenessGuard::new(tolerance_ms)),
            started: Instant::now(),
            outcomes: Arc::default(),
        }
    }

    /// What replay did with `journal_id`, which the caller knows was applied here (INV-3).
    pub fn outcome(&self, journal_id: u64) -> Lookup {
        self.outcomes.lookup(journal_id)
    }

    /// The applied journal id (INV-1).
    pub fn applied(&self) -> u64 {
        *self.applied.borrow()
    }

    /// Waits (no lock held) until the applied journal id reaches `target`; false on timeout.
    pub async fn wait_applied(&self, target: u64, limit: Duration) -> bool {
        let mut rx = self.applied.subscribe();
        let reached = tokio::time::timeout(limit, rx.wait_for(|j| *j >= target))
            .await
            .is_ok_and(|r| r.is_ok());
        reached
    }

    /// The server's monotonic clock, ms since start.
    pub fn mono_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Whether reads may be served now (`is_leader`: an established, serving leader).
    pub fn check(&self, is_leader: bool) -> Result<(), Stale> {
        self.guard().check(is_leader, self.mono_ms())
    }

    /// Records that the node served (synced with a leader) since it started (staleness INV-3).
    pub fn mark_synced(&self) {
        self.guard().mark_synced();
    }

    /// The current lag, if a TIMESTAMP was applied.
    pub fn lag_ms(&self) -> Option<u64> {
        self.guard().lag_ms(self.mono_ms())
    }

    /// The staleness tolerance, ms.
    pub fn tolerance_ms(&self) -> u64 {
        self.guard().tolerance_ms()
    }

    fn guard(&self) -> MutexGuard<'_, StalenessGuard> {
        self.guard.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn on_published(&self, catalog: &Catalog, last_ts: &mut u64) {
        let ts = catalog.last_timestamp_ms();
        if ts != *last_ts && ts != 0 {
            *last_ts = ts;
            let mono = self.mono_ms();
            self.guard()
                .observe(ts, catalog.journal_id() >> 32, wall_ms(), mono);
        }
        self.applied.send_replace(catalog.journal_id());
    }
}

/// Milliseconds since the Unix epoch by the local wall clock (0 if it is before 1970).
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The state machine the node drives.
#[derive(Debug)]
pub struct MetaMachine {
    state: MetaState,
}

impl MetaMachine {
    /// A machine publishing to `shared` and reporting to `progress`.
    pub fn new(shared: Arc<SharedCatalog>, progress: Arc<Progress>) -> MetaMachine {
        let mut state = MetaState::new(shared);
        state.set_outcomes(progress.outcomes.clone());
        let mut last_ts = 0;
        state.set_on_applied(Box::new(move |c| progress.on_published(c, &mut last_ts)));
        MetaMachine { state }
    }
}

struct Snap(CatalogSnapshot);

impl SnapshotSource for Snap {
    fn write_to(self: Box<Self>, out: &mut dyn Write) -> std::io::Result<()> {
        self.0.write_to(out)
    }
}

impl StateMachine for MetaMachine {
    fn apply(&mut self, zxid: Zxid, data: &[u8]) -> Result<(), ApplyError> {
        self.state
            .apply(zxid.0, data)
            .map_err(|e| ApplyError::new(e.to_string()))
    }

    fn snapshot(&self) -> Box<dyn SnapshotSource> {
        Box::new(Snap(self.state.snapshot()))
    }

    fn restore(&mut self, zxid: Zxid, src: &mut dyn Read) -> Result<(), ApplyError> {
        self.state
            .restore(zxid.0, src)
            .map_err(|e| ApplyError::new(e.to_string()))
    }
}
