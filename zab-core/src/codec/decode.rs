//! Decoding: a bounds-checked reader and one match over the tags (see the grammar in the
//! parent module). Every read names its field, so errors say what was cut or wrong.

use byteorder::{BigEndian, ByteOrder};
use bytes::Bytes;

use super::{tag, DecodeError, FORMAT_VERSION, MAX_DATA_LEN};
use crate::membership::Membership;
use crate::message::{ElectionState, Message, Notification, RequestError, Vote};
use crate::types::{Epoch, RequestId, ServerId, Txn, TxnKind, Zxid};

/// A bounds-checked cursor over the input. Every read names its field for the error.
pub(super) struct Reader<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
    /// When set, `buf` is this `Bytes` and data fields are sliced from it instead of copied.
    pub(super) backing: Option<&'a Bytes>,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    fn take(&mut self, field: &'static str, n: usize) -> Result<&'a [u8], DecodeError> {
        let remaining = self.remaining();
        if n > remaining {
            return Err(DecodeError::Truncated {
                field,
                needed: n,
                remaining,
            });
        }
        let start = self.pos;
        self.pos += n;
        self.buf.get(start..self.pos).ok_or(DecodeError::Truncated {
            field,
            needed: n,
            remaining,
        })
    }

    fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(field, 1)?[0])
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        Ok(BigEndian::read_u32(self.take(field, 4)?))
    }

    fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        Ok(BigEndian::read_u64(self.take(field, 8)?))
    }

    fn zxid(&mut self, field: &'static str) -> Result<Zxid, DecodeError> {
        self.u64(field).map(Zxid)
    }

    fn epoch(&mut self, field: &'static str) -> Result<Epoch, DecodeError> {
        self.u32(field).map(Epoch)
    }

    fn bool(&mut self, field: &'static str) -> Result<bool, DecodeError> {
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(DecodeError::InvalidValue { field, value }),
        }
    }

    fn data(&mut self, field: &'static str) -> Result<Bytes, DecodeError> {
        let len = self.u32(field)?;
        if len as usize > MAX_DATA_LEN {
            return Err(DecodeError::Oversize {
                field,
                len: u64::from(len),
                max: MAX_DATA_LEN,
            });
        }
        let start = self.pos;
        let slice = self.take(field, len as usize)?;
        Ok(match self.backing {
            Some(b) => b.slice(start..start + slice.len()),
            None => Bytes::copy_from_slice(slice),
        })
    }

    /// `membership_version:u64 membership:bytes` of a SNAP.
    fn membership(&mut self) -> Result<Membership, DecodeError> {
        let version = self.zxid("snap.membership_version")?;
        self.membership_body(version, "snap.membership")
    }

    /// `membership:bytes` of a configuration at `version`.
    fn membership_body(
        &mut self,
        version: Zxid,
        field: &'static str,
    ) -> Result<Membership, DecodeError> {
        let bytes = self.data(field)?;
        Membership::decode(version, &bytes).map_err(|e| DecodeError::BadMembership {
            reason: e.to_string(),
        })
    }

    /// `zxid:u64 data:bytes` of a PROPOSAL or INFORM (`what`), whose tag said the kind.
    fn txn(&mut self, kind: TxnKind, what: &'static str) -> Result<Txn, DecodeError> {
        let (zxid_field, data_field) = match what {
            "proposal" => ("proposal.zxid", "proposal.data"),
            _ => ("inform.zxid", "inform.data"),
        };
        Ok(Txn {
            zxid: self.zxid(zxid_field)?,
            data: self.data(data_field)?,
            kind,
        })
    }

    fn outcome(&mut self, field: &'static str) -> Result<Result<Zxid, RequestError>, DecodeError> {
        Ok(match self.u8(field)? {
            0 => Ok(self.zxid(field)?),
            1 => {
                let leader = match self.u8("not_leader.has_leader")? {
                    0 => None,
                    1 => Some(ServerId(self.u64("not_leader.leader")?)),
                    value => {
                        return Err(DecodeError::InvalidValue {
                            field: "not_leader.has_leader",
                            value,
                        })
                    }
                };
                Err(RequestError::NotLeader { leader })
            }
            2 => Err(RequestError::QuorumLost),
            3 => Err(RequestError::EpochExhausted),
            value => return Err(DecodeError::InvalidValue { field, value }),
        })
    }
}

