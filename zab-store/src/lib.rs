//! Durable state of one ZAB peer: the txn log, snapshots and epoch files.
//!
//! # On-disk layout (one directory each for snapshots and the log; they may be the same)
//! ```text
//! log.<zxid as 16 hex>        txn log segment: 32-byte header, records, zeros (see `segment`,
//!                             `record`); the name is the zxid of its first record
//! snapshot.<zxid as 16 hex>   snapshot at that zxid: header, state machine bytes, CRC trailer
//!                             (see `snapshot`)
//! acceptedEpoch, currentEpoch epoch files, decimal text (see `epoch_file`)
//! *.tmp                       unfinished writes of any of the above; ignored and removed
//! ```
//!
//! # Durability contract
//! - [`LogWriter`] runs group commit on a dedicated thread: it drains every queued command,
//!   writes the appends into the mapped segment, syncs once, then reports
//!   [`LogEvent::Persisted`]. Truncate and reset are durable before they are reported.
//! - Recovery ([`TxnLog::open`]) validates every record; a torn tail of the last segment is cut
//!   (reported in [`Recovery`]), anything else that is bad is an error naming file and offset.
//! - Snapshots and epoch files are written to a temp name, fsynced, renamed, and the directory
//!   fsynced.
//! - `force_sync = false` skips every fsync: **for tests only**.
//!
//! # Module invariants
//! Each module opens with its own `INV-n` lines; the property and crash tests in `tests/`
//! exercise them.

mod data_dir;
mod epoch_file;
mod error;
mod fsutil;
mod log;
mod log_state;
mod reader;
mod record;
mod recovery;
mod scan;
mod segment;
mod snap_dir;
mod snapshot;
mod writer;

pub use data_dir::{purge, DataDir};
pub use epoch_file::{EpochFiles, EpochKind};
pub use error::{Result, StoreError};
pub use log::{LogOptions, TxnLog};
pub use reader::{LogIter, LogReader};
pub use recovery::{CutTail, Recovery};
pub use segment::{parse_segment_name, segment_name};
pub use snap_dir::SnapDir;
pub use snapshot::{
    parse_snapshot_name, snapshot_name, SnapshotInfo, SnapshotReader, SnapshotWriter,
    SNAP_HEADER_LEN, SNAP_TRAILER_LEN,
};
pub use writer::{LogCommand, LogEvent, LogWriter, SyncThread};
