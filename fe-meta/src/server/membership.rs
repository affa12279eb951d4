//! The cluster configuration as the server uses it: members' addresses from the replicated
//! configuration (not from zoo.cfg), GET_CONFIG, and membership changes on the leader.
//!
//! Addresses: every member's address is the text of its `server.N` value in the node's
//! configuration ([`zab_net::NodeStatus::membership`], the one in force, for reaching members:
//! forwarding, peers' STATUS; [`zab_net::NodeStatus::committed_membership`] for what is shown).
//! zoo.cfg's `server.N` lines are only the bootstrap configuration.
//!
//! INV-1: an address that does not parse never fails a request by itself: that member is shown
//! without a client address and cannot be forwarded to (a NOT_LEADER that says so).
//! INV-2: a change is proposed only on the serving leader, after its deadline check, with an
//! address that parses, has a client port, does not contradict the asked role, and shares no
//! endpoint (quorum, election or client `host:port`, as written) with another member of the
//! configuration in force; everything else is INVALID_ARGUMENT and nothing is proposed.
//! INV-3: a change is answered `Reconfigured` only once the node reports it committed and
//! applied here; the node's errors map to statuses in [`membership_error_reply`] (one change
//! at a time: CONFLICT).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use tracing::{debug, info};
use zab_net::config::ServerAddr;
use zab_net::{LearnerType, Membership, NodeError, ServerId};

use super::session::RequestContext;
use super::Shared;
use crate::protocol::{
    ClusterConfig, ErrorReply, FrontendChange, MemberState, ResponseBody, Status,
};
use crate::state::catalog::FrontendRole;

/// One member as the server reaches and shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberView {
    /// Its host (`server.N`'s quorum host; empty when the address does not parse).
    pub host: String,
    /// Its client address `host:port`, if the address gives one.
    pub client_addr: Option<String>,
    /// Its client port (0: unknown).
    pub client_port: u16,
    /// Its quorum and election ports, if its address parses.
    pub ports: Option<(u16, u16)>,
    /// Participant, observer or joining.
    pub state: MemberState,
}

/// Every member of `membership` by sid, with its address parsed (INV-1).
pub fn member_views(membership: &Membership) -> BTreeMap<u64, MemberView> {
    membership
        .members
        .iter()
        .map(|(sid, m)| {
            let state = MemberState::from(m.role);
            let view = match ServerAddr::parse_value(&m.address) {
                Ok(addr) => MemberView {
                    client_addr: addr.client_endpoint(),
                    client_port: addr.client.as_ref().map_or(0, |c| c.port),
                    ports: Some((addr.quorum_port, addr.election_port)),
                    host: addr.host,
                    state,
                },
                Err(e) => {
                    debug!(sid = sid.0, error = %e, "member address does not parse");
                    MemberView {
                        host: String::new(),
                        client_addr: None,
                        client_port: 0,
                        ports: None,
                        state,
                    }
                }
            };
            (sid.0, view)
        })
        .collect()
}

/// The client address of member `sid` in `membership`, if it has one (INV-1).
pub fn client_addr_of(membership: &Membership, sid: u64) -> Option<String> {
    let member = membership.members.get(&ServerId(sid))?;
    ServerAddr::parse_value(&member.address)
        .ok()?
        .client_endpoint()
}

/// The last member client address looked up, kept with the configuration it came from: a
/// follower looks the leader's up for every write it forwards, and parsing the member's
/// address each time was a measurable share of its CPU. A new configuration (another `Arc`)
/// or another member is looked up afresh.
#[derive(Debug, Default)]
pub(crate) struct ClientAddrCache(Mutex<Option<CachedAddr>>);

#[derive(Debug)]
struct CachedAddr {
    membership: Arc<Membership>,
    sid: u64,
    addr: Option<String>,
}

