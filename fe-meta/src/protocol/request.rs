//! Requests: `version u8 | request_id u64 | kind u16 | [meta] | body` (layouts:
//! `docs/PROTOCOL.md` §3–§4). Version 1 has no meta; version 2 carries [`RequestMeta`] after
//! the kind: `flags u8 | budget_ms u32 (flag bit 0) | client_id u64, seq u64, floor u64 (flag
//! bit 1)`.
//!
//! INV-1: `decode_request(&encode_request(r)) == r` for every request within the limits; a
//! request with no meta is encoded as version 1, byte for byte as before version 2 existed.
//! INV-2: decoding never panics; an error carries the request id and kind whenever the header
//! was readable, so the server can answer it with an error frame for that id.
//! INV-3: a decoded session tag is on a write and has `floor <= seq < floor + SEQ_SPAN_MAX`
//! (`catalog::sessions`).

use bytes::BufMut;

use super::auth::{get_auth, put_auth, AuthRequest};
use super::command::{get_command, put_command};
use super::config::{get_add, get_drop, put_change, FrontendChange};
use super::{ProtocolError, RequestKind, PROTOCOL_VERSION, PROTOCOL_VERSION_META};
use crate::command::Command;
use crate::state::catalog::{SessionTag, NAME_LEN_MAX};
use crate::wire::{Put, Reader, WireError};

/// Options of a read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Sync with the leader first, then read (linearizable on any node).
    pub sync: bool,
}

/// The version-2 fields of a request: its deadline and the client's session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestMeta {
    /// How long the client waits for the answer, in ms (its own timeout). The server's
    /// deadline is the moment it read the request plus this; clocks need not agree.
    pub budget_ms: Option<u32>,
    /// The client's session fields (writes only).
    pub session: Option<SessionTag>,
}

const META_BUDGET: u8 = 1;
const META_SESSION: u8 = 2;

/// A request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Chosen by the client; echoed in the response. Responses may come in any order.
    pub id: u64,
    /// Deadline and session (version 2); the default is a version-1 request.
    pub meta: RequestMeta,
    /// What is asked.
    pub body: RequestBody,
}

/// What a request asks: a read (one variant per read kind) or a write ([`Command`], one
/// request kind per command variant).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestBody {
    /// The node's status.
    Status,
    /// The catalog digest and applied journal id.
    Digest(ReadOptions),
    /// Catch up with the leader's commit point.
    Sync,
    /// The node's committed cluster configuration.
    GetConfig,
    /// What the node holds, for choosing a survivor to recover from.
    RecoveryInfo,
    /// Authenticate the session (`docs/PROTOCOL.md` §11).
    Auth(AuthRequest),
    /// A write.
    Write(Command),
    /// A change of the cluster configuration (ADD_FRONTEND, DROP_FRONTEND).
    ChangeMembership(FrontendChange),
    /// List backends.
    ShowBackends(ReadOptions),
    /// List frontends with their replication progress.
    ShowFrontends(ReadOptions),
    /// List the committed configuration's members with their progress, its version and
    /// which member is joining.
    ShowMembers(ReadOptions),
    /// List databases.
    ShowDatabases(ReadOptions),
    /// List a database's tables.
    ShowTables {
        /// Read options.
        opts: ReadOptions,
        /// Database.
        db: String,
    },
    /// Read a global variable.
    GetVar {
        /// Read options.
        opts: ReadOptions,
        /// Name.
        name: String,
    },
    /// List global variables.
    ShowVars(ReadOptions),
    /// A backup of the node's catalog (answered by a stream, `docs/PROTOCOL.md`).
    Backup(ReadOptions),
    /// Make the leader hand over to server `target` (or, with none, to the most up-to-date
    /// follower in sync).
    TransferLeader {
        /// The server that should lead next.
        target: Option<u64>,
    },
}

impl From<Command> for RequestBody {
    fn from(cmd: Command) -> RequestBody {
        RequestBody::Write(cmd)
    }
}

impl RequestBody {
    /// The request's kind.
    pub fn kind(&self) -> RequestKind {
        match self {
            RequestBody::Status => RequestKind::STATUS,
            RequestBody::Digest(_) => RequestKind::DIGEST,
            RequestBody::Sync => RequestKind::SYNC,
            RequestBody::GetConfig => RequestKind::GET_CONFIG,
            RequestBody::RecoveryInfo => RequestKind::RECOVERY_INFO,
            RequestBody::Auth(_) => RequestKind::AUTH,
            RequestBody::Write(cmd) => cmd.request_kind(),
            RequestBody::ChangeMembership(FrontendChange::Add { .. }) => RequestKind::ADD_FRONTEND,
            RequestBody::ChangeMembership(FrontendChange::Drop { .. }) => {
                RequestKind::DROP_FRONTEND
            }
            RequestBody::ShowBackends(_) => RequestKind::SHOW_BACKENDS,
            RequestBody::ShowFrontends(_) => RequestKind::SHOW_FRONTENDS,
            RequestBody::ShowMembers(_) => RequestKind::SHOW_MEMBERS,
            RequestBody::ShowDatabases(_) => RequestKind::SHOW_DATABASES,
            RequestBody::ShowTables { .. } => RequestKind::SHOW_TABLES,
            RequestBody::GetVar { .. } => RequestKind::GET_VAR,
            RequestBody::ShowVars(_) => RequestKind::SHOW_VARS,
            RequestBody::Backup(_) => RequestKind::BACKUP,
            RequestBody::TransferLeader { .. } => RequestKind::TRANSFER_LEADER,
        }
    }

