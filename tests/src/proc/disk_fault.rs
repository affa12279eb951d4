//! [`DiskFault`]: a node's disk that returns I/O errors or is slow, for the multi-process
//! fault tests, through an `LD_PRELOAD` shim (`tests/native/diskfault.c`, compiled here at
//! test time with the machine's C compiler).
//!
//! ```text
//! let Some(df) = DiskFault::build("eio")? else { return };   // SKIP printed: no C compiler
//! let mut spec = ClusterSpec::default();
//! df.apply(&mut spec, &[1, 2, 3]);        // their dataDirs under df, the shim preloaded
//! let c = ProcCluster::start("eio", spec).await?;
//! df.set(1, "eio-sync")?;                 // node 1: fsync/fdatasync/msync fail with EIO
//! df.set(1, "eio-writeback")?;            // or: only sync_file_range (snapshot writeback)
//! df.set(1, "delay-sync-ms=300")?;        // or: every sync takes 300 ms longer
//! df.set(1, "ok")?;                       // the disk is healthy again
//! ```
//!
//! This is a fault-injecting layer between the server and libc, **not** the kernel's: the
//! shim makes `fsync`, `fdatasync`, `msync` (of mappings of the node's files, recorded by an
//! interposed `mmap`), `sync_file_range`, `write`, `writev`, `pwrite` and `pwrite64` on files
//! under the node's dataDir fail with `EIO` or sleep first; the kernel and the page cache
//! never see a fault. `sync_file_range` (a snapshot's incremental writeback, zab-store's
//! `snapshot/writeback.rs`) fails under `eio-sync` (a disk that fails syncs fails the
//! writeback they wait for) and alone under `eio-writeback`; `eio-sync-once` and
//! `delay-sync-ms` leave it alone, so they still aim at the next real sync.
//! What it cannot model: a write-back error the kernel reports later, on a sync of data an
//! earlier `write` or store to the mapping "completed" (the page cache then holds pages
//! marked clean that are not on disk, so a retried fsync succeeds without the data: the
//! fsyncgate problem), reads failing, torn or reordered writes, or a power loss. The product's
//! rule "a failed sync ends the process, it is never retried" is what covers those; the shim
//! checks the rule is kept by logging a `diskfault: RETRY` line (see [`retries`]) when a file
//! whose sync (or writeback) it failed is synced or written back again.
//!
//! Which calls: `nm -D` of the `fe-meta` binary lists `write`, `writev`, `pwrite64`, `mmap64`,
//! `fsync`, `fdatasync` and `sync_file_range` from glibc (Rust's `write_all_at` is `pwrite64`,
//! `sync_data`/`sync_all` are `fdatasync`/`fsync`); the shim also covers `pwrite`, `msync` and
//! `mmap`. Which files: the txn log's records are written with `pwrite64` (its mapping is
//! read-only) and synced with `fdatasync`; a log segment is preallocated with `write` (the
//! spare's zero fill) and adopted with `pwrite64` (its header); epoch files, the initial-sync
//! marker, snapshots and a SNAP being received use `write`, and a snapshot (background or
//! received) larger than 8 MiB is written back with `sync_file_range` while it grows.
//!
//! The control file of each node (its content is the fault, see the shim's header) is
//! replaced atomically by [`DiskFault::set`]; the shim notices within 10 ms of its next call.
//!
//! INV-1: the shim, the control files and the nodes' dataDirs live in one temp dir removed
//! when the value drops (declare it before the cluster: locals drop in reverse order), except
//! when the test panics or `FE_META_KEEP` is set: then it is kept and its path printed, as the
//! cluster's dir is.
//! INV-2: without a C compiler ([`DiskFault::build`] returns `Ok(None)`) the test prints a
//! SKIP line and passes; a compiler that fails on the shim is an error.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{ClusterSpec, ProcError};

/// The shim's source, compiled at test time.
const SHIM_SOURCE: &str = include_str!("../../native/diskfault.c");

/// What the shim writes before each injected error (`diskfault: injected EIO into fsync of
/// <path>`).
pub const INJECTED: &str = "diskfault: injected";

/// What the shim writes when a file whose sync it failed is synced again.
pub const RETRY: &str = "diskfault: RETRY";

/// How often the shim re-reads its control file at most (`CHECK_EVERY_NS` in diskfault.c).
pub const SHIM_CHECK_EVERY: std::time::Duration = std::time::Duration::from_millis(10);

/// The compiled shim and the per-node control files (module docs).
#[derive(Debug)]
pub struct DiskFault {
    /// `None` only while dropping.
    dir: Option<tempfile::TempDir>,
    root: PathBuf,
    lib: PathBuf,
}

