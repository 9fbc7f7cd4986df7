//! The `aggregation` object of a time-series query.
//!
//! Accepted forms:
//! * `"avg"`: a bare function name, whole-range aggregate;
//! * `{"function": "avg"}`: whole-range aggregate;
//! * `{"function": "max", "interval": "1h"}` or
//!   `{"type": "downsample", "interval": "5m", "function": "avg"}`: epoch-aligned buckets;
//! * `{"type": "rolling", "window": "10m", "function": "avg"}` (for `type: rolling`
//!   a lone `interval` is taken as the window), or `{"function", "window"}`;
//! * `interval` and `window` together: downsample first, then a rolling window
//!   over the bucket values (e.g. a 1 h moving average of 5 m averages).
//!
//! `function` (alias `fn`) is required in object forms and parsed with
//! [`AggFn::from_str`](std::str::FromStr); `{"function": "percentile", "percentile": 95}`
//! is also accepted. Durations are strings (`"5m"`) or integer milliseconds and
//! must be positive. `type` may be `downsample`, `rolling` (alias `window`,
//! `moving`) or `aggregate` (alias `total`, `none`); other keys are ignored.

use crate::Point;
use crate::agg::{AggFn, aggregate};
use crate::duration::parse_duration_value;
use crate::error::TsError;
use crate::window::{downsample, rolling};
use serde_json::Value;

/// A parsed aggregation request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Aggregation {
    /// The aggregate function.
    pub function: AggFn,
    /// Bucket width for downsampling, if any.
    pub interval_ms: Option<i64>,
    /// Trailing window for rolling aggregation, if any.
    pub window_ms: Option<i64>,
}

fn inv(msg: impl Into<String>) -> TsError {
    TsError::InvalidAggregation(msg.into())
}

fn positive_duration(v: &Value, field: &str) -> Result<i64, TsError> {
    let ms = parse_duration_value(v).map_err(|e| inv(format!("'{field}': {e}")))?;
    if ms <= 0 {
        return Err(inv(format!("'{field}' must be a positive duration")));
    }
    Ok(ms)
}

/// Parse an aggregation object (see the module docs).
pub fn parse_aggregation(v: &Value) -> Result<Aggregation, TsError> {
    let obj = match v {
        Value::String(s) => {
            return Ok(Aggregation { function: s.parse()?, interval_ms: None, window_ms: None });
        }
        Value::Object(m) => m,
        _ => {
            return Err(inv("expected an object like {\"function\": \"avg\", \"interval\": \"5m\"}"));
        }
    };
    let fval = obj
        .get("function")
        .or_else(|| obj.get("fn"))
        .ok_or_else(|| inv("'function' is required (avg, sum, min, max, count, first, last, stddev, variance, percentile_N)"))?;
    let fname = fval.as_str().ok_or_else(|| inv("'function' must be a string"))?;
    let function = if fname.trim().eq_ignore_ascii_case("percentile") {
        let p = obj
            .get("percentile")
            .and_then(Value::as_f64)
            .ok_or_else(|| inv("'percentile' needs a numeric \"percentile\" field, or use percentile_90"))?;
        AggFn::percentile(p)?
    } else {
        fname.parse()?
    };
    let mut interval_ms = obj.get("interval").map(|i| positive_duration(i, "interval")).transpose()?;
    let mut window_ms = obj.get("window").map(|w| positive_duration(w, "window")).transpose()?;
    let kind = match obj.get("type") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => Some(t.to_ascii_lowercase()),
        Some(_) => return Err(inv("'type' must be a string")),
    };
    match kind.as_deref() {
        None => {}
        Some("downsample") if interval_ms.is_none() => {
            return Err(inv("type 'downsample' requires an 'interval'"));
        }
        Some("downsample") => {}
        Some("rolling" | "window" | "moving") => {
            if window_ms.is_none() {
                window_ms = interval_ms.take();
            }
            if window_ms.is_none() {
                return Err(inv("type 'rolling' requires a 'window'"));
            }
        }
        Some("aggregate" | "total" | "none") if interval_ms.is_some() || window_ms.is_some() => {
            return Err(inv("type 'aggregate' takes no 'interval' or 'window'"));
        }
        Some("aggregate" | "total" | "none") => {}
        Some(other) => {
            return Err(inv(format!("unknown type '{other}' (expected downsample, rolling or aggregate)")));
        }
    }
    Ok(Aggregation { function, interval_ms, window_ms })
}

impl Aggregation {
    /// Whole-range aggregate with `function`.
    pub fn whole(function: AggFn) -> Aggregation {
        Aggregation { function, interval_ms: None, window_ms: None }
    }

