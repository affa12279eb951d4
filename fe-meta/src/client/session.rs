//! A client's session identity: a random client id, the sequence numbers of its writes, and
//! the writes still in flight (whose lowest sequence number is the floor sent with each write).
//!
//! INV-1: sequence numbers start at 1 and strictly increase per session; each is used by one
//! write only.
//! INV-2: a write is in the in-flight set from [`ClientSession::begin`] until its
//! [`InFlightWrite`] drops (answered, failed, timed out, or its future dropped); the floor of a
//! new write is the lowest sequence number in the set, itself included, so `floor <= seq`.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::state::catalog::SessionTag;

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
        }
    }

    /// The client id.
    pub fn client_id(&self) -> u64 {
        self.client_id
    }

    /// Starts a write: a new sequence number, in flight until the returned guard drops.
    pub fn begin(self: &Arc<Self>) -> InFlightWrite {
        let mut st = self.lock();
        let seq = st.next_seq;
        st.next_seq = seq.saturating_add(1);
        st.in_flight.insert(seq);
        let floor = st.in_flight.first().copied().unwrap_or(seq);
        InFlightWrite {
            session: Arc::clone(self),
            tag: SessionTag {
                client_id: self.client_id,
                seq,
                floor,
            },
        }
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
        self.session.lock().in_flight.remove(&self.tag.seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_is_the_oldest_write_still_in_flight() {
        let s = Arc::new(ClientSession::with_id(5));
        let a = s.begin();
        let b = s.begin();
        assert_eq!((a.tag().seq, a.tag().floor), (1, 1));
        assert_eq!((b.tag().seq, b.tag().floor), (2, 1));
        drop(a);
        let c = s.begin();
        assert_eq!((c.tag().seq, c.tag().floor), (3, 2));
        drop(b);
        drop(c);
        let d = s.begin();
        assert_eq!((d.tag().seq, d.tag().floor, d.tag().client_id), (4, 4, 5));
    }
}
