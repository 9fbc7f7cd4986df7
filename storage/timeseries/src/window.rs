//! Bucketed downsampling and rolling windows.

use crate::Point;
use crate::agg::{AggFn, KahanSum, aggregate};
use std::borrow::Cow;
use std::collections::VecDeque;

fn sorted(points: &[Point]) -> Cow<'_, [Point]> {
    if points.windows(2).all(|w| w[0].0 <= w[1].0) {
        Cow::Borrowed(points)
    } else {
        let mut v = points.to_vec();
        v.sort_by_key(|p| p.0); // stable: equal timestamps keep their order
        Cow::Owned(v)
    }
}

/// Start of the bucket holding `ts`: the largest multiple of `interval_ms` ≤ `ts`
/// (epoch-aligned, also for negative timestamps). `interval_ms` must be > 0.
pub fn bucket_start(ts: i64, interval_ms: i64) -> i64 {
    if interval_ms <= 0 {
        return ts;
    }
    ts.checked_sub(ts.rem_euclid(interval_ms)).unwrap_or(i64::MIN)
}

/// Aggregate points into epoch-aligned buckets of `interval_ms`
/// (`[k·interval, (k+1)·interval)`), returning `(bucket_start, value)` in
/// ascending order. Empty buckets are omitted (no gap filling), as are buckets
/// whose aggregate is `None` (only NaN values). Input need not be sorted.
/// `interval_ms <= 0` yields an empty result.
pub fn downsample(points: &[Point], interval_ms: i64, f: AggFn) -> Vec<Point> {
    if interval_ms <= 0 {
        return Vec::new();
    }
    let pts = sorted(points);
    let mut out = Vec::new();
    let mut i = 0;
    while i < pts.len() {
        let b = bucket_start(pts[i].0, interval_ms);
        let mut j = i + 1;
        while j < pts.len() && bucket_start(pts[j].0, interval_ms) == b {
            j += 1;
        }
        if let Some(v) = aggregate(f, &pts[i..j]) {
            out.push((b, v));
        }
        i = j;
    }
    out
}

