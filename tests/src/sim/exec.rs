//! The driver: feeds inputs to a peer and carries out its actions against the simulated disk,
//! state machine and network, exactly as `zab_core::io` prescribes (actions of a batch in
//! order; epoch files and truncation durable at once; appends through group commit).
//!
//! Anything the contract says cannot happen (a `SendLogRange` the log cannot serve, snapshot
//! chunks without a stream, a malformed or mislabelled SNAP, an append that does not extend
//! the log, a step error) is reported as a failure of the core.

use bytes::BytesMut;
use rand::Rng;
use zab_core::{Action, Input, Membership, Message, Role, ServerId, StepError, TxnKind, Zxid};

use super::cluster::Cluster;
use super::core::Peer;
use super::disk::Snapshot;
use super::net::{Channel, LinkKey, Sent};
use super::node::SimNode;
use super::record::{EpochWrite, Event};

impl Cluster {
    /// Starts (or restarts) `id` from its disk. A node whose data dir (or helper) holds a
    /// configuration without it is refused, as a dropped frontend is, and stays down.
    pub(crate) fn start(&mut self, id: ServerId) {
        let now_ms = self.now_ms;
        let node = self.nodes.get_mut(&id).unwrap_or_else(|| unreachable!());
        let (durable, state) = node.disk.load();
        let peer = match Peer::new(node.config.clone(), durable, now_ms) {
            Ok(p) => p,
            Err(e @ (StepError::Removed { .. } | StepError::NotAMember(_))) => {
                node.refused = true;
                self.mix(0x7ef ^ id.0);
                self.trace(format_args!("start {id} refused: {e}"));
                return;
            }
            Err(e) => {
                let msg = format!("node {id} refuses to start from its durable state: {e}");
                self.fail(&msg)
            }
        };
        let node = self.nodes.get_mut(&id).unwrap_or_else(|| unreachable!());
        node.refused = false;
        node.peer = Some(peer);
        node.paused = false;
        node.last_tick_ms = now_ms;
        node.since_snapshot = 0;
        node.syncing.clear();
        let old = std::mem::replace(&mut node.applied, state);
        let v = self.checker.on_state_loaded(id, &old, &node.applied, false);
        self.check(v);
        self.net.restart(id);
        self.trace(format_args!("start {id}"));
        self.run_actions(id);
    }

    /// Feeds `input` to `id` and executes the resulting actions.
    pub(crate) fn feed(&mut self, id: ServerId, input: Input) {
        let Some(node) = self.nodes.get(&id) else {
            return;
        };
        let verdict = self.checker.on_input(node.view(), &input);
        self.check(verdict);
        let Some(node) = self.nodes.get_mut(&id) else {
            return;
        };
        if let Input::ConnectionLost { peer } = &input {
            // The driver's sync to it ends with the connection (zab-net `node::out` INV-2).
            node.syncing.remove(peer);
        }
        let Some(peer) = node.peer.as_mut() else {
            return;
        };
        if let Err(e) = peer.step(input) {
            let msg = format!("node {id}: step error: {e}");
            self.fail(&msg);
        }
        self.run_actions(id);
    }

    fn run_actions(&mut self, id: ServerId) {
        let actions = match self.nodes.get_mut(&id).and_then(|n| n.peer.as_mut()) {
            Some(p) => p.take_actions(),
            None => return,
        };
        // Reports (`SyncChosen`, `SyncReceived`) carry nothing to do: left out of the mix so
        // that a seed replays the same run whether or not the core reports.
        let work = actions.iter().filter(|a| !is_report(a)).count();
        self.mix(id.0 ^ (work as u64) << 32);
        for a in actions {
            self.execute(id, a);
        }
    }

    /// Sends `msg`, streamed while `from`'s driver syncs `to` (zab-net `node::out` INV-5:
    /// from a DIFF or TRUNC header, a log range or a SNAP, through UPTODATE).
    fn send(&mut self, from: ServerId, to: ServerId, msg: Message) {
        let quorum = Channel::of(&msg) == Channel::Quorum;
        let streamed = quorum
            && self.nodes.get_mut(&from).is_some_and(|n| {
                if matches!(msg, Message::Diff { .. } | Message::Trunc { .. }) {
                    n.syncing.insert(to);
                }
                let syncing = n.syncing.contains(&to);
                if matches!(msg, Message::UpToDate) {
                    n.syncing.remove(&to);
                }
                syncing
            });
        self.send_as(from, to, msg, streamed);
    }

