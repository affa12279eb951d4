//! One partition scenario from start to end checks ([`run`]): a cluster whose nodes each live
//! in a network namespace of a [`NetLab`], client load pinned to every node (so both sides of
//! the fault have clients), the fault of a [`Plan`] inflicted and healed, then the figures
//! ([`super::figures`]) and the checks: the history linearizable, the cut-off side refusing
//! writes within its bound, no sync read answered by a deposed leader after a new one could
//! commit, and the harness's end checks (every acknowledged write on every node, equal
//! digests).
//!
//! INV: every phase has a deadline; the cluster is dropped before the lab (its processes run
//! in the lab's namespaces).

use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tests::proc::lin_load::{LinLoad, LinReport};
use tests::proc::{
    ClusterSpec, Impairment, Load, LoadReport, NetLab, NodeNet, ProcCluster, TcError,
};

use super::figures::{self, Figures, Timeline};
use super::probe::{Event, Probes};
use super::watch::{Round, Watch};

/// How long the load runs before the fault.
const STEADY: Duration = Duration::from_millis(1000);
/// How long the load runs after the heal (once every node follows one leader).
const AFTER_HEAL: Duration = Duration::from_millis(500);
/// Upper bound of any scenario's load.
const LOAD_MAX: Duration = Duration::from_secs(90);

/// A cut between two nodes.
#[derive(Clone, Copy, Debug)]
pub enum Cut {
    /// Both directions (blackhole routes in both namespaces).
    Both(u64, u64),
    /// `from`'s packets to `to` dropped on the bridge; `to`'s to `from` arrive.
    OneWay {
        /// Whose packets are lost.
        from: u64,
        /// To whom.
        to: u64,
    },
}

/// One impairment phase of a link.
#[derive(Clone, Copy, Debug)]
pub struct Phase {
    /// Its name in the output.
    pub name: &'static str,
    /// What is done to the link.
    pub how: Impairment,
    /// For how long.
    pub hold: Duration,
}

/// The fault.
#[derive(Clone, Debug)]
pub enum Fault {
    /// These cuts, held until the sides settled, then healed together.
    Split(Vec<Cut>),
    /// The link `a`–`b` cut and healed `rounds` times, each state held 300–700 ms (seeded).
    Flap {
        /// One end.
        a: u64,
        /// The other.
        b: u64,
        /// Cut+heal rounds.
        rounds: u32,
        /// The seed of the hold times.
        seed: u64,
    },
    /// Node `sid`'s link degraded in phases, then restored.
    Impair {
        /// The node.
        sid: u64,
        /// The phases, in order.
        phases: Vec<Phase>,
    },
}

/// Who is cut off and how.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The nodes on the small side (empty when no side loses its quorum).
    pub minority: Vec<u64>,
    /// The fault.
    pub fault: Fault,
}

/// The roles when the fault starts.
#[derive(Clone, Debug)]
pub struct Roles {
    /// The leader.
    pub leader: u64,
    /// Its epoch.
    pub old_epoch: u64,
    /// The other nodes.
    pub followers: Vec<u64>,
}

/// A cluster in a lab; the cluster drops first (module INV).
pub struct Env {
    /// The cluster.
    pub c: ProcCluster,
    /// Its network.
    pub lab: NetLab,
}

/// The spec of a partition cluster: the harness's default timing (tickTime 100 ms,
/// syncLimit 5), writes and syncs wait at most 1 s for a leader, a forwarded write 2 s.
pub fn spec(lab: &NetLab, nodes: u64) -> ClusterSpec {
    let net = (1..=nodes)
        .map(|sid| {
            let n = NodeNet {
                host: lab.host(sid),
                netns: Some(lab.netns(sid)),
            };
            (sid, n)
        })
        .collect();
    ClusterSpec {
        nodes,
        extra: vec!["leader_wait_ms=1000".into(), "write_timeout_ms=2000".into()],
        net,
        ..ClusterSpec::default()
    }
}

/// The lab and the cluster, or `None` (a SKIP line printed) when namespaces are unavailable.
pub async fn env(name: &str, nodes: u64) -> Option<Env> {
    let sids: Vec<u64> = (1..=nodes).collect();
    let lab = match NetLab::create(&sids) {
        Ok(lab) => lab,
        Err(why) => {
            println!("SKIP partition scenario {name}: {why}");
            return None;
        }
    };
    let c = ProcCluster::start(name, spec(&lab, nodes)).await.unwrap();
    Some(Env { c, lab })
}

