//! Where the `fe-meta` binary is.
//!
//! Lookup order: `FE_META_BIN`; else `target/<profile>/fe-meta` next to the test executable's
//! `deps/` dir (`cargo test --release` of the workspace builds it: it is the fe-meta-cli
//! package's binary, which has integration tests); else [`ProcError::NoBinary`] saying how to build it.

use std::path::PathBuf;

use super::ProcError;

/// The `fe-meta` binary to run.
pub fn fe_meta_bin() -> Result<PathBuf, ProcError> {
    if let Some(p) = std::env::var_os("FE_META_BIN") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(ProcError::NoBinary(p.display().to_string()))
        };
    }
    let exe = std::env::current_exe().map_err(ProcError::io("current_exe"))?;
    // target/<profile>/deps/<test> → target/<profile>/fe-meta
    let guess = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("fe-meta"))
        .unwrap_or_else(|| PathBuf::from("fe-meta"));
    if guess.is_file() {
        Ok(guess)
    } else {
        Err(ProcError::NoBinary(guess.display().to_string()))
    }
}

/// What a finished `fe-meta` command printed: its stdout, then its stderr.
pub fn output_text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
