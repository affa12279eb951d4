//! The node's published status: the full [`NodeStatus`] watch and its [`RoleStatus`] part.
//!
//! INV-1: each watch is sent only when its value changed, so a batch of inputs costs at most
//! one notification per watch (driver INV-4), and a role watcher is not woken per commit.
//! INV-2: once `stopped` is published nothing is published again.

use std::sync::Arc;

use tokio::sync::watch;
use zab_core::{Peer, ServerId};

use super::api::{NodeStatus, RoleStatus};
use crate::metrics::{Direction, NodeMetrics};

/// The status and the senders of its two watches.
pub(super) struct StatusBoard {
    status: NodeStatus,
    status_tx: watch::Sender<NodeStatus>,
    role_tx: watch::Sender<RoleStatus>,
}

/// The receiving ends the node's handle keeps.
pub(super) type Watches = (watch::Receiver<NodeStatus>, watch::Receiver<RoleStatus>);

impl StatusBoard {
    /// The board of a node starting from `peer`'s durable state.
    pub(super) fn new(sid: ServerId, peer: &Peer) -> (StatusBoard, Watches) {
        let mut status = NodeStatus::new(
            sid,
            peer.membership().clone(),
            peer.committed_membership().clone(),
        );
        status.initialized = !peer.needs_initial_sync();
        status.restored_snapshot = Some(peer.last_applied_zxid());
        status.last_logged = peer.last_logged_zxid();
        status.last_committed = peer.last_committed_zxid();
        status.accepted_epoch = peer.accepted_epoch();
        status.current_epoch = peer.current_epoch();
        let (status_tx, status_rx) = watch::channel(status.clone());
        let (role_tx, role_rx) = watch::channel(status.role_status());
        let board = StatusBoard {
            status,
            status_tx,
            role_tx,
        };
        (board, (status_rx, role_rx))
    }

    /// This server.
    pub(super) fn sid(&self) -> ServerId {
        self.status.sid
    }

    /// The sync counters, read from the metrics (metrics INV-2); published with the next
    /// status.
    pub(super) fn set_syncs(&mut self, m: &NodeMetrics) {
        self.status.syncs_sent = m.syncs(Direction::Sent);
        self.status.syncs_received = m.syncs(Direction::Received);
    }

    /// The background snapshots written, read from the metrics (metrics INV-2).
    pub(super) fn set_snapshots_taken(&mut self, m: &NodeMetrics) {
        self.status.snapshots_taken = m.snapshots.snapshots_taken.get();
    }

    /// Publishes what changed of `peer`'s state and the counters (INV-1).
    pub(super) fn publish(&mut self, peer: &Peer) {
        let s = &mut self.status;
        s.role = peer.role();
        s.leader = peer.leader();
        s.epoch = peer.epoch();
        s.last_applied = peer.last_applied_zxid();
        s.last_logged = peer.last_logged_zxid();
        s.last_committed = peer.last_committed_zxid();
        s.accepted_epoch = peer.accepted_epoch();
        s.current_epoch = peer.current_epoch();
        s.serving = peer.is_serving();
        if s.serving {
            s.restored_snapshot = None;
        }
        s.initialized = !peer.needs_initial_sync();
        if *s.membership != *peer.membership() {
            s.membership = Arc::new(peer.membership().clone());
        }
        if *s.committed_membership != *peer.committed_membership() {
            s.committed_membership = Arc::new(peer.committed_membership().clone());
        }
        s.removed = peer.is_removed();
        self.send_changed();
    }

    /// Publishes the fatal error that stops the node.
    pub(super) fn set_fatal(&mut self, peer: &Peer, reason: String) {
        self.status.fatal = Some(reason);
        self.publish(peer);
    }

    /// Publishes the stop (INV-2).
    pub(super) fn stopped(mut self) {
        self.status.stopped = true;
        let role = self.status.role_status();
        self.status_tx.send_replace(self.status);
        self.role_tx.send_replace(role);
    }

    fn send_changed(&self) {
        let new = &self.status;
        self.status_tx.send_if_modified(|cur| {
            let changed = cur != new;
            if changed {
                *cur = new.clone();
            }
            changed
        });
        let next = self.status.role_status();
        self.role_tx.send_if_modified(|cur| {
            let changed = *cur != next;
            if changed {
                *cur = next;
            }
            changed
        });
    }
}
