//! Request deadlines and client sessions on the server's write path (`catalog::sessions` holds
//! the replicated table; this module turns it into answers).
//!
//! Deadline: a request's budget (`RequestMeta::budget_ms`, the client's own timeout) becomes an
//! absolute instant when the server reads the request ([`RequestContext::new`]), so clocks need
//! not agree. A forwarded write carries what is left of it ([`RequestContext::forward_meta`]),
//! and the leader makes its own deadline from that.
//!
//! INV-1: a write whose deadline has passed is never proposed: the leader checks it while it
//! holds the planner, right before planning ([`RequestContext::check_deadline`]), and answers
//! DEADLINE_EXCEEDED (nothing logged). A forward is not sent once the deadline has passed, and
//! waits no longer than the deadline.
//! INV-2: the answer to a session write is read from the replicated session table once the
//! entry is applied here ([`answer_applied`]): `Written` with the recorded outcome (the first
//! one, for a retry), STALE_REQUEST when the table refused it — never `Written` for an entry
//! replay did not apply.
//! INV-3: the planner refuses early what replay would refuse ([`plan`]): a write below the
//! client's floor (STALE_REQUEST), and a retry of a write already applied (answered with the
//! first outcome without logging anything).

use std::time::{Duration, Instant};

use zab_net::Zxid;

use super::order::Turn;
use crate::command::{Command, CommandError, Planned, Planner, Ticket, Write};
use crate::protocol::{ErrorReply, RequestMeta, Status};
use crate::state::catalog::{Admission, Catalog, SessionTag};

/// What the server knows about a request beyond its body: its deadline and session.
#[derive(Debug, Default)]
pub struct RequestContext {
    /// When the client stops waiting (by this server's monotonic clock).
    pub deadline: Option<Instant>,
    /// The client's session fields (writes only).
    pub session: Option<SessionTag>,
    /// A client's write: its place in its connection's order (`order`); `None` for reads and
    /// the server's own writes.
    pub turn: Option<Turn>,
}

/// A write's answer: `(journal_id, created_id)` or the error reply.
pub type WriteAnswer = Result<(Zxid, Option<u64>), ErrorReply>;

/// What planning a write gave: an entry to submit, or an answer without submitting.
#[derive(Debug)]
pub enum Planning {
    /// Submit this entry, pending in the planner under the ticket.
    Submit(Ticket, Planned),
    /// Answer now; nothing is logged.
    Answer(WriteAnswer),
}

impl RequestContext {
    /// The context of a request read at `received` with `meta`.
    pub fn new(received: Instant, meta: &RequestMeta) -> RequestContext {
        RequestContext {
            deadline: meta
                .budget_ms
                .map(|ms| received + Duration::from_millis(u64::from(ms))),
            session: meta.session,
            turn: None,
        }
    }

    /// The same context for a write that takes `turn` in its connection's order.
    pub fn in_turn(self, turn: Turn) -> RequestContext {
        RequestContext {
            turn: Some(turn),
            ..self
        }
    }

    /// Waits until the connection's earlier writes were handed on (`order` INV-1).
    pub async fn wait_turn(&self) {
        if let Some(turn) = &self.turn {
            turn.wait().await;
        }
    }

    /// This write was handed on: the connection's next write may go (`order` INV-3).
    pub fn pass_turn(&self) {
        if let Some(turn) = &self.turn {
            turn.pass();
        }
    }

    /// The time left before the deadline (`None`: no deadline).
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// `cap`, shortened to the time left before the deadline.
    pub fn limit(&self, cap: Duration) -> Duration {
        self.remaining().map_or(cap, |left| left.min(cap))
    }

