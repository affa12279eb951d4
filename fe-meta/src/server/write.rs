//! The write path, SYNC, and the leader's TIMESTAMP ticker. Membership changes
//! (ADD_FRONTEND, DROP_FRONTEND) take the same path to the leader, where
//! [`super::membership`] proposes them instead of the planner.
//!
//! On the leader: the speculative planner ([`super::pending`]) validates the command (a refusal
//! is a typed error and nothing is logged), then the entry is queued at the node in plan
//! order; once the node reports it committed *and applied here*, the answer is what replay
//! did with it: `Written { journal_id = zxid, created_id }` if it was applied, the typed error
//! of its conflict if replay ignored it. On any other node: the request is forwarded once to
//! the leader's client address ([`super::peer`]); the leader's answer, `Written` or error, is
//! the answer, and a `Written` one waits until this node's applied journal id reaches the
//! returned id (read-your-writes on every node, waited with no lock held: PITFALLS E11);
//! for a membership change the returned id is the new configuration's version. The leader's
//! client address is taken from the node's configuration in force, never from zoo.cfg.
//!
//! INV-1 (order): entries are submitted in the order they were planned — the planner lock (an
//! async mutex) is held while an entry is queued at the node's driver
//! (`Node::enqueue_write`, whose calls that follow one another are proposed in that order:
//! zab-net node INV-5). The driver answers the waiting request directly, and takes all queued
//! writes per wake-up, so concurrent writes are batched without a task in between.
//! INV-2 (planner): an entry stays in the speculative catalog until the node answers it
//! (applied here, or never proposed) or the epoch changes; a client's timeout never removes
//! it, so a write planned after a timed-out one sees it (`pending` INV-2).
//! INV-3 (bounded): a write ends within `leader_wait_ms` + `write_timeout_ms`: with no leader it
//! fails with QUORUM_UNAVAILABLE after `leader_wait_ms`; a forwarded write is forwarded at most
//! once (peer INV-2), and sent again to the next leader at most once, only when it was surely
//! not proposed (not sent, or refused NOT_LEADER); a write that may have been proposed is never
//! retried under a new epoch (PITFALLS E1).
//! INV-4 (answers reflect replay): `Written` is answered only for an entry that replay applied
//! (`machine::Progress::outcome`); an entry that replay ignored is answered ALREADY_EXISTS or
//! NOT_FOUND (its `replay::Conflict`); if the outcome is no longer known, TIMEOUT (check with
//! a read). A forwarded write carries the leader's answer unchanged.
//! INV-5 (deadlines and sessions, [`super::session`]): a write whose deadline passed is not
//! forwarded and not proposed; a session write is planned against the session table and
//! answered from what replay recorded for it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, warn};
use zab_net::{Epoch, Role, ServerId, Zxid};
use zab_net::{NodeStatus, SubmitError};

use super::machine::{wait_applied, wall_ms};
use super::peer::CallError;
use super::pending::NotQueued;
use super::session::{self, Planning, RequestContext};
use super::Shared;
use crate::command::{NodeCommand, Planner, Write};
use crate::protocol::{ErrorReply, RequestBody, ResponseBody, Status};
use crate::state::catalog::Catalog;
use crate::state::outcomes::Lookup;
use crate::state::replay::{Conflict, ConflictKind, Outcome};

/// How a forward failed: not sent (another leader may be tried) or final.
enum Retry {
    Unsent(String),
    Final(ErrorReply),
}

/// The answer to a write that committed but that replay ignored (INV-4): the typed error of
/// its conflict, never `Written`.
fn ignored(journal_id: Zxid, conflict: Conflict) -> ErrorReply {
    let status = match conflict.kind {
        ConflictKind::AlreadyExists => Status::AlreadyExists,
        ConflictKind::NotFound => Status::NotFound,
        ConflictKind::Session => Status::StaleRequest,
    };
    let message = format!(
        "the write was logged as journal id {journal_id} but not applied: {} (an earlier \
         write took effect first); the catalog is unchanged by it",
        conflict.why
    );
    ErrorReply::new(status, message)
}

/// Whether `st` is an established leader that serves.
pub fn is_serving_leader(st: &NodeStatus) -> bool {
    st.role == Role::Leading && st.serving
}

impl Shared {
    /// Waits (at most `leader_wait_ms`) until this node serves under a known leader.
    pub(super) async fn serving_status(&self) -> Option<NodeStatus> {
        let ok = |s: &NodeStatus| (s.serving && s.leader.is_some()) || s.fatal.is_some();
        if let Some(st) = self.node.status_if(ok) {
            return Some(st);
        }
        let mut w = self.node.watch();
        let r = tokio::time::timeout(self.cfg.leader_wait, w.wait_for(ok)).await;
        match r {
            Ok(Ok(s)) => Some(s.clone()),
            _ => None,
        }
    }

