//! Knobs of a simulation run.

use zab_core::{Config, LearnerType, ServerId};

/// Relative weights of the scheduler's step kinds (0 disables a kind).
#[derive(Clone, Copy, Debug)]
pub struct Weights {
    /// Deliver the head of a link (or a pending `ConnectionLost`).
    pub deliver: u32,
    /// Advance virtual time and tick a node.
    pub tick: u32,
    /// Complete a node's pending fsync (group commit).
    pub fsync: u32,
    /// Finish a pending SNAP install.
    pub install: u32,
    /// A client write on a random node.
    pub write: u32,
    /// A client sync on a random node.
    pub sync: u32,
    /// A fault (crash, restart, wipe, cut, heal, partition, pause, resume).
    pub fault: u32,
}

impl Weights {
    /// The random sweep's mix.
    pub const RANDOM: Weights = Weights {
        deliver: 60,
        tick: 14,
        fsync: 10,
        install: 4,
        write: 6,
        sync: 2,
        fault: 1,
    };
    /// No faults, no client traffic: the system only makes progress.
    pub const QUIET: Weights = Weights {
        deliver: 60,
        tick: 14,
        fsync: 10,
        install: 4,
        write: 0,
        sync: 0,
        fault: 0,
    };
}

/// Everything that defines a run besides the seed's choices.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// The seed of the scheduler (and of the cluster's shape in the random sweep).
    pub seed: u64,
    /// Number of voting members (sids 1..=voters).
    pub voters: usize,
    /// Number of observers (sids after the voters).
    pub observers: usize,
    /// `tickTime` in virtual ms.
    pub tick_ms: u64,
    /// `initLimit`.
    pub init_limit_ticks: u32,
    /// `syncLimit`.
    pub sync_limit_ticks: u32,
    /// FLE finalize wait.
    pub finalize_wait_ms: u64,
    /// `Config::epoch_wait_ticks` (PITFALLS B7; 0 disables the rule).
    pub epoch_wait_ticks: u32,
    /// The leader's in-memory committed-log window.
    pub committed_log_window: usize,
    /// Further behind than this, a learner gets SNAP instead of DIFF-from-log.
    pub diff_from_log_limit: u64,
    /// `Config::snapshot_size_factor` (ZooKeeper's `snapshotSizeFactor`); off (-1) by default so
    /// that scenarios choose DIFF or SNAP with `diff_from_log_limit` alone.
    pub snapshot_size_factor: f64,
    /// Largest zxid counter before a forced new epoch.
    pub max_counter: u32,
    /// `Config::jitter_seed` of every node: seeds the election's resend jitter (each node
    /// still draws its own sequence). 0 in scripted scenarios, the jitter zab-core draws by
    /// default; the random sweep uses the run seed (seed 0 thus keeps the default), so each run
    /// explores its own election timing and a seed still replays exactly.
    pub jitter_seed: u64,
    /// Take a local snapshot every this many applies (0 = never).
    pub snap_every: usize,
    /// Snapshots kept on disk.
    pub snap_retain: usize,
    /// Log records kept before the oldest retained snapshot.
    pub keep_log: usize,
    /// Purge log records covered by retained snapshots (and feed `LogPurged`). On by default;
    /// `ZAB_NO_PURGE=1` turns it off to explore past a purge-related failure.
    pub purge_log: bool,
    /// Tolerate a SNAP that moves a learner's state machine backwards (INV-O4) instead of
    /// failing; `ZAB_ALLOW_SNAP_REGRESS=1`, only to explore past that known core failure.
    pub allow_snap_regress: bool,
    /// Scheduler weights.
    pub weights: Weights,
    /// At most this many nodes down or paused at once in random faults.
    pub max_faulty: usize,
    /// Random faults include wipes (empty data dir, restart without bootstrap), bounded to a
    /// minority of voters not yet resynced (`faults` INV-F3). The sweep turns it on for half
    /// the seeds; `ZAB_NO_WIPES=1` turns it off to explore past a wipe-related failure.
    pub wipes: bool,
    /// A crash keeps a random prefix of the node's unsynced appends (the log durability
    /// contract's L4), drawn from the run's rng; off, a crash keeps none of them (also an
    /// outcome L4 allows), which scripted scenarios rely on. The sweep turns it on.
    pub crash_keeps_unsynced_prefix: bool,
    /// Random faults include slow disks: one node's log fsyncs stall for seconds of virtual
    /// time, longer than an election, and it may lose power inside the span (`faults`
    /// INV-F4). The sweep turns it on; `ZAB_NO_SLOW_DISKS=1` turns it off to explore past a
    /// failure that needs one.
    pub slow_disks: bool,
    /// Random faults include membership changes (`members` INV-MB2): servers added as
    /// followers or observers, members of any role removed, the leader included. The sweep
    /// turns it on for odd seeds without wipes; `ZAB_MEMBERSHIP=0` turns it off (see
    /// [`membership_sweep`]).
    pub membership_changes: bool,
    /// Random faults include leader transfers (`transfer` INV-TR2). The sweep turns it on;
    /// `ZAB_NO_TRANSFERS=1` turns it off to explore past a transfer-related failure.
    pub transfers: bool,
    /// At most this many random membership requests per run.
    pub max_membership_changes: u64,
    /// A deliver step serves one ready link per this many (`cluster` INV-C4); `None` serves
    /// one link per step, as the sweep did before INV-C4 (to replay old failures as they
    /// failed).
    pub links_per_deliver: Option<usize>,
    /// Most plain messages one quorum link holds (`net` INV-N5), zab-net's
    /// `TransportConfig::outbox_len`. `None` scales the real default to the simulation's
    /// window ([`SimOptions::scaled_outbox_len`]: a few dozen to a couple of hundred, small
    /// enough that the sweep's bursts of writes and a paused follower reach it). A given
    /// value is raised to [`SimOptions::min_outbox_len`], below which a node refuses to start.
    pub outbox_len: Option<usize>,
    /// The nodes' drivers limit their intake (`admit`, zab-net's `admission`). On by default;
    /// a test-only switch to show what the limit prevents: off, every request is taken at once.
    pub admission: bool,
    /// Random faults include bursts of client writes ([`super::faults::BURST_WRITES`] at once
    /// on one node) and slow links (`faults` INV-F5).
    pub bursts: bool,
    /// A learner's proposal ACKs and PINGACKs fold in its link to the leader (`net` INV-N6,
    /// zab-net's `transport::UnwrittenAcks`). On by default; a test-only switch to show what
    /// folding prevents.
    pub fold_acks: bool,
    /// Print every step to stderr.
    pub trace: bool,
    /// Keep a log of every message sent (for scenario assertions).
    pub record_events: bool,
}

