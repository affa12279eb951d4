//! Safety checkers, run on every input, every action and after every step of the simulation.
//! One module per property of ZooKeeper's `Zab.tla` (and of DESIGN §3.6):
//!
//! | module          | properties                                                          |
//! |-----------------|---------------------------------------------------------------------|
//! | [`leadership`]  | Leadership1/2: ≤ 1 established leader per epoch; epochs only grow per server |
//! | [`order`]       | PrefixConsistency, Agreement, TotalOrder, Integrity, PrimaryOrder   |
//! | [`durability`]  | acknowledged writes survive; ACK / ACKEPOCH / NEWLEADER-ACK / currentEpoch only after durable |
//! | [`newleader_ack`] | a synced learner with a durable log acks NEWLEADER within a bound |
//! | [`serving`]     | a learner serves (applies, answers clients) only after UPTODATE     |
//! | [`reads`]       | sync-then-read is linearizable                                      |
//! | [`initial_sync`]| a wiped node never votes nor is counted before its first sync (B9)  |
//! | [`membership`]  | committed configuration = applied history; a committed change is held like an acknowledged write; a removed node never votes nor leads |
//! | (this module)   | TRUNC drops only never-committed txns, never below the applied point; |
//! |                 | a SNAP sent is labelled with the sender's last applied zxid          |
//!
//! A checker never panics itself: it returns a [`Verdict`]; the cluster turns a violation into
//! a failure that names the seed, the step and the replay command.

pub mod durability;
pub mod initial_sync;
pub mod leadership;
pub mod membership;
pub mod newleader_ack;
pub mod order;
pub mod reads;
pub mod serving;

use zab_core::{Action, Input, Message, Role, ServerId, Txn, Zxid};

use crate::sim::disk::Disk;

/// `Err(description)` when a property is violated.
pub type Verdict = Result<(), String>;

/// What a checker may look at on one node.
#[derive(Clone, Copy)]
pub struct NodeView<'a> {
    /// The node.
    pub id: ServerId,
    /// Its disk model.
    pub disk: &'a Disk,
    /// Its state machine: the applied txns.
    pub applied: &'a [Txn],
    /// Its configuration in force counts it in no quorum and it follows by design: it is a
    /// joining member (added as a follower, not yet promoted), or the configuration no longer
    /// lists it (a joining member whose removal it logged while syncing).
    pub joining: bool,
}

impl NodeView<'_> {
    /// The last applied zxid.
    pub fn last_applied(&self) -> Zxid {
        self.applied.last().map_or(Zxid::ZERO, |t| t.zxid)
    }
}

/// The peer's externally visible state after a step.
#[derive(Clone, Copy, Debug)]
pub struct PeerView {
    /// `Peer::role()`.
    pub role: Role,
    /// `Peer::leader()`.
    pub leader: Option<ServerId>,
    /// `Peer::is_serving()`.
    pub serving: bool,
    /// `Peer::current_epoch()`.
    pub current_epoch: zab_core::Epoch,
}

/// Every checker.
#[derive(Debug, Default)]
pub struct Checker {
    /// Leadership1/2.
    pub leadership: leadership::Leadership,
    /// Order properties over applied sequences.
    pub order: order::Order,
    /// Acknowledged writes and ACK-after-durable.
    pub durability: durability::Durability,
    /// Learners serve only after UPTODATE.
    pub serving: serving::Serving,
    /// Linearizable sync-reads.
    pub reads: reads::Reads,
    /// Synced learners ack NEWLEADER once durable.
    pub newleader_ack: newleader_ack::NewLeaderAck,
    /// Configurations, committed changes and removed nodes.
    pub membership: membership::MembershipChecker,
}

impl Checker {
    /// An input is about to be fed to `node`.
    pub fn on_input(&mut self, node: NodeView<'_>, input: &Input) -> Verdict {
        let msg = match input {
            Input::Message { from, msg } => Some((*from, msg)),
            _ => None,
        };
        self.newleader_ack.on_input(node.id, msg);
        match input {
            Input::Message { from, msg } => {
                self.durability.on_receive(node.id, *from, msg);
                self.serving.on_receive(node.id, *from, msg);
            }
            Input::ClientWrite {
                request_id,
                payload,
            } => {
                self.order.on_client_write(payload);
                self.durability
                    .on_client_write(node.id, *request_id, payload)?;
            }
            Input::ChangeMembership { request_id, .. } => {
                self.membership.on_change(node.id, *request_id)?;
            }
            Input::ClientSync { request_id } => {
                self.reads
                    .on_client_sync(node.id, *request_id, self.durability.max_acked())?;
            }
            _ => {}
        }
        Ok(())
    }

