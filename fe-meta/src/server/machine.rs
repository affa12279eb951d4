//! The state machine the node drives ([`state_machine`]: a [`MetaState`] wired to the server)
//! and what the request handlers learn from replay besides the catalog itself ([`Progress`]).
//! The applied journal id is the published catalog's (`SharedCatalog` INV-3), nowhere else.
//!
//! INV-1: the applied hook runs right after each publish, on the node's driver, holding no
//! lock the readers need (PITFALLS E11).
//! INV-2: the staleness guard is fed only from applied TIMESTAMP entries (a change of
//! `Catalog::last_timestamp_ms`), with the local wall clock and the entry's epoch (its
//! journal id's) for the offset-corrected age at apply and the server's monotonic
//! clock for the time since (PITFALLS E14).
//! INV-3: [`Progress::outcome`] tells what replay did with an applied journal id: the state
//! machine records every ignored entry before it publishes (`state_machine` INV-5), so the
//! write path, answered by the node once the entry is applied, reads a settled outcome.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use zab_net::Zxid;

use crate::server::staleness::{Stale, StalenessGuard};
use crate::state::catalog::{Catalog, SharedCatalog};
use crate::state::machine::MetaState;
use crate::state::outcomes::{Lookup, RecentOutcomes};

/// Replay as the request handlers see it: the outcomes of applied entries and the staleness
/// guard fed by applied TIMESTAMPs.
#[derive(Debug)]
pub struct Progress {
    guard: Mutex<StalenessGuard>,
    started: Instant,
    outcomes: Arc<RecentOutcomes>,
    timestamps_applied: AtomicU64,
}

impl Progress {
    /// Progress with a staleness tolerance.
    pub fn new(tolerance_ms: u64) -> Progress {
        Progress {
            guard: Mutex::new(StalenessGuard::new(tolerance_ms)),
            started: Instant::now(),
            outcomes: Arc::default(),
            timestamps_applied: AtomicU64::new(0),
        }
    }

    /// What replay did with `journal_id`, which the caller knows was applied here (INV-3).
    pub fn outcome(&self, journal_id: Zxid) -> Lookup {
        self.outcomes.lookup(journal_id)
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

    /// TIMESTAMP entries applied since the process started (the metrics).
    pub fn timestamps_applied(&self) -> u64 {
        self.timestamps_applied.load(Ordering::Relaxed)
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
            self.timestamps_applied.fetch_add(1, Ordering::Relaxed);
            let mono = self.mono_ms();
            let epoch = u64::from(catalog.journal_id().epoch().0);
            self.guard().observe(ts, epoch, wall_ms(), mono);
        }
    }
}

/// Milliseconds since the Unix epoch by the local wall clock (0 if it is before 1970).
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The state machine the node drives: publishing to `shared`, recording ignored entries and
/// feeding the staleness guard through `progress`.
pub fn state_machine(shared: Arc<SharedCatalog>, progress: Arc<Progress>) -> MetaState {
    let mut state = MetaState::new(shared);
    state.set_outcomes(progress.outcomes.clone());
    let mut last_ts = 0;
    state.set_on_applied(Box::new(move |c| progress.on_published(c, &mut last_ts)));
    state
}

/// Waits (holding no lock) until `catalog` publishes journal id `target`; false on timeout.
pub async fn wait_applied(catalog: &SharedCatalog, target: Zxid, limit: Duration) -> bool {
    let mut applied = catalog.watch_applied();
    let reached = tokio::time::timeout(limit, applied.wait_for(|j| *j >= target))
        .await
        .is_ok_and(|r| r.is_ok());
    reached
}
