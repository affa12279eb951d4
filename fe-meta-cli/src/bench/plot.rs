//! `fe-meta bench --svg FILE`: the W1 and W3 latency distributions of fe-meta and ZooKeeper
//! side by side, one panel per workload and setup (W1 on the leader and on a follower, W3
//! spread and on the leader), drawn by [`super::svg`].
//!
//! ZooKeeper's side comes from the anchors' run (`$ANCHOR_OUT/zookeeper/results/raw-*.txt`):
//! its ZkBench keeps each sample only until it has printed the summary, so a results file
//! holds percentiles, not samples. The plot therefore joins the five figures both sides
//! print — p50, p90, p99, p99.9 and max — and nothing in between.
//!
//! INV-1: a point is a figure read from a RESULT line, never an interpolated or made-up one;
//! a missing or `NA` figure leaves its point out.
//! INV-2: a panel is drawn when at least one side has its RESULT line; without any W1 or W3
//! line on either side the command fails and writes nothing.

use std::path::{Path, PathBuf};

use super::report::{parse_results, Line, ParseError};
use super::svg::{percentile_plot, At, Panel, Point, Series};

/// Our line colour and name.
const OURS: (&str, &str) = ("fe-meta", "#1f77b4");
/// ZooKeeper's.
const ZOOKEEPER: (&str, &str) = ("ZooKeeper 3.8", "#d62728");

/// The panels: workload, label, title.
const PANELS: [(&str, &str, &str); 4] = [
    (
        "W1",
        "ens-leader",
        "W1: 1 client, closed-loop writes, on the leader",
    ),
    (
        "W1",
        "ens-follower",
        "W1: 1 client, closed-loop writes, on a follower",
    ),
    (
        "W3",
        "ens-spread",
        "W3: concurrent clients, spread over 3 servers",
    ),
    (
        "W3",
        "ens-leader",
        "W3: concurrent clients, all on the leader",
    ),
];

/// The figures both sides print, and where they sit.
const FIGURES: [(&str, At); 5] = [
    ("p50_us", At::Percentile(50.0)),
    ("p90_us", At::Percentile(90.0)),
    ("p99_us", At::Percentile(99.0)),
    ("p999_us", At::Percentile(99.9)),
    ("max_us", At::Max),
];

/// Why the plot could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// A results file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A RESULT line of a results file is malformed.
    #[error("{path} line {line}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        source: ParseError,
    },
    /// Neither side has a W1 or W3 line.
    #[error("no W1 or W3 RESULT lines to plot (ours: {ours}, ZooKeeper: {zookeeper})")]
    Nothing {
        /// Where ours came from.
        ours: String,
        /// Where ZooKeeper's came from.
        zookeeper: String,
    },
    /// The SVG could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The RESULT lines of a results file.
pub fn read_results(path: &Path) -> Result<Vec<Line>, PlotError> {
    let text = std::fs::read_to_string(path).map_err(|source| PlotError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_results(&text).map_err(|(line, source)| PlotError::Parse {
        path: path.to_owned(),
        line,
        source,
    })
}

/// The newest `raw-*.txt` of the anchors' ZooKeeper run under `anchor_out`
/// (`$ANCHOR_OUT`, default `/tmp/anchor-out`), by modification time.
pub fn newest_zookeeper_results(anchor_out: &Path) -> Option<PathBuf> {
    let dir = anchor_out.join("zookeeper").join("results");
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("raw-") && name.ends_with(".txt")
        })
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .max()
        .map(|(_, p)| p)
}

fn series(
    lines: &[Line],
    workload: &str,
    label: &str,
    (name, color): (&str, &str),
) -> Option<Series> {
    let line = lines
        .iter()
        .find(|l| l.get("workload") == Some(workload) && l.get("label") == Some(label))?;
    let points = FIGURES
        .iter()
        .filter_map(|&(key, at)| {
            let us: f64 = line.get(key)?.parse().ok()?;
            Some(Point { at, ms: us / 1e3 })
        })
        .collect();
    Some(Series {
        name: name.to_owned(),
        color: color.to_owned(),
        points,
    })
}

/// The panels that at least one side has a line for (INV-2).
pub fn panels(ours: &[Line], zookeeper: &[Line]) -> Vec<Panel> {
    PANELS
        .iter()
        .filter_map(|&(w, label, title)| {
            let series: Vec<Series> = [
                series(ours, w, label, OURS),
                series(zookeeper, w, label, ZOOKEEPER),
            ]
            .into_iter()
            .flatten()
            .collect();
            let sessions = [ours, zookeeper]
                .iter()
                .flat_map(|ls| ls.iter())
                .find(|l| l.get("workload") == Some(w) && l.get("label") == Some(label))
                .and_then(|l| l.get("sessions"));
            let title = match sessions {
                Some(n) => title.replace("concurrent clients", &format!("{n} clients")),
                None => title.to_owned(),
            };
            (!series.is_empty()).then_some(Panel { title, series })
        })
        .collect()
}

