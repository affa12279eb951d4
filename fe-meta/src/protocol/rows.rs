//! The runtime views carried by responses: a node's STATUS and the rows of SHOW FRONTENDS /
//! SHOW MEMBERS (layouts: `docs/PROTOCOL.md` §5.1, §5.3).
//!
//! Both grew fields after version 1 shipped. They are appended where a reader that knows them
//! finds them and one that predates them sees the old layout first: STATUS ends with
//! `last_start_time_ms`; a SHOW FRONTENDS / SHOW MEMBERS body ends with a second list, one
//! [`FrontendRow`] detail per row, in the same order. A reader decodes them if present and
//! otherwise fills the row from the old fields (journal id 0 there means "unknown").
//!
//! INV-1: decoding never panics; encode and decode are exact inverses.
//! INV-2: a body with the detail list carries exactly one detail per row.

use bytes::BufMut;
use zab_net::Zxid;

use super::fourlw::Mode;
use crate::state::catalog::{Codec, Frontend, FrontendRole, NAME_LEN_MAX, VALUE_LEN_MAX};
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
    /// When this node's process started (wall clock, ms since the Unix epoch); `None` from a
    /// node that predates the field.
    pub last_start_time_ms: Option<u64>,
}

impl StatusInfo {
    /// Whether this node is the leader it names.
    pub fn is_leader(&self) -> bool {
        self.mode == Mode::Leader && self.leader_sid == Some(self.sid)
    }
}

/// One row of SHOW FRONTENDS, with Doris' columns.
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
    /// Quorum port, if the member's address gives it.
    pub quorum_port: Option<u16>,
    /// Election port, if the member's address gives it.
    pub election_port: Option<u16>,
    /// Follower or observer (in the configuration).
    pub role: FrontendRole,
    /// Whether it is the leader.
    pub is_leader: bool,
    /// Whether it answered STATUS just now.
    pub alive: bool,
    /// When the answering node last got an answer from it (its wall clock, ms since the Unix
    /// epoch); `None` if never.
    pub last_heartbeat_ms: Option<u64>,
    /// Its replayed journal id, from its last answer; `None` if unknown.
    pub replayed_journal_id: Option<Zxid>,
    /// When its process started (its wall clock, ms since the Unix epoch), if known.
    pub last_start_time_ms: Option<u64>,
    /// Its software version, if known.
    pub version: Option<String>,
    /// Why it is not alive, not serving, behind or stopped; empty when all is well.
    pub err_msg: String,
    /// How many journal entries it is behind the leader's applied journal id, when both are
    /// in the same epoch.
    pub lag_entries: Option<u64>,
    /// How long ago the leader first had a journal id beyond this node's (0: caught up), if
    /// known.
    pub lag_ms: Option<u64>,
}

impl FrontendRow {
    /// Doris' ROLE column: LEADER, FOLLOWER, OBSERVER, or JOINING (`joining`: added as a
    /// follower, not yet promoted).
    pub fn role_name(&self, joining: bool) -> &'static str {
        if self.is_leader {
            "LEADER"
        } else if joining {
            "JOINING"
        } else {
            self.role.name()
        }
    }
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
    if let Some(started) = s.last_start_time_ms {
        o.put_u64(started);
    }
}

/// A node's mode, by its tag.
pub(super) fn decode_mode(r: &mut Reader<'_>) -> Result<Mode, WireError> {
    let tag = r.u8("mode")?;
    Mode::from_tag(tag).ok_or(WireError::BadValue {
        field: "mode",
        value: u64::from(tag),
    })
}

pub(super) fn decode_status(r: &mut Reader<'_>) -> Result<StatusInfo, WireError> {
    let sid = r.u64("sid")?;
    let mode = decode_mode(r)?;
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
        last_start_time_ms: if r.remaining() > 0 {
            Some(r.u64("last start time")?)
        } else {
            None
        },
    })
}

