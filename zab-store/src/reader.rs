//! Read access to the txn log, safe to use from any thread while the writer appends.
//!
//! INV-1: a reader sees only durable records (those the writer has synced and reported).
//! INV-2: an iteration over `(after, upto]` either yields every record of that range in zxid
//! order or ends with an error; it never silently skips a record or mixes two histories (a
//! truncate or reset during the iteration is an error, see `log_state` INV-3).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::RwLock;
use zab_core::{Txn, Zxid};

use crate::error::{Result, StoreError};
use crate::log_state::LogState;
use crate::record::HEADER_LEN;

/// State shared by the log's writer and its readers.
#[derive(Debug)]
pub(crate) struct Shared {
    pub dir: PathBuf,
    pub state: RwLock<LogState>,
}

/// A cloneable, read-only handle on the durable records of a txn log.
#[derive(Clone, Debug)]
pub struct LogReader {
    pub(crate) shared: Arc<Shared>,
}

impl LogReader {
    /// The log directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The zxid of the first durable record still on disk.
    pub fn first_zxid(&self) -> Option<Zxid> {
        let st = self.shared.state.read();
        st.index.range(..st.durable).next().map(|e| e.zxid)
    }

    /// The zxid of the last durable record.
    pub fn last_zxid(&self) -> Option<Zxid> {
        self.shared.state.read().last_durable()
    }

    /// The zxid that the first record on disk follows: everything up to it was purged (or
    /// covered by a snapshot the log was reset to). `Zxid::ZERO` for a log that never lost a
    /// prefix.
    pub fn floor(&self) -> Zxid {
        self.shared.state.read().floor
    }

    /// Every durable zxid on disk, ascending (the boot-time index of the protocol core).
    pub fn zxids(&self) -> Vec<Zxid> {
        let st = self.shared.state.read();
        st.index.range(..st.durable).map(|e| e.zxid).collect()
    }

    /// Every durable zxid on disk with its record's payload size, read in one snapshot of the
    /// index (two parallel vectors, as the core's `DurableState` holds them).
    pub fn zxids_and_sizes(&self) -> (Vec<Zxid>, Vec<u32>) {
        let st = self.shared.state.read();
        st.index
            .range(..st.durable)
            .map(|e| {
                let payload = e.len().saturating_sub(HEADER_LEN);
                (e.zxid, u32::try_from(payload).unwrap_or(u32::MAX))
            })
            .unzip()
    }

    /// Number of durable records.
    pub fn len(&self) -> usize {
        self.shared.state.read().durable
    }

    /// Whether the log holds no durable record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Iterates the durable records in `(after, upto]`.
    ///
    /// Fails at once if `after` is below the floor (those records were purged) or `upto` is
    /// beyond the last durable record.
    pub fn iter(&self, after: Zxid, upto: Zxid) -> Result<LogIter> {
        let st = self.shared.state.read();
        if after < st.floor {
            return Err(
                self.not_on_disk(after, format!("purged: the log starts after {}", st.floor))
            );
        }
        let last = st.last_durable().unwrap_or(st.floor);
        if upto > last {
            return Err(self.not_on_disk(upto, format!("beyond the last durable zxid {last}")));
        }
        Ok(LogIter {
            shared: Arc::clone(&self.shared),
            pos: after,
            upto,
            generation: st.generation,
        })
    }

    /// Iterates every durable record after `after` (up to the last durable one now).
    pub fn read_from(&self, after: Zxid) -> Result<LogIter> {
        let last = {
            let st = self.shared.state.read();
            st.last_durable().unwrap_or(st.floor).max(after)
        };
        self.iter(after, last)
    }

    /// Reads the durable records in `(after, upto]` into memory (see [`LogReader::iter`]).
    pub fn read_range(&self, after: Zxid, upto: Zxid) -> Result<Vec<Txn>> {
        self.iter(after, upto)?.collect()
    }

    fn not_on_disk(&self, zxid: Zxid, reason: String) -> StoreError {
        StoreError::NotOnDisk {
            path: self.shared.dir.clone(),
            zxid,
            reason,
        }
    }
}

/// Iterator over a range of durable records; each step copies one record out of the mapping.
#[derive(Debug)]
pub struct LogIter {
    shared: Arc<Shared>,
    pos: Zxid,
    upto: Zxid,
    generation: u64,
}

impl Iterator for LogIter {
    type Item = Result<Txn>;

    fn next(&mut self) -> Option<Result<Txn>> {
        if self.pos >= self.upto {
            return None;
        }
        match self.step() {
            Ok(Some(txn)) => {
                self.pos = txn.zxid;
                Some(Ok(txn))
            }
            Ok(None) => {
                self.pos = self.upto;
                None
            }
            Err(reason) => {
                let err = StoreError::NotOnDisk {
                    path: self.shared.dir.clone(),
                    zxid: self.pos,
                    reason: reason.to_string(),
                };
                self.pos = self.upto;
                Some(Err(err))
            }
        }
    }
}

impl LogIter {
    /// The record after `pos`, `None` past `upto`, or why it cannot be read.
    fn step(&self) -> std::result::Result<Option<Txn>, &'static str> {
        let st = self.shared.state.read();
        if st.generation != self.generation {
            return Err("the log was truncated or reset during the read");
        }
        if self.pos < st.floor {
            return Err("the records after it were purged during the read");
        }
        // The index is sorted throughout, so the first record after `pos` is durable iff its
        // position is below `durable`.
        let i = st.index.partition_point(|e| e.zxid <= self.pos);
        let Some(e) = st.index.get(i).filter(|_| i < st.durable).copied() else {
            return Err("records after it are no longer on disk");
        };
        if e.zxid > self.upto {
            return Ok(None);
        }
        let payload = st
            .seg(e.base)
            .and_then(|s| {
                s.seg
                    .bytes()
                    .get(e.offset() + HEADER_LEN..e.offset() + e.len())
            })
            .ok_or("its segment was purged during the read")?;
        Ok(Some(Txn {
            zxid: e.zxid,
            data: Bytes::copy_from_slice(payload),
            kind: e.kind,
        }))
    }
}
