//! The runtime views carried by responses: a node's STATUS and the rows of SHOW FRONTENDS
//! (layouts: `docs/PROTOCOL.md` §5.1, §5.3).
//!
//! INV-1: decoding never panics; encode and decode are exact inverses.

use bytes::BufMut;
use zab_net::Zxid;

use super::fourlw::Mode;
use crate::state::catalog::{Codec, Frontend, FrontendRole, NAME_LEN_MAX};
use crate::wire::{Put, Reader, WireError};

/// A node's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusInfo {
    /// Server id.
    pub sid: u64,
    /// Role.
    pub mode: Mode,
    /// The leader's sid, if known.
    pub leader_sid: Option<u64>,
    /// ZAB epoch.
    pub epoch: u64,
    /// Applied journal id (zxid).
    pub applied_journal_id: Zxid,
    /// The last TIMESTAMP applied (leader wall clock, ms).
    pub last_timestamp_ms: u64,
    /// Staleness in ms, if measured.
    pub staleness_ms: Option<u64>,
    /// Catalog entries.
    pub entry_count: u64,
    /// Cluster id.
    pub cluster_id: u64,
    /// Software version.
    pub version: String,
}

/// One row of SHOW FRONTENDS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrontendRow {
    /// Server id.
    pub sid: u64,
    /// Name.
    pub name: String,
    /// Host.
    pub host: String,
    /// Client port.
    pub client_port: u16,
    /// Follower or observer.
    pub role: FrontendRole,
    /// Whether it is the leader.
    pub is_leader: bool,
    /// Whether it is reachable.
    pub alive: bool,
    /// Its replayed journal id, as last known.
    pub replayed_journal_id: Zxid,
    /// How far it lags the leader (ms), if known.
    pub lag_ms: Option<u64>,
}

pub(super) fn encode_status(o: &mut Vec<u8>, s: &StatusInfo) {
    o.put_u64(s.sid);
    o.put_u8(s.mode.tag());
    o.put_opt_u64(s.leader_sid);
    o.put_u64(s.epoch);
    o.put_u64(s.applied_journal_id.0);
    o.put_u64(s.last_timestamp_ms);
    o.put_opt_u64(s.staleness_ms);
    o.put_u64(s.entry_count);
    o.put_u64(s.cluster_id);
    o.put_str(&s.version);
}

pub(super) fn encode_frontend_row(o: &mut Vec<u8>, f: &FrontendRow) {
    o.put_u64(f.sid);
    o.put_str(&f.name);
    o.put_str(&f.host);
    o.put_u16(f.client_port);
    o.put_u8(f.role.tag());
    o.put_bool(f.is_leader);
    o.put_bool(f.alive);
    o.put_u64(f.replayed_journal_id.0);
    o.put_opt_u64(f.lag_ms);
}

pub(super) fn decode_status(r: &mut Reader<'_>) -> Result<StatusInfo, WireError> {
    let sid = r.u64("sid")?;
    let tag = r.u8("mode")?;
    let mode = Mode::from_tag(tag).ok_or(WireError::BadValue {
        field: "mode",
        value: u64::from(tag),
    })?;
    Ok(StatusInfo {
        sid,
        mode,
        leader_sid: r.opt_u64("leader sid")?,
        epoch: r.u64("epoch")?,
        applied_journal_id: Zxid(r.u64("applied journal id")?),
        last_timestamp_ms: r.u64("last timestamp")?,
        staleness_ms: r.opt_u64("staleness")?,
        entry_count: r.u64("entry count")?,
        cluster_id: r.u64("cluster id")?,
        version: r.str("version", NAME_LEN_MAX)?,
    })
}

pub(super) fn decode_frontend_row(r: &mut Reader<'_>) -> Result<FrontendRow, WireError> {
    // A row starts with the catalog's encoding of the frontend itself.
    let f = Frontend::decode(r)?;
    Ok(FrontendRow {
        sid: f.sid,
        name: f.name,
        host: f.host,
        client_port: f.client_port,
        role: f.role,
        is_leader: r.bool("is_leader")?,
        alive: r.bool("alive")?,
        replayed_journal_id: Zxid(r.u64("replayed journal id")?),
        lag_ms: r.opt_u64("lag_ms")?,
    })
}
