//! zoo.cfg, parsed into a typed [`NodeConfig`].
//!
//! The file is ZooKeeper's: one `key=value` per line, `#` or `!` starts a comment line,
//! whitespace around keys and values is ignored. Known keys:
//!
//! | key | type | default |
//! |-----|------|---------|
//! | `tickTime` | ms, > 0 | required |
//! | `initLimit`, `syncLimit` | ticks, > 0 | required |
//! | `dataDir` | path | required |
//! | `dataLogDir` | path | `dataDir` |
//! | `clientPort` | port | none |
//! | `server.N` | `host:quorumPort:electionPort[:participant\|:observer][;[clientHost:]clientPort]` | at least one |
//! | `snapCount` | txns, > 0 | 100000 |
//! | `snapSizeLimitInKb` | KiB of txn log since the last snapshot; ≤ 0 disables | 4194304 (4 GiB) |
//! | `snapshotSizeFactor` | a learner whose DIFF from the txn log would exceed this fraction of the newest snapshot's size gets a SNAP; negative disables | 0.33 |
//! | `autopurge.snapRetainCount` | ≥ 3 | 3 |
//! | `autopurge.purgeInterval` | hours, 0 = off | 0 |
//! | `preAllocSize` | KiB, > 0 (as ZooKeeper) | 65536 (64 MiB) |
//! | `forceSync` | `yes` \| `no` | `yes` |
//! | `snapCpuPercent` | % of one core a background snapshot may use while it writes, 1..=100 (100 = no limit) | [`DEFAULT_SNAP_CPU_PERCENT`] |
//! | `clusterId` | u64, decimal or `0x` hex | none |
//! | `sslQuorum`, `ssl.*`, `client.secure` | TLS: see [`tls`](self::TlsSettings) | off |
//!
//! The `server.N` lines are the bootstrap configuration: once membership is replicated, the
//! configuration in force comes from the data dir, and each member's address is the canonical
//! text of its `server.N` value ([`ServerAddr::to_value`], [`NodeConfig::bootstrap_addresses`]).
//!
//! The embedding application declares keys of its own with [`parse_with`]; they are returned,
//! unparsed, in [`NodeConfig::extra`], and [`NodeConfig::extra_value`] parses one with errors
//! that name its key and line.
//!
//! INV-1: a [`NodeConfig`] that parsed is complete and consistent: every required key was
//! present, every value in range, no key appeared twice, at least one server votes, and no two
//! servers share a quorum or election address.
//! INV-2: every error names the offending key (or the malformed line) and its 1-based line.

mod error;
mod server;
mod storage;
#[cfg(test)]
mod tests;
mod tls;
#[cfg(test)]
mod tls_tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use zab_core::{LearnerType, ServerId};

pub use error::ConfigError;
pub use server::{ClientAddr, ServerAddr, ServerAddrError};
pub use tls::{ClientAuth, ClientTlsSettings, QuorumTlsSettings, TlsSettings};

/// A key the embedding application declared, as written in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtraValue {
    /// The value, trimmed.
    pub value: String,
    /// 1-based line number.
    pub line: usize,
}

