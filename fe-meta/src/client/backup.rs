//! [`Client::backup`]: the BACKUP stream (`docs/PROTOCOL.md` §10) read on a connection of its
//! own, so the client's pipelined connection is never held by a long transfer.
//!
//! INV-1: the file's bytes are written to the caller's writer in order, as they arrive; a
//! chunk whose offset is not the next byte, an answer of another request or kind, an error
//! answer, a lost connection or an idle gap longer than the request timeout ends the call
//! with an error (the bytes written so far are then incomplete: the caller discards them).
//! INV-2: success means the final answer came and the bytes written are exactly its header's
//! file length; the caller still verifies the file (`state::backup::verify_backup`).

use std::io::Write;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::connection::dial;
use super::{Client, ClientError};
use crate::protocol::{
    decode_response, encode_frame, encode_request, FrameDecoder, ReadOptions, Request, RequestBody,
    RequestKind, RequestMeta, ResponseBody,
};
use crate::state::backup::BackupHeader;

/// The request id of the backup connection's one request.
const BACKUP_REQUEST_ID: u64 = 1;

impl Client {
    /// Takes a backup from the node this client is connected to (or, if it cannot be dialled
    /// again, the next endpoint), writing the backup file to `out` as it streams in (with
    /// `sync`, the node first catches up with the leader). Returns the file's header.
    pub async fn backup<W: Write>(
        &self,
        sync: bool,
        out: &mut W,
    ) -> Result<BackupHeader, ClientError> {
        let opts = self.options();
        let current = self.addr();
        let mut order = vec![current.clone()];
        order.extend(self.endpoints().iter().filter(|e| **e != current).cloned());
        let mut attempts = Vec::new();
        let mut connected = None;
        for addr in order {
            match dial(&addr, opts.connect_timeout, false).await {
                Ok(stream) => {
                    connected = Some((addr, stream));
                    break;
                }
                Err(e) => attempts.push(e),
            }
        }
        let Some((addr, stream)) = connected else {
            return Err(super::failover::all_failed(attempts));
        };
        receive(stream, &addr, sync, opts.request_timeout, out).await
    }
}

async fn receive<W: Write>(
    mut stream: TcpStream,
    addr: &str,
    sync: bool,
    idle: std::time::Duration,
    out: &mut W,
) -> Result<BackupHeader, ClientError> {
    let closed = |reason: String| ClientError::Closed {
        addr: addr.to_owned(),
        reason,
    };
    let req = Request {
        id: BACKUP_REQUEST_ID,
        meta: RequestMeta::default(),
        body: RequestBody::Backup(ReadOptions { sync }),
    };
    let mut frame = Vec::new();
    encode_frame(&encode_request(&req), &mut frame);
    stream
        .write_all(&frame)
        .await
        .map_err(|e| closed(e.to_string()))?;
    let decoder = FrameDecoder::default();
    let mut buf = BytesMut::with_capacity(1 << 21);
    let mut written = 0u64;
    loop {
        while let Some(payload) = decoder
            .decode(&mut buf)
            .map_err(|e| ClientError::Protocol(e.to_string()))?
        {
            let resp =
                decode_response(&payload).map_err(|e| ClientError::Protocol(e.to_string()))?;
            if resp.id != BACKUP_REQUEST_ID || resp.kind != RequestKind::BACKUP {
                return Err(ClientError::Protocol(format!(
                    "expected a BACKUP answer for request {BACKUP_REQUEST_ID}, got {} for {}",
                    resp.kind, resp.id
                )));
            }
            if let Some(header) = take(resp.result, &mut written, out, addr)? {
                return Ok(header);
            }
        }
        match tokio::time::timeout(idle, stream.read_buf(&mut buf)).await {
            Err(_) => {
                return Err(ClientError::Timeout {
                    kind: RequestKind::BACKUP,
                    after: idle,
                })
            }
            Ok(Ok(0)) => return Err(closed(format!("closed after {written} backup bytes"))),
            Ok(Err(e)) => return Err(closed(e.to_string())),
            Ok(Ok(_)) => {}
        }
    }
}

/// Writes one answer's chunk to `out`; the header once the final answer came (INV-1, INV-2).
fn take<W: Write>(
    result: Result<ResponseBody, crate::protocol::ErrorReply>,
    written: &mut u64,
    out: &mut W,
    addr: &str,
) -> Result<Option<BackupHeader>, ClientError> {
    match result.map_err(ClientError::Server)? {
        ResponseBody::BackupChunk { offset, data } if offset == *written => {
            out.write_all(&data).map_err(|e| ClientError::Closed {
                addr: addr.to_owned(),
                reason: format!("writing the backup file: {e}"),
            })?;
            *written += data.len() as u64;
            Ok(None)
        }
        ResponseBody::BackupChunk { offset, .. } => Err(ClientError::Protocol(format!(
            "backup chunk at offset {offset}, expected {written}"
        ))),
        ResponseBody::BackupDone(header) if header.file_len() == *written => Ok(Some(header)),
        ResponseBody::BackupDone(header) => Err(ClientError::Protocol(format!(
            "backup ended after {written} bytes, its header says {}",
            header.file_len()
        ))),
        other => Err(ClientError::Protocol(format!(
            "unexpected answer to BACKUP: {other:?}"
        ))),
    }
}
