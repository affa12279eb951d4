//! The simulated driver's intake: client requests and learners' forwarded requests are taken
//! only when zab-net's driver would take them, by the very same policy
//! (`zab_net::admission`, its INV-1..INV-3 and INV-5), fed the simulated links' backlogs and
//! the virtual clock.
//!
//! INV-A1: a node's room is worked out as zab-net's driver does it: the voters of its
//! configuration in force, its role and leader, its proposals not yet committed, the requests
//! its core holds until established (zab-net admission INV-6) and, per peer, the messages queued on its quorum link to that peer; the time is the virtual time,
//! so `SLOW_GRACE` passes in virtual time. It is refreshed when a request arrives, on every
//! tick of the node (the real driver refreshes on every wake-up, ticks included, so a
//! follower's stay past the high-water mark is timed from about when it began) and before
//! held or deferred requests are released.
//! INV-A2: a client request a node has no room for (or that arrives while older ones are
//! held) waits in the node's `held` queue, in order; none is lost while the node is up. At
//! the start of every step, each live node with requests waiting takes what its room allows:
//! learners' deferred requests first, then held client requests, oldest first (as the real
//! driver releases deferred requests before it reads its request channel). A crash drops
//! both (the clients' connections end with the process).
//! INV-A3: a node that is not up, or a run with `SimOptions::admission` off (a test-only
//! switch, to show what the limit prevents), takes every request at once, as before.

use std::time::Duration;

use zab_core::{Input, Message, ServerId};
use zab_net::admission::{uncommitted, Demand, Intake};

use super::cluster::Cluster;
use super::net::{Channel, Delivery};

impl Cluster {
    /// A client request for `id`: fed now when its driver would take it, else held (INV-A2).
    pub(crate) fn submit(&mut self, id: ServerId, input: Input) {
        if !self.admits(id) {
            self.feed(id, input);
            return;
        }
        let waiting = !self.nodes[&id].held.is_empty();
        if !waiting && self.refresh_room(id) > 0 {
            if let Some(n) = self.nodes.get_mut(&id) {
                n.intake.take();
            }
            self.feed(id, input);
            return;
        }
        if !waiting {
            self.holds += 1;
        }
        self.trace(format_args!("{id} holds {input:?}"));
        self.mix(0x401d ^ id.0);
        if let Some(n) = self.nodes.get_mut(&id) {
            n.held.push_back(input);
        }
    }

    /// Feeds `id` what the network delivers from `from`: a request through the intake, a lost
    /// connection after dropping the requests deferred on it (zab-net admission INV-5).
    pub(crate) fn deliver_to(&mut self, id: ServerId, from: ServerId, d: Delivery) {
        match d {
            Delivery::Message(msg) => self.deliver_admitted(id, from, msg),
            Delivery::Lost => {
                self.forget_deferred(id, from);
                self.feed(id, Input::ConnectionLost { peer: from });
            }
            Delivery::Unreachable => self.feed(id, Input::PeerUnreachable { peer: from }),
        }
    }

    /// A learner's message `msg` from `from` reaching `id`: fed now, or deferred when it is a
    /// request `id` has no room for (zab-net admission INV-5).
    fn deliver_admitted(&mut self, id: ServerId, from: ServerId, msg: Message) {
        let request = matches!(msg, Message::Request { .. } | Message::Sync { .. });
        if !request || !self.admits(id) {
            self.feed(id, Input::Message { from, msg });
            return;
        }
        if self.nodes[&id].intake.deferred() == 0 {
            self.refresh_room(id);
        }
        let node = self.nodes.get_mut(&id).unwrap_or_else(|| unreachable!());
        let was = node.intake.deferred();
        match node.intake.admit(from, msg) {
            Some(msg) => self.feed(id, Input::Message { from, msg }),
            None => {
                if was == 0 {
                    self.holds += 1;
                }
                self.mix(0xdefe ^ id.0 << 8 ^ from.0);
                self.trace(format_args!("{id} defers a request from {from}"));
            }
        }
    }

    /// `id`'s connection to `peer` ended: its deferred requests from `peer` go (INV-5).
    pub(crate) fn forget_deferred(&mut self, id: ServerId, peer: ServerId) {
        if let Some(n) = self.nodes.get_mut(&id) {
            n.intake.forget(peer);
        }
    }

    /// A crash drops what `id` held and deferred (INV-A2).
    pub(crate) fn reset_intake(&mut self, id: ServerId) {
        let outbox_len = self.net.outbox_len();
        if let Some(n) = self.nodes.get_mut(&id) {
            n.held.clear();
            n.intake = Intake::new(outbox_len);
        }
    }

    /// Refreshes `id`'s room on its tick (INV-A1).
    pub(crate) fn refresh_on_tick(&mut self, id: ServerId) {
        if self.admits(id) {
            self.refresh_room(id);
        }
    }

    /// Every live node takes the waiting requests its room allows (INV-A2).
    pub(crate) fn release_waiting(&mut self) {
        if !self.opts.admission {
            return;
        }
        let waiting: Vec<ServerId> = self
            .nodes
            .values()
            .filter(|n| n.is_live() && (!n.held.is_empty() || n.intake.deferred() > 0))
            .map(|n| n.id)
            .collect();
        for id in waiting {
            self.release(id);
        }
    }

    fn release(&mut self, id: ServerId) {
        if self.refresh_room(id) == 0 {
            return;
        }
        let node = self.nodes.get_mut(&id).unwrap_or_else(|| unreachable!());
        let released: Vec<_> = node.intake.release().collect();
        for (from, msg) in released {
            self.mix(0x4e1 ^ id.0 << 8 ^ from.0);
            self.feed(id, Input::Message { from, msg });
        }
        loop {
            let Some(node) = self.nodes.get_mut(&id).filter(|n| n.is_live()) else {
                return;
            };
            if node.held.is_empty() || !node.intake.take() {
                return;
            }
            let Some(input) = node.held.pop_front() else {
                return;
            };
            self.mix(0x4e2 ^ id.0);
            self.feed(id, input);
        }
    }

    /// True when `id`'s requests go through the intake limit (INV-A3).
    fn admits(&self, id: ServerId) -> bool {
        self.opts.admission && self.nodes.get(&id).is_some_and(|n| n.is_up())
    }

    /// Works out `id`'s room now (INV-A1); a node that is down has none.
    fn refresh_room(&mut self, id: ServerId) -> usize {
        let now = Duration::from_millis(self.now_ms);
        let net = &self.net;
        let Some(node) = self.nodes.get_mut(&id) else {
            return 0;
        };
        let Some(peer) = node.peer.as_ref() else {
            return 0;
        };
        let voters: Vec<ServerId> = peer.membership().participants().collect();
        let d = Demand {
            me: id,
            role: peer.role(),
            leader: peer.leader(),
            voters: &voters,
            uncommitted: uncommitted(peer.last_logged_zxid(), peer.last_committed_zxid()),
            queued: peer.queued_requests(),
            backlog: |sid| net.queue_len((id, sid, Channel::Quorum)),
            now,
        };
        node.intake.refresh(&d)
    }
}
