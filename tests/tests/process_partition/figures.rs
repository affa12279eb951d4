//! What a partition scenario measured ([`Figures`], printed as one `PARTITION` line) and the
//! bounds it is held to ([`Figures::check`]). All times are from the cut (or from the heal,
//! for `rejoin` and `converge`), observed from the host namespace:
//!
//! - `elect`: the first watcher round, after the cut, in which a node of the majority side
//!   answered as an established leader of a newer epoch (round return time: an upper bound).
//! - `step_down`: the first round in which the cut-off old leader no longer said "leader".
//! - `first_error`: the first error answer to any probe request (write or sync read) on the
//!   cut-off side: the request pending there when it leaves its role (or its leader) fails;
//!   `write_refused`: the first error answer to a probe write (a write sent after the node
//!   stepped down first waits `leader_wait_ms` for a leader, then is refused).
//! - `late_acks`: writes (probes' and linearizability clients') acknowledged by the cut-off
//!   side later than [`ACK_GRACE`] after the cut and before the heal (must be none: it cannot
//!   reach a quorum).
//! - `last_sync`: the return time of the cut-off side's last answered sync read (probes' and
//!   linearizability clients') before the heal; `no_leader_until`: the start of the last round, before any majority node first
//!   claimed leadership, in which every majority node answered and none led. A new leader
//!   commits only after it leads, so its first commit is after `no_leader_until` (watch
//!   INV-2); `last_sync < no_leader_until` shows the deposed leader stopped answering sync
//!   reads before a new leader could commit.
//!
//! Bounds ([`Bounds`]; the margins are for the 2-core CI machine, where the nodes, the load
//! and the checks share the cores): the old leader steps down, and answers its first error,
//! within syncLimit×tickTime + 2 ticks + 300 ms (it leaves on the first 50 ms driver tick
//! after syncLimit of silence; a status poll or an answer takes milliseconds), and refuses
//! writes within that + `leader_wait_ms`. A cut-off *follower* answers its first error, and
//! refuses writes, within `write_timeout_ms` + 500 ms: a write it forwarded before the cut
//! waits for the write timeout, since it cannot know whether the leader proposed it (fe-meta
//! write INV-3). After the heal every node follows one leader within 30 s and the digests are
//! equal within [`CONVERGE_BOUND`] (the figures are far below).

use std::time::{Duration, Instant};

use tests::lincheck::{Kind, Outcome};
use tests::proc::{ClusterSpec, ProcCluster};

use super::driver::{Done, Fault, Plan, Roles};
use super::probe::Op;

/// A write acknowledged by the cut-off side this soon after the cut was in flight at the cut.
pub const ACK_GRACE: Duration = Duration::from_millis(200);
/// From the heal to equal digests on all nodes (the load runs 0.5 s after the rejoin).
pub const CONVERGE_BOUND: Duration = Duration::from_secs(20);

