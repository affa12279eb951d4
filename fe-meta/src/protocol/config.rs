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
use zab_net::{MemberRole, Membership, Zxid};

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
