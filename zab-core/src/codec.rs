//! The wire encoding of every [`Message`]: a versioned, big-endian binary format.
//!
//! ```text
//! message   = version:u8 tag:u8 body
//! zxid      = u64            epoch = u32           sid, round, request id = u64
//! bytes     = len:u32 data[len]            (len ≤ MAX_DATA_LEN)
//! bool      = u8 (0 | 1)
//! outcome   = 0 zxid | 1 opt_sid | 2 | 3  (Ok | NotLeader | QuorumLost | EpochExhausted)
//! opt_sid   = 0 | 1 sid
//! ```
//! The body of each tag is listed beside its constant in [`tag`]. A frame boundary (the length
//! prefix) belongs to the transport, not to this module: one call to [`decode`] takes exactly
//! one encoded message.
//!
//! INV-1: `decode(encode(m)) == m` for every message whose variable fields fit
//! [`MAX_DATA_LEN`]; [`encode`] refuses the others, so nothing it writes is undecodable.
//! INV-2: [`decode`] never panics and never allocates more than the input's length: every
//! length is checked against the bytes that remain before anything is copied.
//! INV-3: decoding is strict: an unknown version or tag, a bool or enum byte out of range, a
//! length above [`MAX_DATA_LEN`], a short field or bytes left over after the message are all
//! errors; no input has two meanings.
//! INV-4: tags and field orders of [`FORMAT_VERSION`] never change; a new layout gets a new
//! version.

use bytes::{BufMut, Bytes, BytesMut};
use thiserror::Error;

mod decode;

use decode::{decode_from, Reader};

use crate::message::{ElectionState, Message, RequestError};
use crate::types::{Epoch, RequestId, Txn, TxnKind, Zxid};

/// The format version this module writes and the only one it reads.
pub const FORMAT_VERSION: u8 = 1;

/// The largest variable-length field (txn payload, request payload, snapshot chunk), 16 MiB.
pub const MAX_DATA_LEN: usize = 16 * 1024 * 1024;

/// The largest encoded message: [`MAX_DATA_LEN`] plus every fixed field of the largest body.
pub const MAX_MESSAGE_LEN: usize = MAX_DATA_LEN + 64;

/// Message type tags of [`FORMAT_VERSION`], with the body that follows each.
pub mod tag {
    /// Retired: a notification without the sender's configuration version.
    pub const NOTIFICATION_WITHOUT_CONFIG: u8 = 1;
    /// accepted_epoch:u32 protocol_version:u32
    pub const FOLLOWER_INFO: u8 = 2;
    /// accepted_epoch:u32 protocol_version:u32
    pub const OBSERVER_INFO: u8 = 3;
    /// new_epoch:u32 protocol_version:u32
    pub const LEADER_INFO: u8 = 4;
    /// current_epoch:u32 last_zxid:u64
    pub const ACK_EPOCH: u8 = 5;
    /// last_zxid:u64
    pub const DIFF: u8 = 6;
    /// zxid:u64
    pub const TRUNC: u8 = 7;
    /// Retired: a SNAP header without a configuration (never written or read any more).
    pub const SNAP_WITHOUT_MEMBERSHIP: u8 = 8;
    /// data:bytes last:bool
    pub const SNAP_CHUNK: u8 = 9;
    /// zxid:u64
    pub const NEW_LEADER: u8 = 10;
    /// (empty)
    pub const UP_TO_DATE: u8 = 11;
    /// zxid:u64 data:bytes
    pub const PROPOSAL: u8 = 12;
    /// zxid:u64
    pub const ACK: u8 = 13;
    /// zxid:u64
    pub const COMMIT: u8 = 14;
    /// zxid:u64 data:bytes
    pub const INFORM: u8 = 15;
    /// round:u64
    pub const PING: u8 = 16;
    /// round:u64
    pub const PING_ACK: u8 = 17;
    /// request_id:u64 payload:bytes
    pub const REQUEST: u8 = 18;
    /// request_id:u64 outcome
    pub const REQUEST_DONE: u8 = 19;
    /// request_id:u64
    pub const SYNC: u8 = 20;
    /// request_id:u64 outcome
    pub const SYNC_REPLY: u8 = 21;
    /// zxid:u64 data:bytes — a PROPOSAL of a configuration txn (`TxnKind::Membership`)
    pub const PROPOSAL_MEMBERSHIP: u8 = 22;
    /// zxid:u64 data:bytes — an INFORM of a configuration txn (`TxnKind::Membership`)
    pub const INFORM_MEMBERSHIP: u8 = 23;
    /// zxid:u64 membership_version:u64 membership:bytes (`Membership::encode`)
    pub const SNAP: u8 = 24;
    /// leader:u64 zxid:u64 peer_epoch:u32 round:u64 state:u8 (0 looking, 1 following,
    /// 2 leading, 3 observing, 4 uninitialized) config_version:u64
    pub const NOTIFICATION: u8 = 25;
    /// version:u64 membership:bytes (`Membership::encode`)
    pub const MEMBERSHIP: u8 = 26;
    /// leader:u64 zxid:u64 peer_epoch:u32 — the nominee of a leader transfer
    pub const TRANSFER: u8 = 27;
}

