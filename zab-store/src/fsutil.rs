//! Small durable-file helpers shared by the log, snapshots and epoch files.
//!
//! INV-1: `replace_atomically` leaves either the old or the new content under the final name,
//! never a mixture: write temp, fsync it, rename over, fsync the directory.
//! INV-2: with `force_sync = false` every fsync here is skipped (tests only); the rename order
//! is kept, so only power loss, not a process crash, can lose data in that mode.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};

/// fsyncs a directory so that creations, renames and removals in it are durable.
pub fn sync_dir(dir: &Path, force_sync: bool) -> Result<()> {
    if !force_sync {
        return Ok(());
    }
    let d = File::open(dir).map_err(|e| StoreError::io("open directory", dir, e))?;
    d.sync_all()
        .map_err(|e| StoreError::io("fsync directory", dir, e))
}

/// fsyncs a file's data and metadata.
pub fn sync_file(file: &File, path: &Path, force_sync: bool) -> Result<()> {
    if !force_sync {
        return Ok(());
    }
    file.sync_all()
        .map_err(|e| StoreError::io("fsync", path, e))
}

/// The temporary name used while `path` is being written.
pub fn temp_path(path: &Path) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Whether a directory entry is a leftover temporary file of this crate.
pub fn is_temp_name(name: &str) -> bool {
    name.ends_with(".tmp")
}

/// Replaces `path` with `content` atomically and durably (see INV-1).
pub fn replace_atomically(path: &Path, content: &[u8], force_sync: bool) -> Result<()> {
    let tmp = temp_path(path);
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(|e| StoreError::io("create", &tmp, e))?;
    f.write_all(content)
        .map_err(|e| StoreError::io("write", &tmp, e))?;
    sync_file(&f, &tmp, force_sync)?;
    drop(f);
    rename_durably(&tmp, path, force_sync)
}

/// Renames `from` to `to` and fsyncs the directory of `to`.
pub fn rename_durably(from: &Path, to: &Path, force_sync: bool) -> Result<()> {
    fs::rename(from, to)
        .map_err(|e| StoreError::io(format!("rename to {}", to.display()), from, e))?;
    sync_dir(parent_of(to), force_sync)
}

/// Removes `path` and fsyncs its directory.
pub fn remove_durably(path: &Path, force_sync: bool) -> Result<()> {
    fs::remove_file(path).map_err(|e| StoreError::io("remove", path, e))?;
    sync_dir(parent_of(path), force_sync)
}

/// The directory holding `path` (`.` for a bare name).
pub fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Creates `dir` (and parents) if missing.
pub fn ensure_dir(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).map_err(|e| StoreError::io("create directory", dir, e))
}

/// The names of the entries of `dir` that are valid UTF-8 (others are not ours).
pub fn list_names(dir: &Path) -> Result<Vec<String>> {
    let rd = fs::read_dir(dir).map_err(|e| StoreError::io("list", dir, e))?;
    let mut names = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| StoreError::io("list", dir, e))?;
        if let Ok(name) = entry.file_name().into_string() {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// Parses the 16-hex-digit zxid suffix of `name` after `prefix` (`log.`, `snapshot.`).
pub fn parse_hex_suffix(name: &str, prefix: &str) -> Option<u64> {
    let hex = name.strip_prefix(prefix)?;
    if hex.len() != 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}