impl ClientAddrCache {
    /// [`client_addr_of`] `sid` in `membership`.
    pub(crate) fn get(&self, membership: &Arc<Membership>, sid: u64) -> Option<String> {
        let mut last = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(hit) = last
            .as_ref()
            .filter(|c| c.sid == sid && Arc::ptr_eq(&c.membership, membership))
        {
            return hit.addr.clone();
        }
        let addr = client_addr_of(membership, sid);
        *last = Some(CachedAddr {
            membership: Arc::clone(membership),
            sid,
            addr: addr.clone(),
        });
        addr
    }
}

/// The node's answer to a refused or failed change, as a client status (INV-3).
pub fn membership_error_reply(e: &NodeError, leader_addr: Option<String>) -> ErrorReply {
    match e {
        NodeError::ChangeInFlight(_) => ErrorReply::new(
            Status::Conflict,
            format!("another membership change is in progress: {e}"),
        ),
        NodeError::Invalid(_) => ErrorReply::new(Status::InvalidArgument, e.to_string()),
        NodeError::NotLeader { leader } => {
            ErrorReply::not_leader(Some(leader.0), leader_addr, e.to_string())
        }
        NodeError::EpochExhausted => ErrorReply::not_leader(None, None, e.to_string()),
        NodeError::NoLeader | NodeError::QuorumLost => {
            ErrorReply::new(Status::QuorumUnavailable, e.to_string())
        }
        NodeError::Timeout(_) => ErrorReply::new(Status::Timeout, e.to_string()),
        _ => ErrorReply::new(Status::Internal, e.to_string()),
    }
}

/// The address text of an ADD_FRONTEND, checked (INV-2): the canonical `server.N` value.
pub fn checked_address(
    sid: u64,
    role: FrontendRole,
    address: &str,
) -> Result<ServerAddr, ErrorReply> {
    let invalid = |why: String| ErrorReply::new(Status::InvalidArgument, why);
    let mut addr = ServerAddr::parse_value(address).map_err(|e| invalid(e.to_string()))?;
    if addr.client.is_none() {
        return Err(invalid(format!(
            "the address of server {sid} has no client port: give it as \
             `host:quorumPort:electionPort;[clientHost:]clientPort` (the other nodes forward \
             writes there)"
        )));
    }
    let asked = match role {
        FrontendRole::Follower => LearnerType::Participant,
        FrontendRole::Observer => LearnerType::Observer,
    };
    if addr.learner_type == LearnerType::Observer && asked != LearnerType::Observer {
        return Err(invalid(format!(
            "the address of server {sid} says `observer` but it is added as a follower; drop \
             `:observer` or add it as an observer"
        )));
    }
    addr.learner_type = asked;
    Ok(addr)
}

/// The member of `membership` other than `sid` that already uses one of `addr`'s endpoints
/// (quorum, election or client `host:port`, compared as written), and which (INV-2).
pub fn endpoint_clash(membership: &Membership, sid: u64, addr: &ServerAddr) -> Option<String> {
    let endpoints = |a: &ServerAddr| {
        let mut all = vec![a.quorum_endpoint(), a.election_endpoint()];
        all.extend(a.client_endpoint());
        all
    };
    let wanted = endpoints(addr);
    membership
        .members
        .iter()
        .filter(|(other, _)| other.0 != sid)
        .find_map(|(other, m)| {
            let theirs = endpoints(&ServerAddr::parse_value(&m.address).ok()?);
            let shared = wanted.iter().find(|e| theirs.contains(e))?;
            Some(format!(
                "server {} already uses {shared} (its address is {})",
                other.0, m.address
            ))
        })
}

impl Shared {
    /// This node's GET_CONFIG answer: its committed configuration and the cluster's timing.
    pub fn cluster_config(&self) -> ClusterConfig {
        let st = self.node.status();
        ClusterConfig {
            cluster_id: self.cfg.cluster_id,
            version: st.committed_membership.version,
            in_force_version: st.membership.version,
            members: ClusterConfig::members_of(&st.committed_membership),
            tick_time_ms: self.cfg.node.tick_ms,
            init_limit: self.cfg.node.init_limit_ticks,
            sync_limit: self.cfg.node.sync_limit_ticks,
        }
    }

