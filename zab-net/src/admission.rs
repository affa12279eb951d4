//! Backpressure on client requests, as a pure function of backlog numbers: a node takes a
//! request only while the members it needs can absorb what the request will make it send them.
//!
//! The transport drops a connection whose outbox is full (a slow peer must not hold the
//! others back). Without a limit on intake, a burst of pipelined writes from many clients
//! fills the outboxes of *every* follower at once, the leader drops them all and loses its
//! quorum: clients get "may or may not commit" for writes that only had to wait. So:
//!
//! INV-1 (what a write costs): a write the leader takes sends one PROPOSAL now, and later one
//! COMMIT to each forwarding follower and, when a learner forwarded it, the answer to that
//! learner; a write a learner takes sends one REQUEST to the leader. A learner's ACKs and
//! PINGACKs fold in its outbox into one of each (`crate::transport::UnwrittenAcks`), so
//! however late the leader reads it they take two places of the last quarter.
//! INV-2 (the limit): a member's *backlog* is what waits in its quorum outbox plus the
//! driver's queue behind a stream; with the messages still owed for proposals not yet
//! committed, it must stay at or below the high-water mark, three quarters of the outbox
//! capacity (the last quarter is for heartbeats and sync traffic). The leader takes as many
//! requests as the best-placed quorum of voters can absorb (itself counted as always able),
//! and never so many that any follower's backlog would pass the mark (so its heartbeats
//! still fit), unless that follower has been past the mark for [`SLOW_GRACE`]: then it no
//! longer limits the intake and is dropped when its outbox overflows, as before. So a follower that is slow for good never holds the
//! others back for long, and a burst or a scheduling hiccup drops none.
//! INV-3: a looking peer has no limit (the core answers its requests itself).
//! INV-6 (requests the core holds): a leader or learner not yet established keeps the
//! requests it takes in the core (`Peer::queued_requests`) and sends them all at once when
//! it is; they count as if already sent: each as a whole write at a leader (its PROPOSAL is
//! still to come) and as a REQUEST at a learner. Otherwise a leader taking requests through
//! its sync phase would, once established, propose them at once past every follower's
//! outbox (found by the simulation's sweep: seed 142 with bursts).
//! INV-5 (forwarded requests): a learner's REQUEST or SYNC that reaches a leader without
//! room is *deferred*, and so is every later one while any is deferred (each learner's
//! requests keep their order); deferred ones are fed first once there is room again, as if
//! they had just arrived. They belong to the learner's connection to this leader: its loss
//! or the core's disconnect of it drops that learner's deferred requests, and leaving the
//! leadership drops them all (the learner fails its forwarded requests when its connection
//! ends, exactly as if the leader had never read them).
//!
//! (INV-4, how a held driver waits and reports holds, is the node driver's.)
//!
//! Nothing here reads a clock or the transport: [`Demand`] carries the numbers and the time,
//! of any instant type `I` whose difference is a [`Duration`] (`tokio::time::Instant` in the
//! node, a virtual time as a `Duration` since the start in the deterministic simulation), so
//! the simulation runs this very policy.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Sub;
use std::time::Duration;

use tracing::debug;
use zab_core::{Message, Role, ServerId, Zxid};

/// How long a follower may stay past the high-water mark and still limit the intake.
pub const SLOW_GRACE: Duration = Duration::from_secs(1);

/// Messages a leader eventually sends a forwarding follower for one write (INV-1).
const LEADER_MESSAGES_PER_WRITE: usize = 3;

/// Messages a leader still owes a follower for a proposal it sent and has not committed.
const LEADER_MESSAGES_OWED: usize = 2;

/// What a learner counts per request it takes or holds: one REQUEST, counted twice, so each
/// refresh takes half the room left below the mark. The room is worked out again from the
/// actual backlog at every refresh, so the REQUESTs waiting in the link converge to the mark;
/// the quarter above it holds the learner's one folded ACK and one folded PINGACK (INV-1).
const LEARNER_MESSAGES_PER_WRITE: usize = 2;

/// What the room depends on, read from the core and the transport.
pub struct Demand<'a, I, F: Fn(ServerId) -> usize> {
    /// This server.
    pub me: ServerId,
    /// Its role now.
    pub role: Role,
    /// The leader it follows (learners).
    pub leader: Option<ServerId>,
    /// The voters of the configuration in force.
    pub voters: &'a [ServerId],
    /// Proposals logged and not yet committed (the leader's COMMITs still owed; see
    /// [`uncommitted`]).
    pub uncommitted: usize,
    /// Requests the core holds until its role is established (INV-6).
    pub queued: usize,
    /// A member's backlog in messages (INV-2).
    pub backlog: F,
    /// The time now.
    pub now: I,
}

