//! W6, write unavailability during an online membership change: the anchors' ZkBench
//! `reconfig` workload against our `add-follower` / `drop-frontend` (README: growing, shrinking
//! and replacing), on the bench's freshly launched 3-node cluster.
//!
//! One closed-loop writer ([`writer`]) runs throughout. Each trial: the quiet gate (writer
//! paused), 2 s of writes, the change through the client API from a member that stays, 2 s
//! more after it answers; then the figures of ZkBench (`max_gap_ms`, `reconfig_ms`,
//! `baseline_max_gap_ms`, ...). Phases, `trials` each:
//! * `add`: server 4 is started first with `--helper` (it waits until it is a member), then
//!   added as a follower; `promoted_ms` is when a member's SHOW MEMBERS lists it as a voter
//!   (not joining);
//! * `remove`: server 4 is dropped; it exits by itself (status 6, `removed_exit`);
//! * `remove-leader`: the leader is dropped, the writer on the members that stay
//!   (`writer=stays`), then connected to the leader with the others after it in its list
//!   (`writer=pinned-to-removed`: our dropped server exits, so a list of only itself would
//!   never write again); `new_leader_ms` (a staying member's STATUS says leader),
//!   `fresh_client_write_ms` (a new client's first write on a staying member after that),
//!   `old_leader_stepdown_ms` (the removed server stops saying leader); the removed server is
//!   then added back on a fresh data dir with `--helper`;
//! * `grow-kill` (correctness, once): add 4 and 5, SIGKILL two original members (the leader
//!   first); writes must continue and no acknowledged write may be lost: `acked_writes` (the
//!   highest acknowledged sequence number) ≤ `znode_version` (ZkBench's key; here the sequence
//!   number stored in the variable, read with sync on a survivor), so `lost_acked` must be 0.
//!
//! INV-1: every wait is bounded (60 s per step, the writer by the whole run's bound).
//! INV-2: every server W6 starts is stopped and reaped before [`run`] returns ([`joiner`]).
//! INV-3: W6 leaves the cluster changed (members 3..5 after grow-kill, two killed), so it runs
//! after every other workload of the run.

mod grow_kill;
mod joiner;
mod remove_leader;

use remove_leader::still_running;
mod writer;

use std::future::Future;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::super::local_cluster::{elected, in_leader_epoch, poll_endpoints};
use super::cluster::Cluster;
use super::cpu;
use super::report::Line;
use super::{progress, BenchArgs, Params};
use crate::Failure;
use fe_meta::client::{Client, ClientError, ClientOptions};
use fe_meta::protocol::Mode;
use fe_meta::state::catalog::FrontendRole;
use joiner::{exit_text, Joiners};
use writer::{gaps, Writer};

/// Bound of every wait (INV-1).
const STEP: Duration = Duration::from_secs(60);
/// Writes before each change (ZkBench's W6_STEADY).
const STEADY: Duration = Duration::from_secs(2);
/// Writes after each change answered (ZkBench's W6_AFTER).
const AFTER: Duration = Duration::from_secs(2);
/// The original members.
const ORIGINAL: [u64; 3] = [1, 2, 3];

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

fn ms_since(from: Instant, to: Option<Instant>) -> String {
    to.and_then(|t| t.checked_duration_since(from))
        .map_or("-1".to_owned(), ms)
}

fn sids_text(sids: &[u64]) -> String {
    if sids.is_empty() {
        return "none".to_owned();
    }
    sids.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// A failed change's outcome in ZkBench's words where they match (`CONNECTIONLOSS`).
fn rc_text(e: &ClientError) -> String {
    match e {
        ClientError::Closed { .. } => "CONNECTIONLOSS".to_owned(),
        ClientError::Connect { .. } | ClientError::AllEndpointsFailed { .. } => {
            "ConnectFailed".to_owned()
        }
        ClientError::Timeout { .. } | ClientError::WindowFull { .. } => "Timeout".to_owned(),
        ClientError::Protocol(_) => "Protocol".to_owned(),
        ClientError::Server(r) => r.status.name().to_owned(),
    }
}

/// W6's state: the cluster, the servers it started, the writer.
struct W6<'a> {
    cluster: &'a mut Cluster,
    joiners: Joiners,
    writer: Writer,
    args: &'a BenchArgs,
    p: &'a Params,
    /// The voters now.
    members: Vec<u64>,
}

