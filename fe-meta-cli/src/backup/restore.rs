//! `fe-meta restore --from FILE --data-dir DIR --config zoo.cfg [--verify-only]`: see the
//! parent module (INV-2).
//!
//! What a restored data dir holds (each file written atomically, in this order):
//! `snapshot.<zxid>` (the backup's image at its journal id, under the new cluster id and
//! zoo.cfg's `server.N` lines as the committed configuration, version 0), `acceptedEpoch` and
//! `currentEpoch` (the epoch of that zxid), and fe-meta's `VERSION` (the new cluster id). No
//! txn log and no `needsInitialSync`: every node of the new cluster restored from the same
//! file starts as a voter at the same zxid, and the first election forms the cluster.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use clap::Args;
use fe_meta::server::config::bootstrap_membership;
use fe_meta::server::meta_dir::MetaDir;
use fe_meta::server::EXTRA_KEYS;
use fe_meta::state::backup::{verify_backup, BackupHeader};
use fe_meta::state::catalog::Catalog;
use fe_meta::state::image::write_image;
use serde_json::json;
use zab_net::config::{load, NodeConfig};
use zab_store::{EpochFiles, EpochKind, SnapDir};

use crate::{ExitCode, Failure};

/// `fe-meta restore`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The backup file (from `fe-meta backup`).
    #[arg(long, value_name = "FILE")]
    pub from: PathBuf,
    /// The data dir to prepare (default: zoo.cfg's dataDir); it must be empty or hold only
    /// `myid`.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// The new node's zoo.cfg: its `clusterId` (new, not the backup's) and `server.N` lines
    /// become the new cluster's.
    #[arg(
        long,
        short = 'c',
        value_name = "FILE",
        required_unless_present = "verify_only"
    )]
    pub config: Option<PathBuf>,
    /// Only verify the file; write nothing.
    #[arg(long)]
    pub verify_only: bool,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `fe-meta restore`.
pub(crate) fn run(args: &RestoreArgs) -> Result<(), Failure> {
    let file = File::open(&args.from)
        .map_err(|e| Failure::other(format!("cannot open {}: {e}", args.from.display())))?;
    let (header, catalog) = verify_backup(std::io::BufReader::new(file)).map_err(|e| {
        Failure::other(format!("{}: {e}; nothing was written", args.from.display()))
    })?;
    let verified = format!(
        "{} verified: cluster {:#x}, journal id {}, digest {}, {} entries",
        args.from.display(),
        header.cluster_id,
        header.journal_id,
        header.digest_hex(),
        header.entry_count
    );
    let Some(config) = args.config.as_deref().filter(|_| !args.verify_only) else {
        print_result(args.json, &header, None, &verified);
        return Ok(());
    };
    let node = load(config, EXTRA_KEYS).map_err(|e| usage(format!("{}: {e}", config.display())))?;
    let new_id = new_cluster_id(&node, &header, config)?;
    let dir = args
        .data_dir
        .clone()
        .unwrap_or_else(|| node.data_dir.clone());
    check_empty(&dir)?;
    if node.data_log_dir != node.data_dir && node.data_log_dir != dir {
        check_empty(&node.data_log_dir)?;
    }
    let written = write_dir(&dir, &node, &catalog, &header, new_id)?;
    let text = format!(
        "{verified}\nrestored into {} for cluster {new_id:#x} (servers {}): {}\nstart every \
         node of the new cluster normally (no --bootstrap); each must be restored from this \
         same file",
        dir.display(),
        node.servers
            .keys()
            .map(|s| s.0.to_string())
            .collect::<Vec<_>>()
            .join(","),
        written.join(", ")
    );
    print_result(args.json, &header, Some((&dir, new_id, &written)), &text);
    Ok(())
}

fn usage(message: String) -> Failure {
    Failure {
        code: ExitCode::Usage,
        message,
    }
}

/// zoo.cfg's clusterId: present, non-zero and not the backup's.
fn new_cluster_id(node: &NodeConfig, h: &BackupHeader, config: &Path) -> Result<u64, Failure> {
    match node.cluster_id {
        None | Some(0) => Err(usage(format!(
            "{} has no clusterId: a restored cluster is a new cluster; give it a new non-zero \
             clusterId (e.g. clusterId={:#x}), the same in every node's zoo.cfg",
            config.display(),
            fe_meta::server::meta_dir::new_cluster_id()
        ))),
        Some(id) if id == h.cluster_id => Err(usage(format!(
            "{}: clusterId {id:#x} is the backed-up cluster's own; a restored cluster must \
             never be mixed with the old one: give it a new clusterId (e.g. clusterId={:#x})",
            config.display(),
            fe_meta::server::meta_dir::new_cluster_id()
        ))),
        Some(id) => Ok(id),
    }
}

