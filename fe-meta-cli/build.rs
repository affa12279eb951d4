//! Build script: the commit the binary is built from, for `fe-meta --version` and the server's
//! start log line, as the compile-time variable `FE_META_COMMIT` (e.g. `43e3218`, or
//! `43e3218-dirty` when tracked files differ from that commit).
//!
//! INV-1: never fails the build: without git, outside a checkout of this repository (a
//! `cargo install` from an unpacked archive) or on any git error, the commit is `unknown`.
//! INV-2: the commit is the one of the repository that tracks this very build script, never
//! that of an unrelated repository the package happens to be unpacked in.
//! INV-3: `FE_META_BUILD_COMMIT`, when set and not empty, is used as is (a container build
//! without `.git` passes the commit in from outside).
//! INV-4: the script runs again when HEAD moves (the HEAD file, the branch's ref file,
//! packed-refs), when the index changes (commit, add) and when a source of the crates in the
//! binary changes, so the hash and the `-dirty` mark follow the tree.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The crates the binary is built from, relative to the workspace root: their edits decide
/// `-dirty`.
const SOURCE_DIRS: [&str; 5] = ["zab-core", "zab-store", "zab-net", "fe-meta", "fe-meta-cli"];

fn main() {
    println!("cargo:rerun-if-env-changed=FE_META_BUILD_COMMIT");
    let commit = match std::env::var("FE_META_BUILD_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_owned(),
        _ => commit_from_git().unwrap_or_else(|| "unknown".to_owned()),
    };
    println!("cargo:rustc-env=FE_META_COMMIT={commit}");
}

/// The short hash of HEAD, `-dirty` appended when tracked files were changed; `None` when git
/// cannot say (INV-1, INV-2). Registers the files to watch (INV-4).
fn commit_from_git() -> Option<String> {
    // INV-2: this script must be tracked by the repository git finds from here.
    git(&["ls-files", "--error-unmatch", "build.rs"])?;
    watch_git_files();
    let hash = git(&["rev-parse", "--short", "HEAD"])?;
    // Refresh the index's stat data first so that a touched but unchanged file is clean.
    let _ = git(&["update-index", "-q", "--refresh"]);
    let dirty = Command::new("git")
        .args(["diff-index", "--quiet", "HEAD", "--"])
        .status()
        .ok()?;
    // Exit status 1: differences; anything else but 0 is an error.
    match dirty.code() {
        Some(0) => Some(hash),
        Some(1) => Some(format!("{hash}-dirty")),
        _ => None,
    }
}

/// INV-4: the HEAD file, the ref it points to, packed-refs, the index and the sources.
fn watch_git_files() {
    let mut files: Vec<PathBuf> = Vec::new();
    for name in ["HEAD", "index", "packed-refs"] {
        files.extend(git(&["rev-parse", "--git-path", name]).map(PathBuf::from));
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        files.extend(git(&["rev-parse", "--git-path", &branch]).map(PathBuf::from));
    }
    for file in files.iter().filter(|f| f.exists()) {
        println!("cargo:rerun-if-changed={}", file.display());
    }
    if let Some(root) = git(&["rev-parse", "--show-toplevel"]) {
        let root = Path::new(&root);
        println!(
            "cargo:rerun-if-changed={}",
            root.join("Cargo.toml").display()
        );
        println!(
            "cargo:rerun-if-changed={}",
            root.join("Cargo.lock").display()
        );
        for dir in SOURCE_DIRS {
            for part in ["src", "Cargo.toml"] {
                let path = root.join(dir).join(part);
                if path.exists() {
                    println!("cargo:rerun-if-changed={}", path.display());
                }
            }
        }
    }
}

/// The trimmed stdout of `git ARGS` run in this package's folder, `None` on any failure.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    Some(text.trim().to_owned())
}