    /// The client address of member `sid` in the configuration in force.
    pub fn member_client_addr(&self, sid: u64) -> Option<String> {
        self.client_addrs.get(&self.node.membership(), sid)
    }

    /// A membership change on the serving leader (INV-2, INV-3).
    pub async fn change_here(
        &self,
        ctx: &RequestContext,
        change: &FrontendChange,
    ) -> Result<ResponseBody, ErrorReply> {
        ctx.check_deadline("the leader could propose it")?;
        let result = match change {
            FrontendChange::Add { sid, role, address } => {
                let addr = checked_address(*sid, *role, address)?;
                let in_force = self.node.status().membership;
                if !in_force.members.contains_key(&ServerId(*sid)) {
                    if let Some(why) = endpoint_clash(&in_force, *sid, &addr) {
                        return Err(ErrorReply::new(Status::InvalidArgument, why));
                    }
                }
                info!(sid, address = %addr.to_value(), "adding a member");
                self.node
                    .add_member(ServerId(*sid), addr.learner_type, &addr)
                    .await
            }
            FrontendChange::Drop { sid } => {
                info!(sid, "removing a member");
                self.node.remove_member(ServerId(*sid)).await
            }
        };
        let version = result.map_err(|e| {
            let leader_addr = match &e {
                NodeError::NotLeader { leader } => self.member_client_addr(leader.0),
                _ => None,
            };
            membership_error_reply(&e, leader_addr)
        })?;
        info!(version = %version, "membership change committed");
        Ok(ResponseBody::Reconfigured {
            version,
            config: self.cluster_config(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::time::Duration;
    use zab_net::{Member, MemberRole, Zxid};

    fn membership(members: &[(u64, MemberRole, &str)]) -> Membership {
        Membership {
            version: Zxid(7),
            members: members
                .iter()
                .map(|(sid, role, address)| {
                    let m = Member {
                        role: *role,
                        address: (*address).to_string(),
                    };
                    (ServerId(*sid), m)
                })
                .collect(),
        }
    }

    #[test]
    fn views_come_from_the_address_text_and_a_bad_one_has_no_client_address() {
        let m = membership(&[
            (
                1,
                MemberRole::Participant,
                "10.0.0.1:2888:3888;10.0.0.9:9030",
            ),
            (2, MemberRole::Joining, "h2:2888:3888;9031"),
            (3, MemberRole::Observer, "h3:2888:3888:observer"),
            (4, MemberRole::Participant, "not an address"),
        ]);
        let v = member_views(&m);
        assert_eq!(v[&1].client_addr.as_deref(), Some("10.0.0.9:9030"));
        assert_eq!(v[&1].host, "10.0.0.1");
        assert_eq!(
            (v[&2].client_addr.as_deref(), v[&2].client_port),
            (Some("h2:9031"), 9031)
        );
        assert_eq!(v[&2].state, MemberState::Joining);
        assert_eq!(
            (v[&3].client_addr.as_deref(), v[&3].state),
            (None, MemberState::Observer)
        );
        assert_eq!(
            (v[&4].client_addr.as_deref(), v[&4].host.as_str()),
            (None, "")
        );
        assert_eq!(client_addr_of(&m, 2).as_deref(), Some("h2:9031"));
        assert_eq!(client_addr_of(&m, 4), None);
        assert_eq!(client_addr_of(&m, 5), None);
    }

    #[test]
    fn the_address_cache_answers_for_the_configuration_it_is_given() {
        let cache = ClientAddrCache::default();
        let first = Arc::new(membership(&[
            (1, MemberRole::Participant, "h1:2888:3888;9030"),
            (2, MemberRole::Participant, "h2:2888:3888;9031"),
        ]));
        assert_eq!(cache.get(&first, 1).as_deref(), Some("h1:9030"));
        assert_eq!(cache.get(&first, 1).as_deref(), Some("h1:9030"));
        assert_eq!(cache.get(&first, 2).as_deref(), Some("h2:9031"));
        assert_eq!(cache.get(&first, 3), None);
        // Member 1 moved to another client port: a new configuration is another `Arc`.
        let moved = Arc::new(membership(&[
            (1, MemberRole::Participant, "h1:2888:3888;9040"),
            (2, MemberRole::Participant, "h2:2888:3888;9031"),
        ]));
        assert_eq!(cache.get(&moved, 1).as_deref(), Some("h1:9040"));
        assert_eq!(cache.get(&first, 1).as_deref(), Some("h1:9030"));
    }

    #[test]
    fn addresses_are_checked_before_anything_is_proposed() {
        let ok = checked_address(4, FrontendRole::Follower, "h:1:2;h:3").unwrap();
        assert_eq!(ok.learner_type, LearnerType::Participant);
        let obs = checked_address(6, FrontendRole::Observer, "h:1:2;3").unwrap();
        assert_eq!(obs.to_value(), "h:1:2:observer;3");
        for (role, bad, says) in [
            (FrontendRole::Follower, "h:1", "bad server address"),
            (FrontendRole::Follower, "h:1:2", "no client port"),
            (
                FrontendRole::Follower,
                "h:1:2:observer;3",
                "says `observer`",
            ),
            (FrontendRole::Observer, "h:1:1;3", "bad server address"),
        ] {
            let e = checked_address(4, role, bad).unwrap_err();
            assert_eq!(e.status, Status::InvalidArgument, "{bad}");
            assert!(e.message.contains(says), "{bad}: {}", e.message);
        }
    }

    #[test]
    fn an_address_that_shares_an_endpoint_with_another_member_is_found() {
        let m = membership(&[
            (1, MemberRole::Participant, "h1:10:11;h1:12"),
            (2, MemberRole::Observer, "h2:10:11:observer;13"),
        ]);
        let parse = |v: &str| ServerAddr::parse_value(v).unwrap();
        let clash = endpoint_clash(&m, 7, &parse("h1:10:20:observer;30")).unwrap();
        assert!(clash.contains("server 1 already uses h1:10"), "{clash}");
        let clash = endpoint_clash(&m, 7, &parse("h9:1:2;h2:13")).unwrap();
        assert!(clash.contains("server 2 already uses h2:13"), "{clash}");
        assert_eq!(endpoint_clash(&m, 7, &parse("h1:20:21;h1:22")), None);
        assert_eq!(
            endpoint_clash(&m, 1, &parse("h1:10:11;h1:12")),
            None,
            "itself"
        );
    }

    #[test]
    fn node_errors_map_to_statuses() {
        let cases = [
            (NodeError::ChangeInFlight(Zxid(9)), Status::Conflict),
            (
                NodeError::Invalid("server 4 is already a member".into()),
                Status::InvalidArgument,
            ),
            (
                NodeError::NotLeader {
                    leader: ServerId(2),
                },
                Status::NotLeader,
            ),
            (NodeError::NoLeader, Status::QuorumUnavailable),
            (NodeError::QuorumLost, Status::QuorumUnavailable),
            (NodeError::EpochExhausted, Status::NotLeader),
            (NodeError::Timeout(Duration::from_secs(1)), Status::Timeout),
            (NodeError::Shutdown, Status::Internal),
        ];
        for (e, status) in cases {
            let reply = membership_error_reply(&e, Some("h:1".into()));
            assert_eq!(reply.status, status, "{e}");
        }
        let conflict = membership_error_reply(&NodeError::ChangeInFlight(Zxid(9)), None);
        assert!(
            conflict.message.contains("in progress"),
            "{}",
            conflict.message
        );
        assert!(conflict.status.is_retryable());
        let hint = membership_error_reply(
            &NodeError::NotLeader {
                leader: ServerId(2),
            },
            Some("h:1".into()),
        );
        assert!(hint.to_string().contains("server 2 at h:1"), "{hint}");
    }
}