pub(super) fn decode_from(r: &mut Reader<'_>) -> Result<Message, DecodeError> {
    let version = r.u8("version")?;
    if version != FORMAT_VERSION {
        return Err(DecodeError::BadVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let msg = decode_body(r)?;
    match r.remaining() {
        0 => Ok(msg),
        count => Err(DecodeError::TrailingBytes { count }),
    }
}

fn decode_body(r: &mut Reader<'_>) -> Result<Message, DecodeError> {
    let tag = r.u8("tag")?;
    let msg = match tag {
        tag::NOTIFICATION => {
            let vote = Vote {
                leader: ServerId(r.u64("notification.leader")?),
                zxid: r.zxid("notification.zxid")?,
                peer_epoch: r.epoch("notification.peer_epoch")?,
            };
            let round = r.u64("notification.round")?;
            let state = match r.u8("notification.state")? {
                0 => ElectionState::Looking,
                1 => ElectionState::Following,
                2 => ElectionState::Leading,
                3 => ElectionState::Observing,
                4 => ElectionState::Uninitialized,
                value => {
                    return Err(DecodeError::InvalidValue {
                        field: "notification.state",
                        value,
                    })
                }
            };
            let config_version = r.zxid("notification.config_version")?;
            Message::Notification(Notification {
                vote,
                round,
                state,
                config_version,
            })
        }
        tag::MEMBERSHIP => {
            let version = r.zxid("membership.version")?;
            Message::Membership(r.membership_body(version, "membership.data")?)
        }
        tag::FOLLOWER_INFO => Message::FollowerInfo {
            accepted_epoch: r.epoch("follower_info.accepted_epoch")?,
            protocol_version: r.u32("follower_info.protocol_version")?,
        },
        tag::OBSERVER_INFO => Message::ObserverInfo {
            accepted_epoch: r.epoch("observer_info.accepted_epoch")?,
            protocol_version: r.u32("observer_info.protocol_version")?,
        },
        tag::LEADER_INFO => Message::LeaderInfo {
            new_epoch: r.epoch("leader_info.new_epoch")?,
            protocol_version: r.u32("leader_info.protocol_version")?,
        },
        tag::ACK_EPOCH => Message::AckEpoch {
            current_epoch: r.epoch("ack_epoch.current_epoch")?,
            last_zxid: r.zxid("ack_epoch.last_zxid")?,
        },
        tag::DIFF => Message::Diff {
            last_zxid: r.zxid("diff.last_zxid")?,
        },
        tag::TRUNC => Message::Trunc {
            zxid: r.zxid("trunc.zxid")?,
        },
        tag::SNAP => Message::Snap {
            zxid: r.zxid("snap.zxid")?,
            membership: r.membership()?,
        },
        tag::SNAP_CHUNK => Message::SnapChunk {
            data: r.data("snap_chunk.data")?,
            last: r.bool("snap_chunk.last")?,
        },
        tag::NEW_LEADER => Message::NewLeader {
            zxid: r.zxid("new_leader.zxid")?,
        },
        tag::UP_TO_DATE => Message::UpToDate,
        tag::PROPOSAL => Message::Proposal(r.txn(TxnKind::App, "proposal")?),
        tag::PROPOSAL_MEMBERSHIP => Message::Proposal(r.txn(TxnKind::Membership, "proposal")?),
        tag::ACK => Message::Ack {
            zxid: r.zxid("ack.zxid")?,
        },
        tag::COMMIT => Message::Commit {
            zxid: r.zxid("commit.zxid")?,
        },
        tag::INFORM => Message::Inform(r.txn(TxnKind::App, "inform")?),
        tag::INFORM_MEMBERSHIP => Message::Inform(r.txn(TxnKind::Membership, "inform")?),
        tag::PING => Message::Ping {
            round: r.u64("ping.round")?,
        },
        tag::PING_ACK => Message::PingAck {
            round: r.u64("ping_ack.round")?,
        },
        tag::REQUEST => Message::Request {
            request_id: RequestId(r.u64("request.request_id")?),
            payload: r.data("request.payload")?,
        },
        tag::REQUEST_DONE => Message::RequestDone {
            request_id: RequestId(r.u64("request_done.request_id")?),
            outcome: r.outcome("request_done.outcome")?,
        },
        tag::SYNC => Message::Sync {
            request_id: RequestId(r.u64("sync.request_id")?),
        },
        tag::SYNC_REPLY => Message::SyncReply {
            request_id: RequestId(r.u64("sync_reply.request_id")?),
            outcome: r.outcome("sync_reply.outcome")?,
        },
        tag::TRANSFER => Message::Transfer {
            nominee: Vote {
                leader: ServerId(r.u64("transfer.leader")?),
                zxid: r.zxid("transfer.zxid")?,
                peer_epoch: r.epoch("transfer.peer_epoch")?,
            },
        },
        tag => return Err(DecodeError::UnknownTag { tag }),
    };
    Ok(msg)
}
