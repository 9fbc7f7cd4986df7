//! Retention policies and a pure planner.
//!
//! A policy may drop data older than `drop_after_ms`, and/or rewrite data older
//! than `downsample_after_ms` at a coarser `downsample_interval_ms` using
//! `downsample_fn`. The storage layer keeps per-chunk metadata ([`ChunkMeta`]),
//! calls [`plan_retention`] periodically, and executes the [`RetentionPlan`]:
//! deleting the `drop` chunks, and for each `downsample` chunk decoding it,
//! calling [`downsample`](crate::window::downsample) with the plan's interval and
//! function, re-encoding, and recording `resolution_ms = interval`.
//!
//! Rules (age is measured by the chunk's **newest** point, so a chunk is only
//! acted upon once all of its points are past the threshold):
//! * **drop** when `max_ts < now − drop_after_ms`;
//! * otherwise **downsample** when `max_ts < now − downsample_after_ms` and the
//!   chunk is not already at `downsample_interval_ms` or coarser
//!   (`resolution_ms` is `None` for raw data).
//!
//! A rule whose duration is missing or not positive is disabled; downsampling
//! needs both `downsample_after_ms` and `downsample_interval_ms`. Queries must
//! still filter by time themselves: a chunk straddling a threshold is kept whole.

use crate::agg::AggFn;
use crate::duration::parse_duration_value;
use crate::error::TsError;
use serde::{Deserialize, Serialize};
use serde_json::Value;

fn default_fn() -> AggFn {
    AggFn::Avg
}

/// Retention policy of a metric. Serialized with serde (`downsample_fn` as a
/// function name string, default `avg`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RetentionPolicy {
    /// Delete data older than this.
    #[serde(default)]
    pub drop_after_ms: Option<i64>,
    /// Downsample data older than this.
    #[serde(default)]
    pub downsample_after_ms: Option<i64>,
    /// Target bucket width when downsampling.
    #[serde(default)]
    pub downsample_interval_ms: Option<i64>,
    /// Function used to downsample.
    #[serde(default = "default_fn")]
    pub downsample_fn: AggFn,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        RetentionPolicy { drop_after_ms: None, downsample_after_ms: None, downsample_interval_ms: None, downsample_fn: AggFn::Avg }
    }
}

fn pol(msg: impl Into<String>) -> TsError {
    TsError::InvalidPolicy(msg.into())
}

impl RetentionPolicy {
    /// Check that durations are positive, that downsampling has both its
    /// threshold and interval, and that data is downsampled before it is dropped.
    pub fn validate(&self) -> Result<(), TsError> {
        for (name, v) in [
            ("drop_after", self.drop_after_ms),
            ("downsample_after", self.downsample_after_ms),
            ("downsample_interval", self.downsample_interval_ms),
        ] {
            if v.is_some_and(|v| v <= 0) {
                return Err(pol(format!("{name} must be a positive duration")));
            }
        }
        if self.downsample_after_ms.is_some() != self.downsample_interval_ms.is_some() {
            return Err(pol("downsample_after and downsample_interval must be given together"));
        }
        if matches!((self.drop_after_ms, self.downsample_after_ms), (Some(d), Some(s)) if s >= d) {
            return Err(pol("downsample_after must be shorter than drop_after"));
        }
        Ok(())
    }

    /// Parse a policy from JSON where each duration may be given as
    /// `drop_after` / `downsample_after` / `downsample_interval` (a duration string
    /// like `"30d"` or integer ms) or as the `*_ms` fields; `downsample_fn`
    /// (alias `downsample_function`) defaults to `avg`. The result is validated.
    pub fn from_json(v: &Value) -> Result<RetentionPolicy, TsError> {
        let obj = v.as_object().ok_or_else(|| pol("expected an object"))?;
        let dur = |name: &str| -> Result<Option<i64>, TsError> {
            match obj.get(name).or_else(|| obj.get(&format!("{name}_ms"))) {
                None | Some(Value::Null) => Ok(None),
                Some(d) => parse_duration_value(d).map(Some).map_err(|e| pol(format!("{name}: {e}"))),
            }
        };
        let downsample_fn = match obj.get("downsample_fn").or_else(|| obj.get("downsample_function")) {
            None | Some(Value::Null) => AggFn::Avg,
            Some(Value::String(s)) => s.parse().map_err(|e: TsError| pol(e.to_string()))?,
            Some(_) => return Err(pol("downsample_fn must be a function name")),
        };
        let p = RetentionPolicy {
            drop_after_ms: dur("drop_after")?,
            downsample_after_ms: dur("downsample_after")?,
            downsample_interval_ms: dur("downsample_interval")?,
            downsample_fn,
        };
        p.validate()?;
        Ok(p)
    }
}

/// What the planner needs to know about a stored chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkMeta {
    /// Storage-assigned chunk identifier.
    pub id: u64,
    /// Earliest timestamp in the chunk.
    pub min_ts: i64,
    /// Latest timestamp in the chunk.
    pub max_ts: i64,
    /// Bucket width the chunk was downsampled to; `None` for raw data.
    #[serde(default)]
    pub resolution_ms: Option<i64>,
}

/// Output of [`plan_retention`]: chunk ids in input order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RetentionPlan {
    /// Chunks to delete.
    pub drop: Vec<u64>,
    /// Chunks to rewrite at `downsample_interval_ms` with `downsample_fn`.
    pub downsample: Vec<u64>,
    /// Interval to downsample to (set when `downsample` is non-empty).
    pub downsample_interval_ms: Option<i64>,
    /// Function to downsample with.
    pub downsample_fn: AggFn,
}

