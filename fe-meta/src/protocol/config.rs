//! The cluster configuration on the wire: GET_CONFIG's answer, the membership changes
//! ADD_FRONTEND / DROP_FRONTEND and their answer, and the rows of SHOW_MEMBERS (layouts:
//! `docs/PROTOCOL.md` §4, §5.4).
//!
//! A member's address is the text of its zoo.cfg `server.N` value
//! (`host:quorumPort:electionPort[:observer];[clientHost:]clientPort`), as the replicated
//! configuration holds it.
//!
//! INV-1: decoding never panics and never reserves memory for more members than the remaining
//! bytes could hold; encode and decode are exact inverses for values within the limits.
//! INV-2: member roles and change roles are closed sets: an unknown tag is an error, never a
//! default.

use bytes::BufMut;
use thiserror::Error;
use zab_net::config::ServerAddr;
use zab_net::{LearnerType, Member, MemberRole, Membership, ServerId, Zxid};

use super::rows::{decode_frontend_row, encode_frontend_row, FrontendRow};
use crate::state::catalog::FrontendRole;
use crate::wire::{Put, Reader, WireError};

/// The longest member address text (the ZAB core's `MAX_ADDRESS_LEN`).
pub const ADDRESS_LEN_MAX: usize = 1024;

/// What a member of the configuration does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MemberState {
    /// Votes (a follower, or the leader).
    Participant,
    /// Replicates, never votes.
    Observer,
    /// Added as a follower, not yet synced and promoted: replicates, does not vote yet.
    Joining,
}

impl MemberState {
    /// The wire tag: 0 participant, 1 observer, 2 joining.
    pub fn tag(self) -> u8 {
        match self {
            MemberState::Participant => 0,
            MemberState::Observer => 1,
            MemberState::Joining => 2,
        }
    }

    /// The state of wire tag `tag` (INV-2).
    pub fn from_tag(tag: u8) -> Option<MemberState> {
        match tag {
            0 => Some(MemberState::Participant),
            1 => Some(MemberState::Observer),
            2 => Some(MemberState::Joining),
            _ => None,
        }
    }

    /// `participant`, `observer` or `joining`.
    pub fn name(self) -> &'static str {
        match self {
            MemberState::Participant => "participant",
            MemberState::Observer => "observer",
            MemberState::Joining => "joining",
        }
    }

    /// The frontend role it was added with: a joining member is a follower to be.
    pub fn frontend_role(self) -> FrontendRole {
        match self {
            MemberState::Observer => FrontendRole::Observer,
            MemberState::Participant | MemberState::Joining => FrontendRole::Follower,
        }
    }
}

impl From<MemberState> for MemberRole {
    fn from(state: MemberState) -> MemberRole {
        match state {
            MemberState::Participant => MemberRole::Participant,
            MemberState::Observer => MemberRole::Observer,
            MemberState::Joining => MemberRole::Joining,
        }
    }
}

impl From<MemberRole> for MemberState {
    fn from(role: MemberRole) -> MemberState {
        match role {
            MemberRole::Observer => MemberState::Observer,
            MemberRole::Joining => MemberState::Joining,
            MemberRole::Participant => MemberState::Participant,
        }
    }
}

/// One member of a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigMember {
    /// Server id.
    pub sid: u64,
    /// What it does.
    pub state: MemberState,
    /// Its `server.N` value.
    pub address: String,
}

/// A node's view of the cluster configuration: what a new node needs to join.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    /// The cluster id (`clusterId`).
    pub cluster_id: u64,
    /// The committed configuration's version: the journal id that committed it (0: the
    /// bootstrap configuration of zoo.cfg).
    pub version: Zxid,
    /// The version of the configuration in force on the answering node (the newest in its
    /// log, maybe not committed yet); equal to `version` unless a change is in flight.
    pub in_force_version: Zxid,
    /// The committed configuration's members, by sid.
    pub members: Vec<ConfigMember>,
    /// `tickTime`, ms.
    pub tick_time_ms: u64,
    /// `initLimit`, ticks.
    pub init_limit: u32,
    /// `syncLimit`, ticks.
    pub sync_limit: u32,
}

