//! zoo.cfg's snapshot, purge and txn-log file keys (see the table in the parent module).
//!
//! INV: each key's value is checked here, with an error that names the key and its line
//! (parent INV-2); a key that is none of these is left to the other setters.

use super::{positive, Builder, ConfigError, Entry};

impl Builder {
    /// Snapshots, purging and the txn log's file handling; false when `e` is none of them.
    pub(super) fn set_storage(&mut self, e: &Entry<'_>) -> Result<bool, ConfigError> {
        let value = e.value;
        match e.key {
            "snapCount" => self.snap_count = Some(e.positive()?),
            "snapSizeLimitInKb" => {
                let kib: i64 = value
                    .parse()
                    .map_err(|_| e.bad("expected a size in KiB (0 or less disables)"))?;
                if kib > 0 && kib.unsigned_abs().checked_mul(1024).is_none() {
                    return Err(e.bad("size too large"));
                }
                self.snap_size_limit_kib = Some(kib);
            }
            "snapshotSizeFactor" => {
                let f: f64 = value
                    .parse()
                    .ok()
                    .filter(|f: &f64| f.is_finite())
                    .ok_or_else(|| e.bad("expected a number (a negative value disables)"))?;
                self.snapshot_size_factor = Some(f);
            }
            "autopurge.snapRetainCount" => {
                let n: u32 = value
                    .parse()
                    .map_err(|_| e.bad("expected an integer ≥ 3"))?;
                if n < 3 {
                    return Err(e.bad("expected an integer ≥ 3"));
                }
                self.snap_retain_count = Some(n);
            }
            "autopurge.purgeInterval" => {
                let hours = value
                    .parse()
                    .map_err(|_| e.bad("expected a number of hours (0 disables purging)"))?;
                self.purge_interval_hours = Some(hours);
            }
            "preAllocSize" => {
                let kib: u64 =
                    positive(value).ok_or_else(|| e.bad("expected a size in KiB > 0"))?;
                if kib.checked_mul(1024).is_none() {
                    return Err(e.bad("size too large"));
                }
                self.pre_alloc_kib = Some(kib);
            }
            "snapCpuPercent" => {
                let percent: u8 = value
                    .parse()
                    .ok()
                    .filter(|p| (1..=100).contains(p))
                    .ok_or_else(|| {
                        e.bad(
                            "expected an integer percentage of one core, 1 to 100 (100 = no limit)",
                        )
                    })?;
                self.snap_cpu_percent = Some(percent);
            }
            "forceSync" => {
                self.force_sync = Some(match value {
                    "yes" => true,
                    "no" => false,
                    _ => return Err(e.bad("expected `yes` or `no`")),
                })
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}