    /// `from`'s driver starts (or goes on with) a sync of `to` (zab-net `node::out` INV-5).
    fn syncing(&mut self, from: ServerId, to: ServerId) {
        if let Some(n) = self.nodes.get_mut(&from) {
            n.syncing.insert(to);
        }
    }

    /// `Disconnect`: the connection, and any sync on it, ends.
    fn disconnect(&mut self, id: ServerId, peer: ServerId) {
        if let Some(n) = self.nodes.get_mut(&id) {
            n.syncing.remove(&peer);
        }
        self.net.disconnect(id, peer);
        self.forget_deferred(id, peer);
    }

    /// Sends `msg`, as part of a stream when `streamed` (which a full link does not refuse:
    /// `net` INV-N5); a send that overflows its link breaks the connection.
    fn send_as(&mut self, from: ServerId, to: ServerId, msg: Message, streamed: bool) {
        self.syncs.on_send(from, to, &msg, self.step_no);
        if self.opts.record_events {
            self.events.push(Event {
                step: self.step_no,
                from,
                to,
                msg: msg.clone(),
            });
        }
        let sent = if streamed {
            self.net.send_streamed(from, to, msg)
        } else {
            self.net.send(from, to, msg)
        };
        if sent == Sent::Overflow {
            self.mix(0x0f10 ^ from.0 << 8 ^ to.0);
            self.trace(format_args!("OVERFLOW {from}->{to}: connection dropped"));
        }
    }

    fn execute(&mut self, id: ServerId, action: Action) {
        let node = &self.nodes[&id];
        let verdict = self.checker.on_action(node.view(), &action);
        self.check(verdict);
        if !matches!(
            action,
            Action::Send {
                msg: Message::Ping { .. } | Message::PingAck { .. },
                ..
            }
        ) {
            self.trace(format_args!("{id} does {action:?}"));
        }
        match action {
            Action::Send { to, msg } => self.send(id, to, msg),
            Action::Disconnect { peer } => self.disconnect(id, peer),
            Action::SendLogRange { to, after, upto } => self.send_log_range(id, to, after, upto),
            Action::SendSnapshot {
                to,
                zxid,
                membership,
            } => self.send_snapshot(id, to, zxid, membership),
            Action::WriteDone {
                request_id,
                outcome,
            } => {
                self.write_outcomes.insert(request_id, outcome);
            }
            Action::SyncDone {
                request_id,
                outcome,
            } => {
                self.sync_outcomes.insert(request_id, outcome);
            }
            Action::MembershipDone {
                request_id,
                outcome,
            } => {
                self.on_membership_done(id, request_id, outcome);
            }
            Action::MembershipChanged { committed, .. } => {
                let node = self.nodes.get_mut(&id).unwrap_or_else(|| unreachable!());
                node.committed = Some(committed);
            }
            Action::SyncChosen { .. } | Action::SyncReceived { .. } => {}
            Action::TransferDone { outcome } => self.on_transfer_done(id, outcome),
            Action::RoleChanged { role, .. } => {
                if role == Role::Leading && !self.nodes[&id].disk.pending.is_empty() {
                    self.leaders_with_pending_tail += 1;
                }
            }
            local => {
                let removal = matches!(&local, Action::Apply(t) if t.kind == TxnKind::Membership)
                    && self.nodes[&id]
                        .committed
                        .as_ref()
                        .is_some_and(|m| !m.members.contains_key(&id));
                self.execute_on_disk(id, local);
                if removal {
                    self.persist_removal(id);
                }
            }
        }
    }

    /// The node applied its own removal: like zab-net's driver, it makes that durable at once
    /// with a snapshot carrying the configuration, so a restart is refused (`StepError::Removed`).
    fn persist_removal(&mut self, id: ServerId) {
        let node = self.nodes.get_mut(&id).unwrap_or_else(|| unreachable!());
        let snap = Snapshot::of(&node.applied).carrying(node.committed.clone());
        let (zxid, bytes) = (snap.zxid, snap.bytes());
        node.since_snapshot = 0;
        let retain = self.opts.snap_retain;
        let purged = node.disk.take_snapshot(snap, retain, usize::MAX);
        self.feed(id, Input::SnapshotSaved { zxid, bytes });
        if let Some(first_zxid) = purged {
            self.feed(id, Input::LogPurged { first_zxid });
        }
    }

