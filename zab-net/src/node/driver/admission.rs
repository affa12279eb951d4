//! Backpressure on client requests: the driver takes a request only while the members it
//! needs can absorb what the request will make it send them.
//!
//! The transport drops a connection whose outbox is full (a slow peer must not hold the
//! others back). Without a limit on intake, a burst of pipelined writes from many clients
//! fills the outboxes of *every* follower at once, the leader drops them all and loses its
//! quorum: clients get "may or may not commit" for writes that only had to wait. So:
//!
//! INV-1 (what a write costs): a write the leader takes sends one PROPOSAL now, and later one
//! COMMIT to each forwarding follower and, when a learner forwarded it, the answer to that
//! learner; a write a learner takes sends one REQUEST to the leader (its ACKs follow the
//! leader's proposals, which the leader's own limit bounds).
//! INV-2 (the limit): a member's *backlog* is what waits in its quorum outbox plus the
//! driver's queue behind a stream; with the messages still owed for proposals not yet
//! committed, it must stay at or below the high-water mark, three quarters of the outbox
//! capacity (the last quarter is for heartbeats and sync traffic). The leader takes as many
//! requests as the best-placed quorum of voters can absorb (itself counted as always able),
//! and never so many that a follower's outbox would overflow, unless that follower has been
//! past the mark for [`SLOW_GRACE`]: then it no longer limits the intake and is dropped when
//! its outbox overflows, as before. So a follower that is slow for good never holds the
//! others back for long, and a burst or a scheduling hiccup drops none.
//! INV-3: a looking peer has no limit (the core answers its requests itself).
//! INV-4: while the room is zero the driver takes no request from its handle (the channel
//! fills and `Node`'s callers wait) and re-checks at least every [`RECHECK`]; every hold is
//! counted in `zab_requests_held_total` and logged at WARN at most once per [`WARN_EVERY`].
//! INV-5 (forwarded requests): a learner's REQUEST or SYNC that reaches a leader without
//! room is *deferred*, and so is every later one while any is deferred (each learner's
//! requests keep their order); deferred ones are fed first once there is room again, as if
//! they had just arrived. They belong to the learner's connection to this leader: its loss
//! or the core's disconnect of it drops that learner's deferred requests, and leaving the
//! leadership drops them all (the learner fails its forwarded requests when its connection
//! ends, exactly as if the leader had never read them).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, warn};
use zab_core::{Message, Role, ServerId, Zxid};

/// How often a held driver re-checks the backlogs when nothing else wakes it.
pub(super) const RECHECK: Duration = Duration::from_millis(1);

/// How long a follower may stay past the high-water mark and still limit the intake.
const SLOW_GRACE: Duration = Duration::from_secs(1);

/// Least time between two WARN lines about held requests.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Messages a leader eventually sends a forwarding follower for one write (INV-1).
const LEADER_MESSAGES_PER_WRITE: usize = 3;

/// Messages a leader still owes a follower for a proposal it sent and has not committed.
const LEADER_MESSAGES_OWED: usize = 2;

/// Messages a learner sends its leader per request, with room kept for the ACKs (INV-1).
const LEARNER_MESSAGES_PER_WRITE: usize = 2;

/// What the room depends on, read from the core and the transport.
pub(super) struct Demand<'a, F: Fn(ServerId) -> usize> {
    /// This server.
    pub(super) me: ServerId,
    /// Its role now.
    pub(super) role: Role,
    /// The leader it follows (learners).
    pub(super) leader: Option<ServerId>,
    /// The voters of the configuration in force.
    pub(super) voters: &'a [ServerId],
    /// Proposals logged and not yet committed (the leader's COMMITs still owed).
    pub(super) uncommitted: usize,
    /// A member's backlog in messages (INV-2).
    pub(super) backlog: F,
    /// The time now.
    pub(super) now: Instant,
}

/// The driver's intake limit and its hold bookkeeping (see the module docs).
pub(super) struct Admission {
    capacity: usize,
    high_water: usize,
    /// Scratch space for the voters' free room (no allocation per wake-up).
    free: Vec<usize>,
    /// Since when each follower past the high-water mark has been there.
    slow_since: BTreeMap<ServerId, Instant>,
    held: bool,
    holds_unreported: u64,
    last_warn: Option<Instant>,
    /// Requests that may still be taken in this wake-up.
    room: usize,
    /// Learners' requests waiting for room, in arrival order (INV-5).
    deferred: VecDeque<(ServerId, Message)>,
}