/// Why bytes did not decode into a [`Message`].
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The leading version byte is not one this build reads.
    #[error("unsupported message format version {found} (this build reads version {supported})")]
    BadVersion {
        /// The version byte found.
        found: u8,
        /// The version this build reads.
        supported: u8,
    },
    /// The message type tag is unknown.
    #[error("unknown message type tag {tag}")]
    UnknownTag {
        /// The tag byte found.
        tag: u8,
    },
    /// The input ended inside a field.
    #[error("truncated message: field `{field}` needs {needed} bytes, {remaining} remain")]
    Truncated {
        /// The field being read.
        field: &'static str,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left in the input.
        remaining: usize,
    },
    /// A length prefix exceeds [`MAX_DATA_LEN`].
    #[error("field `{field}` declares {len} bytes, more than the maximum {max}")]
    Oversize {
        /// The field being read.
        field: &'static str,
        /// The declared length.
        len: u64,
        /// The maximum allowed.
        max: usize,
    },
    /// A bool or enum byte is out of range.
    #[error("field `{field}` has invalid value {value}")]
    InvalidValue {
        /// The field being read.
        field: &'static str,
        /// The value found.
        value: u8,
    },
    /// A configuration field does not decode.
    #[error("bad configuration: {reason}")]
    BadMembership {
        /// What is wrong.
        reason: String,
    },
    /// Bytes remain after a complete message.
    #[error("{count} trailing bytes after a complete message")]
    TrailingBytes {
        /// How many bytes remain.
        count: usize,
    },
}

/// Why a [`Message`] cannot be encoded.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// A variable-length field exceeds [`MAX_DATA_LEN`].
    #[error("field `{field}` is {len} bytes, more than the maximum {max}")]
    Oversize {
        /// The offending field.
        field: &'static str,
        /// Its length.
        len: usize,
        /// The maximum allowed.
        max: usize,
    },
}

