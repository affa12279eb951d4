//! PITFALLS D6 (ZOOKEEPER-4537): the hand-off between the producers of appends and the
//! group-commit thread (a mutex-guarded deque with a condition variable, `writer.rs`) must
//! never lose a wake-up. A lost wake-up shows as an append that is never reported durable
//! while nothing else arrives to wake the thread, so every wait here is bounded and a timeout
//! fails the test.
//!
//! Two producers share one writer: one appends and waits for durability in a tight loop (the
//! single-client case of ZOOKEEPER-4537, where the queue goes empty → non-empty on every
//! append), the other sends bursts of appends with a flush now and then and waits for the
//! last of each burst. Zxids are allocated under one lock together with the send, so the log
//! sees them strictly increasing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

mod common;

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use common::*;
use zab_core::{Epoch, Zxid};
use zab_store::{LogEvent, LogWriter};

/// How long one append may take to be reported durable before the hand-off counts as lost.
const WAIT: Duration = Duration::from_secs(2);
/// Wall-clock budget of the stress loop.
const RUN: Duration = Duration::from_millis(1_500);

/// What the sync thread reported so far.
#[derive(Default)]
struct Durable {
    upto: Zxid,
    flushes: u64,
    failed: Option<String>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<Durable>,
    changed: Condvar,
}

impl Shared {
    fn on_event(&self, ev: LogEvent) {
        let mut st = self.state.lock().unwrap();
        match ev {
            LogEvent::Persisted { upto } => st.upto = st.upto.max(upto),
            LogEvent::Flushed { upto, .. } => {
                st.flushes += 1;
                if let Some(u) = upto {
                    st.upto = st.upto.max(u);
                }
            }
            LogEvent::Failed(e) => st.failed = Some(e.to_string()),
            other => st.failed = Some(format!("unexpected event {other:?}")),
        }
        self.changed.notify_all();
    }

    /// Waits until `zxid` is durable; panics after [`WAIT`] (a lost hand-off).
    fn wait_durable(&self, zxid: Zxid, who: &str) {
        let deadline = Instant::now() + WAIT;
        let mut st = self.state.lock().unwrap();
        while st.upto < zxid {
            assert!(st.failed.is_none(), "writer failed: {:?}", st.failed);
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "{who}: append {zxid} not reported durable within {WAIT:?} (durable up to {}): \
                 a hand-off was lost",
                st.upto
            );
            st = self.changed.wait_timeout(st, left).unwrap().0;
        }
    }
}

/// Allocates the next zxid and sends it, under one lock so the log sees increasing zxids.
struct Alloc {
    next: Mutex<u32>,
}

impl Alloc {
    fn append(&self, w: &LogWriter) -> Zxid {
        let mut n = self.next.lock().unwrap();
        *n += 1;
        let z = Zxid::new(Epoch(1), *n);
        w.append(txn(z.0, 32 + (*n as usize % 97))).unwrap();
        z
    }
}

#[test]
fn appenders_and_bursts_never_lose_a_hand_off() {
    let d = tempfile::tempdir().unwrap();
    let (log, _) = open(d.path(), 1 << 20);
    let shared = Arc::new(Shared::default());
    let sink = Arc::clone(&shared);
    let (w, _r, thread) = LogWriter::spawn(log, move |ev| sink.on_event(ev)).unwrap();
    let alloc = Alloc {
        next: Mutex::new(0),
    };
    let start = Instant::now();
    let (tight, bursts) = std::thread::scope(|s| {
        let tight = s.spawn(|| {
            let w = w.clone();
            let mut n = 0u64;
            while start.elapsed() < RUN {
                let z = alloc.append(&w);
                shared.wait_durable(z, "tight appender");
                n += 1;
            }
            n
        });
        let bursty = s.spawn(|| {
            let w = w.clone();
            let mut n = 0u64;
            let mut round = 0u64;
            while start.elapsed() < RUN {
                round += 1;
                let size = 1 + (round * 37 % 200);
                let mut last = Zxid::ZERO;
                for _ in 0..size {
                    last = alloc.append(&w);
                }
                if round.is_multiple_of(7) {
                    w.flush(round).unwrap();
                }
                shared.wait_durable(last, "burst appender");
                n += size;
                if round.is_multiple_of(5) {
                    // let the thread park on an empty queue between bursts
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            n
        });
        (tight.join().unwrap(), bursty.join().unwrap())
    });
    let total = *alloc.next.lock().unwrap();
    shared.wait_durable(Zxid::new(Epoch(1), total), "final");
    drop(w);
    thread.join().unwrap();
    let st = shared.state.lock().unwrap();
    assert!(st.failed.is_none(), "{:?}", st.failed);
    assert!(st.flushes > 0, "no flush was exercised");
    assert!(
        tight > 100 && bursts > 100,
        "too little work to exercise the hand-off: {tight} single appends, {bursts} in bursts"
    );
    eprintln!("{tight} single appends, {bursts} appends in bursts, {total} in all");
}
