//! `fe-meta dump-log DATA_DIR`: every record of a txn log, then the log's state.
//!
//! Text: one line per record (`zxid kind len op fields`), then `segment` lines and a `state`
//! line. JSON: one document `{records: [...], log: {...}}`, records streamed as they are read.
//!
//! INV-1: every valid record within `--from`/`--limit` is printed once, in log order, before
//! the state; the state names the first damage exactly as `zab_store::read_log` found it.
//! INV-2: exits with 1 when the damage would stop a node from starting (a torn tail does not).

use std::io::{self, Write};
use std::path::PathBuf;

use clap::Args;
use serde_json::json;
use zab_store::{OfflineLog, OfflineRecord};

use super::render::{decode_payload, kind_name, log_state_json, log_state_line, parse_zxid};
use crate::Failure;

/// `fe-meta dump-log`.
#[derive(Debug, Args)]
pub struct DumpLogArgs {
    /// The txn log directory (zoo.cfg's dataLogDir, which defaults to dataDir).
    #[arg(value_name = "DATA_DIR")]
    pub dir: PathBuf,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
    /// Print only records with this zxid or later (decimal, or hex with 0x).
    #[arg(long, value_name = "ZXID", value_parser = parse_zxid)]
    pub from: Option<zab_core::Zxid>,
    /// Print at most this many records (the state still covers the whole log).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
}

/// Runs `dump-log`.
pub fn run(args: &DumpLogArgs) -> Result<(), Failure> {
    if !args.dir.is_dir() {
        return Err(Failure::other(format!(
            "{} is not a directory",
            args.dir.display()
        )));
    }
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let mut write_err: Option<io::Error> = None;
    let (log, printed) = print_records(args, &mut out, &mut write_err)?;
    let state = if args.json {
        state_json_tail(&log, printed)
    } else {
        state_text(&log, printed)
    };
    write_out(&mut out, &state, &mut write_err);
    if let Err(e) = out.flush() {
        write_err.get_or_insert(e);
    }
    if let Some(e) = write_err {
        return Err(Failure::other(format!("writing to stdout: {e}")));
    }
    if log.would_start() {
        Ok(())
    } else {
        Err(Failure::other(format!(
            "the txn log in {} would not start: {}",
            args.dir.display(),
            log_state_line(&log)
        )))
    }
}

/// Reads the log, printing the records within `--from`/`--limit` as they come (JSON: the
/// opening of the document and the records array's items); returns the log and how many
/// records were printed. Stops printing at the first write error, which it leaves in `err`.
fn print_records(
    args: &DumpLogArgs,
    out: &mut impl Write,
    err: &mut Option<io::Error>,
) -> Result<(OfflineLog, usize), Failure> {
    let mut printed = 0usize;
    if args.json {
        write_out(out, "{\"records\":[", err);
    }
    let log = zab_store::read_log(&args.dir, |r| {
        if args.from.is_some_and(|from| r.zxid < from)
            || args.limit.is_some_and(|limit| printed >= limit)
            || err.is_some()
        {
            return;
        }
        let line = if args.json {
            let sep = if printed == 0 { "" } else { "," };
            format!("{sep}{}", record_json(r))
        } else {
            format!("{}\n", record_text(r))
        };
        printed += 1;
        write_out(out, &line, err);
    })
    .map_err(|e| Failure::other(e.to_string()))?;
    Ok((log, printed))
}

/// The end of the JSON document after the records array: `printed` and the log's state.
fn state_json_tail(log: &OfflineLog, printed: usize) -> String {
    let tail = json!({"printed": printed, "log": log_state_json(log)});
    let tail = tail.to_string();
    // `tail` is an object: splice its fields after the records array.
    let fields = tail.strip_prefix('{').unwrap_or(&tail);
    format!("],{fields}\n")
}

/// The text after the records: `segment` and `unfinished` lines, the totals and the state.
fn state_text(log: &OfflineLog, printed: usize) -> String {
    let mut text = String::new();
    for s in &log.segments {
        text.push_str(&format!(
            "segment {} base={} prev={} size={} records={} end={}\n",
            s.path.display(),
            s.base,
            s.prev.map_or_else(|| "?".to_string(), |z| z.to_string()),
            s.size,
            s.records,
            s.end
        ));
    }
    for t in &log.temp_files {
        text.push_str(&format!(
            "unfinished {} (holds no record; a start removes it)\n",
            t.display()
        ));
    }
    text.push_str(&format!(
        "records={} printed={printed} floor={} first={} last_valid={}\nstate: {}\n",
        log.records,
        log.floor,
        log.first_zxid
            .map_or_else(|| "none".into(), |z| z.to_string()),
        log.last_zxid
            .map_or_else(|| "none".into(), |z| z.to_string()),
        log_state_line(log)
    ));
    text
}

fn write_out(out: &mut impl Write, s: &str, err: &mut Option<io::Error>) {
    if err.is_none() {
        if let Err(e) = out.write_all(s.as_bytes()) {
            *err = Some(e);
        }
    }
}

fn record_text(r: &OfflineRecord<'_>) -> String {
    let d = decode_payload(r.zxid, r.kind, r.payload);
    let mut line = format!(
        "zxid={} kind={} len={} op={}",
        r.zxid,
        kind_name(r.kind),
        r.payload.len(),
        d.op
    );
    if !d.fields.is_empty() {
        line.push(' ');
        line.push_str(&d.fields);
    }
    if let Some(e) = &d.error {
        line.push_str(&format!(" error=\"{e}\""));
    }
    if let Some(h) = &d.hex {
        line.push_str(&format!(" hex={h}"));
    }
    line
}

fn record_json(r: &OfflineRecord<'_>) -> String {
    let d = decode_payload(r.zxid, r.kind, r.payload);
    json!({
        "zxid": r.zxid.0,
        "zxid_hex": r.zxid.to_string(),
        "kind": kind_name(r.kind),
        "len": r.payload.len(),
        "file": r.file,
        "offset": r.offset,
        "op": d.op,
        "fields": d.fields,
        "error": d.error,
        "hex": d.hex,
    })
    .to_string()
}