/// One seed in this many of the sweep runs with bursts of writes and a `syncLimit` longer
/// than `SLOW_GRACE` (so a paused follower stays connected past the grace and its link can
/// overflow): see [`SimOptions::for_seed`].
pub const SMALL_OUTBOX_ONE_IN: u64 = 4;

/// The residue (modulo [`SMALL_OUTBOX_ONE_IN`]) of the seeds that run with the bursts' bounded
/// links ([`SimOptions::sweep_outbox_len`]); even, so those runs make no membership changes.
pub const BURST_SEEDS: u64 = 2;

/// The residue (modulo [`SMALL_OUTBOX_ONE_IN`]) of the seeds that run with the scaled outbox
/// ([`SimOptions::scaled_outbox_len`]) and no bursts, as `ZAB_BOUNDED_LINKS=1` runs every
/// other seed; odd, so bounded links meet membership changes (seed 4107 found a wrong
/// liveness check that way). With [`BURST_SEEDS`], one seed in two runs bounded.
pub const SCALED_OUTBOX_SEEDS: u64 = 3;

/// Whether the random sweep mixes membership changes in: on unless `ZAB_MEMBERSHIP=0`, which
/// explores past a membership-related failure (the even seeds run without changes either way).
pub fn membership_sweep() -> bool {
    std::env::var_os("ZAB_MEMBERSHIP").is_none_or(|v| v != "0")
}

