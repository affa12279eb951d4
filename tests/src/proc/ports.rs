//! Per-cluster blocks of loopback ports below the ephemeral range (32768+).
//!
//! A block is [`BLOCK_LEN`] consecutive ports in 20000..32000; its index comes from a
//! process-wide counter plus the pid, so the tests of one binary never share a block and two
//! binaries rarely do. A block is taken only if every port binds right now (bind, then drop);
//! ports are never obtained by binding port 0, whose number a concurrent outgoing connection
//! can take over.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

use super::ProcError;

/// Ports per block: 3 per node (client, quorum, election) for up to 8 nodes.
pub const BLOCK_LEN: u16 = 24;
const FIRST: u16 = 20_000;
const BLOCKS: u32 = 12_000 / BLOCK_LEN as u32;

/// The first port of a free block.
pub fn free_block() -> Result<u16, ProcError> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let salt = std::process::id().wrapping_mul(7919);
    for _ in 0..BLOCKS {
        let i = salt.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed)) % BLOCKS;
        // i < BLOCKS = 500, so the block starts below 32000.
        let base = FIRST + (i as u16) * BLOCK_LEN;
        let all_free =
            (base..base + BLOCK_LEN).all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok());
        if all_free {
            return Ok(base);
        }
    }
    Err(ProcError::NoPorts)
}
