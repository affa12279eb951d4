//! `fe-meta backup --out FILE`: see the parent module (INV-1).

use std::fs::{self, File, OpenOptions};
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use fe_meta::client::Client;
use fe_meta::state::backup::{verify_backup, BackupHeader};
use serde_json::json;

use crate::{runtime, ClientArgs, ExitCode, Failure};

/// `fe-meta backup`.
#[derive(Debug, Args)]
pub struct BackupArgs {
    /// Where to connect (any node: a follower serves a backup as well as the leader).
    #[command(flatten)]
    pub client: ClientArgs,
    /// The backup file to write; it must not exist. Written as FILE.tmp, renamed once the
    /// whole file verified.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Have the node catch up with the leader's commit point first.
    #[arg(long)]
    pub sync: bool,
}

/// Runs `fe-meta backup`.
pub(crate) fn run(args: &BackupArgs) -> Result<(), Failure> {
    let endpoints = args.client.endpoints()?;
    if args.out.exists() {
        return Err(Failure {
            code: ExitCode::Usage,
            message: format!(
                "{} exists: choose another --out (a backup never overwrites a file)",
                args.out.display()
            ),
        });
    }
    let tmp = tmp_path(&args.out);
    let started = Instant::now();
    let options = args.client.options()?;
    let rt = runtime()?;
    let taken = rt.block_on(async {
        let client = Client::connect_any(&endpoints, options).await?;
        let node = client.addr();
        let header = stream_to(&client, args.sync, &tmp).await?;
        Ok::<_, Failure>((node, header))
    });
    let (node, header) = match taken.and_then(|t| finish(&tmp, &args.out).map(|()| t)) {
        Ok(t) => t,
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
    };
    let ms = started.elapsed().as_millis();
    if args.client.json {
        println!("{}", json_of(&header, &node, ms, &args.out));
    } else {
        println!(
            "backup of cluster {:#x} at journal id {}, digest {}, {} entries, {} bytes in \
             {ms} ms from {node} -> {}",
            header.cluster_id,
            header.journal_id,
            header.digest_hex(),
            header.entry_count,
            header.file_len(),
            args.out.display()
        );
    }
    Ok(())
}

fn tmp_path(out: &Path) -> PathBuf {
    let mut name = out.as_os_str().to_owned();
    name.push(".tmp");
    PathBuf::from(name)
}

/// Streams the backup into `tmp` and fsyncs it.
async fn stream_to(client: &Client, sync: bool, tmp: &Path) -> Result<BackupHeader, Failure> {
    let io_err =
        |what: &str, e: std::io::Error| Failure::other(format!("{what} {}: {e}", tmp.display()));
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)
        .map_err(|e| io_err("cannot create", e))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let header = client.backup(sync, &mut w).await?;
    let file = w
        .into_inner()
        .map_err(|e| io_err("cannot write", e.into_error()))?;
    file.sync_all().map_err(|e| io_err("cannot fsync", e))?;
    Ok(header)
}

/// Verifies `tmp` whole, then renames it to `out` and fsyncs the directory.
fn finish(tmp: &Path, out: &Path) -> Result<(), Failure> {
    let file = File::open(tmp)
        .map_err(|e| Failure::other(format!("cannot reopen {}: {e}", tmp.display())))?;
    verify_backup(std::io::BufReader::new(file)).map_err(|e| {
        Failure::other(format!(
            "the backup received does not verify ({e}); nothing was written to {}",
            out.display()
        ))
    })?;
    fs::rename(tmp, out)
        .map_err(|e| Failure::other(format!("cannot rename to {}: {e}", out.display())))?;
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Failure::other(format!("cannot fsync {}: {e}", dir.display())))
}

fn json_of(h: &BackupHeader, node: &str, ms: u128, out: &Path) -> serde_json::Value {
    json!({
        "file": out.display().to_string(),
        "node": node,
        "cluster_id": h.cluster_id,
        "journal_id": h.journal_id.0,
        "zxid": h.journal_id.to_string(),
        "digest": h.digest_hex(),
        "entry_count": h.entry_count,
        "bytes": h.file_len(),
        "created_ms": h.created_ms,
        "elapsed_ms": ms,
    })
}
