//! CPU accounting the way the anchors' `common/cpu.sh` does it, so our figures and
//! ZooKeeper's mean the same thing.
//!
//! * [`wait_quiet`]: before a workload, wait (bounded) until the whole machine is idle: fewer
//!   than `threshold` busy cores over a 2 s window of `/proc/stat` (busy = all but idle and
//!   iowait).
//! * [`Window`]: utime+stime of the server pids and of this process (the load generator),
//!   and `/proc/stat`, sampled at the start and the end of a window inside the measured phase
//!   (cpu.sh: `[launch + warm + 2.5 s, launch + warm + run - 0.5 s]`).
//!
//! INV: a pid that has gone (or cannot be read) counts 0 ticks; nothing here panics on odd
//! `/proc` contents.

use std::fs;
use std::time::{Duration, Instant};

/// `/proc` clock ticks per second (USER_HZ, 100 on Linux for every architecture we run on).
const TICKS_PER_SEC: f64 = 100.0;

/// utime+stime of `pid` in clock ticks (0 if it cannot be read).
pub fn pid_ticks(pid: u32) -> u64 {
    let Ok(text) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    // The command name (field 2) may hold spaces: count fields after its closing paren.
    let Some(rest) = text.rsplit_once(')').map(|(_, r)| r) else {
        return 0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): utime is field 14, stime 15 => indexes 11 and 12.
    let get = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    get(11) + get(12)
}

/// `/proc/stat`'s first line: (busy, total, nice) jiffies; busy excludes idle and iowait.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stat {
    busy: u64,
    total: u64,
    nice: u64,
}

/// Reads `/proc/stat` (zeros if it cannot).
pub fn stat() -> Stat {
    let text = fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = text.lines().find(|l| l.starts_with("cpu ")) else {
        return Stat::default();
    };
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let total: u64 = v.iter().sum();
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    Stat {
        busy: total.saturating_sub(at(3) + at(4)),
        total,
        nice: at(1),
    }
}

fn cores() -> f64 {
    std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
}

/// Busy and nice cores between two `/proc/stat` readings.
pub fn busy_between(a: Stat, b: Stat) -> (f64, f64) {
    let total = b.total.saturating_sub(a.total).max(1) as f64;
    let n = cores();
    (
        n * b.busy.saturating_sub(a.busy) as f64 / total,
        n * b.nice.saturating_sub(a.nice) as f64 / total,
    )
}

/// What the quiet gate saw: its last reading (busy cores) and how long it waited.
#[derive(Clone, Copy, Debug)]
pub struct Quiet {
    /// Busy cores over the last 2 s window (`None`: the gate was off).
    pub busy: Option<f64>,
    /// Seconds waited.
    pub waited_s: u64,
}

/// Waits (at most `max_wait`) until fewer than `threshold` cores are busy over a 2 s window;
/// reports each busy reading on stderr (like cpu.sh's `wait_quiet`). A zero `max_wait` turns
/// the gate off (no reading).
pub async fn wait_quiet(threshold: f64, max_wait: Duration) -> Quiet {
    let start = Instant::now();
    if max_wait.is_zero() {
        return Quiet {
            busy: None,
            waited_s: 0,
        };
    }
    loop {
        let a = stat();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (busy, _) = busy_between(a, stat());
        if busy < threshold {
            return Quiet {
                busy: Some(busy),
                waited_s: start.elapsed().as_secs(),
            };
        }
        if start.elapsed() >= max_wait {
            eprintln!(
                "WARNING: machine still busy ({busy:.2} cores) after {}s; running anyway",
                max_wait.as_secs()
            );
            return Quiet {
                busy: Some(busy),
                waited_s: start.elapsed().as_secs(),
            };
        }
        super::progress(&format!(
            "[quiet-gate] machine busy: {busy:.2} cores (someone else?), waiting"
        ));
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
}

/// One end of a sampling window.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    server: Option<u64>,
    client: u64,
    stat: Stat,
    at: Instant,
}

/// Samples now: the servers' ticks (`None` when their pids are unknown), ours, `/proc/stat`.
pub fn sample(server_pids: Option<&[u32]>) -> Sample {
    Sample {
        server: server_pids.map(|p| p.iter().map(|&pid| pid_ticks(pid)).sum()),
        client: pid_ticks(std::process::id()),
        stat: stat(),
        at: Instant::now(),
    }
}

/// CPU use over a window, as cpu.sh reports it.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    /// CPU-seconds per second of the servers (`None`: pids unknown).
    pub server_cores: Option<f64>,
    /// Same for the load generator (this process).
    pub client_cores: f64,
    /// Busy CPUs of the machine.
    pub machine_busy_cores: f64,
    /// Niced CPU time (someone else's).
    pub nice_cores: f64,
}

impl Window {
    /// The window between two samples.
    pub fn between(a: &Sample, b: &Sample) -> Window {
        let dt = b.at.duration_since(a.at).as_secs_f64().max(1e-3);
        let per_s = |t0: u64, t1: u64| t1.saturating_sub(t0) as f64 / TICKS_PER_SEC / dt;
        let (machine_busy_cores, nice_cores) = busy_between(a.stat, b.stat);
        Window {
            server_cores: a.server.zip(b.server).map(|(x, y)| per_s(x, y)),
            client_cores: per_s(a.client, b.client),
            machine_busy_cores,
            nice_cores,
        }
    }

    /// Busy cores that are neither the servers nor the client.
    pub fn other_cores(&self) -> f64 {
        self.machine_busy_cores - self.server_cores.unwrap_or(0.0) - self.client_cores
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_burns_ticks_and_a_missing_pid_counts_zero() {
        let before = pid_ticks(std::process::id());
        let start = Instant::now();
        let mut x = 0u64;
        // Spin until our ticks move (a tick is 10 ms of CPU), at most 2 s.
        while pid_ticks(std::process::id()) == before && start.elapsed() < Duration::from_secs(2) {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
        }
        assert!(pid_ticks(std::process::id()) > before);
        assert_eq!(pid_ticks(u32::MAX), 0);
        let s = stat();
        assert!(s.total > 0 && s.busy <= s.total);
    }
}
