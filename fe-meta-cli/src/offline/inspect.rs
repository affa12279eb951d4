//! `fe-meta inspect DATA_DIR`: what a node would do at start from its data dir, read without
//! starting it: its identity (VERSION, ROLE, REMOVED), the epoch files, every snapshot checked
//! end to end, the txn log's range and state, which snapshot it would load and how many log
//! records it would replay, and the committed configuration it would use.
//!
//! The start rules mirrored here are zab-store's `DataDir::load` (newest valid snapshot, the log
//! tail after it, a log that ends before it restarts at it) and zab-net's boot (the committed
//! configuration is the newest of the snapshot's and `joinConfiguration`'s, else zoo.cfg's
//! `server.N` lines).
//!
//! INV-1: nothing in the data dir is written (see `offline` INV-1).
//! INV-2: every file that cannot be read or does not decode is shown with why, and the
//! command exits 1 when a node would refuse to start from this data dir.

use std::path::{Path, PathBuf};

use clap::Args;
use fe_meta::server::meta_dir::MetaDir;
use serde_json::{json, Value};
use zab_core::{Membership, TxnKind, Zxid};
use zab_store::{parse_snapshot_name, EpochFiles, EpochKind, OfflineLog};

use super::image::{check_file, FileCheck};
use super::render::{log_state_json, log_state_line};
use crate::Failure;

/// The joining node's configuration file in the data dir (zab-net's `join_file`).
const JOIN_FILE: &str = "joinConfiguration";
/// Its magic; then the length (u32) of what follows, the version (u64), the configuration.
const JOIN_MAGIC: &[u8; 4] = b"ZJON";

/// `fe-meta inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The node's dataDir (snapshots, epoch files, VERSION, ROLE).
    #[arg(value_name = "DATA_DIR")]
    pub dir: PathBuf,
    /// The txn log directory, when zoo.cfg sets a dataLogDir other than dataDir.
    #[arg(long, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Everything `inspect` found.
struct Findings {
    cluster_id: Result<Option<u64>, String>,
    role: Result<Option<String>, String>,
    removed: Result<Option<u64>, String>,
    accepted_epoch: Result<Option<u64>, String>,
    current_epoch: Result<Option<u64>, String>,
    needs_initial_sync: Result<bool, String>,
    snapshots: Vec<FileCheck>,
    log: OfflineLog,
    /// Membership records in the log after the loaded snapshot: (zxid, configuration).
    log_configurations: Vec<(Zxid, String)>,
    /// Log records after the newest valid snapshot.
    records_after_snapshot: usize,
    join: Result<Option<Membership>, String>,
}

/// Runs `inspect`.
pub fn run(args: &InspectArgs) -> Result<(), Failure> {
    let dir = &args.dir;
    if !dir.is_dir() {
        return Err(Failure::other(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    let log_dir = args.log_dir.as_deref().unwrap_or(dir);
    let f = inspect(dir, log_dir)?;
    let plan = plan(&f);
    if args.json {
        println!("{}", to_json(&f, &plan));
    } else {
        print!("{}", to_text(dir, &f, &plan));
    }
    match &plan.refusal {
        None => Ok(()),
        Some(why) => Err(Failure::other(format!(
            "a node would not start from {}: {why}",
            dir.display()
        ))),
    }
}

fn inspect(dir: &Path, log_dir: &Path) -> Result<Findings, Failure> {
    let meta = MetaDir::new(dir);
    let epochs = EpochFiles::open(dir, false).map_err(|e| Failure::other(e.to_string()))?;
    let epoch = |k| {
        epochs
            .read(k)
            .map(|e| e.map(|e| u64::from(e.0)))
            .map_err(|e| e.to_string())
    };
    let mut snapshots = Vec::new();
    let names = std::fs::read_dir(dir)
        .map_err(|e| Failure::other(format!("cannot list {}: {e}", dir.display())))?;
    let mut found: Vec<(Zxid, PathBuf)> = names
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            parse_snapshot_name(&name).map(|z| (z, e.path()))
        })
        .collect();
    found.sort();
    for (zxid, path) in found.iter().rev() {
        snapshots.push(check_file(path, Some(*zxid)));
    }
    let loaded = snapshots
        .iter()
        .find(|s| s.is_valid())
        .and_then(|s| s.snapshot.as_ref().map(|h| h.zxid))
        .unwrap_or(Zxid::ZERO);
    let mut log_configurations = Vec::new();
    let mut records_after_snapshot = 0;
    let log = zab_store::read_log(log_dir, |r| {
        if r.zxid > loaded {
            records_after_snapshot += 1;
        }
        if r.kind == TxnKind::Membership && r.zxid > loaded {
            let text = Membership::decode(r.zxid, r.payload)
                .map_or_else(|e| format!("does not decode: {e}"), |m| m.to_string());
            log_configurations.push((r.zxid, text));
        }
    })
    .map_err(|e| Failure::other(e.to_string()))?;
    Ok(Findings {
        cluster_id: meta.read_cluster_id().map_err(|e| e.to_string()),
        role: meta
            .read_role()
            .map(|r| r.map(|(role, sid)| format!("{role:?} sid={sid}")))
            .map_err(|e| e.to_string()),
        removed: meta.read_removed().map_err(|e| e.to_string()),
        accepted_epoch: epoch(EpochKind::Accepted),
        current_epoch: epoch(EpochKind::Current),
        needs_initial_sync: epochs.needs_initial_sync().map_err(|e| e.to_string()),
        snapshots,
        log,
        log_configurations,
        records_after_snapshot,
        join: read_join_file(&dir.join(JOIN_FILE)),
    })
}

/// Reads `joinConfiguration` (absent: `None`).
pub(crate) fn read_join_file(path: &Path) -> Result<Option<Membership>, String> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let bad = |why: &str| format!("{} does not decode: {why}", path.display());
    let rest = bytes
        .strip_prefix(&JOIN_MAGIC[..])
        .ok_or_else(|| bad("bad magic"))?;
    let (len, rest) = rest.split_first_chunk::<4>().ok_or_else(|| bad("short"))?;
    let len = u32::from_be_bytes(*len) as usize;
    let section = rest
        .get(..len)
        .ok_or_else(|| bad("shorter than its length"))?;
    if rest.len() != len {
        return Err(bad("bytes after the configuration"));
    }
    let (version, encoded) = section
        .split_first_chunk::<8>()
        .ok_or_else(|| bad("short"))?;
    Membership::decode(Zxid(u64::from_be_bytes(*version)), encoded)
        .map(Some)
        .map_err(|e| bad(&e.to_string()))
}

