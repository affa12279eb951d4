//! Answers as human tables and as JSON documents.
//!
//! JSON keys are the protocol's field names (`docs/PROTOCOL.md` §5); journal ids are numbers
//! in JSON and hex (`0x…`, like ZooKeeper's zxids) in tables.
//!
//! INV: every answer has both forms, built from the same values.

use fe_meta::Zxid;
use serde_json::{json, Value};

use fe_meta::client::{Read, Reconfigured, Written};
use fe_meta::protocol::{ClusterConfig, StatusInfo};
use fe_meta::state::catalog::{Backend, Column, Database, Table};

mod show_frontends;

pub(super) use show_frontends::frontends;

/// A rendered answer.
pub(super) struct Output {
    /// For people: a table or a sentence, newline-terminated.
    pub human: String,
    /// For scripts.
    pub json: Value,
}

/// A journal id as ZooKeeper prints zxids.
pub(super) fn hex(id: Zxid) -> String {
    format!("0x{:x}", id.0)
}

/// Lays out rows under headers, columns padded to their widest cell.
pub(super) fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

pub(super) fn written(what: &str, w: Written) -> Output {
    let created = w
        .created_id
        .map_or(String::new(), |id| format!(", id {id}"));
    Output {
        human: format!("{what}{created} (journal id {})\n", hex(w.journal_id)),
        json: json!({ "journal_id": w.journal_id.0, "created_id": w.created_id }),
    }
}

/// `(N things, journal id 0x…)`; `what` is the singular noun, `s` appended when N ≠ 1.
fn footer(n: usize, what: &str, journal_id: Zxid) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!("({n} {what}{s}, journal id {})\n", hex(journal_id))
}

pub(super) fn backends(r: Read<Vec<Backend>>) -> Output {
    let rows: Vec<Vec<String>> = r
        .value
        .iter()
        .map(|b| {
            vec![
                b.id.to_string(),
                b.host.clone(),
                b.heartbeat_port.to_string(),
                b.state.name().to_owned(),
                b.capacity_bytes.to_string(),
            ]
        })
        .collect();
    let items: Vec<Value> = r
        .value
        .iter()
        .map(|b| {
            json!({"id": b.id, "host": b.host, "heartbeat_port": b.heartbeat_port,
                   "state": b.state.name(), "capacity_bytes": b.capacity_bytes})
        })
        .collect();
    let headers = ["ID", "HOST", "HEARTBEAT_PORT", "STATE", "CAPACITY_BYTES"];
    Output {
        human: table(&headers, &rows) + &footer(rows.len(), "backend", r.journal_id),
        json: json!({ "journal_id": r.journal_id.0, "backends": items }),
    }
}

/// A wall-clock time (ms since the Unix epoch) as `YYYY-MM-DD HH:MM:SS` UTC.
pub(super) fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (proleptic Gregorian, eras of 400 years).
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn config_json(c: &ClusterConfig) -> Value {
    let members: Vec<Value> = c
        .members
        .iter()
        .map(|m| json!({"sid": m.sid, "state": m.state.name(), "address": m.address}))
        .collect();
    json!({"cluster_id": c.cluster_id, "version": c.version.0,
           "in_force_version": c.in_force_version.0, "members": members,
           "tick_time_ms": c.tick_time_ms, "init_limit": c.init_limit,
           "sync_limit": c.sync_limit})
}

/// The members as zoo.cfg lines under a header line naming the version.
fn config_text(c: &ClusterConfig) -> String {
    let rows: Vec<Vec<String>> = c
        .members
        .iter()
        .map(|m| {
            vec![
                m.sid.to_string(),
                m.state.name().to_uppercase(),
                format!("server.{}={}", m.sid, m.address),
            ]
        })
        .collect();
    let mut out = format!("configuration version {}", hex(c.version));
    if c.in_force_version != c.version {
        out += &format!(
            " (in force here: {}, a change not committed yet)",
            hex(c.in_force_version)
        );
    }
    out.push('\n');
    out + &table(&["SID", "STATE", "ZOO.CFG LINE"], &rows)
}