    pub(super) fn no_quorum(&self) -> ErrorReply {
        ErrorReply::new(
            Status::QuorumUnavailable,
            format!(
                "no leader: an election is under way or no quorum is reachable (waited {} ms); \
                 writes cannot commit now, reads still work",
                self.cfg.leader_wait.as_millis()
            ),
        )
    }

    pub(super) fn not_leader(&self, leader: Option<u64>, why: &str) -> ErrorReply {
        let leader_addr = leader.and_then(|l| self.member_client_addr(l));
        ErrorReply::not_leader(leader, leader_addr, why)
    }

    /// A write request from a client — a catalog command ([`RequestBody::Write`]) or a
    /// membership change ([`RequestBody::ChangeMembership`]) — (`forwarded`: it came from
    /// another node, INV-3).
    pub async fn write(
        &self,
        ctx: &RequestContext,
        cmd: &RequestBody,
        forwarded: bool,
    ) -> Result<ResponseBody, ErrorReply> {
        ctx.check_deadline("the server could handle it")?;
        let Some(st) = self.serving_status().await else {
            return Err(self.no_quorum());
        };
        if let Some(fatal) = st.fatal {
            return Err(ErrorReply::new(
                Status::Internal,
                format!("the node stopped: {fatal}"),
            ));
        }
        if is_serving_leader(&st) {
            return self.write_here(cmd, &st, ctx).await;
        }
        let leader = st.leader.map(|l| l.0);
        if forwarded {
            let why = "this node is not the leader (a forwarded write is not forwarded again)";
            return Err(self.not_leader(leader, why));
        }
        match self.forward(ctx, cmd, leader).await {
            Err(Retry::Unsent(why)) => self.retry_elsewhere(ctx, cmd, leader, &why).await,
            Err(Retry::Final(e)) => Err(e),
            Ok(r) => Ok(r),
        }
    }

    /// The leader could not be dialled, or refused the write NOT_LEADER (it was not proposed):
    /// wait (bounded) for another
    /// leader and try once more; never more than one retry (INV-3).
    async fn retry_elsewhere(
        &self,
        ctx: &RequestContext,
        cmd: &RequestBody,
        old: Option<u64>,
        why: &str,
    ) -> Result<ResponseBody, ErrorReply> {
        let mut w = self.node.watch();
        let moved = |s: &NodeStatus| s.serving && s.leader.is_some_and(|l| Some(l.0) != old);
        let st = match tokio::time::timeout(self.cfg.leader_wait, w.wait_for(moved)).await {
            Ok(Ok(s)) => s.clone(),
            _ if self.node.status().serving => return Err(self.not_leader(old, why)),
            _ => return Err(self.no_quorum()),
        };
        if is_serving_leader(&st) {
            return self.write_here(cmd, &st, ctx).await;
        }
        let leader = st.leader.map(|l| l.0);
        self.forward(ctx, cmd, leader).await.map_err(|r| match r {
            Retry::Unsent(why) => self.not_leader(leader, &why),
            Retry::Final(e) => e,
        })
    }

    /// A client's write on the leader: a command planned with its session (INV-5), or a
    /// membership change.
    async fn write_here(
        &self,
        body: &RequestBody,
        st: &NodeStatus,
        ctx: &RequestContext,
    ) -> Result<ResponseBody, ErrorReply> {
        let cmd = match body {
            RequestBody::Write(cmd) => cmd,
            RequestBody::ChangeMembership(change) => return self.change_here(ctx, change).await,
            other => {
                return Err(ErrorReply::new(
                    Status::Internal,
                    format!("{} is not a write", other.kind()),
                ))
            }
        };
        let plan = |planner: &mut Planner, applied: &Catalog| {
            session::plan(planner, applied, cmd, ctx.session)
        };
        let (journal_id, created_id) = self.write_local(st, ctx, plan).await?;
        Ok(ResponseBody::Written {
            journal_id,
            created_id,
        })
    }

