//! Memory figures of the large workload: a node's resident size from `/proc/PID/status`
//! (VmRSS = RssAnon + RssFile + RssShmem, and its peak VmHWM), the machine's MemAvailable, the
//! footprint check that refuses a catalog the machine cannot hold, and the snapshot files in
//! a node's data dir (the newest image, and whether a `snapshot.*.tmp` is being written).
//!
//! INV-1: the footprint estimate is [`NODE_COPIES`] node-sized processes at `mib_per_million`
//! MiB per million entries plus [`NODE_BASE_MIB`] each, plus [`BENCH_MIB`] for this process;
//! a run is refused before anything is launched when that exceeds MemAvailable. Five copies:
//! 3 nodes, a second one for the leader (measured with 1M entries: the leader's RSS after the
//! build was about twice a follower's, 1,217 vs 635 MiB) and one for a node that holds a
//! catalog twice for a while (a received SNAP while its own state is still loaded).

use std::fs;
use std::path::Path;

/// A node's resident size with no catalog (runtime, buffers), MiB.
pub const NODE_BASE_MIB: u64 = 64;
/// This bench process while it writes (connections, requests in flight), MiB.
pub const BENCH_MIB: u64 = 512;
/// Node-sized processes the estimate counts (INV-1).
pub const NODE_COPIES: u64 = 5;

/// One process's memory, KiB, from `/proc/PID/status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mem {
    /// VmRSS.
    pub rss: u64,
    /// RssAnon (heap, stacks).
    pub anon: u64,
    /// RssFile (mapped files: the txn log, snapshots being read, the binary).
    pub file: u64,
    /// VmHWM: the peak VmRSS since the process started.
    pub hwm: u64,
}

