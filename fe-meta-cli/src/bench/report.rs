//! The bench's output: RESULT lines with the keys of the anchors' ZkBench + cpu.sh (so
//! `zookeeper/table.py` renders ours unchanged), a human table and latency histograms, or one
//! JSON document; and the reverse, RESULT lines read back from a results file (ours or the
//! anchors' ZooKeeper run).
//!
//! INV-1: a [`Line`] keeps its keys in insertion order and renders `RESULT k=v ...`, quoting
//! (shell style) a value that holds a space or a quote; [`Line::parse`] reads back what
//! [`Line::render`] wrote (and ZkBench's lines, which `table.py` splits with `shlex`).
//! INV-2: a line's histogram is in the JSON document and the human output, never in the
//! RESULT line (whose keys stay ZkBench's).

use std::fmt::Write as _;

use super::cpu::{Quiet, Window};
use super::histogram::{self, Bucket};

/// One RESULT line.
#[derive(Clone, Debug, Default)]
pub struct Line {
    fields: Vec<(String, String)>,
    /// A bare word after the workload/label (W4's `summary`).
    flag: Option<String>,
    /// The latency histogram of a workload with per-operation latencies (else empty).
    histogram: Vec<Bucket>,
}

/// Why a RESULT line could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParseError {
    /// The line does not start with `RESULT `.
    #[error("not a RESULT line")]
    NotResult,
    /// A quoted value has no closing quote.
    #[error("unterminated quote")]
    UnterminatedQuote,
    /// A word after the workload/label that is neither `key=value` nor the one bare flag.
    #[error("unexpected word `{0}`")]
    UnexpectedWord(String),
}

impl Line {
    /// A line for `workload` and `label`.
    pub fn new(workload: &str, label: &str) -> Line {
        let mut l = Line::default();
        l.set("workload", workload);
        l.set("label", label);
        l
    }

    /// Adds (or replaces) `key=value`.
    pub fn set(&mut self, key: &str, value: impl ToString) -> &mut Line {
        let value = value.to_string();
        match self.fields.iter_mut().find(|(k, _)| k == key) {
            Some(f) => f.1 = value,
            None => self.fields.push((key.to_owned(), value)),
        }
        self
    }

    /// Adds a bare word (rendered after the label).
    pub fn flag(&mut self, word: &str) -> &mut Line {
        self.flag = Some(word.to_owned());
        self
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Appends cpu.sh's figures: the window's (if sampled) and the quiet gate's.
    pub fn add_cpu(&mut self, window: Option<Window>, quiet: Quiet) {
        if let Some(w) = window {
            let na = |x: Option<f64>| x.map_or("NA".to_owned(), |v| format!("{v:.2}"));
            self.set("server_cores", na(w.server_cores));
            self.set("client_cores", format!("{:.2}", w.client_cores));
            self.set("machine_busy_cores", format!("{:.2}", w.machine_busy_cores));
            self.set("nice_cores", format!("{:.2}", w.nice_cores));
            self.set("other_cores", format!("{:.2}", w.other_cores()));
            let ops: f64 = self
                .get("ops_per_s")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0);
            let per_op = match w.server_cores {
                Some(c) if ops > 0.0 => format!("{:.1}", c * 1e6 / ops),
                _ => "NA".to_owned(),
            };
            self.set("server_cpu_us_per_op", per_op);
        }
        self.set(
            "pre_busy_cores",
            quiet.busy.map_or("NA".to_owned(), |b| format!("{b:.2}")),
        );
        self.set("quiet_wait_s", quiet.waited_s);
    }

    /// `RESULT workload=.. label=.. [flag] k=v ...`.
    pub fn render(&self) -> String {
        let mut s = String::from("RESULT");
        for (i, (k, v)) in self.fields.iter().enumerate() {
            let _ = write!(s, " {k}={}", quote(v));
            if i == 1 {
                if let Some(f) = &self.flag {
                    let _ = write!(s, " {f}");
                }
            }
        }
        s
    }

    /// Reads `RESULT k=v ... [flag] ...` as [`Line::render`] or ZkBench writes it.
    pub fn parse(text: &str) -> Result<Line, ParseError> {
        let rest = text.strip_prefix("RESULT ").ok_or(ParseError::NotResult)?;
        let mut line = Line::default();
        for word in split_words(rest)? {
            match word.split_once('=') {
                Some((k, v)) => {
                    line.set(k, v);
                }
                None if line.flag.is_none() => {
                    line.flag(&word);
                }
                None => return Err(ParseError::UnexpectedWord(word)),
            }
        }
        Ok(line)
    }