    /// Plans (with `plan`, unless the deadline passed), submits and waits for a write on the
    /// leader (INV-1, INV-2, INV-4).
    pub async fn write_local(
        &self,
        st: &NodeStatus,
        ctx: &RequestContext,
        plan: impl FnOnce(&mut Planner, &Catalog) -> Planning,
    ) -> Result<(Zxid, Option<u64>), ErrorReply> {
        let limit = self.cfg.write_timeout;
        // Planned in the order the connection sent its writes (`order`).
        ctx.wait_turn().await;
        let submitted = self
            .writer
            .submit(&self.node, st.epoch, limit, |planner, applied| {
                if let Err(e) = ctx.check_deadline("the leader could propose it") {
                    return Planning::Answer(Err(e));
                }
                plan(planner, applied)
            })
            .await
            .map_err(|e| match e {
                NotQueued::Answered(answer) => answer,
                NotQueued::QueueFull(limit) => Err(ErrorReply::new(
                    Status::Timeout,
                    format!(
                        "the node's request queue stayed full for {} ms; the write was not \
                         queued and will not be logged",
                        limit.as_millis()
                    ),
                )),
            });
        ctx.pass_turn();
        let submitted = match submitted {
            Ok(s) => s,
            Err(answer) => return answer,
        };
        let created_id = submitted.created_id();
        let zxid = submitted
            .wait(limit)
            .await
            .map_err(|e| self.submit_error(e))?;
        match (self.progress.outcome(zxid), ctx.session) {
            (Lookup::Known(Outcome::Applied), _) => Ok((zxid, created_id)),
            (Lookup::Known(Outcome::Ignored(c)), Some(tag)) if c.kind == ConflictKind::Session => {
                session::answer_applied(&self.catalog.load(), &tag, zxid)
            }
            (Lookup::Known(Outcome::Ignored(conflict)), _) => Err(ignored(zxid, conflict)),
            (Lookup::Unknown, Some(tag)) => {
                session::answer_applied(&self.catalog.load(), &tag, zxid)
            }
            (Lookup::Unknown, None) => Err(ErrorReply::new(
                Status::Timeout,
                format!(
                    "the write committed as journal id {}, but whether replay applied it is \
                     no longer known here; check with a read",
                    zxid
                ),
            )),
        }
    }

    /// The client-facing form of a submit or sync failure.
    pub fn submit_error(&self, e: SubmitError) -> ErrorReply {
        match e {
            SubmitError::NoLeader | SubmitError::QuorumLost => {
                ErrorReply::new(Status::QuorumUnavailable, e.to_string())
            }
            SubmitError::NotLeader {
                leader: ServerId(l),
            } => self.not_leader(Some(l), &e.to_string()),
            SubmitError::EpochExhausted => self.not_leader(None, &e.to_string()),
            SubmitError::TooLarge { .. } => ErrorReply::new(Status::InvalidArgument, e.to_string()),
            SubmitError::Timeout(_) => ErrorReply::new(Status::Timeout, e.to_string()),
            _ => ErrorReply::new(Status::Internal, e.to_string()),
        }
    }

    async fn forward(
        &self,
        ctx: &RequestContext,
        body: &RequestBody,
        leader: Option<u64>,
    ) -> Result<ResponseBody, Retry> {
        ctx.check_deadline("it could be forwarded to the leader")
            .map_err(Retry::Final)?;
        let Some(addr) = leader.and_then(|l| self.member_client_addr(l)) else {
            let why = "the leader's client address is unknown (its address in the cluster \
                       configuration has no client port: `server.N=...;port`)";
            return Err(Retry::Final(self.not_leader(leader, why)));
        };
        let started = Instant::now();
        // Sent on the link to the leader in the order the connection sent its writes
        // (`order`): the leader plans them in the order it reads them.
        ctx.wait_turn().await;
        let answer = self
            .peers
            .call_noting_sent(
                &addr,
                ctx.forward_meta(),
                body.clone(),
                ctx.limit(self.cfg.write_timeout),
                || ctx.pass_turn(),
            )
            .await
            .map_err(|e| {
                warn!(leader = ?leader, error = %e, "forwarding a write failed");
                let why = format!("forwarding the write to the leader failed: {e}");
                match e {
                    CallError::Connect(_) => Retry::Unsent(why),
                    CallError::Unanswered(_) => Retry::Final(ErrorReply::new(Status::Timeout, why)),
                }
            })?;
        // NOT_LEADER means the write was not proposed (the leader was stepping down, or a
        // transfer was under way): like an unsent request, it may go to the next leader.
        let written = answer.map_err(|e| match e.status {
            Status::NotLeader => Retry::Unsent(e.message),
            _ => Retry::Final(e),
        })?;
        let journal_id = match (&written, body) {
            (ResponseBody::Written { journal_id, .. }, RequestBody::Write(_)) => journal_id,
            (ResponseBody::Reconfigured { version, .. }, RequestBody::ChangeMembership(_)) => {
                version
            }
            _ => {
                let why = "the leader answered a write with a body of another kind";
                return Err(Retry::Final(ErrorReply::new(Status::Internal, why)));
            }
        };
        let left = self.cfg.write_timeout.saturating_sub(started.elapsed());
        let limit = left.max(Duration::from_millis(1));
        if !wait_applied(&self.catalog, *journal_id, limit).await {
            return Err(Retry::Final(ErrorReply::new(
                Status::Timeout,
                format!(
                    "the write committed as journal id {journal_id}, but this node has not \
                     applied it within {} ms (applied {})",
                    self.cfg.write_timeout.as_millis(),
                    self.catalog.journal_id()
                ),
            )));
        }
        debug!(journal_id = journal_id.0, "forwarded write applied here");
        Ok(written)
    }

