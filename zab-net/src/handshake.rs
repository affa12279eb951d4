//! The first frame of every peer connection, and the acceptor's answer.
//!
//! ```text
//! frame  = len:u32 body[len]                        (len ≤ HANDSHAKE_MAX_LEN)
//! hello  = magic:u32 "ZABN"  version:u16  cluster_id:u64  from:u64  to:u64  channel:u8
//! reply  = magic:u32 "ZABN"  version:u16  status:u8  [code:u8 a:u64 b:u64 when status = 2]
//! status = 0 accepted | 1 connect back (you have the lower sid; I will dial you) | 2 refused
//! channel = 0 election | 1 quorum
//! ```
//!
//! The dialer sends a [`Hello`]; the acceptor reads it, checks it with [`Hello::validate`] and
//! answers with a [`Reply`]. Only after `Accepted` does either side send a message frame
//! ([`crate::frame`]).
//!
//! INV-1: a connection is used only if the acceptor checked magic, version, cluster id, that the
//! caller's sid is a peer it knows at that moment (the set grows at run time as the membership
//! changes, see `transport`) other than itself, that the caller meant this sid, and that the
//! channel matches the port it called; every other hello is refused with a [`Refusal`] that
//! says which check failed (the refusal travels back so both ends can log it).
//! INV-2: reading a handshake never allocates more than [`HANDSHAKE_MAX_LEN`] bytes; the caller
//! bounds the time it waits (see `transport`).

use std::collections::BTreeSet;

use byteorder::{BigEndian, ByteOrder};
use bytes::{BufMut, BytesMut};
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use zab_core::ServerId;

/// "ZABN".
pub const MAGIC: u32 = 0x5A41_424E;
/// The handshake and peer protocol version this build speaks.
pub const HANDSHAKE_VERSION: u16 = 1;
/// The largest handshake frame body accepted.
pub const HANDSHAKE_MAX_LEN: usize = 64;

/// Which of a server's two listeners a connection belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Channel {
    /// Fast leader election notifications.
    Election,
    /// Discovery, sync, broadcast, heartbeats, forwarded requests.
    Quorum,
}

impl Channel {
    /// The channel a message travels on: notifications (and the configuration a member sends
    /// a peer whose notification showed an older one, and a leader's transfer notice, which
    /// is election traffic: the learner closes its quorum channel when it gets it) on election,
    /// everything else on quorum.
    pub fn of(msg: &zab_core::Message) -> Channel {
        match msg {
            zab_core::Message::Notification(_)
            | zab_core::Message::Membership(_)
            | zab_core::Message::Transfer { .. } => Channel::Election,
            _ => Channel::Quorum,
        }
    }

    fn byte(self) -> u8 {
        match self {
            Channel::Election => 0,
            Channel::Quorum => 1,
        }
    }
}

impl std::fmt::Display for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Channel::Election => "election",
            Channel::Quorum => "quorum",
        })
    }
}

/// Why an acceptor refused a hello.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum Refusal {
    /// The versions differ.
    #[error("protocol version {found} is not supported (this build speaks {supported})")]
    BadVersion {
        /// The dialer's version.
        found: u16,
        /// The acceptor's version.
        supported: u16,
    },
    /// The two servers belong to different clusters.
    #[error("cluster mismatch: dialer is in cluster {dialer:#x}, acceptor in {acceptor:#x}")]
    ClusterMismatch {
        /// The dialer's cluster id.
        dialer: u64,
        /// The acceptor's cluster id.
        acceptor: u64,
    },
    /// The dialer's sid is not known to the acceptor (not in any configuration it has been
    /// given since it started).
    #[error("sid {sid} is not a member of this ensemble")]
    UnknownSid {
        /// The dialer's sid.
        sid: u64,
    },
    /// The dialer meant another server (its address book is wrong).
    #[error("dialer addressed sid {addressed}, but this is sid {actual}")]
    WrongTarget {
        /// The sid the dialer wanted.
        addressed: u64,
        /// The acceptor's sid.
        actual: u64,
    },
    /// The dialer asked for one channel on the other channel's port.
    #[error("{requested} channel requested on the {port} port")]
    WrongChannel {
        /// The channel in the hello.
        requested: Channel,
        /// The channel of the port called.
        port: Channel,
    },
    /// A server dialed itself.
    #[error("connection from sid {sid} to itself")]
    SelfConnection {
        /// The sid.
        sid: u64,
    },
}

