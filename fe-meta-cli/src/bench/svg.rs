//! A latency percentile plot written as SVG text (no plotting library): panels side by side,
//! each with one line per system; x is the percentile on a "nines" scale (`-log10(1 - p)`: 50
//! at 0.3, 90 at 1, 99 at 2, 99.9 at 3; the maximum at 4, where 99.99 would be), y the latency
//! in ms on a log scale.
//!
//! INV-1: the output is one well-formed XML document (`<svg>` root, every element closed,
//! every text and attribute value escaped).
//! INV-2: every series of every panel is one `<polyline class="series" data-series=NAME>`
//! and one `<circle>` per drawn point; a point that cannot sit on a log axis (not finite,
//! <= 0) is left out, never moved.

use std::fmt::Write as _;

/// Where a point sits on the x axis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum At {
    /// A percentile in (0, 100), e.g. 99.9.
    Percentile(f64),
    /// The slowest sample.
    Max,
}

impl At {
    /// The point's x in nines (the maximum at [`MAX_NINES`]).
    fn nines(self) -> f64 {
        match self {
            At::Percentile(p) => (-(1.0 - p / 100.0).log10()).clamp(0.0, MAX_NINES),
            At::Max => MAX_NINES,
        }
    }

    fn label(self) -> String {
        match self {
            At::Percentile(p) => format!("p{p}"),
            At::Max => "max".to_owned(),
        }
    }
}

/// The right end of the x axis, in nines (99.99).
pub const MAX_NINES: f64 = 4.0;

/// One point: latency in ms at a percentile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// Where on the x axis.
    pub at: At,
    /// Latency in milliseconds.
    pub ms: f64,
}

/// One line of a panel.
#[derive(Clone, Debug)]
pub struct Series {
    /// The legend's name (one per system).
    pub name: String,
    /// An SVG colour.
    pub color: String,
    /// The points, in any order (drawn left to right).
    pub points: Vec<Point>,
}

/// One panel: a title and its series.
#[derive(Clone, Debug)]
pub struct Panel {
    /// The panel's title.
    pub title: String,
    /// Its lines.
    pub series: Vec<Series>,
}

const PANEL_W: f64 = 460.0;
const PANEL_H: f64 = 330.0;
const COLUMNS: usize = 2;
const HEADER_H: f64 = 70.0;
/// Height of one line of the note under the panels.
const NOTE_LINE_H: f64 = 16.0;
/// Plot area inside a panel: left, top, right, bottom margins.
const MARGIN: (f64, f64, f64, f64) = (62.0, 34.0, 18.0, 46.0);
/// The x ticks: (nines, label).
const X_TICKS: [(f64, &str); 5] = [
    (std::f64::consts::LOG10_2, "50"),
    (1.0, "90"),
    (2.0, "99"),
    (3.0, "99.9"),
    (MAX_NINES, "max"),
];

/// Escapes text for an XML text node or a double-quoted attribute.
pub fn escape(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => s.push_str("&amp;"),
            '<' => s.push_str("&lt;"),
            '>' => s.push_str("&gt;"),
            '"' => s.push_str("&quot;"),
            '\'' => s.push_str("&apos;"),
            c => s.push(c),
        }
    }
    s
}

fn drawable(p: &Point) -> bool {
    p.ms.is_finite() && p.ms > 0.0
}

/// The y axis of a panel: whole decades of ms around every drawable point.
fn y_range(panel: &Panel) -> (f64, f64) {
    let logs = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter(|p| drawable(p))
        .map(|p| p.ms.log10());
    let (lo, hi) = logs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if !lo.is_finite() {
        return (-1.0, 1.0);
    }
    let (lo, hi) = (lo.floor(), hi.ceil());
    if hi > lo {
        (lo, hi)
    } else {
        (lo, lo + 1.0)
    }
}

/// A tick label in ms: `0.1`, `0.5`, `2`, `100`.
fn ms_label(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').to_owned()
    }
}

