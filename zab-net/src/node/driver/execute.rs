//! One action of the core, carried out (driver INV-1): sends and streams through `out`, log
//! commands through the log link, epoch files on a blocking thread, applies to the state
//! machine (a configuration txn to `apply_membership`), answers through `pending`, a new
//! configuration to the transport's peers and the snapshots, and the core's reports (role,
//! sync mode) logged and counted.

use tracing::{info, warn};
use zab_core::{
    Action, DiffSource, Epoch, Membership, Message, Role, ServerId, SyncMode, Txn, TxnKind, Zxid,
};
use zab_store::EpochKind;

use super::{node_span, Driver};
use crate::node::api::StateMachine;
use crate::node::fatal::Fatal;
use crate::node::out::Stream;

impl Driver {
    /// Carries out one action (INV-1).
    pub(super) async fn execute(&mut self, action: Action) -> Result<(), Fatal> {
        match action {
            Action::Send { to, msg } => self.send(to, msg),
            Action::Disconnect { peer } => self.disconnect(peer),
            Action::PersistAcceptedEpoch(e) => self.persist_epoch(EpochKind::Accepted, e).await?,
            Action::PersistCurrentEpoch(e) => self.persist_epoch(EpochKind::Current, e).await?,
            Action::PersistInitialized => self.persist_initialized().await?,
            Action::AppendLog(txn) => self.append_log(txn)?,
            Action::TruncateLog { zxid } => self.truncate_log(zxid).await?,
            Action::SendLogRange { to, after, upto } => {
                let s = Stream::Range { after, upto };
                self.out.stream(&self.transport, to, s);
            }
            Action::SendSnapshot {
                to,
                zxid,
                membership,
            } => self.stream_snapshot(to, zxid, membership)?,
            Action::BeginSnapshot { zxid, membership } => {
                self.snapper.begin_receive(zxid, &membership).await?
            }
            Action::SnapshotChunk(data) => self.receive_snap_chunk(&data)?,
            Action::EndSnapshot { zxid } => self.install_snapshot(zxid).await?,
            Action::AbortSnapshot => self.snapper.abort_receive(),
            Action::Apply(txn) => self.apply_committed(txn).await?,
            Action::WriteDone {
                request_id,
                outcome,
            }
            | Action::SyncDone {
                request_id,
                outcome,
            } => self.pending.resolve(request_id, outcome),
            Action::MembershipDone {
                request_id,
                outcome,
            } => self.pending.resolve_change(request_id, outcome),
            Action::TransferDone { outcome } => self.transfer.resolve(outcome),
            Action::MembershipChanged {
                in_force,
                committed,
            } => self.on_membership_changed(in_force, committed).await,
            Action::SyncChosen {
                learner,
                mode,
                from,
                to,
                txns,
                source,
            } => self.on_sync_chosen(learner, mode, (from, to), txns, source),
            Action::SyncReceived { leader, mode, zxid } => {
                self.on_sync_received(leader, mode, zxid)
            }
            Action::RoleChanged {
                role,
                leader,
                epoch,
            } => self.on_role_changed(role, leader, epoch),
        }
        Ok(())
    }

    /// Sends `msg` to `to` (an UPTODATE is counted: the learner's sync ends).
    fn send(&mut self, to: ServerId, msg: Message) {
        if matches!(msg, Message::UpToDate) {
            self.meter.uptodate_sent(to);
        }
        self.out.send(&self.transport, to, msg)
    }

    /// Drops the connection to `peer` (the meter forgets it).
    fn disconnect(&mut self, peer: ServerId) {
        self.admission.forget(peer);
        self.meter.peer_lost(peer);
        self.out.disconnect(&self.transport, peer)
    }

    /// Queues `txn` to the txn log (the meter times it until durable).
    fn append_log(&mut self, txn: Txn) -> Result<(), Fatal> {
        self.meter.appended(txn.zxid, self.peer.role());
        self.log.append(txn)?;
        Ok(())
    }

    /// Cuts the txn log after `zxid` (TRUNC); inputs the log link had queued are kept.
    async fn truncate_log(&mut self, zxid: Zxid) -> Result<(), Fatal> {
        let inputs = &mut self.inputs;
        self.log.truncate(zxid, |i| inputs.push_back(i)).await?;
        self.meter.log_cut(Some(zxid));
        info!(%zxid, "log truncated (TRUNC)");
        Ok(())
    }

    /// One chunk of a SNAP being received.
    fn receive_snap_chunk(&mut self, data: &[u8]) -> Result<(), Fatal> {
        self.meter.snap_chunk(data.len());
        self.snapper.receive_chunk(data)?;
        Ok(())
    }

    /// Applies a committed txn and counts it; a configuration removing this server is made
    /// durable at once.
    async fn apply_committed(&mut self, txn: Txn) -> Result<(), Fatal> {
        let (zxid, kind) = (txn.zxid, txn.kind);
        self.apply(txn)?;
        self.meter.applied(zxid);
        if kind == TxnKind::Membership && self.removed_by_committed() {
            self.persist_removal(zxid).await?;
        }
        Ok(())
    }

    /// Streams a SNAP of the state machine at `zxid`, under `membership`, to `to`.
    fn stream_snapshot(
        &mut self,
        to: ServerId,
        zxid: Zxid,
        membership: Membership,
    ) -> Result<(), Fatal> {
        let source = self.sm_mut()?.snapshot();
        info!(peer = to.0, %zxid, "streaming a SNAP");
        let s = Stream::Snapshot {
            zxid,
            membership,
            source,
        };
        self.out.stream(&self.transport, to, s);
        Ok(())
    }

