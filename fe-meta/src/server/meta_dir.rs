//! The node's identity files in its data dir: `VERSION` (the cluster id) and `ROLE`.
//!
//! ```text
//! VERSION                          ROLE
//! # fe-meta cluster identity ...   # fe-meta node role ...
//! cluster_id=8145893162042127745   role=FOLLOWER
//!                                  sid=1
//! ```
//! Text `key=value` lines (as Doris' files); `#` starts a comment; unknown keys are errors.
//!
//! INV-1: the cluster id is made once, at the first bootstrap ([`StartCheck::may_bootstrap`]),
//! random and non-zero, and never changes; a node whose `VERSION` names another cluster than
//! the one it is told to join refuses to start (a foreign or missing cluster id never
//! joins or votes: PITFALLS E5).
//! INV-2: a node whose `ROLE` (FOLLOWER / OBSERVER; the leader's is FOLLOWER too) or sid differs
//! from its configuration refuses to start; the message names the file, both values and what
//! to do.
//! INV-3: the files are replaced atomically (temp file, fsync, rename, fsync of the dir), so
//! a crash leaves the old file or the new one, never a torn one.
//! INV-4: once `REMOVED` exists (written when the running node applied the configuration that
//! removed it) the data dir never starts again ([`MetaDirError::Removed`]): it is the durable
//! record of the removal even when no snapshot of the node carries it yet. Only wiping the
//! data dir clears it.
//!
//! A node joining with `--helper` checks the files first ([`MetaDir::verify`]) and writes
//! them ([`MetaDir::open`]) only once the node started, i.e. once the configuration it joined
//! with is durable: a data dir with VERSION always knows its cluster's configuration.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::state::catalog::FrontendRole;

/// The cluster id file's name.
pub const VERSION_FILE: &str = "VERSION";
/// The role file's name.
pub const ROLE_FILE: &str = "ROLE";
/// The removal record's name (INV-4).
pub const REMOVED_FILE: &str = "REMOVED";

/// Why the data dir's identity is unusable.
#[derive(Debug, Error)]
pub enum MetaDirError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// A file does not parse.
    #[error("{path} line {line}: {why}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// The 1-based line (0: the file as a whole).
        line: usize,
        /// What is wrong.
        why: String,
    },
    /// The data dir belongs to another cluster.
    #[error(
        "refusing to start: {path} says this data belongs to cluster {found}, but this node is \
         configured to join cluster {expected}; use an empty data dir to join this cluster, or \
         point the node at its own cluster"
    )]
    ClusterIdMismatch {
        /// The VERSION file.
        path: PathBuf,
        /// Its cluster id.
        found: u64,
        /// The cluster id the node was told to join.
        expected: u64,
    },
    /// No VERSION, and this node may not create a cluster.
    #[error(
        "refusing to start: {path} is missing and this node may not bootstrap a new cluster \
         (it would form a cluster of its own); start it with the existing cluster's id, or \
         bootstrap deliberately"
    )]
    NoClusterId {
        /// The missing VERSION file.
        path: PathBuf,
    },
    /// The role on disk differs from the configured one.
    #[error(
        "refusing to start: {path} says this node is a {found}, but it is configured as a \
         {configured}; a node cannot change role in place: fix the configuration, or remove \
         the node from the cluster and add it back with an empty data dir"
    )]
    RoleMismatch {
        /// The ROLE file.
        path: PathBuf,
        /// Its role.
        found: &'static str,
        /// The configured role.
        configured: &'static str,
    },
    /// The sid on disk differs from the configured one.
    #[error(
        "refusing to start: {path} says this data dir belongs to server {found}, but this node \
         is server {configured}; data dirs cannot move between servers"
    )]
    SidMismatch {
        /// The ROLE file.
        path: PathBuf,
        /// Its sid.
        found: u64,
        /// The configured sid.
        configured: u64,
    },
    /// The running node applied its own removal (INV-4).
    #[error(
        "{path}: this server was removed from the cluster by configuration version {version:#x}"
    )]
    Removed {
        /// The REMOVED file.
        path: PathBuf,
        /// The configuration that removed it.
        version: u64,
    },
}