/// The SVG document: `title` on top with the legend, the panels in rows of two, `note` at
/// the bottom (one text line per line of `note`).
pub fn percentile_plot(title: &str, note: &str, panels: &[Panel]) -> String {
    let rows = panels.len().div_ceil(COLUMNS).max(1);
    let width = PANEL_W * COLUMNS as f64;
    let note_lines: Vec<&str> = note.lines().collect();
    let footer_top = HEADER_H + PANEL_H * rows as f64;
    let height = footer_top + NOTE_LINE_H * note_lines.len() as f64 + 12.0;
    let mut s = String::new();
    let _ = writeln!(s, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        s,
        r#"<rect x="0" y="0" width="{width:.0}" height="{height:.0}" fill="white"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text class="title" x="{:.1}" y="24" font-size="16" text-anchor="middle">{}</text>"#,
        width / 2.0,
        escape(title)
    );
    legend(&mut s, panels, width);
    for (i, panel) in panels.iter().enumerate() {
        let x0 = PANEL_W * (i % COLUMNS) as f64;
        let y0 = HEADER_H + PANEL_H * (i / COLUMNS) as f64;
        draw_panel(&mut s, panel, x0, y0);
    }
    for (i, line) in note_lines.iter().enumerate() {
        let _ = writeln!(
            s,
            r##"<text class="note" x="10" y="{:.1}" font-size="11" fill="#444">{}</text>"##,
            footer_top + NOTE_LINE_H * (i + 1) as f64,
            escape(line)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// One legend entry per series name (first colour seen), centred under the title.
fn legend(s: &mut String, panels: &[Panel], width: f64) {
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for series in panels.iter().flat_map(|p| p.series.iter()) {
        if !seen.iter().any(|(n, _)| *n == series.name) {
            seen.push((&series.name, &series.color));
        }
    }
    let entry_w = 160.0;
    let mut x = width / 2.0 - entry_w * seen.len() as f64 / 2.0;
    for (name, color) in seen {
        let _ = writeln!(
            s,
            r#"<g class="legend"><line x1="{x:.1}" y1="46" x2="{:.1}" y2="46" stroke="{}" stroke-width="3"/><text x="{:.1}" y="50">{}</text></g>"#,
            x + 24.0,
            escape(color),
            x + 30.0,
            escape(name)
        );
        x += entry_w;
    }
}

/// A panel's plot area and its scales.
struct Frame {
    left: f64,
    top: f64,
    w: f64,
    h: f64,
    /// The y axis, in decades of ms.
    lo: f64,
    hi: f64,
}

impl Frame {
    fn px(&self, nines: f64) -> f64 {
        self.left + self.w * nines / MAX_NINES
    }

    fn py(&self, ms: f64) -> f64 {
        self.top + self.h * (self.hi - ms.log10()) / (self.hi - self.lo)
    }
}

fn draw_panel(s: &mut String, panel: &Panel, x0: f64, y0: f64) {
    let (ml, mt, mr, mb) = MARGIN;
    let (lo, hi) = y_range(panel);
    let f = Frame {
        left: x0 + ml,
        top: y0 + mt,
        w: PANEL_W - ml - mr,
        h: PANEL_H - mt - mb,
        lo,
        hi,
    };
    let _ = writeln!(
        s,
        r#"<g class="panel" data-title="{}">"#,
        escape(&panel.title)
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" font-size="13" text-anchor="middle">{}</text>"#,
        f.left + f.w / 2.0,
        y0 + 20.0,
        escape(&panel.title)
    );
    draw_axes(s, &f, x0);
    for series in &panel.series {
        draw_series(s, &f, series);
    }
    s.push_str("</g>\n");
}

/// The frame, the x ticks (percentiles) and the y ticks (1, 2, 5 of every decade), with grid
/// lines and axis titles.
fn draw_axes(s: &mut String, f: &Frame, x0: f64) {
    let (left, top, w, h) = (f.left, f.top, f.w, f.h);
    let _ = writeln!(
        s,
        r##"<rect x="{left:.1}" y="{top:.1}" width="{w:.1}" height="{h:.1}" fill="none" stroke="#888"/>"##
    );
    for (nines, label) in X_TICKS {
        let x = f.px(nines);
        let _ = writeln!(
            s,
            r##"<line class="grid" x1="{x:.1}" y1="{top:.1}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            top + h,
            top + h + 16.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">percentile</text>"#,
        left + w / 2.0,
        top + h + 34.0
    );
    let mut decade = f.lo;
    while decade <= f.hi {
        for m in [1.0, 2.0, 5.0] {
            let v = m * 10f64.powf(decade);
            if v.log10() > f.hi + 1e-9 {
                break;
            }
            let y = f.py(v);
            let _ = writeln!(
                s,
                r##"<line class="grid" x1="{left:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{}"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                left + w,
                if m == 1.0 { "#ccc" } else { "#eee" },
                left - 6.0,
                y + 4.0,
                ms_label(v)
            );
        }
        decade += 1.0;
    }
    let (yx, yy) = (x0 + 16.0, top + h / 2.0);
    let _ = writeln!(
        s,
        r#"<text x="{yx:.1}" y="{yy:.1}" text-anchor="middle" transform="rotate(-90 {yx:.1} {yy:.1})">latency (ms, log scale)</text>"#
    );
}

/// One series: its polyline left to right, and a circle (with a tooltip) per point (INV-2).
fn draw_series(s: &mut String, f: &Frame, series: &Series) {
    let mut pts: Vec<&Point> = series.points.iter().filter(|p| drawable(p)).collect();
    pts.sort_by(|a, b| a.at.nines().total_cmp(&b.at.nines()));
    let coords: Vec<String> = pts
        .iter()
        .map(|p| format!("{:.1},{:.1}", f.px(p.at.nines()), f.py(p.ms)))
        .collect();
    let color = escape(&series.color);
    let _ = writeln!(
        s,
        r#"<polyline class="series" data-series="{}" points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
        escape(&series.name),
        coords.join(" ")
    );
    for p in pts {
        let _ = writeln!(
            s,
            r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"><title>{} {}: {:.3} ms</title></circle>"#,
            f.px(p.at.nines()),
            f.py(p.ms),
            escape(&series.name),
            p.at.label(),
            p.ms
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::xml_check::check_xml;
    use super::*;

    fn series(name: &str, color: &str, ms: [f64; 5]) -> Series {
        let at = [
            At::Percentile(50.0),
            At::Percentile(90.0),
            At::Percentile(99.0),
            At::Percentile(99.9),
            At::Max,
        ];
        Series {
            name: name.to_owned(),
            color: color.to_owned(),
            points: at
                .into_iter()
                .zip(ms)
                .map(|(at, ms)| Point { at, ms })
                .collect(),
        }
    }

    #[test]
    fn the_plot_is_well_formed_xml_with_one_line_per_series_and_panel() {
        let panels = vec![
            Panel {
                title: "W1 <leader> & co".to_owned(),
                series: vec![
                    series("fe-meta", "#1f77b4", [0.6, 0.8, 1.4, 5.3, 43.0]),
                    series("ZooKeeper 3.8", "#ff7f0e", [0.7, 1.1, 4.2, 9.0, 60.0]),
                ],
            },
            Panel {
                title: "W3 spread".to_owned(),
                // NaN (a missing figure) and 0 cannot sit on a log axis: left out.
                series: vec![
                    series("fe-meta", "#1f77b4", [2.0, 2.9, f64::NAN, 0.0, 30.0]),
                    series("ZooKeeper 3.8", "#ff7f0e", [2.6, 3.5, 6.3, 12.0, 80.0]),
                ],
            },
            Panel {
                title: "W1 follower".to_owned(),
                series: vec![series("fe-meta", "#1f77b4", [0.9, 1.1, 2.3, 5.8, 38.0])],
            },
        ];
        let doc = percentile_plot("W1 and W3 'latency'", "note: a < b\nsecond line", &panels);
        let names = match check_xml(&doc) {
            Ok(n) => n,
            Err(e) => panic!("not well-formed: {e}\n{doc}"),
        };
        assert_eq!(names.first().map(String::as_str), Some("svg"));
        assert_eq!(names.iter().filter(|n| *n == "polyline").count(), 5);
        assert_eq!(names.iter().filter(|n| *n == "circle").count(), 5 * 5 - 2);
        assert_eq!(doc.matches(r#"data-series="fe-meta""#).count(), 3);
        assert_eq!(doc.matches(r#"data-series="ZooKeeper 3.8""#).count(), 2);
        assert_eq!(doc.matches(r#"<g class="legend">"#).count(), 2);
        assert!(doc.contains("W1 &lt;leader&gt; &amp; co"));
        assert_eq!(doc.matches(r#"<text class="note""#).count(), 2);
    }

    #[test]
    fn points_sit_on_the_nines_and_log_scales() {
        assert!((At::Percentile(99.9).nines() - 3.0).abs() < 1e-9);
        assert!((At::Percentile(50.0).nines() - std::f64::consts::LOG10_2).abs() < 1e-9);
        assert_eq!(At::Max.nines(), MAX_NINES);
        assert_eq!(At::Percentile(99.999).nines(), MAX_NINES);
        let p = Panel {
            title: String::new(),
            series: vec![series("a", "red", [0.6, 0.8, 1.4, 5.3, 43.0])],
        };
        assert_eq!(y_range(&p), (-1.0, 2.0));
        // Along one series, a slower point is drawn higher (smaller y), left to right.
        let doc = percentile_plot("t", "n", &[p]);
        let pts: Vec<(f64, f64)> = doc
            .split(r#"points=""#)
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or("")
            .split(' ')
            .filter_map(|xy| xy.split_once(','))
            .map(|(x, y)| (x.parse().unwrap_or(0.0), y.parse().unwrap_or(0.0)))
            .collect();
        assert_eq!(pts.len(), 5);
        assert!(pts.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 > w[1].1));
        assert_eq!(ms_label(0.5), "0.5");
        assert_eq!(ms_label(20.0), "20");
    }
}
