//! Responses: `version u8 | request_id u64 | kind u16 | status u16 | body`; status 0 is
//! success with a body per kind, anything else an error code with an error body (layouts:
//! `docs/PROTOCOL.md` §5–§7).
//!
//! INV-1: `decode_response(&encode_response(r)) == r` whenever `r`'s body is the one its kind
//! answers with ([`ResponseBody::answers`]).
//! INV-2: decoding never panics and never reserves memory for more items than the remaining
//! bytes could hold.

use bytes::BufMut;
use zab_net::Zxid;

use super::auth::{get_authenticated, put_authenticated, Role};
use super::backup;
pub use super::backup::BACKUP_CHUNK_MAX;
use super::config::{
    decode_config, decode_member_row, encode_config, encode_member_row, ClusterConfig, MemberRow,
};
use super::recovery::{decode_recovery_info, encode_recovery_info, RecoveryInfo};
use super::rows::{
    decode_frontend_details, decode_frontend_row, decode_status, encode_frontend_details,
    encode_frontend_row, encode_status,
};
pub use super::rows::{FrontendRow, StatusInfo};
use super::status::{get_error, put_error, ErrorReply};
use super::{ProtocolError, RequestKind, PROTOCOL_VERSION};
use crate::state::backup::BackupHeader;
use crate::state::catalog::{Backend, Codec, Database, Table, NAME_LEN_MAX, VALUE_LEN_MAX};
use crate::wire::{Put, Reader, WireError};

/// A response to the request with the same id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// The request's id (0 when answering a frame whose id could not be read).
    pub id: u64,
    /// The request's kind, echoed.
    pub kind: RequestKind,
    /// The answer.
    pub result: Result<ResponseBody, ErrorReply>,
}

/// A successful answer (one variant per group of kinds, see [`ResponseBody::answers`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResponseBody {
    /// STATUS.
    Status(StatusInfo),
    /// DIGEST.
    Digest {
        /// The catalog version digested.
        journal_id: Zxid,
        /// SHA-256 of its image.
        digest: [u8; 32],
        /// Its entries.
        entry_count: u64,
    },
    /// SYNC.
    Synced {
        /// Applied journal id after the sync.
        journal_id: Zxid,
    },
    /// GET_CONFIG: the answering node's committed configuration.
    Config(ClusterConfig),
    /// RECOVERY_INFO: what the answering node holds.
    RecoveryInfo(RecoveryInfo),
    /// ADD_FRONTEND, DROP_FRONTEND: the change committed.
    Reconfigured {
        /// The journal id that committed the change: the new configuration's version.
        version: Zxid,
        /// The leader's committed configuration when it answered (its version is `version`,
        /// or later when the leader already promoted a joining member).
        config: ClusterConfig,
    },
    /// Every write.
    Written {
        /// The write's journal id; this node has applied it.
        journal_id: Zxid,
        /// The id of what was created, if anything.
        created_id: Option<u64>,
    },
    /// SHOW_BACKENDS.
    Backends {
        /// Version read.
        journal_id: Zxid,
        /// By id.
        backends: Vec<Backend>,
    },
    /// SHOW_FRONTENDS.
    Frontends {
        /// Version read.
        journal_id: Zxid,
        /// By sid.
        rows: Vec<FrontendRow>,
    },
    /// SHOW_MEMBERS.
    Members {
        /// Catalog version read.
        journal_id: Zxid,
        /// The committed configuration's version the rows come from.
        config_version: Zxid,
        /// By sid.
        rows: Vec<MemberRow>,
    },
    /// SHOW_DATABASES.
    Databases {
        /// Version read.
        journal_id: Zxid,
        /// By id.
        databases: Vec<Database>,
    },
    /// SHOW_TABLES.
    Tables {
        /// Version read.
        journal_id: Zxid,
        /// By name.
        tables: Vec<Table>,
    },
    /// GET_VAR.
    Var {
        /// Version read.
        journal_id: Zxid,
        /// The value; none if unset.
        value: Option<String>,
    },
    /// SHOW_VARS.
    Vars {
        /// Version read.
        journal_id: Zxid,
        /// By name.
        vars: Vec<(String, String)>,
    },
    /// BACKUP, one of the stream's chunks: the backup file's bytes at `offset`.
    BackupChunk {
        /// Where `data` starts in the file.
        offset: u64,
        /// At most [`BACKUP_CHUNK_MAX`] bytes.
        data: Vec<u8>,
    },
    /// BACKUP, the stream's last answer: the file's header (every chunk was sent before it).
    BackupDone(BackupHeader),
    /// AUTH: the session is authenticated.
    Authenticated {
        /// The identity (a certificate's name, or the one the client gave).
        identity: String,
        /// What it may do.
        role: Role,
    },
    /// TRANSFER_LEADER: the old leader serves under the new one.
    Transferred {
        /// The old leader.
        from: u64,
        /// The new leader.
        to: u64,
        /// The epoch the new leader established.
        epoch: u32,
        /// From the request reaching the old leader to it serving under the new one.
        elapsed_ms: u64,
    },
}

