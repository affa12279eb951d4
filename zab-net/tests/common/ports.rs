//! Loopback ports for test nodes, chosen below the ephemeral range (32768+).
//!
//! A restarted node binds the ports it had before. Had they come from binding port 0, an
//! outgoing connection made meanwhile (the other nodes reconnect to it all the time) could
//! have been given one of them, and the restart would fail with "address in use". Ports here
//! come from 10100..19900, starting at a point set by the pid, and are taken only when they
//! bind right now.

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU32, Ordering};

use zab_net::transport::PeerAddrs;

const FIRST: u32 = 10_100;
const SPAN: u32 = 9_800;

/// One loopback port that binds now and that no other call of this process returned.
fn free_port() -> SocketAddr {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id().wrapping_mul(4_099);
    for _ in 0..SPAN {
        let offset = start.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed)) % SPAN;
        let Ok(port) = u16::try_from(FIRST + offset) else {
            continue;
        };
        if let Ok(l) = TcpListener::bind(("127.0.0.1", port)) {
            if let Ok(addr) = l.local_addr() {
                return addr;
            }
        }
    }
    panic!("no free loopback port in {FIRST}..{}", FIRST + SPAN);
}

/// A quorum and an election port for one node.
pub fn free_addrs() -> PeerAddrs {
    PeerAddrs {
        quorum: free_port(),
        election: free_port(),
    }
}
