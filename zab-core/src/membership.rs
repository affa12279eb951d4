//! Membership as replicated state: the configuration is a txn of the history.
//!
//! # The rule
//! A configuration ([`Membership`]) is proposed, logged, synced (DIFF, TRUNC, SNAP) and
//! committed like any txn, as a txn of kind [`TxnKind::Membership`]. Its version is the zxid
//! of the txn that carries it; the bootstrap configuration (zoo.cfg's `server.N` lines of a
//! brand-new cluster) has version 0.
//!
//! - R1 (in force when logged): a peer uses the newest configuration **in its log** — logged,
//!   not necessarily committed — for every quorum, every vote and every election; when a
//!   truncation or a SNAP removes that entry it falls back to the one before. This is Raft's
//!   single-server rule, which ZooKeeper's `lastSeenQuorumVerifier` approximates.
//! - R2 (one voter at a time): a change adds or removes at most one participant; observers
//!   and joining members (who never vote) may come and go with it. Promoting a joining member
//!   to participant is such a change.
//! - R3 (one change in flight): a leader proposes a change only when its log holds no
//!   uncommitted configuration, and only in broadcast, after the NEWLEADER quorum of its own
//!   epoch committed its history (Raft's "commit an entry of your own term first", which
//!   closes the known single-server-change bug with leader changes).
//! - R4 (joint commit): the txn of a change commits only when a quorum of the old **and** a
//!   quorum of the new configuration acked it (each ack meaning durable). R1 and R2 alone are
//!   safe; R4 makes the committed change survive the failure of either side's quorum, as
//!   ZooKeeper's reconfig does.
//! - R5 (learner first): an added follower enters as [`MemberRole::Joining`]: it syncs as a
//!   non-voting learner and counts in no quorum; the leader promotes it (a change of its own,
//!   under R2–R4) only once it is synced and its data durable: it acked NEWLEADER, and with
//!   that ack recorded itself initialized (learner sync INV-8), so a promoted member votes
//!   even if it loses its leader before UPTODATE.
//! - R6 (removal): a removed leader leaves its role once the change committed (after answering
//!   it); a removed learner gets the COMMIT like any follower and leaves. A peer that applied a
//!   configuration without itself goes silent for good (no vote, no notification, no epoch)
//!   and its driver reports it removed; every member drops what a server outside its
//!   configuration in force sends.
//! - R7 (catching up while LOOKING): a notification carries the version of its sender's
//!   committed configuration; a peer that knows a newer committed one answers with it, and a
//!   LOOKING peer adopts a committed configuration newer than its own and elects again under
//!   it. A member that was down while servers were added and removed could otherwise not even
//!   reach the leader those servers elected. Adopting is safe: the configuration is committed
//!   (a quorum of it and of its predecessor hold it), it is what the peer would apply anyway,
//!   and configurations logged after it stay in force as R1 says.
//!
//! # Why quorums overlap (safety of R1–R3)
//! Let C and C' be consecutive configurations whose participants differ by one server s (R2),
//! say C' = C ∪ {s} with |C| = n. A majority Q of C has at least ⌊n/2⌋+1 members; a majority
//! Q' of C' has at least ⌊(n+1)/2⌋+1, so Q' ∖ {s} ⊆ C has at least ⌊(n+1)/2⌋. Together
//! ⌊n/2⌋+1+⌊(n+1)/2⌋ = n+1 > n = |C|, so Q ∩ Q' ≠ ∅. Removal (C' = C ∖ {s}) is the same with
//! the roles swapped. Hence any two decisions taken with C and with C' — a vote tally, an
//! epoch's FOLLOWERINFO/ACKEPOCH/NEWLEADER quorum, a commit — share a voter, exactly as two
//! decisions under one configuration do, and ZAB's arguments (one leader per
//! epoch, the elected leader holds every committed txn) carry over. R3 keeps at most two
//! configurations live at once (the committed one and one logged change), so no chain
//! C → C' → C'' of unrelated quorums can form: C'' is proposed only after C' committed, i.e.
//! after a quorum of C' holds it, and every later leader is elected by a quorum that overlaps
//! that one and therefore holds C' (the newest-history rule of the election).
//!
//! INV-1: a `Membership` always has at least one participant.
//! INV-2: `encode`/`decode` round-trip; `decode` never panics and rejects unknown roles,
//! sids out of ascending order (duplicates included: one encoding per configuration),
//! over-long addresses and trailing bytes.

