//! The staleness guard's rule, as a pure value: the server feeds it clock readings.
//!
//! The leader logs TIMESTAMP {its wall clock} every min(10 s,
//! `meta_delay_toleration_second / 2`) (`write::timestamp_interval`). When a node applies one,
//! it records the entry's age at apply and the moment by its monotonic clock. Its lag is then
//! `age at apply + monotonic time since` (PITFALLS E14):
//! - time passing after an apply is measured on this node's monotonic clock, immune to wall
//!   clock jumps here and to the leader's clock: a TIMESTAMP from a leader whose clock runs
//!   ahead buys no extra freshness, the lag still grows from the moment it was applied;
//! - the age at apply compares two wall clocks, so it is corrected for the leader's clock
//!   offset: the smallest `local wall − leader wall` seen at apply in the leader's epoch
//!   (the freshest apply) is taken as the offset, clamped to ±[`MAX_CLOCK_SKEW_MS`], and the
//!   age is what exceeds it (never negative). A leader clock off ours by up to the bound either
//!   way shifts nothing, and a node that falls behind the leader sees its age grow. One-way
//!   timestamps cannot tell skew from delay, so within the bound the age is never
//!   underestimated by more than the bound; beyond it (BDB-JE refuses such peers) a leader
//!   clock behind ours counts the excess as lag, and one ahead hides lag up to the excess —
//!   but never the monotonic time since the last TIMESTAMP.
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
//! INV-4: the clock offset is learned per leader epoch: a new leader (another clock) starts
//! a new estimate.

/// The largest leader/follower wall-clock offset the age correction absorbs (BDB-JE's
/// default `max_bdbje_clock_delta_ms`).
pub const MAX_CLOCK_SKEW_MS: u64 = 5_000;

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
    /// The leader epoch and the smallest `local wall − leader wall` seen in it (INV-4).
    offset: Option<(u64, i128)>,
}

impl StalenessGuard {
    /// A guard with `tolerance_ms` (`meta_delay_toleration_second` × 1000).
    pub fn new(tolerance_ms: u64) -> StalenessGuard {
        StalenessGuard {
            tolerance_ms,
            last: None,
            synced: false,
            offset: None,
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

    /// Records that a TIMESTAMP carrying `leader_wall_ms`, logged by the leader of `epoch`, was
    /// applied when the local wall clock read `local_wall_ms` and the local monotonic clock
    /// `local_mono_ms`.
    pub fn observe(
        &mut self,
        leader_wall_ms: u64,
        epoch: u64,
        local_wall_ms: u64,
        local_mono_ms: u64,
    ) {
        let raw = i128::from(local_wall_ms) - i128::from(leader_wall_ms);
        let min = match self.offset {
            Some((e, min)) if e == epoch => min.min(raw),
            _ => raw,
        };
        self.offset = Some((epoch, min));
        let bound = i128::from(MAX_CLOCK_SKEW_MS);
        let offset = min.clamp(-bound, bound);
        let age = u64::try_from((raw - offset).max(0)).unwrap_or(u64::MAX);
        self.last = Some(Observed {
            age_at_apply_ms: age,
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
        // The first, freshest entry of epoch 1 sets the clock offset (200 ms, within bounds).
        g.observe(1_000_000, 1, 1_000_200, 1_000);
        assert_eq!(g.lag_ms(1_000), Some(0));
        assert_eq!(g.check(false, 5_000), Ok(()));
        let err = g.check(false, 11_500).unwrap_err();
        assert_eq!(
            err,
            Stale::Behind {
                lag_ms: 10_500,
                tolerance_ms: 10_000
            }
        );
        assert!(err.to_string().contains("10500 ms behind"));
        // Replaying an old log: the entry is an hour old even though applied just now.
        g.observe(0, 1, 3_600_200, 20_000);
        assert!(matches!(
            g.check(false, 20_000),
            Err(Stale::Behind {
                lag_ms: 3_600_000,
                ..
            })
        ));
        // A leader clock ahead of ours is age 0, not a negative lag.
        g.observe(5_000, 2, 1_000, 30_000);
        assert_eq!(g.lag_ms(30_500), Some(500));
    }

    /// PITFALLS E14: a follower applying a leader's TIMESTAMPs live (one per second, tolerance
    /// 3 s) under a leader wall clock `skew_ms` off its own. While they arrive it is fresh,
    /// whatever the skew; when they stop it turns stale after the tolerance on its monotonic
    /// clock — a leader clock even an hour ahead buys no freshness; and (skew within the bound)
    /// once it falls behind the leader's log, applying each TIMESTAMP 4 s late, it is stale.
    fn live_follower_under_skew(skew_ms: i64) {
        let mut g = StalenessGuard::new(3_000);
        g.mark_synced();
        let base: u64 = 1_700_000_000_000;
        let leader_wall =
            |local: u64| u64::try_from(i128::from(local) + i128::from(skew_ms)).unwrap();
        // Ten TIMESTAMPs, each applied 20 ms after the leader logged it.
        for s in 0..10u64 {
            let local = base + s * 1_000;
            g.observe(leader_wall(local - 20), 7, local, s * 1_000);
            assert_eq!(g.check(false, s * 1_000 + 999), Ok(()), "skew {skew_ms}");
        }
        // They stop: stale 3 s after the last one, by the monotonic clock.
        assert_eq!(g.check(false, 9_000 + 2_900), Ok(()), "skew {skew_ms}");
        let e = g.check(false, 9_000 + 3_100);
        assert!(
            matches!(e, Err(Stale::Behind { .. })),
            "skew {skew_ms}: {e:?}"
        );
        // They resume, but this follower now applies each one 4 s after it was logged (within
        // the skew bound, that delay is visible).
        if skew_ms.unsigned_abs() > MAX_CLOCK_SKEW_MS {
            return;
        }
        for s in 20..23u64 {
            let local = base + s * 1_000;
            g.observe(leader_wall(local - 4_000), 7, local, s * 1_000);
        }
        let e = g.check(false, 22_000);
        assert!(
            matches!(e, Err(Stale::Behind { lag_ms, .. }) if (3_900..=4_100).contains(&lag_ms)),
            "skew {skew_ms}: {e:?}"
        );
    }

    #[test]
    fn a_skewed_leader_clock_makes_a_follower_neither_stale_nor_fresh_wrongly() {
        for skew_ms in [0, -4_500, -1_000, 1_000, 3_600_000] {
            live_follower_under_skew(skew_ms);
        }
    }

    /// PITFALLS E14: the offset is learned per leader epoch (INV-4): a new leader whose clock is
    /// 4 s behind ours, after one whose clock matched, does not make us stale.
    #[test]
    fn a_new_leader_with_another_clock_starts_a_new_offset() {
        let mut g = StalenessGuard::new(3_000);
        g.mark_synced();
        g.observe(1_000_000, 1, 1_000_010, 0);
        assert_eq!(g.check(false, 100), Ok(()));
        g.observe(1_001_000, 2, 1_005_010, 5_000);
        assert_eq!(g.lag_ms(5_000), Some(0));
        assert_eq!(g.check(false, 5_100), Ok(()));
    }

    #[test]
    fn a_restarted_node_refuses_reads_until_it_synced_once() {
        let mut g = StalenessGuard::new(10_000);
        // Recovered from its own disk: a fresh-looking TIMESTAMP does not make it servable.
        g.observe(1_000_000, 1, 1_000_100, 0);
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
