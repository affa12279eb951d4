//! Fault tests on real `fe-meta server` processes (DESIGN §7), on the harness of
//! `tests::proc`: kill -9 of the leader and of a follower, a diverged old leader, wiped and
//! lagging followers that need a SNAP, a majority down, a frozen leader, and a write that timed
//! out at a frozen node (it must never land after a later write of the same client).
//!
//! Every test ends with the shared checks of `ProcCluster::finish` and prints its measured
//! times as one `RECOVERY scenario=<name> ...` line (run with `-- --nocapture`). Clusters run
//! one at a time (the harness's slot), so the binary stays within a few minutes on 2 cores.
//!
//! Needs the `fe-meta` binary: `cargo build --release -p fe-meta-cli` (the workspace's
//! `cargo test --release` builds it) or `FE_META_BIN`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod process {
    pub mod leader;
    pub mod quorum;
    pub mod sessions;
    pub mod sync_modes;
    pub mod threads;
}

use std::time::{Duration, Instant};

use fe_meta::client::{ClientError, Written};
use tests::proc::ProcCluster;

/// The epoch of a journal id (zxid).
pub fn epoch_of(journal_id: u64) -> u64 {
    u64::from(fe_meta::Zxid(journal_id).epoch().0)
}

/// Milliseconds of `d`, for RECOVERY lines.
pub fn ms(d: Duration) -> u128 {
    d.as_millis()
}

/// `SET_VAR name = value` through node `sid`, retried (new connection, 50 ms apart) until
/// acknowledged or `within` passes; the acknowledged write goes into the ledger.
pub async fn write_ok(
    c: &ProcCluster,
    sid: u64,
    name: &str,
    value: &str,
    within: Duration,
) -> Result<Written, ClientError> {
    let start = Instant::now();
    loop {
        let r = match c.client(sid, None).await {
            Ok(client) => client.set_var(name, value).await,
            Err(e) => Err(e),
        };
        match r {
            Ok(w) => {
                c.ledger().record(name, value, w.journal_id.0);
                return Ok(w);
            }
            Err(e) if start.elapsed() >= within => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Some node other than `not`.
pub fn other_than(c: &ProcCluster, not: &[u64]) -> u64 {
    *c.sids()
        .iter()
        .find(|s| !not.contains(s))
        .expect("a node left")
}
