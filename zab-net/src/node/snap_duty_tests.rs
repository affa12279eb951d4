use std::cell::RefCell;
use std::rc::Rc;

use super::*;

const MS: Duration = Duration::from_millis(1);

fn pace(percent: u8) -> Pace {
    Pace {
        percent,
        hurry: Arc::default(),
    }
}

#[test]
fn pause_keeps_cpu_over_wall_at_the_share() {
    // 10 ms of CPU in 10 ms of wall at 25%: 40 ms of wall are needed, 30 ms more.
    assert_eq!(pause(10 * MS, 10 * MS, 25), 30 * MS);
    assert_eq!(pause(10 * MS, 20 * MS, 50), Duration::ZERO, "20 ms is 50%");
    assert_eq!(pause(10 * MS, 15 * MS, 50), 5 * MS);
    assert_eq!(
        pause(10 * MS, 100 * MS, 25),
        Duration::ZERO,
        "already below"
    );
    assert_eq!(pause(Duration::ZERO, Duration::ZERO, 30), Duration::ZERO);
}

#[test]
fn pause_is_bounded_and_full_share_never_sleeps() {
    assert_eq!(pause(10 * MS, Duration::ZERO, 1), MAX_PAUSE, "1 s owed");
    assert_eq!(pause(Duration::from_secs(3600), MS, 50), MAX_PAUSE);
    assert_eq!(pause(Duration::MAX, Duration::ZERO, 1), MAX_PAUSE);
    assert_eq!(pause(10 * MS, Duration::ZERO, 100), Duration::ZERO);
    assert_eq!(pause(10 * MS, Duration::ZERO, 200), Duration::ZERO);
    // 0% counts as 1%: a snapshot always progresses.
    assert_eq!(pause(MS / 2, Duration::ZERO, 0), 50 * MS);
}

/// A clock the test drives: CPU and wall advance when the test says; a sleep advances wall.
#[derive(Default)]
struct Fake {
    cpu: Duration,
    wall: Duration,
    sleeps: Vec<Duration>,
    broken: bool,
}

#[derive(Clone, Default)]
struct FakeClock(Rc<RefCell<Fake>>);

impl FakeClock {
    /// The writer did `cpu` of work in `wall`.
    fn work(&self, cpu: Duration, wall: Duration) {
        let mut f = self.0.borrow_mut();
        f.cpu += cpu;
        f.wall += wall;
    }

    fn slept(&self) -> Duration {
        self.0.borrow().sleeps.iter().sum()
    }
}

impl DutyClock for FakeClock {
    fn cpu(&mut self) -> Option<Duration> {
        let f = self.0.borrow();
        (!f.broken).then_some(f.cpu)
    }

    fn wall(&mut self) -> Duration {
        self.0.borrow().wall
    }

    fn sleep(&mut self, d: Duration) {
        let mut f = self.0.borrow_mut();
        f.wall += d;
        f.sleeps.push(d);
    }
}

const MIB: usize = CHECK_BYTES as usize;

#[test]
fn the_writer_sleeps_after_each_chunk_to_keep_the_share() {
    let clock = FakeClock::default();
    let mut w = DutyWriter::new(Vec::new(), clock.clone(), pace(25));
    // Half a chunk: no check yet.
    clock.work(10 * MS, 10 * MS);
    w.write_all(&vec![1u8; MIB / 2]).unwrap();
    assert!(clock.0.borrow().sleeps.is_empty());
    // The chunk is complete: 20 ms of CPU in 20 ms at 25% owe 60 ms.
    clock.work(10 * MS, 10 * MS);
    w.write_all(&vec![2u8; MIB / 2]).unwrap();
    assert_eq!(clock.slept(), 60 * MS);
    // The next window starts after the sleep: 5 ms in 5 ms owe 15 ms.
    clock.work(5 * MS, 5 * MS);
    w.write_all(&vec![3u8; MIB]).unwrap();
    assert_eq!(clock.slept(), 75 * MS);
    assert_eq!(w.slept(), 75 * MS);
    // Bytes pass unchanged (INV-3).
    w.flush().unwrap();
    let out = w.inner;
    assert_eq!(out.len(), 2 * MIB);
    assert_eq!((out[0], out[MIB - 1], out[MIB]), (1, 2, 3));
}

