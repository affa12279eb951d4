//! What a large catalog costs on the heap, per entry: a guard against the memory regression
//! of the compact catalog coming back.
//!
//! A counting global allocator charges every allocation as glibc's malloc does (8 bytes of
//! header, 16-byte granules, 32 bytes at least), so the figures track the node's RSS. The mix
//! is the bench's (`fe-meta bench --workload memory`): 40% backends, 40% tables of 8 columns
//! in databases of 1,000 tables, 20% variables. Built through replay (as a node applying the
//! journal does) and restored from its image (as a restarting node does); both must stay
//! under [`BYTES_PER_ENTRY_MAX`].
//!
//! `cargo test --release -p fe-meta --test catalog_memory -- --nocapture` prints the figures.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use fe_meta::state::catalog::{
    Backend, BackendState, Catalog, Column, ColumnType, Database, Table,
};
use fe_meta::state::image::{read_image, write_image};
use fe_meta::state::journal::Op;
use fe_meta::state::replay::apply;
use fe_meta::Zxid;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

/// What glibc's malloc takes for a request of `size` bytes.
fn charged(size: usize) -> isize {
    ((size + 8).div_ceil(16) * 16).max(32) as isize
}

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(charged(layout.size()), Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(charged(layout.size()), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(
                charged(new_size) - charged(layout.size()),
                Ordering::Relaxed,
            );
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Entries of the mix measured.
const ENTRIES: usize = 200_000;
const TABLES_PER_DB: usize = 1000;
/// The bound on heap bytes per catalog entry: the node's whole budget is 250 MiB per million
/// entries (262 bytes per entry), of which the catalog may take this much. Measured: 202 for
/// this mix (560 before the compact columns and the shared-key indexes).
const BYTES_PER_ENTRY_MAX: isize = 215;

fn columns() -> Vec<Column> {
    (0..8)
        .map(|i| Column {
            name: format!("c{i}"),
            ty: ColumnType::Int,
            nullable: i != 0,
            is_key: i == 0,
            default: None,
        })
        .collect()
}

/// Entry `i` of the bench's mix, ids from `*id` on (databases are made before their first
/// table).
fn op(i: usize, id: &mut u64, cols: &[Column], ops: &mut Vec<Op>) {
    let mut next = || {
        *id += 1;
        *id
    };
    match i % 5 {
        0 | 1 => {
            let n = i / 5 * 2 + i % 5;
            ops.push(Op::AddBackend(Backend {
                id: next(),
                host: format!("10.{}.{}.{}", n >> 16 & 255, n >> 8 & 255, n & 255),
                heartbeat_port: 9050 + (n >> 24) as u16,
                state: BackendState::Normal,
                capacity_bytes: 1 << 40,
            }));
        }
        2 | 3 => {
            let n = i / 5 * 2 + i % 5 - 2;
            let db_id = 10_000 + (n / TABLES_PER_DB) as u64;
            ops.push(Op::CreateTable(Table {
                id: next(),
                db_id,
                name: format!("t{}", n % TABLES_PER_DB),
                columns: cols.into(),
            }));
        }
        _ => ops.push(Op::SetGlobalVariable {
            name: format!("bench.mem.v{}", i / 5),
            value: "value-of-a-variable".into(),
        }),
    }
}

fn build(entries: usize) -> Catalog {
    let dbs = (entries / 5 * 2).div_ceil(TABLES_PER_DB);
    let mut c = Catalog::new();
    let mut zxid = 0u64;
    for d in 0..dbs {
        zxid += 1;
        let op = Op::CreateDb(Database {
            id: 10_000 + d as u64,
            name: format!("db{d}"),
        });
        apply(&mut c, Zxid(zxid), &op.to_entry()).unwrap();
    }
    let (cols, mut id) = (columns(), 20_000u64);
    let mut ops = Vec::with_capacity(1);
    for i in 0..entries {
        op(i, &mut id, &cols, &mut ops);
        for o in ops.drain(..) {
            zxid += 1;
            apply(&mut c, Zxid(zxid), &o.to_entry()).unwrap();
        }
    }
    c
}

#[test]
fn a_large_catalog_stays_under_its_bytes_per_entry() {
    let before = LIVE.load(Ordering::Relaxed);
    let built = build(ENTRIES);
    let replayed = LIVE.load(Ordering::Relaxed) - before;
    let entries = built.entry_count() as isize;
    let mut image = Vec::new();
    write_image(&built, &mut image).unwrap();
    let before = LIVE.load(Ordering::Relaxed);
    let restored = read_image(&image[..]).unwrap();
    let loaded = LIVE.load(Ordering::Relaxed) - before;
    assert_eq!(restored, built);
    restored.check().unwrap();
    println!(
        "catalog of {entries} entries: {} bytes/entry built by replay, {} restored from a {} \
         byte image",
        replayed / entries,
        loaded / entries,
        image.len()
    );
    assert!(
        replayed / entries <= BYTES_PER_ENTRY_MAX,
        "replayed catalog takes {} bytes per entry",
        replayed / entries
    );
    assert!(
        loaded / entries <= BYTES_PER_ENTRY_MAX,
        "restored catalog takes {} bytes per entry",
        loaded / entries
    );
}