    /// The read options, if this is a read that takes them.
    pub fn read_options(&self) -> Option<ReadOptions> {
        match self {
            RequestBody::Digest(o)
            | RequestBody::ShowBackends(o)
            | RequestBody::ShowFrontends(o)
            | RequestBody::ShowMembers(o)
            | RequestBody::ShowDatabases(o)
            | RequestBody::ShowVars(o)
            | RequestBody::Backup(o)
            | RequestBody::ShowTables { opts: o, .. }
            | RequestBody::GetVar { opts: o, .. } => Some(*o),
            _ => None,
        }
    }
}

/// A request's frame payload (without the length prefix).
pub fn encode_request(req: &Request) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    let meta = req.meta;
    let with_meta = meta != RequestMeta::default();
    out.put_u8(if with_meta {
        PROTOCOL_VERSION_META
    } else {
        PROTOCOL_VERSION
    });
    out.put_u64(req.id);
    out.put_u16(req.body.kind().0);
    if with_meta {
        put_meta(&mut out, &meta);
    }
    let o = &mut out;
    match &req.body {
        RequestBody::Status
        | RequestBody::Sync
        | RequestBody::GetConfig
        | RequestBody::RecoveryInfo => {}
        RequestBody::Digest(opts)
        | RequestBody::ShowBackends(opts)
        | RequestBody::ShowFrontends(opts)
        | RequestBody::ShowMembers(opts)
        | RequestBody::ShowDatabases(opts)
        | RequestBody::ShowVars(opts)
        | RequestBody::Backup(opts) => put_opts(o, *opts),
        RequestBody::Auth(auth) => put_auth(o, auth),
        RequestBody::Write(cmd) => put_command(o, cmd),
        RequestBody::ChangeMembership(change) => put_change(o, change),
        RequestBody::ShowTables { opts, db } => {
            put_opts(o, *opts);
            o.put_str(db);
        }
        RequestBody::GetVar { opts, name } => {
            put_opts(o, *opts);
            o.put_str(name);
        }
        RequestBody::TransferLeader { target } => o.put_opt_u64(*target),
    }
    out
}

/// Decodes a request's frame payload (INV-2).
pub fn decode_request(payload: &[u8]) -> Result<Request, ProtocolError> {
    let mut r = Reader::new(payload);
    let version = r.u8("protocol version").map_err(ProtocolError::header)?;
    if version != PROTOCOL_VERSION && version != PROTOCOL_VERSION_META {
        return Err(ProtocolError::UnsupportedVersion { found: version });
    }
    let id = r.u64("request id").map_err(ProtocolError::header)?;
    let kind = RequestKind(
        r.u16("request kind")
            .map_err(|source| ProtocolError::Body {
                request_id: Some(id),
                kind: None,
                source,
            })?,
    );
    let meta = match version {
        PROTOCOL_VERSION_META => get_meta(kind, &mut r).map_err(|source| ProtocolError::Body {
            request_id: Some(id),
            kind: Some(kind),
            source,
        })?,
        _ => RequestMeta::default(),
    };
    let body = decode_body(kind, &mut r)
        .and_then(|body| r.finish().map(|()| body))
        .map_err(|source| match source {
            WireError::BadValue {
                field: "request kind",
                ..
            } => ProtocolError::UnknownKind {
                request_id: id,
                kind,
            },
            source => ProtocolError::Body {
                request_id: Some(id),
                kind: Some(kind),
                source,
            },
        })?;
    Ok(Request { id, meta, body })
}

fn put_meta(out: &mut Vec<u8>, meta: &RequestMeta) {
    let mut flags = 0;
    if meta.budget_ms.is_some() {
        flags |= META_BUDGET;
    }
    if meta.session.is_some() {
        flags |= META_SESSION;
    }
    out.put_u8(flags);
    if let Some(budget) = meta.budget_ms {
        out.put_u32(budget);
    }
    if let Some(tag) = meta.session {
        out.put_u64(tag.client_id);
        out.put_u64(tag.seq);
        out.put_u64(tag.floor);
    }
}