    /// The line as a JSON object (numbers where the value parses as one), with its latency
    /// histogram (`histogram: [{le_us, count}, ...]`) when it has one.
    pub fn to_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        for (k, v) in &self.fields {
            let j = match v.parse::<f64>() {
                Ok(x) if x.is_finite() => serde_json::json!(x),
                _ => serde_json::json!(v),
            };
            m.insert(k.clone(), j);
        }
        if let Some(f) = &self.flag {
            m.insert(f.clone(), serde_json::json!(true));
        }
        if !self.histogram.is_empty() {
            let buckets: Vec<serde_json::Value> = self
                .histogram
                .iter()
                .map(|b| serde_json::json!({"le_us": b.upper_ns as f64 / 1e3, "count": b.count}))
                .collect();
            m.insert("histogram".to_owned(), serde_json::Value::Array(buckets));
        }
        serde_json::Value::Object(m)
    }
}

/// Splits shell style: words separated by spaces; `"..."` (with `\\` and `\"` escapes) and
/// `'...'` quote spaces; quotes may start mid-word (`info="a b"`).
fn split_words(text: &str) -> Result<Vec<String>, ParseError> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => words.extend(word.take()),
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => w.push(chars.next().ok_or(ParseError::UnterminatedQuote)?),
                        Some(x) => w.push(x),
                        None => return Err(ParseError::UnterminatedQuote),
                    }
                }
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => w.push(x),
                        None => return Err(ParseError::UnterminatedQuote),
                    }
                }
            }
            x => word.get_or_insert_with(String::new).push(x),
        }
    }
    words.extend(word);
    Ok(words)
}

/// The RESULT lines of a results file (other lines, e.g. `#` notes and tables, skipped).
pub fn parse_results(text: &str) -> Result<Vec<Line>, (usize, ParseError)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.starts_with("RESULT "))
        .map(|(i, l)| Line::parse(l.trim_end()).map_err(|e| (i + 1, e)))
        .collect()
}

fn quote(v: &str) -> String {
    if v.is_empty() || v.contains([' ', '"', '\'', ';']) {
        format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        v.to_owned()
    }
}

/// Latency percentiles as ZkBench prints them (`p50_us=.. p90_us=.. p99_us=.. p999_us=..
/// max_us=.. mean_us=..`, `NA` without samples), and the latency histogram; sorts `nanos`.
pub fn latencies(line: &mut Line, nanos: &mut [u64]) {
    line.histogram = histogram::buckets(nanos);
    const KEYS: [&str; 6] = ["p50_us", "p90_us", "p99_us", "p999_us", "max_us", "mean_us"];
    if nanos.is_empty() {
        for k in KEYS {
            line.set(k, "NA");
        }
        return;
    }
    nanos.sort_unstable();
    let n = nanos.len();
    let q = |p: f64| {
        let i = ((p * (n - 1) as f64).round() as usize).min(n - 1);
        nanos[i] as f64 / 1e3
    };
    let mean = nanos.iter().map(|&x| x as f64).sum::<f64>() / n as f64 / 1e3;
    for (k, v) in KEYS.iter().zip([
        q(0.5),
        q(0.9),
        q(0.99),
        q(0.999),
        nanos[n - 1] as f64 / 1e3,
        mean,
    ]) {
        line.set(k, format!("{v:.0}"));
    }
}

/// The etcd-style latency histogram of every line that has one.
pub fn histograms(lines: &[Line]) -> String {
    let mut s = String::new();
    for l in lines.iter().filter(|l| !l.histogram.is_empty()) {
        let title = format!(
            "{} {}: response time histogram ({} ops; bucket upper bounds)",
            l.get("workload").unwrap_or(""),
            l.get("label").unwrap_or(""),
            l.histogram.iter().map(|b| b.count).sum::<u64>(),
        );
        s.push('\n');
        s.push_str(&histogram::render(&title, &l.histogram));
    }
    s
}

