//! The staleness guard's rule, as a pure value: the server feeds it clock readings.
//!
//! The leader logs TIMESTAMP {its wall clock} every `meta_delay_toleration_second / 2`. When a
//! node applies one, it records the entry's age by its own wall clock and the moment by its
//! monotonic clock. Its lag is then `age at apply + monotonic time since` (PITFALLS E14):
//! - a node replaying an old log catches the age of the data (the wall-clock part), so a
//!   restarted follower is not "fresh" just because it applied something a moment ago;
//! - time passing after that is measured monotonically, immune to local wall-clock jumps;
//! - leader/follower clock skew enters only through the age at apply, and a leader clock ahead
//!   of ours counts as age 0 (never a negative lag).
//!
//! INV-1: [`StalenessGuard::lag_ms`] is `None` until a TIMESTAMP was observed, then never
//! decreases between two observations.
//! INV-2: the leader never refuses reads for staleness; a non-leader refuses when it has not
//! served since this process started, has seen no TIMESTAMP yet, or its lag exceeds the
//! tolerance.
//! INV-3: a restarted node answers no read from the state it recovered from its own disk until
//! it has synced with a leader once ([`StalenessGuard::mark_synced`]): it may have applied txns
//! a quorum made durable before its own log did, so its recovered catalog can be older than
//! what it answered before the restart, and a reader would see the journal go backwards.

/// Why reads are refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Stale {
    /// Not synced with a leader since this process started (INV-3).
    #[error(
        "this node restarted and has not synced with a leader yet, so its catalog may be older \
         than what it served before (tolerance {tolerance_ms} ms)"
    )]
    NotSynced {
        /// The tolerance.
        tolerance_ms: u64,
    },
    /// No TIMESTAMP applied yet: how old the data is cannot be known.
    #[error(
        "this node has not applied any leader TIMESTAMP yet, so its catalog may be stale \
         (tolerance {tolerance_ms} ms)"
    )]
    Unknown {
        /// The tolerance.
        tolerance_ms: u64,
    },
    /// Further behind than the tolerance.
    #[error("this node's catalog is {lag_ms} ms behind the leader (tolerance {tolerance_ms} ms)")]
    Behind {
        /// How far behind.
        lag_ms: u64,
        /// The tolerance.
        tolerance_ms: u64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Observed {
    age_at_apply_ms: u64,
    applied_mono_ms: u64,
}

/// The staleness state of one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StalenessGuard {
    tolerance_ms: u64,
    last: Option<Observed>,
    synced: bool,
}

impl StalenessGuard {
    /// A guard with `tolerance_ms` (`meta_delay_toleration_second` × 1000).
    pub fn new(tolerance_ms: u64) -> StalenessGuard {
        StalenessGuard {
            tolerance_ms,
            last: None,
            synced: false,
        }
    }

    /// Records that the node has synced with a leader (it served) since it started (INV-3).
    pub fn mark_synced(&mut self) {
        self.synced = true;
    }

    /// The tolerance.
    pub fn tolerance_ms(&self) -> u64 {
        self.tolerance_ms
    }

    /// Records that a TIMESTAMP carrying `leader_wall_ms` was applied when the local wall clock
    /// read `local_wall_ms` and the local monotonic clock `local_mono_ms`.
    pub fn observe(&mut self, leader_wall_ms: u64, local_wall_ms: u64, local_mono_ms: u64) {
        self.last = Some(Observed {
            age_at_apply_ms: local_wall_ms.saturating_sub(leader_wall_ms),
            applied_mono_ms: local_mono_ms,
        });
    }

    /// The lag at monotonic time `now_mono_ms`, if known (INV-1).
    pub fn lag_ms(&self, now_mono_ms: u64) -> Option<u64> {
        self.last.map(|o| {
            o.age_at_apply_ms
                .saturating_add(now_mono_ms.saturating_sub(o.applied_mono_ms))
        })
    }

    /// Whether a read may be served now (INV-2).
    pub fn check(&self, is_leader: bool, now_mono_ms: u64) -> Result<(), Stale> {
        if is_leader {
            return Ok(());
        }
        if !self.synced {
            return Err(Stale::NotSynced {
                tolerance_ms: self.tolerance_ms,
            });
        }
        match self.lag_ms(now_mono_ms) {
            None => Err(Stale::Unknown {
                tolerance_ms: self.tolerance_ms,
            }),
            Some(lag_ms) if lag_ms > self.tolerance_ms => Err(Stale::Behind {
                lag_ms,
                tolerance_ms: self.tolerance_ms,
            }),
            Some(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_combines_age_at_apply_and_monotonic_time() {
        let mut g = StalenessGuard::new(10_000);
        g.mark_synced();
        assert_eq!(
            g.check(false, 0),
            Err(Stale::Unknown {
                tolerance_ms: 10_000
            })
        );
        assert_eq!(g.check(true, 0), Ok(()));
        // Fresh entry: 200 ms old when applied at mono 1_000.
        g.observe(1_000_000, 1_000_200, 1_000);
        assert_eq!(g.lag_ms(1_000), Some(200));
        assert_eq!(g.check(false, 5_000), Ok(()));
        let err = g.check(false, 11_000).unwrap_err();
        assert_eq!(
            err,
            Stale::Behind {
                lag_ms: 10_200,
                tolerance_ms: 10_000
            }
        );
        assert!(err.to_string().contains("10200 ms behind"));
        // Replaying an old log: the entry is an hour old even though applied just now.
        g.observe(0, 3_600_000, 20_000);
        assert!(matches!(
            g.check(false, 20_000),
            Err(Stale::Behind {
                lag_ms: 3_600_000,
                ..
            })
        ));
        // A leader clock ahead of ours is age 0, not a negative lag.
        g.observe(5_000, 1_000, 30_000);
        assert_eq!(g.lag_ms(30_500), Some(500));
    }

    #[test]
    fn a_restarted_node_refuses_reads_until_it_synced_once() {
        let mut g = StalenessGuard::new(10_000);
        // Recovered from its own disk: a fresh-looking TIMESTAMP does not make it servable.
        g.observe(1_000_000, 1_000_100, 0);
        let err = g.check(false, 10).unwrap_err();
        assert_eq!(
            err,
            Stale::NotSynced {
                tolerance_ms: 10_000
            }
        );
        assert!(err.to_string().contains("has not synced with a leader"));
        assert_eq!(g.check(true, 10), Ok(()), "a serving leader has synced");
        g.mark_synced();
        assert_eq!(g.check(false, 10), Ok(()));
    }
}