/// What one measured change saw.
struct Measured {
    rc: String,
    version: String,
    call: Instant,
    reconfig: Duration,
    gaps: writer::Gaps,
    window: Duration,
    resumed: bool,
    conn_loss: u64,
    other: u64,
    writer_on: String,
    gate: String,
    cpu: String,
}

impl Measured {
    fn fields(&self, l: &mut Line) {
        l.set("max_gap_ms", ms(self.gaps.max_gap))
            .set("reconfig_ms", ms(self.reconfig))
            .set("reconfig_rc", &self.rc)
            .set("gap_from_ms", format!("{:.1}", self.gaps.gap_from_ms))
            .set("gap_to_ms", format!("{:.1}", self.gaps.gap_to_ms))
            .set("baseline_max_gap_ms", ms(self.gaps.baseline))
            .set("ops_in_window", self.gaps.ops_in_window)
            .set(
                "window_ms",
                format!("{:.0}", self.window.as_secs_f64() * 1e3),
            )
            .set("writes_resumed", if self.resumed { "yes" } else { "no" })
            .set("conn_loss", self.conn_loss)
            .set("session_expired", 0)
            .set("other_err", self.other)
            .set("writer_on", &self.writer_on)
            .set("config_version", &self.version);
    }

    fn tail(&self, l: &mut Line) {
        for part in self.gate.split(' ').chain(self.cpu.split(' ')) {
            if let Some((k, v)) = part.split_once('=') {
                l.set(k, v);
            }
        }
    }
}

/// W6: every phase; its RESULT lines.
pub async fn run(
    cluster: &mut Cluster,
    args: &BenchArgs,
    p: &Params,
) -> Result<Vec<Line>, Failure> {
    let dir = cluster
        .dir()
        .ok_or_else(|| Failure::other("W6 needs a cluster launched by the bench"))?
        .join("w6");
    let exe = std::env::current_exe()
        .map_err(|e| Failure::other(format!("cannot find this executable: {e}")))?;
    let joiners = Joiners::new(exe, dir, args.base_port);
    for sid in [4, 5] {
        let ports = joiners.ports(sid)?;
        for port in [ports.client, ports.quorum, ports.election] {
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
                return Err(Failure::other(format!(
                    "W6: port {port} (server {sid}) is in use; pick another --base-port"
                )));
            }
        }
    }
    let trials = u32::try_from(p.trials.max(1)).unwrap_or(u32::MAX);
    let bound = Instant::now() + STEP * (8 * trials + 8);
    let writer = Writer::start(cluster.endpoints.clone(), p, bound);
    let mut w = W6 {
        cluster,
        joiners,
        writer,
        args,
        p,
        members: ORIGINAL.to_vec(),
    };
    let r = w.phases(p.trials.max(1)).await;
    w.writer.finish().await;
    w.joiners.stop_all().await;
    r
}