/// The human table of every line (W0–W3 rows, W4 trials and summary, W5, memory).
pub fn human(lines: &[Line]) -> String {
    let g = |l: &Line, k: &str| l.get(k).unwrap_or("").to_owned();
    let mut s = String::new();
    let steady = |l: &&Line| ["W0", "W1", "W2", "W3"].contains(&l.get("workload").unwrap_or(""));
    if !lines.iter().any(|l| steady(&l)) {
        return human_faults(lines);
    }
    s.push_str("| workload | setup | ops/s | p50 µs | p99 µs | p99.9 µs | server cores | server CPU µs/op | client cores | machine busy |\n");
    s.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for l in lines {
        let w = g(l, "workload");
        if ["W0", "W1", "W2", "W3"].contains(&w.as_str()) {
            let _ = writeln!(
                s,
                "| {w} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                g(l, "label"),
                g(l, "ops_per_s"),
                g(l, "p50_us"),
                g(l, "p99_us"),
                g(l, "p999_us"),
                g(l, "server_cores"),
                g(l, "server_cpu_us_per_op"),
                g(l, "client_cores"),
                g(l, "machine_busy_cores"),
            );
        }
    }
    s.push_str(&human_faults(lines));
    s
}

/// W4, W5 and memory in human form.
fn human_faults(lines: &[Line]) -> String {
    let g = |l: &Line, k: &str| l.get(k).unwrap_or("").to_owned();
    let mut s = String::new();
    let w4: Vec<&Line> = lines
        .iter()
        .filter(|l| l.get("workload") == Some("W4"))
        .collect();
    if !w4.is_empty() {
        s.push_str("\n| W4 trial | killed | new leader | unavailable ms (existing client) | new leader reported ms | fresh client first write ms |\n");
        s.push_str("|---|---:|---:|---:|---:|---:|\n");
        for l in &w4 {
            if l.flag.as_deref() == Some("summary") {
                let _ = writeln!(
                    s,
                    "| mean | | | {} (max {}) | {} | {} |",
                    g(l, "mean_unavail_ms"),
                    g(l, "max_unavail_ms"),
                    g(l, "mean_new_leader_ms"),
                    g(l, "mean_fresh_client_first_write_ms")
                );
            } else {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {} |",
                    g(l, "trial"),
                    g(l, "killed"),
                    g(l, "new_leader"),
                    g(l, "unavail_ms"),
                    g(l, "new_leader_reported_ms"),
                    g(l, "fresh_client_first_write_ms")
                );
            }
        }
    }
    s.push_str(&human_w6(lines));
    for l in lines {
        match l.get("workload") {
            Some("W5") => {
                let _ = writeln!(
                    s,
                    "\nW5 catch-up ({}, op={}): {} txns written in {} s ({} ops/s); restart -> serving {} ms, -> caught up {} ms",
                    g(l, "label"),
                    g(l, "op"),
                    g(l, "txns"),
                    g(l, "write_s"),
                    g(l, "write_ops_per_s"),
                    g(l, "restart_to_serving_ms"),
                    g(l, "restart_to_caught_up_ms")
                );
            }
            Some("large") => s.push_str(&super::large::human(l)),
            Some("memory") => {
                let _ = writeln!(
                    s,
                    "\nmemory: {} catalog entries; RSS per node {} MiB; image {} bytes; load (restart -> caught up) {} ms",
                    g(l, "entries"),
                    g(l, "rss_mib"),
                    g(l, "image_bytes"),
                    g(l, "restart_to_caught_up_ms")
                );
            }
            _ => {}
        }
    }
    s
}

