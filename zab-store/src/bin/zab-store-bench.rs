//! `zab-store-bench`: txn log latency and group-commit throughput on this machine's disk.
//!
//! ```text
//! cargo run --release -p zab-store --bin zab-store-bench -- [--dir DIR] [--seconds S]
//! ```
//! Prints, for 100-byte records:
//! - raw `write 4 KiB + fdatasync` latency on a preallocated file in DIR (the disk's floor);
//! - single-writer append+sync latency, both calling `TxnLog` directly and through the
//!   group-commit thread (`LogWriter`, append until `Persisted` is reported);
//! - the time a `purge` of one 64 MiB segment whose pages are cached takes on the sync thread,
//!   and one writer's append -> Persisted latency while the sync thread purges such segments;
//! - group-commit throughput with 1, 8 and 64 appender threads, closed loop (one record in
//!   flight per appender) and pipelined (up to 1024 in flight per appender, as a leader with
//!   many clients has). A record counts only once `Persisted` covering it was reported.
//!
//! Runtime is bounded by `--seconds` per phase (default 2; nine phases plus preallocation).

use std::collections::VecDeque;
use std::error::Error;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use parking_lot::{Condvar, Mutex};
use zab_core::{Epoch, Txn, Zxid};
use zab_store::{LogEvent, LogOptions, LogWriter, SyncThread, TxnLog};

type Res<T> = Result<T, Box<dyn Error>>;

const RECORD: usize = 100;
const PREALLOC: usize = 64 << 20;

struct Args {
    dir: PathBuf,
    phase: Duration,
}

fn parse_args() -> Res<Args> {
    let mut dir = None;
    let mut secs = 2.0f64;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--dir" => dir = Some(PathBuf::from(it.next().ok_or("--dir needs a value")?)),
            "--seconds" => secs = it.next().ok_or("--seconds needs a value")?.parse()?,
            "-h" | "--help" => {
                println!("usage: zab-store-bench [--dir DIR] [--seconds SECONDS_PER_PHASE]");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    let base = dir.unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("zab-store-bench.{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(Args {
        dir,
        phase: Duration::from_secs_f64(secs),
    })
}

fn main() -> Res<()> {
    let args = parse_args()?;
    println!("zab-store-bench: dir {} ; {RECORD}-byte records ; segments preallocated {} MiB ; {:?} per phase", args.dir.display(), PREALLOC >> 20, args.phase);
    println!();
    println!(
        "{:<44} {:>8} {:>9} {:>9} {:>9}",
        "latency", "samples", "p50 µs", "p99 µs", "max µs"
    );
    let raw = raw_fdatasync(&args.dir.join("raw"), args.phase)?;
    print_lat("raw write 4 KiB + fdatasync", &raw);
    let (direct, rollover) = direct_append_sync(&args.dir.join("direct"), args.phase)?;
    print_lat("TxnLog append + sync (caller thread)", &direct);
    let threaded = writer_latency(&args.dir.join("writer"), args.phase)?;
    print_lat("LogWriter append -> Persisted (1 writer)", &threaded);
    let p50 = |h: &Histogram<u64>| h.value_at_quantile(0.5) as f64;
    println!(
        "p50 ratio vs raw fdatasync: direct {:.2}x, LogWriter {:.2}x",
        p50(&direct) / p50(&raw),
        p50(&threaded) / p50(&raw)
    );
    println!(
        "segment rollover (create, zero-fill, fsync {} MiB; one append): {} ms",
        PREALLOC >> 20,
        rollover.as_millis()
    );
    let purges = purge_latency(&args.dir.join("purge"))?;
    print_lat("TxnLog purge of one cached segment", &purges);
    let purging = purging_writer(&args.dir.join("purging"))?;
    print_lat("LogWriter append -> Persisted, purging", &purging);
    println!();
    println!(
        "{:<12} {:>10} {:>12} {:>12} {:>10} {:>14}",
        "group commit", "appenders", "in flight", "records/s", "syncs/s", "records/sync"
    );
    let mut n = 0;
    for window in [1usize, 1024] {
        for appenders in [1usize, 8, 64] {
            n += 1;
            let r = throughput(
                &args.dir.join(format!("tp{n}")),
                appenders,
                window,
                args.phase,
            )?;
            println!(
                "{:<12} {:>10} {:>12} {:>12.0} {:>10.0} {:>14.1}",
                "",
                appenders,
                format!("{window}/appender"),
                r.records_per_s,
                r.syncs_per_s,
                r.records_per_s / r.syncs_per_s.max(1.0)
            );
        }
    }
    std::fs::remove_dir_all(&args.dir)?;
    Ok(())
}

fn hist() -> Res<Histogram<u64>> {
    Ok(Histogram::new_with_bounds(1, 60_000_000, 3)?)
}

fn print_lat(name: &str, h: &Histogram<u64>) {
    println!(
        "{:<44} {:>8} {:>9} {:>9} {:>9}",
        name,
        h.len(),
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.99),
        h.max()
    );
}

