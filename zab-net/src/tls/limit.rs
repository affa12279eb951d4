//! [`WarnLimit`]: the rate limit of the warnings about refused connections (peers on the
//! quorum and election ports, clients on an application's TLS client port).
//!
//! INV-1: per remote IP at most one WARN every [`WARN_EVERY`]; the refusals in between are not
//! lost, the next WARN says how many there were (and the counters count each one).
//! INV-2: the table is bounded ([`MAX_TRACKED`] addresses; it is cleared when full).

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// The least time between two warnings about one address.
pub const WARN_EVERY: Duration = Duration::from_secs(10);
/// Addresses remembered at most.
const MAX_TRACKED: usize = 1024;

/// See the module docs.
#[derive(Default)]
pub struct WarnLimit {
    /// By address: when it was last warned about, and refusals not warned about since.
    seen: Mutex<HashMap<IpAddr, (Instant, u64)>>,
}

impl WarnLimit {
    /// `Some(n)` when a warning about `ip` is due now, `n` being the refusals of `ip` that were
    /// not warned about since the last one; `None` to stay quiet (INV-1).
    pub fn due(&self, ip: IpAddr) -> Option<u64> {
        let now = Instant::now();
        let mut seen = self.seen.lock();
        if seen.len() >= MAX_TRACKED && !seen.contains_key(&ip) {
            seen.clear();
        }
        match seen.get_mut(&ip) {
            Some((last, quiet)) if now.duration_since(*last) < WARN_EVERY => {
                *quiet += 1;
                None
            }
            Some((last, quiet)) => {
                let n = *quiet;
                *last = now;
                *quiet = 0;
                Some(n)
            }
            None => {
                seen.insert(ip, (now, 0));
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_warning_per_window_and_the_quiet_ones_counted() {
        let limit = WarnLimit::default();
        let a: IpAddr = [127, 0, 0, 9].into();
        let b: IpAddr = [127, 0, 0, 8].into();
        assert_eq!(limit.due(a), Some(0));
        assert_eq!(limit.due(a), None);
        assert_eq!(limit.due(a), None);
        assert_eq!(limit.due(b), Some(0), "another address has its own window");
        limit.seen.lock().get_mut(&a).unwrap().0 -= WARN_EVERY;
        assert_eq!(limit.due(a), Some(2));
    }
}
