//! `--background-cores N`: a bounded CPU load beside a measured phase, so the bench can show
//! how a system degrades on a busy machine. Each core is one thread spinning on integer work
//! (no syscalls, no memory traffic to speak of), as a `while :; do :; done` shell loop does for
//! the ZooKeeper side in `scripts/compare-zookeeper.sh`.
//!
//! INV-1: the load exists exactly while its [`BackgroundLoad`] lives: dropping it stops and
//! joins every thread, so a phase that fails or panics still ends its load.
//! INV-2: a spinner also stops by itself after [`SPIN_LIMIT`], whatever happens to its owner.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest a spinner runs, even if nobody stops it (INV-2): longer than any bench phase.
pub const SPIN_LIMIT: Duration = Duration::from_secs(900);

/// Threads keeping `cores` cores busy until dropped.
pub struct BackgroundLoad {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<u64>>,
}

impl BackgroundLoad {
    /// Starts `cores` spinning threads (none for 0). A thread the OS refuses is reported on
    /// stderr and the load runs with fewer.
    pub fn start(cores: usize) -> BackgroundLoad {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::with_capacity(cores);
        for i in 0..cores {
            let stop = Arc::clone(&stop);
            let spawned = std::thread::Builder::new()
                .name(format!("bench-busy-{i}"))
                .spawn(move || spin(&stop, SPIN_LIMIT));
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => super::progress(&format!("background load: thread {i}: {e}")),
            }
        }
        BackgroundLoad { stop, threads }
    }
}

impl BackgroundLoad {
    /// Stops and joins every spinner; returns the rounds each did.
    pub fn stop(mut self) -> Vec<u64> {
        self.halt()
    }

    fn halt(&mut self) -> Vec<u64> {
        self.stop.store(true, Ordering::Relaxed);
        self.threads
            .drain(..)
            .map(|t| t.join().unwrap_or(0))
            .collect()
    }
}

impl Drop for BackgroundLoad {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Spins until `stop` is set or `limit` has passed; returns the rounds done.
fn spin(stop: &AtomicBool, limit: Duration) -> u64 {
    let started = Instant::now();
    let mut rounds = 0u64;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    while !stop.load(Ordering::Relaxed) && started.elapsed() < limit {
        for _ in 0..10_000 {
            x = black_box(x.rotate_left(7) ^ x.wrapping_mul(0x2545_f491_4f6c_dd1d));
        }
        rounds += 1;
    }
    rounds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_spins_while_it_lives_and_its_threads_are_gone_when_dropped() {
        let load = BackgroundLoad::start(2);
        std::thread::sleep(Duration::from_millis(200));
        let rounds = load.stop();
        assert_eq!(rounds.len(), 2);
        assert!(
            rounds.iter().all(|&r| r > 0),
            "a spinner did no work: {rounds:?}"
        );
    }

    #[test]
    fn a_spinner_stops_by_itself_at_its_limit() {
        let stop = AtomicBool::new(false);
        let t = Instant::now();
        assert!(spin(&stop, Duration::from_millis(50)) > 0);
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn no_cores_means_no_threads() {
        assert!(BackgroundLoad::start(0).stop().is_empty());
    }
}