impl Admission {
    /// The limit for outboxes of `outbox_capacity` messages.
    pub(super) fn new(outbox_capacity: usize) -> Admission {
        Admission {
            capacity: outbox_capacity,
            high_water: outbox_capacity - outbox_capacity / 4,
            free: Vec::new(),
            slow_since: BTreeMap::new(),
            held: false,
            holds_unreported: 0,
            last_warn: None,
            room: 0,
            deferred: VecDeque::new(),
        }
    }

    /// Works out the room for this wake-up from `d`, counting and logging a new hold in
    /// `held_total` (INV-4). Leaving the leadership drops the deferred requests (INV-5).
    pub(super) fn refresh<F: Fn(ServerId) -> usize>(
        &mut self,
        d: &Demand<'_, F>,
        held_total: &prometheus::IntCounter,
    ) {
        if d.role != Role::Leading && !self.deferred.is_empty() {
            debug!(
                dropped = self.deferred.len(),
                "no longer leading: learners' deferred requests dropped"
            );
            self.deferred.clear();
        }
        self.room = self.room_for(d);
        self.note(self.room, held_total);
    }

    /// Requests that may still be taken in this wake-up.
    pub(super) fn room(&self) -> usize {
        self.room
    }

    /// Takes one unit of room; false when there is none.
    pub(super) fn take(&mut self) -> bool {
        let ok = self.room > 0;
        self.room = self.room.saturating_sub(1);
        ok
    }

    /// True when deferred requests wait and there is room for some (INV-5).
    pub(super) fn can_release(&self) -> bool {
        self.room > 0 && !self.deferred.is_empty()
    }

    /// A learner's message reaching the leader: returned to be fed now, or deferred
    /// (`None`) when it is a request and there is no room or others wait (INV-5).
    pub(super) fn admit(&mut self, from: ServerId, msg: Message) -> Option<Message> {
        if !matches!(msg, Message::Request { .. } | Message::Sync { .. }) {
            return Some(msg);
        }
        if self.deferred.is_empty() && self.take() {
            return Some(msg);
        }
        self.deferred.push_back((from, msg));
        None
    }

    /// The deferred requests there is room for now, oldest first (INV-5).
    pub(super) fn release(&mut self) -> impl Iterator<Item = (ServerId, Message)> + '_ {
        let n = self.room.min(self.deferred.len());
        self.room -= n;
        self.deferred.drain(..n)
    }

    /// Drops `peer`'s deferred requests: its connection ended (INV-5).
    pub(super) fn forget(&mut self, peer: ServerId) {
        let before = self.deferred.len();
        self.deferred.retain(|(from, _)| *from != peer);
        if self.deferred.len() < before {
            debug!(
                peer = peer.0,
                dropped = before - self.deferred.len(),
                "connection ended: its deferred requests dropped"
            );
        }
    }

    /// How many requests the driver may take now (INV-2, INV-3).
    fn room_for<F: Fn(ServerId) -> usize>(&mut self, d: &Demand<'_, F>) -> usize {
        let free =
            |sid: ServerId, owed: usize| self.high_water.saturating_sub((d.backlog)(sid) + owed);
        match d.role {
            Role::Looking => usize::MAX,
            Role::Following | Role::Observing => match d.leader {
                Some(leader) => free(leader, 0) / LEARNER_MESSAGES_PER_WRITE,
                None => usize::MAX,
            },
            Role::Leading => {
                self.free.clear();
                let owed = d.uncommitted.saturating_mul(LEADER_MESSAGES_OWED);
                // No follower may overflow, unless slow past the grace (INV-2).
                let mut cap = usize::MAX;
                self.slow_since.retain(|sid, _| d.voters.contains(sid));
                for sid in d.voters.iter().filter(|s| **s != d.me) {
                    let queued = (d.backlog)(*sid).saturating_add(owed);
                    let limits = if queued < self.high_water {
                        self.slow_since.remove(sid);
                        true
                    } else {
                        let since = *self.slow_since.entry(*sid).or_insert(d.now);
                        d.now.saturating_duration_since(since) < SLOW_GRACE
                    };
                    if limits {
                        let left = self.capacity.saturating_sub(queued);
                        cap = cap.min(left / LEADER_MESSAGES_PER_WRITE);
                    }
                    self.free.push(self.high_water.saturating_sub(queued));
                }
                let voters = self.free.len() + usize::from(d.voters.contains(&d.me));
                let quorum = voters / 2 + 1;
                let needed = quorum.saturating_sub(usize::from(d.voters.contains(&d.me)));
                if needed == 0 {
                    return usize::MAX;
                }
                self.free.sort_unstable_by(|a, b| b.cmp(a));
                let free = self.free.get(needed - 1).copied().unwrap_or(0);
                (free / LEADER_MESSAGES_PER_WRITE).min(cap)
            }
        }
    }

    /// Records whether the driver holds requests back now (`room == 0`), counting and
    /// logging each new hold (INV-4).
    fn note(&mut self, room: usize, held_total: &prometheus::IntCounter) {
        let held = room == 0;
        if held && !self.held {
            held_total.inc();
            self.holds_unreported += 1;
            let now = Instant::now();
            if self.last_warn.is_none_or(|t| now - t >= WARN_EVERY) {
                warn!(
                    holds = self.holds_unreported,
                    high_water = self.high_water,
                    "client requests held back: the followers a quorum needs have {} or more \
                     messages queued; writes wait instead of overflowing their links (this \
                     many holds since the last such line)",
                    self.high_water
                );
                self.holds_unreported = 0;
                self.last_warn = Some(now);
            }
        }
        self.held = held;
    }
}