/// Appends the encoding of `msg` to `buf`. On error `buf` is left unchanged.
pub fn encode(msg: &Message, buf: &mut BytesMut) -> Result<(), EncodeError> {
    check_sizes(msg)?;
    buf.reserve(encoded_len(msg));
    buf.put_u8(FORMAT_VERSION);
    match msg {
        Message::Notification(n) => put_notification(buf, n),
        Message::Membership(m) => put_membership(buf, tag::MEMBERSHIP, None, m),
        Message::FollowerInfo {
            accepted_epoch,
            protocol_version,
        } => put_epoch_version(buf, tag::FOLLOWER_INFO, *accepted_epoch, *protocol_version),
        Message::ObserverInfo {
            accepted_epoch,
            protocol_version,
        } => put_epoch_version(buf, tag::OBSERVER_INFO, *accepted_epoch, *protocol_version),
        Message::LeaderInfo {
            new_epoch,
            protocol_version,
        } => put_epoch_version(buf, tag::LEADER_INFO, *new_epoch, *protocol_version),
        Message::AckEpoch {
            current_epoch,
            last_zxid,
        } => {
            buf.put_u8(tag::ACK_EPOCH);
            buf.put_u32(current_epoch.0);
            buf.put_u64(last_zxid.0);
        }
        Message::Diff { last_zxid } => put_u64_body(buf, tag::DIFF, last_zxid.0),
        Message::Trunc { zxid } => put_u64_body(buf, tag::TRUNC, zxid.0),
        Message::Snap { zxid, membership } => {
            put_membership(buf, tag::SNAP, Some(*zxid), membership)
        }
        Message::SnapChunk { data, last } => {
            buf.put_u8(tag::SNAP_CHUNK);
            put_data(buf, data);
            buf.put_u8(u8::from(*last));
        }
        Message::NewLeader { zxid } => put_u64_body(buf, tag::NEW_LEADER, zxid.0),
        Message::UpToDate => buf.put_u8(tag::UP_TO_DATE),
        Message::Proposal(txn) => put_txn(buf, [tag::PROPOSAL, tag::PROPOSAL_MEMBERSHIP], txn),
        Message::Ack { zxid } => put_u64_body(buf, tag::ACK, zxid.0),
        Message::Commit { zxid } => put_u64_body(buf, tag::COMMIT, zxid.0),
        Message::Inform(txn) => put_txn(buf, [tag::INFORM, tag::INFORM_MEMBERSHIP], txn),
        Message::Ping { round } => put_u64_body(buf, tag::PING, *round),
        Message::PingAck { round } => put_u64_body(buf, tag::PING_ACK, *round),
        Message::Request {
            request_id,
            payload,
        } => {
            buf.put_u8(tag::REQUEST);
            buf.put_u64(request_id.0);
            put_data(buf, payload);
        }
        Message::RequestDone {
            request_id,
            outcome,
        } => put_outcome(buf, tag::REQUEST_DONE, *request_id, outcome),
        Message::Sync { request_id } => put_u64_body(buf, tag::SYNC, request_id.0),
        Message::SyncReply {
            request_id,
            outcome,
        } => put_outcome(buf, tag::SYNC_REPLY, *request_id, outcome),
        Message::Transfer { nominee } => put_transfer(buf, nominee),
    }
    Ok(())
}

/// Encodes `msg` into a fresh buffer.
pub fn encode_to_bytes(msg: &Message) -> Result<Bytes, EncodeError> {
    let mut buf = BytesMut::new();
    encode(msg, &mut buf)?;
    Ok(buf.freeze())
}

/// The number of bytes [`encode`] writes for `msg`.
pub fn encoded_len(msg: &Message) -> usize {
    let body = match msg {
        Message::Notification(_) => 8 + 8 + 4 + 8 + 1 + 8,
        Message::Membership(m) => 8 + 4 + m.encode().len(),
        Message::FollowerInfo { .. }
        | Message::ObserverInfo { .. }
        | Message::LeaderInfo { .. } => 4 + 4,
        Message::AckEpoch { .. } => 4 + 8,
        Message::Snap { membership, .. } => 8 + 8 + 4 + membership.encode().len(),
        Message::Diff { .. }
        | Message::Trunc { .. }
        | Message::NewLeader { .. }
        | Message::Ack { .. }
        | Message::Commit { .. }
        | Message::Ping { .. }
        | Message::PingAck { .. }
        | Message::Sync { .. } => 8,
        Message::SnapChunk { data, .. } => 4 + data.len() + 1,
        Message::UpToDate => 0,
        Message::Transfer { .. } => 8 + 8 + 4,
        Message::Proposal(txn) | Message::Inform(txn) => 8 + 4 + txn.data.len(),
        Message::Request { payload, .. } => 8 + 4 + payload.len(),
        Message::RequestDone { outcome, .. } | Message::SyncReply { outcome, .. } => {
            8 + 1
                + match outcome {
                    Ok(_) => 8,
                    Err(RequestError::NotLeader { leader: Some(_) }) => 1 + 8,
                    Err(RequestError::NotLeader { leader: None }) => 1,
                    Err(RequestError::QuorumLost) | Err(RequestError::EpochExhausted) => 0,
                }
        }
    };
    2 + body
}

/// Decodes exactly one message from `bytes`; variable fields are copied out of `bytes`.
pub fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
    let mut r = Reader {
        buf: bytes,
        pos: 0,
        backing: None,
    };
    decode_from(&mut r)
}

