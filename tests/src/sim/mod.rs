//! The deterministic cluster simulation (DESIGN §2, STYLE §9).
//!
//! It runs 3–7 voters (more once membership changes add some) plus observers of the real `zab_core`
//! peer in one thread: a seeded scheduler ([`cluster`]), virtual time, FIFO links that can be cut,
//! healed and partitioned ([`net`]), a disk per node that keeps the log durability contract of
//! `zab_core::io` and loses what was not fsynced on a crash, but possibly a prefix of it
//! ([`disk`]), a driver that executes actions exactly as `zab_core::io` prescribes ([`exec`]),
//! faults ([`faults`], wipes included, bounded so a quorum of initialized voters remains, and slow
//! disks that stall one node's fsyncs across elections), membership changes ([`members`]), a
//! scripting API and the liveness phase ([`script`]), bounded links that overflow like zab-net's
//! outboxes ([`net`] INV-N5) and the drivers' intake limit, zab-net's own ([`admit`]), and safety checkers named after `Zab.tla`
//! that run after every step ([`checker`]).
//!
//! A failing run panics with its seed, its step and the command that replays it:
//! `ZAB_SEED=<n> cargo test -p tests --release --test random -- --nocapture`
//! (`ZAB_TRACE=1` prints every step). The same seed replays the same run exactly: the seed
//! drives the scheduler, the cluster's shape and knobs, and the peers' election jitter
//! (`SimOptions::jitter_seed`, zab-core's `Config::jitter_seed`).

pub mod admit;
pub mod checker;
pub mod cluster;
pub mod core;
pub mod disk;
pub mod exec;
pub mod faults;
pub mod members;
pub mod net;
pub mod node;
pub mod options;
pub mod record;
pub mod script;
pub mod transfer;

pub use cluster::{Cluster, StepKind};
pub use options::{SimOptions, Weights};
pub use record::{EpochWrite, SyncMode, SyncRecord};

/// The outcome of one random run.
#[derive(Clone, Copy, Debug)]
pub struct RunReport {
    /// The seed.
    pub seed: u64,
    /// Steps taken, liveness phase included.
    pub steps: u64,
    /// The trace hash.
    pub hash: u64,
    /// Virtual time reached.
    pub now_ms: u64,
    /// Random wipes injected.
    pub wipes: u64,
    /// Slow-disk faults injected.
    pub stalls: u64,
    /// Power losses inside a slow-disk span.
    pub stalled_power_losses: u64,
    /// Times a node became leader with its own appends still pending.
    pub leaders_with_pending_tail: u64,
    /// Times a node truncated into appends still pending.
    pub truncates_into_pending: u64,
    /// Membership changes asked for.
    pub membership_requests: u64,
    /// Membership changes answered as committed.
    pub membership_commits: u64,
    /// Servers added and started.
    pub added: u64,
    /// Nodes that applied their own removal.
    pub removed: u64,
    /// Leader transfers asked for.
    pub transfers: u64,
    /// Leader transfers answered as completed (the old leader follows the target).
    pub transfers_completed: u64,
    /// Times a node began holding client requests or deferring learners' ones (`admit`).
    pub holds: u64,
    /// Connections broken by a full link (`net` INV-N5).
    pub overflows: u64,
    /// Slow-link faults (`faults` INV-F5).
    pub slow_links: u64,
}

/// One run of the random sweep: random steps with faults and client traffic, then the
/// liveness phase. Panics (with the seed) on any violation.
pub fn run_seed(seed: u64) -> RunReport {
    let (opts, steps) = SimOptions::for_seed(seed);
    run_with(opts, steps)
}

/// A run of the random sweep with the given options and number of random steps (`run_seed`
/// draws both from the seed): replays a seed with one knob changed, for instance a past
/// failure with the election jitter it failed with.
pub fn run_with(opts: SimOptions, steps: u64) -> RunReport {
    let seed = opts.seed;
    let mut c = Cluster::new(opts);
    c.run_random(steps);
    c.check_liveness();
    RunReport {
        seed,
        steps: c.step_no(),
        hash: c.trace_hash(),
        now_ms: c.now_ms(),
        wipes: c.wipes,
        stalls: c.stalls,
        stalled_power_losses: c.stalled_power_losses,
        leaders_with_pending_tail: c.leaders_with_pending_tail,
        truncates_into_pending: c.truncates_into_pending,
        membership_requests: c.membership_requests,
        membership_commits: c.membership_commits,
        added: c.added,
        removed: c.checker().membership.removed().len() as u64,
        transfers: c.transfer_log().total,
        transfers_completed: c.transfer_log().completed() as u64,
        holds: c.holds,
        overflows: c.net().overflows,
        slow_links: c.slow_links,
    }
}