/// A parsed zoo.cfg.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct NodeConfig {
    /// `tickTime`: the length of a tick in milliseconds.
    pub tick_ms: u64,
    /// `initLimit`: ticks allowed for discovery and sync.
    pub init_limit_ticks: u32,
    /// `syncLimit`: ticks a learner may stay silent.
    pub sync_limit_ticks: u32,
    /// `dataDir`: snapshots, epoch files, `myid`.
    pub data_dir: PathBuf,
    /// `dataLogDir`: the txn log (defaults to `dataDir`).
    pub data_log_dir: PathBuf,
    /// `clientPort`, if given.
    pub client_port: Option<u16>,
    /// `server.N` lines by sid.
    pub servers: BTreeMap<ServerId, ServerAddr>,
    /// `snapCount`: txns between snapshots.
    pub snap_count: u64,
    /// `snapSizeLimitInKb` (given in KiB), in bytes: a snapshot is also taken once this many
    /// bytes of txn log were written since the last one; `None` when disabled (a value ≤ 0).
    pub snap_size_limit_bytes: Option<u64>,
    /// `snapshotSizeFactor` (ZooKeeper's `zookeeper.snapshotSizeFactor`): the leader sends a
    /// SNAP instead of a DIFF from its txn log when that DIFF would exceed this fraction of the
    /// newest snapshot's size; negative disables the rule.
    pub snapshot_size_factor: f64,
    /// `autopurge.snapRetainCount`: snapshots kept by purge.
    pub snap_retain_count: u32,
    /// `autopurge.purgeInterval`: hours between purges; 0 disables purging.
    pub purge_interval_hours: u32,
    /// `preAllocSize` (given in KiB), in bytes: the size txn log segments are preallocated to.
    pub pre_alloc_bytes: u64,
    /// `forceSync`: fsync the txn log. `no` is for tests only: acknowledged writes can be lost.
    pub force_sync: bool,
    /// `snapCpuPercent`: the share of one core (1..=100; 100 = no limit) a background snapshot
    /// may use while it writes; the snapshot thread sleeps to keep its CPU time / wall time at
    /// or below it. SNAPs sent to or received from a learner are not paced.
    pub snap_cpu_percent: u8,
    /// `clusterId`, if given.
    pub cluster_id: Option<u64>,
    /// `sslQuorum`, `client.secure` and their `ssl.*` keys.
    pub tls: TlsSettings,
    /// The application's own keys that were present, by key.
    pub extra: BTreeMap<String, ExtraValue>,
}

/// Parses zoo.cfg text that contains only zoo.cfg keys.
pub fn parse(text: &str) -> Result<NodeConfig, ConfigError> {
    parse_with(text, &[])
}

/// Parses zoo.cfg text in which the keys in `extra` (exact names, or prefixes ending in `.*`,
/// e.g. `"meta.*"`) are also allowed; they are returned in [`NodeConfig::extra`].
pub fn parse_with(text: &str, extra: &[&str]) -> Result<NodeConfig, ConfigError> {
    let mut b = Builder::default();
    for (idx, raw) in text.lines().enumerate() {
        let line = idx + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!') {
            continue;
        }
        let Some((key, value)) = trimmed.split_once('=') else {
            return Err(ConfigError::Syntax {
                line,
                text: trimmed.to_string(),
            });
        };
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty() {
            return Err(ConfigError::Syntax {
                line,
                text: trimmed.to_string(),
            });
        }
        if let Some(&first_line) = b.seen.get(key) {
            return Err(ConfigError::Duplicate {
                key: key.to_string(),
                line,
                first_line,
            });
        }
        b.seen.insert(key.to_string(), line);
        b.set(key, value, line, extra)?;
    }
    b.finish()
}

/// Reads and parses a zoo.cfg file; see [`parse_with`].
pub fn load(path: &Path, extra: &[&str]) -> Result<NodeConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_with(&text, extra)
}

/// Reads the server id from `dataDir/myid`, as ZooKeeper does.
pub fn read_myid(data_dir: &Path) -> Result<ServerId, ConfigError> {
    let path = data_dir.join("myid");
    let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Io {
        path: path.clone(),
        source,
    })?;
    let value = text.trim();
    value
        .parse::<u64>()
        .map(ServerId)
        .map_err(|e| ConfigError::BadValue {
            key: path.display().to_string(),
            line: 1,
            value: value.to_string(),
            reason: e.to_string(),
        })
}

impl NodeConfig {
    /// The protocol configuration of server `sid` (ZooKeeper's defaults for what zoo.cfg does
    /// not set).
    pub fn to_core(&self, sid: ServerId) -> Result<zab_core::Config, ConfigError> {
        if !self.servers.contains_key(&sid) {
            return Err(ConfigError::NotAMember { sid: sid.0 });
        }
        let members = self
            .servers
            .iter()
            .map(|(id, s)| (*id, s.learner_type))
            .collect();
        let mut cfg = zab_core::Config::new(sid, members);
        cfg.addresses = self.bootstrap_addresses();
        cfg.tick_ms = self.tick_ms;
        cfg.init_limit_ticks = self.init_limit_ticks;
        cfg.sync_limit_ticks = self.sync_limit_ticks;
        cfg.snapshot_size_factor = self.snapshot_size_factor;
        Ok(cfg)
    }