fn micros(d: Duration) -> u64 {
    d.as_micros().clamp(1, u128::from(u64::MAX)) as u64
}

/// Sequential 4 KiB writes, each followed by fdatasync, into a zero-filled, fsynced file.
fn raw_fdatasync(path: &Path, phase: Duration) -> Res<Histogram<u64>> {
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..(PREALLOC >> 20) {
        f.write_all(&zeros)?;
    }
    f.sync_all()?;
    let block = vec![0xabu8; 4096];
    let mut h = hist()?;
    let start = Instant::now();
    let mut off = 0u64;
    while start.elapsed() < phase {
        let t = Instant::now();
        f.write_all_at(&block, off)?;
        f.sync_data()?;
        h.record(micros(t.elapsed()))?;
        off = (off + 4096) % PREALLOC as u64;
    }
    drop(f);
    std::fs::remove_file(path)?;
    Ok(h)
}

fn record(zxid: Zxid) -> Txn {
    Txn::app(zxid, Bytes::from(vec![(zxid.0 & 0xff) as u8; RECORD]))
}

fn open_log(dir: &Path) -> Res<TxnLog> {
    let opts = LogOptions {
        prealloc_bytes: PREALLOC,
        force_sync: true,
    };
    Ok(TxnLog::open(dir, opts)?.0)
}

/// Also returns the time of the first append+sync, which creates the first segment (the cost
/// of every rollover).
fn direct_append_sync(dir: &Path, phase: Duration) -> Res<(Histogram<u64>, Duration)> {
    let mut log = open_log(dir)?;
    let mut h = hist()?;
    let mut c = 1;
    let t = Instant::now();
    log.append(&record(Zxid::new(Epoch(1), c)))?;
    log.sync()?;
    let rollover = t.elapsed();
    let start = Instant::now();
    while start.elapsed() < phase {
        c += 1;
        let t = Instant::now();
        log.append(&record(Zxid::new(Epoch(1), c)))?;
        log.sync()?;
        h.record(micros(t.elapsed()))?;
    }
    drop(log);
    std::fs::remove_dir_all(dir)?;
    Ok((h, rollover))
}

/// Segments filled, then purged one at a time, by [`purge_latency`] and [`purging_writer`].
const PURGE_SEGMENTS: u32 = 5;
/// Time between two purges: a node purges once per snapshot, seconds apart.
const PURGE_EVERY: Duration = Duration::from_millis(200);

/// A log of [`PURGE_SEGMENTS`] full segments whose pages are cached (as a running node's
/// are), the segments' base zxids and the last zxid.
fn filled_log(dir: &Path) -> Res<(TxnLog, Vec<Zxid>, u32)> {
    let mut log = open_log(dir)?;
    let per_segment = (PREALLOC / (RECORD + 24)) as u32;
    let mut c = 0;
    while c < per_segment * PURGE_SEGMENTS {
        c += 1;
        log.append(&record(Zxid::new(Epoch(1), c)))?;
    }
    log.sync()?;
    let mut bases: Vec<Zxid> = std::fs::read_dir(dir)?
        .filter_map(|e| zab_store::parse_segment_name(&e.ok()?.file_name().to_string_lossy()))
        .collect();
    bases.sort();
    Ok((log, bases, c))
}

/// Times each `purge` that drops the oldest segment, called directly: what the sync thread
/// spends on it.
fn purge_latency(dir: &Path) -> Res<Histogram<u64>> {
    let (mut log, bases, _) = filled_log(dir)?;
    let mut h = hist()?;
    for next in bases.iter().skip(1) {
        std::thread::sleep(PURGE_EVERY);
        let t = Instant::now();
        log.purge(Zxid(next.0 - 1))?;
        h.record(micros(t.elapsed()))?;
    }
    drop(log);
    std::fs::remove_dir_all(dir)?;
    Ok(h)
}

/// One appender's append -> Persisted latency through the sync thread while it purges the
/// oldest segment every [`PURGE_EVERY`].
fn purging_writer(dir: &Path) -> Res<Histogram<u64>> {
    let (log, bases, last) = filled_log(dir)?;
    let progress = Arc::new(Progress::default());
    let (w, _r, thread) = LogWriter::spawn(log, progress.on_event())?;
    let mut h = hist()?;
    let mut c = last;
    let mut purges = bases.iter().skip(1).map(|next| Zxid(next.0 - 1));
    let mut next_purge = Instant::now() + PURGE_EVERY;
    loop {
        if Instant::now() >= next_purge {
            match purges.next() {
                Some(upto) => w.purge(upto)?,
                None => break,
            }
            next_purge += PURGE_EVERY;
        }
        c += 1;
        append_timed(&w, &progress, &mut h, Zxid::new(Epoch(1), c))?;
    }
    stop_writer(w, thread, dir)?;
    Ok(h)
}

