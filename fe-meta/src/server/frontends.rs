//! SHOW FRONTENDS and SHOW MEMBERS, as Doris shows its frontends: a row per member of the
//! node's committed cluster configuration (zoo.cfg's `server.N` lines until a change
//! committed), then per frontend registered in the catalog that is not a member.
//!
//! The answer is the leader's view: a node that is not the serving leader forwards the request
//! to the leader once (with the forwarded bit, like a write); if no leader answers, or the
//! request was already forwarded, it answers itself, with lags unknown and every row's ERR_MSG
//! saying why. The answering node asks every member's STATUS now, in parallel, each call
//! bounded by `peer_status_timeout_ms` (no cache), and remembers each member's last answer:
//! - ALIVE: it answered STATUS to this poll; LAST_HEARTBEAT: when this node last got an answer
//!   from it; REPLAYED_JOURNAL_ID, LAST_START_TIME, VERSION: from its answer now, else from its
//!   last one, else unknown;
//! - LAG (on the leader, for members that answered): against the leader's applied journal id
//!   taken before the poll (`lag` INV-2), dated by the leader's applied history;
//! - ERR_MSG: not answering, answering an error (a node stopped on a fatal error), looking for
//!   a leader, stale beyond the tolerance, in an older epoch, behind since before the lag
//!   window, not a member — or empty.
//!
//! INV-1: a poll ends within twice `peer_status_timeout_ms` (`peer` INV-1); a forwarded
//! SHOW FRONTENDS within three times it; the memory of answers holds one entry per sid ever
//! polled in the configuration.
//! INV-2: on an idle, caught-up cluster answered by the leader, every alive row's lag is 0.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use zab_net::Zxid;

use super::lag::{Lag, WINDOW_MS};
use super::machine::wall_ms;
use super::membership::{member_views, MemberView};
use super::session::RequestContext;
use super::write::is_serving_leader;
use super::Shared;
use crate::protocol::{
    FrontendRow, MemberRow, MemberState, Mode, RequestBody, RequestMeta, ResponseBody, StatusInfo,
};
use crate::state::catalog::Frontend;

/// A member's answer to one STATUS poll.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Polled {
    /// It answered its status.
    Answered(StatusInfo),
    /// It did not answer with a status: why.
    Failed(String),
}

/// A member's last STATUS answer and when it came (wall clock, ms).
#[derive(Clone, Debug, PartialEq, Eq)]
struct LastAnswer {
    at_ms: u64,
    status: StatusInfo,
}

/// What this node last heard from each member (INV-1).
#[derive(Debug, Default)]
pub struct PeerAnswers(Mutex<BTreeMap<u64, LastAnswer>>);

impl PeerAnswers {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, LastAnswer>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The rows of a SHOW FRONTENDS / SHOW MEMBERS answer.
pub struct Rows {
    /// The answering node's catalog journal id.
    pub journal_id: Zxid,
    /// The committed configuration's version.
    pub config_version: Zxid,
    /// By sid.
    pub rows: Vec<MemberRow>,
}

impl Shared {
    /// SHOW FRONTENDS or SHOW MEMBERS (`body`), as the leader sees it (module docs).
    pub async fn show_frontends(
        &self,
        ctx: &RequestContext,
        body: &RequestBody,
        forwarded: bool,
    ) -> ResponseBody {
        let st = self.node.status();
        let why_not_leader = if is_serving_leader(&st) {
            None
        } else if forwarded {
            Some("this node is not the leader (a forwarded request is not forwarded again)".into())
        } else {
            match self.ask_leader(ctx, body, st.leader.map(|l| l.0)).await {
                Ok(answer) => return answer,
                Err(why) => Some(why),
            }
        };
        let rows = self.member_rows(why_not_leader.as_deref()).await;
        match body {
            RequestBody::ShowMembers(_) => ResponseBody::Members {
                journal_id: rows.journal_id,
                config_version: rows.config_version,
                rows: rows.rows,
            },
            _ => ResponseBody::Frontends {
                journal_id: rows.journal_id,
                rows: rows.rows.into_iter().map(|m| m.row).collect(),
            },
        }
    }