/// The intake limit and the learners' deferred requests (see the module docs).
#[derive(Debug)]
pub struct Intake<I> {
    high_water: usize,
    /// Scratch space for the voters' free room (no allocation per wake-up).
    free: Vec<usize>,
    /// Since when each follower past the high-water mark has been there.
    slow_since: BTreeMap<ServerId, I>,
    /// Requests that may still be taken now.
    room: usize,
    /// Learners' requests waiting for room, in arrival order (INV-5).
    deferred: VecDeque<(ServerId, Message)>,
}

impl<I: Copy + Ord + Sub<Output = Duration>> Intake<I> {
    /// The limit for outboxes of `outbox_capacity` messages.
    pub fn new(outbox_capacity: usize) -> Intake<I> {
        Intake {
            high_water: outbox_capacity - outbox_capacity / 4,
            free: Vec::new(),
            slow_since: BTreeMap::new(),
            room: 0,
            deferred: VecDeque::new(),
        }
    }

    /// The high-water mark (INV-2).
    pub fn high_water(&self) -> usize {
        self.high_water
    }

    /// Works out the room from `d`. Leaving the leadership drops the deferred requests
    /// (INV-5). Returns the room.
    pub fn refresh<F: Fn(ServerId) -> usize>(&mut self, d: &Demand<'_, I, F>) -> usize {
        if d.role != Role::Leading && !self.deferred.is_empty() {
            debug!(
                dropped = self.deferred.len(),
                "no longer leading: learners' deferred requests dropped"
            );
            self.deferred.clear();
        }
        self.room = self.room_for(d);
        self.room
    }

    /// Requests that may still be taken now.
    pub fn room(&self) -> usize {
        self.room
    }

    /// Takes one unit of room; false when there is none.
    pub fn take(&mut self) -> bool {
        let ok = self.room > 0;
        self.room = self.room.saturating_sub(1);
        ok
    }

    /// Learners' requests deferred now (INV-5).
    pub fn deferred(&self) -> usize {
        self.deferred.len()
    }

    /// True when deferred requests wait and there is room for some (INV-5).
    pub fn can_release(&self) -> bool {
        self.room > 0 && !self.deferred.is_empty()
    }

    /// A learner's message reaching the leader: returned to be fed now, or deferred
    /// (`None`) when it is a request and there is no room or others wait (INV-5).
    pub fn admit(&mut self, from: ServerId, msg: Message) -> Option<Message> {
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
    pub fn release(&mut self) -> impl Iterator<Item = (ServerId, Message)> + '_ {
        let n = self.room.min(self.deferred.len());
        self.room -= n;
        self.deferred.drain(..n)
    }

    /// Drops `peer`'s deferred requests: its connection ended (INV-5).
    pub fn forget(&mut self, peer: ServerId) {
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

    /// How many requests may be taken now (INV-2, INV-3).
    fn room_for<F: Fn(ServerId) -> usize>(&mut self, d: &Demand<'_, I, F>) -> usize {
        let free =
            |sid: ServerId, owed: usize| self.high_water.saturating_sub((d.backlog)(sid) + owed);
        match d.role {
            Role::Looking => usize::MAX,
            Role::Following | Role::Observing => match d.leader {
                Some(leader) => {
                    let owed = d.queued.saturating_mul(LEARNER_MESSAGES_PER_WRITE);
                    free(leader, owed) / LEARNER_MESSAGES_PER_WRITE
                }
                None => usize::MAX,
            },
            Role::Leading => {
                self.free.clear();
                let owed = d
                    .uncommitted
                    .saturating_mul(LEADER_MESSAGES_OWED)
                    .saturating_add(d.queued.saturating_mul(LEADER_MESSAGES_PER_WRITE));
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
                        d.now.max(since) - since < SLOW_GRACE
                    };
                    if limits {
                        let left = self.high_water.saturating_sub(queued);
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
}

/// The proposals a leader logged and has not committed yet.
pub fn uncommitted(logged: Zxid, committed: Zxid) -> usize {
    let owed = if logged.epoch() == committed.epoch() {
        logged.counter().saturating_sub(committed.counter())
    } else {
        logged.counter()
    };
    usize::try_from(owed).unwrap_or(usize::MAX)
}

#[cfg(test)]
#[path = "admission_tests.rs"]
mod tests;