/// Decodes exactly one message from `bytes`; variable fields share `bytes`' storage.
pub fn decode_shared(bytes: &Bytes) -> Result<Message, DecodeError> {
    let mut r = Reader {
        buf: bytes,
        pos: 0,
        backing: Some(bytes),
    };
    decode_from(&mut r)
}

fn check_sizes(msg: &Message) -> Result<(), EncodeError> {
    let (field, len) = match msg {
        Message::SnapChunk { data, .. } => ("snap_chunk.data", data.len()),
        Message::Proposal(txn) => ("proposal.data", txn.data.len()),
        Message::Inform(txn) => ("inform.data", txn.data.len()),
        Message::Request { payload, .. } => ("request.payload", payload.len()),
        Message::Membership(m) => ("membership.data", m.encode().len()),
        Message::Snap { membership, .. } => ("snap.membership", membership.encode().len()),
        _ => return Ok(()),
    };
    if len > MAX_DATA_LEN {
        return Err(EncodeError::Oversize {
            field,
            len,
            max: MAX_DATA_LEN,
        });
    }
    Ok(())
}

fn put_u64_body(buf: &mut BytesMut, tag: u8, v: u64) {
    buf.put_u8(tag);
    buf.put_u64(v);
}

fn put_epoch_version(buf: &mut BytesMut, tag: u8, epoch: Epoch, version: u32) {
    buf.put_u8(tag);
    buf.put_u32(epoch.0);
    buf.put_u32(version);
}

/// Callers have checked `data.len() <= MAX_DATA_LEN` (< u32::MAX) in `check_sizes`.
fn put_data(buf: &mut BytesMut, data: &Bytes) {
    buf.put_u32(data.len() as u32);
    buf.put_slice(data);
}

fn put_transfer(buf: &mut BytesMut, nominee: &crate::message::Vote) {
    buf.put_u8(tag::TRANSFER);
    buf.put_u64(nominee.leader.0);
    buf.put_u64(nominee.zxid.0);
    buf.put_u32(nominee.peer_epoch.0);
}

fn put_notification(buf: &mut BytesMut, n: &crate::message::Notification) {
    buf.put_u8(tag::NOTIFICATION);
    buf.put_u64(n.vote.leader.0);
    buf.put_u64(n.vote.zxid.0);
    buf.put_u32(n.vote.peer_epoch.0);
    buf.put_u64(n.round);
    buf.put_u8(election_state_byte(n.state));
    buf.put_u64(n.config_version.0);
}

/// `tag [zxid] version data`: a MEMBERSHIP message, or a SNAP header (which has a zxid).
fn put_membership(
    buf: &mut BytesMut,
    tag: u8,
    zxid: Option<Zxid>,
    m: &crate::membership::Membership,
) {
    buf.put_u8(tag);
    if let Some(z) = zxid {
        buf.put_u64(z.0);
    }
    buf.put_u64(m.version.0);
    put_data(buf, &m.encode());
}

/// `tags` is the message's tag for an application txn and for a configuration txn.
fn put_txn(buf: &mut BytesMut, tags: [u8; 2], txn: &Txn) {
    buf.put_u8(match txn.kind {
        TxnKind::App => tags[0],
        TxnKind::Membership => tags[1],
    });
    buf.put_u64(txn.zxid.0);
    put_data(buf, &txn.data);
}

fn put_outcome(
    buf: &mut BytesMut,
    tag: u8,
    request_id: RequestId,
    outcome: &Result<Zxid, RequestError>,
) {
    buf.put_u8(tag);
    buf.put_u64(request_id.0);
    match outcome {
        Ok(zxid) => {
            buf.put_u8(0);
            buf.put_u64(zxid.0);
        }
        Err(RequestError::NotLeader { leader }) => {
            buf.put_u8(1);
            match leader {
                Some(sid) => {
                    buf.put_u8(1);
                    buf.put_u64(sid.0);
                }
                None => buf.put_u8(0),
            }
        }
        Err(RequestError::QuorumLost) => buf.put_u8(2),
        Err(RequestError::EpochExhausted) => buf.put_u8(3),
    }
}

fn election_state_byte(state: ElectionState) -> u8 {
    match state {
        ElectionState::Looking => 0,
        ElectionState::Following => 1,
        ElectionState::Leading => 2,
        ElectionState::Observing => 3,
        ElectionState::Uninitialized => 4,
    }
}