    /// `SendLogRange`: streams `(after, upto]` from `id`'s log to `to` as PROPOSAL + COMMIT
    /// pairs; a range the log does not hold contiguously is a failure of the core.
    fn send_log_range(&mut self, id: ServerId, to: ServerId, after: Zxid, upto: Zxid) {
        self.syncing(id, to);
        let disk = &self.nodes[&id].disk;
        match disk.read_range(after, upto) {
            Some(txns) => {
                self.syncs.on_log_range(id, to);
                for t in txns {
                    let zxid = t.zxid;
                    self.send_as(id, to, Message::Proposal(t), true);
                    self.send_as(id, to, Message::Commit { zxid }, true);
                }
            }
            None => {
                let msg = format!(
                    "node {id} asks to send log range ({after}, {upto}] to {to}, which its log \
                     (base {}, {} records, first {:?}, last {:?}) does not hold contiguously",
                    disk.log_base,
                    disk.log.len(),
                    disk.log.first().map(|t| t.zxid),
                    disk.last_appended()
                );
                self.fail(&msg);
            }
        }
    }

    /// `SendSnapshot`: SNAP, then `id`'s applied state in one to three chunks (drawn from the
    /// run's rng). The snapshot carries the configuration the action names, which must be the
    /// one the node last reported committed.
    fn send_snapshot(&mut self, id: ServerId, to: ServerId, zxid: Zxid, membership: Membership) {
        self.syncing(id, to);
        let node = &self.nodes[&id];
        if node.committed.as_ref() != Some(&membership) {
            self.fail(&format!(
                "{id}: SendSnapshot at {zxid} names configuration {membership}, but the last \
                 committed one reported is {:?}",
                node.committed.as_ref().map(|m| m.version)
            ));
        }
        let bytes = Snapshot::of(&node.applied)
            .carrying(Some(membership.clone()))
            .encode();
        let chunks = self.rng.gen_range(1..=3usize);
        let size = bytes.len().div_ceil(chunks).max(1);
        self.syncs.on_snapshot(id, to);
        self.send_as(id, to, Message::Snap { zxid, membership }, true);
        let mut rest = bytes;
        loop {
            let data = rest.split_to(size.min(rest.len()));
            let last = rest.is_empty();
            self.send_as(id, to, Message::SnapChunk { data, last }, true);
            if last {
                break;
            }
        }
    }

    /// An action on `id`'s own disk and state machine, counted and recorded first.
    fn execute_on_disk(&mut self, id: ServerId, local: Action) {
        if let Action::TruncateLog { zxid } = &local {
            let disk = &self.nodes[&id].disk;
            if disk.pending.back().is_some_and(|t| t.zxid > *zxid) {
                self.truncates_into_pending += 1;
            }
        }
        if let (true, Action::PersistAcceptedEpoch(e) | Action::PersistCurrentEpoch(e)) =
            (self.opts.record_events, &local)
        {
            self.epoch_writes.push(EpochWrite {
                step: self.step_no,
                node: id,
                accepted: matches!(local, Action::PersistAcceptedEpoch(_)),
                epoch: *e,
                before_event: self.events.len(),
            });
        }
        let node = self.nodes.get_mut(&id).unwrap_or_else(|| unreachable!());
        if let Err(msg) = execute_local(node, local) {
            self.fail(&msg);
        }
    }

    /// Completes an fsync on `id` covering its first `n` pending appends.
    pub(crate) fn fsync(&mut self, id: ServerId, n: usize) {
        let node = self.nodes.get_mut(&id).unwrap_or_else(|| unreachable!());
        if let Some(upto) = node.disk.fsync(n) {
            self.mix(upto.0);
            self.feed(id, Input::LogPersisted { upto });
        }
    }

    /// Finishes the SNAP install pending on `id`: durable, loaded, log reset, peer told.
    pub(crate) fn finish_install(&mut self, id: ServerId) {
        let node = self.nodes.get_mut(&id).unwrap_or_else(|| unreachable!());
        let Some(snap) = node.disk.finish_install() else {
            return;
        };
        let (zxid, bytes) = (snap.zxid, snap.bytes());
        let Some(membership) = snap.membership else {
            let msg = format!("node {id} installs a SNAP at {zxid} that carries no configuration");
            self.fail(&msg)
        };
        let old = std::mem::replace(&mut node.applied, snap.txns);
        node.since_snapshot = 0;
        let snap = !self.opts.allow_snap_regress;
        let v = self.checker.on_state_loaded(id, &old, &node.applied, snap);
        self.check(v);
        self.feed(id, Input::SnapshotInstalled { zxid, membership });
        self.feed(id, Input::SnapshotSaved { zxid, bytes });
    }