use std::collections::BTreeMap;
use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};
use thiserror::Error;

use crate::types::{LearnerType, ServerId, Txn, TxnKind, Zxid};

/// The longest address text a member may have.
pub const MAX_ADDRESS_LEN: usize = 1024;

/// What a member does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MemberRole {
    /// Votes and counts toward every quorum.
    Participant,
    /// Learns every committed txn; never votes.
    Observer,
    /// Added as a follower but not yet synced (R5): learns like an observer, never votes,
    /// until the leader promotes it to participant.
    Joining,
}

impl MemberRole {
    /// How the protocol treats this member now.
    pub fn learner_type(self) -> LearnerType {
        match self {
            MemberRole::Participant => LearnerType::Participant,
            MemberRole::Observer | MemberRole::Joining => LearnerType::Observer,
        }
    }

    fn code(self) -> u8 {
        match self {
            MemberRole::Participant => 0,
            MemberRole::Observer => 1,
            MemberRole::Joining => 2,
        }
    }

    fn from_code(code: u8) -> Option<MemberRole> {
        match code {
            0 => Some(MemberRole::Participant),
            1 => Some(MemberRole::Observer),
            2 => Some(MemberRole::Joining),
            _ => None,
        }
    }
}

impl fmt::Display for MemberRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemberRole::Participant => "participant",
            MemberRole::Observer => "observer",
            MemberRole::Joining => "joining",
        })
    }
}

/// One member of a configuration.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Member {
    /// What it does.
    pub role: MemberRole,
    /// How to reach it, as its driver writes it (zab-net: the value of a zoo.cfg `server.N`
    /// line); opaque to the core.
    pub address: String,
}

impl Member {
    /// Whether `data`, a data dir's member, is what this zoo.cfg member says: the same
    /// address and role, where a follower still joining (R5) is what its `server.N` line
    /// (a participant) says, since zoo.cfg cannot say "joining".
    fn written_alike(&self, data: &Member) -> bool {
        self.address == data.address
            && (self.role == data.role
                || (self.role == MemberRole::Participant && data.role == MemberRole::Joining))
    }
}

/// A configuration: every member and its version.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Membership {
    /// The zxid of the txn that carries it; `Zxid::ZERO` for the bootstrap configuration.
    pub version: Zxid,
    /// Every member by sid.
    pub members: BTreeMap<ServerId, Member>,
}

/// A change an operator asks for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MembershipChange {
    /// Add `sid`: a participant enters as [`MemberRole::Joining`] (R5), an observer as an
    /// observer.
    Add {
        /// The new member's id.
        sid: ServerId,
        /// Participant or observer.
        learner_type: LearnerType,
        /// Its address text.
        address: String,
    },
    /// Remove `sid`, whatever its role.
    Remove {
        /// The member to remove.
        sid: ServerId,
    },
    /// Make the joining member `sid` a participant (proposed by the leader itself, R5).
    Promote {
        /// The joining member.
        sid: ServerId,
    },
}

/// Why a change was refused or did not commit.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Error)]
pub enum MembershipError {
    /// This server is not the leader.
    #[error("not the leader (leader: {})", leader.map_or("unknown".to_string(), |l| l.to_string()))]
    NotLeader {
        /// The leader this server believes in, if any.
        leader: Option<ServerId>,
    },
    /// Another change is proposed and not committed yet (R3).
    #[error("another membership change (version {0}) is not committed yet; retry when it is")]
    ChangeInFlight(Zxid),
    /// The change makes no sense for the current configuration.
    #[error("{0}")]
    Invalid(String),
    /// The leader lost its quorum before the change committed; it may still commit.
    #[error("the leader lost its quorum; the change may or may not commit")]
    QuorumLost,
    /// The zxid counter of this epoch is exhausted; a new election is under way.
    #[error("the epoch's zxid counter is exhausted")]
    EpochExhausted,
}