/// The proposals a leader logged and has not committed yet.
pub(super) fn uncommitted(logged: Zxid, committed: Zxid) -> usize {
    let owed = if logged.epoch() == committed.epoch() {
        logged.counter().saturating_sub(committed.counter())
    } else {
        logged.counter()
    };
    usize::try_from(owed).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use zab_core::Epoch;

    fn sid(n: u64) -> ServerId {
        ServerId(n)
    }

    /// The room once every follower past the mark has been there for the grace.
    fn leader_room(voters: &[u64], backlogs: &[(u64, usize)], uncommitted: usize) -> usize {
        let mut a = Admission::new(400);
        let t0 = Instant::now();
        leader_room_in(&mut a, t0, voters, backlogs, uncommitted);
        leader_room_in(&mut a, t0 + SLOW_GRACE, voters, backlogs, uncommitted)
    }

    fn leader_room_in(
        a: &mut Admission,
        now: Instant,
        voters: &[u64],
        backlogs: &[(u64, usize)],
        uncommitted: usize,
    ) -> usize {
        let voters: Vec<ServerId> = voters.iter().map(|n| sid(*n)).collect();
        let backlog = |s: ServerId| {
            backlogs
                .iter()
                .find(|(n, _)| sid(*n) == s)
                .map_or(0, |(_, b)| *b)
        };
        let d = Demand {
            me: sid(1),
            role: Role::Leading,
            leader: Some(sid(1)),
            voters: &voters,
            uncommitted,
            backlog,
            now,
        };
        a.room_for(&d)
    }

    #[test]
    fn a_leader_takes_what_its_best_placed_quorum_can_absorb() {
        // High water 300; three messages per write.
        assert_eq!(leader_room(&[1, 2, 3], &[], 0), 100);
        // One follower far behind for the grace: the other one is the quorum.
        assert_eq!(leader_room(&[1, 2, 3], &[(2, 10_000), (3, 100)], 0), 66);
        // Both past the mark: hold.
        assert_eq!(leader_room(&[1, 2, 3], &[(2, 300), (3, 301)], 0), 0);
        // Two messages still owed per uncommitted proposal count against every follower.
        assert_eq!(leader_room(&[1, 2, 3], &[(3, 100)], 60), 60);
        // Five voters: the second best follower decides...
        let five = [(2, 0), (3, 299), (4, 100), (5, 400)];
        assert_eq!(leader_room(&[1, 2, 3, 4, 5], &five, 0), 33);
        // ... unless one still under the mark would overflow its outbox of 400.
        let five = [(2, 0), (3, 290), (4, 100), (5, 400)];
        assert_eq!(leader_room(&[1, 2, 3, 4, 5], &five, 0), 36);
    }

    #[test]
    fn a_follower_past_the_mark_limits_the_intake_only_for_the_grace() {
        let mut a = Admission::new(400);
        let t0 = Instant::now();
        let behind = [(2, 340)];
        // Past the mark: still kept from overflowing (60 left, three messages per write)...
        assert_eq!(leader_room_in(&mut a, t0, &[1, 2, 3], &behind, 0), 20);
        let t1 = t0 + SLOW_GRACE / 2;
        assert_eq!(leader_room_in(&mut a, t1, &[1, 2, 3], &behind, 0), 20);
        // ... until it has been there for the grace: then it is left to overflow.
        let t2 = t0 + SLOW_GRACE;
        assert_eq!(leader_room_in(&mut a, t2, &[1, 2, 3], &behind, 0), 100);
        // Back under the mark: it limits again, and a new stay past it starts a new grace.
        assert_eq!(leader_room_in(&mut a, t2, &[1, 2, 3], &[(2, 250)], 0), 50);
        assert_eq!(leader_room_in(&mut a, t2, &[1, 2, 3], &behind, 0), 20);
    }

    #[test]
    fn a_lone_voter_and_a_looking_peer_have_no_limit() {
        assert_eq!(leader_room(&[1], &[], 5_000), usize::MAX);
        let voters = [sid(1), sid(2), sid(3)];
        let d = Demand {
            me: sid(2),
            role: Role::Looking,
            leader: None,
            voters: &voters,
            uncommitted: 0,
            backlog: |_| 10_000,
            now: Instant::now(),
        };
        assert_eq!(Admission::new(400).room_for(&d), usize::MAX);
    }

    #[test]
    fn a_learner_takes_what_its_link_to_the_leader_can_absorb() {
        let voters = [sid(1), sid(2), sid(3)];
        let d = |backlog: usize| Demand {
            me: sid(2),
            role: Role::Following,
            leader: Some(sid(1)),
            voters: &voters,
            uncommitted: 0,
            backlog: move |s: ServerId| if s == sid(1) { backlog } else { 99_999 },
            now: Instant::now(),
        };
        assert_eq!(Admission::new(400).room_for(&d(100)), 100);
        assert_eq!(Admission::new(400).room_for(&d(300)), 0);
    }

    fn request(n: u64) -> Message {
        Message::Sync {
            request_id: zab_core::RequestId(n),
        }
    }

    #[test]
    fn learners_requests_wait_in_order_and_end_with_their_connection() {
        let mut a = Admission::new(400);
        a.room = 1;
        assert!(a.admit(sid(2), request(1)).is_some());
        assert!(a.admit(sid(2), Message::Ping { round: 0 }).is_some());
        assert!(a.admit(sid(2), request(2)).is_none());
        assert!(a.admit(sid(3), request(3)).is_none());
        // Room again, but others wait: a new one queues behind them.
        a.room = 5;
        assert!(a.admit(sid(2), request(4)).is_none());
        a.forget(sid(3));
        assert!(a.can_release());
        let ids: Vec<_> = a
            .release()
            .map(|(from, m)| match m {
                Message::Sync { request_id } => (from.0, request_id.0),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(ids, [(2, 2), (2, 4)]);
        assert_eq!(a.room(), 3);
        assert!(!a.can_release());
    }

    #[test]
    fn holds_are_counted_once_each() {
        let counter = prometheus::IntCounter::new("t", "t").unwrap();
        let mut a = Admission::new(400);
        for room in [5, 0, 0, 3, 0, 1] {
            a.note(room, &counter);
        }
        assert_eq!(counter.get(), 2);
    }

    #[test]
    fn uncommitted_counts_within_the_epoch() {
        assert_eq!(
            uncommitted(Zxid::new(Epoch(3), 10), Zxid::new(Epoch(3), 4)),
            6
        );
        assert_eq!(
            uncommitted(Zxid::new(Epoch(3), 10), Zxid::new(Epoch(2), 99)),
            10
        );
        assert_eq!(
            uncommitted(Zxid::new(Epoch(3), 4), Zxid::new(Epoch(3), 4)),
            0
        );
    }
}