/// What a start would do.
struct Plan {
    /// The snapshot it would load.
    snapshot: Option<Zxid>,
    /// Log records after it that it would replay.
    replay: usize,
    /// What happens to the log.
    log_action: String,
    /// The committed configuration, and where it comes from.
    configuration: String,
    /// Why it would refuse to start, if it would.
    refusal: Option<String>,
}

fn plan(f: &Findings) -> Plan {
    let loaded = f.snapshots.iter().find(|s| s.is_valid());
    let snapshot = loaded.and_then(|s| s.snapshot.as_ref());
    let snap_zxid = snapshot.map_or(Zxid::ZERO, |h| h.zxid);
    let log = &f.log;
    let last = log.last_zxid.unwrap_or(log.floor);
    let mut refusal = None;
    let (log_action, replay) = if !log.would_start() {
        refusal = Some(format!("txn log: {}", log_state_line(log)));
        ("none: the log is damaged".to_string(), 0)
    } else if last < snap_zxid {
        (
            format!("the log ends at {last}, before the snapshot: it restarts at {snap_zxid}"),
            0,
        )
    } else if snap_zxid < log.floor {
        refusal = Some(format!(
            "the log starts after {} but the newest valid snapshot is at {snap_zxid}: records \
             between them are missing",
            log.floor
        ));
        ("none".to_string(), 0)
    } else {
        let n = f.records_after_snapshot;
        (
            format!("replays {n} records after {snap_zxid} up to {last}"),
            n,
        )
    };
    if let Ok(Some(version)) = f.removed {
        refusal.get_or_insert(format!(
            "REMOVED: this server was removed by the configuration of version {version:#x}"
        ));
    }
    let join = f.join.as_ref().ok().and_then(|j| j.as_ref());
    let snap_conf = snapshot.and_then(|h| h.membership.as_ref());
    let configuration = match (snap_conf, join) {
        (Some(s), Some(j)) if j.version > s.version => format!("{j} (joinConfiguration)"),
        (Some(s), _) => format!("{s} (snapshot {snap_zxid})"),
        (None, Some(j)) => format!("{j} (joinConfiguration)"),
        (None, None) => "zoo.cfg's server.N lines (bootstrap)".to_string(),
    };
    Plan {
        snapshot: snapshot.map(|h| h.zxid),
        replay,
        log_action,
        configuration,
        refusal,
    }
}

fn show<T: std::fmt::Display>(r: &Result<Option<T>, String>, none: &str) -> String {
    match r {
        Ok(Some(v)) => v.to_string(),
        Ok(None) => none.to_string(),
        Err(e) => format!("UNREADABLE: {e}"),
    }
}