/// SHOW CONFIG.
pub(super) fn config(c: &ClusterConfig) -> Output {
    let human = format!(
        "{}cluster id {:#x}  tickTime {} ms  initLimit {}  syncLimit {}\n",
        config_text(c),
        c.cluster_id,
        c.tick_time_ms,
        c.init_limit,
        c.sync_limit
    );
    Output {
        human,
        json: config_json(c),
    }
}

/// A committed membership change: what was done, the new version and the members.
pub(super) fn reconfigured(what: &str, r: &Reconfigured) -> Output {
    let human = format!(
        "{what}: committed as configuration version {}\n{}",
        hex(r.version),
        config_text(&r.config)
    );
    Output {
        human,
        json: json!({ "version": r.version.0, "config": config_json(&r.config) }),
    }
}

pub(super) fn databases(r: Read<Vec<Database>>) -> Output {
    let rows: Vec<Vec<String>> = r
        .value
        .iter()
        .map(|d| vec![d.id.to_string(), d.name.clone()])
        .collect();
    let items: Vec<Value> = r
        .value
        .iter()
        .map(|d| json!({"id": d.id, "name": d.name}))
        .collect();
    Output {
        human: table(&["ID", "NAME"], &rows) + &footer(rows.len(), "database", r.journal_id),
        json: json!({ "journal_id": r.journal_id.0, "databases": items }),
    }
}

fn column_text(c: &Column) -> String {
    let mut s = format!("{} {}", c.name, c.ty);
    if c.is_key {
        s.push_str(" KEY");
    }
    s.push_str(if c.nullable { " NULL" } else { " NOT NULL" });
    if let Some(d) = &c.default {
        s.push_str(&format!(" DEFAULT {d:?}"));
    }
    s
}

fn column_json(c: &Column) -> Value {
    json!({"name": c.name, "type": c.ty.to_string(), "nullable": c.nullable,
           "is_key": c.is_key, "default": c.default})
}

pub(super) fn tables(db: &str, r: Read<Vec<Table>>) -> Output {
    let rows: Vec<Vec<String>> = r
        .value
        .iter()
        .map(|t| {
            let cols: Vec<String> = t.columns.iter().map(|c| column_text(&c)).collect();
            vec![t.id.to_string(), t.name.clone(), cols.join(", ")]
        })
        .collect();
    let items: Vec<Value> = r
        .value
        .iter()
        .map(|t| {
            let cols: Vec<Value> = t.columns.iter().map(|c| column_json(&c)).collect();
            json!({"id": t.id, "db_id": t.db_id, "name": t.name, "columns": cols})
        })
        .collect();
    let s = if rows.len() == 1 { "" } else { "s" };
    let foot = format!(
        "({} table{s} in {db}, journal id {})\n",
        rows.len(),
        hex(r.journal_id)
    );
    Output {
        human: table(&["ID", "NAME", "COLUMNS"], &rows) + &foot,
        json: json!({ "journal_id": r.journal_id.0, "database": db, "tables": items }),
    }
}

pub(super) fn var(name: &str, r: Read<Option<String>>) -> Output {
    let human = match &r.value {
        Some(v) => format!("{name} = {v}\n"),
        None => format!("{name} is not set\n"),
    };
    Output {
        human,
        json: json!({ "journal_id": r.journal_id.0, "name": name, "value": r.value }),
    }
}

pub(super) fn vars(r: Read<Vec<(String, String)>>) -> Output {
    let rows: Vec<Vec<String>> = r
        .value
        .iter()
        .map(|(k, v)| vec![k.clone(), v.clone()])
        .collect();
    let map: serde_json::Map<String, Value> = r
        .value
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    Output {
        human: table(&["NAME", "VALUE"], &rows) + &footer(rows.len(), "variable", r.journal_id),
        json: json!({ "journal_id": r.journal_id.0, "vars": map }),
    }
}