    /// DEADLINE_EXCEEDED if the deadline has passed (`stage`: what was not done).
    pub fn check_deadline(&self, stage: &str) -> Result<(), ErrorReply> {
        match self.remaining() {
            Some(left) if left.is_zero() => Err(ErrorReply::new(
                Status::DeadlineExceeded,
                format!(
                    "the request's deadline passed before {stage}; it was not proposed and \
                     will not be applied"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The meta a forwarded copy carries: the budget left (at least 1 ms) and the session.
    pub fn forward_meta(&self) -> RequestMeta {
        RequestMeta {
            budget_ms: self
                .remaining()
                .map(|left| u32::try_from(left.as_millis()).unwrap_or(u32::MAX).max(1)),
            session: self.session,
        }
    }
}

fn stale(tag: &SessionTag, floor: u64) -> ErrorReply {
    ErrorReply::from(&CommandError::StaleRequest {
        client_id: tag.client_id,
        seq: tag.seq,
        floor,
    })
}

/// Plans `cmd` (INV-3): with a session, against the applied table first (a retry of a write
/// that already committed is answered with its outcome), then the planner's speculative one.
pub fn plan(
    planner: &mut Planner,
    applied: &Catalog,
    cmd: &Command,
    session: Option<SessionTag>,
) -> Planning {
    let Some(tag) = session else {
        return plan_write(planner, &Write::Client(cmd.clone()));
    };
    match applied.sessions().admit(&tag) {
        Admission::Duplicate(first) => {
            return Planning::Answer(Ok((first.journal_id, first.created_id)))
        }
        Admission::Stale { floor } => return Planning::Answer(Err(stale(&tag, floor))),
        Admission::Fresh => {}
    }
    match planner.plan_tagged(cmd, tag) {
        Ok((ticket, planned)) => Planning::Submit(ticket, planned),
        Err(CommandError::Duplicate { outcome, .. }) if outcome.journal_id != Zxid::ZERO => {
            Planning::Answer(Ok((outcome.journal_id, outcome.created_id)))
        }
        Err(CommandError::Duplicate { client_id, seq, .. }) => {
            Planning::Answer(Err(ErrorReply::new(
                Status::Timeout,
                format!(
                "request {seq} of client {client_id:#x} is already being committed; its outcome \
                 is not known yet (this client may send it again, as it applies at most once \
                 per client; from a new client, check with a sync read before writing it again)"
            ),
            )))
        }
        Err(e) => Planning::Answer(Err(ErrorReply::from(&e))),
    }
}

/// Plans `write` without a session: an entry to submit, or the refusal.
pub fn plan_write(planner: &mut Planner, write: &Write) -> Planning {
    match planner.plan(write) {
        Ok((ticket, planned)) => Planning::Submit(ticket, planned),
        Err(e) => Planning::Answer(Err(ErrorReply::from(&e))),
    }
}

/// The answer to a session write that committed as `journal_id`, read from `applied`, a
/// catalog that has applied it (INV-2).
pub fn answer_applied(applied: &Catalog, tag: &SessionTag, journal_id: Zxid) -> WriteAnswer {
    match applied.sessions().admit(tag) {
        Admission::Duplicate(outcome) => Ok((outcome.journal_id, outcome.created_id)),
        Admission::Stale { floor } => Err(stale(tag, floor)),
        Admission::Fresh => Err(ErrorReply::new(
            Status::Internal,
            format!(
                "journal id {journal_id} committed, but replay did not apply it: it \
                 conflicted with the catalog as it was then (nothing changed)"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::replay::apply;

    fn tag(seq: u64, floor: u64) -> SessionTag {
        SessionTag {
            client_id: 3,
            seq,
            floor,
        }
    }

    fn set(value: &str) -> Command {
        Command::SetVar {
            name: "k".into(),
            value: value.into(),
        }
    }

    #[test]
    fn deadlines_become_instants_and_forwards_carry_what_is_left() {
        let meta = RequestMeta {
            budget_ms: Some(0),
            session: Some(tag(1, 1)),
        };
        let ctx = RequestContext::new(Instant::now(), &meta);
        let err = ctx.check_deadline("planning").unwrap_err();
        assert_eq!(err.status, Status::DeadlineExceeded);
        assert_eq!(
            ctx.forward_meta().budget_ms,
            Some(1),
            "never 0: at least 1 ms"
        );
        let none = RequestContext::new(Instant::now(), &RequestMeta::default());
        assert!(none.check_deadline("planning").is_ok());
        assert_eq!(none.limit(Duration::from_secs(3)), Duration::from_secs(3));
        let later = RequestContext::new(
            Instant::now(),
            &RequestMeta {
                budget_ms: Some(60_000),
                session: None,
            },
        );
        assert!(later.limit(Duration::from_secs(3)) <= Duration::from_secs(3));
        assert!(later.forward_meta().budget_ms.unwrap() > 50_000);
    }

    #[test]
    fn answers_come_from_what_replay_recorded() {
        let mut applied = Catalog::new();
        let mut planner = Planner::new(applied.clone());
        let Planning::Submit(_, first) = plan(&mut planner, &applied, &set("a"), Some(tag(1, 1)))
        else {
            panic!("a fresh write is submitted")
        };
        // Sent again before it committed: not logged twice, outcome not known yet.
        let Planning::Answer(Err(e)) = plan(&mut planner, &applied, &set("a"), Some(tag(1, 1)))
        else {
            panic!("an in-flight retry is answered")
        };
        assert_eq!(e.status, Status::Timeout);
        apply(&mut applied, Zxid(7), &first.journal_entry().unwrap()).unwrap();
        assert_eq!(
            answer_applied(&applied, &tag(1, 1), Zxid(7)),
            Ok((Zxid(7), None))
        );
        // After the commit, a retry gets the first outcome without logging.
        let Planning::Answer(answer) = plan(&mut planner, &applied, &set("a"), Some(tag(1, 1)))
        else {
            panic!("a committed retry is answered")
        };
        assert_eq!(answer, Ok((Zxid(7), None)));

        let Planning::Submit(_, newer) = plan(&mut planner, &applied, &set("b"), Some(tag(3, 3)))
        else {
            panic!("a newer write is submitted")
        };
        apply(&mut applied, Zxid(8), &newer.journal_entry().unwrap()).unwrap();
        // Seq 2 was given up by the client (floor 3 since): refused early, never planned.
        let Planning::Answer(Err(e)) = plan(&mut planner, &applied, &set("old"), Some(tag(2, 2)))
        else {
            panic!("a stale write is refused")
        };
        assert_eq!(e.status, Status::StaleRequest);
        assert_eq!(applied.var("k"), Some("b"));
    }
}
