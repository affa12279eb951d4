//! Latency histograms of the steady-state workloads, printed the way etcd's benchmark tool
//! prints its "Response time histogram": one row per bucket, the bucket's upper bound, its
//! count and a bar of `∎` scaled to the largest bucket.
//!
//! Buckets have fixed bounds, six per decade on the 1-1.5-2-3-5-7 series (… 500 µs, 700 µs,
//! 1 ms, 1.5 ms, 2 ms, 3 ms …), so runs and workloads line up row by row and a long tail
//! does not squash the body into one bucket (etcd's buckets are linear between the fastest
//! and the slowest sample).
//!
//! INV-1: bucket `i` holds the samples `bound[i-1] < x <= bound[i]`; the first bucket is the
//! one holding the fastest sample, the last the one holding the slowest, and every bucket in
//! between is listed, empty or not; the counts add up to the number of samples.
//! INV-2: a bar has `round(BAR_WIDTH * count / largest count)` marks.

use std::fmt::Write as _;

/// Marks in the bar of the largest bucket (etcd's width).
pub const BAR_WIDTH: u64 = 40;

/// The bucket bounds of one decade, in tenths of its first bound.
const SERIES: [u64; 6] = [10, 15, 20, 30, 50, 70];

/// One bucket: samples in `(previous bound, upper_ns]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// The bucket's upper bound, in nanoseconds.
    pub upper_ns: u64,
    /// Samples in the bucket.
    pub count: u64,
}

/// The `i`-th bound of the series, in ns: 100 ns, 150 ns, 200 ns, 300 ns, 500 ns, 700 ns,
/// 1 µs, … (saturating at `u64::MAX`).
fn bound(i: usize) -> u64 {
    let decade = u32::try_from(i / SERIES.len()).unwrap_or(u32::MAX);
    10u64
        .checked_pow(decade)
        .and_then(|p| p.checked_mul(SERIES[i % SERIES.len()] * 10))
        .unwrap_or(u64::MAX)
}

/// The index of the bucket that holds `ns`.
fn index_of(ns: u64) -> usize {
    let mut i = 0;
    while bound(i) < ns {
        i += 1;
    }
    i
}

/// The histogram of `nanos` (any order); empty without samples.
pub fn buckets(nanos: &[u64]) -> Vec<Bucket> {
    let (Some(&lo), Some(&hi)) = (nanos.iter().min(), nanos.iter().max()) else {
        return Vec::new();
    };
    let first = index_of(lo);
    let mut out: Vec<Bucket> = (first..=index_of(hi))
        .map(|i| Bucket {
            upper_ns: bound(i),
            count: 0,
        })
        .collect();
    for &x in nanos {
        // first <= index_of(x) <= index_of(hi), so the slot exists.
        if let Some(b) = out.get_mut(index_of(x) - first) {
            b.count += 1;
        }
    }
    out
}

/// A bound in the unit that reads best: `700 µs`, `1.5 ms`, `20 ms`, `2 s`.
pub fn format_bound(ns: u64) -> String {
    let trim = |v: f64| {
        let s = format!("{v:.1}");
        s.strip_suffix(".0").map_or(s.clone(), str::to_owned)
    };
    match ns {
        n if n < 1_000 => format!("{n} ns"),
        n if n < 1_000_000 => format!("{} µs", trim(n as f64 / 1e3)),
        n if n < 1_000_000_000 => format!("{} ms", trim(n as f64 / 1e6)),
        n => format!("{} s", trim(n as f64 / 1e9)),
    }
}

/// etcd-style rows under `title`: `  ≤ 1.5 ms [  1234] |∎∎∎…`.
pub fn render(title: &str, buckets: &[Bucket]) -> String {
    let mut s = format!("{title}\n");
    let largest = buckets.iter().map(|b| b.count).max().unwrap_or(0).max(1);
    let count_width = buckets
        .iter()
        .map(|b| b.count.to_string().len())
        .max()
        .unwrap_or(1);
    for b in buckets {
        let marks = (b.count * BAR_WIDTH + largest / 2) / largest;
        let _ = writeln!(
            s,
            "  ≤ {:>7} [{:>count_width$}] |{}",
            format_bound(b.upper_ns),
            b.count,
            "∎".repeat(usize::try_from(marks).unwrap_or(0)),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_follow_the_series_and_samples_land_in_their_bucket() {
        let b: Vec<u64> = (0..8).map(bound).collect();
        assert_eq!(b, [100, 150, 200, 300, 500, 700, 1_000, 1_500]);
        assert_eq!(bound(6 * 4 + 4), 5_000_000); // 5 ms
        assert_eq!(bound(10_000), u64::MAX);
        // A sample on a bound belongs to that bound's bucket (INV-1).
        assert_eq!(index_of(1_000), 6);
        assert_eq!(index_of(1_001), 7);
        assert_eq!(index_of(0), 0);
    }

    #[test]
    fn buckets_span_fastest_to_slowest_and_count_every_sample() {
        // 600 µs, 650 µs, 1.2 ms, 1.2 ms, 4 ms: buckets 700 µs .. 5 ms.
        let nanos = [650_000, 600_000, 1_200_000, 4_000_000, 1_200_000];
        let h = buckets(&nanos);
        let got: Vec<(u64, u64)> = h.iter().map(|b| (b.upper_ns, b.count)).collect();
        assert_eq!(
            got,
            [
                (700_000, 2),
                (1_000_000, 0),
                (1_500_000, 2),
                (2_000_000, 0),
                (3_000_000, 0),
                (5_000_000, 1)
            ]
        );
        assert_eq!(h.iter().map(|b| b.count).sum::<u64>(), nanos.len() as u64);
        assert!(buckets(&[]).is_empty());
    }

    #[test]
    fn rows_scale_bars_to_the_largest_bucket() {
        let h = [
            Bucket {
                upper_ns: 700_000,
                count: 10,
            },
            Bucket {
                upper_ns: 1_500_000,
                count: 5,
            },
            Bucket {
                upper_ns: 20_000_000,
                count: 0,
            },
        ];
        let text = render("W1 ens-leader", &h);
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows[0], "W1 ens-leader");
        assert_eq!(rows[1], format!("  ≤  700 µs [10] |{}", "∎".repeat(40)));
        assert_eq!(rows[2], format!("  ≤  1.5 ms [ 5] |{}", "∎".repeat(20)));
        assert_eq!(rows[3], "  ≤   20 ms [ 0] |");
        assert_eq!(format_bound(150), "150 ns");
        assert_eq!(format_bound(2_000_000_000), "2 s");
    }
}