    /// The leader's answer to `body`, or why there is none.
    async fn ask_leader(
        &self,
        ctx: &RequestContext,
        body: &RequestBody,
        leader: Option<u64>,
    ) -> Result<ResponseBody, String> {
        let Some(leader) = leader else {
            return Err("no leader is known (an election is under way or no quorum)".into());
        };
        let Some(addr) = self.member_client_addr(leader) else {
            return Err(format!(
                "the leader's (server {leader}) client address is unknown"
            ));
        };
        let limit = ctx.limit(self.cfg.peer_timeout.saturating_mul(3));
        match self
            .peers
            .call(&addr, ctx.forward_meta(), body.clone(), limit)
            .await
        {
            Ok(Ok(answer)) if answer.answers(body.kind()) => Ok(answer),
            Ok(Ok(_)) => Err(format!(
                "the leader (server {leader}) answered another kind"
            )),
            Ok(Err(e)) => Err(format!("the leader (server {leader}) answered: {e}")),
            Err(e) => Err(format!("the leader (server {leader}) did not answer: {e}")),
        }
    }

    /// Every member's STATUS (but this node's), asked now in parallel (INV-1); answers are
    /// remembered.
    pub async fn poll_members(&self) -> BTreeMap<u64, Polled> {
        // Everyone in the configuration in force and in the committed one (they differ while a
        // change is in flight), at the address in force.
        let st = self.node.status();
        let mut members = member_views(&st.committed_membership);
        members.extend(member_views(&st.membership));
        let asks = members
            .into_iter()
            .filter(|(sid, _)| *sid != self.cfg.sid)
            .map(|(sid, m)| async move {
                let Some(addr) = m.client_addr.as_deref() else {
                    return (sid, Polled::Failed("its address has no client port".into()));
                };
                let limit = self.cfg.peer_timeout;
                let r = self
                    .peers
                    .call(addr, RequestMeta::default(), RequestBody::Status, limit)
                    .await;
                let polled = match r {
                    Ok(Ok(ResponseBody::Status(s))) => Polled::Answered(s),
                    Ok(Ok(_)) => Polled::Failed("it answered STATUS with another kind".into()),
                    Ok(Err(e)) => Polled::Failed(format!("it answered with an error: {e}")),
                    Err(e) => Polled::Failed(format!("no answer to STATUS: {e}")),
                };
                (sid, polled)
            });
        let polled: BTreeMap<u64, Polled> =
            futures::future::join_all(asks).await.into_iter().collect();
        let now = wall_ms();
        let mut last = self.frontends.lock();
        for (sid, p) in &polled {
            if let Polled::Answered(s) = p {
                last.insert(
                    *sid,
                    LastAnswer {
                        at_ms: now,
                        status: s.clone(),
                    },
                );
            }
        }
        polled
    }

    /// The rows as this node sees them; `not_leader` says why this node answers although it
    /// is not the serving leader (then lags are unknown).
    async fn member_rows(&self, not_leader: Option<&str>) -> Rows {
        // The leader's applied journal id before the poll: a member that answers it has all
        // of it (INV-2).
        let leader_applied = self.catalog.journal_id();
        let polled = self.poll_members().await;
        let me = self.status_info();
        let now = wall_ms();
        let committed = self.node.status().committed_membership;
        let catalog = self.catalog.load();
        let last = self.frontends.lock().clone();
        let mut rows = BTreeMap::new();
        for (sid, m) in &member_views(&committed) {
            let seen = if *sid == self.cfg.sid {
                Seen::answered(me.clone(), now)
            } else {
                Seen::by_poll(polled.get(sid), last.get(sid), now)
            };
            let mut row = member_row(*sid, m, me.leader_sid, &seen);
            self.judge(&mut row, seen, not_leader, leader_applied);
            let joining = m.state == MemberState::Joining;
            rows.insert(*sid, MemberRow { row, joining });
        }
        for fe in catalog.frontends() {
            rows.entry(fe.sid).or_insert_with(|| catalog_only_row(fe));
        }
        Rows {
            journal_id: catalog.journal_id(),
            config_version: committed.version,
            rows: rows.into_values().collect(),
        }
    }

    /// Fills a member's ERR_MSG (why it is not alive, what its STATUS says is wrong and, on the
    /// leader, what its lag says, else why lags are unknown) and, on the leader, its lags.
    fn judge(
        &self,
        row: &mut FrontendRow,
        seen: Seen,
        not_leader: Option<&str>,
        leader_applied: Zxid,
    ) {
        let mut errors = seen.errors;
        if let Some(s) = seen.status.as_ref().filter(|_| seen.alive) {
            errors.extend(self.status_problems(s));
            match not_leader {
                None => {
                    let lag = self.progress.lag_of(leader_applied, s.applied_journal_id);
                    errors.extend(lag_problems(&lag, s.applied_journal_id, leader_applied));
                    row.lag_entries = lag.entries;
                    row.lag_ms = lag.ms;
                }
                Some(why) => errors.push(format!("lag unknown: {why}")),
            }
        }
        row.err_msg = errors.join("; ");
    }

