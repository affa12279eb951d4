//! [`SmallFs`]: a size-limited tmpfs that a test mounts to make a node's disk fill up, with a
//! filler file that leaves only a chosen number of bytes free (deleting it is "freeing space").
//!
//! ```text
//! let fs = match SmallFs::mount("disk_full", 8 << 20)? { Ok(fs) => fs, Err(why) => skip(why) };
//! fs.leave_free(300 << 10)?;      // the filler takes all but 300 KiB
//! ... node's dataLogDir = fs.path().join("log") ... it fills, the node exits ...
//! fs.free_space()?;               // delete the filler
//! ```
//!
//! INV-1: what [`SmallFs::mount`] makes is undone when the value drops, also when the test
//! panics: the tmpfs is unmounted (lazily if still busy) and its mount point removed. Drop it
//! after the processes using it are gone (declare it before the cluster: locals drop in
//! reverse order).
//! INV-2: without the right to mount (not root, no `mount`, a sandbox that forbids it)
//! [`SmallFs::mount`] returns `Ok(None)` and the reason; the test prints a SKIP line.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::ProcError;

/// A mounted, size-limited tmpfs (module docs).
#[derive(Debug)]
pub struct SmallFs {
    mount_point: PathBuf,
    filler: PathBuf,
    /// Removes the mount point after the unmount (`Drop` of `SmallFs` runs first).
    _dir: tempfile::TempDir,
}

/// Bytes written per call while filling.
const CHUNK: usize = 64 << 10;

/// `ENOSPC` on Linux.
const ENOSPC: i32 = 28;

/// This process's effective uid (the second field of `Uid:` in `/proc/self/status`).
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

impl SmallFs {
    /// Mounts a tmpfs of `bytes` (rounded up to pages by the kernel) on a new temp dir named
    /// after `name`. `Ok(Err(reason))` when this machine does not allow it (INV-2).
    pub fn mount(name: &str, bytes: u64) -> Result<Result<SmallFs, String>, ProcError> {
        if effective_uid() != Some(0) {
            return Ok(Err("not running as root: cannot mount a tmpfs".into()));
        }
        let dir = tempfile::Builder::new()
            .prefix(&format!("fe-meta-smallfs-{name}-"))
            .tempdir()
            .map_err(ProcError::io("temp dir for the small filesystem"))?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={bytes}"))
            .arg("tmpfs")
            .arg(dir.path())
            .output();
        match out {
            Err(e) => return Ok(Err(format!("cannot run mount: {e}"))),
            Ok(o) if !o.status.success() => {
                return Ok(Err(format!(
                    "mount -t tmpfs failed ({}): {}",
                    o.status,
                    String::from_utf8_lossy(&o.stderr).trim()
                )))
            }
            Ok(_) => {}
        }
        let mount_point = dir.path().to_path_buf();
        Ok(Ok(SmallFs {
            filler: mount_point.join("filler"),
            mount_point,
            _dir: dir,
        }))
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.mount_point
    }

    /// Writes the filler until the filesystem is full, then shrinks it by `free` bytes, so
    /// that about `free` bytes are left for others (tmpfs frees the pages at once).
    pub fn leave_free(&self, free: u64) -> Result<(), ProcError> {
        let what = format!("fill {}", self.filler.display());
        let mut f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&self.filler)
            .map_err(ProcError::io(what.clone()))?;
        let chunk = vec![0xA5u8; CHUNK];
        // Bounded: the filesystem has a fixed size.
        loop {
            match f.write(&chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(ENOSPC) => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(ProcError::io(what)(e)),
            }
        }
        let len = f.metadata().map_err(ProcError::io(what.clone()))?.len();
        f.set_len(len.saturating_sub(free))
            .map_err(ProcError::io(what))?;
        Ok(())
    }

    /// Deletes the filler: the space it took is free again.
    pub fn free_space(&self) -> Result<(), ProcError> {
        std::fs::remove_file(&self.filler)
            .map_err(ProcError::io(format!("remove {}", self.filler.display())))
    }

    /// The filler's size now.
    pub fn filler_len(&self) -> u64 {
        File::open(&self.filler)
            .and_then(|f| f.metadata())
            .map_or(0, |m| m.len())
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let umount = |lazy: bool| {
            let mut cmd = Command::new("umount");
            if lazy {
                cmd.arg("-l");
            }
            cmd.arg(&self.mount_point)
                .output()
                .is_ok_and(|o| o.status.success())
        };
        // A process that just died may hold files for a moment: retry, then detach lazily.
        for _ in 0..20 {
            if umount(false) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        if !umount(true) {
            eprintln!(
                "small filesystem: could not unmount {}; unmount it by hand",
                self.mount_point.display()
            );
        }
    }
}
