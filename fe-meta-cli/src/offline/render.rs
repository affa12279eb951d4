//! Text and JSON pieces shared by the offline tools: txn payloads decoded for people, the log's
//! state in words, and zxid arguments.
//!
//! INV-1: decoding a payload never fails: what does not decode is shown as hex with the reason.

use fe_meta::Op;
use serde_json::{json, Value};
use zab_core::{Membership, TxnKind, Zxid};
use zab_store::{LogDamage, OfflineLog};

/// At most this many payload bytes are shown as hex.
const HEX_MAX: usize = 256;

/// A txn payload decoded: what it is (one line) and its JSON form.
pub struct DecodedPayload {
    /// The op name (`CREATE_DB`, `CONFIGURATION`, or `UNDECODED`).
    pub op: String,
    /// Its fields, in words.
    pub fields: String,
    /// Why it did not decode, if it did not.
    pub error: Option<String>,
    /// The bytes as hex (at most 256 bytes), when it did not decode.
    pub hex: Option<String>,
}

/// Decodes a record's payload: an app record as fe-meta's journal op, a membership record as
/// the configuration it carries.
pub fn decode_payload(zxid: Zxid, kind: TxnKind, payload: &[u8]) -> DecodedPayload {
    let decoded = match kind {
        TxnKind::App => Op::decode(payload)
            .map(|op| {
                let name = op
                    .code()
                    .name()
                    .map_or_else(|| format!("OP_{}", op.code().0), str::to_string);
                (name, format!("{op:?}"))
            })
            .map_err(|e| e.to_string()),
        TxnKind::Membership => Membership::decode(zxid, payload)
            .map(|m| ("CONFIGURATION".to_string(), m.to_string()))
            .map_err(|e| e.to_string()),
    };
    match decoded {
        Ok((op, fields)) => DecodedPayload {
            op,
            fields,
            error: None,
            hex: None,
        },
        Err(e) => DecodedPayload {
            op: "UNDECODED".to_string(),
            fields: String::new(),
            error: Some(e),
            hex: Some(hex(payload)),
        },
    }
}

/// Up to [`HEX_MAX`] bytes as lowercase hex, with a note of what was left out.
pub fn hex(bytes: &[u8]) -> String {
    let shown = &bytes[..bytes.len().min(HEX_MAX)];
    let mut s: String = shown.iter().map(|b| format!("{b:02x}")).collect();
    if bytes.len() > HEX_MAX {
        s.push_str(&format!("... ({} bytes in all)", bytes.len()));
    }
    s
}

/// The name of a txn kind.
pub fn kind_name(kind: TxnKind) -> &'static str {
    match kind {
        TxnKind::App => "app",
        TxnKind::Membership => "membership",
    }
}

/// Parses a zxid argument: decimal, or hex with `0x`.
pub fn parse_zxid(s: &str) -> Result<Zxid, String> {
    let s = s.trim();
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse::<u64>(),
    };
    parsed
        .map(Zxid)
        .map_err(|e| format!("`{s}` is not a zxid (decimal, or hex with 0x): {e}"))
}

/// The log's state in one line: clean, torn tail, or what stops a start.
pub fn log_state_line(log: &OfflineLog) -> String {
    match &log.damage {
        None => "clean".to_string(),
        Some(LogDamage::TornTail {
            path,
            offset,
            bytes,
            reason,
        }) => format!(
            "torn tail in {} at offset {offset}: {bytes} bytes after the last valid record \
             ({reason}); a start ends the log there",
            path.display()
        ),
        Some(LogDamage::Corrupt {
            path,
            offset,
            reason,
        }) => format!(
            "CORRUPT: {} at offset {offset}: {reason}; a node refuses to start",
            path.display()
        ),
        Some(LogDamage::Gap {
            after,
            next_file,
            before,
        }) => format!(
            "GAP: records after {after} up to {before} are missing before {}; a node refuses \
             to start",
            next_file.display()
        ),
        Some(LogDamage::Unreadable { reason }) => {
            format!("UNREADABLE: {reason}; a node refuses to start")
        }
    }
}

/// The log's state as JSON.
pub fn log_state_json(log: &OfflineLog) -> Value {
    let damage = match &log.damage {
        None => json!(null),
        Some(LogDamage::TornTail {
            path,
            offset,
            bytes,
            reason,
        }) => json!({"kind": "torn_tail", "file": path, "offset": offset, "bytes": bytes,
                     "reason": reason}),
        Some(LogDamage::Corrupt {
            path,
            offset,
            reason,
        }) => json!({"kind": "corrupt", "file": path, "offset": offset, "reason": reason}),
        Some(LogDamage::Gap {
            after,
            next_file,
            before,
        }) => json!({"kind": "gap", "after": after.0, "before": before.0, "file": next_file}),
        Some(LogDamage::Unreadable { reason }) => json!({"kind": "unreadable", "reason": reason}),
    };
    let segments: Vec<Value> = log
        .segments
        .iter()
        .map(|s| {
            json!({"file": s.path, "base": s.base.0, "prev": s.prev.map(|z| z.0),
                   "size": s.size, "records": s.records, "end": s.end})
        })
        .collect();
    json!({
        "dir": log.dir,
        "segments": segments,
        "temp_files": log.temp_files,
        "floor": log.floor.0,
        "records": log.records,
        "first_zxid": log.first_zxid.map(|z| z.0),
        "last_valid_zxid": log.last_zxid.map(|z| z.0),
        "would_start": log.would_start(),
        "damage": damage,
        "state": log_state_line(log),
    })
}