/// The version-1 part of a row.
pub(super) fn encode_frontend_row(o: &mut Vec<u8>, f: &FrontendRow) {
    o.put_u64(f.sid);
    o.put_str(&f.name);
    o.put_str(&f.host);
    o.put_u16(f.client_port);
    o.put_u8(f.role.tag());
    o.put_bool(f.is_leader);
    o.put_bool(f.alive);
    o.put_u64(f.replayed_journal_id.unwrap_or(Zxid::ZERO).0);
    o.put_opt_u64(f.lag_ms);
}

/// The version-1 part of a row; the detail fields are unknown until
/// [`decode_frontend_details`] reads them.
pub(super) fn decode_frontend_row(r: &mut Reader<'_>) -> Result<FrontendRow, WireError> {
    // A row starts with the catalog's encoding of the frontend itself.
    let f = Frontend::decode(r)?;
    let is_leader = r.bool("is_leader")?;
    let alive = r.bool("alive")?;
    let replayed = Zxid(r.u64("replayed journal id")?);
    let lag_ms = r.opt_u64("lag_ms")?;
    Ok(FrontendRow {
        sid: f.sid,
        name: f.name,
        host: f.host,
        client_port: f.client_port,
        quorum_port: None,
        election_port: None,
        role: f.role,
        is_leader,
        alive,
        last_heartbeat_ms: None,
        replayed_journal_id: (replayed != Zxid::ZERO).then_some(replayed),
        last_start_time_ms: None,
        version: None,
        err_msg: String::new(),
        lag_entries: None,
        lag_ms,
    })
}

fn put_opt_u16(o: &mut Vec<u8>, v: Option<u16>) {
    match v {
        Some(v) => {
            o.put_u8(1);
            o.put_u16(v);
        }
        None => o.put_u8(0),
    }
}

fn opt_u16(r: &mut Reader<'_>, field: &'static str) -> Result<Option<u16>, WireError> {
    match r.u8(field)? {
        0 => Ok(None),
        1 => Ok(Some(r.u16(field)?)),
        tag => Err(WireError::BadValue {
            field,
            value: u64::from(tag),
        }),
    }
}

/// The smallest encoded detail: every option absent, an empty message.
const DETAIL_LEN_MIN: usize = 7 + 4;

/// Appends the detail list of `rows` (INV-2): `count u32 | detail*`.
pub(super) fn encode_frontend_details<'a>(
    o: &mut Vec<u8>,
    rows: impl ExactSizeIterator<Item = &'a FrontendRow>,
) {
    o.put_len(rows.len());
    for f in rows {
        put_opt_u16(o, f.quorum_port);
        put_opt_u16(o, f.election_port);
        o.put_opt_u64(f.last_heartbeat_ms);
        o.put_opt_u64(f.replayed_journal_id.map(|z| z.0));
        o.put_opt_u64(f.last_start_time_ms);
        o.put_opt_str(f.version.as_deref());
        o.put_str(&f.err_msg);
        o.put_opt_u64(f.lag_entries);
    }
}