/// What the configuration says about this node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartCheck {
    /// This node's server id.
    pub sid: u64,
    /// Its configured role.
    pub role: FrontendRole,
    /// The cluster it must belong to, when known (from config or from the cluster it joins).
    pub cluster_id: Option<u64>,
    /// Whether it may create a new cluster id when its dir has none.
    pub may_bootstrap: bool,
}

/// The identity the node starts with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaIdentity {
    /// The cluster id (from VERSION).
    pub cluster_id: u64,
    /// The role (from ROLE).
    pub role: FrontendRole,
    /// The server id (from ROLE).
    pub sid: u64,
    /// Whether this start created the cluster id (a first bootstrap).
    pub bootstrapped: bool,
}

/// A random, non-zero cluster id.
pub fn new_cluster_id() -> u64 {
    loop {
        let id: u64 = rand::random();
        if id != 0 {
            return id;
        }
    }
}

/// The identity files of one data dir.
#[derive(Clone, Debug)]
pub struct MetaDir {
    dir: PathBuf,
}

impl MetaDir {
    /// The files in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> MetaDir {
        MetaDir { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Checks the files against `check`, creating missing ones (see INV-1, INV-2, INV-4).
    pub fn open(&self, check: &StartCheck) -> Result<MetaIdentity, MetaDirError> {
        fs::create_dir_all(&self.dir).map_err(|source| MetaDirError::Io {
            path: self.dir.clone(),
            source,
        })?;
        let found_role = self.verify(check)?;
        let version_path = self.dir.join(VERSION_FILE);
        let (cluster_id, bootstrapped) = match (self.read_cluster_id()?, check.cluster_id) {
            (Some(found), _) => (found, false),
            (None, Some(expected)) => {
                self.write_cluster_id(expected)?;
                (expected, false)
            }
            (None, None) if check.may_bootstrap => {
                let id = new_cluster_id();
                self.write_cluster_id(id)?;
                (id, true)
            }
            (None, None) => return Err(MetaDirError::NoClusterId { path: version_path }),
        };
        if !found_role {
            self.write_role(check.role, check.sid)?;
        }
        Ok(MetaIdentity {
            cluster_id,
            role: check.role,
            sid: check.sid,
            bootstrapped,
        })
    }

    /// Checks the files that exist against `check` without writing anything (INV-1, INV-2,
    /// INV-4); whether ROLE exists.
    pub fn verify(&self, check: &StartCheck) -> Result<bool, MetaDirError> {
        if let Some(version) = self.read_removed()? {
            return Err(MetaDirError::Removed {
                path: self.dir.join(REMOVED_FILE),
                version,
            });
        }
        if let (Some(found), Some(expected)) = (self.read_cluster_id()?, check.cluster_id) {
            if found != expected {
                return Err(MetaDirError::ClusterIdMismatch {
                    path: self.dir.join(VERSION_FILE),
                    found,
                    expected,
                });
            }
        }
        let role_path = self.dir.join(ROLE_FILE);
        match self.read_role()? {
            Some((found, _)) if found != check.role => Err(MetaDirError::RoleMismatch {
                path: role_path,
                found: found.name(),
                configured: check.role.name(),
            }),
            Some((_, sid)) if sid != check.sid => Err(MetaDirError::SidMismatch {
                path: role_path,
                found: sid,
                configured: check.sid,
            }),
            Some(_) => Ok(true),
            None => Ok(false),
        }
    }

    /// The version of the configuration that removed this server, if REMOVED exists.
    pub fn read_removed(&self) -> Result<Option<u64>, MetaDirError> {
        let path = self.dir.join(REMOVED_FILE);
        let Some(pairs) = read_pairs(&path, &["version"])? else {
            return Ok(None);
        };
        let raw = required(&path, &pairs, "version")?;
        raw.parse::<u64>()
            .map(Some)
            .map_err(|_| malformed(&path, 0, format!("version {raw:?} is not a u64")))
    }

    /// Writes REMOVED atomically (INV-4).
    pub fn write_removed(&self, version: u64) -> Result<(), MetaDirError> {
        let text = format!(
            "# fe-meta: this server was removed from the cluster by the configuration below; \
             this data dir cannot rejoin. Wipe it to add the server again.\nversion={version}\n"
        );
        write_atomic(&self.dir, REMOVED_FILE, &text)
    }

    /// The cluster id in VERSION, if the file exists.
    pub fn read_cluster_id(&self) -> Result<Option<u64>, MetaDirError> {
        let path = self.dir.join(VERSION_FILE);
        let Some(pairs) = read_pairs(&path, &["cluster_id"])? else {
            return Ok(None);
        };
        let raw = required(&path, &pairs, "cluster_id")?;
        match raw.parse::<u64>() {
            Ok(id) if id != 0 => Ok(Some(id)),
            _ => Err(malformed(
                &path,
                0,
                format!("cluster_id {raw:?} is not a non-zero u64"),
            )),
        }
    }

    /// Writes VERSION atomically.
    pub fn write_cluster_id(&self, cluster_id: u64) -> Result<(), MetaDirError> {
        let text = format!(
            "# fe-meta cluster identity, made at the cluster's first bootstrap. Do not edit.\n\
             cluster_id={cluster_id}\n"
        );
        write_atomic(&self.dir, VERSION_FILE, &text)
    }

    /// The role and sid in ROLE, if the file exists.
    pub fn read_role(&self) -> Result<Option<(FrontendRole, u64)>, MetaDirError> {
        let path = self.dir.join(ROLE_FILE);
        let Some(pairs) = read_pairs(&path, &["role", "sid"])? else {
            return Ok(None);
        };
        let raw = required(&path, &pairs, "role")?;
        let role = FrontendRole::parse(raw).ok_or_else(|| {
            malformed(
                &path,
                0,
                format!("role {raw:?} is neither FOLLOWER nor OBSERVER"),
            )
        })?;
        let raw = required(&path, &pairs, "sid")?;
        let sid = raw
            .parse::<u64>()
            .map_err(|_| malformed(&path, 0, format!("sid {raw:?} is not a u64")))?;
        Ok(Some((role, sid)))
    }

    /// Writes ROLE atomically.
    pub fn write_role(&self, role: FrontendRole, sid: u64) -> Result<(), MetaDirError> {
        let text = format!(
            "# fe-meta node role (the leader's is FOLLOWER too). Do not edit.\nrole={}\nsid={sid}\n",
            role.name()
        );
        write_atomic(&self.dir, ROLE_FILE, &text)
    }
}

fn malformed(path: &Path, line: usize, why: String) -> MetaDirError {
    MetaDirError::Malformed {
        path: path.to_owned(),
        line,
        why,
    }
}

fn required<'a>(
    path: &Path,
    pairs: &'a [(String, String)],
    key: &str,
) -> Result<&'a str, MetaDirError> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .ok_or_else(|| malformed(path, 0, format!("missing key {key}")))
}

/// Reads `key=value` lines; `None` if the file does not exist.
fn read_pairs(path: &Path, keys: &[&str]) -> Result<Option<Vec<(String, String)>>, MetaDirError> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(MetaDirError::Io {
                path: path.to_owned(),
                source,
            })
        }
    };
    let mut pairs: Vec<(String, String)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(malformed(
                path,
                i + 1,
                format!("expected key=value, found {line:?}"),
            ));
        };
        let (k, v) = (k.trim(), v.trim());
        if !keys.contains(&k) {
            return Err(malformed(path, i + 1, format!("unknown key {k:?}")));
        }
        if pairs.iter().any(|(seen, _)| seen == k) {
            return Err(malformed(path, i + 1, format!("key {k:?} appears twice")));
        }
        pairs.push((k.to_owned(), v.to_owned()));
    }
    Ok(Some(pairs))
}

fn write_atomic(dir: &Path, name: &str, text: &str) -> Result<(), MetaDirError> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    let io_err = |path: &Path| {
        let path = path.to_owned();
        move |source| MetaDirError::Io { path, source }
    };
    let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
    f.write_all(text.as_bytes()).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    drop(f);
    fs::rename(&tmp, &path).map_err(io_err(&path))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}
