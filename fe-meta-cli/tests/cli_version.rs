//! `fe-meta --version`: the package version and the commit the binary was built from.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::process::Command;

fn version_line() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_fe-meta"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The commit part of `fe-meta 0.1.0 (commit C)`.
fn commit_of(line: &str) -> &str {
    let prefix = format!("fe-meta {} (commit ", env!("CARGO_PKG_VERSION"));
    line.strip_prefix(prefix.as_str())
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("unexpected --version line: {line:?}"))
}

#[test]
fn version_names_the_commit_of_head() {
    let line = version_line();
    let commit = commit_of(&line);
    assert_eq!(commit, fe_meta_cli::COMMIT, "{line}");
    let git = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    let head = match git {
        Ok(out) if out.status.success() => String::from_utf8(out.stdout).unwrap(),
        _ => {
            println!("SKIP: no git checkout here; --version says {line:?}");
            assert_eq!(commit, "unknown");
            return;
        }
    };
    if std::env::var("FE_META_BUILD_COMMIT").is_ok_and(|c| !c.trim().is_empty()) {
        println!("SKIP: FE_META_BUILD_COMMIT overrides the commit; --version says {line:?}");
        return;
    }
    let hash = commit.strip_suffix("-dirty").unwrap_or(commit);
    assert_eq!(hash, head.trim(), "{line}");
}