fn to_text(dir: &Path, f: &Findings, p: &Plan) -> String {
    let mut s = format!("data dir: {}\n", dir.display());
    s.push_str(&format!(
        "cluster id: {}\n",
        show(
            &f.cluster_id
                .as_ref()
                .map(|c| c.map(|c| format!("{c:#x}")))
                .map_err(Clone::clone),
            "none (no VERSION file)"
        )
    ));
    s.push_str(&format!("role: {}\n", show(&f.role, "none (no ROLE file)")));
    s.push_str(&format!(
        "removed: {}\n",
        show(
            &f.removed
                .as_ref()
                .map(|r| r.map(|v| format!("YES, by the configuration of version {v:#x}")))
                .map_err(Clone::clone),
            "no"
        )
    ));
    s.push_str(&format!(
        "acceptedEpoch: {}  currentEpoch: {}  needsInitialSync: {}\n",
        show(&f.accepted_epoch, "none"),
        show(&f.current_epoch, "none"),
        match &f.needs_initial_sync {
            Ok(b) => b.to_string(),
            Err(e) => format!("UNREADABLE: {e}"),
        }
    ));
    s.push_str(&format!("snapshots: {}\n", f.snapshots.len()));
    for snap in &f.snapshots {
        s.push_str(&format!("  {}\n", snap.text()));
        if let Some(m) = snap.snapshot.as_ref().and_then(|h| h.membership.as_ref()) {
            s.push_str(&format!("    configuration: {m}\n"));
        }
    }
    let log = &f.log;
    s.push_str(&format!(
        "log: {} ({} segments, {} records, after {} up to {})\n  state: {}\n",
        log.dir.display(),
        log.segments.len(),
        log.records,
        log.floor,
        log.last_zxid
            .map_or_else(|| "none".into(), |z| z.to_string()),
        log_state_line(log)
    ));
    for (zxid, conf) in &f.log_configurations {
        s.push_str(&format!("  configuration record at {zxid}: {conf}\n"));
    }
    s.push_str(&format!("joinConfiguration: {}\n", show(&f.join, "none")));
    s.push_str(&format!(
        "start: loads {}; {}\nconfiguration: {}\n",
        p.snapshot
            .map_or_else(|| "no snapshot".into(), |z| format!("snapshot {z}")),
        p.log_action,
        p.configuration
    ));
    match &p.refusal {
        None => s.push_str("would start: yes\n"),
        Some(why) => s.push_str(&format!("would start: NO: {why}\n")),
    }
    s
}

fn res<T: Clone + Into<Value>>(r: &Result<T, String>) -> Value {
    match r {
        Ok(v) => v.clone().into(),
        Err(e) => json!({"error": e}),
    }
}

fn to_json(f: &Findings, p: &Plan) -> Value {
    json!({
        "cluster_id": res(&f.cluster_id),
        "role": res(&f.role),
        "removed": res(&f.removed),
        "accepted_epoch": res(&f.accepted_epoch),
        "current_epoch": res(&f.current_epoch),
        "needs_initial_sync": res(&f.needs_initial_sync),
        "snapshots": f.snapshots.iter().map(FileCheck::json).collect::<Vec<_>>(),
        "log": log_state_json(&f.log),
        "log_configurations": f.log_configurations.iter()
            .map(|(z, c)| json!({"zxid": z.0, "configuration": c})).collect::<Vec<_>>(),
        "join_configuration": res(&f.join.as_ref().map(|j| j.as_ref().map(|m| m.to_string()))
            .map_err(Clone::clone)),
        "start": {
            "snapshot": p.snapshot.map(|z| z.0),
            "replay_records": p.replay,
            "log": p.log_action,
            "configuration": p.configuration,
            "would_start": p.refusal.is_none(),
            "refusal": p.refusal,
        },
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::collections::BTreeMap;
    use zab_core::{LearnerType, ServerId};

    /// The join file as zab-net writes it: magic, length, version, configuration.
    fn join_file_bytes(m: &Membership) -> Vec<u8> {
        let body = m.encode();
        let mut v = JOIN_MAGIC.to_vec();
        v.extend_from_slice(&u32::try_from(8 + body.len()).unwrap().to_be_bytes());
        v.extend_from_slice(&m.version.0.to_be_bytes());
        v.extend_from_slice(&body);
        v
    }

    #[test]
    fn the_join_file_reads_back_and_damage_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join(JOIN_FILE);
        assert_eq!(read_join_file(&path).unwrap(), None, "absent");
        let types: BTreeMap<_, _> = [(ServerId(1), LearnerType::Participant)].into();
        let addrs: BTreeMap<_, _> = [(ServerId(1), "127.0.0.1:1:2".to_string())].into();
        let mut m = Membership::bootstrap(&types, &addrs);
        m.version = Zxid(0x1_0000_0005);
        let bytes = join_file_bytes(&m);
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(read_join_file(&path).unwrap(), Some(m));
        for cut in [2, 6, bytes.len() - 1] {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            let e = read_join_file(&path).unwrap_err();
            assert!(e.contains("does not decode"), "{cut}: {e}");
        }
    }
}