/// W6 in human form: one row per trial, then grow-kill's outcome.
fn human_w6(lines: &[Line]) -> String {
    let g = |l: &Line, k: &str| l.get(k).unwrap_or("").to_owned();
    let mut s = String::new();
    let trials: Vec<&Line> = lines
        .iter()
        .filter(|l| l.get("workload") == Some("W6") && l.get("phase") != Some("grow-kill"))
        .collect();
    if !trials.is_empty() {
        s.push_str("\n| W6 phase | trial | max write gap ms | steady gap ms | change ms (rc) | new leader ms | fresh client write ms | old leader steps down ms |\n");
        s.push_str("|---|---:|---:|---:|---:|---:|---:|---:|\n");
        for l in trials {
            let phase = match l.get("writer") {
                Some(w) => format!("{} (writer {w})", g(l, "phase")),
                None => g(l, "phase"),
            };
            let _ = writeln!(
                s,
                "| {phase} | {} | {} | {} | {} ({}) | {} | {} | {} |",
                g(l, "trial"),
                g(l, "max_gap_ms"),
                g(l, "baseline_max_gap_ms"),
                g(l, "reconfig_ms"),
                g(l, "reconfig_rc"),
                g(l, "new_leader_ms"),
                g(l, "fresh_client_write_ms"),
                g(l, "old_leader_stepdown_ms"),
            );
        }
    }
    for l in lines.iter().filter(|l| l.get("phase") == Some("grow-kill")) {
        let _ = writeln!(
            s,
            "\nW6 grow-kill: added 4 ({} ms) and 5 ({} ms), killed {} (leader {}), survivors {} elected {} in {} ms; writes continued: {} (largest gap {} ms); acknowledged {} ≤ stored {} (lost {}); survivors at the same journal id: {}",
            g(l, "add4_reconfig_ms"),
            g(l, "add5_reconfig_ms"),
            g(l, "killed"),
            g(l, "leader_before"),
            g(l, "survivors"),
            g(l, "new_leader"),
            g(l, "new_leader_ms"),
            g(l, "writes_continued"),
            g(l, "max_gap_ms"),
            g(l, "acked_writes"),
            g(l, "znode_version"),
            g(l, "lost_acked"),
            g(l, "survivors_zxid_equal"),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_render_in_order_with_quotes_and_zkbench_percentiles() {
        let mut l = Line::new("W4", "ens");
        l.flag("summary").set("trials", 3).set("info", "a b");
        assert_eq!(
            l.render(),
            "RESULT workload=W4 label=ens summary trials=3 info=\"a b\""
        );
        let mut p = Line::new("W1", "x");
        let mut v: Vec<u64> = (1..=1000).rev().map(|i| i * 1000).collect();
        latencies(&mut p, &mut v);
        // ZkBench: s[round(p * (n - 1))] / 1e3 µs.
        assert_eq!(p.get("p50_us"), Some("501"));
        assert_eq!(p.get("p99_us"), Some("990"));
        assert_eq!(p.get("max_us"), Some("1000"));
        let mut e = Line::new("W0", "y");
        latencies(&mut e, &mut []);
        assert_eq!(e.get("p999_us"), Some("NA"));
        assert!(e.histogram.is_empty() && e.to_json().get("histogram").is_none());
        assert_eq!(l.to_json()["trials"], serde_json::json!(3.0));
        // 1..=1000 µs: buckets 1 µs .. 1 ms, every sample counted.
        let h = p.to_json()["histogram"].clone();
        let h = h.as_array().cloned().unwrap_or_default();
        assert_eq!(
            h.first().map(|b| b["le_us"].clone()),
            Some(serde_json::json!(1.0))
        );
        assert_eq!(
            h.last().map(|b| b["le_us"].clone()),
            Some(serde_json::json!(1000.0))
        );
        let total: u64 = h.iter().filter_map(|b| b["count"].as_u64()).sum();
        assert_eq!(total, 1000);
        assert!(histograms(&[p.clone(), e]).contains("W1 x: response time histogram (1000 ops"));
        assert!(!p.render().contains("histogram"));
    }

    #[test]
    fn rendered_and_zkbench_lines_parse_back() {
        let mut l = Line::new("W5-sync", "ens-set");
        l.set("info", "SNAP \"x\" 'y'")
            .set("ms", 12)
            .flag("summary");
        let back = Line::parse(&l.render()).unwrap();
        assert_eq!(back.render(), l.render());
        assert_eq!(back.get("info"), Some("SNAP \"x\" 'y'"));
        let zk = Line::parse("RESULT workload=W1 label=ens-leader ops=7150 p99_us=4213 info='a b'")
            .unwrap();
        assert_eq!(zk.get("p99_us"), Some("4213"));
        assert_eq!(zk.get("info"), Some("a b"));
        assert_eq!(Line::parse("# note").err(), Some(ParseError::NotResult));
        assert_eq!(
            Line::parse("RESULT workload=W1 info=\"open").err(),
            Some(ParseError::UnterminatedQuote)
        );
        assert_eq!(
            Line::parse("RESULT workload=W4 a b").err(),
            Some(ParseError::UnexpectedWord("b".to_owned()))
        );
        let text =
            "# run\nRESULT workload=W0 label=x p50_us=5\n| table |\nRESULT workload=W1 label=y\n";
        let lines = parse_results(text).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1].get("label"), Some("y"));
        assert_eq!(
            parse_results("RESULT a=\"b").map(|_| ()),
            Err((1, ParseError::UnterminatedQuote))
        );
    }
}