/// Runs scenario `name` on `nodes` voters with the plan `make` draws from the roles; its
/// figures, or `None` when skipped.
pub async fn run(name: &str, nodes: u64, make: impl FnOnce(&Roles) -> Plan) -> Option<Figures> {
    let mut env = env(name, nodes).await?;
    let leader = env.c.leader(Duration::from_secs(15)).await.unwrap();
    let old_epoch = env.c.status(leader).await.unwrap().epoch;
    let followers = env.c.sids().into_iter().filter(|s| *s != leader).collect();
    let roles = Roles {
        leader,
        old_epoch,
        followers,
    };
    let plan = make(&roles);
    let usable = if needs_tc(&plan) {
        env.lab.tc_usable()
    } else {
        Ok(())
    };
    if let Err(why) = usable {
        println!("SKIP partition scenario {name}: cannot drop packets with tc here: {why}");
        return None;
    }
    let running = Running::start(&env.c);
    tokio::time::sleep(STEADY).await;
    let timeline = inflict(&env, &plan, &roles, &running.watch).await;
    let rejoin = rejoin(&mut env.c, timeline.heal_at).await;
    tokio::time::sleep(AFTER_HEAL).await;
    let done = running.stop().await;
    let (_, _) = env.c.wait_converged(Duration::from_secs(30)).await.unwrap();
    let converge = timeline.heal_at.elapsed();
    let f = figures::compute(
        name, &env.c, &plan, &roles, &timeline, &done, rejoin, converge,
    );
    println!("{}", f.line());
    println!("{}", done.lin.line());
    if let Some(why) = done.lin.failure() {
        env.c.keep_dir();
        panic!("{name}: {why}");
    }
    if let Err(why) = f.check(env.c.spec()) {
        env.c.keep_dir();
        panic!("{name}: {why}");
    }
    env.c.finish().await.unwrap();
    Some(f)
}

/// Whether the plan needs tc filters (a one-way cut, a degraded link).
fn needs_tc(plan: &Plan) -> bool {
    match &plan.fault {
        Fault::Split(cuts) => cuts.iter().any(|c| matches!(c, Cut::OneWay { .. })),
        Fault::Flap { .. } => false,
        Fault::Impair { .. } => true,
    }
}

/// Waits until every node follows one leader after the heal; the time from the heal.
async fn rejoin(c: &mut ProcCluster, heal_at: Instant) -> Duration {
    c.leader(Duration::from_secs(30)).await.unwrap();
    heal_at.elapsed()
}

/// The load and the observers of one scenario.
struct Running {
    watch: Watch,
    lin: LinLoad,
    lin_sid: Vec<u64>,
    load: Load,
    probes: Probes,
}

/// What they recorded.
pub struct Done {
    /// The watcher's rounds.
    pub rounds: Vec<Round>,
    /// The linearizability check.
    pub lin: LinReport,
    /// The ledger writers.
    pub load: LoadReport,
    /// The probes' events.
    pub events: Vec<Event>,
    /// The node of each linearizability client (by client id).
    pub lin_sid: Vec<u64>,
}

impl Running {
    /// Two linearizability clients pinned to each node of a 3-node cluster (one each in
    /// bigger ones), one ledger writer and one probe per node, the watcher on all.
    fn start(c: &ProcCluster) -> Running {
        let sids = c.sids();
        let per_node = if sids.len() <= 3 { 2 } else { 1 };
        let lin_sid: Vec<u64> = (0..per_node).flat_map(|_| sids.clone()).collect();
        let rings: Vec<Vec<String>> = lin_sid.iter().map(|s| vec![c.client_addr(*s)]).collect();
        let nodes = sids.iter().map(|s| (*s, c.client_addr(*s))).collect();
        Running {
            watch: Watch::start(nodes, LOAD_MAX),
            lin: LinLoad::start_rings(&rings, LOAD_MAX),
            lin_sid,
            load: Load::start(c, sids.len(), 64, LOAD_MAX),
            probes: Probes::start(c, &sids, LOAD_MAX),
        }
    }