impl ResponseBody {
    /// Whether this body is the success answer to a request of `kind`.
    pub fn answers(&self, kind: RequestKind) -> bool {
        matches!(
            (self, kind),
            (ResponseBody::Status(_), RequestKind::STATUS)
                | (ResponseBody::Digest { .. }, RequestKind::DIGEST)
                | (ResponseBody::Synced { .. }, RequestKind::SYNC)
                | (ResponseBody::Config(_), RequestKind::GET_CONFIG)
                | (ResponseBody::RecoveryInfo(_), RequestKind::RECOVERY_INFO)
                | (ResponseBody::Members { .. }, RequestKind::SHOW_MEMBERS)
                | (ResponseBody::Backends { .. }, RequestKind::SHOW_BACKENDS)
                | (ResponseBody::Frontends { .. }, RequestKind::SHOW_FRONTENDS)
                | (ResponseBody::Databases { .. }, RequestKind::SHOW_DATABASES)
                | (ResponseBody::Tables { .. }, RequestKind::SHOW_TABLES)
                | (ResponseBody::Var { .. }, RequestKind::GET_VAR)
                | (ResponseBody::Vars { .. }, RequestKind::SHOW_VARS)
                | (ResponseBody::BackupChunk { .. }, RequestKind::BACKUP)
                | (ResponseBody::BackupDone(_), RequestKind::BACKUP)
                | (ResponseBody::Authenticated { .. }, RequestKind::AUTH)
                | (
                    ResponseBody::Transferred { .. },
                    RequestKind::TRANSFER_LEADER
                )
        ) || (matches!(self, ResponseBody::Written { .. }) && kind.is_write())
            || (matches!(self, ResponseBody::Reconfigured { .. }) && kind.is_membership_change())
    }
}

/// A response's frame payload (without the length prefix).
pub fn encode_response(resp: &Response) -> Vec<u8> {
    let mut o = Vec::with_capacity(64);
    o.put_u8(PROTOCOL_VERSION);
    o.put_u64(resp.id);
    o.put_u16(resp.kind.0);
    match &resp.result {
        Ok(body) => {
            o.put_u16(0);
            encode_body(&mut o, body);
        }
        Err(e) => put_error(&mut o, e),
    }
    o
}

