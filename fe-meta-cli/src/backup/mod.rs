//! `fe-meta backup --out FILE` and `fe-meta restore --from FILE --data-dir DIR --config zoo.cfg`
//! (as etcd's `snapshot save` / `snapshot restore`).
//!
//! - `backup` (`save`): asks any node (BACKUP, `docs/PROTOCOL.md` §10) for its catalog at its
//!   applied journal id and streams the file to `FILE.tmp`, fsyncs it, verifies it whole
//!   (`fe_meta::state::backup::verify_backup`), then renames it to `FILE`.
//! - `restore` (`restore`): verifies the whole file before writing anything, then prepares one
//!   node's data dir of a new cluster (zoo.cfg's `clusterId`, which must differ from the
//!   backup's cluster) that a plain start (no `--bootstrap`) serves from.
//!
//! INV-1: a failed or interrupted backup never leaves a file named FILE (only FILE.tmp, removed
//! on failures the command sees); an existing FILE is never overwritten.
//! INV-2: restore writes nothing unless the file verified and the target is usable (empty, or
//! holding only `myid`; a new, different cluster id).

mod restore;
mod save;

pub use restore::RestoreArgs;
pub use save::BackupArgs;

pub(crate) use restore::run as restore;
pub(crate) use save::run as backup;