impl SimOptions {
    /// Defaults for `voters` + `observers` nodes.
    pub fn new(seed: u64, voters: usize, observers: usize) -> SimOptions {
        SimOptions {
            seed,
            voters,
            observers,
            tick_ms: 100,
            init_limit_ticks: 10,
            sync_limit_ticks: 5,
            finalize_wait_ms: 40,
            epoch_wait_ticks: 2,
            committed_log_window: 8,
            diff_from_log_limit: 40,
            snapshot_size_factor: -1.0,
            max_counter: u32::MAX,
            jitter_seed: 0,
            snap_every: 15,
            snap_retain: 2,
            keep_log: 5,
            weights: Weights::RANDOM,
            max_faulty: voters + observers,
            wipes: false,
            crash_keeps_unsynced_prefix: false,
            slow_disks: false,
            membership_changes: false,
            transfers: false,
            max_membership_changes: 8,
            links_per_deliver: Some(super::cluster::LINKS_PER_DELIVER),
            outbox_len: None,
            admission: true,
            bursts: false,
            fold_acks: true,
            trace: std::env::var_os("ZAB_TRACE").is_some(),
            record_events: false,
            purge_log: std::env::var_os("ZAB_NO_PURGE").is_none(),
            allow_snap_regress: std::env::var_os("ZAB_ALLOW_SNAP_REGRESS").is_some(),
        }
    }

