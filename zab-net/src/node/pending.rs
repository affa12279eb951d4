//! The one place that pairs the clients' writes, syncs and membership changes with the core's
//! answers.
//!
//! A request is registered with its reply and gets the [`RequestId`] the core will answer
//! (`Action::WriteDone` / `Action::SyncDone` / `Action::MembershipDone`); the answer is decided
//! when the core gives it and *sent* only when the driver says so, after it published the
//! batch's status (driver INV-4).
//!
//! INV-1: ids are unique over the node's life (writes, syncs and changes share one counter),
//! so one map serves every kind.
//! INV-2: every registered reply is answered exactly once: by `resolve` then `send_answers`,
//! or by `fail_all` when the driver stops (answers already decided are sent first, with
//! their outcome).
//! INV-3: an answer for an id that is not registered (a duplicate, or a request failed
//! already) is ignored.

use std::collections::BTreeMap;

use tokio::sync::oneshot;
use zab_core::{MembershipError, RequestError, RequestId, Zxid};

use super::api::{NodeError, SubmitError};

/// What a write or a sync gets back.
pub type Outcome = Result<Zxid, SubmitError>;

/// Where the driver sends a write's or a sync's answer.
pub type Reply = oneshot::Sender<Outcome>;

/// What a membership change gets back: the committed configuration's version, or why not.
pub(crate) type ChangeOutcome = Result<Zxid, NodeError>;

/// Where the driver sends a membership change's answer.
pub(crate) type ChangeReply = oneshot::Sender<ChangeOutcome>;

/// Why the driver stops: what every request still waiting is told (INV-2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum StopReason {
    /// A clean shutdown.
    Shutdown,
    /// A fatal error, with its text.
    Fatal(String),
}

impl StopReason {
    /// What a write or a sync is told.
    pub(super) fn submit_error(&self) -> SubmitError {
        match self {
            StopReason::Shutdown => SubmitError::Shutdown,
            StopReason::Fatal(f) => SubmitError::Fatal(f.clone()),
        }
    }

    /// What a membership change is told.
    pub(super) fn node_error(&self) -> NodeError {
        match self {
            StopReason::Shutdown => NodeError::Shutdown,
            StopReason::Fatal(f) => NodeError::Fatal(f.clone()),
        }
    }
}

/// A registered request's reply.
#[derive(Debug)]
enum Waiter {
    /// A write or a sync.
    Request(Reply),
    /// A membership change.
    Change(ChangeReply),
}

/// An answer decided, waiting for the status publish.
#[derive(Debug)]
enum Decided {
    Request(Reply, Outcome),
    Change(ChangeReply, ChangeOutcome),
}

/// Requests waiting for the core's answer, and answers waiting for the status publish.
#[derive(Debug, Default)]
pub(super) struct Pending {
    waiting: BTreeMap<RequestId, Waiter>,
    last_id: u64,
    decided: Vec<Decided>,
}

impl Pending {
    /// Nothing pending.
    pub(super) fn new() -> Pending {
        Pending::default()
    }

    /// Registers the reply of a write or a sync; returns the id the core's answer will carry
    /// (INV-1).
    pub(super) fn register(&mut self, reply: Reply) -> RequestId {
        self.insert(Waiter::Request(reply))
    }

    /// Registers the reply of a membership change; returns the id the core's answer will
    /// carry (INV-1).
    pub(super) fn register_change(&mut self, reply: ChangeReply) -> RequestId {
        self.insert(Waiter::Change(reply))
    }

    fn insert(&mut self, waiter: Waiter) -> RequestId {
        self.last_id += 1;
        let id = RequestId(self.last_id);
        self.waiting.insert(id, waiter);
        id
    }

    /// The core answered the write or sync `id`; the answer goes out with the next
    /// `send_answers` (INV-3).
    pub(super) fn resolve(&mut self, id: RequestId, outcome: Result<Zxid, RequestError>) {
        match self.waiting.remove(&id) {
            Some(Waiter::Request(reply)) => self
                .decided
                .push(Decided::Request(reply, outcome.map_err(SubmitError::from))),
            Some(other) => {
                // Not a write's or a sync's id: left waiting for its own answer (INV-3).
                self.waiting.insert(id, other);
            }
            None => {}
        }
    }

    /// The core answered the membership change `id` (INV-3).
    pub(super) fn resolve_change(&mut self, id: RequestId, outcome: Result<Zxid, MembershipError>) {
        match self.waiting.remove(&id) {
            Some(Waiter::Change(reply)) => self
                .decided
                .push(Decided::Change(reply, outcome.map_err(NodeError::from))),
            Some(other) => {
                self.waiting.insert(id, other);
            }
            None => {}
        }
    }

    /// Sends the answers decided since the last call (after the status publish: driver INV-4).
    pub(super) fn send_answers(&mut self) {
        // The caller may have given up (timeout, cancelled): nobody to tell.
        for decided in self.decided.drain(..) {
            match decided {
                Decided::Request(reply, outcome) => {
                    let _ = reply.send(outcome);
                }
                Decided::Change(reply, outcome) => {
                    let _ = reply.send(outcome);
                }
            }
        }
    }

    /// The driver stops: decided answers go out, every other request fails with why (INV-2).
    pub(super) fn fail_all(&mut self, why: &StopReason) {
        self.send_answers();
        for (_, waiter) in std::mem::take(&mut self.waiting) {
            match waiter {
                Waiter::Request(reply) => {
                    let _ = reply.send(Err(why.submit_error()));
                }
                Waiter::Change(reply) => {
                    let _ = reply.send(Err(why.node_error()));
                }
            }
        }
    }

