//! The local survivor read offline from its zoo.cfg and data dir: its identity, its epochs, the
//! last zxid it logged, and its committed and in-force configurations, by the rules a start
//! would apply (zab-store's `DataDir::load`, zab-net's boot; see also `fe-meta inspect`).
//!
//! INV-1: nothing is written: the log is read with `zab_store::read_log`, snapshots with
//! their verified reader, the epoch and identity files as text.
//! INV-2: a data dir that cannot become a one-member cluster (removed, an observer, never
//! synced, a damaged log, no voter role) gives a refusal in words, not an error deep inside.

use std::path::{Path, PathBuf};

use fe_meta::server::config::client_listen_of;
use fe_meta::server::meta_dir::MetaDir;
use fe_meta::server::EXTRA_KEYS;
use fe_meta::state::catalog::FrontendRole;
use zab_core::{MemberRole, Membership, ServerId, TxnKind, Zxid};
use zab_net::config::{load, read_myid, NodeConfig};
use zab_store::{EpochFiles, EpochKind, SnapDir};

use super::choose::Held;
use crate::offline::read_join_file;
use crate::Failure;

/// The local survivor as found on disk.
#[derive(Debug)]
pub(crate) struct Local {
    /// Its zoo.cfg, parsed.
    pub node: NodeConfig,
    /// Its server id (`dataDir/myid`).
    pub sid: u64,
    /// Its client endpoint (`host:port`), where a running node would answer.
    pub client_addr: String,
    /// What it holds, as the survey shows it.
    pub held: Held,
    /// The configuration it would use at start (the newest in its log, else the committed).
    pub in_force: Membership,
    /// The zxid of the snapshot a start would load (`Zxid::ZERO`: none).
    pub snapshot: Zxid,
    /// The log's last zxid (or its floor when it holds no record).
    pub log_last: Zxid,
    /// Why this data dir cannot be recovered from, if it cannot (INV-2).
    pub refusal: Option<String>,
}

fn fail(what: impl std::fmt::Display) -> Failure {
    Failure::other(what.to_string())
}

/// Reads the local survivor of `config` (INV-1).
pub(crate) fn read(config: &Path) -> Result<Local, Failure> {
    let node = load(config, EXTRA_KEYS).map_err(|e| {
        fail(format!(
            "{}: {e} (the recovered node starts without --helper: its zoo.cfg needs tickTime,              initLimit, syncLimit and clusterId; `fe-meta show-config` on a survivor prints              them)",
            config.display()
        ))
    })?;
    let sid = read_myid(&node.data_dir).map_err(fail)?.0;
    let client_addr = client_addr(&node, sid)?;
    let dir = node.data_dir.clone();
    let meta = MetaDir::new(&dir);
    let epochs = EpochFiles::open(&dir, false).map_err(fail)?;
    let epoch = |k| {
        epochs
            .read(k)
            .map(|e| e.unwrap_or_default().0)
            .map_err(fail)
    };
    let (accepted_epoch, current_epoch) = (epoch(EpochKind::Accepted)?, epoch(EpochKind::Current)?);
    let (snapshot, snap_conf) = newest_snapshot(&dir)?;
    let join = read_join_file(&dir.join("joinConfiguration")).map_err(fail)?;
    let committed = match (snap_conf, join) {
        (Some(s), Some(j)) if j.version > s.version => j,
        (Some(s), _) => s,
        (None, Some(j)) => j,
        (None, None) => fe_meta::server::config::bootstrap_membership(&node),
    };
    let mut in_force = committed.clone();
    let log = zab_store::read_log(&node.data_log_dir, |r| {
        if r.kind == TxnKind::Membership && r.zxid > snapshot && r.zxid > in_force.version {
            if let Ok(m) = Membership::decode(r.zxid, r.payload) {
                in_force = m;
            }
        }
    })
    .map_err(fail)?;
    let log_last = log.last_zxid.unwrap_or(log.floor);
    let mut refusal = None;
    if !log.would_start() {
        refusal = Some(format!(
            "its txn log {} is damaged ({:?}): run `fe-meta inspect {}` and repair it first",
            node.data_log_dir.display(),
            log.damage,
            dir.display()
        ));
    }
    let initialized = !epochs.needs_initial_sync().map_err(fail)?;
    refusal = refusal.or_else(|| identity_refusal(&meta, sid, initialized, &in_force));
    let held = Held {
        sid,
        cluster_id: meta.read_cluster_id().map_err(fail)?.or(node.cluster_id),
        accepted_epoch,
        current_epoch,
        last_logged: log_last.max(snapshot),
        last_committed: None,
        config_version: committed.version,
        initialized,
        state: "stopped (read from its data dir)".to_string(),
    };
    Ok(Local {
        node,
        sid,
        client_addr,
        held,
        in_force,
        snapshot,
        log_last,
        refusal,
    })
}

/// The client endpoint of server `sid` as `fe-meta server` derives it.
fn client_addr(node: &NodeConfig, sid: u64) -> Result<String, Failure> {
    client_listen_of(node, sid).map_err(fail)
}

/// The newest valid snapshot's zxid and configuration, read to the end (its CRC checked).
fn newest_snapshot(dir: &PathBuf) -> Result<(Zxid, Option<Membership>), Failure> {
    let snaps = SnapDir::open(dir, false).map_err(fail)?;
    let loaded = snaps
        .load_newest(|r| std::io::copy(r, &mut std::io::sink()).map(|_| ()))
        .map_err(fail)?;
    Ok(match loaded {
        Some((info, ())) => (info.zxid, info.membership),
        None => (Zxid::ZERO, None),
    })
}

/// Why this data dir may not become a one-member cluster, from its identity files.
fn identity_refusal(
    meta: &MetaDir,
    sid: u64,
    initialized: bool,
    in_force: &Membership,
) -> Option<String> {
    if let Ok(Some(version)) = meta.read_removed() {
        return Some(format!(
            "server {sid} was removed from the cluster (REMOVED, configuration version \
             {version:#x}): its data dir may not restart the cluster"
        ));
    }
    if let Ok(Some((FrontendRole::Observer, _))) = meta.read_role() {
        return Some(format!(
            "server {sid} is an observer (ROLE): only a voter's data dir can restart the \
             cluster; recover from a follower"
        ));
    }
    if !initialized {
        return Some(format!(
            "server {sid} never completed its first sync (needsInitialSync): its data is not \
             the cluster's; recover from another survivor"
        ));
    }
    match in_force.role_of(ServerId(sid)) {
        Some(MemberRole::Participant) => None,
        Some(role) => Some(format!(
            "server {sid} is a {role} in its configuration (version {}), not a voter: recover \
             from a voter",
            in_force.version
        )),
        None => Some(format!(
            "server {sid} is not in its own configuration (version {})",
            in_force.version
        )),
    }
}