/// A configuration txn that does not decode.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("membership at {zxid} does not decode: {reason}")]
pub struct MembershipDecodeError {
    /// The txn's zxid.
    pub zxid: Zxid,
    /// What is wrong.
    pub reason: String,
}

const ENCODING_VERSION: u8 = 1;

impl Membership {
    /// The bootstrap configuration from static member lists.
    pub fn bootstrap(
        types: &BTreeMap<ServerId, LearnerType>,
        addresses: &BTreeMap<ServerId, String>,
    ) -> Membership {
        let members = types
            .iter()
            .map(|(sid, t)| {
                let role = match t {
                    LearnerType::Participant => MemberRole::Participant,
                    LearnerType::Observer => MemberRole::Observer,
                };
                let address = addresses.get(sid).cloned().unwrap_or_default();
                (*sid, Member { role, address })
            })
            .collect();
        Membership {
            version: Zxid::ZERO,
            members,
        }
    }

    /// How the protocol treats each member now (joining members as observers).
    pub fn learner_types(&self) -> BTreeMap<ServerId, LearnerType> {
        self.members
            .iter()
            .map(|(sid, m)| (*sid, m.role.learner_type()))
            .collect()
    }

    /// The role of `sid`, if it is a member.
    pub fn role_of(&self, sid: ServerId) -> Option<MemberRole> {
        self.members.get(&sid).map(|m| m.role)
    }