    /// Each `server.N` line's value in canonical form ([`ServerAddr::to_value`]): the address
    /// text of the bootstrap members (`zab_core::Config::addresses`, which
    /// [`NodeConfig::to_core`] fills with it).
    pub fn bootstrap_addresses(&self) -> BTreeMap<ServerId, String> {
        self.servers
            .iter()
            .map(|(sid, s)| (*sid, s.to_value()))
            .collect()
    }

    /// Parses the application key `key`, if present; a value that does not parse is a
    /// [`ConfigError::BadValue`] naming the key and its line.
    pub fn extra_value<T>(&self, key: &str) -> Result<Option<T>, ConfigError>
    where
        T: FromStr,
        T::Err: std::fmt::Display,
    {
        let Some(v) = self.extra.get(key) else {
            return Ok(None);
        };
        v.value
            .parse::<T>()
            .map(Some)
            .map_err(|e| ConfigError::BadValue {
                key: key.to_string(),
                line: v.line,
                value: v.value.clone(),
                reason: e.to_string(),
            })
    }
}

/// Accumulates keys while parsing; `finish` checks completeness.
#[derive(Default)]
struct Builder {
    seen: BTreeMap<String, usize>,
    tick_ms: Option<u64>,
    init_limit_ticks: Option<u32>,
    sync_limit_ticks: Option<u32>,
    data_dir: Option<PathBuf>,
    data_log_dir: Option<PathBuf>,
    client_port: Option<u16>,
    servers: BTreeMap<ServerId, (ServerAddr, usize)>,
    snap_count: Option<u64>,
    snap_size_limit_kib: Option<i64>,
    snapshot_size_factor: Option<f64>,
    snap_retain_count: Option<u32>,
    purge_interval_hours: Option<u32>,
    pre_alloc_kib: Option<u64>,
    force_sync: Option<bool>,
    snap_cpu_percent: Option<u8>,
    cluster_id: Option<u64>,
    tls: tls::TlsKeys,
    extra: BTreeMap<String, ExtraValue>,
}

/// One `key=value` line being parsed.
struct Entry<'a> {
    key: &'a str,
    value: &'a str,
    line: usize,
}

impl Entry<'_> {
    /// The value does not fit the key, for `reason`.
    fn bad(&self, reason: &str) -> ConfigError {
        ConfigError::BadValue {
            key: self.key.to_string(),
            line: self.line,
            value: self.value.to_string(),
            reason: reason.to_string(),
        }
    }

    fn positive<T: FromStr + PartialOrd + Default>(&self) -> Result<T, ConfigError> {
        positive(self.value).ok_or_else(|| self.bad(POSITIVE))
    }

    fn path(&self) -> Result<PathBuf, ConfigError> {
        path(self.value).ok_or_else(|| self.bad(PATH))
    }
}

impl Builder {
    fn set(
        &mut self,
        key: &str,
        value: &str,
        line: usize,
        extra: &[&str],
    ) -> Result<(), ConfigError> {
        let e = Entry { key, value, line };
        if self.set_cluster(&e)? || self.set_storage(&e)? || self.tls.set(&e)? {
            return Ok(());
        }
        if key.starts_with("server.") {
            let sid = key
                .strip_prefix("server.")
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or_else(|| ConfigError::UnknownKey {
                    key: key.to_string(),
                    line,
                })?;
            let addr = ServerAddr::parse_value(value).map_err(|err| e.bad(&err.reason))?;
            return self.add_server(ServerId(sid), addr, key, line);
        }
        if !is_extra(key, extra) {
            return Err(ConfigError::UnknownKey {
                key: key.to_string(),
                line,
            });
        }
        let extra = ExtraValue {
            value: value.to_string(),
            line,
        };
        self.extra.insert(key.to_string(), extra);
        Ok(())
    }

