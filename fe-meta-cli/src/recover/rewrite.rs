//! Making the stopped local survivor a one-member cluster of itself, with its data.
//!
//! How: the node's log gets one more txn, a configuration {this server, voter} at zxid
//! `(E, 1)` where `E` is one above every epoch the data dir knows (acceptedEpoch,
//! currentEpoch, the log's and the snapshot's last epoch), and both epoch files become `E`.
//! This is what the node's log would hold had it led epoch `E` and logged that change: at start
//! the configuration is in force as soon as it is logged (zab-core `membership` R1), the node
//! is a quorum alone, wins the election in epoch `E + 1`, and its NEWLEADER quorum (itself)
//! commits its whole history, the new configuration with it. Its version `(E, 1)` is above
//! every configuration any old member holds, and the cluster id does not change.
//!
//! INV-1: every file this changes is first copied to `DATA_DIR/recover-<UTC time>/` (the epoch
//! files, `joinConfiguration`, unfinished `*.tmp` files, the log segments from the last one
//! holding a record on — or every segment when loading would restart the log at the
//! snapshot), with a `RESTORE.txt` that says how to go back and which segment files the
//! rewrite created.
//! INV-2: crash order: acceptedEpoch first, then the configuration txn (synced), then
//! currentEpoch. After a crash at any point the node starts with its old configuration or the
//! new one, and never proposes a zxid its log already holds (its acceptedEpoch is `E`); running
//! the command again adds a newer one-member configuration.
//! INV-3: the log is opened and loaded as a start would (`DataDir`), so recovery's repairs (a
//! torn tail cut, a log behind its snapshot restarted there) happen here, after the copy.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use zab_core::{Epoch, Member, MemberRole, Membership, ServerId, Zxid};
use zab_store::{DataDir, EpochKind, LogOptions};

use super::local::Local;
use crate::Failure;

/// What the rewrite did.
#[derive(Debug)]
pub(crate) struct Rewritten {
    /// Where the old files were copied.
    pub set_aside: PathBuf,
    /// The files copied there.
    pub copied: Vec<PathBuf>,
    /// The new configuration (its version is the txn's zxid).
    pub membership: Membership,
}

fn fail(what: impl std::fmt::Display) -> Failure {
    Failure::other(what.to_string())
}

/// The one-member configuration of the local node at `version`: its address from the
/// configuration in force (else its zoo.cfg line).
pub(crate) fn one_member(local: &Local, version: Zxid) -> Membership {
    let sid = ServerId(local.sid);
    let address = local
        .in_force
        .members
        .get(&sid)
        .map(|m| m.address.clone())
        .or_else(|| local.node.servers.get(&sid).map(|s| s.to_value()))
        .unwrap_or_default();
    let member = Member {
        role: MemberRole::Participant,
        address,
    };
    Membership {
        version,
        members: [(sid, member)].into(),
    }
}

/// The epoch of the new configuration: one above every epoch the data dir knows.
pub(crate) fn next_epoch(local: &Local) -> Result<Epoch, Failure> {
    let h = &local.held;
    let top = h
        .accepted_epoch
        .max(h.current_epoch)
        .max(h.last_logged.epoch().0);
    top.checked_add(1)
        .map(Epoch)
        .ok_or_else(|| fail("the epoch counter is exhausted; this data dir cannot be recovered"))
}

/// Copies the files the rewrite may change into a new `recover-<stamp>` dir (INV-1).
fn set_aside(local: &Local, stamp: &str) -> Result<(PathBuf, Vec<PathBuf>), Failure> {
    let data = &local.node.data_dir;
    let logs = &local.node.data_log_dir;
    let dir = data.join(format!("recover-{stamp}"));
    fs::create_dir(&dir).map_err(|e| fail(format!("create {}: {e}", dir.display())))?;
    let mut wanted: Vec<PathBuf> = ["acceptedEpoch", "currentEpoch", "joinConfiguration"]
        .iter()
        .map(|n| data.join(n))
        .collect();
    wanted.extend(segments_to_keep(local)?);
    for d in [data, logs] {
        wanted.extend(
            names(d)?
                .into_iter()
                .filter(|n| n.ends_with(".tmp"))
                .map(|n| d.join(n)),
        );
    }
    let mut copied = Vec::new();
    for src in wanted.into_iter().filter(|p| p.is_file()) {
        let Some(name) = src.file_name() else {
            continue;
        };
        let to = dir.join(name);
        if to.exists() {
            continue;
        }
        fs::copy(&src, &to).map_err(|e| fail(format!("copy {}: {e}", src.display())))?;
        fs::File::open(&to)
            .and_then(|f| f.sync_all())
            .map_err(|e| fail(format!("fsync {}: {e}", to.display())))?;
        copied.push(to);
    }
    Ok((dir, copied))
}