fn get_meta(kind: RequestKind, r: &mut Reader<'_>) -> Result<RequestMeta, WireError> {
    let flags = r.u8("meta flags")?;
    if flags & !(META_BUDGET | META_SESSION) != 0 {
        return Err(WireError::BadValue {
            field: "meta flags",
            value: u64::from(flags),
        });
    }
    let budget_ms = match flags & META_BUDGET {
        0 => None,
        _ => Some(r.u32("budget_ms")?),
    };
    let session = match flags & META_SESSION {
        0 => None,
        _ => Some(SessionTag {
            client_id: r.u64("client_id")?,
            seq: r.u64("seq")?,
            floor: r.u64("floor")?,
        }),
    };
    if let Some(tag) = session {
        if !kind.is_write() {
            return Err(WireError::BadValue {
                field: "session on a request that is not a write, kind",
                value: u64::from(kind.0),
            });
        }
        if !tag.is_valid() {
            return Err(WireError::BadValue {
                field: "floor (above seq)",
                value: tag.floor,
            });
        }
        if !tag.is_within_window() {
            return Err(WireError::BadValue {
                field: "seq (at or above floor + 1024: a client starts a write only within 1024 \
                        sequence numbers of its oldest write in flight)",
                value: tag.seq,
            });
        }
    }
    Ok(RequestMeta { budget_ms, session })
}

fn decode_body(kind: RequestKind, r: &mut Reader<'_>) -> Result<RequestBody, WireError> {
    let name = |r: &mut Reader<'_>, field| r.str(field, NAME_LEN_MAX);
    Ok(match kind {
        RequestKind::STATUS => RequestBody::Status,
        RequestKind::DIGEST => RequestBody::Digest(get_opts(r)?),
        RequestKind::SYNC => RequestBody::Sync,
        RequestKind::GET_CONFIG => RequestBody::GetConfig,
        RequestKind::RECOVERY_INFO => RequestBody::RecoveryInfo,
        RequestKind::AUTH => RequestBody::Auth(get_auth(r)?),
        RequestKind::ADD_FRONTEND => RequestBody::ChangeMembership(get_add(r)?),
        RequestKind::DROP_FRONTEND => RequestBody::ChangeMembership(get_drop(r)?),
        RequestKind::SHOW_MEMBERS => RequestBody::ShowMembers(get_opts(r)?),
        RequestKind::SHOW_BACKENDS => RequestBody::ShowBackends(get_opts(r)?),
        RequestKind::SHOW_FRONTENDS => RequestBody::ShowFrontends(get_opts(r)?),
        RequestKind::SHOW_DATABASES => RequestBody::ShowDatabases(get_opts(r)?),
        RequestKind::SHOW_TABLES => RequestBody::ShowTables {
            opts: get_opts(r)?,
            db: name(r, "database name")?,
        },
        RequestKind::GET_VAR => RequestBody::GetVar {
            opts: get_opts(r)?,
            name: name(r, "variable name")?,
        },
        RequestKind::SHOW_VARS => RequestBody::ShowVars(get_opts(r)?),
        RequestKind::BACKUP => RequestBody::Backup(get_opts(r)?),
        RequestKind::TRANSFER_LEADER => RequestBody::TransferLeader {
            target: r.opt_u64("target sid")?,
        },
        // Every other kind is a write or unknown (`command` INV-1).
        kind => RequestBody::Write(get_command(kind, r)?),
    })
}

fn put_opts(out: &mut Vec<u8>, opts: ReadOptions) {
    out.put_u8(u8::from(opts.sync));
}

fn get_opts(r: &mut Reader<'_>) -> Result<ReadOptions, WireError> {
    match r.u8("read flags")? {
        0 => Ok(ReadOptions { sync: false }),
        1 => Ok(ReadOptions { sync: true }),
        v => Err(WireError::BadValue {
            field: "read flags",
            value: u64::from(v),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::catalog::SEQ_SPAN_MAX;

    /// INV-3: a session tag 1024 or more above its floor is refused for the request's id
    /// (the server answers it INVALID_ARGUMENT); one within the window decodes.
    #[test]
    fn a_session_tag_outside_the_window_is_refused() {
        let write = |seq, floor| Request {
            id: 7,
            meta: RequestMeta {
                budget_ms: None,
                session: Some(SessionTag {
                    client_id: 1,
                    seq,
                    floor,
                }),
            },
            body: RequestBody::Write(Command::CreateDb { name: "d".into() }),
        };
        let inside = write(SEQ_SPAN_MAX + 4, 5);
        assert_eq!(decode_request(&encode_request(&inside)).unwrap(), inside);
        let e = decode_request(&encode_request(&write(SEQ_SPAN_MAX + 5, 5))).unwrap_err();
        assert!(e.to_string().contains("floor + 1024"), "{e}");
        assert_eq!(e.request_id(), Some(7), "answered for its id");
    }
}