fn encode_body(o: &mut Vec<u8>, body: &ResponseBody) {
    match body {
        ResponseBody::Status(s) => encode_status(o, s),
        ResponseBody::Digest {
            journal_id,
            digest,
            entry_count,
        } => {
            o.put_u64(journal_id.0);
            o.extend_from_slice(digest);
            o.put_u64(*entry_count);
        }
        ResponseBody::Synced { journal_id } => o.put_u64(journal_id.0),
        ResponseBody::Config(c) => encode_config(o, c),
        ResponseBody::RecoveryInfo(i) => encode_recovery_info(o, i),
        ResponseBody::Reconfigured { version, config } => {
            o.put_u64(version.0);
            encode_config(o, config);
        }
        ResponseBody::Members {
            journal_id,
            config_version,
            rows,
        } => {
            o.put_u64(journal_id.0);
            o.put_u64(config_version.0);
            o.put_len(rows.len());
            for row in rows {
                encode_member_row(o, row);
            }
            encode_frontend_details(o, rows.iter().map(|m| &m.row));
        }
        ResponseBody::Written {
            journal_id,
            created_id,
        } => {
            o.put_u64(journal_id.0);
            o.put_opt_u64(*created_id);
        }
        ResponseBody::Backends {
            journal_id,
            backends,
        } => put_list(o, *journal_id, backends, |o, b| b.encode(o)),
        ResponseBody::Frontends { journal_id, rows } => {
            put_list(o, *journal_id, rows, encode_frontend_row);
            encode_frontend_details(o, rows.iter());
        }
        ResponseBody::Databases {
            journal_id,
            databases,
        } => put_list(o, *journal_id, databases, |o, d| d.encode(o)),
        ResponseBody::Tables { journal_id, tables } => {
            put_list(o, *journal_id, tables, |o, t| t.encode(o))
        }
        ResponseBody::Var { journal_id, value } => {
            o.put_u64(journal_id.0);
            o.put_opt_str(value.as_deref());
        }
        ResponseBody::Vars { journal_id, vars } => put_list(o, *journal_id, vars, |o, (k, v)| {
            o.put_str(k);
            o.put_str(v);
        }),
        ResponseBody::BackupChunk { offset, data } => backup::encode_chunk(o, *offset, data),
        ResponseBody::BackupDone(header) => backup::encode_end(o, header),
        t @ ResponseBody::Transferred { .. } => put_transferred(o, t),
        ResponseBody::Authenticated { identity, role } => put_authenticated(o, identity, *role),
    }
}

fn put_transferred(o: &mut Vec<u8>, t: &ResponseBody) {
    if let ResponseBody::Transferred {
        from,
        to,
        epoch,
        elapsed_ms,
    } = t
    {
        o.put_u64(*from);
        o.put_u64(*to);
        o.put_u32(*epoch);
        o.put_u64(*elapsed_ms);
    }
}

pub(super) fn put_list<T>(
    o: &mut Vec<u8>,
    journal_id: Zxid,
    items: &[T],
    put: impl Fn(&mut Vec<u8>, &T),
) {
    o.put_u64(journal_id.0);
    o.put_len(items.len());
    for item in items {
        put(o, item);
    }
}

/// Decodes a response's frame payload (INV-2).
pub fn decode_response(payload: &[u8]) -> Result<Response, ProtocolError> {
    let mut r = Reader::new(payload);
    let version = r.u8("protocol version").map_err(ProtocolError::header)?;
    if version != PROTOCOL_VERSION {
        return Err(ProtocolError::UnsupportedVersion { found: version });
    }
    let id = r.u64("request id").map_err(ProtocolError::header)?;
    let body_err = |kind: Option<RequestKind>| {
        move |source| ProtocolError::Body {
            request_id: Some(id),
            kind,
            source,
        }
    };
    let kind = RequestKind(r.u16("request kind").map_err(body_err(None))?);
    let status = r.u16("status").map_err(body_err(Some(kind)))?;
    let result = if status == 0 {
        if kind.name().is_none() {
            return Err(ProtocolError::UnknownKind {
                request_id: id,
                kind,
            });
        }
        Ok(decode_body(kind, &mut r).map_err(body_err(Some(kind)))?)
    } else {
        Err(get_error(status, &mut r).map_err(body_err(Some(kind)))?)
    };
    r.finish().map_err(body_err(Some(kind)))?;
    Ok(Response { id, kind, result })
}