/// The log segments the rewrite may change: from the last one holding a record on (recovery
/// removes an empty last segment and appends go to the one before), or every segment when
/// loading would restart the log at the snapshot.
fn segments_to_keep(local: &Local) -> Result<Vec<PathBuf>, Failure> {
    let log = zab_store::read_log(&local.node.data_log_dir, |_| {}).map_err(fail)?;
    let segs = &log.segments;
    let from = if local.log_last < local.snapshot {
        0
    } else {
        segs.iter().rposition(|s| s.records > 0).unwrap_or(0)
    };
    let mut paths: Vec<PathBuf> = segs.iter().skip(from).map(|s| s.path.clone()).collect();
    // Files the reader did not list (past a damage) are kept too.
    for n in segment_names(&local.node.data_log_dir)? {
        let p = local.node.data_log_dir.join(n);
        if !segs.iter().any(|s| s.path == p) {
            paths.push(p);
        }
    }
    Ok(paths)
}

fn names(dir: &Path) -> Result<Vec<String>, Failure> {
    let rd = fs::read_dir(dir).map_err(|e| fail(format!("list {}: {e}", dir.display())))?;
    let mut v: Vec<String> = rd
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    v.sort();
    Ok(v)
}

fn segment_names(dir: &Path) -> Result<Vec<String>, Failure> {
    Ok(names(dir)?
        .into_iter()
        .filter(|n| zab_store::parse_segment_name(n).is_some())
        .collect())
}

/// Rewrites the local node's data dir (INV-1..INV-3); `stamp` names the set-aside dir.
pub(crate) fn rewrite(local: &Local, stamp: &str) -> Result<Rewritten, Failure> {
    let (set_aside, copied) = set_aside(local, stamp)?;
    let before = segment_names(&local.node.data_log_dir)?;
    let opts = LogOptions {
        prealloc_bytes: usize::try_from(local.node.pre_alloc_bytes).unwrap_or(64 << 20),
        force_sync: local.node.force_sync,
    };
    let mut dd = DataDir::open(&local.node.data_dir, &local.node.data_log_dir, opts)
        .map_err(|e| fail(format!("open the data dir: {e}")))?;
    dd.load(|r| std::io::copy(r, &mut std::io::sink()).map(|_| ()))
        .map_err(|e| fail(format!("load the data dir: {e}")))?;
    let epoch = next_epoch(local)?;
    let membership = one_member(local, Zxid::new(epoch, 1));
    let store = |what: &str, e: zab_store::StoreError| fail(format!("{what}: {e}"));
    dd.epochs
        .write(EpochKind::Accepted, epoch)
        .map_err(|e| store("write acceptedEpoch", e))?;
    dd.log
        .append(&membership.to_txn(membership.version))
        .map_err(|e| store("append the configuration", e))?;
    dd.log.sync().map_err(|e| store("sync the txn log", e))?;
    dd.epochs
        .write(EpochKind::Current, epoch)
        .map_err(|e| store("write currentEpoch", e))?;
    drop(dd);
    let new_segments: Vec<String> = segment_names(&local.node.data_log_dir)?
        .into_iter()
        .filter(|n| !before.contains(n))
        .collect();
    write_restore_note(local, &set_aside, &copied, &new_segments)?;
    Ok(Rewritten {
        set_aside,
        copied,
        membership,
    })
}

/// `RESTORE.txt`: how to undo the rewrite (INV-1).
fn write_restore_note(
    local: &Local,
    dir: &Path,
    copied: &[PathBuf],
    new_segments: &[String],
) -> Result<(), Failure> {
    let mut t = format!(
        "fe-meta recover rewrote the data dir of server {} to make it a one-member cluster.\n\
         To go back, with the node stopped:\n",
        local.sid
    );
    for f in copied {
        let name = f.file_name().map(|n| n.to_string_lossy().into_owned());
        let name = name.unwrap_or_default();
        let home = if zab_store::parse_segment_name(&name).is_some() || name.starts_with("log.") {
            &local.node.data_log_dir
        } else {
            &local.node.data_dir
        };
        t += &format!("  cp {} {}\n", f.display(), home.join(&name).display());
    }
    for n in new_segments {
        t += &format!("  rm {}\n", local.node.data_log_dir.join(n).display());
    }
    let path = dir.join("RESTORE.txt");
    fs::File::create(&path)
        .and_then(|mut f| f.write_all(t.as_bytes()).and_then(|()| f.sync_all()))
        .map_err(|e| fail(format!("write {}: {e}", path.display())))
}