    /// The participants' ids.
    pub fn participants(&self) -> impl Iterator<Item = ServerId> + '_ {
        self.members
            .iter()
            .filter(|(_, m)| m.role == MemberRole::Participant)
            .map(|(sid, _)| *sid)
    }

    /// The configuration `change` leads to (version left at the current one; the txn that
    /// carries it sets it), or why it is refused (R2, INV-1).
    pub fn changed(&self, change: &MembershipChange) -> Result<Membership, MembershipError> {
        let invalid = |m: String| Err(MembershipError::Invalid(m));
        let mut next = self.clone();
        match change {
            MembershipChange::Add {
                sid,
                learner_type,
                address,
            } => {
                if self.members.contains_key(sid) {
                    return invalid(format!("server {sid} is already a member"));
                }
                if address.len() > MAX_ADDRESS_LEN {
                    return invalid(format!(
                        "the address of server {sid} is longer than {MAX_ADDRESS_LEN} bytes"
                    ));
                }
                if let Some((other, _)) = self
                    .members
                    .iter()
                    .find(|(_, m)| !address.is_empty() && m.address == *address)
                {
                    return invalid(format!("server {other} already has the address {address}"));
                }
                let role = match learner_type {
                    LearnerType::Participant => MemberRole::Joining,
                    LearnerType::Observer => MemberRole::Observer,
                };
                next.members.insert(
                    *sid,
                    Member {
                        role,
                        address: address.clone(),
                    },
                );
            }
            MembershipChange::Remove { sid } => {
                if next.members.remove(sid).is_none() {
                    return invalid(format!("server {sid} is not a member"));
                }
                if next.participants().next().is_none() {
                    return invalid(format!(
                        "server {sid} is the last participant; a configuration needs one"
                    ));
                }
            }
            MembershipChange::Promote { sid } => match next.members.get_mut(sid) {
                Some(m) if m.role == MemberRole::Joining => m.role = MemberRole::Participant,
                Some(m) => return invalid(format!("server {sid} is a {}, not joining", m.role)),
                None => return invalid(format!("server {sid} is not a member")),
            },
        }
        Ok(next)
    }

    /// The txn that carries this configuration at `zxid`.
    pub fn to_txn(&self, zxid: Zxid) -> Txn {
        Txn {
            zxid,
            data: self.encode(),
            kind: TxnKind::Membership,
        }
    }

    /// The configuration a txn of kind `Membership` carries.
    pub fn from_txn(txn: &Txn) -> Result<Membership, MembershipDecodeError> {
        Membership::decode(txn.zxid, &txn.data)
    }

    /// `version:u8 count:u32 (sid:u64 role:u8 len:u16 address[len])*`, big-endian; the
    /// configuration's own version is not encoded (it is the carrying txn's zxid).
    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::new();
        buf.put_u8(ENCODING_VERSION);
        buf.put_u32(self.members.len() as u32);
        for (sid, m) in &self.members {
            buf.put_u64(sid.0);
            buf.put_u8(m.role.code());
            let address = &m.address.as_bytes()[..m.address.len().min(MAX_ADDRESS_LEN)];
            buf.put_u16(address.len() as u16);
            buf.put_slice(address);
        }
        buf.freeze()
    }

    /// Decodes what [`Membership::encode`] wrote; `version` becomes the configuration's
    /// version (INV-2).
    pub fn decode(version: Zxid, bytes: &[u8]) -> Result<Membership, MembershipDecodeError> {
        let fail = |reason: String| MembershipDecodeError {
            zxid: version,
            reason,
        };
        let mut r = bytes;
        let mut take = |n: usize, what: &str| -> Result<&[u8], MembershipDecodeError> {
            if r.len() < n {
                return Err(fail(format!("{what}: {n} bytes needed, {} left", r.len())));
            }
            let (head, tail) = r.split_at(n);
            r = tail;
            Ok(head)
        };
        let encoding = take(1, "encoding version")?[0];
        if encoding != ENCODING_VERSION {
            return Err(fail(format!("unknown encoding version {encoding}")));
        }
        let count = u32::from_be_bytes(take(4, "member count")?.try_into().unwrap_or([0; 4]));
        let mut members = BTreeMap::new();
        for _ in 0..count {
            let sid = u64::from_be_bytes(take(8, "sid")?.try_into().unwrap_or([0; 8]));
            let code = take(1, "role")?[0];
            let role = MemberRole::from_code(code)
                .ok_or_else(|| fail(format!("server {sid}: unknown role {code}")))?;
            let len = u16::from_be_bytes(take(2, "address length")?.try_into().unwrap_or([0; 2]));
            if usize::from(len) > MAX_ADDRESS_LEN {
                return Err(fail(format!("server {sid}: address of {len} bytes")));
            }
            let address = std::str::from_utf8(take(usize::from(len), "address")?)
                .map_err(|_| fail(format!("server {sid}: address is not UTF-8")))?
                .to_string();
            if members
                .last_key_value()
                .is_some_and(|(last, _): (&ServerId, _)| last.0 >= sid)
            {
                return Err(fail(format!(
                    "server {sid} is out of order: members are encoded by ascending sid, once"
                )));
            }
            members.insert(ServerId(sid), Member { role, address });
        }
        if !r.is_empty() {
            return Err(fail(format!("{} bytes after the last member", r.len())));
        }
        let m = Membership { version, members };
        if m.participants().next().is_none() {
            return Err(fail("no participant".into()));
        }
        Ok(m)
    }
}

impl Membership {
    /// Where this configuration (zoo.cfg's, say) and `data` (a data dir's) differ, in words:
    /// the servers only in one of them, and those whose role or address differs; `None` when
    /// they agree.
    pub fn differences(&self, data: &Membership) -> Option<String> {
        let only_in = |a: &Membership, b: &Membership| -> Vec<u64> {
            a.members
                .keys()
                .filter(|s| !b.members.contains_key(s))
                .map(|s| s.0)
                .collect()
        };
        let changed: Vec<u64> = self
            .members
            .iter()
            .filter(|(s, m)| data.members.get(s).is_some_and(|d| !m.written_alike(d)))
            .map(|(s, _)| s.0)
            .collect();
        let parts: Vec<String> = [
            ("only in zoo.cfg", only_in(self, data)),
            ("only in the data dir", only_in(data, self)),
            ("role or address differs", changed),
        ]
        .into_iter()
        .filter(|(_, sids)| !sids.is_empty())
        .map(|(what, sids)| format!("{what}: {sids:?}"))
        .collect();
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

impl fmt::Display for Membership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "version {}:", self.version)?;
        for (sid, m) in &self.members {
            write!(f, " {sid}={}", m.role)?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "membership_tests.rs"]
mod tests;
