//! Answers to one request, and the node facts the answers need: STATUS, SHOW FRONTENDS, the
//! four-letter words' numbers.
//!
//! Reads: with the sync flag, the node first syncs (then the data is fresh, so the staleness
//! guard is not consulted); otherwise a non-leader refuses data reads with STALE when its lag
//! is over the tolerance. STATUS, DIGEST and SHOW FRONTENDS are diagnostics and are answered
//! whatever the lag (DIGEST carries its journal id).
//!
//! A node that stopped on a fatal error answers no read, STATUS or DIGEST: its catalog is
//! frozen while the cluster moves on (`fatal` INV-1); each gets INTERNAL naming the error.
//!
//! SHOW FRONTENDS and SHOW MEMBERS: the leader's view, asked fresh (`frontends`).
//! GET_CONFIG is answered by the node itself, whatever its lag; RECOVERY_INFO too, and also
//! by a node that stopped on a fatal error (`recovery_info`). TRANSFER_LEADER: `transfer`.
//! `mntr` on the leader: `zk_followers` = learners (followers and observers) that answered
//! STATUS naming this leader, `zk_synced_followers` = the followers among them.
//!
//! INV: every answer is computed from one catalog version (`protocol::read` INV-1) and no
//! request holds a lock across an await.

mod transfer;

use zab_net::NodeStatus;
use zab_net::Role;

use super::frontends::Polled;
use super::session::RequestContext;
use super::write::is_serving_leader;
use super::Shared;
use crate::protocol::{
    answer_catalog_read, ErrorReply, Mode, RequestBody, ResponseBody, ServerStats, Status,
    StatusInfo,
};

/// The software version reported to clients.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The protocol's mode for a node status.
pub fn mode_of(st: &NodeStatus) -> Mode {
    match st.role {
        Role::Leading => Mode::Leader,
        Role::Following => Mode::Follower,
        Role::Observing => Mode::Observer,
        Role::Looking => Mode::Looking,
    }
}

impl Shared {
    /// The answer to `body` (`forwarded`: it came from another node).
    pub async fn handle(
        &self,
        ctx: &RequestContext,
        body: &RequestBody,
        forwarded: bool,
    ) -> Result<ResponseBody, ErrorReply> {
        if let RequestBody::Write(_) | RequestBody::ChangeMembership(_) = body {
            return self.write(ctx, body, forwarded).await;
        }
        if let RequestBody::RecoveryInfo = body {
            // Durable facts, answered even by a node that stopped on a fatal error.
            return Ok(ResponseBody::RecoveryInfo(self.recovery_info()));
        }
        if let RequestBody::TransferLeader { target } = body {
            self.refuse_if_fatal()?;
            return self.transfer_leader(ctx, *target, forwarded).await;
        }
        self.refuse_if_fatal()?;
        let answer = match body {
            RequestBody::Status => Ok(ResponseBody::Status(self.status_info())),
            RequestBody::GetConfig => Ok(ResponseBody::Config(self.cluster_config())),
            RequestBody::Sync => Ok(ResponseBody::Synced {
                journal_id: self.sync().await?,
            }),
            _ => self.read(ctx, body, forwarded).await,
        };
        // Again after the catalog was read: an answer whose catalog version was taken after
        // the node stopped is never sent (`fatal` INV-1).
        self.refuse_if_fatal()?;
        answer
    }

    /// INTERNAL naming the error once the node stopped on a fatal error (`fatal` INV-1).
    pub(super) fn refuse_if_fatal(&self) -> Result<(), ErrorReply> {
        match self
            .node
            .status_if(|s| s.fatal.is_some())
            .and_then(|s| s.fatal)
        {
            None => Ok(()),
            Some(reason) => Err(ErrorReply::new(
                Status::Internal,
                format!(
                    "node {} stopped on a fatal error and is exiting; ask another node: {reason}",
                    self.cfg.sid
                ),
            )),
        }
    }

    async fn read(
        &self,
        ctx: &RequestContext,
        body: &RequestBody,
        forwarded: bool,
    ) -> Result<ResponseBody, ErrorReply> {
        let opts = body.read_options().unwrap_or_default();
        if opts.sync {
            self.sync().await?;
        } else if !matches!(
            body,
            RequestBody::Digest(_) | RequestBody::ShowFrontends(_) | RequestBody::ShowMembers(_)
        ) {
            let st = self.node.status();
            self.progress
                .check(is_serving_leader(&st))
                .map_err(ErrorReply::from)?;
        }
        if let RequestBody::ShowFrontends(_) | RequestBody::ShowMembers(_) = body {
            return Ok(self.show_frontends(ctx, body, forwarded).await);
        }
        let catalog = self.catalog.load();
        answer_catalog_read(&catalog, body).unwrap_or_else(|| {
            Err(ErrorReply::new(
                Status::Internal,
                format!("{} is not a read this server answers", body.kind()),
            ))
        })
    }

    /// This node's STATUS.
    pub fn status_info(&self) -> StatusInfo {
        let st = self.node.status();
        let catalog = self.catalog.load();
        let leader = is_serving_leader(&st);
        StatusInfo {
            sid: self.cfg.sid,
            mode: mode_of(&st),
            leader_sid: st.leader.map(|l| l.0),
            epoch: u64::from(st.epoch.0),
            applied_journal_id: catalog.journal_id(),
            last_timestamp_ms: catalog.last_timestamp_ms(),
            staleness_ms: if leader { None } else { self.progress.lag_ms() },
            entry_count: catalog.entry_count(),
            cluster_id: self.cfg.cluster_id,
            version: VERSION.to_string(),
            last_start_time_ms: Some(self.progress.started_wall_ms()),
        }
    }

    /// The numbers of the four-letter words.
    pub async fn server_stats(&self) -> ServerStats {
        let st = self.node.status();
        let catalog = self.catalog.load();
        let followers = if st.role == Role::Leading && st.fatal.is_none() {
            let peers = self.poll_members().await;
            let learners: Vec<&StatusInfo> = peers
                .values()
                .filter_map(|p| match p {
                    Polled::Answered(s) => Some(s),
                    Polled::Failed(_) => None,
                })
                .filter(|s| s.leader_sid == Some(self.cfg.sid) && s.mode != Mode::Leader)
                .collect();
            let synced = learners.iter().filter(|s| s.mode == Mode::Follower).count();
            Some((learners.len() as u64, synced as u64))
        } else {
            None
        };
        let t = self.stats.totals();
        ServerStats {
            version: VERSION.to_string(),
            sid: self.cfg.sid,
            mode: mode_of(&st),
            epoch: u64::from(st.epoch.0),
            zxid: catalog.journal_id(),
            node_count: catalog.entry_count(),
            latency_min_ms: t.min_ms,
            latency_avg_ms: t.avg_ms,
            latency_max_ms: t.max_ms,
            received: t.received,
            sent: t.sent,
            connections: t.clients.len() as u64,
            outstanding: t.outstanding,
            staleness_ms: if is_serving_leader(&st) {
                None
            } else {
                self.progress.lag_ms()
            },
            followers,
            clients: t.clients,
            syncs_sent: st.syncs_sent,
            syncs_received: st.syncs_received,
            initialized: st.initialized,
            config_version: st.committed_membership.version,
            fatal: st.fatal,
        }
    }
}