#[test]
fn a_long_debt_is_slept_in_bounded_pieces_and_then_forgiven() {
    let clock = FakeClock::default();
    let mut w = DutyWriter::new(Vec::new(), clock.clone(), pace(1));
    // 50 ms of CPU at 1% owe 4.95 s: at most MAX_PAUSES_PER_CHECK sleeps of ≤ MAX_PAUSE.
    clock.work(50 * MS, 50 * MS);
    w.write_all(&vec![0u8; MIB]).unwrap();
    let sleeps = clock.0.borrow().sleeps.clone();
    assert_eq!(sleeps.len(), MAX_PAUSES_PER_CHECK as usize);
    assert!(sleeps.iter().all(|d| *d == MAX_PAUSE), "{sleeps:?}");
    // The rest is not carried over: the next window owes only its own.
    clock.work(MS / 10, 9 * MS);
    w.write_all(&vec![0u8; MIB]).unwrap();
    assert_eq!(clock.0.borrow().sleeps.len(), sleeps.len() + 1);
    assert_eq!(clock.0.borrow().sleeps.last(), Some(&MS));
}

#[test]
fn time_spent_off_cpu_counts_as_wall() {
    // Waiting for the disk or for a core is not CPU: 5 ms of CPU over 30 ms is under 25%.
    let clock = FakeClock::default();
    let mut w = DutyWriter::new(Vec::new(), clock.clone(), pace(25));
    clock.work(5 * MS, 30 * MS);
    w.write_all(&vec![0u8; MIB]).unwrap();
    assert_eq!(clock.slept(), Duration::ZERO);
}

#[test]
fn full_share_or_no_cpu_clock_never_sleeps() {
    let clock = FakeClock::default();
    let mut w = DutyWriter::new(Vec::new(), clock.clone(), pace(100));
    clock.work(MS * 500, MS);
    w.write_all(&vec![0u8; 3 * MIB]).unwrap();
    assert_eq!(clock.slept(), Duration::ZERO);

    let clock = FakeClock::default();
    clock.0.borrow_mut().broken = true;
    let mut w = DutyWriter::new(Vec::new(), clock.clone(), pace(10));
    clock.work(MS * 500, MS);
    w.write_all(&vec![0u8; 3 * MIB]).unwrap();
    assert_eq!(clock.slept(), Duration::ZERO);

    // A clock that fails later stops the pacing (INV-2).
    let clock = FakeClock::default();
    let mut w = DutyWriter::new(Vec::new(), clock.clone(), pace(10));
    clock.0.borrow_mut().broken = true;
    clock.work(MS * 500, MS);
    w.write_all(&vec![0u8; 3 * MIB]).unwrap();
    assert_eq!(clock.slept(), Duration::ZERO);
    assert_eq!(w.inner.len(), 3 * MIB);
}

/// An error from the inner writer is returned as is, with nothing slept.
#[test]
fn inner_errors_pass_through() {
    struct Full;
    impl Write for Full {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::other("disk full"))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let clock = FakeClock::default();
    let mut w = DutyWriter::new(Full, clock.clone(), pace(10));
    clock.work(MS * 50, MS);
    let e = w.write_all(&vec![0u8; MIB]).unwrap_err();
    assert_eq!(e.to_string(), "disk full");
    assert_eq!(clock.slept(), Duration::ZERO);
}

/// The real clock: the calling thread's CPU time is readable and grows with work.
#[cfg(unix)]
#[test]
fn the_thread_cpu_clock_reads_and_grows() {
    let mut c = ThreadClock::new();
    let before = c.cpu().unwrap();
    let mut x = 0u64;
    let t = Instant::now();
    while t.elapsed() < 20 * MS {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
    }
    std::hint::black_box(x);
    assert!(c.cpu().unwrap() > before);
    assert!(c.wall() >= 20 * MS);
}

/// INV-4: once someone waits for the snapshot, no further sleep starts.
#[test]
fn a_hurried_writer_stops_pacing() {
    let clock = FakeClock::default();
    let p = pace(10);
    let mut w = DutyWriter::new(Vec::new(), clock.clone(), p.clone());
    clock.work(10 * MS, 10 * MS);
    w.write_all(&vec![0u8; MIB]).unwrap();
    assert_eq!(clock.slept(), 90 * MS);
    p.hurry.store(true, Ordering::Relaxed);
    clock.work(10 * MS, 10 * MS);
    w.write_all(&vec![0u8; 2 * MIB]).unwrap();
    assert_eq!(clock.slept(), 90 * MS, "no sleep after the hurry");
}
