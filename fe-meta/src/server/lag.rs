//! How far a node is behind the leader, as SHOW FRONTENDS shows it: in journal entries and in
//! time. Every node keeps an [`AppliedHistory`]: (monotonic time, applied journal id) samples
//! of its own catalog, at most one per [`SAMPLE_EVERY_MS`], over the last [`WINDOW_MS`]. The
//! leader answers SHOW FRONTENDS and reads its own history: a node that has applied journal id
//! `j` is behind since the leader first had an id beyond `j` ([`lag`]).
//!
//! Samples are taken when the catalog publishes (not on a timer): an idle node takes none, and
//! its one newest sample still says since when it has held its id. Within one sampling period
//! the sample keeps the period's first time and its last id, so a lag is overstated by at most
//! [`SAMPLE_EVERY_MS`], never understated.
//!
//! INV-1: the history holds at most `WINDOW_MS / SAMPLE_EVERY_MS + 1` samples (bounded memory),
//! ascending in time and journal id, and always its newest sample.
//! INV-2: [`lag`] is 0 ms and 0 entries when the node has applied what the leader had applied
//! at the poll; entries are counted only within one epoch (counters restart per epoch).
//! INV-3: when the samples that would date the lag were dropped from the window, the lag is a
//! lower bound and [`Lag::at_least`] says so.

use std::collections::VecDeque;

use zab_net::Zxid;

/// The sampling period, ms.
pub const SAMPLE_EVERY_MS: u64 = 100;
/// How far back the history reaches, ms (10 minutes).
pub const WINDOW_MS: u64 = 10 * 60 * 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sample {
    at_ms: u64,
    applied: Zxid,
}

/// A node's applied journal ids over the last [`WINDOW_MS`] (INV-1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AppliedHistory {
    samples: VecDeque<Sample>,
    /// The newest sample dropped from the window, if any.
    dropped: Option<Sample>,
}

impl AppliedHistory {
    /// Records that journal id `applied` was applied at monotonic time `now_ms`.
    pub fn record(&mut self, now_ms: u64, applied: Zxid) {
        match self.samples.back_mut() {
            Some(last) if applied <= last.applied => {}
            Some(last) if now_ms.saturating_sub(last.at_ms) < SAMPLE_EVERY_MS => {
                last.applied = applied;
            }
            _ => self.samples.push_back(Sample {
                at_ms: now_ms,
                applied,
            }),
        }
        let horizon = now_ms.saturating_sub(WINDOW_MS);
        while self.samples.len() > 1 && self.samples.front().is_some_and(|s| s.at_ms < horizon) {
            self.dropped = self.samples.pop_front();
        }
    }

    /// How many samples it holds.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether it holds none.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Since when (monotonic ms) the history first had an id beyond `applied`: `Ok(t)` if the
    /// window dates it, `Err(t)` if it was before the window's oldest time `t` (INV-3), `None`
    /// if the history never had one.
    fn first_beyond(&self, applied: Zxid) -> Option<Result<u64, u64>> {
        if let Some(d) = self.dropped.filter(|d| d.applied > applied) {
            return Some(Err(d.at_ms));
        }
        // Samples ascend in journal id (INV-1): the first one beyond `applied` by bisection.
        let first = self.samples.partition_point(|s| s.applied <= applied);
        self.samples.get(first).map(|s| Ok(s.at_ms))
    }
}

/// A node's lag behind the leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lag {
    /// Entries behind, when the node is in the leader's epoch.
    pub entries: Option<u64>,
    /// Time behind, ms, if the leader's history dates it.
    pub ms: Option<u64>,
    /// The node's applied id is in an older epoch than the leader's.
    pub older_epoch: bool,
    /// `ms` is a lower bound: the node is behind since before the history's window (INV-3).
    pub at_least: bool,
}