impl DiskFault {
    /// Compiles the shim into a new temp dir named after `name`; `Ok(None)` after a printed
    /// SKIP line when no C compiler runs here (INV-2).
    pub fn build(name: &str) -> Result<Option<DiskFault>, ProcError> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("fe-meta-diskfault-{name}-"))
            .tempdir()
            .map_err(ProcError::io("temp dir for the disk fault shim"))?;
        let src = dir.path().join("diskfault.c");
        std::fs::write(&src, SHIM_SOURCE).map_err(ProcError::io("write diskfault.c"))?;
        let lib = dir.path().join("diskfault.so");
        if compile(&src, &lib)?.is_none() {
            println!("SKIP {name}: no C compiler (cc, gcc; or CC) to build the disk fault shim");
            return Ok(None);
        }
        let root = dir.path().to_path_buf();
        Ok(Some(DiskFault {
            dir: Some(dir),
            root,
            lib,
        }))
    }

    /// The dataDir node `sid` gets under this fault's dir (the shim's prefix for it).
    pub fn data_dir(&self, sid: u64) -> PathBuf {
        self.root.join(format!("data{sid}"))
    }

    /// Node `sid`'s control file.
    pub fn control(&self, sid: u64) -> PathBuf {
        self.root.join(format!("control{sid}"))
    }

    /// The environment that loads the shim for node `sid`.
    pub fn env(&self, sid: u64) -> Vec<(String, String)> {
        let s = |p: &Path| p.display().to_string();
        vec![
            ("LD_PRELOAD".into(), s(&self.lib)),
            ("DISKFAULT_PREFIX".into(), s(&self.data_dir(sid))),
            ("DISKFAULT_CONTROL".into(), s(&self.control(sid))),
        ]
    }

    /// Puts the dataDirs of `sids` under this fault's dir and preloads the shim into them.
    pub fn apply(&self, spec: &mut ClusterSpec, sids: &[u64]) {
        for sid in sids {
            spec.data_dirs.insert(*sid, self.data_dir(*sid));
            spec.node_env.insert(*sid, self.env(*sid));
        }
    }

    /// Sets node `sid`'s fault (`ok`, `eio-sync`, `eio-sync-once`, `eio-write`,
    /// `eio-writeback`, `delay-sync-ms=N`, optionally with `match=TEXT`), replacing the control file atomically,
    /// and returns once the shim is bound to see it: the shim re-reads the file at most every
    /// [`SHIM_CHECK_EVERY`], so a call within that time of its last check (an election now
    /// writes its epoch files a few ms after a kill) could still run under the old fault.
    pub fn set(&self, sid: u64, fault: &str) -> Result<(), ProcError> {
        let path = self.control(sid);
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, format!("{fault}\n"))
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(ProcError::io(format!("set {}", path.display())))?;
        std::thread::sleep(SHIM_CHECK_EVERY * 2);
        Ok(())
    }
}

impl Drop for DiskFault {
    fn drop(&mut self) {
        let keep = std::thread::panicking() || std::env::var_os("FE_META_KEEP").is_some();
        if let (true, Some(dir)) = (keep, self.dir.take()) {
            eprintln!(
                "=== disk fault dir (dataDirs, shim) kept at {}",
                dir.keep().display()
            );
        }
    }
}

/// Compiles `src` into the shared object `lib`; the compiler used, or `None` if none runs.
fn compile(src: &Path, lib: &Path) -> Result<Option<String>, ProcError> {
    let mut candidates: Vec<String> = std::env::var("CC").into_iter().collect();
    candidates.extend(["cc".to_owned(), "gcc".to_owned()]);
    for cc in candidates {
        let out = Command::new(&cc)
            .args(["-shared", "-fPIC", "-O2", "-Wall", "-o"])
            .arg(lib)
            .arg(src)
            .arg("-ldl")
            .output();
        match out {
            Err(_) => continue,
            Ok(o) if o.status.success() => return Ok(Some(cc)),
            Ok(o) => {
                return Err(ProcError::Io {
                    what: format!("compile {} with {cc}", src.display()),
                    source: std::io::Error::other(String::from_utf8_lossy(&o.stderr).into_owned()),
                })
            }
        }
    }
    Ok(None)
}

/// The shim's `injected` lines in a node's log text.
pub fn injected(log: &str) -> Vec<&str> {
    log.lines().filter(|l| l.contains(INJECTED)).collect()
}

/// The shim's RETRY lines in a node's log text: syncs of a file after a failed sync of it.
pub fn retries(log: &str) -> Vec<&str> {
    log.lines().filter(|l| l.contains(RETRY)).collect()
}
