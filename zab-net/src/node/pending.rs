//! The one place that pairs the clients' writes and syncs with the core's answers.
//!
//! A request is registered with its reply and gets the [`RequestId`] the core will answer
//! (`Action::WriteDone` / `Action::SyncDone`); the answer is decided when the core gives it and
//! *sent* only when the driver says so, after it published the batch's status (driver INV-4).
//!
//! INV-1: ids are unique over the node's life (writes and syncs share one counter), so one
//! map serves both kinds.
//! INV-2: every registered reply is answered exactly once: by `resolve` then `send_answers`,
//! or by `fail_all` when the driver stops (answers already decided are sent first, with
//! their outcome).
//! INV-3: an answer for an id that is not registered (a duplicate, or a request failed
//! already) is ignored.

use std::collections::BTreeMap;

use tokio::sync::oneshot;
use zab_core::{RequestError, RequestId, Zxid};

use super::api::SubmitError;

/// What a write or a sync gets back.
pub type Outcome = Result<Zxid, SubmitError>;

/// Where the driver sends a write's or a sync's answer.
pub type Reply = oneshot::Sender<Outcome>;

/// Requests waiting for the core's answer, and answers waiting for the status publish.
#[derive(Debug, Default)]
pub(super) struct Pending {
    waiting: BTreeMap<RequestId, Reply>,
    last_id: u64,
    decided: Vec<(Reply, Outcome)>,
}

impl Pending {
    /// Nothing pending.
    pub(super) fn new() -> Pending {
        Pending::default()
    }

    /// Registers `reply`; returns the id the core's answer will carry (INV-1).
    pub(super) fn register(&mut self, reply: Reply) -> RequestId {
        self.last_id += 1;
        let id = RequestId(self.last_id);
        self.waiting.insert(id, reply);
        id
    }

    /// The core answered `id`; the answer goes out with the next `send_answers` (INV-3).
    pub(super) fn resolve(&mut self, id: RequestId, outcome: Result<Zxid, RequestError>) {
        if let Some(reply) = self.waiting.remove(&id) {
            self.decided
                .push((reply, outcome.map_err(SubmitError::from)));
        }
    }

    /// Sends the answers decided since the last call (after the status publish: driver INV-4).
    pub(super) fn send_answers(&mut self) {
        for (reply, outcome) in self.decided.drain(..) {
            // The caller may have given up (timeout, cancelled): nobody to tell.
            let _ = reply.send(outcome);
        }
    }

    /// The driver stops: decided answers go out, every other request fails with `err`
    /// (INV-2).
    pub(super) fn fail_all(&mut self, err: &SubmitError) {
        self.send_answers();
        for (_, reply) in std::mem::take(&mut self.waiting) {
            let _ = reply.send(Err(err.clone()));
        }
    }

    /// How many requests wait for the core's answer.
    #[cfg(test)]
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
        p.fail_all(&SubmitError::Shutdown);
        assert_eq!(ra.try_recv(), Ok(Ok(Zxid(5))));
        assert_eq!(rb.try_recv(), Ok(Err(SubmitError::Shutdown)));
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