/// Decide which chunks to drop and which to downsample at time `now_ms`
/// (see the module docs for the rules). Pure and total.
pub fn plan_retention(policy: &RetentionPolicy, now_ms: i64, chunks: &[ChunkMeta]) -> RetentionPlan {
    let positive = |v: Option<i64>| v.filter(|v| *v > 0);
    let drop_cutoff = positive(policy.drop_after_ms).map(|d| now_ms.saturating_sub(d));
    let ds = match (positive(policy.downsample_after_ms), positive(policy.downsample_interval_ms)) {
        (Some(after), Some(interval)) => Some((now_ms.saturating_sub(after), interval)),
        _ => None,
    };
    let mut plan = RetentionPlan { downsample_fn: policy.downsample_fn, ..RetentionPlan::default() };
    for c in chunks {
        if drop_cutoff.is_some_and(|cut| c.max_ts < cut) {
            plan.drop.push(c.id);
        } else if ds.is_some_and(|(cut, interval)| c.max_ts < cut && c.resolution_ms.is_none_or(|r| r < interval)) {
            plan.downsample.push(c.id);
        }
    }
    if !plan.downsample.is_empty() {
        plan.downsample_interval_ms = ds.map(|(_, i)| i);
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DAY: i64 = 86_400_000;

    fn chunk(id: u64, min_days_ago: i64, max_days_ago: i64, res: Option<i64>) -> ChunkMeta {
        let now = 1000 * DAY;
        ChunkMeta { id, min_ts: now - min_days_ago * DAY, max_ts: now - max_days_ago * DAY, resolution_ms: res }
    }

    #[test]
    fn plans() {
        let p = RetentionPolicy::from_json(&json!({
            "drop_after": "30d", "downsample_after": "7d", "downsample_interval": "1h", "downsample_fn": "MAX"
        }))
        .unwrap();
        assert_eq!(p.drop_after_ms, Some(30 * DAY));
        let chunks = [
            chunk(1, 40, 35, None),           // old: drop
            chunk(2, 32, 29, None),           // straddles drop cutoff: keep, but old enough to downsample
            chunk(3, 10, 8, None),            // downsample
            chunk(4, 10, 8, Some(3_600_000)), // already at 1h
            chunk(5, 10, 8, Some(60_000)),    // 1m resolution: downsample further
            chunk(6, 8, 6, None),             // straddles downsample cutoff: keep
            chunk(7, 1, 0, None),             // fresh
        ];
        let plan = plan_retention(&p, 1000 * DAY, &chunks);
        assert_eq!(plan.drop, vec![1]);
        assert_eq!(plan.downsample, vec![2, 3, 5]);
        assert_eq!(plan.downsample_interval_ms, Some(3_600_000));
        assert_eq!(plan.downsample_fn, AggFn::Max);

        let only_drop = RetentionPolicy { drop_after_ms: Some(7 * DAY), ..RetentionPolicy::default() };
        let plan = plan_retention(&only_drop, 1000 * DAY, &chunks);
        assert_eq!(plan.drop, vec![1, 2, 3, 4, 5]);
        assert!(plan.downsample.is_empty());
        assert_eq!(plan.downsample_interval_ms, None);

        let none = plan_retention(&RetentionPolicy::default(), 1000 * DAY, &chunks);
        assert!(none.drop.is_empty() && none.downsample.is_empty());
        let weird = RetentionPolicy {
            drop_after_ms: Some(-5),
            downsample_after_ms: Some(0),
            downsample_interval_ms: Some(1),
            ..RetentionPolicy::default()
        };
        let plan = plan_retention(&weird, i64::MIN, &chunks);
        assert!(plan.drop.is_empty() && plan.downsample.is_empty());
        let plan = plan_retention(&only_drop, i64::MAX, &chunks);
        assert_eq!(plan.drop.len(), chunks.len());
    }

    #[test]
    fn serde_and_validation() {
        let p = RetentionPolicy {
            drop_after_ms: Some(30 * DAY),
            downsample_after_ms: Some(7 * DAY),
            downsample_interval_ms: Some(3_600_000),
            downsample_fn: AggFn::Percentile(90.0),
        };
        let j = serde_json::to_value(p).unwrap();
        assert_eq!(j["downsample_fn"], json!("percentile_90"));
        assert_eq!(serde_json::from_value::<RetentionPolicy>(j).unwrap(), p);
        let d: RetentionPolicy = serde_json::from_value(json!({"drop_after_ms": 1000})).unwrap();
        assert_eq!(d.downsample_fn, AggFn::Avg);
        assert!(d.validate().is_ok());
        assert_eq!(RetentionPolicy::from_json(&json!({"drop_after_ms": 5000})).unwrap().drop_after_ms, Some(5000));
        for bad in [
            json!({"drop_after": "7d", "downsample_after": "30d", "downsample_interval": "1h"}),
            json!({"downsample_after": "7d"}),
            json!({"downsample_interval": "1h"}),
            json!({"drop_after": "0s"}),
            json!({"drop_after": "soon"}),
            json!({"drop_after": "1d", "downsample_fn": "mode"}),
            json!({"drop_after": "1d", "downsample_fn": 1}),
            json!([]),
        ] {
            assert!(RetentionPolicy::from_json(&bad).is_err(), "{bad}");
        }
        assert!(serde_json::from_value::<RetentionPolicy>(json!({"downsample_fn": "nope"})).is_err());
    }
}
