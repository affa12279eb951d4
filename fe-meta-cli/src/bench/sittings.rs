//! `--sittings N`: the summary of one figure across sittings: each sitting's value, the median
//! and the worst (the lowest throughput, the highest latency or cost). A target is judged in
//! every sitting, not on average, so the worst is the figure to hold it against.
//!
//! INV-1: a figure is listed only if at least one sitting has it; a sitting without it shows
//! `-` and does not count in the median or the worst.
//! INV-2: lines are grouped by workload, label and `background_cores` (an idle and a busy run
//! of the same workload are different rows).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::report::Line;

/// Whether more of a figure is better (throughput) or worse (latency, CPU, time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Better {
    Higher,
    Lower,
}

/// The figures summarised for the steady workloads (W0–W3).
const STEADY: [(&str, &str, Better); 5] = [
    ("ops_per_s", "ops/s", Better::Higher),
    ("p50_us", "p50 µs", Better::Lower),
    ("p99_us", "p99 µs", Better::Lower),
    ("server_cpu_us_per_op", "server CPU µs/op", Better::Lower),
    ("server_cores", "server cores", Better::Higher),
];

/// Figures of W4 (from its trial lines: the worst trial of each sitting) and W5.
const FAULTS: [(&str, &str, &str, Better); 4] = [
    (
        "W4",
        "new_leader_reported_ms",
        "new leader ms (worst trial)",
        Better::Lower,
    ),
    (
        "W4",
        "fresh_client_first_write_ms",
        "fresh client first write ms (worst trial)",
        Better::Lower,
    ),
    (
        "W4",
        "unavail_ms",
        "existing client unavailable ms (worst trial)",
        Better::Lower,
    ),
    (
        "W5",
        "restart_to_caught_up_ms",
        "restart -> caught up ms",
        Better::Lower,
    ),
];

/// One row: its key (workload, setup, figure) and the value of each sitting.
type Rows = BTreeMap<(String, String, String), (Better, BTreeMap<u32, f64>)>;

fn num(l: &Line, key: &str) -> Option<f64> {
    l.get(key)
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|v| v.is_finite())
}

/// Adds `value` for `sitting`, keeping the worse of two (W4's trials fold into their worst).
fn put(rows: &mut Rows, key: (String, String, String), better: Better, sitting: u32, value: f64) {
    let slot = rows.entry(key).or_insert_with(|| (better, BTreeMap::new()));
    let v = slot.1.entry(sitting).or_insert(value);
    *v = worse(better, *v, value);
}

fn worse(better: Better, a: f64, b: f64) -> f64 {
    match better {
        Better::Higher => a.min(b),
        Better::Lower => a.max(b),
    }
}

fn collect(lines: &[Line]) -> Rows {
    let mut rows = Rows::new();
    for l in lines {
        let (Some(w), Some(s)) = (l.get("workload"), num(l, "sitting")) else {
            continue;
        };
        let sitting = s as u32;
        let mut setup = l.get("label").unwrap_or("").to_owned();
        if let Some(b) = l.get("background_cores").filter(|b| *b != "0") {
            setup = format!("{setup}, {b} busy core(s)");
        }
        if ["W0", "W1", "W2", "W3"].contains(&w) {
            for (key, name, better) in STEADY {
                if let Some(v) = num(l, key) {
                    let k = (w.to_owned(), setup.clone(), name.to_owned());
                    put(&mut rows, k, better, sitting, v);
                }
            }
        }
        for (fw, key, name, better) in FAULTS {
            if let (true, Some(v)) = (fw == w, num(l, key)) {
                let k = (w.to_owned(), setup.clone(), name.to_owned());
                put(&mut rows, k, better, sitting, v);
            }
        }
    }
    rows
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn fmt(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// The markdown table of every figure across `sittings` sittings (empty with one sitting).
pub fn summary(lines: &[Line], sittings: u32) -> String {
    if sittings < 2 {
        return String::new();
    }
    let rows = collect(lines);
    let mut s = format!(
        "\n## {sittings} sittings: each, the median and the worst\n\n| workload | setup | figure |"
    );
    for i in 1..=sittings {
        let _ = write!(s, " sitting {i} |");
    }
    s.push_str(" median | worst |\n|---|---|---|");
    s.push_str(&"---:|".repeat(sittings as usize + 2));
    s.push('\n');
    for ((w, setup, name), (better, by_sitting)) in &rows {
        let _ = write!(s, "| {w} | {setup} | {name} |");
        for i in 1..=sittings {
            let cell = by_sitting.get(&i).map_or("-".to_owned(), |v| fmt(*v));
            let _ = write!(s, " {cell} |");
        }
        let values: Vec<f64> = by_sitting.values().copied().collect();
        let worst = values.iter().copied().reduce(|a, b| worse(*better, a, b));
        let (m, w) = match worst {
            Some(w) => (fmt(median(values)), fmt(w)),
            None => ("-".to_owned(), "-".to_owned()),
        };
        let _ = writeln!(s, " {m} | {w} |");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> Line {
        Line::parse(text).unwrap()
    }

    #[test]
    fn each_sitting_the_median_and_the_worst_of_every_figure() {
        let lines = [
            line("RESULT workload=W3 label=ens-spread ops_per_s=100 p99_us=9 sitting=1"),
            line("RESULT workload=W3 label=ens-spread ops_per_s=300 p99_us=5 sitting=2"),
            line("RESULT workload=W3 label=ens-spread ops_per_s=200 p99_us=7 sitting=3"),
            line("RESULT workload=W3 label=ens-spread ops_per_s=50 background_cores=1 sitting=1"),
        ];
        let s = summary(&lines, 3);
        assert!(
            s.contains("| W3 | ens-spread | ops/s | 100 | 300 | 200 | 200 | 100 |"),
            "{s}"
        );
        assert!(
            s.contains("| W3 | ens-spread | p99 µs | 9.00 | 5.00 | 7.00 | 7.00 | 9.00 |"),
            "{s}"
        );
        assert!(
            s.contains(
                "| W3 | ens-spread, 1 busy core(s) | ops/s | 50.00 | - | - | 50.00 | 50.00 |"
            ),
            "{s}"
        );
    }

    #[test]
    fn w4_keeps_the_worst_trial_of_each_sitting() {
        let lines = [
            line("RESULT workload=W4 label=ens trial=1 new_leader_reported_ms=80 sitting=1"),
            line("RESULT workload=W4 label=ens trial=2 new_leader_reported_ms=120 sitting=1"),
            line("RESULT workload=W4 label=ens trial=1 new_leader_reported_ms=90 sitting=2"),
        ];
        let s = summary(&lines, 2);
        assert!(
            s.contains("| W4 | ens | new leader ms (worst trial) | 120 | 90.00 | 105 | 120 |"),
            "{s}"
        );
    }

    #[test]
    fn one_sitting_has_no_summary() {
        let lines = [line(
            "RESULT workload=W1 label=ens-leader ops_per_s=1 sitting=1",
        )];
        assert_eq!(summary(&lines, 1), "");
    }
}
