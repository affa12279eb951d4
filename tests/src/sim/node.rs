//! One simulated server: the peer (absent while down), its disk and its state machine.
//!
//! INV-SN1: `applied` is the state machine: the snapshot it was loaded from followed by every
//! txn the peer applied since; a crash replaces it with the newest durable snapshot.
//! INV-SN2: `committed` is the committed configuration of the peer's last
//! `Action::MembershipChanged`: what a snapshot taken now carries.

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use zab_core::{Config, Input, MemberRole, Membership, ServerId, Txn};
use zab_net::admission::Intake;

use super::checker::{NodeView, PeerView};
use super::core::Peer;
use super::disk::Disk;

/// One server of the cluster.
#[derive(Debug)]
pub struct SimNode {
    /// Its id.
    pub id: ServerId,
    /// Its configuration.
    pub config: Config,
    /// The running peer; `None` while crashed.
    pub peer: Option<Peer>,
    /// Its disk.
    pub disk: Disk,
    /// Its state machine: the applied txns.
    pub applied: Vec<Txn>,
    /// The committed configuration it last reported (INV-SN2); kept across a crash, where it
    /// is reported again at the restart.
    pub committed: Option<Membership>,
    /// Its last start was refused: its data dir (or its helper) holds a configuration without
    /// it, as a dropped frontend's does. It stays down until a wipe lets it try again.
    pub refused: bool,
    /// Applies since the last local snapshot.
    pub since_snapshot: usize,
    /// A paused node gets no input (a stalled process); time still passes.
    pub paused: bool,
    /// Virtual time of its last tick.
    pub last_tick_ms: u64,
    /// Times it crashed.
    pub crashes: u32,
    /// A slow disk (`faults` INV-F4): until this virtual time no group-commit fsync of this
    /// node completes and no `LogPersisted` is fed to it (0: the disk is not stalled).
    pub fsync_stalled_until_ms: u64,
    /// A power loss scheduled inside the stall, at this virtual time.
    pub power_loss_at_ms: Option<u64>,
    /// The restart scheduled after that power loss, at this virtual time.
    pub restart_at_ms: Option<u64>,
    /// Its driver's intake limit and learners' deferred requests (`admit` INV-A1), at
    /// virtual time.
    pub intake: Intake<Duration>,
    /// Client requests its driver has not taken yet, in order (`admit` INV-A2).
    pub held: VecDeque<Input>,
    /// The learners its driver is syncing: every quorum message to them is streamed, which
    /// a full link does not refuse (zab-net `node::out` INV-5; `exec`).
    pub syncing: BTreeSet<ServerId>,
}

impl SimNode {
    /// True when up (crashed nodes are down; paused ones are up).
    pub fn is_up(&self) -> bool {
        self.peer.is_some()
    }

    /// Its log fsyncs are stalled at virtual time `now_ms`.
    pub fn fsync_stalled(&self, now_ms: u64) -> bool {
        now_ms < self.fsync_stalled_until_ms
    }

    /// Up and not paused: it can take inputs.
    pub fn is_live(&self) -> bool {
        self.peer.is_some() && !self.paused
    }

    /// A node that never ran, on an empty disk: a bootstrap member (`helper` `None`), or one
    /// that joins with the configuration `helper` a member gave it; its links hold
    /// `outbox_len` messages.
    pub fn new(
        id: ServerId,
        config: Config,
        helper: Option<Membership>,
        outbox_len: usize,
    ) -> SimNode {
        let mut disk = Disk::default();
        if helper.is_some() {
            disk.wipe(helper);
        }
        SimNode {
            id,
            config,
            peer: None,
            disk,
            applied: Vec::new(),
            committed: None,
            refused: false,
            since_snapshot: 0,
            paused: false,
            last_tick_ms: 0,
            crashes: 0,
            fsync_stalled_until_ms: 0,
            power_loss_at_ms: None,
            restart_at_ms: None,
            intake: Intake::new(outbox_len),
            held: VecDeque::new(),
            syncing: BTreeSet::new(),
        }
    }

    /// The checker's view of the node.
    pub fn view(&self) -> NodeView<'_> {
        NodeView {
            id: self.id,
            disk: &self.disk,
            applied: &self.applied,
            joining: self.peer.as_ref().is_some_and(|p| {
                matches!(
                    p.membership().role_of(self.id),
                    Some(MemberRole::Joining) | None
                )
            }),
        }
    }

    /// The peer's visible state, when up.
    pub fn peer_view(&self) -> Option<PeerView> {
        self.peer.as_ref().map(|p| PeerView {
            role: p.role(),
            leader: p.leader(),
            serving: p.is_serving(),
            current_epoch: p.current_epoch(),
        })
    }
}
