//! The driver's side of the backpressure on client requests: the intake limit itself is
//! [`crate::admission`] (INV-1..INV-3 and INV-5 there, a pure function of the backlogs, which
//! the deterministic simulation runs too); this wraps it with the driver's clock, and counts
//! and logs the holds.
//!
//! INV-4: while the room is zero the driver takes no request from its handle (the channel
//! fills and `Node`'s callers wait) and re-checks at least every [`RECHECK`]; every hold is
//! counted in `zab_requests_held_total` and logged at WARN at most once per [`WARN_EVERY`].

use std::ops::{Deref, DerefMut};
use std::time::Duration;

use tokio::time::Instant;
use tracing::warn;
use zab_core::ServerId;

pub(super) use crate::admission::uncommitted;
use crate::admission::{Demand as PureDemand, Intake};

/// How often a held driver re-checks the backlogs when nothing else wakes it.
pub(super) const RECHECK: Duration = Duration::from_millis(1);

/// Least time between two WARN lines about held requests.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// What the room depends on, read from the core and the transport, at a driver instant.
pub(super) type Demand<'a, F> = PureDemand<'a, Instant, F>;

/// The driver's intake limit and its hold bookkeeping (see the module docs).
pub(super) struct Admission {
    intake: Intake<Instant>,
    held: bool,
    holds_unreported: u64,
    last_warn: Option<Instant>,
}

impl Deref for Admission {
    type Target = Intake<Instant>;

    fn deref(&self) -> &Intake<Instant> {
        &self.intake
    }
}

impl DerefMut for Admission {
    fn deref_mut(&mut self) -> &mut Intake<Instant> {
        &mut self.intake
    }
}

impl Admission {
    /// The limit for outboxes of `outbox_capacity` messages.
    pub(super) fn new(outbox_capacity: usize) -> Admission {
        Admission {
            intake: Intake::new(outbox_capacity),
            held: false,
            holds_unreported: 0,
            last_warn: None,
        }
    }

    /// Works out the room for this wake-up from `d`, counting and logging a new hold in
    /// `held_total` (INV-4).
    pub(super) fn refresh<F: Fn(ServerId) -> usize>(
        &mut self,
        d: &Demand<'_, F>,
        held_total: &prometheus::IntCounter,
    ) {
        let room = self.intake.refresh(d);
        self.note(room, held_total);
    }

    /// Records whether the driver holds requests back now (`room == 0`), counting and
    /// logging each new hold (INV-4).
    fn note(&mut self, room: usize, held_total: &prometheus::IntCounter) {
        let held = room == 0;
        if held && !self.held {
            held_total.inc();
            self.holds_unreported += 1;
            let now = Instant::now();
            if self.last_warn.is_none_or(|t| now - t >= WARN_EVERY) {
                let high_water = self.intake.high_water();
                warn!(
                    holds = self.holds_unreported,
                    high_water,
                    "client requests held back: the followers a quorum needs have {} or more \
                     messages queued; writes wait instead of overflowing their links (this \
                     many holds since the last such line)",
                    high_water
                );
                self.holds_unreported = 0;
                self.last_warn = Some(now);
            }
        }
        self.held = held;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_are_counted_once_each() {
        let counter = prometheus::IntCounter::new("t", "t").unwrap();
        let mut a = Admission::new(400);
        for room in [5, 0, 0, 3, 0, 1] {
            a.note(room, &counter);
        }
        assert_eq!(counter.get(), 2);
    }
}
