//! The BACKUP answer's bodies (`docs/PROTOCOL.md` §10): a stream of chunk answers with the
//! request's id, then one final answer carrying the backup header.
//!
//! ```text
//! chunk  part u8 (1) | offset u64 | len u32 | len bytes of the backup file
//! end    part u8 (2) | cluster_id u64 | journal_id u64 | entry_count u64 | digest [32]
//!        | image_len u64 | created_ms u64
//! ```
//! INV-1: a chunk carries at most [`BACKUP_CHUNK_MAX`] bytes; decoding never reserves more
//! than the frame holds and never panics.

use bytes::BufMut;
use zab_net::Zxid;

use super::response::ResponseBody;
use crate::state::backup::BackupHeader;
use crate::wire::{Reader, WireError};

/// Most file bytes in one chunk answer (1 MiB).
pub const BACKUP_CHUNK_MAX: usize = 1 << 20;
const PART_CHUNK: u8 = 1;
const PART_END: u8 = 2;

pub(super) fn encode_chunk(o: &mut Vec<u8>, offset: u64, data: &[u8]) {
    o.put_u8(PART_CHUNK);
    o.put_u64(offset);
    o.put_u32(u32::try_from(data.len()).unwrap_or(u32::MAX));
    o.extend_from_slice(data);
}

pub(super) fn encode_end(o: &mut Vec<u8>, h: &BackupHeader) {
    o.put_u8(PART_END);
    o.put_u64(h.cluster_id);
    o.put_u64(h.journal_id.0);
    o.put_u64(h.entry_count);
    o.extend_from_slice(&h.digest);
    o.put_u64(h.image_len);
    o.put_u64(h.created_ms);
}

pub(super) fn decode(r: &mut Reader<'_>) -> Result<ResponseBody, WireError> {
    match r.u8("backup part")? {
        PART_CHUNK => {
            let offset = r.u64("chunk offset")?;
            let len = r.len("chunk length", BACKUP_CHUNK_MAX)?;
            let data = r.take("chunk bytes", len)?.to_vec();
            Ok(ResponseBody::BackupChunk { offset, data })
        }
        PART_END => {
            let cluster_id = r.u64("cluster id")?;
            let journal_id = Zxid(r.u64("journal id")?);
            let entry_count = r.u64("entry count")?;
            let mut digest = [0u8; 32];
            digest.copy_from_slice(r.take("digest", 32)?);
            Ok(ResponseBody::BackupDone(BackupHeader {
                cluster_id,
                journal_id,
                entry_count,
                digest,
                image_len: r.u64("image length")?,
                created_ms: r.u64("created ms")?,
            }))
        }
        part => Err(WireError::BadValue {
            field: "backup part",
            value: u64::from(part),
        }),
    }
}
