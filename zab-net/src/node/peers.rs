//! Where the transport reaches each member of the configuration in force. Each member's
//! address is the text of its zoo.cfg `server.N` value (`zab_core::Member::address`); the
//! driver turns it into socket addresses whenever the configuration in force changes, and
//! hands the whole set to the transport.
//!
//! INV-1: an address given at run time ([`crate::NodeOptions::peer_addrs`],
//! [`crate::Node::set_peer_addrs`]) wins over the configuration's text for that sid: a node on
//! ports chosen by the OS is reached where it really listens.
//! INV-2: an address that does not parse or resolve is logged and that member skipped (the
//! transport keeps what it had); it never stops the node.
//! INV-3: this node itself is never a peer.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use tracing::warn;
use zab_core::{Membership, ServerId};

use crate::config::ServerAddr;
use crate::transport::PeerAddrs;

/// The addresses given at run time, and this node's sid.
#[derive(Debug)]
pub(super) struct PeerBook {
    sid: ServerId,
    overrides: BTreeMap<ServerId, PeerAddrs>,
}

impl PeerBook {
    /// A book for server `sid` with the run-time addresses of `overrides` (INV-1).
    pub(super) fn new(sid: ServerId, overrides: BTreeMap<ServerId, PeerAddrs>) -> PeerBook {
        PeerBook { sid, overrides }
    }

    /// `peer` listens at `addrs` from now on (INV-1).
    pub(super) fn set_override(&mut self, peer: ServerId, addrs: PeerAddrs) {
        self.overrides.insert(peer, addrs);
    }

    /// Where to reach every member of `membership` but this node (INV-1..3). Resolves host
    /// names (asynchronously).
    pub(super) async fn peers_of(&self, membership: &Membership) -> BTreeMap<ServerId, PeerAddrs> {
        let mut peers = BTreeMap::new();
        for (sid, member) in &membership.members {
            if *sid == self.sid {
                continue;
            }
            if let Some(addrs) = self.overrides.get(sid) {
                peers.insert(*sid, *addrs);
                continue;
            }
            match resolve(&member.address).await {
                Ok(addrs) => {
                    peers.insert(*sid, addrs);
                }
                Err(why) => warn!(
                    peer = sid.0,
                    address = %member.address,
                    "member of the configuration {} skipped: {why}",
                    membership.version
                ),
            }
        }
        peers
    }
}

/// The socket addresses of a `server.N` value (INV-2).
async fn resolve(text: &str) -> Result<PeerAddrs, String> {
    let addr = ServerAddr::parse_value(text).map_err(|e| format!("bad address: {e}"))?;
    Ok(PeerAddrs {
        quorum: lookup(&addr.quorum_endpoint()).await?,
        election: lookup(&addr.election_endpoint()).await?,
    })
}

async fn lookup(endpoint: &str) -> Result<SocketAddr, String> {
    tokio::net::lookup_host(endpoint)
        .await
        .map_err(|e| format!("cannot resolve {endpoint}: {e}"))?
        .next()
        .ok_or_else(|| format!("{endpoint} resolves to no address"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use std::net::{IpAddr, Ipv4Addr};

    use zab_core::{Member, MemberRole, Zxid};

    use super::*;

    fn membership(addresses: &[(u64, &str)]) -> Membership {
        let members = addresses
            .iter()
            .map(|(sid, a)| {
                let m = Member {
                    role: MemberRole::Participant,
                    address: (*a).to_string(),
                };
                (ServerId(*sid), m)
            })
            .collect();
        Membership {
            version: Zxid(7),
            members,
        }
    }

    fn local(port: u16) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)
    }

    #[tokio::test]
    async fn members_are_parsed_overridden_and_bad_ones_skipped() {
        let m = membership(&[
            (1, "127.0.0.1:2001:3001"),
            (2, "127.0.0.1:2002:3002;2182"),
            (3, "127.0.0.1:2003:3003:observer"),
            (4, "not an address"),
            (5, "127.0.0.1:99999:3005"),
        ]);
        let run_time = PeerAddrs {
            quorum: local(40_003),
            election: local(40_004),
        };
        let mut book = PeerBook::new(ServerId(1), BTreeMap::new());
        book.set_override(ServerId(3), run_time);
        let peers = book.peers_of(&m).await;
        assert_eq!(peers.keys().map(|s| s.0).collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(peers[&ServerId(2)].quorum, local(2002));
        assert_eq!(peers[&ServerId(2)].election, local(3002));
        assert_eq!(peers[&ServerId(3)], run_time);
    }
}
