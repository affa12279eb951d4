//! Offline tools: commands that read a node's files without a running server, for the day
//! after an incident.
//!
//! - `dump-log` (`dump_log`): every record of the txn log, decoded as fe-meta's journal op or
//!   a configuration, then the log's state (segments, last valid zxid, torn tail or corruption);
//! - `inspect` (`inspect`): what a node would do at start from its data dir;
//! - `check-config` (`check_config`): a zoo.cfg checked without starting, every error listed;
//! - `verify-image` (`image`): a snapshot or image file checked end to end.
//!
//! INV-1: no offline tool writes, creates or removes anything in the directories or files it
//! reads (the txn log is read by `zab_store::read_log`, which never repairs).
//! INV-2: damaged input is reported as a finding (what, where), never a panic; a tool exits
//! non-zero when what it read would stop a node from starting (or the file is invalid).

mod check_config;
mod dump_log;
mod image;
mod inspect;
mod render;

pub use check_config::CheckConfigArgs;
pub use dump_log::DumpLogArgs;
pub use image::VerifyImageArgs;
pub use inspect::InspectArgs;

pub(crate) use check_config::run as check_config;
pub(crate) use dump_log::run as dump_log;
pub(crate) use image::run as verify_image;
pub(crate) use inspect::read_join_file;
pub(crate) use inspect::run as inspect;