    /// Counts and logs a sync of this node by `leader`, by `mode` to `zxid` (its end is
    /// logged by the meter).
    fn on_sync_received(&mut self, leader: ServerId, mode: SyncMode, zxid: Zxid) {
        let applied = self.peer.last_applied_zxid();
        self.meter.sync_received(leader, (mode, zxid), applied);
        self.board.set_syncs(self.meter.metrics());
        let at = match mode {
            SyncMode::Diff => "up to",
            SyncMode::TruncDiff => "cutting the log to",
            SyncMode::Snap => "at",
        };
        info!("leader {} syncs this node by {mode} {at} {zxid}", leader.0);
    }

    /// Enters the span of the new role and logs the change.
    fn on_role_changed(&mut self, role: Role, leader: Option<ServerId>, epoch: Epoch) {
        self.span = node_span(self.board.sid(), role, epoch.0);
        let _entered = self.span.clone().entered();
        info!(%role, leader = leader.map(|l| l.0), %epoch, "role changed");
    }

    /// Counts and logs the leader's sync of `learner` over `(from, to]`.
    fn on_sync_chosen(
        &mut self,
        learner: ServerId,
        mode: SyncMode,
        (from, to): (Zxid, Zxid),
        txns: u64,
        source: DiffSource,
    ) {
        self.meter.sync_chosen(learner, mode, (from, to), txns);
        if matches!(source, DiffSource::Log { .. }) {
            self.meter.diff_from_log();
        }
        self.board.set_syncs(self.meter.metrics());
        match source {
            DiffSource::Memory => info!(
                "syncing learner {} by {mode} from {from} to {to}, {txns} txns",
                learner.0
            ),
            DiffSource::Log { count, .. } => {
                info!(
                    "syncing learner {} by {mode} from {from} to {to}, {txns} txns \
                     ({count} read from the on-disk log)",
                    learner.0
                );
            }
        }
    }

    fn sm_mut(&mut self) -> Result<&mut Box<dyn StateMachine>, Fatal> {
        self.sm.as_mut().ok_or(Fatal::StateMachineLost)
    }

    /// The configuration in force or the committed one moved: the transport reaches the
    /// members in force, later snapshots carry the committed one.
    async fn on_membership_changed(&mut self, in_force: Membership, committed: Membership) {
        let peers = self.peer_book.peers_of(&in_force).await;
        self.transport.set_peers(&peers);
        let sid = self.board.sid();
        info!(
            in_force = %in_force.version,
            committed = %committed.version,
            members = ?in_force.members.keys().map(|s| s.0).collect::<Vec<_>>(),
            "configuration"
        );
        if !committed.members.contains_key(&sid) {
            warn!(
                "this server ({}) was removed from the cluster by configuration {}: it no \
                 longer votes or serves; stop it (its data dir cannot rejoin: wipe it and add \
                 the server again)",
                sid.0, committed.version
            );
        }
        self.snapper.set_committed(committed);
    }

    /// True when the committed configuration does not list this server.
    fn removed_by_committed(&self) -> bool {
        !self
            .snapper
            .committed_members()
            .contains_key(&self.board.sid())
    }

    /// This server applied its own removal at `zxid`: a snapshot carrying that configuration
    /// is written and made durable before anything else runs, so a restart of this data dir
    /// is refused (`StepError::Removed`) instead of running, unaware, with the log's copy of
    /// the change (which a restarted peer cannot know is committed).
    async fn persist_removal(&mut self, zxid: Zxid) -> Result<(), Fatal> {
        self.snapper.wait_idle().await;
        let source = self.sm_mut()?.snapshot();
        self.meter.snapshot_started();
        self.snapper.start(zxid, source, self.log.writer().clone());
        self.snapper.wait_idle().await;
        info!(%zxid, "the removal of this server is durable: a restart will be refused");
        Ok(())
    }

    /// Applies a committed txn: the application's operation, or a configuration (whose
    /// `MembershipChanged` came just before it, zab-core io.rs).
    fn apply(&mut self, txn: Txn) -> Result<(), Fatal> {
        let zxid = txn.zxid;
        match txn.kind {
            TxnKind::App => self
                .sm_mut()?
                .apply(zxid, &txn.data)
                .map_err(|source| Fatal::Apply { zxid, source })?,
            TxnKind::Membership => {
                let m = Membership::from_txn(&txn).map_err(|e| Fatal::BadMembershipTxn {
                    zxid,
                    reason: e.reason,
                })?;
                self.sm_mut()?
                    .apply_membership(zxid, &m)
                    .map_err(|source| Fatal::ApplyMembership { zxid, source })?;
            }
        }
        if self.snapper.applied(txn.data.len()) {
            let source = self.sm_mut()?.snapshot();
            self.meter.snapshot_started();
            self.snapper.start(zxid, source, self.log.writer().clone());
        }
        Ok(())
    }

    async fn persist_epoch(&mut self, kind: EpochKind, e: Epoch) -> Result<(), Fatal> {
        let files = self.epochs.clone();
        tokio::task::spawn_blocking(move || files.write(kind, e))
            .await
            .map_err(Fatal::EpochWriter)?
            .map_err(|source| Fatal::EpochFile {
                file: kind.file_name(),
                source,
            })
    }

    /// Removes the `needsInitialSync` marker (synchronous, like the epoch files; B9).
    async fn persist_initialized(&mut self) -> Result<(), Fatal> {
        let files = self.epochs.clone();
        tokio::task::spawn_blocking(move || files.set_needs_initial_sync(false))
            .await
            .map_err(Fatal::EpochWriter)?
            .map_err(Fatal::InitialSyncMarker)?;
        info!("initial sync complete and durable: this node now votes");
        Ok(())
    }
}