impl ClusterConfig {
    /// The members of `committed`, by sid.
    pub fn members_of(committed: &Membership) -> Vec<ConfigMember> {
        committed
            .members
            .iter()
            .map(|(sid, m)| ConfigMember {
                sid: sid.0,
                state: m.role.into(),
                address: m.address.clone(),
            })
            .collect()
    }

    /// The committed configuration as the ZAB node takes it (`NodeOptions::join_membership`
    /// of a node that joins the cluster).
    pub fn membership(&self) -> Membership {
        Membership {
            version: self.version,
            members: self
                .members
                .iter()
                .map(|m| {
                    let member = Member {
                        role: m.state.into(),
                        address: m.address.clone(),
                    };
                    (ServerId(m.sid), member)
                })
                .collect(),
        }
    }

    /// The member `sid`, if it is one.
    pub fn member(&self, sid: u64) -> Option<&ConfigMember> {
        self.members.iter().find(|m| m.sid == sid)
    }
}

/// A membership change asked by a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrontendChange {
    /// ADD_FRONTEND: add server `sid` as a follower (it joins as `Joining` and is promoted once
    /// synced) or an observer.
    Add {
        /// The new member's id.
        sid: u64,
        /// Follower or observer.
        role: FrontendRole,
        /// Its `server.N` value.
        address: String,
    },
    /// DROP_FRONTEND: remove server `sid`, whatever its role.
    Drop {
        /// The member to remove.
        sid: u64,
    },
}

/// A `server.N=value` line that cannot name a new member (see [`parse_server_line`]).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ServerLineError {
    /// Not of the form `server.N=value`.
    #[error(
        "expected `server.N=HOST:QUORUM_PORT:ELECTION_PORT;[CLIENT_HOST:]CLIENT_PORT`, found \
         `{0}`"
    )]
    Shape(String),
    /// `N` is not a server id.
    #[error("bad server id `{id}` in `{line}`: expected a positive integer")]
    Sid {
        /// The id text.
        id: String,
        /// The line.
        line: String,
    },
    /// The value does not parse (the reason says where).
    #[error("{0}")]
    Address(String),
    /// The value has no client address.
    #[error(
        "`{0}` has no client port: add `;[CLIENT_HOST:]CLIENT_PORT` (the other nodes forward \
         writes there)"
    )]
    NoClientPort(String),
    /// The value says `:observer` but a follower is being added.
    #[error("`{0}` says `observer`: add it with add-observer, or drop `:observer`")]
    ObserverAsFollower(String),
}

/// Parses `server.N=value` naming a new member of `role` (ZooKeeper's zoo.cfg syntax): its sid
/// and its canonical address text. The value must parse as a `server.N` value, carry a client
/// port, and not say `:observer` for a follower.
pub fn parse_server_line(line: &str, role: FrontendRole) -> Result<(u64, String), ServerLineError> {
    let shape = || ServerLineError::Shape(line.to_string());
    let (key, value) = line.trim().split_once('=').ok_or_else(shape)?;
    let id = key.trim().strip_prefix("server.").ok_or_else(shape)?;
    let sid = match id.parse::<u64>() {
        Ok(sid) if sid > 0 => sid,
        _ => {
            return Err(ServerLineError::Sid {
                id: id.to_string(),
                line: line.to_string(),
            })
        }
    };
    let mut addr =
        ServerAddr::parse_value(value).map_err(|e| ServerLineError::Address(e.to_string()))?;
    if addr.client.is_none() {
        return Err(ServerLineError::NoClientPort(value.trim().to_string()));
    }
    match (role, addr.learner_type) {
        (FrontendRole::Follower, LearnerType::Observer) => {
            return Err(ServerLineError::ObserverAsFollower(
                value.trim().to_string(),
            ))
        }
        (FrontendRole::Observer, _) => addr.learner_type = LearnerType::Observer,
        _ => {}
    }
    Ok((sid, addr.to_value()))
}

/// One row of SHOW_MEMBERS: a SHOW FRONTENDS row and whether the member is joining.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberRow {
    /// The frontend's row.
    pub row: FrontendRow,
    /// Added as a follower and not yet synced and promoted (it does not vote yet).
    pub joining: bool,
}

