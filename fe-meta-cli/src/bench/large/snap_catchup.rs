//! SNAP catch-up with the large catalog (W5's measure, made to need a SNAP): SIGTERM a
//! follower, overwrite a few variables with large values until the leader's txn log since
//! then outweighs [`SNAP_SHARE`] of its newest snapshot image (the leader turns a DIFF above
//! `snapshotSizeFactor` = 0.33 of the image into a SNAP), restart the follower and time
//! restart → serving and → caught up. Which sync the leader sent comes from its `mntr`
//! counters, as W5 reads them. The follower's RSS is read when it caught up and again
//! [`SETTLE`] later.
//!
//! INV-1: the writes overwrite [`KEYS`] variables, so the catalog does not grow; at least
//! [`MIN_WRITES`] writes, more than the leader's in-memory window of 500 txns (a DIFF from
//! there is never weighed).
//! INV-2: bounded: the writes within 300 s, the catch-up within W5's 300 s.

use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};
use nix::sys::signal::Signal;

use super::super::catchup::{sync_sent_since, syncs_sent, wait_caught_up};
use super::super::cluster::Cluster;
use super::super::load::connect;
use super::super::report::Line;
use super::super::{progress, Params};
use super::mem::{snapshots, Mem};
use super::{ms, per_million};
use crate::Failure;
use fe_meta::client::Client;

/// The share of the image the writes' values add up to (above 0.33, with room for the
/// difference between values and log records).
pub const SNAP_SHARE: f64 = 0.5;
/// The bytes of each value written.
pub const VALUE_LEN: usize = 32 * 1024;
/// Variables overwritten in turn.
const KEYS: usize = 64;
/// The leader's in-memory window of committed txns (zab-core's `committed_log_window`).
pub const MEMORY_WINDOW: usize = 500;
/// Fewest writes (INV-1).
pub const MIN_WRITES: usize = 1000;
const WRITE_BOUND: Duration = Duration::from_secs(300);
/// How long after the catch-up the follower's RSS is read again (`rss_settled_mib`): the
/// install frees the replaced catalog just as the new one is published, so the first reading
/// may still see both.
const SETTLE: Duration = Duration::from_secs(2);

/// Writes needed for an image of `image_bytes`: the leader's last [`MEMORY_WINDOW`] txns
/// are sent from memory and never weighed, so values adding up to [`SNAP_SHARE`] of the
/// image beyond those; at least [`MIN_WRITES`].
pub fn writes_for(image_bytes: u64) -> usize {
    let bytes = image_bytes as f64 * SNAP_SHARE;
    (MEMORY_WINDOW + (bytes / VALUE_LEN as f64).ceil() as usize).max(MIN_WRITES)
}

/// Runs the phase; `entries` is the catalog's size (for the per-million figures).
pub async fn run(cluster: &mut Cluster, p: &Params, entries: u64) -> Result<Line, Failure> {
    let ((leader, lep), (follower, fep)) = cluster
        .leader_and_follower(Duration::from_secs(120))
        .await?;
    let image = cluster
        .data_dir(leader)
        .and_then(|d| snapshots(&d).0)
        .map_or(0, |i| i.0);
    let n = writes_for(image);
    cluster.stop_node(follower, Signal::SIGTERM).await?;
    progress(&format!(
        "large SNAP: follower {follower} stopped; writing {n} values of {VALUE_LEN} bytes \
         (the leader's image is {image} bytes)"
    ));
    let client = connect(&lep, p).await.map_err(Failure::from)?;
    let t = Instant::now();
    let (next, errors) = overwrite(&client, n).await;
    let write_s = t.elapsed().as_secs_f64();
    let lz = client
        .status()
        .await
        .map_err(Failure::from)?
        .applied_journal_id;
    let before = syncs_sent(&lep).await;
    cluster.restart_node(follower)?;
    let (serving, done) = wait_caught_up(&fep, lz).await;
    let sync = sync_sent_since(&lep, before).await;
    let mem = cluster.pid(follower).and_then(Mem::of).unwrap_or_default();
    tokio::time::sleep(SETTLE).await;
    let settled = cluster.pid(follower).and_then(Mem::of).unwrap_or_default();
    let mut l = Line::new("large", "ens");
    l.set("phase", "snap-catchup")
        .set("follower", follower)
        .set("leader_image_bytes", image)
        .set("writes", next)
        .set("value_bytes", VALUE_LEN)
        .set("write_s", format!("{write_s:.1}"))
        .set("write_errors", errors)
        .set("restart_to_serving_ms", ms(serving))
        .set("restart_to_caught_up_ms", ms(done))
        .set("caught_up_ms_per_million", per_million(done, entries))
        .set(
            "sync",
            sync.split_whitespace()
                .next()
                .unwrap_or("sync=n/a")
                .trim_start_matches("sync="),
        )
        .set("rss_after_mib", super::mem::mib(mem.rss))
        .set("rss_anon_after_mib", super::mem::mib(mem.anon))
        .set("peak_rss_mib", super::mem::mib(mem.hwm))
        .set("rss_settled_mib", super::mem::mib(settled.rss));
    Ok(l)
}

/// `n` writes of [`VALUE_LEN`] bytes over [`KEYS`] variables, 200 in flight, within
/// [`WRITE_BOUND`]: how many were issued and how many failed.
async fn overwrite(client: &Client, n: usize) -> (usize, u64) {
    let value = "s".repeat(VALUE_LEN);
    let t = Instant::now();
    let mut inflight = FuturesUnordered::new();
    let (mut next, mut errors) = (0usize, 0u64);
    while next < n || !inflight.is_empty() {
        while next < n && inflight.len() < 200 && t.elapsed() < WRITE_BOUND {
            let name = format!("bench.large.snap{}", next % KEYS);
            next += 1;
            let v = &value;
            inflight.push(async move { client.set_var(&name, v).await });
        }
        match inflight.next().await {
            Some(Ok(_)) => {}
            Some(Err(_)) => errors += 1,
            None => break,
        }
    }
    (next, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writes_outweigh_a_third_of_the_image() {
        assert_eq!(writes_for(0), MIN_WRITES);
        let image = 330_000_000u64;
        let n = writes_for(image);
        let logged = (n - MEMORY_WINDOW) * VALUE_LEN;
        assert!(logged as f64 > 0.33 * image as f64 * 1.4, "{n}");
        assert!(n < 6_000, "{n}");
    }
}