/// Why a handshake failed. The caller logs it and closes the connection.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The socket failed or closed.
    #[error("i/o error during handshake: {0}")]
    Io(#[from] std::io::Error),
    /// The handshake did not complete in time.
    #[error("handshake timed out")]
    Timeout,
    /// A handshake frame's length is zero or above [`HANDSHAKE_MAX_LEN`].
    #[error("handshake frame length {len} out of range 1..={HANDSHAKE_MAX_LEN}")]
    BadLength {
        /// The declared length.
        len: usize,
    },
    /// Not a ZAB peer.
    #[error("bad magic {found:#010x}: not a zab peer connection")]
    BadMagic {
        /// The first four bytes.
        found: u32,
    },
    /// A handshake frame of the right magic and version did not parse.
    #[error("malformed handshake: {0}")]
    Malformed(&'static str),
    /// The hello failed a check (on the acceptor), or the acceptor refused it (on the dialer).
    #[error("refused: {0}")]
    Refused(#[from] Refusal),
}

/// The dialer's introduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The dialer's cluster id.
    pub cluster_id: u64,
    /// The dialer's sid.
    pub from: ServerId,
    /// The sid the dialer means to reach.
    pub to: ServerId,
    /// The channel the connection is for.
    pub channel: Channel,
}

/// What the acceptor expects of a hello on one of its listeners.
#[derive(Clone, Debug)]
pub struct Expect<'a> {
    /// This server's sid.
    pub me: ServerId,
    /// This server's cluster id.
    pub cluster_id: u64,
    /// Every sid the acceptor knows when the hello arrives (may include `me`).
    pub members: &'a BTreeSet<ServerId>,
    /// The channel of the listener.
    pub channel: Channel,
}

/// The acceptor's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// The connection is established; message frames follow.
    Accepted,
    /// The dialer has the lower sid: the acceptor will dial back, and this connection closes.
    ConnectBack,
    /// The hello failed a check; the connection closes.
    Refused(Refusal),
}

impl Hello {
    /// The hello's frame body.
    pub fn encode(&self) -> BytesMut {
        let mut b = BytesMut::with_capacity(31);
        b.put_u32(MAGIC);
        b.put_u16(HANDSHAKE_VERSION);
        b.put_u64(self.cluster_id);
        b.put_u64(self.from.0);
        b.put_u64(self.to.0);
        b.put_u8(self.channel.byte());
        b
    }

    /// Parses a hello's frame body. Another version is `Err(Refused(BadVersion))`.
    pub fn decode(body: &[u8]) -> Result<Hello, HandshakeError> {
        let mut r = check_header(body)?;
        let hello = Hello {
            cluster_id: r.u64("cluster id")?,
            from: ServerId(r.u64("from sid")?),
            to: ServerId(r.u64("to sid")?),
            channel: match r.u8("channel")? {
                0 => Channel::Election,
                1 => Channel::Quorum,
                _ => return Err(HandshakeError::Malformed("unknown channel")),
            },
        };
        r.end()?;
        Ok(hello)
    }

    /// Checks the hello against what the listener expects (INV-1).
    pub fn validate(&self, expect: &Expect<'_>) -> Result<(), Refusal> {
        if self.cluster_id != expect.cluster_id {
            return Err(Refusal::ClusterMismatch {
                dialer: self.cluster_id,
                acceptor: expect.cluster_id,
            });
        }
        if self.from == expect.me {
            return Err(Refusal::SelfConnection { sid: self.from.0 });
        }
        if !expect.members.contains(&self.from) {
            return Err(Refusal::UnknownSid { sid: self.from.0 });
        }
        if self.to != expect.me {
            return Err(Refusal::WrongTarget {
                addressed: self.to.0,
                actual: expect.me.0,
            });
        }
        if self.channel != expect.channel {
            return Err(Refusal::WrongChannel {
                requested: self.channel,
                port: expect.channel,
            });
        }
        Ok(())
    }
}

impl Reply {
    /// The reply's frame body.
    pub fn encode(&self) -> BytesMut {
        let mut b = BytesMut::with_capacity(24);
        b.put_u32(MAGIC);
        b.put_u16(HANDSHAKE_VERSION);
        match self {
            Reply::Accepted => b.put_u8(0),
            Reply::ConnectBack => b.put_u8(1),
            Reply::Refused(r) => {
                let (code, x, y) = refusal_fields(r);
                b.put_u8(2);
                b.put_u8(code);
                b.put_u64(x);
                b.put_u64(y);
            }
        }
        b
    }