    /// Apply to points (any order): downsample if `interval_ms`, then rolling if
    /// `window_ms`. With neither, a single point `(earliest timestamp, aggregate)`;
    /// empty when there are no points or the aggregate is undefined.
    pub fn apply(&self, points: &[Point]) -> Vec<Point> {
        match (self.interval_ms, self.window_ms) {
            (None, None) => {
                let Some(t0) = points.iter().map(|p| p.0).min() else {
                    return Vec::new();
                };
                aggregate(self.function, points).map(|v| vec![(t0, v)]).unwrap_or_default()
            }
            (Some(i), None) => downsample(points, i, self.function),
            (None, Some(w)) => rolling(points, w, self.function),
            (Some(i), Some(w)) => rolling(&downsample(points, i, self.function), w, self.function),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn spec_forms() {
        let a = parse_aggregation(&json!({"type": "downsample", "interval": "5m", "function": "avg"})).unwrap();
        assert_eq!(a, Aggregation { function: AggFn::Avg, interval_ms: Some(300_000), window_ms: None });
        let a = parse_aggregation(&json!({"function": "MAX", "interval": "1h"})).unwrap();
        assert_eq!(a, Aggregation { function: AggFn::Max, interval_ms: Some(3_600_000), window_ms: None });
        let a = parse_aggregation(&json!({"function": "percentile_99"})).unwrap();
        assert_eq!(a, Aggregation::whole(AggFn::Percentile(99.0)));
        let a = parse_aggregation(&json!("SUM")).unwrap();
        assert_eq!(a, Aggregation::whole(AggFn::Sum));
        let a = parse_aggregation(&json!({"type": "rolling", "window": "10m", "function": "avg"})).unwrap();
        assert_eq!(a.window_ms, Some(600_000));
        assert_eq!(a.interval_ms, None);
        let a = parse_aggregation(&json!({"type": "Rolling", "interval": "10m", "fn": "min"})).unwrap();
        assert_eq!((a.interval_ms, a.window_ms, a.function), (None, Some(600_000), AggFn::Min));
        let a = parse_aggregation(&json!({"function": "avg", "interval": "5m", "window": "1h"})).unwrap();
        assert_eq!((a.interval_ms, a.window_ms), (Some(300_000), Some(3_600_000)));
        let a = parse_aggregation(&json!({"function": "percentile", "percentile": 95, "interval": 60000})).unwrap();
        assert_eq!((a.function, a.interval_ms), (AggFn::Percentile(95.0), Some(60_000)));
    }

    #[test]
    fn errors() {
        for v in [
            json!(null),
            json!(5),
            json!({}),
            json!({"interval": "5m"}),
            json!({"function": "median_ish"}),
            json!({"function": 3}),
            json!({"function": "avg", "interval": "0s"}),
            json!({"function": "avg", "interval": "5"}),
            json!({"function": "avg", "interval": -5}),
            json!({"function": "avg", "window": "x"}),
            json!({"function": "avg", "type": "downsample"}),
            json!({"function": "avg", "type": "rolling"}),
            json!({"function": "avg", "type": "bucket", "interval": "5m"}),
            json!({"function": "avg", "type": "aggregate", "interval": "5m"}),
            json!({"function": "avg", "type": 1}),
            json!({"function": "percentile"}),
            json!({"function": "percentile", "percentile": 150}),
        ] {
            let e = parse_aggregation(&v).expect_err(&v.to_string());
            assert!(e.to_string().starts_with("invalid aggregation"), "{e}");
        }
    }

    #[test]
    fn apply_forms() {
        let p: Vec<Point> = (0..12).map(|i| (i * 60_000, i as f64)).collect();
        assert_eq!(Aggregation::whole(AggFn::Sum).apply(&p), vec![(0, 66.0)]);
        assert!(Aggregation::whole(AggFn::Sum).apply(&[]).is_empty());
        let a = parse_aggregation(&json!({"function": "avg", "interval": "5m"})).unwrap();
        assert_eq!(a.apply(&p), vec![(0, 2.0), (300_000, 7.0), (600_000, 10.5)]);
        let a = parse_aggregation(&json!({"function": "max", "window": "2m"})).unwrap();
        assert_eq!(a.apply(&p).len(), 12);
        let a = parse_aggregation(&json!({"function": "avg", "interval": "5m", "window": "10m"})).unwrap();
        assert_eq!(a.apply(&p), vec![(0, 2.0), (300_000, 4.5), (600_000, 8.75)]);
    }
}