/// When the fault started and ended, and its named phases (impairments).
#[derive(Clone, Debug)]
pub struct Timeline {
    /// The fault began.
    pub cut_at: Instant,
    /// It was healed.
    pub heal_at: Instant,
    /// (name, from, to) of each impairment phase that ran.
    pub phases: Vec<(&'static str, Instant, Instant)>,
    /// How long installing the cuts took (from `cut_at`).
    pub applied: Duration,
}

impl Timeline {
    /// A fault from `cut_at` to `heal_at`, no phases.
    pub fn new(cut_at: Instant, heal_at: Instant) -> Timeline {
        Timeline {
            cut_at,
            heal_at,
            phases: Vec::new(),
            applied: Duration::ZERO,
        }
    }
}

/// A scenario's measurements.
#[derive(Clone, Debug, Default)]
pub struct Figures {
    /// The scenario.
    pub name: String,
    /// tickTime, ms; syncLimit, ticks.
    pub tick_ms: u64,
    /// syncLimit, ticks.
    pub sync_limit: u32,
    /// The old leader was on the cut-off side.
    pub deposed: bool,
    /// Whether the side's refusal is checked (a split; not a flapping or degraded link).
    pub split: bool,
    /// The cut-off side.
    pub minority: Vec<u64>,
    /// Cut to heal.
    pub fault: Duration,
    /// Installing the cuts (all times count from before the first).
    pub applied: Duration,
    /// See the module docs.
    pub elect: Option<Duration>,
    /// See the module docs.
    pub step_down: Option<Duration>,
    /// See the module docs.
    pub first_error: Option<Duration>,
    /// The status of that first error (`QUORUM_UNAVAILABLE`, `TIMEOUT`, ...).
    pub first_error_kind: &'static str,
    /// See the module docs.
    pub write_refused: Option<Duration>,
    /// The last probe write acknowledged by the cut-off side after the cut.
    pub last_ack: Option<Duration>,
    /// See the module docs.
    pub late_acks: usize,
    /// See the module docs.
    pub last_sync: Option<Duration>,
    /// See the module docs.
    pub no_leader_until: Option<Duration>,
    /// Probe sync reads that missed the client's own acknowledged write.
    pub stale_reads: usize,
    /// Times a cut-off node went from following (or leading) to looking, cut to heal.
    pub departures: usize,
    /// Epochs, newer than the old leader's, in which some node answered as leader (cut to
    /// the end of the load).
    pub new_epochs: usize,
    /// Heal to every node following one leader.
    pub rejoin: Duration,
    /// Heal to equal digests (after the load stopped).
    pub converge: Duration,
    /// Ledger writes acknowledged per second: the second before the fault, and each phase.
    pub rates: Vec<(String, f64)>,
}

/// The bounds of the cut-off side (module docs).
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// The first error answer (and the old leader's step-down).
    pub first_error: Duration,
    /// The first refused write.
    pub write_refused: Duration,
}

