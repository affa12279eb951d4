//! A client's session identity: a random client id, the sequence numbers of its writes, and
//! the writes still in flight (whose lowest sequence number is the floor sent with each write).
//!
//! INV-1: sequence numbers start at 1 and strictly increase per session; each is used by one
//! write only.
//! INV-2: a write is in the in-flight set from [`ClientSession::begin`] until its
//! [`InFlightWrite`] drops (answered, failed, timed out, or its future dropped); the floor of a
//! new write is the lowest sequence number in the set, itself included, so `floor <= seq`.
//! INV-3 (window): a write starts only if its sequence number is less than
//! [`SEQ_SPAN_MAX`] above the oldest write in flight, so `seq - floor < SEQ_SPAN_MAX` on every
//! write; otherwise [`ClientSession::begin`] waits until the oldest one ends. The cluster keeps
//! the outcomes of [`SEQ_SPAN_MAX`] sequence numbers per client and refuses a write outside
//! the window (`docs/PROTOCOL.md` §3.2): a write that got ahead of the window would push the
//! outcome of an older write out of the table, and that write, still awaited, would then be
//! refused as stale when it arrives late (its request was held up on the way) — or, were it
//! applied and its answer lost, its retry would be. The window counts sequence numbers, not
//! writes: with one write held up, the client cannot keep starting new ones past it.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::state::catalog::SessionTag;
pub use crate::state::catalog::SEQ_SPAN_MAX;

#[derive(Debug, Default)]
struct State {
    next_seq: u64,
    in_flight: BTreeSet<u64>,
}

/// One client's session, shared by all its connections (see the module docs).
#[derive(Debug)]
pub struct ClientSession {
    client_id: u64,
    state: Mutex<State>,
    /// Signalled when the oldest write in flight ends (the window moves, INV-3).
    moved: Notify,
}

impl Default for ClientSession {
    fn default() -> ClientSession {
        ClientSession::new()
    }
}

impl ClientSession {
    /// A new session with a random client id.
    pub fn new() -> ClientSession {
        ClientSession::with_id(rand::random())
    }

    /// A session with the given client id (a process that restarts as the same client).
    pub fn with_id(client_id: u64) -> ClientSession {
        ClientSession {
            client_id,
            state: Mutex::new(State {
                next_seq: 1,
                in_flight: BTreeSet::new(),
            }),
            moved: Notify::new(),
        }
    }

    /// The client id.
    pub fn client_id(&self) -> u64 {
        self.client_id
    }

    /// Starts a write: a new sequence number, in flight until the returned guard drops. Waits
    /// while the next sequence number is outside the window (INV-3) — until the oldest write in
    /// flight ends, which every call does within its timeout; the caller bounds the wait.
    pub async fn begin(self: &Arc<Self>) -> InFlightWrite {
        loop {
            let moved = self.moved.notified();
            tokio::pin!(moved);
            // Registered before the check, so an end between the check and the wait wakes it.
            moved.as_mut().enable();
            if let Some(write) = self.try_begin() {
                return write;
            }
            moved.await;
        }
    }

    /// Starts a write now, or `None` when the next sequence number is outside the window
    /// (INV-3): see [`ClientSession::begin`].
    pub fn try_begin(self: &Arc<Self>) -> Option<InFlightWrite> {
        let mut st = self.lock();
        let seq = st.next_seq;
        let tag = SessionTag {
            client_id: self.client_id,
            seq,
            floor: st.in_flight.first().copied().unwrap_or(seq),
        };
        if !tag.is_within_window() {
            return None;
        }
        st.next_seq = seq.saturating_add(1);
        st.in_flight.insert(seq);
        Some(InFlightWrite {
            session: Arc::clone(self),
            tag,
        })
    }