/// The lag of a node that has applied `node_applied`, polled when the leader had applied
/// `leader_applied`, read from the leader's `history` at monotonic time `now_ms` (INV-2, INV-3).
pub fn lag(leader_applied: Zxid, node_applied: Zxid, history: &AppliedHistory, now_ms: u64) -> Lag {
    let older_epoch = node_applied.epoch() < leader_applied.epoch();
    if node_applied >= leader_applied {
        return Lag {
            entries: Some(0),
            ms: Some(0),
            older_epoch: false,
            at_least: false,
        };
    }
    let entries = (!older_epoch).then(|| {
        u64::from(leader_applied.counter()).saturating_sub(u64::from(node_applied.counter()))
    });
    let (ms, at_least) = match history.first_beyond(node_applied) {
        Some(Ok(since)) => (Some(now_ms.saturating_sub(since)), false),
        Some(Err(before)) => (Some(now_ms.saturating_sub(before)), true),
        None => (None, false),
    };
    Lag {
        entries,
        ms,
        older_epoch,
        at_least,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn z(epoch: u64, counter: u64) -> Zxid {
        Zxid((epoch << 32) | counter)
    }

    #[test]
    fn a_caught_up_node_has_no_lag_however_old_the_last_write() {
        let mut h = AppliedHistory::default();
        h.record(0, z(1, 5));
        // An idle hour later the node still holds what the leader holds.
        let l = lag(z(1, 5), z(1, 5), &h, 3_600_000);
        assert_eq!(
            l,
            Lag {
                entries: Some(0),
                ms: Some(0),
                older_epoch: false,
                at_least: false
            }
        );
        // A node ahead of the poll (it applied more since) is not behind either.
        assert_eq!(lag(z(1, 5), z(1, 6), &h, 10).ms, Some(0));
    }

    #[test]
    fn the_lag_is_the_time_since_the_leader_first_went_beyond_the_node() {
        let mut h = AppliedHistory::default();
        h.record(1_000, z(1, 10));
        h.record(2_000, z(1, 12));
        h.record(2_050, z(1, 13)); // same period as 2_000: dated 2_000
        h.record(3_000, z(1, 20));
        let l = lag(z(1, 20), z(1, 12), &h, 5_000);
        assert_eq!(l.entries, Some(8));
        assert_eq!(l.ms, Some(3_000), "13 was there at 2_000");
        for behind in [13, 15, 19] {
            assert_eq!(lag(z(1, 20), z(1, behind), &h, 5_000).ms, Some(2_000));
        }
        assert_eq!(lag(z(1, 20), z(1, 10), &h, 5_000).ms, Some(3_000));
        assert_eq!(lag(z(1, 20), z(1, 9), &h, 5_000).ms, Some(4_000));
        assert!(!l.at_least && !l.older_epoch);
    }

    #[test]
    fn an_older_epoch_has_no_entry_count() {
        let mut h = AppliedHistory::default();
        h.record(0, z(1, 9));
        h.record(500, z(2, 1));
        let l = lag(z(2, 3), z(1, 9), &h, 1_500);
        assert_eq!(l.entries, None);
        assert!(l.older_epoch);
        assert_eq!(l.ms, Some(1_000));
    }

    #[test]
    fn beyond_the_window_the_lag_is_a_lower_bound_and_memory_stays_bounded() {
        let mut h = AppliedHistory::default();
        let mut t = 0;
        let mut id = 0;
        // 20 minutes of writes, 4 per period.
        while t < 2 * WINDOW_MS {
            id += 1;
            h.record(t, z(1, id));
            t += SAMPLE_EVERY_MS / 4;
        }
        let max = usize::try_from(WINDOW_MS / SAMPLE_EVERY_MS).unwrap() + 1;
        assert!(h.len() <= max, "{} samples", h.len());
        let now = t;
        let l = lag(z(1, id), z(1, 1), &h, now);
        assert!(l.at_least);
        let ms = l.ms.unwrap();
        assert!(
            (WINDOW_MS..=WINDOW_MS + SAMPLE_EVERY_MS).contains(&ms),
            "{ms}"
        );
        // A node within the window is dated exactly (to the period).
        let recent = lag(z(1, id), z(1, id - 40), &h, now);
        assert!(!recent.at_least);
        assert!(recent.ms.unwrap() <= 1_000 + SAMPLE_EVERY_MS);
    }

    #[test]
    fn an_idle_history_keeps_its_newest_sample() {
        let mut h = AppliedHistory::default();
        h.record(0, z(1, 1));
        h.record(WINDOW_MS * 3, z(1, 1));
        assert_eq!(h.len(), 1);
        assert_eq!(
            lag(z(1, 1), z(1, 0), &h, WINDOW_MS * 3).ms,
            Some(WINDOW_MS * 3)
        );
        assert!(AppliedHistory::default().is_empty());
        assert_eq!(
            lag(z(1, 1), z(1, 0), &AppliedHistory::default(), 5).ms,
            None
        );
    }
}
