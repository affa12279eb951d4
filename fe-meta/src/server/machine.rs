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
//! INV-4: every publish is recorded in the applied history (`lag` INV-1) that dates other
//! nodes' lag when this node leads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use zab_net::Zxid;

use crate::server::lag::{lag, AppliedHistory, Lag};
use crate::server::staleness::{Stale, StalenessGuard};
use crate::state::catalog::{Catalog, SharedCatalog};
use crate::state::machine::MetaState;
use crate::state::outcomes::{Lookup, RecentOutcomes};

/// Replay as the request handlers see it: the outcomes of applied entries, the staleness
/// guard fed by applied TIMESTAMPs and the history of applied journal ids.
#[derive(Debug)]
pub struct Progress {
    guard: Mutex<StalenessGuard>,
    history: Mutex<AppliedHistory>,
    started: Instant,
    started_wall_ms: u64,
    outcomes: Arc<RecentOutcomes>,
    timestamps_applied: AtomicU64,
}

impl Progress {
    /// Progress with a staleness tolerance.
    pub fn new(tolerance_ms: u64) -> Progress {
        Progress {
            guard: Mutex::new(StalenessGuard::new(tolerance_ms)),
            history: Mutex::default(),
            started: Instant::now(),
            started_wall_ms: wall_ms(),
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

    /// When this server started, by the wall clock (ms since the Unix epoch).
    pub fn started_wall_ms(&self) -> u64 {
        self.started_wall_ms
    }

    /// The lag now of a node that has applied `node_applied`, polled when this node had
    /// applied `leader_applied` (`lag::lag`; meaningful on the leader).
    pub fn lag_of(&self, leader_applied: Zxid, node_applied: Zxid) -> Lag {
        let now = self.mono_ms();
        lag(leader_applied, node_applied, &self.history(), now)
    }

    fn guard(&self) -> MutexGuard<'_, StalenessGuard> {
        self.guard.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn history(&self) -> MutexGuard<'_, AppliedHistory> {
        self.history.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A version was published, `timestamps` TIMESTAMP entries applied since the last one.
    fn on_published(&self, catalog: &Catalog, timestamps: u64, last_ts: &mut u64) {
        let now = self.mono_ms();
        self.history().record(now, catalog.journal_id());
        self.timestamps_applied
            .fetch_add(timestamps, Ordering::Relaxed);
        let ts = catalog.last_timestamp_ms();
        if ts != *last_ts && ts != 0 {
            *last_ts = ts;
            let epoch = u64::from(catalog.journal_id().epoch().0);
            self.guard().observe(ts, epoch, wall_ms(), now);
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
    state.set_on_applied(Box::new(move |c, timestamps| {
        progress.on_published(c, timestamps, &mut last_ts);
    }));
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
