//! Where the bench's results go: RESULT lines as they come, then the human table and the
//! latency histograms, or one JSON document at the end; and `--svg`'s inputs (this run's lines
//! or an earlier run's file, ZooKeeper's results file).
//!
//! INV: stdout carries results only; notes about the SVG go to stderr.

use std::io::Write as _;
use std::path::Path;

use super::report::{self, Line};
use super::{cpu, plot, progress, BenchArgs, Failure};

/// A results file as the SVG's note names it: its file name (the run's time stamp).
pub(super) fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

pub(super) fn plot_failure(e: plot::PlotError) -> Failure {
    Failure::other(format!("--svg: {e}"))
}

/// Writes the SVG of `ours` beside ZooKeeper's results (`--zookeeper-results` or the newest
/// anchors' run; ours alone, with a warning, when there is none).
pub(super) fn draw(
    args: &BenchArgs,
    svg: &Path,
    ours_from: &str,
    ours: &[Line],
) -> Result<(), Failure> {
    let zk_path = args.zookeeper_results.clone().or_else(|| {
        let anchor_out = std::env::var_os("ANCHOR_OUT").unwrap_or_else(|| "/tmp/anchor-out".into());
        plot::newest_zookeeper_results(Path::new(&anchor_out))
    });
    let zk = match &zk_path {
        Some(p) => Some((file_name(p), plot::read_results(p).map_err(plot_failure)?)),
        None => {
            progress(
                "--svg: no ZooKeeper results found (--zookeeper-results); drawing fe-meta alone",
            );
            None
        }
    };
    plot::write_svg(
        svg,
        (ours_from, ours),
        zk.as_ref().map(|(p, l)| (p.as_str(), l.as_slice())),
    )
    .map_err(plot_failure)?;
    progress(&format!("--svg: wrote {}", svg.display()));
    Ok(())
}

/// Where results go: RESULT lines as they come (then the human table), or one JSON document
/// at the end.
pub(super) struct Output {
    json: bool,
    /// The sitting every line is tagged with (`sitting=N`).
    sitting: u32,
    notes: Vec<String>,
    lines: Vec<Line>,
}

impl Output {
    pub(super) fn new(json: bool) -> Output {
        Output {
            json,
            sitting: 1,
            notes: Vec::new(),
            lines: Vec::new(),
        }
    }

    pub(super) fn note(&mut self, text: &str) {
        if !self.json {
            println!("{text}");
            let _ = std::io::stdout().flush();
        }
        self.notes.push(text.to_owned());
    }

    /// Lines from now on belong to sitting `n`.
    pub(super) fn start_sitting(&mut self, n: u32) {
        self.sitting = n;
    }

    pub(super) fn line(&mut self, mut l: Line) {
        l.set("sitting", self.sitting);
        if !self.json {
            println!("{}", l.render());
            let _ = std::io::stdout().flush();
        }
        self.lines.push(l);
    }

    pub(super) fn result(&mut self, r: Result<Line, Failure>) -> Result<(), Failure> {
        self.line(r?);
        Ok(())
    }

    /// cpu.sh's comment line after an unsampled (fault) workload.
    pub(super) fn gate_note(&mut self, what: &str, q: cpu::Quiet, since: cpu::Stat) {
        let (_, nice) = cpu::busy_between(since, cpu::stat());
        let busy = q.busy.map_or("NA".to_owned(), |b| format!("{b:.2}"));
        self.note(&format!(
            "# {what}: pre_busy_cores={busy} quiet_wait_s={} nice_cores_during={nice:.2}",
            q.waited_s
        ));
    }

    /// The results so far.
    pub(super) fn lines(&self) -> &[Line] {
        &self.lines
    }

    /// The results, and with several sittings their summary (`sittings`).
    pub(super) fn finish(&self, sittings: u32) {
        if self.json {
            let doc = serde_json::json!({
                "notes": self.notes,
                "results": self.lines.iter().map(Line::to_json).collect::<Vec<_>>(),
            });
            println!("{doc:#}");
        } else {
            println!();
            print!("{}", report::human(&self.lines));
            print!("{}", report::histograms(&self.lines));
            print!("{}", super::sittings::summary(&self.lines, sittings));
        }
    }
}