    /// The driver's periodic local snapshot (snapCount) and log purge.
    pub(crate) fn maybe_local_snapshot(&mut self, id: ServerId) {
        let (every, retain, keep) = (
            self.opts.snap_every,
            self.opts.snap_retain,
            self.opts.keep_log,
        );
        let node = self.nodes.get_mut(&id).unwrap_or_else(|| unreachable!());
        if every == 0 || node.since_snapshot < every || node.disk.install.is_some() {
            return;
        }
        node.since_snapshot = 0;
        let snap = Snapshot::of(&node.applied).carrying(node.committed.clone());
        let (zxid, bytes) = (snap.zxid, snap.bytes());
        let keep = if self.opts.purge_log {
            keep
        } else {
            usize::MAX
        };
        let purged = node.disk.take_snapshot(snap, retain, keep);
        self.feed(id, Input::SnapshotSaved { zxid, bytes });
        if let Some(first_zxid) = purged {
            self.feed(id, Input::LogPurged { first_zxid });
        }
    }

    /// A deliver step (INV-C4 of `cluster`): serves one of the ready `links` and pending
    /// `notices` per `links_per_deliver` ready links; a link served twice, or emptied
    /// meanwhile, just delivers less, and a receiver a delivery stopped gets nothing more.
    pub(crate) fn deliver_step(&mut self, links: &[LinkKey], notices: &[ServerId]) {
        let n = links.len() + notices.len();
        let served = self
            .opts
            .links_per_deliver
            .map_or(1, |per| links.len().div_ceil(per.max(1)).max(1));
        for _ in 0..served {
            let i = self.rng.gen_range(0..n);
            let to = if i < links.len() {
                links[i].1
            } else {
                notices[i - links.len()]
            };
            if !self.nodes.get(&to).is_some_and(|n| n.is_live()) {
                continue;
            }
            if i < links.len() {
                self.deliver(links[i]);
            } else {
                self.deliver_notice(notices[i - links.len()]);
            }
        }
    }
}

/// Actions that touch only the node's own disk and state machine.
/// True for the actions that only report (nothing to carry out).
fn is_report(action: &Action) -> bool {
    matches!(
        action,
        Action::SyncChosen { .. } | Action::SyncReceived { .. }
    )
}

fn execute_local(node: &mut SimNode, action: Action) -> Result<(), String> {
    let id = node.id;
    let disk = &mut node.disk;
    match action {
        Action::PersistAcceptedEpoch(e) => disk.accepted_epoch = e,
        Action::PersistCurrentEpoch(e) => disk.current_epoch = e,
        Action::PersistInitialized => disk.needs_initial_sync = false,
        Action::AppendLog(txn) => {
            let z = txn.zxid;
            if !disk.append(txn) {
                return Err(format!(
                    "node {id} appends {z} after {}: the log must grow strictly",
                    disk.last_appended()
                ));
            }
        }
        Action::TruncateLog { zxid } => disk.truncate(zxid),
        Action::BeginSnapshot { zxid, .. } => disk.incoming = Some((zxid, BytesMut::new())),
        Action::SnapshotChunk(b) => match &mut disk.incoming {
            Some((_, buf)) => buf.extend_from_slice(&b),
            None => return Err(format!("node {id}: SnapshotChunk without BeginSnapshot")),
        },
        Action::EndSnapshot { zxid } => {
            let ok = disk.end_snapshot(zxid).is_some_and(|s| {
                s.txns
                    .last()
                    .map_or(s.zxid == Zxid::ZERO, |t| t.zxid == s.zxid)
            });
            if !ok {
                return Err(format!(
                    "node {id}: EndSnapshot {zxid} without a complete stream whose state ends at \
                     {zxid}"
                ));
            }
        }
        Action::AbortSnapshot => disk.incoming = None,
        Action::Apply(txn) => {
            node.applied.push(txn);
            node.since_snapshot += 1;
        }
        other => return Err(format!("harness: {other:?} is not a local action")),
    }
    Ok(())
}
