//! The order of one connection's writes: catalog writes pipelined on a connection are handed
//! on in the order they were read — to the leader's planner (on the leader) or onto the
//! forwarding link (on a follower, whose link to the leader is one connection, so the leader
//! reads them in that order too). A client may therefore pipeline a write that depends on an
//! earlier one (create a database, then a table in it), as ZooKeeper runs a session's
//! requests in order.
//!
//! The reader gives each write a [`Turn`] in read order; the request waits for the turn
//! ([`Turn::wait`]) right before it hands the write on and passes it ([`Turn::pass`]) right
//! after, so requests still run concurrently everywhere else (waiting for a quorum, applying,
//! answering).
//!
//! INV-1: tickets are numbered from 0 in read order; a turn comes when every earlier ticket
//! has been passed.
//! INV-2: a ticket is passed at the latest when its `Turn` is dropped (the request's future ended,
//! whatever path it took), so no write waits for one that never reaches the hand-off.
//! INV-3: passing is idempotent, and waiting for a passed ticket returns at once (a write sent
//! to a second leader after the first refused it takes no new turn).
//! INV-4: only catalog writes take a ticket: a read may overtake a write (docs/PROTOCOL.md
//! §2.1), and a membership change is not planned.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

/// One connection's write order (module docs).
#[derive(Debug)]
pub struct WriteOrder {
    state: Mutex<State>,
    /// The next ticket to give.
    next: AtomicU64,
}

/// Whose turn it is, and who waits for theirs.
#[derive(Debug, Default)]
struct State {
    /// The ticket whose turn it is: every ticket below it was passed.
    turn: u64,
    /// Tickets passed out of order (above `turn`).
    passed_early: BTreeSet<u64>,
    /// Tasks waiting for their ticket's turn: only the one whose turn comes is woken.
    waiting: BTreeMap<u64, oneshot::Sender<()>>,
}

impl WriteOrder {
    /// A new connection's order: the first ticket's turn.
    pub fn new() -> Arc<WriteOrder> {
        Arc::new(WriteOrder {
            state: Mutex::default(),
            next: AtomicU64::new(0),
        })
    }

    /// The next write's turn (INV-1): call in read order.
    pub fn ticket(self: &Arc<Self>) -> Turn {
        Turn {
            order: Arc::clone(self),
            ticket: self.next.fetch_add(1, Ordering::Relaxed),
            passed: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a holder panicked between two map operations.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `None` when it is `ticket`'s turn, else what wakes it when it comes.
    fn wait_for(&self, ticket: u64) -> Option<oneshot::Receiver<()>> {
        let mut st = self.lock();
        if st.turn >= ticket {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        st.waiting.insert(ticket, tx);
        Some(rx)
    }

    fn pass(&self, ticket: u64) {
        let mut st = self.lock();
        // A task whose wait was cancelled leaves its sender: it will never be woken.
        st.waiting.remove(&ticket);
        st.passed_early.insert(ticket);
        let before = st.turn;
        loop {
            let turn = st.turn;
            if !st.passed_early.remove(&turn) {
                break;
            }
            st.turn += 1;
        }
        let turn = st.turn;
        if turn != before {
            if let Some(next) = st.waiting.remove(&turn) {
                let _ = next.send(());
            }
        }
    }
}

/// One write's place in its connection's order (module docs).
pub struct Turn {
    order: Arc<WriteOrder>,
    ticket: u64,
    passed: AtomicBool,
}

impl Turn {
    /// Waits until every earlier write of the connection was handed on (INV-1, INV-3).
    pub async fn wait(&self) {
        if self.passed.load(Ordering::Acquire) {
            return;
        }
        if let Some(woken) = self.order.wait_for(self.ticket) {
            // The sender is dropped only after it sent, or with the order itself, which this
            // turn holds.
            let _ = woken.await;
        }
    }

    /// This write was handed on (or will not be): the next one's turn may come (INV-3).
    pub fn pass(&self) {
        if !self.passed.swap(true, Ordering::AcqRel) {
            self.order.pass(self.ticket);
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.pass();
    }
}

impl fmt::Debug for Turn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Turn")
            .field("ticket", &self.ticket)
            .field("passed", &self.passed.load(Ordering::Relaxed))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn comes(turn: &Turn) -> bool {
        tokio::time::timeout(Duration::from_millis(50), turn.wait())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn a_turn_comes_when_every_earlier_ticket_is_passed() {
        let order = WriteOrder::new();
        let (a, b, c) = (order.ticket(), order.ticket(), order.ticket());
        assert!(comes(&a).await);
        assert!(!comes(&b).await, "b waits for a");
        c.pass();
        assert!(
            !comes(&b).await,
            "a later ticket passed early does not let b go"
        );
        a.pass();
        assert!(comes(&b).await);
        b.pass();
        let d = order.ticket();
        assert!(
            comes(&d).await,
            "c was passed early: d's turn comes after b"
        );
    }

    #[tokio::test]
    async fn a_dropped_turn_passes_and_passing_twice_is_harmless() {
        let order = WriteOrder::new();
        let (a, b) = (order.ticket(), order.ticket());
        a.pass();
        a.pass();
        drop(a);
        assert!(comes(&b).await);
        let c = order.ticket();
        drop(b);
        assert!(comes(&c).await);
        c.pass();
        assert!(comes(&c).await, "waiting after passing returns at once");
    }

    #[tokio::test]
    async fn writes_handed_on_in_turn_keep_their_read_order_whatever_order_tasks_run_in() {
        let order = WriteOrder::new();
        let handed = Arc::new(Mutex::new(Vec::new()));
        let turns: Vec<(usize, Turn)> = (0..64).map(|i| (i, order.ticket())).collect();
        // Spawned last first: without the turns the hand-offs would come out reversed.
        let tasks: Vec<_> = turns
            .into_iter()
            .rev()
            .map(|(i, turn)| {
                let handed = Arc::clone(&handed);
                tokio::spawn(async move {
                    turn.wait().await;
                    handed.lock().unwrap().push(i);
                    turn.pass();
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let handed = handed.lock().unwrap().clone();
        assert_eq!(handed, (0..64).collect::<Vec<_>>());
    }
}
