//! Where peers listen ([`PeerAddrs`]) and how a transport runs ([`TransportConfig`]), from a
//! zoo.cfg or built by hand.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use zab_core::ServerId;

use super::{Channel, NetError};
use crate::config::{NodeConfig, ServerAddr};
use crate::metrics::PeerMetrics;
use crate::tls::PeerTls;

/// Where a peer listens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerAddrs {
    /// Its quorum port.
    pub quorum: SocketAddr,
    /// Its election port.
    pub election: SocketAddr,
}

impl PeerAddrs {
    /// An address not known yet (port 0): links to it do not dial until
    /// [`Transport::set_peer_addrs`](super::Transport::set_peer_addrs) names a real one.
    pub const UNKNOWN: PeerAddrs = PeerAddrs {
        quorum: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
        election: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
    };

    /// Resolves a `server.N` value's two addresses (a DNS lookup for host names; this blocks).
    pub fn resolve(server: &ServerAddr) -> std::io::Result<PeerAddrs> {
        Ok(PeerAddrs {
            quorum: server.quorum_socket_addr()?,
            election: server.election_socket_addr()?,
        })
    }

    /// False for [`PeerAddrs::UNKNOWN`] (or any address with port 0): nothing to dial.
    pub fn is_known(&self) -> bool {
        self.quorum.port() != 0 && self.election.port() != 0
    }

    /// The address of one channel.
    pub fn of(&self, channel: Channel) -> SocketAddr {
        match channel {
            Channel::Quorum => self.quorum,
            Channel::Election => self.election,
        }
    }
}

/// How a transport runs.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TransportConfig {
    /// This server's sid.
    pub sid: ServerId,
    /// The cluster id every peer must present.
    pub cluster_id: u64,
    /// Where to listen (port 0 picks one; see [`Transport::local_addrs`](super::Transport::local_addrs)).
    pub listen: PeerAddrs,
    /// Every other member of the ensemble (observers included) and where it listens, at start;
    /// [`Transport::set_peers`](super::Transport::set_peers) changes the set at run time.
    pub peers: BTreeMap<ServerId, PeerAddrs>,
    /// Capacity of each link's outbox, in messages.
    pub outbox_len: usize,
    /// Capacity of the inbound event channel.
    pub inbound_len: usize,
    /// The largest frame body read or written.
    pub max_frame_len: usize,
    /// First retry delay after a failed dial.
    pub backoff_min: Duration,
    /// Cap of the retry delay.
    pub backoff_max: Duration,
    /// Limit on one TCP connect.
    pub connect_timeout: Duration,
    /// Limit on one handshake (hello and reply).
    pub handshake_timeout: Duration,
    /// Mutual TLS on both ports (`sslQuorum=true`); `None`: plain TCP.
    pub tls: Option<PeerTls>,
    /// Each peer's `server.N` host, which its TLS certificate must name (a peer missing here
    /// must name the IP it is reached at).
    pub hosts: BTreeMap<ServerId, String>,
    /// Where refusals are counted besides [`TransportStats`](super::TransportStats).
    pub metrics: Option<PeerMetrics>,
    /// How long a lower sid waits to be called back after `ConnectBack`. Also the age below
    /// which an established connection ignores a call-back request (see `link`).
    pub connect_back_wait: Duration,
}

impl TransportConfig {
    /// A configuration with default limits.
    pub fn new(
        sid: ServerId,
        cluster_id: u64,
        listen: PeerAddrs,
        peers: BTreeMap<ServerId, PeerAddrs>,
    ) -> TransportConfig {
        TransportConfig {
            sid,
            cluster_id,
            listen,
            peers,
            outbox_len: 4096,
            inbound_len: 4096,
            max_frame_len: zab_core::codec::MAX_MESSAGE_LEN,
            backoff_min: Duration::from_millis(50),
            backoff_max: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(3),
            handshake_timeout: Duration::from_secs(3),
            connect_back_wait: Duration::from_secs(1),
            tls: None,
            hosts: BTreeMap::new(),
            metrics: None,
        }
    }

    /// The transport of server `sid` of a zoo.cfg: it listens on its own `server.N` ports.
    /// Host names are resolved here (this blocks), and the TLS files of `sslQuorum=true` read
    /// ([`NetError::Tls`] names the key and the file that do not work).
    pub fn from_node(
        cfg: &NodeConfig,
        sid: ServerId,
        cluster_id: u64,
    ) -> Result<TransportConfig, NetError> {
        let mut all = BTreeMap::new();
        for (id, s) in &cfg.servers {
            let addrs =
                PeerAddrs::resolve(s).map_err(|source| NetError::Resolve { sid: *id, source })?;
            all.insert(*id, addrs);
        }
        let listen = all.remove(&sid).ok_or(NetError::NotAMember { sid })?;
        let mut t = TransportConfig::new(sid, cluster_id, listen, all);
        t.hosts = cfg
            .servers
            .iter()
            .filter(|(id, _)| **id != sid)
            .map(|(id, s)| (*id, s.host.clone()))
            .collect();
        if let Some(q) = &cfg.tls.quorum {
            t.tls = Some(PeerTls::load(q)?);
        }
        Ok(t)
    }
}
