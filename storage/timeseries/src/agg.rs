//! Aggregate functions over points.
//!
//! Conventions:
//! * NaN values are ignored by every function (`count` counts non-NaN values).
//! * Over no (non-NaN) values every function returns `None`, except `count`
//!   which returns `Some(0.0)`.
//! * `first` / `last` are the values at the smallest / largest timestamp (the
//!   earliest / latest such point in slice order on ties), so unsorted input is fine.
//! * `stddev` / `variance` are the **population** forms (divide by n, as
//!   Prometheus' `stddev_over_time`); a single value gives 0.
//! * `percentile_p` uses linear interpolation between closest ranks, like
//!   numpy's default: rank = p/100 · (n−1) over the sorted values.
//! * `sum` / `avg` use compensated (Neumaier) summation.

use crate::Point;
use crate::error::TsError;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// An aggregate function.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AggFn {
    /// Arithmetic mean.
    Avg,
    /// Sum.
    Sum,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Number of values.
    Count,
    /// Value at the earliest timestamp.
    First,
    /// Value at the latest timestamp.
    Last,
    /// Population standard deviation.
    Stddev,
    /// Population variance.
    Variance,
    /// Percentile in `[0, 100]`, linear interpolation.
    Percentile(f64),
}

impl FromStr for AggFn {
    type Err = TsError;

    /// Case-insensitive: `avg` (`mean`, `average`), `sum`, `min`, `max`, `count`,
    /// `first`, `last`, `stddev` (`std`, `stdev`), `variance` (`var`), `median`
    /// (= p50), and percentiles as `percentile_90`, `percentile90`, `p90`, `p99.9`.
    fn from_str(s: &str) -> Result<AggFn, TsError> {
        let l = s.trim().to_ascii_lowercase();
        Ok(match l.as_str() {
            "avg" | "mean" | "average" => AggFn::Avg,
            "sum" => AggFn::Sum,
            "min" => AggFn::Min,
            "max" => AggFn::Max,
            "count" => AggFn::Count,
            "first" => AggFn::First,
            "last" => AggFn::Last,
            "stddev" | "std" | "stdev" => AggFn::Stddev,
            "variance" | "var" => AggFn::Variance,
            "median" => AggFn::Percentile(50.0),
            _ => {
                let num = l
                    .strip_prefix("percentile")
                    .map(|r| r.strip_prefix('_').unwrap_or(r))
                    .or_else(|| l.strip_prefix('p'))
                    .filter(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit() || b == b'.'));
                match num.and_then(|n| n.parse::<f64>().ok()) {
                    Some(p) if (0.0..=100.0).contains(&p) => AggFn::Percentile(p),
                    Some(_) => {
                        return Err(TsError::InvalidAggregation(format!("percentile in '{s}' must be between 0 and 100")));
                    }
                    None => {
                        return Err(TsError::InvalidAggregation(format!(
                            "unknown function '{s}' (expected avg, sum, min, max, count, first, last, stddev, variance or percentile_N)"
                        )));
                    }
                }
            }
        })
    }
}

impl Default for AggFn {
    /// `avg`.
    fn default() -> Self {
        AggFn::Avg
    }
}

impl AggFn {
    /// Percentile with a validated `p` in `[0, 100]`.
    pub fn percentile(p: f64) -> Result<AggFn, TsError> {
        if (0.0..=100.0).contains(&p) {
            Ok(AggFn::Percentile(p))
        } else {
            Err(TsError::InvalidAggregation(format!("percentile {p} must be between 0 and 100")))
        }
    }
}

impl fmt::Display for AggFn {
    /// Canonical lower-case name; percentiles as `percentile_90` (`percentile_99.9`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AggFn::Avg => f.write_str("avg"),
            AggFn::Sum => f.write_str("sum"),
            AggFn::Min => f.write_str("min"),
            AggFn::Max => f.write_str("max"),
            AggFn::Count => f.write_str("count"),
            AggFn::First => f.write_str("first"),
            AggFn::Last => f.write_str("last"),
            AggFn::Stddev => f.write_str("stddev"),
            AggFn::Variance => f.write_str("variance"),
            AggFn::Percentile(p) => write!(f, "percentile_{p}"),
        }
    }
}

