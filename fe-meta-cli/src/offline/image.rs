//! Checking a snapshot or image file end to end, and `fe-meta verify-image FILE`.
//!
//! A snapshot file (`snapshot.<zxid>`, magic `ZSNP`) is checked as a node loads it: header,
//! configuration section, whole-file CRC (zab-store); its body is fe-meta's image, read with
//! `fe_meta::state::image::read_image` (magic, sections, record bounds, the image's own CRC, the
//! catalog's invariants), which gives its journal id and digest. A bare image (magic
//! `FEMETAIM`) gets the image checks only.
//!
//! INV-1: a file is reported valid only when every check passed and the whole file was read;
//! otherwise the first failure is reported, never a panic.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use clap::Args;
use fe_meta::state::image::{digest, digest_hex, read_image, IMAGE_MAGIC};
use serde_json::{json, Value};
use zab_core::{Membership, Zxid};
use zab_store::{SnapshotReader, SNAP_HEADER_LEN};

use crate::Failure;

/// The snapshot file magic (zab-store's format).
const SNAPSHOT_MAGIC: &[u8; 4] = b"ZSNP";

/// `fe-meta verify-image`.
#[derive(Debug, Args)]
pub struct VerifyImageArgs {
    /// A snapshot file (`snapshot.<zxid>` of a data dir) or a bare fe-meta image.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

/// What the snapshot wrapper says, when the file is a snapshot.
#[derive(Debug)]
pub struct SnapshotHeader {
    /// Its zxid.
    pub zxid: Zxid,
    /// Its cluster id.
    pub cluster_id: u64,
    /// Its format version (1: no configuration section).
    pub format: u32,
    /// The committed configuration it carries.
    pub membership: Option<Membership>,
}

/// The result of checking one file.
#[derive(Debug)]
pub struct FileCheck {
    /// The file.
    pub path: PathBuf,
    /// Its size in bytes (0 if it could not be read).
    pub size: u64,
    /// The snapshot wrapper's header, when it is a snapshot and the header is readable.
    pub snapshot: Option<SnapshotHeader>,
    /// The image's journal id and digest (hex), or why the file is invalid.
    pub result: Result<(Zxid, String), String>,
}

impl FileCheck {
    /// Whether every check passed.
    pub fn is_valid(&self) -> bool {
        self.result.is_ok()
    }

    /// One line for people.
    pub fn text(&self) -> String {
        let mut s = format!("{} size={}", self.path.display(), self.size);
        if let Some(h) = &self.snapshot {
            s.push_str(&format!(
                " snapshot zxid={} format={} cluster_id={:#x}",
                h.zxid, h.format, h.cluster_id
            ));
        }
        match &self.result {
            Ok((journal_id, digest)) => {
                s.push_str(&format!(" VALID journal_id={journal_id} digest={digest}"));
            }
            Err(e) => s.push_str(&format!(" INVALID: {e}")),
        }
        s
    }

    /// The JSON form.
    pub fn json(&self) -> Value {
        let (journal_id, digest, error) = match &self.result {
            Ok((j, d)) => (Some(j.0), Some(d.clone()), None),
            Err(e) => (None, None, Some(e.clone())),
        };
        json!({
            "file": self.path,
            "size": self.size,
            "snapshot": self.snapshot.as_ref().map(|h| json!({
                "zxid": h.zxid.0,
                "cluster_id": h.cluster_id,
                "format": h.format,
                "configuration": h.membership.as_ref().map(|m| m.to_string()),
            })),
            "valid": self.is_valid(),
            "journal_id": journal_id,
            "digest": digest,
            "error": error,
        })
    }
}

/// Checks a snapshot (`expect`: the zxid its name promises) or a bare image file.
pub fn check_file(path: &Path, expect: Option<Zxid>) -> FileCheck {
    let mut check = FileCheck {
        path: path.to_path_buf(),
        size: std::fs::metadata(path).map_or(0, |m| m.len()),
        snapshot: None,
        result: Err(String::new()),
    };
    check.result = check_into(path, expect, &mut check.snapshot);
    check
}

fn check_into(
    path: &Path,
    expect: Option<Zxid>,
    header: &mut Option<SnapshotHeader>,
) -> Result<(Zxid, String), String> {
    let mut magic = [0u8; 8];
    let n = File::open(path)
        .and_then(|mut f| read_up_to(&mut f, &mut magic))
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if n >= 4 && magic[..4] == SNAPSHOT_MAGIC[..] {
        let mut reader = SnapshotReader::open(path, expect).map_err(|e| e.to_string())?;
        let info = reader.info().clone();
        *header = Some(SnapshotHeader {
            zxid: info.zxid,
            cluster_id: info.cluster_id,
            format: if reader.body_start() == SNAP_HEADER_LEN as u64 {
                1
            } else {
                2
            },
            membership: info.membership,
        });
        let found = image_of(&mut reader)?;
        // The image ends before the snapshot's trailer; reading on verifies the whole-file CRC.
        reader.finish().map_err(|e| e.to_string())?;
        if found.0 > info.zxid {
            return Err(format!(
                "the image's journal id {} is after the snapshot's zxid {}",
                found.0, info.zxid
            ));
        }
        Ok(found)
    } else if n == IMAGE_MAGIC.len() && &magic == IMAGE_MAGIC {
        let f = File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        image_of(f)
    } else {
        Err("neither a snapshot (magic ZSNP) nor an fe-meta image (magic FEMETAIM)".to_string())
    }
}

fn image_of(input: impl Read) -> Result<(Zxid, String), String> {
    let catalog = read_image(input).map_err(|e| format!("image: {e}"))?;
    let d = digest(&catalog).map_err(|e| format!("digest: {e}"))?;
    Ok((catalog.journal_id(), digest_hex(&d)))
}

fn read_up_to(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Runs `verify-image`: exits 1 when the file is invalid.
pub fn run(args: &VerifyImageArgs) -> Result<(), Failure> {
    let check = check_file(&args.file, None);
    if args.json {
        println!("{}", check.json());
    } else {
        println!("{}", check.text());
    }
    match &check.result {
        Ok(_) => Ok(()),
        Err(e) => Err(Failure::other(format!(
            "{} is not a valid image: {e}",
            args.file.display()
        ))),
    }
}