    /// SYNC: catch up with the leader's commit point; returns the applied journal id.
    pub async fn sync(&self) -> Result<Zxid, ErrorReply> {
        match self.serving_status().await {
            None => return Err(self.no_quorum()),
            Some(NodeStatus {
                fatal: Some(fatal), ..
            }) => {
                return Err(ErrorReply::new(
                    Status::Internal,
                    format!("the node stopped: {fatal}"),
                ));
            }
            Some(_) => {}
        }
        let z = self.node.sync().await.map_err(|e| self.submit_error(e))?;
        if !wait_applied(&self.catalog, z, self.cfg.write_timeout).await {
            return Err(ErrorReply::new(
                Status::Timeout,
                "synced, but not applied in time",
            ));
        }
        Ok(self.catalog.journal_id())
    }
}

/// Marks the progress synced the first time the node serves (an established leader, or a
/// learner after UPTODATE): from then on plain reads follow the staleness rule (staleness
/// INV-3). Ends then, or when the node stops.
pub async fn mark_synced_when_serving(shared: Arc<Shared>) {
    let mut w = shared.node.watch_role();
    if w.wait_for(|st| st.serving || st.stopped)
        .await
        .is_ok_and(|st| st.serving)
    {
        shared.progress.mark_synced();
        debug!("synced with a leader since start: plain reads are served");
    }
}

/// The longest time between two TIMESTAMPs: Doris' FE logs one every 10 s.
pub const TIMESTAMP_INTERVAL_MAX: Duration = Duration::from_secs(10);

/// How often the leader logs a TIMESTAMP under a staleness tolerance of `tolerance_ms`:
/// every [`TIMESTAMP_INTERVAL_MAX`], or every half tolerance when that is shorter (so a
/// follower that keeps up never reads as stale), and at least every millisecond. A follower's
/// staleness on an idle cluster then swings between 0 and this interval, not by minutes.
pub fn timestamp_interval(tolerance_ms: u64) -> Duration {
    Duration::from_millis(tolerance_ms / 2)
        .min(TIMESTAMP_INTERVAL_MAX)
        .max(Duration::from_millis(1))
}

/// The leader's TIMESTAMP ticker: logs the wall clock on becoming a serving leader and then
/// every [`timestamp_interval`], while it leads. Runs until the node stops or the server
/// shuts down. It waits on the node's role watch, which changes with elections, not with
/// every write.
pub async fn run_timestamps(shared: Arc<Shared>) {
    let mut w = shared.node.watch_role();
    let interval = timestamp_interval(shared.cfg.tolerance_ms);
    let mut last: Option<(Epoch, Instant)> = None;
    let mut retry: Option<Instant> = None;
    loop {
        let role = w.borrow_and_update().clone();
        if role.stopped {
            break;
        }
        let due = match last {
            Some((epoch, at)) => epoch != role.epoch || at.elapsed() >= interval,
            None => true,
        };
        let backing_off = retry.is_some_and(|r| r > Instant::now());
        let leading = role.role == Role::Leading && role.serving;
        if leading && due && !backing_off {
            let st = shared.node.status();
            let timestamp = Write::Node(NodeCommand::Timestamp {
                wall_ms: wall_ms(),
                session_expiry_ms: shared.cfg.session_expiry_ms,
            });
            let plan =
                |planner: &mut Planner, _: &Catalog| session::plan_write(planner, &timestamp);
            match shared
                .write_local(&st, &RequestContext::default(), plan)
                .await
            {
                Ok(_) => last = Some((st.epoch, Instant::now())),
                Err(e) => {
                    debug!(error = %e.message, "TIMESTAMP not logged");
                    retry = Some(Instant::now() + Duration::from_millis(200));
                }
            }
        }
        let wait = match (last, retry) {
            (_, Some(r)) if r > Instant::now() => r - Instant::now(),
            (Some((_, at)), _) => interval.saturating_sub(at.elapsed()),
            (None, _) => interval,
        };
        tokio::select! {
            changed = w.changed() => if changed.is_err() { break },
            () = tokio::time::sleep(wait.max(Duration::from_millis(10))) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_come_every_ten_seconds_or_half_the_tolerance_if_shorter() {
        let s = Duration::from_secs;
        // The default tolerance (300 s): Doris' 10 s, not 150 s.
        assert_eq!(timestamp_interval(300_000), s(10));
        assert_eq!(timestamp_interval(20_000), s(10));
        assert_eq!(timestamp_interval(19_000), Duration::from_millis(9_500));
        assert_eq!(timestamp_interval(2_000), s(1));
        assert_eq!(timestamp_interval(1), Duration::from_millis(1));
        assert_eq!(timestamp_interval(u64::MAX), s(10));
    }
}