impl W6<'_> {
    async fn phases(&mut self, trials: usize) -> Result<Vec<Line>, Failure> {
        let mut lines = Vec::new();
        let mut emit = |l: Line| {
            progress(&format!("W6 {}", l.render()));
            lines.push(l);
        };
        for t in 1..=trials {
            emit(self.add(t).await?);
            emit(self.remove(t).await?);
        }
        for pinned in [false, true] {
            for t in 1..=trials {
                emit(self.remove_leader(t, pinned).await?);
                self.restore().await?;
            }
        }
        emit(self.grow_kill().await?);
        Ok(lines)
    }

    fn endpoint(&self, sid: u64) -> Result<String, Failure> {
        Ok(self.joiners.ports(sid)?.endpoint())
    }

    fn endpoints(&self, sids: &[u64]) -> Result<Vec<String>, Failure> {
        sids.iter().map(|&s| self.endpoint(s)).collect()
    }

    fn sid_of(&self, endpoint: Option<String>) -> String {
        endpoint
            .and_then(|e| (1..=9).find(|&s| self.endpoint(s).is_ok_and(|x| x == e)))
            .map_or("NA".to_owned(), |s| s.to_string())
    }

    /// Waits until every one of `sids` follows one leader and is synced; the leader.
    async fn healthy(&self, sids: &[u64], within: Duration) -> Result<u64, Failure> {
        let eps = self.endpoints(sids)?;
        let deadline = Instant::now() + within;
        loop {
            let st = poll_endpoints(&eps).await;
            if elected(&st) && in_leader_epoch(&st) {
                if let Some(l) = st.iter().flatten().find(|s| s.mode == Mode::Leader) {
                    return Ok(l.sid);
                }
            }
            if Instant::now() >= deadline {
                return Err(Failure::other(format!(
                    "W6: servers {} have no leader followed (and synced from) by all after {within:?}",
                    sids_text(sids)
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn client(&self, sid: u64) -> Result<Client, Failure> {
        let opts = ClientOptions {
            connect_timeout: Duration::from_secs(5),
            request_timeout: self.p.request_timeout,
            ..ClientOptions::DEFAULT
        };
        Client::connect_with(&self.endpoint(sid)?, opts)
            .await
            .map_err(Failure::from)
    }

    /// The quiet gate with the writer paused: `pre_busy_cores=.. quiet_wait_s=..`.
    async fn gate(&self) -> String {
        self.writer.pause(true);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let q = super::quiet(self.args).await;
        self.writer.pause(false);
        format!(
            "pre_busy_cores={} quiet_wait_s={}",
            q.busy.map_or("NA".to_owned(), |b| format!("{b:.2}")),
            q.waited_s
        )
    }

    /// The gate, `STEADY` of writes, the change (`at_call` runs as it is called), `AFTER`
    /// more, and the gap analysis.
    async fn measure<F>(&self, change: F, at_call: impl FnOnce(Instant)) -> Measured
    where
        F: Future<Output = Result<fe_meta::client::Reconfigured, ClientError>>,
    {
        let gate = self.gate().await;
        let first = self.writer.count() + 1;
        let st0 = cpu::stat();
        let steady = Instant::now();
        tokio::time::sleep(STEADY).await;
        let c0 = self.writer.counters();
        let writer_on = self.sid_of(self.writer.on());
        let call = Instant::now();
        at_call(call);
        let r = change.await;
        let ret = Instant::now();
        let (rc, version) = match &r {
            Ok(ok) => ("ok".to_owned(), ok.version.to_string()),
            Err(e) => {
                progress(&format!("W6 the change failed: {e}"));
                (rc_text(e), "NA".to_owned())
            }
        };
        let end = ret + AFTER;
        tokio::time::sleep_until(end.into()).await;
        let hard_end = ret + STEP;
        while Instant::now() < hard_end && self.writer.last_ok().is_none_or(|l| l < end) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let resumed = self.writer.last_ok().is_some_and(|l| l >= end);
        let (busy, nice) = cpu::busy_between(st0, cpu::stat());
        let c1 = self.writer.counters();
        Measured {
            rc,
            version,
            call,
            reconfig: ret - call,
            gaps: gaps(
                &self.writer.ok_times(),
                first,
                steady,
                call,
                end,
                Instant::now(),
            ),
            window: end - call,
            resumed,
            conn_loss: c1.conn_loss - c0.conn_loss,
            other: c1.other - c0.other,
            writer_on,
            gate,
            cpu: format!("machine_busy_cores={busy:.2} nice_cores={nice:.2}"),
        }
    }

    /// Waits (at most `STEP`) until a member's SHOW MEMBERS lists `sid` as a voter that is
    /// not joining: when.
    async fn promoted(&self, via: u64, sid: u64) -> Option<Instant> {
        promoted_at(self.endpoint(via).ok()?, sid, self.p.request_timeout).await
    }

    /// The voters of the committed configuration as `via` sees it.
    async fn voters(&self, via: u64) -> String {
        match self.client(via).await {
            Ok(c) => match c.show_members(true).await {
                Ok(m) => sids_text(
                    &m.value
                        .rows
                        .iter()
                        .filter(|r| r.row.role == FrontendRole::Follower)
                        .map(|r| r.row.sid)
                        .collect::<Vec<_>>(),
                ),
                Err(_) => "NA".to_owned(),
            },
            Err(_) => "NA".to_owned(),
        }
    }

    /// Waits for server `sid`, just dropped, to exit by itself (at most `STEP`): its exit
    /// status as text (`running` if it did not).
    async fn removed_exit(&mut self, sid: u64) -> Result<String, Failure> {
        if self.joiners.runs(sid) {
            return Ok(exit_text(self.joiners.wait_exit(sid, STEP).await));
        }
        // An original server: a child of the cluster, which reaps it.
        let deadline = Instant::now() + STEP;
        let pid = self.cluster.pid(sid);
        while Instant::now() < deadline && pid.is_some_and(still_running) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let exited = !pid.is_some_and(still_running);
        self.cluster.stop_node(sid, Signal::SIGKILL).await?;
        Ok(if exited { "exited" } else { "running" }.to_owned())
    }

    /// Phase add: server 4 joins.
    async fn add(&mut self, t: usize) -> Result<Line, Failure> {
        let sid = 4;
        let leader = self.healthy(&self.members, STEP).await?;
        let admin_on = self.other_than(leader);
        let value = self.joiners.ports(sid)?.server_value();
        self.joiners.start(sid, &self.endpoint(admin_on)?)?;
        let admin = self.client(admin_on).await?;
        let via = self.endpoint(admin_on)?;
        let timeout = self.p.request_timeout;
        let mut poll = None;
        let m = self
            .measure(
                admin.add_frontend(sid, FrontendRole::Follower, &value),
                |_| {
                    poll = Some(tokio::spawn(promoted_at(via, sid, timeout)));
                },
            )
            .await;
        let promoted = match poll {
            Some(h) => h.await.ok().flatten(),
            None => None,
        };
        self.members.push(sid);
        let healthy = self.healthy(&self.members, STEP).await;
        let mut l = Line::new("W6", "ens");
        l.set("phase", "add").set("trial", t).set("server", sid);
        m.fields(&mut l);
        l.set("promoted_ms", ms_since(m.call, promoted));
        self.finish_line(l, &m, admin_on, leader, healthy).await
    }

    /// Phase remove: server 4 is dropped and exits.
    async fn remove(&mut self, t: usize) -> Result<Line, Failure> {
        let sid = 4;
        let leader = self.healthy(&self.members, STEP).await?;
        let admin_on = self.other_than_among(&ORIGINAL, leader);
        let admin = self.client(admin_on).await?;
        let m = self.measure(admin.drop_frontend(sid), |_| {}).await;
        let exit = self.removed_exit(sid).await?;
        self.members.retain(|&s| s != sid);
        let healthy = self.healthy(&self.members, STEP).await;
        let mut l = Line::new("W6", "ens");
        l.set("phase", "remove").set("trial", t).set("server", sid);
        m.fields(&mut l);
        l.set("removed_exit", exit);
        self.finish_line(l, &m, admin_on, leader, healthy).await
    }

    /// The keys every change's line ends with: who asked, the leader before and after, the
    /// voters after and whether the cluster is healthy, then the measurement's tail; the
    /// line, or the health failure.
    async fn finish_line(
        &self,
        mut l: Line,
        m: &Measured,
        admin_on: u64,
        leader: u64,
        healthy: Result<u64, Failure>,
    ) -> Result<Line, Failure> {
        l.set("admin_on", admin_on)
            .set("leader_before", leader)
            .set("leader_after", healthy.as_ref().map_or(0, |&l| l))
            .set("members_after", self.voters(admin_on).await)
            .set("healthy_after", if healthy.is_ok() { "yes" } else { "no" });
        m.tail(&mut l);
        healthy?;
        Ok(l)
    }

    fn other_than(&self, leader: u64) -> u64 {
        self.other_than_among(&self.members, leader)
    }

    fn other_than_among(&self, among: &[u64], leader: u64) -> u64 {
        among
            .iter()
            .copied()
            .find(|&s| s != leader && self.members.contains(&s))
            .unwrap_or(leader)
    }
}

/// Polls `via`'s SHOW MEMBERS (at most `STEP`) until `sid` is a voter that is not joining.
async fn promoted_at(via: String, sid: u64, request_timeout: Duration) -> Option<Instant> {
    let opts = ClientOptions {
        connect_timeout: Duration::from_secs(1),
        request_timeout,
        ..ClientOptions::DEFAULT
    };
    let deadline = Instant::now() + STEP;
    let mut client = None;
    while Instant::now() < deadline {
        if client.is_none() {
            client = Client::connect_with(&via, opts.clone()).await.ok();
        }
        if let Some(c) = &client {
            match c.show_members(false).await {
                Ok(m)
                    if m.value.rows.iter().any(|r| {
                        r.row.sid == sid && r.row.role == FrontendRole::Follower && !r.joining
                    }) =>
                {
                    return Some(Instant::now());
                }
                Ok(_) => {}
                Err(_) => client = None,
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    None
}