pub(super) fn transferred(t: fe_meta::client::Transferred) -> Output {
    Output {
        human: format!(
            "leader moved from {} to {} in {} ms (epoch {})\n",
            t.from, t.to, t.elapsed_ms, t.epoch
        ),
        json: json!({ "from": t.from, "to": t.to, "epoch": t.epoch, "elapsed_ms": t.elapsed_ms }),
    }
}

pub(super) fn synced(journal_id: Zxid) -> Output {
    Output {
        human: format!("synced: journal id {}\n", hex(journal_id)),
        json: json!({ "journal_id": journal_id.0 }),
    }
}

pub(super) fn digest((journal_id, digest, entry_count): (Zxid, [u8; 32], u64)) -> Output {
    let hexd: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    Output {
        human: format!(
            "journal id {}  entries {entry_count}  sha256 {hexd}\n",
            hex(journal_id)
        ),
        json: json!({ "journal_id": journal_id.0, "digest": hexd, "entry_count": entry_count }),
    }
}

/// The status of one node as a JSON object.
pub(super) fn status_json(endpoint: &str, s: &StatusInfo) -> Value {
    json!({"endpoint": endpoint, "sid": s.sid, "mode": s.mode.name(), "leader_sid": s.leader_sid,
           "is_leader": s.is_leader(), "epoch": s.epoch,
           "applied_journal_id": s.applied_journal_id.0,
           "last_timestamp_ms": s.last_timestamp_ms, "staleness_ms": s.staleness_ms,
           "entry_count": s.entry_count, "cluster_id": s.cluster_id, "version": s.version,
           "last_start_time_ms": s.last_start_time_ms})
}

/// The status table's row for one node.
pub(super) fn status_row(endpoint: &str, s: &StatusInfo) -> Vec<String> {
    vec![
        s.sid.to_string(),
        endpoint.to_owned(),
        s.mode.name().to_owned(),
        opt(s.leader_sid),
        s.is_leader().to_string(),
        hex(s.applied_journal_id),
    ]
}

/// Headers of [`status_row`]: LEADER is the leader's sid, IS_LEADER whether this node is it.
pub(super) const STATUS_HEADERS: [&str; 6] = [
    "SID",
    "ENDPOINT",
    "ROLE",
    "LEADER",
    "IS_LEADER",
    "JOURNAL_ID",
];

/// STATUS, with the configuration version from GET_CONFIG (and the one in force when a change
/// is in flight).
pub(super) fn status(endpoint: &str, s: &StatusInfo, c: &ClusterConfig) -> Output {
    let in_force = if c.in_force_version == c.version {
        String::new()
    } else {
        format!(" (in force {})", hex(c.in_force_version))
    };
    let human = format!(
        "{}epoch {}  entries {}  staleness {}  cluster id {:#x}  version {}\n\
         started {}  configuration version {}{in_force}\n",
        table(&STATUS_HEADERS, &[status_row(endpoint, s)]),
        s.epoch,
        s.entry_count,
        s.staleness_ms
            .map_or("-".to_owned(), |ms| format!("{ms} ms")),
        s.cluster_id,
        s.version,
        s.last_start_time_ms
            .map_or("-".to_owned(), |ms| format!("{} UTC", utc(ms))),
        hex(c.version),
    );
    let mut json = status_json(endpoint, s);
    json["config_version"] = json!(c.version.0);
    json["in_force_config_version"] = json!(c.in_force_version.0);
    Output { human, json }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_pad_columns() {
        let t = table(
            &["A", "LONGER"],
            &[
                vec!["xyz".into(), "1".into()],
                vec!["q".into(), "22".into()],
            ],
        );
        assert_eq!(t, "A    LONGER\nxyz  1\nq    22\n");
    }

    #[test]
    fn wall_clock_times_print_in_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00");
        assert_eq!(utc(1_798_761_599_999), "2026-12-31 23:59:59");
        assert_eq!(utc(1_709_210_096_000), "2024-02-29 12:34:56");
    }
}