    /// How many requests wait for the core's answer (a metric; tests).
    pub(super) fn waiting(&self) -> usize {
        self.waiting.len()
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::oneshot::error::TryRecvError;

    use super::*;

    fn request(p: &mut Pending) -> (RequestId, oneshot::Receiver<Outcome>) {
        let (tx, rx) = oneshot::channel();
        (p.register(tx), rx)
    }

    #[test]
    fn ids_are_unique_and_answers_wait_for_send_answers() {
        let mut p = Pending::new();
        let (a, mut ra) = request(&mut p);
        let (b, mut rb) = request(&mut p);
        assert_ne!(a, b);
        p.resolve(b, Ok(Zxid(7)));
        assert_eq!(
            rb.try_recv(),
            Err(TryRecvError::Empty),
            "not before the publish"
        );
        p.send_answers();
        assert_eq!(rb.try_recv(), Ok(Ok(Zxid(7))));
        assert_eq!(ra.try_recv(), Err(TryRecvError::Empty));
        assert_eq!(p.waiting(), 1);
        p.resolve(a, Err(RequestError::QuorumLost));
        p.send_answers();
        assert_eq!(ra.try_recv(), Ok(Err(SubmitError::QuorumLost)));
        assert_eq!(p.waiting(), 0);
    }

    #[test]
    fn core_errors_become_submit_errors() {
        let mut p = Pending::new();
        let (a, mut ra) = request(&mut p);
        let (b, mut rb) = request(&mut p);
        let leader = zab_core::ServerId(2);
        p.resolve(
            a,
            Err(RequestError::NotLeader {
                leader: Some(leader),
            }),
        );
        p.resolve(b, Err(RequestError::NotLeader { leader: None }));
        p.send_answers();
        assert_eq!(ra.try_recv(), Ok(Err(SubmitError::NotLeader { leader })));
        assert_eq!(rb.try_recv(), Ok(Err(SubmitError::NoLeader)));
    }

    #[test]
    fn an_unknown_or_repeated_answer_is_ignored() {
        let mut p = Pending::new();
        let (a, mut ra) = request(&mut p);
        p.resolve(RequestId(99), Ok(Zxid(1)));
        p.resolve(a, Ok(Zxid(2)));
        p.resolve(a, Ok(Zxid(3)));
        p.send_answers();
        assert_eq!(ra.try_recv(), Ok(Ok(Zxid(2))));
    }

    #[test]
    fn fail_all_sends_decided_answers_then_fails_the_rest() {
        let mut p = Pending::new();
        let (a, mut ra) = request(&mut p);
        let (_, mut rb) = request(&mut p);
        p.resolve(a, Ok(Zxid(5)));
        p.fail_all(&StopReason::Shutdown);
        assert_eq!(ra.try_recv(), Ok(Ok(Zxid(5))));
        assert_eq!(rb.try_recv(), Ok(Err(SubmitError::Shutdown)));
        assert_eq!(p.waiting(), 0);
    }

    #[test]
    fn membership_answers_go_to_changes_only() {
        let mut p = Pending::new();
        let (w, mut rw) = request(&mut p);
        let (tx, mut rc) = oneshot::channel();
        let c = p.register_change(tx);
        assert_ne!(w, c);
        // An answer of the wrong kind leaves the request waiting.
        p.resolve_change(w, Ok(Zxid(9)));
        p.resolve(c, Ok(Zxid(9)));
        p.send_answers();
        assert_eq!(rw.try_recv(), Err(TryRecvError::Empty));
        assert_eq!(rc.try_recv(), Err(TryRecvError::Empty));
        p.resolve_change(
            c,
            Err(MembershipError::NotLeader {
                leader: Some(zab_core::ServerId(3)),
            }),
        );
        p.send_answers();
        assert_eq!(
            rc.try_recv(),
            Ok(Err(NodeError::NotLeader {
                leader: zab_core::ServerId(3)
            }))
        );
        p.fail_all(&StopReason::Fatal("disk".to_string()));
        assert_eq!(
            rw.try_recv(),
            Ok(Err(SubmitError::Fatal("disk".to_string())))
        );
    }

    #[test]
    fn a_stopped_node_fails_waiting_changes() {
        let mut p = Pending::new();
        let (tx, mut rc) = oneshot::channel();
        let c = p.register_change(tx);
        p.resolve_change(c, Ok(Zxid(4)));
        let (tx, mut rd) = oneshot::channel();
        p.register_change(tx);
        p.fail_all(&StopReason::Shutdown);
        assert_eq!(rc.try_recv(), Ok(Ok(Zxid(4))));
        assert_eq!(rd.try_recv(), Ok(Err(NodeError::Shutdown)));
        assert_eq!(p.waiting(), 0);
    }

    #[test]
    fn a_caller_that_gave_up_does_not_disturb_the_others() {
        let mut p = Pending::new();
        let (a, ra) = request(&mut p);
        let (b, mut rb) = request(&mut p);
        drop(ra);
        p.resolve(a, Ok(Zxid(1)));
        p.resolve(b, Ok(Zxid(2)));
        p.send_answers();
        assert_eq!(rb.try_recv(), Ok(Ok(Zxid(2))));
    }
}