fn kib_field(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

impl Mem {
    /// Parses the text of `/proc/PID/status` (`None` without VmRSS).
    pub fn parse(status: &str) -> Option<Mem> {
        Some(Mem {
            rss: kib_field(status, "VmRSS")?,
            anon: kib_field(status, "RssAnon").unwrap_or(0),
            file: kib_field(status, "RssFile").unwrap_or(0),
            hwm: kib_field(status, "VmHWM").unwrap_or(0),
        })
    }

    /// Process `pid`'s figures (`None` if it is gone).
    pub fn of(pid: u32) -> Option<Mem> {
        Mem::parse(&fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
    }
}

/// KiB as MiB with no decimals.
pub fn mib(kib: u64) -> String {
    format!("{:.0}", kib as f64 / 1024.0)
}

/// MiB per million entries for `kib` KiB holding `entries` entries.
pub fn mib_per_million(kib: u64, entries: u64) -> String {
    if entries == 0 {
        return "NA".to_owned();
    }
    format!("{:.0}", kib as f64 / 1024.0 * 1e6 / entries as f64)
}

/// The machine's MemAvailable in MiB, from the text of `/proc/meminfo`.
pub fn mem_available_mib(meminfo: &str) -> Option<u64> {
    kib_field(meminfo, "MemAvailable").map(|k| k / 1024)
}

/// The estimated peak memory of a large run of `entries` entries, MiB (INV-1).
pub fn footprint_mib(entries: usize, mib_per_million: u64) -> u64 {
    let per_node = NODE_BASE_MIB
        + (entries as u128 * u128::from(mib_per_million) / 1_000_000)
            .try_into()
            .unwrap_or(u64::MAX / 8);
    per_node
        .saturating_mul(NODE_COPIES)
        .saturating_add(BENCH_MIB)
}

/// Refuses `entries` when its estimated footprint exceeds `available_mib` (INV-1); the
/// estimate otherwise.
pub fn check_footprint(
    entries: usize,
    mib_per_million: u64,
    available_mib: u64,
) -> Result<u64, String> {
    let need = footprint_mib(entries, mib_per_million);
    if need <= available_mib {
        return Ok(need);
    }
    let fits = (available_mib.saturating_sub(BENCH_MIB) / NODE_COPIES)
        .saturating_sub(NODE_BASE_MIB)
        .saturating_mul(1_000_000)
        / mib_per_million.max(1);
    Err(format!(
        "--large-entries {entries}: the run would need about {need} MiB ({NODE_COPIES} node \
         processes of {mib_per_million} MiB per million entries + {NODE_BASE_MIB} MiB, plus \
         {BENCH_MIB} MiB for the bench) but MemAvailable is {available_mib} MiB; give at most \
         --large-entries {fits}, free memory, or set --large-mib-per-million to what a node \
         needs today (the `memory` phase's rss_mib_per_million)"
    ))
}

/// Checks against this machine's MemAvailable (unreadable: no check, and says so).
pub fn check_machine(entries: usize, mib_per_million: u64) -> Result<String, String> {
    let Some(avail) = fs::read_to_string("/proc/meminfo")
        .ok()
        .as_deref()
        .and_then(mem_available_mib)
    else {
        return Ok("MemAvailable unreadable: footprint not checked".to_owned());
    };
    let need = check_footprint(entries, mib_per_million, avail)?;
    Ok(format!(
        "estimated footprint {need} MiB of MemAvailable {avail} MiB"
    ))
}

/// Snapshot files under `dir` (recursively): the newest finished image (size, name) and
/// whether a `snapshot.*.tmp` is there (one being written or received).
pub fn snapshots(dir: &Path) -> (Option<(u64, String)>, bool) {
    let mut best: Option<(String, u64)> = None;
    let mut writing = false;
    let mut stack = vec![dir.to_path_buf()];
    let mut dirs = 0;
    while let Some(d) = stack.pop() {
        dirs += 1;
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && dirs < 64 {
                stack.push(e.path());
            } else if !name.starts_with("snapshot.") {
                continue;
            } else if name.ends_with(".tmp") {
                writing = true;
            } else if best.as_ref().is_none_or(|(b, _)| name > *b) {
                // Names carry the zxid in fixed-width hex: the greatest is the newest.
                best = Some((name, e.metadata().map_or(0, |m| m.len())));
            }
        }
    }
    (best.map(|(n, l)| (l, n)), writing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_are_read_in_kib() {
        let text = "Name:\tfe-meta\nVmHWM:\t  900 kB\nVmRSS:\t  812 kB\nRssAnon:\t 700 kB\n\
                    RssFile:\t 100 kB\nRssShmem:\t 12 kB\n";
        let m = Mem::parse(text).unwrap();
        assert_eq!((m.rss, m.anon, m.file, m.hwm), (812, 700, 100, 900));
        assert_eq!(Mem::parse("Name:\tx\n"), None);
        assert_eq!(mib(3 * 1024 * 1024), "3072");
        assert_eq!(mib_per_million(600 * 1024, 1_000_000), "600");
        assert_eq!(mib_per_million(600 * 1024, 0), "NA");
        let meminfo = "MemTotal: 24000000 kB\nMemFree: 1 kB\nMemAvailable: 20971520 kB\n";
        assert_eq!(mem_available_mib(meminfo), Some(20480));
    }

    #[test]
    fn the_footprint_check_refuses_what_does_not_fit_and_says_what_would() {
        // 5M entries at 600 MiB per million: 5 × (64 + 3000) + 512 MiB.
        assert_eq!(footprint_mib(5_000_000, 600), 5 * 3064 + 512);
        assert_eq!(check_footprint(5_000_000, 600, 20_000), Ok(15_832));
        let e = check_footprint(5_000_000, 600, 8_000).unwrap_err();
        assert!(e.contains("--large-entries 5000000"), "{e}");
        assert!(e.contains("MemAvailable is 8000 MiB"), "{e}");
        // What it proposes fits.
        let fits: usize = e
            .rsplit_once("at most --large-entries ")
            .and_then(|(_, r)| r.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap();
        assert!(check_footprint(fits, 600, 8_000).is_ok(), "{fits}");
        assert!(check_footprint(fits + 10_000, 600, 8_000).is_err());
        assert!(check_footprint(usize::MAX, 600, 1 << 30).is_err());
    }

    #[test]
    fn snapshot_files_newest_image_and_temp() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("version-2");
        fs::create_dir_all(&d).unwrap();
        assert_eq!(snapshots(tmp.path()), (None, false));
        fs::write(d.join("snapshot.0000000100000005"), b"12345").unwrap();
        fs::write(d.join("snapshot.0000000100000002"), b"1").unwrap();
        fs::write(d.join("log.0000000100000001"), b"xx").unwrap();
        let (img, writing) = snapshots(tmp.path());
        assert_eq!(img, Some((5, "snapshot.0000000100000005".to_owned())));
        assert!(!writing);
        fs::write(d.join("snapshot.0000000100000009.tmp"), b"").unwrap();
        assert!(snapshots(tmp.path()).1);
    }
}
