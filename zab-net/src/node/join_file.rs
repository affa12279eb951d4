//! The configuration a joining server learned from a member, kept in its data dir until a
//! snapshot carries one ([`crate::NodeOptions::join_membership`]). A snapshot cannot hold it:
//! the configuration's version is a zxid the empty data dir does not have yet, and a snapshot
//! file carries only a configuration committed at or below its own zxid.
//!
//! ```text
//! dataDir/joinConfiguration:  magic "ZJON", then the `snap_prefix` layout
//!                             (len:u32, version:u64, Membership::encode())
//! ```
//!
//! INV-1: the file is replaced atomically (temp file, fsync, rename, directory fsync when
//! `forceSync`), so a reader sees the old content, the new one, or no file: never a torn one.
//! INV-2: a file that does not decode is a clear error naming it, never a panic, never taken
//! for "no file".
//! INV-3: once a snapshot carries a configuration the file is stale and is removed at start.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use thiserror::Error;
use zab_core::Membership;

use super::snap_prefix::{self, PrefixReader};

/// The file's name in the data dir.
pub(crate) const JOIN_FILE: &str = "joinConfiguration";

const MAGIC: &[u8; 4] = b"ZJON";

/// Why the join file could not be read or written.
#[derive(Debug, Error)]
pub(crate) enum JoinFileError {
    /// A file system operation failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The content is not a configuration (INV-2).
    #[error("{} is not a configuration: {reason}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

fn io_err(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> JoinFileError {
    let path = path.to_path_buf();
    move |source| JoinFileError::Io { op, path, source }
}

/// Writes `membership` as `dir/joinConfiguration` (INV-1).
pub(crate) fn write(dir: &Path, membership: &Membership, sync: bool) -> Result<(), JoinFileError> {
    let path = dir.join(JOIN_FILE);
    let tmp = dir.join(format!("{JOIN_FILE}.tmp"));
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&snap_prefix::encode(membership));
    let mut f = File::create(&tmp).map_err(io_err("create", &tmp))?;
    f.write_all(&bytes).map_err(io_err("write", &tmp))?;
    if sync {
        f.sync_all().map_err(io_err("fsync", &tmp))?;
    }
    drop(f);
    fs::rename(&tmp, &path).map_err(io_err("rename", &path))?;
    if sync {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err("fsync", dir))?;
    }
    Ok(())
}

/// The configuration in `dir/joinConfiguration`, `None` when there is no such file (INV-2).
pub(crate) fn read(dir: &Path) -> Result<Option<Membership>, JoinFileError> {
    let path = dir.join(JOIN_FILE);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("read", &path)(e)),
    };
    let corrupt = |reason: String| JoinFileError::Corrupt {
        path: path.clone(),
        reason,
    };
    let body = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or_else(|| corrupt("no ZJON magic".to_string()))?;
    match PrefixReader::default().feed(body) {
        Ok(Some((m, used))) if used == body.len() => Ok(Some(m)),
        Ok(Some((_, used))) => Err(corrupt(format!(
            "{} bytes after the configuration",
            body.len() - used
        ))),
        Ok(None) => Err(corrupt("the configuration is cut short".to_string())),
        Err(e) => Err(corrupt(e.to_string())),
    }
}

/// Removes a stale join file (INV-3); no file is fine.
pub(crate) fn remove(dir: &Path) -> Result<(), JoinFileError> {
    let path = dir.join(JOIN_FILE);
    match fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err("remove", &path)(e)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use std::collections::BTreeMap;

    use zab_core::{LearnerType, ServerId, Zxid};

    use super::*;

    fn joined() -> Membership {
        let types: BTreeMap<ServerId, LearnerType> = (1..=4)
            .map(|s| (ServerId(s), LearnerType::Participant))
            .collect();
        let addresses = (1..=4)
            .map(|s| (ServerId(s), format!("127.0.0.1:{}:{}", 2000 + s, 3000 + s)))
            .collect();
        let mut m = Membership::bootstrap(&types, &addresses);
        m.version = Zxid(0x3_0000_0010);
        m
    }

    #[test]
    fn written_then_read_then_removed() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(dir.path()).unwrap().is_none());
        write(dir.path(), &joined(), true).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(joined()));
        remove(dir.path()).unwrap();
        assert!(read(dir.path()).unwrap().is_none());
        remove(dir.path()).unwrap();
    }

    #[test]
    fn a_damaged_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &joined(), false).unwrap();
        let path = dir.path().join(JOIN_FILE);
        let good = fs::read(&path).unwrap();
        for bad in [
            good[..good.len() - 1].to_vec(),
            [good.as_slice(), b"x"].concat(),
            [b"ZJOX".as_slice(), &good[4..]].concat(),
            Vec::new(),
        ] {
            fs::write(&path, &bad).unwrap();
            let e = read(dir.path()).unwrap_err();
            assert!(e.to_string().contains(JOIN_FILE), "{e}");
        }
    }
}
