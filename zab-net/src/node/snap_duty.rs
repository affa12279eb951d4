//! The duty cycle of a background snapshot (`snapCpuPercent`): the thread writing it uses at
//! most a set share of one core while it writes.
//!
//! A niceness of 10 (`snap_thread`) is not enough on a machine with few cores: the write path's
//! threads block on every fdatasync and round trip, the snapshot thread fills those gaps and
//! then delays their wake-ups. So [`DutyWriter`], wrapped around what a background snapshot
//! writes through, compares after every [`CHECK_BYTES`] of output the thread's own CPU time
//! with the wall time since the last check, and sleeps until CPU / wall ≤ the share
//! ([`pause`]). On an idle machine the snapshot then takes about 1/share as long; the write
//! path meanwhile finds a free core far more often.
//!
//! Only background snapshots are paced: a SNAP streamed to a learner (the learner waits for
//! it) and a received SNAP are not.
//!
//! INV-1: a snapshot always finishes: the share is at least 1% ([`MIN_PERCENT`]), one sleep
//! lasts at most [`MAX_PAUSE`], and one check sleeps at most [`MAX_PAUSES_PER_CHECK`] times;
//! whatever is still owed after that is forgiven, never carried over.
//! INV-2: 100% (or a thread CPU clock that cannot be read) never sleeps and never reads a
//! clock again: the bytes pass through unchanged either way.
//! INV-3: the wrapper changes no byte: what it is given is written to the inner writer as is,
//! and errors are the inner writer's.
//! INV-4: once [`Pace::hurry`] is set (someone waits for the snapshot: a shutdown, a SNAP to
//! receive, a removal to persist), no further sleep starts; the rest is written at full speed.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The least share a snapshot may be given (INV-1).
pub(crate) const MIN_PERCENT: u8 = 1;
/// No limit.
pub(crate) const FULL_PERCENT: u8 = 100;
/// Output between two looks at the clocks.
pub(super) const CHECK_BYTES: u64 = 1 << 20;
/// The longest single sleep.
pub(super) const MAX_PAUSE: Duration = Duration::from_millis(100);
/// The most sleeps one check makes (so at most 2 s per [`CHECK_BYTES`]).
pub(super) const MAX_PAUSES_PER_CHECK: u32 = 20;

/// How long to sleep so that `cpu` used over `wall` elapsed is at most `percent` % of one
/// core: `cpu × 100 / percent − wall`, at least zero, at most [`MAX_PAUSE`]. A `percent` of
/// 100 or more is no limit; below [`MIN_PERCENT`] counts as it.
pub(super) fn pause(cpu: Duration, wall: Duration, percent: u8) -> Duration {
    if percent >= FULL_PERCENT {
        return Duration::ZERO;
    }
    let percent = u128::from(percent.max(MIN_PERCENT));
    let needed = cpu.as_nanos().saturating_mul(100) / percent;
    let owed = needed.saturating_sub(wall.as_nanos());
    let max = MAX_PAUSE.as_nanos();
    Duration::from_nanos(u64::try_from(owed.min(max)).unwrap_or(u64::MAX))
}

/// The clocks the pacing reads, and its sleep: a seam so the wrapper is testable without
/// timing.
pub(super) trait DutyClock {
    /// The CPU time the calling thread has used so far; `None` when it cannot be read.
    fn cpu(&mut self) -> Option<Duration>;
    /// Monotonic wall time since a fixed point.
    fn wall(&mut self) -> Duration;
    /// Sleeps the calling thread for `d`.
    fn sleep(&mut self, d: Duration);
}

/// The real clocks: `CLOCK_THREAD_CPUTIME_ID` and [`Instant`].
pub(super) struct ThreadClock {
    origin: Instant,
}

impl ThreadClock {
    pub(super) fn new() -> ThreadClock {
        ThreadClock {
            origin: Instant::now(),
        }
    }
}

impl DutyClock for ThreadClock {
    #[cfg(unix)]
    fn cpu(&mut self) -> Option<Duration> {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
        let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        let secs = u64::try_from(ts.tv_sec).ok()?;
        let nanos = u32::try_from(ts.tv_nsec).ok()?;
        (r == 0).then(|| Duration::new(secs, nanos))
    }

    /// Other systems: no thread CPU clock, so no pacing (INV-2).
    #[cfg(not(unix))]
    fn cpu(&mut self) -> Option<Duration> {
        None
    }

    fn wall(&mut self) -> Duration {
        self.origin.elapsed()
    }

    fn sleep(&mut self, d: Duration) {
        std::thread::sleep(d);
    }
}

/// How one snapshot is paced.
#[derive(Clone, Debug)]
pub(super) struct Pace {
    /// The share of one core, in % (100 = no limit).
    pub(super) percent: u8,
    /// Set when someone waits for the snapshot: pacing stops (INV-4).
    pub(super) hurry: Arc<AtomicBool>,
}

/// A [`Write`] that paces the thread writing through it to `percent` % of one core (module
/// docs; INV-1..3).
pub(super) struct DutyWriter<W: Write, C: DutyClock> {
    inner: W,
    clock: C,
    percent: u8,
    hurry: Arc<AtomicBool>,
    /// Bytes written since the last check.
    unchecked: u64,
    /// CPU and wall time at the last check; `None` when not pacing (INV-2).
    mark: Option<(Duration, Duration)>,
    slept: Duration,
}

impl<W: Write, C: DutyClock> DutyWriter<W, C> {
    /// Paces writes to `inner` to `pace.percent` % of one core (100 = no limit).
    pub(super) fn new(inner: W, mut clock: C, pace: Pace) -> DutyWriter<W, C> {
        let percent = pace.percent;
        let mark = match percent >= FULL_PERCENT {
            true => None,
            false => clock.cpu().map(|cpu| (cpu, clock.wall())),
        };
        DutyWriter {
            inner,
            clock,
            percent: percent.max(MIN_PERCENT),
            hurry: pace.hurry,
            unchecked: 0,
            mark,
            slept: Duration::ZERO,
        }
    }

    /// The time slept so far.
    pub(super) fn slept(&self) -> Duration {
        self.slept
    }

    /// Sleeps what the window since the last check owes (bounded, INV-1), then starts a new
    /// window.
    fn check(&mut self) {
        let Some((cpu0, wall0)) = self.mark else {
            return;
        };
        for _ in 0..MAX_PAUSES_PER_CHECK {
            if self.hurry.load(Ordering::Relaxed) {
                self.mark = None;
                return;
            }
            let Some(cpu) = self.clock.cpu() else {
                self.mark = None;
                return;
            };
            let wall = self.clock.wall();
            let d = pause(
                cpu.saturating_sub(cpu0),
                wall.saturating_sub(wall0),
                self.percent,
            );
            if d.is_zero() {
                break;
            }
            self.clock.sleep(d);
            self.slept += d;
        }
        self.mark = self.clock.cpu().map(|cpu| (cpu, self.clock.wall()));
    }
}

impl<W: Write, C: DutyClock> Write for DutyWriter<W, C> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.unchecked += n as u64;
        if self.unchecked >= CHECK_BYTES {
            self.unchecked = 0;
            self.check();
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
#[path = "snap_duty_tests.rs"]
mod tests;