    /// The oldest write in flight, if any (the floor of the next write).
    pub fn oldest_in_flight(&self) -> Option<u64> {
        self.lock().in_flight.first().copied()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a holder panicked between two plain set operations.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A write in flight; dropping it ends the write (INV-2).
#[derive(Debug)]
pub struct InFlightWrite {
    session: Arc<ClientSession>,
    tag: SessionTag,
}

impl InFlightWrite {
    /// The session fields to send.
    pub fn tag(&self) -> SessionTag {
        self.tag
    }
}

impl Drop for InFlightWrite {
    fn drop(&mut self) {
        let was_oldest = {
            let mut st = self.session.lock();
            let was_oldest = st.in_flight.first() == Some(&self.tag.seq);
            st.in_flight.remove(&self.tag.seq);
            was_oldest
        };
        if was_oldest {
            self.session.moved.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::catalog::{Admission, Outcome, Sessions};
    use std::collections::VecDeque;
    use zab_net::Zxid;

    /// What replay does with a session write (`state::replay`): admit, touch, record.
    fn replay(table: &mut Sessions, tag: SessionTag) -> Admission {
        let admission = table.admit(&tag);
        if !matches!(admission, Admission::Stale { .. }) {
            table.touch(&tag, 0);
        }
        if admission == Admission::Fresh {
            let outcome = Outcome {
                journal_id: Zxid(tag.seq),
                created_id: None,
            };
            table.record(&tag, outcome);
        }
        admission
    }

    /// A client pipelining 1000 writes (as `bench --workload large` does) whose oldest write
    /// is held up on the way (its request task on the leader ran late) while later writes are
    /// applied and answered, and the client starts new ones as answers come: the held-up write,
    /// still awaited, must be applied when it arrives, never refused as stale (INV-3).
    #[test]
    fn a_held_up_write_is_not_made_stale_by_the_writes_pipelined_after_it() {
        let s = Arc::new(ClientSession::with_id(9));
        let mut table = Sessions::default();
        let held = s.try_begin().unwrap();
        let mut window: VecDeque<InFlightWrite> =
            (1..1000).map(|_| s.try_begin().unwrap()).collect();
        let mut newest = 0;
        for _ in 0..3000 {
            let Some(oldest) = window.pop_front() else {
                break;
            };
            assert_eq!(replay(&mut table, oldest.tag()), Admission::Fresh);
            drop(oldest);
            if let Some(next) = s.try_begin() {
                newest = next.tag().seq;
                window.push_back(next);
            }
        }
        assert_eq!(
            replay(&mut table, held.tag()),
            Admission::Fresh,
            "seq {} (still awaited) arrived after writes up to seq {newest}",
            held.tag().seq,
        );
        assert_eq!(
            newest, SEQ_SPAN_MAX,
            "the window stopped the client at seq 1024"
        );
        drop(held);
        let next = s.try_begin().unwrap();
        assert_eq!((next.tag().seq, next.tag().floor), (1025, 1025));
        assert_eq!(replay(&mut table, next.tag()), Admission::Fresh);
    }

    /// INV-3: `begin` waits while the window is full and goes on once the oldest write ends
    /// (a later write ending does not move the window).
    #[tokio::test]
    async fn begin_waits_for_the_oldest_write_when_the_window_is_full() {
        let s = Arc::new(ClientSession::with_id(3));
        let mut writes: VecDeque<InFlightWrite> = VecDeque::new();
        for _ in 0..SEQ_SPAN_MAX {
            writes.push_back(s.begin().await);
        }
        assert_eq!(s.oldest_in_flight(), Some(1));
        let waiter = {
            let s = Arc::clone(&s);
            tokio::spawn(async move { s.begin().await.tag() })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "seq 1025 waits for seq 1");
        drop(writes.pop_back());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(
            !waiter.is_finished(),
            "the newest write ending moves nothing"
        );
        drop(writes.pop_front());
        let tag = tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((tag.seq, tag.floor), (1025, 2));
    }

    #[test]
    fn the_floor_is_the_oldest_write_still_in_flight() {
        let s = Arc::new(ClientSession::with_id(5));
        let a = s.try_begin().unwrap();
        let b = s.try_begin().unwrap();
        assert_eq!((a.tag().seq, a.tag().floor), (1, 1));
        assert_eq!((b.tag().seq, b.tag().floor), (2, 1));
        drop(a);
        let c = s.try_begin().unwrap();
        assert_eq!((c.tag().seq, c.tag().floor), (3, 2));
        drop(b);
        drop(c);
        let d = s.try_begin().unwrap();
        assert_eq!((d.tag().seq, d.tag().floor, d.tag().client_id), (4, 4, 5));
    }
}