fn decode_body(kind: RequestKind, r: &mut Reader<'_>) -> Result<ResponseBody, WireError> {
    Ok(match kind {
        RequestKind::STATUS => ResponseBody::Status(decode_status(r)?),
        RequestKind::DIGEST => decode_digest(r)?,
        RequestKind::SYNC => ResponseBody::Synced {
            journal_id: Zxid(r.u64("journal id")?),
        },
        RequestKind::GET_CONFIG => ResponseBody::Config(decode_config(r)?),
        RequestKind::RECOVERY_INFO => ResponseBody::RecoveryInfo(decode_recovery_info(r)?),
        RequestKind::ADD_FRONTEND | RequestKind::DROP_FRONTEND => ResponseBody::Reconfigured {
            version: Zxid(r.u64("configuration version")?),
            config: decode_config(r)?,
        },
        RequestKind::SHOW_MEMBERS => decode_members(r)?,
        RequestKind::SHOW_BACKENDS => {
            let (journal_id, backends) = get_list(r, 23, Backend::decode)?;
            ResponseBody::Backends {
                journal_id,
                backends,
            }
        }
        RequestKind::SHOW_FRONTENDS => {
            let (journal_id, mut rows) = get_list(r, 30, decode_frontend_row)?;
            decode_frontend_details(r, rows.iter_mut())?;
            ResponseBody::Frontends { journal_id, rows }
        }
        RequestKind::SHOW_DATABASES => {
            let (journal_id, databases) = get_list(r, 12, Database::decode)?;
            ResponseBody::Databases {
                journal_id,
                databases,
            }
        }
        RequestKind::SHOW_TABLES => {
            let (journal_id, tables) = get_list(r, 24, Table::decode)?;
            ResponseBody::Tables { journal_id, tables }
        }
        RequestKind::GET_VAR => ResponseBody::Var {
            journal_id: Zxid(r.u64("journal id")?),
            value: r.opt_str("variable value", VALUE_LEN_MAX)?,
        },
        RequestKind::SHOW_VARS => {
            let (journal_id, vars) = get_list(r, 8, |r| {
                Ok((
                    r.str("variable name", NAME_LEN_MAX)?,
                    r.str("variable value", VALUE_LEN_MAX)?,
                ))
            })?;
            ResponseBody::Vars { journal_id, vars }
        }
        RequestKind::BACKUP => backup::decode(r)?,
        RequestKind::AUTH => {
            let (identity, role) = get_authenticated(r)?;
            ResponseBody::Authenticated { identity, role }
        }
        RequestKind::TRANSFER_LEADER => ResponseBody::Transferred {
            from: r.u64("from sid")?,
            to: r.u64("to sid")?,
            epoch: r.u32("epoch")?,
            elapsed_ms: r.u64("elapsed ms")?,
        },
        _ => ResponseBody::Written {
            journal_id: Zxid(r.u64("journal id")?),
            created_id: r.opt_u64("created id")?,
        },
    })
}

/// A DIGEST answer: `journal_id u64 | digest [32] | entry_count u64`.
fn decode_digest(r: &mut Reader<'_>) -> Result<ResponseBody, WireError> {
    let journal_id = Zxid(r.u64("journal id")?);
    let mut digest = [0u8; 32];
    digest.copy_from_slice(r.take("digest", 32)?);
    Ok(ResponseBody::Digest {
        journal_id,
        digest,
        entry_count: r.u64("entry count")?,
    })
}

/// A SHOW_MEMBERS answer: `journal_id u64 | config_version u64 | count u32 | row*`, then the
/// rows' details if present (`rows` INV-2); a row is at least 31 bytes (INV-2).
fn decode_members(r: &mut Reader<'_>) -> Result<ResponseBody, WireError> {
    let journal_id = Zxid(r.u64("journal id")?);
    let config_version = Zxid(r.u64("configuration version")?);
    let n = r.len("item count", r.remaining() / 31)?;
    let mut rows = Vec::with_capacity(n);
    for _ in 0..n {
        rows.push(decode_member_row(r)?);
    }
    decode_frontend_details(r, rows.iter_mut().map(|m| &mut m.row))?;
    Ok(ResponseBody::Members {
        journal_id,
        config_version,
        rows,
    })
}

/// `journal_id u64 | count u32 | item*`; `min_len` is the smallest encoded item (INV-2).
fn get_list<T>(
    r: &mut Reader<'_>,
    min_len: usize,
    mut item: impl FnMut(&mut Reader<'_>) -> Result<T, WireError>,
) -> Result<(Zxid, Vec<T>), WireError> {
    let journal_id = Zxid(r.u64("journal id")?);
    let n = r.len("item count", r.remaining() / min_len)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(item(r)?);
    }
    Ok((journal_id, out))
}