/// Reads the detail list into `rows` if the body goes on (INV-2); an old body ends before it.
pub(super) fn decode_frontend_details<'a>(
    r: &mut Reader<'_>,
    rows: impl ExactSizeIterator<Item = &'a mut FrontendRow>,
) -> Result<(), WireError> {
    if r.remaining() == 0 {
        return Ok(());
    }
    let expected = rows.len();
    let n = r.len("detail count", r.remaining() / DETAIL_LEN_MIN)?;
    if n != expected {
        return Err(WireError::BadValue {
            field: "detail count",
            value: u64::try_from(n).unwrap_or(u64::MAX),
        });
    }
    for f in rows {
        f.quorum_port = opt_u16(r, "quorum port")?;
        f.election_port = opt_u16(r, "election port")?;
        f.last_heartbeat_ms = r.opt_u64("last heartbeat")?;
        f.replayed_journal_id = r.opt_u64("replayed journal id")?.map(Zxid);
        f.last_start_time_ms = r.opt_u64("last start time")?;
        f.version = r.opt_str("version", NAME_LEN_MAX)?;
        f.err_msg = r.str("error message", VALUE_LEN_MAX)?;
        f.lag_entries = r.opt_u64("lag entries")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(sid: u64, replayed: Option<Zxid>) -> FrontendRow {
        FrontendRow {
            sid,
            name: format!("fe{sid}"),
            host: "h".into(),
            client_port: 9030,
            quorum_port: Some(2888),
            election_port: None,
            role: FrontendRole::Follower,
            is_leader: sid == 1,
            alive: replayed.is_some(),
            last_heartbeat_ms: Some(1_700_000_000_000),
            replayed_journal_id: replayed,
            last_start_time_ms: None,
            version: Some("0.1.0".into()),
            err_msg: if replayed.is_some() { "" } else { "down" }.into(),
            lag_entries: replayed.map(|_| 3),
            lag_ms: Some(0),
        }
    }

    /// The new layout decodes to what was encoded; a version-1 body (rows only) still
    /// decodes, an unknown journal id (0 there) becoming `None`.
    #[test]
    fn rows_round_trip_and_old_rows_still_decode() {
        let rows = vec![row(1, Some(Zxid(0x1_0000_0005))), row(2, None)];
        let mut new = Vec::new();
        for f in &rows {
            encode_frontend_row(&mut new, f);
        }
        let old_len = new.len();
        encode_frontend_details(&mut new, rows.iter());
        let decode = |bytes: &[u8]| {
            let mut r = Reader::new(bytes);
            let mut got = vec![
                decode_frontend_row(&mut r).unwrap(),
                decode_frontend_row(&mut r).unwrap(),
            ];
            decode_frontend_details(&mut r, got.iter_mut()).unwrap();
            r.finish().unwrap();
            got
        };
        assert_eq!(decode(&new), rows);
        let old = decode(&new[..old_len]);
        assert_eq!(old[0].replayed_journal_id, Some(Zxid(0x1_0000_0005)));
        assert_eq!(old[1].replayed_journal_id, None);
        assert_eq!(
            (old[0].version.as_deref(), old[0].err_msg.as_str()),
            (None, "")
        );
        assert_eq!(old[0].lag_ms, Some(0));
        // A detail list of another length is refused, not misapplied.
        let mut short = new[..old_len].to_vec();
        encode_frontend_details(&mut short, rows[..1].iter());
        let mut r = Reader::new(&short);
        let mut got = [
            decode_frontend_row(&mut r).unwrap(),
            decode_frontend_row(&mut r).unwrap(),
        ];
        assert!(decode_frontend_details(&mut r, got.iter_mut()).is_err());
    }

    #[test]
    fn status_without_a_start_time_is_the_old_layout() {
        let mut s = StatusInfo {
            sid: 1,
            mode: Mode::Leader,
            leader_sid: Some(1),
            epoch: 2,
            applied_journal_id: Zxid(9),
            last_timestamp_ms: 5,
            staleness_ms: None,
            entry_count: 3,
            cluster_id: 7,
            version: "0.1.0".into(),
            last_start_time_ms: None,
        };
        assert!(s.is_leader());
        let mut old = Vec::new();
        encode_status(&mut old, &s);
        s.last_start_time_ms = Some(1_700_000_000_000);
        let mut new = Vec::new();
        encode_status(&mut new, &s);
        assert_eq!(new.len(), old.len() + 8);
        assert_eq!(
            &new[..old.len()],
            &old[..],
            "the old fields come first, unchanged"
        );
        let mut r = Reader::new(&new);
        assert_eq!(decode_status(&mut r).unwrap(), s);
        let mut r = Reader::new(&old);
        assert_eq!(decode_status(&mut r).unwrap().last_start_time_ms, None);
    }
}