/// `dir` is missing, empty, or holds only `myid`.
fn check_empty(dir: &Path) -> Result<(), Failure> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(Failure::other(format!(
                "cannot read {}: {e}",
                dir.display()
            )))
        }
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Failure::other(format!("{}: {e}", dir.display())))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name != "myid" {
            found.push(name);
        }
    }
    if found.is_empty() {
        return Ok(());
    }
    found.sort();
    Err(usage(format!(
        "{} is not empty (it holds {}): restore only into an empty data dir (myid may be \
         there); nothing was written",
        dir.display(),
        found.join(", ")
    )))
}

/// Writes the data dir (module docs); the files written.
fn write_dir(
    dir: &Path,
    node: &NodeConfig,
    catalog: &Catalog,
    h: &BackupHeader,
    cluster_id: u64,
) -> Result<Vec<String>, Failure> {
    let fail = |what: &str, e: String| {
        Failure::other(format!(
            "restoring into {}: {what}: {e} (remove what was written before trying again)",
            dir.display()
        ))
    };
    fs::create_dir_all(dir).map_err(|e| fail("cannot create it", e.to_string()))?;
    let snaps = SnapDir::open(dir, true).map_err(|e| fail("snapshot dir", e.to_string()))?;
    let membership = bootstrap_membership(node);
    let mut w = snaps
        .create(h.journal_id, cluster_id, Some(&membership))
        .map_err(|e| fail("snapshot", e.to_string()))?;
    write_image(catalog, &mut w).map_err(|e| fail("snapshot", e.to_string()))?;
    let info = w.finish().map_err(|e| fail("snapshot", e.to_string()))?;
    let epoch = h.journal_id.epoch();
    let epochs = EpochFiles::open(dir, true).map_err(|e| fail("epoch files", e.to_string()))?;
    for kind in [EpochKind::Accepted, EpochKind::Current] {
        epochs
            .write(kind, epoch)
            .map_err(|e| fail("epoch files", e.to_string()))?;
    }
    MetaDir::new(dir)
        .write_cluster_id(cluster_id)
        .map_err(|e| fail("VERSION", e.to_string()))?;
    let name = |p: &Path| {
        p.file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    };
    Ok(vec![
        name(&info.path),
        format!("acceptedEpoch={}", epoch.0),
        format!("currentEpoch={}", epoch.0),
        format!("VERSION (cluster id {cluster_id:#x})"),
    ])
}

fn print_result(
    json: bool,
    h: &BackupHeader,
    restored: Option<(&Path, u64, &Vec<String>)>,
    text: &str,
) {
    if !json {
        println!("{text}");
        return;
    }
    let mut v = json!({
        "verified": true,
        "source_cluster_id": h.cluster_id,
        "journal_id": h.journal_id.0,
        "zxid": h.journal_id.to_string(),
        "digest": h.digest_hex(),
        "entry_count": h.entry_count,
    });
    if let Some((dir, id, files)) = restored {
        v["data_dir"] = json!(dir.display().to_string());
        v["cluster_id"] = json!(id);
        v["written"] = json!(files);
    }
    println!("{v}");
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use zab_net::config::parse_with;
    use zab_net::Zxid;

    fn header(cluster_id: u64) -> BackupHeader {
        BackupHeader {
            cluster_id,
            journal_id: Zxid(5),
            entry_count: 0,
            digest: [0; 32],
            image_len: 0,
            created_ms: 0,
        }
    }

    fn node(extra: &str) -> NodeConfig {
        let text = format!(
            "tickTime=100\ninitLimit=5\nsyncLimit=2\ndataDir=/tmp/x\nclientPort=1\n{extra}\
             server.1=127.0.0.1:2:3\n"
        );
        parse_with(&text, EXTRA_KEYS).unwrap()
    }

    #[test]
    fn the_new_cluster_id_must_be_there_and_differ_from_the_backups() {
        let cfg = Path::new("zoo.cfg");
        let e = new_cluster_id(&node(""), &header(7), cfg).unwrap_err();
        assert!(e.message.contains("has no clusterId"), "{}", e.message);
        let e = new_cluster_id(&node("clusterId=7\n"), &header(7), cfg).unwrap_err();
        assert!(e.message.contains("never be mixed"), "{}", e.message);
        assert_eq!(
            new_cluster_id(&node("clusterId=8\n"), &header(7), cfg).unwrap(),
            8
        );
    }

    #[test]
    fn only_an_empty_dir_or_one_with_myid_is_a_target() {
        let d = tempfile::tempdir().unwrap();
        assert!(check_empty(&d.path().join("missing")).is_ok());
        assert!(check_empty(d.path()).is_ok());
        std::fs::write(d.path().join("myid"), "1\n").unwrap();
        assert!(check_empty(d.path()).is_ok());
        std::fs::write(d.path().join("snapshot.0000000100000001"), "").unwrap();
        let e = check_empty(d.path()).unwrap_err();
        assert!(
            e.message.contains("not empty") && e.message.contains("snapshot."),
            "{}",
            e.message
        );
    }
}