    /// Timing, directories, ports and the cluster id; false when `e` is none of them.
    fn set_cluster(&mut self, e: &Entry<'_>) -> Result<bool, ConfigError> {
        let value = e.value;
        match e.key {
            "tickTime" => self.tick_ms = Some(e.positive()?),
            "initLimit" => self.init_limit_ticks = Some(e.positive()?),
            "syncLimit" => self.sync_limit_ticks = Some(e.positive()?),
            "dataDir" => self.data_dir = Some(e.path()?),
            "dataLogDir" => self.data_log_dir = Some(e.path()?),
            "clientPort" => {
                let port = value
                    .parse()
                    .map_err(|_| e.bad("expected a port 0-65535"))?;
                self.client_port = Some(port);
            }
            "clusterId" => {
                let parsed = match value
                    .strip_prefix("0x")
                    .or_else(|| value.strip_prefix("0X"))
                {
                    Some(hex) => u64::from_str_radix(hex, 16),
                    None => value.parse(),
                };
                self.cluster_id =
                    Some(parsed.map_err(|_| e.bad("expected a u64, decimal or 0x hex"))?);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn add_server(
        &mut self,
        sid: ServerId,
        addr: ServerAddr,
        key: &str,
        line: usize,
    ) -> Result<(), ConfigError> {
        for (other, (o, _)) in &self.servers {
            let ours = [addr.quorum_endpoint(), addr.election_endpoint()];
            for theirs in [o.quorum_endpoint(), o.election_endpoint()] {
                if ours.contains(&theirs) {
                    return Err(ConfigError::AddressInUse {
                        key: key.to_string(),
                        line,
                        addr: theirs,
                        other: other.0,
                    });
                }
            }
        }
        self.servers.insert(sid, (addr, line));
        Ok(())
    }

    fn finish(self) -> Result<NodeConfig, ConfigError> {
        let tick_ms = self
            .tick_ms
            .ok_or(ConfigError::Missing { key: "tickTime" })?;
        let init_limit_ticks = self
            .init_limit_ticks
            .ok_or(ConfigError::Missing { key: "initLimit" })?;
        let sync_limit_ticks = self
            .sync_limit_ticks
            .ok_or(ConfigError::Missing { key: "syncLimit" })?;
        let data_dir = self
            .data_dir
            .ok_or(ConfigError::Missing { key: "dataDir" })?;
        if self.servers.is_empty() {
            return Err(ConfigError::Missing { key: "server.N" });
        }
        if !self
            .servers
            .values()
            .any(|(s, _)| s.learner_type == LearnerType::Participant)
        {
            return Err(ConfigError::NoParticipants);
        }
        Ok(NodeConfig {
            tick_ms,
            init_limit_ticks,
            sync_limit_ticks,
            data_log_dir: self.data_log_dir.unwrap_or_else(|| data_dir.clone()),
            data_dir,
            client_port: self.client_port,
            servers: self.servers.into_iter().map(|(k, (v, _))| (k, v)).collect(),
            snap_count: self.snap_count.unwrap_or(100_000),
            snap_size_limit_bytes: u64::try_from(
                self.snap_size_limit_kib
                    .unwrap_or(DEFAULT_SNAP_SIZE_LIMIT_KIB),
            )
            .ok()
            .filter(|kib| *kib > 0)
            .map(|kib| kib * 1024),
            snapshot_size_factor: self.snapshot_size_factor.unwrap_or(0.33),
            snap_retain_count: self.snap_retain_count.unwrap_or(3),
            purge_interval_hours: self.purge_interval_hours.unwrap_or(0),
            pre_alloc_bytes: self.pre_alloc_kib.unwrap_or(65_536) * 1024,
            force_sync: self.force_sync.unwrap_or(true),
            snap_cpu_percent: self.snap_cpu_percent.unwrap_or(DEFAULT_SNAP_CPU_PERCENT),
            cluster_id: self.cluster_id,
            tls: self.tls.finish()?,
            extra: self.extra,
        })
    }
}

/// ZooKeeper's default `snapSizeLimitInKb`: 4 GiB.
pub const DEFAULT_SNAP_SIZE_LIMIT_KIB: i64 = 4_194_304;

/// The default `snapCpuPercent` (docs/BENCHMARKS.md, "Pacing background snapshots").
pub const DEFAULT_SNAP_CPU_PERCENT: u8 = 25;

const POSITIVE: &str = "expected an integer > 0";
const PATH: &str = "expected a non-empty path";

fn positive<T: FromStr + PartialOrd + Default>(value: &str) -> Option<T> {
    value.parse::<T>().ok().filter(|v| *v > T::default())
}

fn path(value: &str) -> Option<PathBuf> {
    (!value.is_empty()).then(|| PathBuf::from(value))
}

fn is_extra(key: &str, extra: &[&str]) -> bool {
    extra.iter().any(|e| match e.strip_suffix('*') {
        Some(prefix) => key.starts_with(prefix) && key.len() > prefix.len(),
        None => *e == key,
    })
}