/// Trailing rolling window: for each point (in time order) the aggregate over
/// the points with timestamp in `(t − window_ms, t]` up to and including this
/// one, returned as `(t, value)`. Points whose window has no non-NaN value are
/// omitted (except for `count`). Input need not be sorted. `window_ms <= 0`
/// yields an empty result.
///
/// `count`, `sum`, `avg` use running totals and `min` / `max` a monotonic
/// deque (O(n)); the other functions recompute each window (O(n · window size)).
pub fn rolling(points: &[Point], window_ms: i64, f: AggFn) -> Vec<Point> {
    if window_ms <= 0 {
        return Vec::new();
    }
    let pts = sorted(points);
    let mut out = Vec::with_capacity(pts.len());
    let mut start = 0usize;
    // running state
    let mut sum = KahanSum::default();
    let mut n = 0usize;
    let mut deque: VecDeque<usize> = VecDeque::new();
    let incremental = matches!(f, AggFn::Count | AggFn::Sum | AggFn::Avg | AggFn::Min | AggFn::Max);
    for i in 0..pts.len() {
        let (t, v) = pts[i];
        if !v.is_nan() {
            n += 1;
            sum.add(v);
            if matches!(f, AggFn::Min | AggFn::Max) {
                while let Some(&back) = deque.back() {
                    let bv = pts[back].1;
                    let dominated = if f == AggFn::Min { bv >= v } else { bv <= v };
                    if !dominated {
                        break;
                    }
                    deque.pop_back();
                }
                deque.push_back(i);
            }
        }
        let cutoff = t.saturating_sub(window_ms);
        while start < i && pts[start].0 <= cutoff {
            let ov = pts[start].1;
            if !ov.is_nan() {
                n -= 1;
                sum.add(-ov);
            }
            if deque.front() == Some(&start) {
                deque.pop_front();
            }
            start += 1;
        }
        let value = if incremental {
            match f {
                AggFn::Count => Some(n as f64),
                _ if n == 0 => None,
                AggFn::Sum => Some(sum.value()),
                AggFn::Avg => Some(sum.value() / n as f64),
                _ => deque.front().map(|&k| pts[k].1),
            }
        } else {
            aggregate(f, &pts[start..=i])
        };
        if let Some(v) = value {
            out.push((t, v));
        }
        // Reset drift when the window empties of real values.
        if n == 0 {
            sum = KahanSum::default();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_epoch_aligned() {
        assert_eq!(bucket_start(0, 1000), 0);
        assert_eq!(bucket_start(999, 1000), 0);
        assert_eq!(bucket_start(1000, 1000), 1000);
        assert_eq!(bucket_start(-1, 1000), -1000);
        assert_eq!(bucket_start(i64::MIN, 1000), i64::MIN);
        assert_eq!(bucket_start(i64::MIN + 1, 3), i64::MIN);
        assert_eq!(bucket_start(5, 0), 5);
    }

    #[test]
    fn downsample_basic() {
        let p = vec![(0, 1.0), (60_000, 2.0), (299_999, 3.0), (300_000, 10.0), (900_500, 7.0), (310_000, 20.0)];
        assert_eq!(downsample(&p, 300_000, AggFn::Avg), vec![(0, 2.0), (300_000, 15.0), (900_000, 7.0)]);
        assert_eq!(downsample(&p, 300_000, AggFn::Count), vec![(0, 3.0), (300_000, 2.0), (900_000, 1.0)]);
        assert_eq!(downsample(&p, 300_000, AggFn::Last), vec![(0, 3.0), (300_000, 20.0), (900_000, 7.0)]);
        assert_eq!(downsample(&p, 3_600_000, AggFn::Max), vec![(0, 20.0)]);
        assert!(downsample(&p, 0, AggFn::Avg).is_empty());
        assert!(downsample(&p, -5, AggFn::Avg).is_empty());
        assert!(downsample(&[], 1000, AggFn::Avg).is_empty());
        let neg = vec![(-1500, 1.0), (-500, 3.0), (500, 5.0)];
        assert_eq!(downsample(&neg, 1000, AggFn::Sum), vec![(-2000, 1.0), (-1000, 3.0), (0, 5.0)]);
        let nan = vec![(0, f64::NAN), (1000, 1.0)];
        assert_eq!(downsample(&nan, 1000, AggFn::Avg), vec![(1000, 1.0)]);
        let ext = vec![(i64::MIN, 1.0), (i64::MAX, 2.0)];
        assert_eq!(downsample(&ext, i64::MAX, AggFn::Sum).len(), 2);
    }

    fn brute(points: &[Point], w: i64, f: AggFn) -> Vec<Point> {
        let mut s = points.to_vec();
        s.sort_by_key(|p| p.0);
        (0..s.len())
            .filter_map(|i| {
                let t = s[i].0;
                let win: Vec<Point> = s[..=i].iter().copied().filter(|p| p.0 > t.saturating_sub(w)).collect();
                aggregate(f, &win).map(|v| (t, v))
            })
            .collect()
    }

    #[test]
    fn rolling_matches_brute_force() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut pts = Vec::new();
        let mut t = 0i64;
        for _ in 0..400 {
            t += (rnd() % 5000) as i64;
            let v = if rnd() % 17 == 0 { f64::NAN } else { (rnd() % 1000) as f64 / 10.0 - 50.0 };
            pts.push((t, v));
        }
        for f in [
            AggFn::Count,
            AggFn::Sum,
            AggFn::Avg,
            AggFn::Min,
            AggFn::Max,
            AggFn::First,
            AggFn::Last,
            AggFn::Stddev,
            AggFn::Percentile(90.0),
        ] {
            for w in [1, 2500, 10_000, 60_000] {
                let a = rolling(&pts, w, f);
                let b = brute(&pts, w, f);
                assert_eq!(a.len(), b.len(), "{f} w={w}");
                for (p, q) in a.iter().zip(b.iter()) {
                    assert_eq!(p.0, q.0);
                    assert!((p.1 - q.1).abs() < 1e-6, "{f} w={w}: {p:?} vs {q:?}");
                }
            }
        }
    }

    #[test]
    fn rolling_simple() {
        let p = vec![(0, 1.0), (1000, 2.0), (2000, 3.0), (3000, 4.0)];
        assert_eq!(rolling(&p, 2000, AggFn::Sum), vec![(0, 1.0), (1000, 3.0), (2000, 5.0), (3000, 7.0)]);
        assert_eq!(rolling(&p, 2000, AggFn::Min), vec![(0, 1.0), (1000, 1.0), (2000, 2.0), (3000, 3.0)]);
        assert!(rolling(&p, 0, AggFn::Sum).is_empty());
        let unsorted = vec![(2000, 3.0), (0, 1.0), (1000, 2.0)];
        assert_eq!(rolling(&unsorted, 1500, AggFn::Max), vec![(0, 1.0), (1000, 2.0), (2000, 3.0)]);
        assert_eq!(rolling(&[(i64::MIN, 1.0), (i64::MAX, 2.0)], i64::MAX, AggFn::Count), vec![(i64::MIN, 1.0), (i64::MAX, 1.0)]);
    }
}