/// Appends the record of `z` and waits until it is persisted, recording how long that took.
fn append_timed(w: &LogWriter, progress: &Progress, h: &mut Histogram<u64>, z: Zxid) -> Res<()> {
    let t = Instant::now();
    w.append(record(z))?;
    progress.wait(z.0)?;
    h.record(micros(t.elapsed()))?;
    Ok(())
}

/// Stops the sync thread once everything sent was handled, and removes the log.
fn stop_writer(w: LogWriter, thread: SyncThread, dir: &Path) -> Res<()> {
    drop(w);
    thread.join()?;
    std::fs::remove_dir_all(dir)?;
    Ok(())
}

/// The persisted point reported by the sync thread, for waiting appenders.
#[derive(Default)]
struct Progress {
    upto: Mutex<u64>,
    cv: Condvar,
    syncs: AtomicU64,
    failed: Mutex<Option<String>>,
}

impl Progress {
    fn on_event(self: &Arc<Self>) -> impl FnMut(LogEvent) + Send + 'static {
        let p = Arc::clone(self);
        move |ev| {
            match ev {
                LogEvent::Persisted { upto } => {
                    p.syncs.fetch_add(1, Ordering::Relaxed);
                    *p.upto.lock() = upto.0;
                }
                LogEvent::Failed(e) => *p.failed.lock() = Some(e.to_string()),
                _ => {}
            }
            p.cv.notify_all();
        }
    }

    /// Waits until `zxid` is persisted (or a timeout, to notice a failure).
    fn wait(&self, zxid: u64) -> Res<u64> {
        let mut g = self.upto.lock();
        while *g < zxid {
            if let Some(e) = self.failed.lock().clone() {
                return Err(e.into());
            }
            self.cv.wait_for(&mut g, Duration::from_millis(100));
        }
        Ok(*g)
    }
}

fn writer_latency(dir: &Path, phase: Duration) -> Res<Histogram<u64>> {
    let progress = Arc::new(Progress::default());
    let (w, _r, thread) = LogWriter::spawn(open_log(dir)?, progress.on_event())?;
    let mut h = hist()?;
    let mut c = 1;
    w.append(record(Zxid::new(Epoch(1), c)))?;
    progress.wait(Zxid::new(Epoch(1), c).0)?;
    let start = Instant::now();
    while start.elapsed() < phase {
        c += 1;
        append_timed(&w, &progress, &mut h, Zxid::new(Epoch(1), c))?;
    }
    stop_writer(w, thread, dir)?;
    Ok(h)
}

struct Throughput {
    records_per_s: f64,
    syncs_per_s: f64,
}

/// `appenders` threads, each keeping up to `window` records in flight; zxids are allocated and
/// sent under one lock so the log sees them in order, as a leader's proposals are.
fn throughput(dir: &Path, appenders: usize, window: usize, phase: Duration) -> Res<Throughput> {
    let progress = Arc::new(Progress::default());
    let (w, _r, thread) = LogWriter::spawn(open_log(dir)?, progress.on_event())?;
    let next = Arc::new(Mutex::new(0u32));
    // Warm up: create the first segment outside the measurement.
    {
        let mut n = next.lock();
        *n += 1;
        w.append(record(Zxid::new(Epoch(1), *n)))?;
    }
    progress.wait(Zxid::new(Epoch(1), 1).0)?;
    let syncs0 = progress.syncs.load(Ordering::Relaxed);
    let start = Instant::now();
    let done = std::thread::scope(|s| -> Res<u64> {
        let handles: Vec<_> = (0..appenders)
            .map(|_| {
                let (w, next, progress) = (w.clone(), Arc::clone(&next), Arc::clone(&progress));
                s.spawn(move || -> Result<u64, String> {
                    let mut inflight = VecDeque::new();
                    let mut durable = 0u64;
                    while start.elapsed() < phase {
                        while inflight.len() < window {
                            let mut n = next.lock();
                            *n += 1;
                            let z = Zxid::new(Epoch(1), *n);
                            w.append(record(z)).map_err(|e| e.to_string())?;
                            inflight.push_back(z.0);
                        }
                        let front = inflight.front().copied().unwrap_or_default();
                        let upto = progress.wait(front).map_err(|e| e.to_string())?;
                        while inflight.front().is_some_and(|&z| z <= upto) {
                            inflight.pop_front();
                            durable += 1;
                        }
                    }
                    Ok(durable)
                })
            })
            .collect();
        let mut total = 0;
        for h in handles {
            total += h.join().map_err(|_| "appender panicked")??;
        }
        Ok(total)
    })?;
    let secs = start.elapsed().as_secs_f64();
    let syncs = progress.syncs.load(Ordering::Relaxed) - syncs0;
    drop(w);
    thread.join()?;
    std::fs::remove_dir_all(dir)?;
    Ok(Throughput {
        records_per_s: done as f64 / secs,
        syncs_per_s: syncs as f64 / secs,
    })
}