pub(super) fn put_change(o: &mut Vec<u8>, change: &FrontendChange) {
    match change {
        FrontendChange::Add { sid, role, address } => {
            o.put_u64(*sid);
            o.put_u8(role.tag());
            o.put_str(address);
        }
        FrontendChange::Drop { sid } => o.put_u64(*sid),
    }
}

pub(super) fn get_add(r: &mut Reader<'_>) -> Result<FrontendChange, WireError> {
    let sid = r.u64("sid")?;
    let tag = r.u8("learner type")?;
    let role = FrontendRole::from_tag(tag).ok_or(WireError::BadValue {
        field: "learner type",
        value: u64::from(tag),
    })?;
    Ok(FrontendChange::Add {
        sid,
        role,
        address: r.str("member address", ADDRESS_LEN_MAX)?,
    })
}

pub(super) fn get_drop(r: &mut Reader<'_>) -> Result<FrontendChange, WireError> {
    Ok(FrontendChange::Drop { sid: r.u64("sid")? })
}

pub(super) fn encode_config(o: &mut Vec<u8>, c: &ClusterConfig) {
    o.put_u64(c.cluster_id);
    o.put_u64(c.version.0);
    o.put_u64(c.in_force_version.0);
    o.put_len(c.members.len());
    for m in &c.members {
        o.put_u64(m.sid);
        o.put_u8(m.state.tag());
        o.put_str(&m.address);
    }
    o.put_u64(c.tick_time_ms);
    o.put_u32(c.init_limit);
    o.put_u32(c.sync_limit);
}

/// The smallest encoded member: sid, state, an empty address.
const MEMBER_LEN_MIN: usize = 8 + 1 + 4;

pub(super) fn decode_config(r: &mut Reader<'_>) -> Result<ClusterConfig, WireError> {
    let cluster_id = r.u64("cluster id")?;
    let version = Zxid(r.u64("configuration version")?);
    let in_force_version = Zxid(r.u64("in-force configuration version")?);
    let n = r.len("member count", r.remaining() / MEMBER_LEN_MIN)?;
    let mut members = Vec::with_capacity(n);
    for _ in 0..n {
        let sid = r.u64("member sid")?;
        let tag = r.u8("member state")?;
        let state = MemberState::from_tag(tag).ok_or(WireError::BadValue {
            field: "member state",
            value: u64::from(tag),
        })?;
        members.push(ConfigMember {
            sid,
            state,
            address: r.str("member address", ADDRESS_LEN_MAX)?,
        });
    }
    Ok(ClusterConfig {
        cluster_id,
        version,
        in_force_version,
        members,
        tick_time_ms: r.u64("tickTime")?,
        init_limit: r.u32("initLimit")?,
        sync_limit: r.u32("syncLimit")?,
    })
}

pub(super) fn encode_member_row(o: &mut Vec<u8>, m: &MemberRow) {
    encode_frontend_row(o, &m.row);
    o.put_bool(m.joining);
}

pub(super) fn decode_member_row(r: &mut Reader<'_>) -> Result<MemberRow, WireError> {
    Ok(MemberRow {
        row: decode_frontend_row(r)?,
        joining: r.bool("joining")?,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn server_lines_name_the_sid_and_a_canonical_address() {
        let f = FrontendRole::Follower;
        let o = FrontendRole::Observer;
        assert_eq!(
            parse_server_line("server.4=10.0.0.4:2888:3888;10.0.0.4:9030", f),
            Ok((4, "10.0.0.4:2888:3888;10.0.0.4:9030".to_string()))
        );
        assert_eq!(
            parse_server_line(" server.6 = h:1:2;3 ", o),
            Ok((6, "h:1:2:observer;3".to_string()))
        );
        let err = |line: &str, role| parse_server_line(line, role).unwrap_err().to_string();
        assert!(err("4=h:1:2;3", f).contains("expected `server.N="));
        assert!(err("server.4", f).contains("expected `server.N="));
        assert!(err("server.x=h:1:2;3", f).contains("bad server id `x`"));
        assert!(err("server.0=h:1:2;3", f).contains("bad server id `0`"));
        assert!(err("server.4=h:1;3", f).contains("bad server address"));
        assert!(err("server.4=h:1:2", f).contains("no client port"));
        assert!(err("server.4=h:1:2:observer;3", f).contains("add-observer"));
    }
}
