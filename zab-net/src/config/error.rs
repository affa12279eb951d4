//! The errors of zoo.cfg parsing (config INV-2: each names its key or line).

use std::path::PathBuf;

use thiserror::Error;

/// Why a zoo.cfg did not parse or does not fit its use.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A line is not `key=value`.
    #[error("line {line}: expected `key=value`, found `{text}`")]
    Syntax {
        /// 1-based line number.
        line: usize,
        /// The line's text.
        text: String,
    },
    /// A key neither zoo.cfg nor the application knows.
    #[error("line {line}: unknown key `{key}`")]
    UnknownKey {
        /// The key.
        key: String,
        /// 1-based line number.
        line: usize,
    },
    /// A key given twice.
    #[error("line {line}: key `{key}` already set on line {first_line}")]
    Duplicate {
        /// The key.
        key: String,
        /// 1-based line number of the repeat.
        line: usize,
        /// 1-based line number of the first occurrence.
        first_line: usize,
    },
    /// A value out of range or of the wrong form.
    #[error("line {line}: bad value `{value}` for `{key}`: {reason}")]
    BadValue {
        /// The key.
        key: String,
        /// 1-based line number.
        line: usize,
        /// The value as written.
        value: String,
        /// What was expected.
        reason: String,
    },
    /// A required key is absent.
    #[error("missing required key `{key}`")]
    Missing {
        /// The key.
        key: &'static str,
    },
    /// A key another key's value requires is absent.
    #[error("line {line}: `{by}` needs `{key}` (the PEM file it names)")]
    Needs {
        /// The missing key.
        key: &'static str,
        /// The setting that needs it, `key=value`.
        by: String,
        /// The line of that setting.
        line: usize,
    },
    /// No `server.N` line names a participant.
    #[error("no voting server: at least one `server.N=host:quorumPort:electionPort` line must not be an observer")]
    NoParticipants,
    /// Two servers share an address.
    #[error("line {line}: `{key}` uses address {addr} already used by `server.{other}`")]
    AddressInUse {
        /// The key of the later server.
        key: String,
        /// Its line.
        line: usize,
        /// The shared `host:port`.
        addr: String,
        /// The sid of the earlier server.
        other: u64,
    },
    /// The sid this node runs as is not one of the `server.N` lines.
    #[error("server id {sid} has no `server.{sid}` line")]
    NotAMember {
        /// The sid.
        sid: u64,
    },
}
