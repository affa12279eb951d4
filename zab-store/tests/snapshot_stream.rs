//! A 256 MiB snapshot streamed through `SnapshotWriter` and back through `SnapshotReader` with
//! bounded memory: a counting global allocator records the peak of live heap bytes, which must
//! stay far below the snapshot's size. This is the only test in this binary, so nothing else
//! allocates concurrently. With real syncs, the writer hands the file to the disk window by
//! window while it grows (32 windows of 8 MiB here) before its final fsync: the image read
//! back must be the one written, byte for byte.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};

use zab_core::Zxid;
use zab_store::SnapDir;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const TOTAL: usize = 256 << 20;
const CHUNK: usize = 256 << 10;

/// Fills `buf` with the bytes of the stream at `pos` (cheap, position-dependent): byte `p` of
/// the stream is byte `p % 8` of a word derived from `p / 8`, whatever the alignment of `pos`
/// (reads return runs of any length: the body starts after a variable-length header).
fn fill(buf: &mut [u8], pos: usize) {
    let word = |w: usize| (w as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes();
    for (i, b) in buf.iter_mut().enumerate() {
        let p = pos + i;
        *b = word(p / 8)[p % 8];
    }
}

#[test]
fn multi_hundred_mib_round_trip_with_bounded_memory() {
    let d = tempfile::tempdir().unwrap();
    let snaps = SnapDir::open(d.path(), true).unwrap();
    let mut chunk = vec![0u8; CHUNK];
    let mut expect = vec![0u8; CHUNK];
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);

    let mut w = snaps.create(Zxid(0x5_0000_0001), 7, None).unwrap();
    let mut pos = 0;
    while pos < TOTAL {
        fill(&mut chunk, pos);
        w.write_all(&chunk).unwrap();
        pos += CHUNK;
    }
    w.finish().unwrap();

    let (info, n) = snaps
        .load_newest(|r| {
            let mut pos = 0;
            loop {
                let got = r.read(&mut chunk)?;
                if got == 0 {
                    return Ok(pos);
                }
                fill(&mut expect[..got], pos);
                assert_eq!(chunk[..got], expect[..got], "mismatch near {pos}");
                pos += got;
            }
        })
        .unwrap()
        .unwrap();
    assert_eq!(info.zxid, Zxid(0x5_0000_0001));
    assert_eq!(n, TOTAL);
    let peak = PEAK.load(Ordering::Relaxed) - base;
    assert!(
        peak < 4 << 20,
        "peak heap growth {peak} bytes for a {TOTAL}-byte snapshot"
    );
    eprintln!("256 MiB round trip: peak heap growth {} KiB", peak / 1024);
}
