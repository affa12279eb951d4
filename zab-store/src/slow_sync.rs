//! [`SlowSyncs`]: when the sync thread says that the disk is slow.
//!
//! A sync of the txn log that takes [`SLOW_SYNC`] or longer (ZooKeeper's default
//! `fsync.warningthresholdms`) delays every append of its batch, and so this node's acks. The
//! sync thread logs it at WARN, at most once per [`WARN_EVERY`], with how many syncs were that
//! slow since the last line and the slowest of them, so a disk that stays slow gives one line
//! per interval instead of one per sync.
//!
//! INV-1: the first slow sync is reported at once; later ones are counted and reported with
//! the first slow sync at least [`WARN_EVERY`] after the previous report.
//! INV-2: a sync faster than [`SLOW_SYNC`] is never counted.

use std::time::{Duration, Instant};

/// A sync at least this long is slow.
pub const SLOW_SYNC: Duration = Duration::from_secs(1);
/// At most one WARN line per this interval.
pub const WARN_EVERY: Duration = Duration::from_secs(10);

/// Slow syncs since the last report (module docs).
#[derive(Debug, Default)]
pub(crate) struct SlowSyncs {
    last_report: Option<Instant>,
    count: u64,
    slowest: Duration,
}

/// What to report: `count` slow syncs since the previous report, the slowest `slowest`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlowReport {
    pub(crate) count: u64,
    pub(crate) slowest: Duration,
}

impl SlowSyncs {
    /// Counts a sync of `took` that ended at `now`; returns a report when one is due (INV-1).
    pub(crate) fn observe(&mut self, took: Duration, now: Instant) -> Option<SlowReport> {
        if took < SLOW_SYNC {
            return None;
        }
        self.count += 1;
        self.slowest = self.slowest.max(took);
        let due = self
            .last_report
            .is_none_or(|at| now.saturating_duration_since(at) >= WARN_EVERY);
        if !due {
            return None;
        }
        let report = SlowReport {
            count: self.count,
            slowest: self.slowest,
        };
        *self = SlowSyncs {
            last_report: Some(now),
            ..SlowSyncs::default()
        };
        Some(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_the_first_slow_sync_then_one_line_per_interval_with_the_count() {
        let mut s = SlowSyncs::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(s.observe(ms(999), t0), None);
        let first = s.observe(ms(1200), t0).unwrap();
        assert_eq!((first.count, first.slowest), (1, ms(1200)));
        assert_eq!(s.observe(ms(3000), t0 + ms(2000)), None);
        assert_eq!(s.observe(ms(500), t0 + ms(9000)), None);
        assert_eq!(s.observe(ms(1100), t0 + ms(9999)), None);
        let next = s.observe(ms(1000), t0 + WARN_EVERY).unwrap();
        assert_eq!((next.count, next.slowest), (3, ms(3000)));
        assert_eq!(s.observe(ms(1000), t0 + WARN_EVERY + ms(1)), None);
    }
}