    /// The random sweep's run for `seed`: the cluster shape (3, 5 or 7 voters, 0–2 observers),
    /// a few knobs and the election jitter seed are drawn from the seed itself; returns the
    /// options and the number of random steps before the liveness phase.
    pub fn for_seed(seed: u64) -> (SimOptions, u64) {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_5eed_5eed_5eed);
        let voters = [3, 3, 5, 5, 7][rng.gen_range(0..5)];
        let observers = rng.gen_range(0..=2);
        let mut o = SimOptions::new(seed, voters, observers);
        if rng.gen_ratio(1, 6) {
            o.max_counter = rng.gen_range(5..40);
        }
        o.snap_every = [0, 7, 15, 40][rng.gen_range(0..4)];
        o.committed_log_window = rng.gen_range(2..20);
        o.diff_from_log_limit = rng.gen_range(5..60);
        o.max_faulty = rng.gen_range(1..=voters);
        let steps = rng.gen_range(2_000..12_000);
        // drawn last, so the draws above (and the runs of seeds without wipes) are unchanged
        o.wipes = std::env::var_os("ZAB_NO_WIPES").is_none() && rng.gen_ratio(1, 2);
        // from the seed, not the rng: off, ZooKeeper's default, or lenient
        o.snapshot_size_factor = [-1.0, 0.33, 1.0][(seed % 3) as usize];
        // the seed itself, not the rng: the ZAB_NO_* switches, which skip draws, keep it
        o.jitter_seed = seed;
        o.crash_keeps_unsynced_prefix = true;
        o.slow_disks = std::env::var_os("ZAB_NO_SLOW_DISKS").is_none();
        // from the seed, not the rng: even seeds run exactly as before changes existed. Not
        // mixed with wipes, which the core does not survive yet (seed 357 with both: the
        // best-placed candidate holds an uncommitted promotion of a member that never logged
        // it, so in the candidate's configuration in force that member is a voter that does not
        // vote, and with two wiped participants not voting either no quorum of that
        // configuration elects; the others' configuration elects the candidate, which never
        // leads, and the liveness phase cannot end).
        o.membership_changes = membership_sweep() && seed % 2 == 1 && !o.wipes;
        o.transfers = std::env::var_os("ZAB_NO_TRANSFERS").is_none();
        o.backpressure_knobs(seed);
        (o, steps)
    }

    /// The sweep's backpressure knobs for `seed`, from a generator of their own (so the draws
    /// above are unchanged). One seed in two runs with unbounded links, as before bounded
    /// links existed (`ZAB_BOUNDED_LINKS=1` gives every seed the scaled outbox); one in
    /// [`SMALL_OUTBOX_ONE_IN`] ([`SCALED_OUTBOX_SEEDS`]) gets the scaled outbox and nothing
    /// else of what follows. A leader's DIFF from memory (its committed-log window *and* every
    /// logged txn it has not seen committed, after a restart its whole log since the newest
    /// snapshot) is longer than any outbox once that history is long enough; it used to go as
    /// plain messages and overflow at every resync (seed 139 with bounded links elected
    /// forever), and is now streamed like the rest of the sync (zab-net `node::out` INV-5,
    /// `exec`). One seed in [`SMALL_OUTBOX_ONE_IN`] ([`BURST_SEEDS`]) gets bounded links
    /// ([`SimOptions::sweep_outbox_len`]), local snapshots every 7 or 15 applies (which bound
    /// that history), bursts of writes, and a `syncLimit` of 1.5–2.5 s: longer than
    /// `SLOW_GRACE`, as ZooKeeper's (5 ticks of 2 s) is, so a paused follower stays connected
    /// past the grace, stops limiting the intake and overflows; the shorter default
    /// `syncLimit` (0.5 s) would always drop it first. `ZAB_NO_BURSTS=1` turns this off to
    /// explore past a failure that needs it; `ZAB_MIN_OUTBOXES=1` runs the burst seeds with
    /// the smallest outboxes zab-net starts with (plus 0–8).
    fn backpressure_knobs(&mut self, seed: u64) {
        use rand::{Rng, SeedableRng};
        let residue = seed % SMALL_OUTBOX_ONE_IN;
        if residue != BURST_SEEDS || std::env::var_os("ZAB_NO_BURSTS").is_some() {
            let bounded =
                residue == SCALED_OUTBOX_SEEDS || std::env::var_os("ZAB_BOUNDED_LINKS").is_some();
            if !bounded {
                self.outbox_len = Some(usize::MAX);
            }
            return;
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x0b0c_0b0c_0b0c_0b0c);
        let above_min = rng.gen_range(0..=8);
        self.outbox_len = Some(self.sweep_outbox_len());
        if std::env::var_os("ZAB_MIN_OUTBOXES").is_some() {
            self.outbox_len = Some(self.min_outbox_len() + above_min);
        }
        self.bursts = true;
        self.sync_limit_ticks = rng.gen_range(15..=25);
        self.snap_every = [7, 15][rng.gen_range(0..2)];
    }

    /// The bounded seeds' outbox: the scaled default plus room for a DIFF of the history a
    /// snapshot every 15 applies leaves in memory (2 × 60 messages).
    pub fn sweep_outbox_len(&self) -> usize {
        self.scaled_outbox_len() + 120
    }

    /// The smallest outbox a node of this configuration starts with: a DIFF of the committed
    /// log window (2 × `committed_log_window` + 16 messages), as zab-net requires.
    pub fn min_outbox_len(&self) -> usize {
        2 * self.committed_log_window + 16
    }

    /// zab-net's default outbox scaled to this run's window: 4096 is about 8 × ZooKeeper's
    /// default window (500) + 96, so 8 × `committed_log_window` + 64. That also holds, beside
    /// the window, the uncommitted tail the intake admits (under 3/8 of the outbox in txns,
    /// two messages each), which a new leader's DIFF from memory carries too: with outboxes
    /// at [`SimOptions::min_outbox_len`] that DIFF may overflow at every resync (a known limit
    /// of zab-net's start check, which counts the window only).
    pub fn scaled_outbox_len(&self) -> usize {
        8 * self.committed_log_window + 64
    }

    /// The outbox this run's links have: [`SimOptions::outbox_len`] or the scaled default,
    /// at least [`SimOptions::min_outbox_len`].
    pub fn effective_outbox_len(&self) -> usize {
        self.outbox_len
            .unwrap_or_else(|| self.scaled_outbox_len())
            .max(self.min_outbox_len())
    }

    /// Every sid and its type.
    pub fn members(&self) -> std::collections::BTreeMap<ServerId, LearnerType> {
        (1..=self.voters + self.observers)
            .map(|i| {
                let t = if i <= self.voters {
                    LearnerType::Participant
                } else {
                    LearnerType::Observer
                };
                (ServerId(i as u64), t)
            })
            .collect()
    }

    /// The peer configuration of `sid`.
    pub fn config(&self, sid: ServerId) -> Config {
        let mut c = Config::new(sid, self.members());
        c.tick_ms = self.tick_ms;
        c.init_limit_ticks = self.init_limit_ticks;
        c.sync_limit_ticks = self.sync_limit_ticks;
        c.finalize_wait_ms = self.finalize_wait_ms;
        c.epoch_wait_ticks = self.epoch_wait_ticks;
        c.committed_log_window = self.committed_log_window;
        c.diff_from_log_limit = self.diff_from_log_limit;
        c.snapshot_size_factor = self.snapshot_size_factor;
        c.max_counter = self.max_counter;
        c.jitter_seed = self.jitter_seed;
        c
    }
}