impl Serialize for AggFn {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for AggFn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Neumaier-compensated running sum.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct KahanSum {
    sum: f64,
    c: f64,
}

impl KahanSum {
    pub fn add(&mut self, x: f64) {
        let t = self.sum + x;
        if self.sum.abs() >= x.abs() {
            self.c += (self.sum - t) + x;
        } else {
            self.c += (x - t) + self.sum;
        }
        self.sum = t;
    }

    pub fn value(&self) -> f64 {
        let v = self.sum + self.c;
        // With infinities the compensation is NaN; the plain sum is right then.
        if v.is_nan() && !self.sum.is_nan() { self.sum } else { v }
    }
}

/// Apply `f` to the points (see the module docs for conventions).
pub fn aggregate(f: AggFn, points: &[Point]) -> Option<f64> {
    let vals = || points.iter().map(|p| p.1).filter(|v| !v.is_nan());
    let n = vals().count();
    if f == AggFn::Count {
        return Some(n as f64);
    }
    if n == 0 {
        return None;
    }
    Some(match f {
        AggFn::Count => n as f64,
        AggFn::Sum | AggFn::Avg => {
            let mut s = KahanSum::default();
            vals().for_each(|v| s.add(v));
            if f == AggFn::Sum { s.value() } else { s.value() / n as f64 }
        }
        AggFn::Min => vals().fold(f64::INFINITY, f64::min),
        AggFn::Max => vals().fold(f64::NEG_INFINITY, f64::max),
        AggFn::First => {
            let mut best: Option<Point> = None;
            for p in points.iter().filter(|p| !p.1.is_nan()) {
                if best.is_none_or(|b| p.0 < b.0) {
                    best = Some(*p);
                }
            }
            best?.1
        }
        AggFn::Last => {
            let mut best: Option<Point> = None;
            for p in points.iter().filter(|p| !p.1.is_nan()) {
                if best.is_none_or(|b| p.0 >= b.0) {
                    best = Some(*p);
                }
            }
            best?.1
        }
        AggFn::Variance | AggFn::Stddev => {
            // Welford's online algorithm.
            let (mut mean, mut m2, mut k) = (0.0f64, 0.0f64, 0.0f64);
            for v in vals() {
                k += 1.0;
                let d = v - mean;
                mean += d / k;
                m2 += d * (v - mean);
            }
            let var = (m2 / k).max(0.0);
            if f == AggFn::Variance { var } else { var.sqrt() }
        }
        AggFn::Percentile(p) => {
            let mut v: Vec<f64> = vals().collect();
            v.sort_by(f64::total_cmp);
            percentile_sorted(&v, p)?
        }
    })
}

/// Linear-interpolated percentile of sorted, NaN-free values.
pub(crate) fn percentile_sorted(v: &[f64], p: f64) -> Option<f64> {
    let last = v.len().checked_sub(1)?;
    let p = if p.is_nan() { 50.0 } else { p.clamp(0.0, 100.0) };
    let rank = p / 100.0 * last as f64;
    let lo = (rank.floor() as usize).min(last);
    let hi = (rank.ceil() as usize).min(last);
    let (a, b) = (v[lo], v[hi]);
    let frac = rank - lo as f64;
    if lo == hi || frac == 0.0 || a == b { Some(a) } else { Some(a + (b - a) * frac) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts(vals: &[f64]) -> Vec<Point> {
        vals.iter().enumerate().map(|(i, v)| (i as i64 * 1000, *v)).collect()
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn parse_names() {
        let cases = [
            ("avg", AggFn::Avg),
            ("AVG", AggFn::Avg),
            ("Mean", AggFn::Avg),
            ("SUM", AggFn::Sum),
            ("min", AggFn::Min),
            ("MAX", AggFn::Max),
            ("count", AggFn::Count),
            ("First", AggFn::First),
            ("LAST", AggFn::Last),
            ("stddev", AggFn::Stddev),
            ("STDDEV", AggFn::Stddev),
            ("variance", AggFn::Variance),
            ("percentile_50", AggFn::Percentile(50.0)),
            ("PERCENTILE_90", AggFn::Percentile(90.0)),
            ("percentile_99", AggFn::Percentile(99.0)),
            ("percentile95", AggFn::Percentile(95.0)),
            ("p99.9", AggFn::Percentile(99.9)),
            ("P0", AggFn::Percentile(0.0)),
            ("median", AggFn::Percentile(50.0)),
        ];
        for (s, f) in cases {
            assert_eq!(s.parse::<AggFn>().unwrap(), f, "{s}");
        }
        for s in ["", "average_", "percentile_", "percentile_101", "p-1", "p", "pct50", "percentile_5x", "mode", "p1.2.3"] {
            assert!(s.parse::<AggFn>().is_err(), "{s}");
        }
        for f in [AggFn::Avg, AggFn::Stddev, AggFn::Percentile(90.0), AggFn::Percentile(99.9)] {
            assert_eq!(f.to_string().parse::<AggFn>().unwrap(), f);
            let j = serde_json::to_string(&f).unwrap();
            assert_eq!(serde_json::from_str::<AggFn>(&j).unwrap(), f);
        }
        assert_eq!(AggFn::Percentile(90.0).to_string(), "percentile_90");
        assert!(AggFn::percentile(101.0).is_err());
    }

    #[test]
    fn basic_functions() {
        let p = pts(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert!(close(aggregate(AggFn::Avg, &p), 5.0));
        assert!(close(aggregate(AggFn::Sum, &p), 40.0));
        assert!(close(aggregate(AggFn::Min, &p), 2.0));
        assert!(close(aggregate(AggFn::Max, &p), 9.0));
        assert!(close(aggregate(AggFn::Count, &p), 8.0));
        assert!(close(aggregate(AggFn::First, &p), 2.0));
        assert!(close(aggregate(AggFn::Last, &p), 9.0));
        assert!(close(aggregate(AggFn::Variance, &p), 4.0));
        assert!(close(aggregate(AggFn::Stddev, &p), 2.0));
    }

    #[test]
    fn percentiles_match_numpy_linear() {
        let p = pts(&[15.0, 20.0, 35.0, 40.0, 50.0]);
        // numpy.percentile([15,20,35,40,50], q) for q = 0, 25, 40, 50, 90, 99, 100
        let expected = [(0.0, 15.0), (25.0, 20.0), (40.0, 29.0), (50.0, 35.0), (90.0, 46.0), (99.0, 49.6), (100.0, 50.0)];
        for (q, e) in expected {
            assert!(close(aggregate(AggFn::Percentile(q), &p), e), "q={q}");
        }
        let rev = pts(&[4.0, 3.0, 2.0, 1.0]);
        assert!(close(aggregate(AggFn::Percentile(50.0), &rev), 2.5));
        assert!(close(aggregate(AggFn::Percentile(90.0), &pts(&[7.0])), 7.0));
    }

    #[test]
    fn empty_nan_and_unsorted() {
        for f in [
            AggFn::Avg,
            AggFn::Sum,
            AggFn::Min,
            AggFn::Max,
            AggFn::First,
            AggFn::Last,
            AggFn::Stddev,
            AggFn::Variance,
            AggFn::Percentile(50.0),
        ] {
            assert_eq!(aggregate(f, &[]), None, "{f}");
            assert_eq!(aggregate(f, &[(0, f64::NAN)]), None, "{f}");
        }
        assert_eq!(aggregate(AggFn::Count, &[]), Some(0.0));
        let p = vec![(30, 3.0), (10, 1.0), (20, f64::NAN), (10, 1.5), (40, f64::NAN), (30, 3.5)];
        assert_eq!(aggregate(AggFn::Count, &p), Some(4.0));
        assert_eq!(aggregate(AggFn::First, &p), Some(1.0));
        assert_eq!(aggregate(AggFn::Last, &p), Some(3.5));
        assert_eq!(aggregate(AggFn::Sum, &p), Some(9.0));
        assert_eq!(aggregate(AggFn::Stddev, &[(0, 5.0)]), Some(0.0));
        // compensated summation
        let p = pts(&[1e16, 1.0, -1e16, 1.0]);
        assert_eq!(aggregate(AggFn::Sum, &p), Some(2.0));
        // infinities don't poison with NaN
        assert_eq!(aggregate(AggFn::Sum, &pts(&[f64::INFINITY, 1.0])), Some(f64::INFINITY));
        assert_eq!(aggregate(AggFn::Max, &pts(&[f64::NEG_INFINITY])), Some(f64::NEG_INFINITY));
    }
}
