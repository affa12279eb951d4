//! Identifiers of the protocol: server ids, epochs, zxids, transactions.
//!
//! INV-1: a [`Zxid`] orders first by epoch (high 32 bits), then by counter (low 32 bits), which
//! is exactly the order of the `u64` it wraps.
//! INV-2: counter 0 of an epoch never names a transaction; `Zxid::new(e, 0)` is the zxid a
//! leader of epoch `e` starts from (and the zxid carried by NEWLEADER).

use std::fmt;

use bytes::Bytes;

/// The id of a server, `N` of `server.N` in zoo.cfg.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ServerId(pub u64);

impl fmt::Display for ServerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A ZAB epoch: the term of one established leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Epoch(pub u32);

impl Epoch {
    /// The epoch after this one, or `None` when the 32-bit space is exhausted.
    pub fn next(self) -> Option<Epoch> {
        self.0.checked_add(1).map(Epoch)
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// A transaction id: epoch in the high 32 bits, a per-epoch counter in the low 32 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Zxid(pub u64);

impl Zxid {
    /// The zxid before any transaction.
    pub const ZERO: Zxid = Zxid(0);

    /// Builds a zxid from its epoch and counter.
    pub fn new(epoch: Epoch, counter: u32) -> Zxid {
        Zxid((u64::from(epoch.0) << 32) | u64::from(counter))
    }

    /// The epoch part.
    pub fn epoch(self) -> Epoch {
        Epoch((self.0 >> 32) as u32)
    }

    /// The counter part.
    pub fn counter(self) -> u32 {
        (self.0 & 0xffff_ffff) as u32
    }
}

impl fmt::Display for Zxid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// What a txn carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum TxnKind {
    /// The state machine's operation, opaque to the protocol.
    #[default]
    App,
    /// A configuration (`crate::membership`), read by the protocol itself.
    Membership,
}

/// One transaction of the replicated log: its zxid, its kind and its payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Txn {
    /// Position in the total order.
    pub zxid: Zxid,
    /// The payload: the state machine's operation, or an encoded configuration.
    pub data: Bytes,
    /// Which of the two `data` is.
    pub kind: TxnKind,
}

impl Txn {
    /// A txn carrying a state machine operation.
    pub fn app(zxid: Zxid, data: Bytes) -> Txn {
        Txn {
            zxid,
            data,
            kind: TxnKind::App,
        }
    }
}

/// A client request id, unique among the requests submitted on one server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RequestId(pub u64);

/// Whether a member votes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LearnerType {
    /// Votes in elections and counts toward every quorum.
    Participant,
    /// Receives every committed txn, never votes, never counts toward a quorum.
    Observer,
}

/// The role a peer plays right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Electing a leader.
    Looking,
    /// A participant learning from the leader.
    Following,
    /// The leader.
    Leading,
    /// An observer learning from the leader.
    Observing,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Looking => "looking",
            Role::Following => "follower",
            Role::Leading => "leader",
            Role::Observing => "observer",
        })
    }
}