    /// `node` asks for `action`; called before the driver executes it.
    pub fn on_action(&mut self, node: NodeView<'_>, action: &Action) -> Verdict {
        initial_sync::on_action(node, action)?;
        self.membership.on_action(node, action)?;
        match action {
            Action::Send { to, msg } => self.on_send(node, *to, msg),
            Action::AppendLog(txn) => self.order.on_logged(node.id, txn),
            Action::PersistCurrentEpoch(e) => {
                self.durability.on_persist_current(node, *e)?;
                let disk = (node.disk.accepted_epoch, node.disk.current_epoch);
                self.leadership.on_persist_epoch(node.id, false, *e, disk)
            }
            Action::PersistAcceptedEpoch(e) => {
                let accepted = matches!(action, Action::PersistAcceptedEpoch(_));
                let disk = (node.disk.accepted_epoch, node.disk.current_epoch);
                self.leadership
                    .on_persist_epoch(node.id, accepted, *e, disk)
            }
            Action::TruncateLog { zxid } => self.on_truncate(node, *zxid),
            Action::Apply(txn) => {
                self.serving.on_serve(node.id, "Apply")?;
                self.order.on_apply(node.id, node.applied, txn)
            }
            Action::WriteDone {
                request_id,
                outcome,
            } => {
                if outcome.is_ok() {
                    self.serving.on_serve(node.id, "WriteDone")?;
                }
                self.durability.on_write_done(node, *request_id, outcome)
            }
            Action::SyncDone {
                request_id,
                outcome,
            } => {
                if outcome.is_ok() {
                    self.serving.on_serve(node.id, "SyncDone")?;
                }
                self.reads.on_sync_done(node, *request_id, outcome)
            }
            Action::MembershipDone {
                request_id,
                outcome,
            } => {
                if let Some(txn) = self.membership.on_done(node, *request_id, outcome)? {
                    self.durability.on_change_committed(&txn);
                }
                Ok(())
            }
            Action::MembershipChanged { committed, .. } => {
                self.membership.on_committed(node, committed)
            }
            Action::RoleChanged { role, leader, .. } => {
                self.serving.on_role(node.id, *role, *leader);
                self.durability.on_role(node.id, *role);
                Ok(())
            }
            Action::SendSnapshot { zxid, .. } => {
                if *zxid != node.last_applied() {
                    return Err(format!(
                        "node {} sends a snapshot labelled {zxid} but its state is at {}",
                        node.id,
                        node.last_applied()
                    ));
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// `node` truncates its log after `zxid`: never below what it applied, never dropping a
    /// txn applied anywhere.
    fn on_truncate(&mut self, node: NodeView<'_>, zxid: Zxid) -> Verdict {
        if zxid < node.last_applied() {
            return Err(format!(
                "node {} truncates its log to {zxid} below its last applied (committed) \
                 zxid {}",
                node.id,
                node.last_applied()
            ));
        }
        let disk = node.disk;
        let dropped = disk
            .log
            .iter()
            .chain(disk.pending.iter())
            .filter(|t| t.zxid > zxid);
        for t in dropped {
            self.durability.on_drop(node.id, zxid, t)?;
            if self.order.is_applied_somewhere(t) {
                return Err(format!(
                    "node {} truncates its log to {zxid}, dropping {} which is committed \
                     (applied on some node)",
                    node.id, t.zxid
                ));
            }
        }
        Ok(())
    }

    fn on_send(&mut self, node: NodeView<'_>, to: ServerId, msg: &Message) -> Verdict {
        if let Message::Proposal(txn) | Message::Inform(txn) = msg {
            self.order.on_logged(node.id, txn)?;
        }
        self.newleader_ack.on_send(node.id, to, msg);
        self.durability.on_send(node, to, msg)
    }

    /// The state machine of `node` was replaced (restart or SNAP install).
    pub fn on_state_loaded(
        &mut self,
        id: ServerId,
        old: &[Txn],
        new: &[Txn],
        snap: bool,
    ) -> Verdict {
        self.order.on_state_loaded(id, old, new, snap)
    }

    /// After a step: `views` holds every up node.
    pub fn after_step(&mut self, views: &[(NodeView<'_>, PeerView)]) -> Verdict {
        for (node, peer) in views {
            if self.leadership.after_step(node.id, peer)? {
                self.durability.on_established(*node, peer.current_epoch)?;
            }
            self.serving.after_step(node.id, peer)?;
            self.newleader_ack.after_step(*node, peer)?;
        }
        Ok(())
    }

    /// `id` crashed: forget its volatile tracking and its clients' pending requests.
    pub fn on_crash(&mut self, id: ServerId) {
        self.durability.on_crash(id);
        self.newleader_ack.on_crash(id);
        self.serving.on_crash(id);
        self.reads.on_crash(id);
        self.membership.on_crash(id);
    }
}
