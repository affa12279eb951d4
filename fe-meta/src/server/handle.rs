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
//! SHOW FRONTENDS and SHOW MEMBERS: the rows are the members of the node's committed cluster
//! configuration (zoo.cfg's `server.N` lines only until a change committed), plus frontends
//! registered in the catalog; SHOW MEMBERS adds the configuration's version and marks a member
//! that is joining (added as a follower, not yet synced and promoted). A node learns the
//! others' progress by asking each one's STATUS over its client port as its configuration
//! gives it (`membership`; timeout `peer_status_timeout_ms`, answers cached for 1 s): `alive` =
//! it answered, `replayed_journal_id` = its applied journal id, `lag_ms` = its staleness (0 on
//! the leader). GET_CONFIG is answered by the node itself, whatever its lag.
//! `mntr` on the leader: `zk_followers` = learners (followers and observers) that answered
//! STATUS naming this leader, `zk_synced_followers` = the followers among them.
//!
//! INV: every answer is computed from one catalog version (`protocol::read` INV-1) and no
//! request holds a lock across an await.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use zab_net::NodeStatus;
use zab_net::{Role, Zxid};

use super::membership::member_views;
use super::session::RequestContext;
use super::write::is_serving_leader;
use super::Shared;
use crate::protocol::{
    answer_catalog_read, ErrorReply, FrontendRow, MemberRow, MemberState, Mode, RequestBody,
    RequestMeta, ResponseBody, ServerStats, Status, StatusInfo,
};
use crate::state::catalog::Frontend;

/// How long peers' STATUS answers are reused.
const PEER_CACHE: Duration = Duration::from_secs(1);

/// The peers' last STATUS answers (`None`: did not answer).
pub type PeerStatuses = BTreeMap<u64, Option<StatusInfo>>;

/// The cache of peers' STATUS answers.
#[derive(Debug, Default)]
pub struct FrontendCache(Mutex<Option<(Instant, PeerStatuses)>>);

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
        self.refuse_if_fatal()?;
        let answer = match body {
            RequestBody::Status => Ok(ResponseBody::Status(self.status_info())),
            RequestBody::GetConfig => Ok(ResponseBody::Config(self.cluster_config())),
            RequestBody::Sync => Ok(ResponseBody::Synced {
                journal_id: self.sync().await?,
            }),
            _ => self.read(body).await,
        };
        // Again after the catalog was read: an answer whose catalog version was taken after
        // the node stopped is never sent (`fatal` INV-1).
        self.refuse_if_fatal()?;
        answer
    }

    /// INTERNAL naming the error once the node stopped on a fatal error (`fatal` INV-1).
    fn refuse_if_fatal(&self) -> Result<(), ErrorReply> {
        match self.node.status().fatal {
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

    async fn read(&self, body: &RequestBody) -> Result<ResponseBody, ErrorReply> {
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
        match body {
            RequestBody::ShowFrontends(_) => {
                let (journal_id, _, rows) = self.member_rows().await;
                let rows = rows.into_iter().map(|m| m.row).collect();
                return Ok(ResponseBody::Frontends { journal_id, rows });
            }
            RequestBody::ShowMembers(_) => {
                let (journal_id, config_version, rows) = self.member_rows().await;
                return Ok(ResponseBody::Members {
                    journal_id,
                    config_version,
                    rows,
                });
            }
            _ => {}
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
        }
    }

    /// The peers' STATUS, from the cache or asked now (in parallel, bounded).
    pub async fn peer_statuses(&self) -> PeerStatuses {
        if let Some((at, cached)) = self.lock_cache().as_ref() {
            if at.elapsed() < PEER_CACHE {
                return cached.clone();
            }
        }
        // Everyone in the configuration in force and in the committed one (they differ while a
        // change is in flight), at the address in force.
        let st = self.node.status();
        let mut members = member_views(&st.committed_membership);
        members.extend(member_views(&st.membership));
        let asks = members
            .into_iter()
            .filter(|(sid, _)| *sid != self.cfg.sid)
            .map(|(sid, m)| async move {
                let Some(addr) = m.client_addr.as_deref() else {
                    return (sid, None);
                };
                let r = self
                    .peers
                    .call(
                        addr,
                        RequestMeta::default(),
                        RequestBody::Status,
                        self.cfg.peer_timeout,
                    )
                    .await;
                match r {
                    Ok(Ok(ResponseBody::Status(s))) => (sid, Some(s)),
                    _ => (sid, None),
                }
            });
        let fresh: PeerStatuses = futures::future::join_all(asks).await.into_iter().collect();
        *self.lock_cache() = Some((Instant::now(), fresh.clone()));
        fresh
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, Option<(Instant, PeerStatuses)>> {
        self.frontends.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The rows of SHOW FRONTENDS / SHOW MEMBERS: the catalog's journal id, the committed
    /// configuration's version, and a row per member (then per catalog frontend), by sid.
    async fn member_rows(&self) -> (Zxid, Zxid, Vec<MemberRow>) {
        let peers = self.peer_statuses().await;
        let me = self.status_info();
        let committed = self.node.status().committed_membership;
        let catalog = self.catalog.load();
        let leader = me.leader_sid;
        let mut rows = BTreeMap::new();
        for (sid, m) in &member_views(&committed) {
            let fe = Frontend {
                sid: *sid,
                name: format!("fe{sid}"),
                host: m.host.clone(),
                client_port: m.client_port,
                role: m.state.frontend_role(),
            };
            let info = if *sid == self.cfg.sid {
                Some(me.clone())
            } else {
                peers.get(sid).cloned().flatten()
            };
            let is_leader = leader == Some(*sid);
            let row = match info {
                Some(s) => {
                    let lag = if s.mode == Mode::Leader {
                        Some(0)
                    } else {
                        s.staleness_ms
                    };
                    FrontendRow::new(&fe, is_leader, true, s.applied_journal_id, lag)
                }
                None => FrontendRow::new(&fe, is_leader, false, Zxid::ZERO, None),
            };
            let joining = m.state == MemberState::Joining;
            rows.insert(*sid, MemberRow { row, joining });
        }
        for fe in catalog.frontends() {
            rows.entry(fe.sid).or_insert_with(|| MemberRow {
                row: FrontendRow::new(fe, false, false, Zxid::ZERO, None),
                joining: false,
            });
        }
        (
            catalog.journal_id(),
            committed.version,
            rows.into_values().collect(),
        )
    }

    /// The numbers of the four-letter words.
    pub async fn server_stats(&self) -> ServerStats {
        let st = self.node.status();
        let catalog = self.catalog.load();
        let followers = if st.role == Role::Leading && st.fatal.is_none() {
            let peers = self.peer_statuses().await;
            let learners: Vec<&StatusInfo> = peers
                .values()
                .flatten()
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