    async fn stop(self) -> Done {
        let load = self.load.stop().await;
        let events = self.probes.stop().await;
        let lin = self.lin.stop(Duration::from_secs(20)).await;
        let rounds = self.watch.stop().await;
        Done {
            rounds,
            lin,
            load,
            events,
            lin_sid: self.lin_sid,
        }
    }
}

/// Inflicts the plan's fault and heals it.
async fn inflict(env: &Env, plan: &Plan, roles: &Roles, watch: &Watch) -> Timeline {
    match &plan.fault {
        Fault::Split(cuts) => split(env, plan, cuts, roles, watch).await,
        Fault::Flap { a, b, rounds, seed } => flap(&env.lab, *a, *b, *rounds, *seed).await,
        Fault::Impair { sid, phases } => impair(&env.lab, *sid, phases).await,
    }
}

fn apply(lab: &NetLab, cut: Cut) {
    match cut {
        Cut::Both(a, b) => lab.cut(a, b).unwrap(),
        Cut::OneWay { from, to } => lab.cut_one_way(from, to).unwrap(),
    }
}

fn heal(lab: &NetLab, cut: Cut) {
    match cut {
        Cut::Both(a, b) => lab.heal(a, b).unwrap(),
        Cut::OneWay { from, to } => lab.heal_one_way(from, to).unwrap(),
    }
}

/// The cuts, held until the majority elected (when the leader is cut off) and 1 s more, and
/// at least 1 s past the cut-off side's write refusal bound ([`figures::Bounds`]).
async fn split(env: &Env, plan: &Plan, cuts: &[Cut], roles: &Roles, watch: &Watch) -> Timeline {
    // Times count from before the first cut: the nodes it separates stop hearing each other
    // at once, while the other `ip` commands still run (tens of ms on a busy machine).
    let cut_at = Instant::now();
    for cut in cuts {
        apply(&env.lab, *cut);
    }
    let applied = cut_at.elapsed();
    let deposed = plan.minority.contains(&roles.leader);
    let bound = figures::Bounds::of(env.c.spec(), deposed).write_refused;
    let mut hold_until = cut_at + bound + Duration::from_secs(1);
    if plan.minority.contains(&roles.leader) {
        let majority: Vec<u64> = env
            .c
            .sids()
            .into_iter()
            .filter(|s| !plan.minority.contains(s))
            .collect();
        let elected = watch
            .wait_for(cut_at, Duration::from_secs(20), |r| {
                majority.iter().any(|s| r.new_leader(*s, roles.old_epoch))
            })
            .await
            .expect("the majority side elected no leader within 20 s");
        hold_until = hold_until.max(elected.returned + Duration::from_secs(1));
    }
    tokio::time::sleep_until(hold_until.into()).await;
    for cut in cuts {
        heal(&env.lab, *cut);
    }
    let mut t = Timeline::new(cut_at, Instant::now());
    t.applied = applied;
    t
}

/// Cuts and heals `a`–`b` `rounds` times.
async fn flap(lab: &NetLab, a: u64, b: u64, rounds: u32, seed: u64) -> Timeline {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let cut_at = Instant::now();
    for _ in 0..rounds {
        lab.cut(a, b).unwrap();
        tokio::time::sleep(Duration::from_millis(rng.gen_range(300..=700))).await;
        lab.heal(a, b).unwrap();
        tokio::time::sleep(Duration::from_millis(rng.gen_range(300..=700))).await;
    }
    Timeline::new(cut_at, Instant::now())
}

/// Each phase on `sid`'s link in turn (a phase this machine cannot do prints SKIP), then the
/// link restored.
async fn impair(lab: &NetLab, sid: u64, phases: &[Phase]) -> Timeline {
    let cut_at = Instant::now();
    let mut t = Timeline::new(cut_at, cut_at);
    for p in phases {
        match lab.impair(sid, p.how) {
            Ok(()) => {
                let from = Instant::now();
                tokio::time::sleep(p.hold).await;
                t.phases.push((p.name, from, Instant::now()));
            }
            Err(TcError::Unsupported(why)) => println!("SKIP phase {}: {why}", p.name),
            Err(e) => panic!("impairing node {sid}'s link ({}): {e}", p.name),
        }
    }
    lab.restore(sid).unwrap();
    t.heal_at = Instant::now();
    t
}
