//! Time-series operations and results (spec 01, time-series).
//!
//! Timestamps, durations, aggregations and retention policies travel as the
//! client's JSON and are parsed by the engine (which owns the time-series
//! model), so one parser decides what is valid; parse failures come back as
//! `Response::Rejected` / `QueryResult::Rejected` with `ErrorCode::Invalid`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A point as the client sent it: `timestamp` is RFC 3339, epoch seconds or
/// milliseconds, or `now[-+]duration` (resolved against the leader's clock).
#[derive(schemars::JsonSchema, Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TsPointIn {
    /// RFC 3339, a date, or epoch seconds or milliseconds.
    #[schemars(schema_with = "timestamp_schema")]
    pub timestamp: Value,
    pub value: f64,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

fn timestamp_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"anyOf": [
        {"type": "string", "format": "date-time"},
        {"type": "string", "format": "date"},
        {"type": "integer", "format": "int64"},
        {"type": "number", "minimum": -9.2e18, "maximum": 9.2e18, "exclusiveMinimum": true, "exclusiveMaximum": true},
    ]})
}

/// A metric's description and storage statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricInfo {
    pub name: String,
    pub metric_type: String,
    pub description: String,
    pub unit: String,
    pub created_at_ms: i64,
    /// The retention policy as JSON (`drop_after`, `downsample_after`, ...), or null.
    pub retention: Value,
    /// Distinct series (metric + tag set).
    pub series: u64,
    /// Stored points (after retention).
    pub points: u64,
    /// Stored bytes of compressed chunks (headers included).
    pub bytes: u64,
    /// Stored chunks.
    pub chunks: u64,
}

/// One series of a query answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesPoints {
    pub tags: BTreeMap<String, String>,
    pub points: Vec<(i64, f64)>,
}

/// The series of a query answer, in series order, points in time order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesSet {
    pub series: Vec<SeriesPoints>,
    /// More rows matched than the query's `max_rows`: `series` holds the first
    /// `max_rows` of them (series order, then time order).
    pub truncated: bool,
}

/// Time-series writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum TsOp {
    /// Create a metric; rejected with Conflict if it exists.
    CreateMetric { name: String, metric_type: String, description: String, unit: String },
    /// Append points (same timestamp in a series overwrites); auto-creates the metric as a gauge.
    Write { metric: String, points: Vec<TsPointIn> },
    /// Set (or with null, clear) a metric's retention policy.
    SetRetention { metric: String, policy: Value },
    /// Apply every metric's retention policy of the group, with `issued_at_ms` as now.
    EnforceRetention,
    /// Merge each series' hourly chunks of every day that ended at or before
    /// `issued_at_ms - older_than_ms` into one sealed day chunk.
    Compact { older_than_ms: i64 },
    /// As `EnforceRetention`, and a metric without a policy of its own drops
    /// points older than `drop_after_ms` (the nodes' `storage.retention.default_duration`).
    EnforceRetentionWithDefault { drop_after_ms: i64 },
}

/// Time-series reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum TsQuery {
    ListMetrics,
    GetMetric {
        name: String,
    },
    /// Points of `metric` in `[start, end]` (both inclusive, null = unbounded)
    /// of series whose tags include every `tags` pair, aggregated if asked.
    Query {
        metric: String,
        start: Value,
        end: Value,
        tags: BTreeMap<String, String>,
        aggregation: Value,
        /// The router's clock, for `now`-relative timestamps.
        now_ms: i64,
        /// Rows (points, after aggregation) answered at most (`max_result_rows`);
        /// the rest are cut and the answer is flagged truncated.
        max_rows: usize,
    },
}

/// Results of time-series writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum TsResponse {
    Metric(MetricInfo),
    Written {
        points: u64,
        series: u64,
        created_metric: bool,
    },
    Retention {
        metrics: u64,
        dropped_chunks: u64,
        dropped_points: u64,
        downsampled_chunks: u64,
    },
    /// What [`TsOp::Compact`] did: series touched, chunks merged away (sources
    /// count), stored bytes (keys and values) of those chunks before and after.
    Compacted {
        series_compacted: u64,
        blocks_merged: u64,
        bytes_before: u64,
        bytes_after: u64,
    },
}

/// Results of time-series reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum TsQueryResult {
    Metrics(Vec<MetricInfo>),
    Metric(Option<MetricInfo>),
    /// `None`: the metric does not exist.
    Series(Option<SeriesSet>),
}