fn extra_ms(spec: &ClusterSpec, key: &str, default: u64) -> u64 {
    spec.extra
        .iter()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

impl Bounds {
    /// The bounds under `spec` when the leader is (`deposed`) or is not on the cut-off side.
    pub fn of(spec: &ClusterSpec, deposed: bool) -> Bounds {
        if deposed {
            let ticks = u64::from(spec.sync_limit) + 2;
            let first_error = Duration::from_millis(spec.tick_ms * ticks + 300);
            let wait = Duration::from_millis(extra_ms(spec, "leader_wait_ms", 2_000));
            Bounds {
                first_error,
                write_refused: first_error + wait,
            }
        } else {
            let write_timeout = extra_ms(spec, "write_timeout_ms", 10_000);
            let bound = Duration::from_millis(write_timeout + 500);
            Bounds {
                first_error: bound,
                write_refused: bound,
            }
        }
    }
}

fn since(t: Instant, from: Instant) -> Duration {
    t.saturating_duration_since(from)
}

fn opt_ms(d: Option<Duration>) -> String {
    d.map_or("-".into(), |d| d.as_millis().to_string())
}

/// The figures of a finished scenario.
#[allow(clippy::too_many_arguments)]
pub fn compute(
    name: &str,
    c: &ProcCluster,
    plan: &Plan,
    roles: &Roles,
    t: &Timeline,
    done: &Done,
    rejoin: Duration,
    converge: Duration,
) -> Figures {
    let minority = plan.minority.clone();
    let majority: Vec<u64> = c
        .sids()
        .into_iter()
        .filter(|s| !minority.contains(s))
        .collect();
    let (cut, heal) = (t.cut_at, t.heal_at);
    let during: Vec<_> = done
        .rounds
        .iter()
        .filter(|r| r.invoked >= cut && r.invoked < heal)
        .collect();
    let deposed = minority.contains(&roles.leader);
    let elect = during
        .iter()
        .find(|r| majority.iter().any(|s| r.new_leader(*s, roles.old_epoch)))
        .map(|r| since(r.returned, cut));
    let step_down = during
        .iter()
        .find(|r| deposed && r.not_leading(roles.leader))
        .map(|r| since(r.returned, cut));
    let claim = during
        .iter()
        .position(|r| majority.iter().any(|s| leads(r, *s)));
    let no_leader_until = during[..claim.unwrap_or(during.len())]
        .iter()
        .rev()
        .find(|r| r.none_leads(&majority))
        .map(|r| since(r.invoked, cut));
    let mut f = Figures {
        name: name.into(),
        tick_ms: c.spec().tick_ms,
        sync_limit: c.spec().sync_limit,
        deposed,
        split: matches!(plan.fault, Fault::Split(_)),
        minority,
        fault: since(heal, cut),
        applied: t.applied,
        elect,
        step_down,
        no_leader_until: no_leader_until.filter(|_| deposed),
        rejoin,
        converge,
        ..Figures::default()
    };
    f.probe_figures(done, t);
    f.rates = rates(done, t);
    f.departures = departures(&during, &f.minority);
    let epochs: std::collections::BTreeSet<u64> = done
        .rounds
        .iter()
        .filter(|r| r.invoked >= cut)
        .flat_map(|r| r.status.values().flatten())
        .filter(|s| s.is_leader() && s.epoch > roles.old_epoch)
        .map(|s| s.epoch)
        .collect();
    f.new_epochs = epochs.len();
    f
}

/// How often a node of `sids` went from serving (leader, follower) to looking in `rounds`.
fn departures(rounds: &[&super::watch::Round], sids: &[u64]) -> usize {
    let serving = |r: &super::watch::Round, sid: u64| {
        r.status
            .get(&sid)
            .and_then(Option::as_ref)
            .map(|s| s.mode != fe_meta::protocol::Mode::Looking)
    };
    sids.iter()
        .map(|sid| {
            let states: Vec<bool> = rounds.iter().filter_map(|r| serving(r, *sid)).collect();
            states.windows(2).filter(|w| w[0] && !w[1]).count()
        })
        .sum()
}

fn leads(r: &super::watch::Round, sid: u64) -> bool {
    r.status
        .get(&sid)
        .and_then(Option::as_ref)
        .is_some_and(|s| s.mode == fe_meta::protocol::Mode::Leader)
}

fn rates(done: &Done, t: &Timeline) -> Vec<(String, f64)> {
    let second = Duration::from_secs(1);
    let before = done.load.acked_between(t.cut_at - second, t.cut_at) as f64;
    let mut out = vec![("steady".to_string(), before)];
    for (name, from, to) in &t.phases {
        let secs = to.duration_since(*from).as_secs_f64().max(1e-3);
        out.push((
            name.to_string(),
            done.load.acked_between(*from, *to) as f64 / secs,
        ));
    }
    out
}

impl Figures {
    fn probe_figures(&mut self, done: &Done, t: &Timeline) {
        let (cut, heal) = (t.cut_at, t.heal_at);
        let side: Vec<_> = done
            .events
            .iter()
            .filter(|e| self.minority.contains(&e.sid) && e.returned >= cut && e.returned < heal)
            .collect();
        let writes = || side.iter().filter(|e| e.op == Op::Write);
        let first = side
            .iter()
            .filter(|e| e.outcome.is_err())
            .min_by_key(|e| e.returned);
        self.first_error = first.map(|e| since(e.returned, cut));
        self.first_error_kind = first.and_then(|e| e.outcome.err()).unwrap_or("-");
        self.write_refused = writes()
            .filter(|e| e.outcome.is_err())
            .map(|e| since(e.returned, cut))
            .min();
        self.last_ack = writes()
            .filter(|e| e.outcome.is_ok())
            .map(|e| since(e.returned, cut))
            .max();
        self.late_acks = writes()
            .filter(|e| e.outcome.is_ok() && e.returned >= cut + ACK_GRACE)
            .count();
        self.last_sync = side
            .iter()
            .filter(|e| e.op == Op::SyncRead && e.outcome.is_ok())
            .map(|e| since(e.returned, cut))
            .max();
        self.stale_reads = done.events.iter().filter(|e| e.stale).count();
        let (lin_acks, lin_sync) = self.lin_figures(done, t);
        self.late_acks += lin_acks;
        self.last_sync = self.last_sync.max(lin_sync);
    }

    /// The linearizability clients of the cut-off side: writes acknowledged later than
    /// [`ACK_GRACE`] after the cut and before the heal, and the last sync read answered.
    fn lin_figures(&self, done: &Done, t: &Timeline) -> (usize, Option<Duration>) {
        let side = done.lin.ops.iter().filter_map(|op| {
            let sid = done.lin_sid.get(op.client as usize)?;
            let Outcome::Ok { return_ns } = op.outcome else {
                return None;
            };
            let at = done.lin.clock + Duration::from_nanos(return_ns);
            let inside = self.minority.contains(sid) && at >= t.cut_at && at < t.heal_at;
            inside.then_some((matches!(op.kind, Kind::Write { .. }), at))
        });
        let (mut late, mut last) = (0, None);
        for (write, at) in side {
            if write && at >= t.cut_at + ACK_GRACE {
                late += 1;
            }
            if !write {
                last = last.max(Some(since(at, t.cut_at)));
            }
        }
        (late, last)
    }

    /// The `PARTITION` line of the test output.
    pub fn line(&self) -> String {
        let rates: Vec<String> = self
            .rates
            .iter()
            .map(|(n, r)| format!("{n}:{r:.0}"))
            .collect();
        format!(
            "PARTITION scenario={} tick_ms={} sync_limit={} sync_window_ms={} minority={:?} \
             deposed={} fault_ms={} cut_apply_ms={} elect_ms={} step_down_ms={} first_error_ms={} \
             first_error={} \
             write_refused_ms={} \
             last_minority_ack_ms={} late_acks={} last_minority_sync_ms={} \
             no_new_leader_until_ms={} stale_reads={} departures={} new_leader_epochs={} \
             rejoin_ms={} converge_ms={} acked_writes_per_s={}",
            self.name,
            self.tick_ms,
            self.sync_limit,
            self.tick_ms * u64::from(self.sync_limit),
            self.minority,
            self.deposed,
            self.fault.as_millis(),
            self.applied.as_millis(),
            opt_ms(self.elect),
            opt_ms(self.step_down),
            opt_ms(self.first_error),
            self.first_error_kind,
            opt_ms(self.write_refused),
            opt_ms(self.last_ack),
            self.late_acks,
            opt_ms(self.last_sync),
            opt_ms(self.no_leader_until),
            self.stale_reads,
            self.departures,
            self.new_epochs,
            self.rejoin.as_millis(),
            self.converge.as_millis(),
            rates.join(",")
        )
    }

    /// The bounds of the module docs; every violation, one per line.
    pub fn check(&self, spec: &ClusterSpec) -> Result<(), String> {
        let mut bad = Vec::new();
        if self.stale_reads > 0 {
            bad.push(format!(
                "{} sync reads missed their own write",
                self.stale_reads
            ));
        }
        if self.converge > CONVERGE_BOUND {
            bad.push(format!(
                "digests equal only {:?} after the heal",
                self.converge
            ));
        }
        if self.split && !self.minority.is_empty() {
            self.check_minority(spec, &mut bad);
        }
        if bad.is_empty() {
            Ok(())
        } else {
            Err(format!("{}\n{}", bad.join("\n"), self.line()))
        }
    }

    fn check_minority(&self, spec: &ClusterSpec, bad: &mut Vec<String>) {
        let b = Bounds::of(spec, self.deposed);
        let bound = b.first_error;
        if self.late_acks > 0 {
            bad.push(format!(
                "the cut-off side acknowledged {} writes",
                self.late_acks
            ));
        }
        match self.first_error {
            Some(d) if d <= bound => {}
            other => bad.push(format!("first error answer at {other:?}, bound {bound:?}")),
        }
        match self.write_refused {
            Some(d) if d <= b.write_refused => {}
            other => bad.push(format!(
                "first refused write at {other:?}, bound {:?}",
                b.write_refused
            )),
        }
        if !self.deposed {
            return;
        }
        match self.step_down {
            Some(d) if d <= bound => {}
            other => bad.push(format!(
                "old leader stepped down at {other:?}, bound {bound:?}"
            )),
        }
        if self.elect.is_none() {
            bad.push("the majority side elected no leader before the heal".into());
        }
        match (self.last_sync, self.no_leader_until) {
            (None, _) => {}
            (Some(s), Some(n)) if s < n => {}
            (s, n) => bad.push(format!(
                "the deposed leader answered a sync read at {s:?}, not before the point {n:?} \
                 after which a new leader could commit"
            )),
        }
    }
}
