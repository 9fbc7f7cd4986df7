//! Tessera time-series model: pure functions, no I/O.
//!
//! * [`gorilla`]: per-series chunk compression ([`ChunkEncoder`], [`decode_chunk`]),
//!   Facebook Gorilla style (delta-of-delta timestamps, XOR-encoded floats).
//! * [`duration`]: `"500ms"`, `"1h30m"`, ... ([`parse_duration`]).
//! * [`timestamp`]: RFC 3339 / epoch parsing and formatting ([`parse_timestamp`], [`format_timestamp`]).
//! * [`agg`]: aggregate functions ([`AggFn`], [`aggregate`]).
//! * [`window`]: bucketed downsampling and rolling windows ([`downsample`], [`rolling`]).
//! * [`request`]: the query's `aggregation` object ([`parse_aggregation`]).
//! * [`retention`]: retention policies and a pure planner ([`plan_retention`]).
//!
//! A point is `(timestamp_ms, value)`: `i64` milliseconds since the Unix epoch (UTC)
//! and an `f64`. No function panics on any input.
//!
//! ```
//! use serde_json::json;
//! use tessera_timeseries::*;
//!
//! let points: Vec<(i64, f64)> = (0..60).map(|i| (i * 10_000, i as f64)).collect();
//! let bytes = encode_chunk(&points).unwrap();
//! assert_eq!(decode_chunk(&bytes).unwrap(), points);
//!
//! let agg = parse_aggregation(&json!({"type": "downsample", "interval": "5m", "function": "max"})).unwrap();
//! assert_eq!(agg.apply(&points), vec![(0, 29.0), (300_000, 59.0)]);
//! assert_eq!(parse_duration("1h30m").unwrap(), 5_400_000);
//! assert_eq!(parse_timestamp(&json!("1970-01-01T00:00:01Z")).unwrap(), 1000);
//! assert_eq!(format_timestamp(1000), "1970-01-01T00:00:01.000Z");
//! ```

pub mod agg;
mod bits;
pub mod duration;
pub mod error;
pub mod gorilla;
pub mod request;
pub mod retention;
pub mod timestamp;
pub mod window;

pub use agg::{AggFn, aggregate};
pub use duration::{format_duration, parse_duration, parse_duration_value};
pub use error::TsError;
pub use gorilla::{ChunkEncoder, decode_chunk, encode_chunk};
pub use request::{Aggregation, parse_aggregation};
pub use retention::{ChunkMeta, RetentionPlan, RetentionPolicy, plan_retention};
pub use timestamp::{format_timestamp, parse_timestamp, parse_timestamp_at};
pub use window::{downsample, rolling};

/// One sample: (milliseconds since the Unix epoch, value).
pub type Point = (i64, f64);