    /// Parses a reply's frame body.
    pub fn decode(body: &[u8]) -> Result<Reply, HandshakeError> {
        let mut r = check_header(body)?;
        let reply = match r.u8("status")? {
            0 => Reply::Accepted,
            1 => Reply::ConnectBack,
            2 => {
                let code = r.u8("refusal code")?;
                let (x, y) = (r.u64("refusal detail")?, r.u64("refusal detail")?);
                Reply::Refused(refusal_from_fields(code, x, y)?)
            }
            _ => return Err(HandshakeError::Malformed("unknown reply status")),
        };
        r.end()?;
        Ok(reply)
    }
}

/// Writes one handshake frame (`len:u32 body`) and flushes.
pub async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, body: &[u8]) -> std::io::Result<()> {
    let mut frame = BytesMut::with_capacity(4 + body.len());
    frame.put_u32(body.len() as u32);
    frame.put_slice(body);
    w.write_all(&frame).await?;
    w.flush().await
}

/// Reads one handshake frame body, refusing lengths outside `1..=HANDSHAKE_MAX_LEN`. Reads
/// exactly the frame, nothing after it.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> Result<Vec<u8>, HandshakeError> {
    let mut prefix = [0u8; 4];
    r.read_exact(&mut prefix).await?;
    let len = BigEndian::read_u32(&prefix) as usize;
    if len == 0 || len > HANDSHAKE_MAX_LEN {
        return Err(HandshakeError::BadLength { len });
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await?;
    Ok(body)
}

fn refusal_fields(r: &Refusal) -> (u8, u64, u64) {
    match *r {
        Refusal::BadVersion { found, supported } => (1, found.into(), supported.into()),
        Refusal::ClusterMismatch { dialer, acceptor } => (2, dialer, acceptor),
        Refusal::UnknownSid { sid } => (3, sid, 0),
        Refusal::WrongTarget { addressed, actual } => (4, addressed, actual),
        Refusal::WrongChannel { requested, port } => {
            (5, requested.byte().into(), port.byte().into())
        }
        Refusal::SelfConnection { sid } => (6, sid, 0),
    }
}

fn refusal_from_fields(code: u8, x: u64, y: u64) -> Result<Refusal, HandshakeError> {
    let channel = |v: u64| match v {
        0 => Ok(Channel::Election),
        1 => Ok(Channel::Quorum),
        _ => Err(HandshakeError::Malformed("unknown channel in refusal")),
    };
    let version =
        |v: u64| u16::try_from(v).map_err(|_| HandshakeError::Malformed("version out of range"));
    Ok(match code {
        1 => Refusal::BadVersion {
            found: version(x)?,
            supported: version(y)?,
        },
        2 => Refusal::ClusterMismatch {
            dialer: x,
            acceptor: y,
        },
        3 => Refusal::UnknownSid { sid: x },
        4 => Refusal::WrongTarget {
            addressed: x,
            actual: y,
        },
        5 => Refusal::WrongChannel {
            requested: channel(x)?,
            port: channel(y)?,
        },
        6 => Refusal::SelfConnection { sid: x },
        _ => return Err(HandshakeError::Malformed("unknown refusal code")),
    })
}

/// Checks magic and version, returning a reader positioned after them.
fn check_header(body: &[u8]) -> Result<Reader<'_>, HandshakeError> {
    let mut r = Reader { buf: body };
    let magic = r.u32("magic")?;
    if magic != MAGIC {
        return Err(HandshakeError::BadMagic { found: magic });
    }
    let version = r.u16("version")?;
    if version != HANDSHAKE_VERSION {
        return Err(Refusal::BadVersion {
            found: version,
            supported: HANDSHAKE_VERSION,
        }
        .into());
    }
    Ok(r)
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], HandshakeError> {
        if self.buf.len() < n {
            return Err(HandshakeError::Malformed(what));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, HandshakeError> {
        self.take(1, what).map(|b| b[0])
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, HandshakeError> {
        self.take(2, what).map(BigEndian::read_u16)
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, HandshakeError> {
        self.take(4, what).map(BigEndian::read_u32)
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, HandshakeError> {
        self.take(8, what).map(BigEndian::read_u64)
    }

    fn end(&self) -> Result<(), HandshakeError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(HandshakeError::Malformed("trailing bytes"))
        }
    }
}

#[cfg(test)]
#[path = "handshake_tests.rs"]
mod tests;