    /// What is wrong with a member by its own STATUS: not serving, or refusing reads as stale.
    fn status_problems(&self, s: &StatusInfo) -> Vec<String> {
        let mut problems = Vec::new();
        if s.mode == Mode::Looking {
            problems.push("not serving: looking for a leader".to_owned());
        }
        let tolerance = self.progress.tolerance_ms();
        if let Some(staleness) = s.staleness_ms.filter(|ms| *ms > tolerance) {
            problems.push(format!(
                "stale: its catalog is {staleness} ms behind by its last TIMESTAMP (tolerance \
                 {tolerance} ms), it refuses plain reads"
            ));
        }
        problems
    }
}

/// What this node knows of a member after a poll.
struct Seen {
    /// It answered STATUS to this poll (or it is this node).
    alive: bool,
    /// Its answer now, else its last one.
    status: Option<StatusInfo>,
    /// When this node last got an answer from it.
    heartbeat_ms: Option<u64>,
    /// Why it is not alive; empty when it is.
    errors: Vec<String>,
}

impl Seen {
    /// A member that answered `status` at `now_ms`.
    fn answered(status: StatusInfo, now_ms: u64) -> Self {
        Self {
            alive: true,
            status: Some(status),
            heartbeat_ms: Some(now_ms),
            errors: Vec::new(),
        }
    }

    /// Another member by this poll (`polled`, looked at `now_ms`), or by its `last` answer if
    /// it did not answer.
    fn by_poll(polled: Option<&Polled>, last: Option<&LastAnswer>, now_ms: u64) -> Self {
        let why = match polled {
            Some(Polled::Answered(s)) => return Self::answered(s.clone(), now_ms),
            Some(Polled::Failed(why)) => why.clone(),
            None => "it was not asked".to_owned(),
        };
        Self {
            alive: false,
            status: last.map(|l| l.status.clone()),
            heartbeat_ms: last.map(|l| l.at_ms),
            errors: vec![why],
        }
    }
}

/// A member's row from its configuration entry and what was `seen` of it; ERR_MSG empty and
/// lags unknown (`Shared::judge` fills them).
fn member_row(sid: u64, m: &MemberView, leader_sid: Option<u64>, seen: &Seen) -> FrontendRow {
    let status = seen.status.as_ref();
    FrontendRow {
        sid,
        name: format!("fe{sid}"),
        host: m.host.clone(),
        client_port: m.client_port,
        quorum_port: m.ports.map(|p| p.0),
        election_port: m.ports.map(|p| p.1),
        role: m.state.frontend_role(),
        is_leader: leader_sid == Some(sid),
        alive: seen.alive,
        last_heartbeat_ms: seen.heartbeat_ms,
        replayed_journal_id: status.map(|s| s.applied_journal_id),
        last_start_time_ms: status.and_then(|s| s.last_start_time_ms),
        version: status.map(|s| s.version.clone()),
        err_msg: String::new(),
        lag_entries: None,
        lag_ms: None,
    }
}

/// The row of a frontend registered in the catalog that is not a member.
fn catalog_only_row(fe: &Frontend) -> MemberRow {
    let row = FrontendRow {
        sid: fe.sid,
        name: fe.name.clone(),
        host: fe.host.clone(),
        client_port: fe.client_port,
        quorum_port: None,
        election_port: None,
        role: fe.role,
        is_leader: false,
        alive: false,
        last_heartbeat_ms: None,
        replayed_journal_id: None,
        last_start_time_ms: None,
        version: None,
        err_msg: "registered in the catalog but not a member of the cluster configuration".into(),
        lag_entries: None,
        lag_ms: None,
    };
    MemberRow {
        row,
        joining: false,
    }
}

/// What a lag says beyond its numbers.
fn lag_problems(lag: &Lag, applied: Zxid, leader_applied: Zxid) -> Vec<String> {
    let mut problems = Vec::new();
    if lag.older_epoch {
        problems.push(format!(
            "in an older epoch ({}) than the leader's ({}): LAG_ENTRIES unknown",
            applied.epoch().0,
            leader_applied.epoch().0
        ));
    }
    if lag.at_least {
        problems.push(format!(
            "behind since before the {}-minute lag window: LAG_MS is a lower bound",
            WINDOW_MS / 60_000
        ));
    }
    problems
}