/// Writes the SVG of `ours` and `zookeeper` (`None`: ZooKeeper's run was not found) to `out`;
/// each side is (where its lines came from, the lines).
pub fn write_svg(
    out: &Path,
    ours: (&str, &[Line]),
    zookeeper: Option<(&str, &[Line])>,
) -> Result<(), PlotError> {
    let zk_lines = zookeeper.map_or(&[][..], |(_, l)| l);
    let panels = panels(ours.1, zk_lines);
    let zk_name = zookeeper.map_or("not found", |(p, _)| p);
    if panels.is_empty() {
        return Err(PlotError::Nothing {
            ours: ours.0.to_owned(),
            zookeeper: zk_name.to_owned(),
        });
    }
    let note = format!(
        "Both sides record summary percentiles only (p50, p90, p99, p99.9, max): each line joins those five points, nothing in between.\n\
         fe-meta: {}; ZooKeeper 3.8 (the anchors' zookeeper/run.sh): {zk_name}",
        ours.0
    );
    let doc = percentile_plot(
        "Write latency by percentile: fe-meta and ZooKeeper",
        &note,
        &panels,
    );
    std::fs::write(out, doc).map_err(|source| PlotError::Write {
        path: out.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OURS_RAW: &str = "# fe-meta bench run\n\
        RESULT workload=W1 label=ens-leader ops=13948 p50_us=691 p90_us=892 p99_us=1406 p999_us=5363 max_us=43336 mean_us=717\n\
        RESULT workload=W3 label=ens-spread sessions=32 p50_us=1800 p90_us=2500 p99_us=NA p999_us=9000 max_us=30000\n";
    const ZK_RAW: &str = "# zookeeper anchor run\n\
        RESULT workload=W1 label=ens-leader ops=7150 p50_us=715 p90_us=1200 p99_us=4213 p999_us=9000 max_us=60000 mean_us=800\n\
        RESULT workload=W1 label=ens-follower ops=7150 p50_us=800 p90_us=1300 p99_us=5000 p999_us=9500 max_us=61000\n\
        RESULT workload=W3 label=standalone sessions=32 p50_us=1 p90_us=1 p99_us=1 p999_us=1 max_us=1\n";

    #[test]
    fn panels_hold_the_figures_of_the_lines_and_nothing_else() {
        let ours = parse_results(OURS_RAW).unwrap();
        let zk = parse_results(ZK_RAW).unwrap();
        let p = panels(&ours, &zk);
        let titles: Vec<&str> = p.iter().map(|p| p.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "W1: 1 client, closed-loop writes, on the leader",
                "W1: 1 client, closed-loop writes, on a follower",
                "W3: 32 clients, spread over 3 servers",
            ]
        );
        assert_eq!(p[0].series.len(), 2);
        assert_eq!(p[0].series[1].name, "ZooKeeper 3.8");
        let zk_ms: Vec<f64> = p[0].series[1].points.iter().map(|x| x.ms).collect();
        assert_eq!(zk_ms, [0.715, 1.2, 4.213, 9.0, 60.0]);
        assert_eq!(p[1].series.len(), 1);
        // NA leaves its point out (INV-1).
        let w3: Vec<At> = p[2].series[0].points.iter().map(|x| x.at).collect();
        assert_eq!(
            w3,
            [
                At::Percentile(50.0),
                At::Percentile(90.0),
                At::Percentile(99.9),
                At::Max
            ]
        );
    }

    #[test]
    fn the_svg_is_written_and_nothing_to_plot_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let (o, z) = (dir.path().join("ours.txt"), dir.path().join("zk.txt"));
        std::fs::write(&o, OURS_RAW).unwrap();
        std::fs::write(&z, ZK_RAW).unwrap();
        let (ours, zk) = (read_results(&o).unwrap(), read_results(&z).unwrap());
        let out = dir.path().join("plot.svg");
        write_svg(&out, ("ours.txt", &ours), Some(("zk.txt", &zk))).unwrap();
        let doc = std::fs::read_to_string(&out).unwrap();
        assert_eq!(doc.matches("<polyline").count(), 4);
        assert!(doc.contains("zk.txt"));
        let err = write_svg(&out, ("ours.txt", &[]), None).unwrap_err();
        assert!(matches!(err, PlotError::Nothing { .. }), "{err}");
        std::fs::write(&z, "RESULT workload=W1 info=\"open\n").unwrap();
        assert!(matches!(
            read_results(&z),
            Err(PlotError::Parse { line: 1, .. })
        ));
        assert!(matches!(
            read_results(&dir.path().join("missing")),
            Err(PlotError::Read { .. })
        ));
        assert_eq!(newest_zookeeper_results(dir.path()), None);
        let res = dir.path().join("zookeeper").join("results");
        std::fs::create_dir_all(&res).unwrap();
        std::fs::write(res.join("raw-1.txt"), ZK_RAW).unwrap();
        std::fs::write(res.join("other.txt"), ZK_RAW).unwrap();
        assert_eq!(
            newest_zookeeper_results(dir.path()),
            Some(res.join("raw-1.txt"))
        );
    }
}
