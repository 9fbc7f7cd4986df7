//! The time-series engine (spec 01 time-series): metrics, Gorilla-compressed
//! chunks per series per hour, aggregation on read, and retention applied as a
//! replicated command (`issued_at_ms` is "now").
//!
//! Keys of the space:
//! * `m/<metric>` → JSON [`MetricRecord`] (description, retention, statistics);
//! * `s/<metric>\0<series>` → empty, the series index (`<series>` is the JSON of
//!   the sorted tag map, which never holds a NUL byte);
//! * `c/<metric>\0<series>\0<block start, 8 bytes BE, sign flipped>` → chunk:
//!   one header byte (0 raw; 1 downsampled, then the resolution as 8 bytes BE;
//!   flag 0x80: a sealed day chunk) followed by a Gorilla-encoded chunk of the
//!   block's points in time order.
//!
//! A chunk covers one hour, or, once `admin/compress` sealed it ([`TsOp::Compact`]),
//! the whole UTC day starting at its key (the hour chunks of a cold day merged
//! into one, which saves each chunk's key, header and raw first point). Writes
//! into a sealed day go into the sealed chunk.
//!
//! A write decodes each touched block, merges (same timestamp overwrites) and
//! re-encodes. Retention downsampling regroups the series' planned chunks and
//! writes the buckets back into the blocks their timestamps fall in.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tessera_api::command::Response;
use tessera_api::error::{ErrorCode, Rejection};
use tessera_api::timeseries::{MetricInfo, SeriesPoints, SeriesSet, TsOp, TsQuery, TsQueryResult, TsResponse};
use tessera_timeseries::{
    ChunkMeta, Point, RetentionPolicy, decode_chunk, downsample, encode_chunk, format_duration, parse_aggregation, parse_timestamp_at,
    plan_retention,
};

use super::{Answer, Engine, QueryCtx, ReadView, Tx};
use crate::error::{Result, StorageError};

/// Width of a chunk's time block.
pub const BLOCK_MS: i64 = 3_600_000;
/// Most raw points an aggregating query may read (a work bound, answered as an
/// invalid query beyond); the rows it answers are capped by the query's `max_rows`.
const MAX_AGG_POINTS: usize = 5_000_000;

/// A metric as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MetricRecord {
    pub name: String,
    pub metric_type: String,
    pub description: String,
    pub unit: String,
    pub created_at_ms: i64,
    #[serde(default)]
    pub retention: Option<RetentionPolicy>,
    #[serde(default)]
    pub series: u64,
    #[serde(default)]
    pub points: u64,
    #[serde(default)]
    pub bytes: u64,
    #[serde(default)]
    pub chunks: u64,
}

impl MetricRecord {
    fn info(&self) -> MetricInfo {
        let retention = match &self.retention {
            None => Value::Null,
            Some(p) => json!({
                "drop_after": p.drop_after_ms.map(format_duration),
                "downsample_after": p.downsample_after_ms.map(format_duration),
                "downsample_interval": p.downsample_interval_ms.map(format_duration),
                "downsample_function": p.downsample_fn.to_string(),
            }),
        };
        MetricInfo {
            name: self.name.clone(),
            metric_type: self.metric_type.clone(),
            description: self.description.clone(),
            unit: self.unit.clone(),
            created_at_ms: self.created_at_ms,
            retention,
            series: self.series,
            points: self.points,
            bytes: self.bytes,
            chunks: self.chunks,
        }
    }

    /// Accounts for a chunk replaced: (old points, old bytes) → (new points, new bytes); 0 bytes = absent.
    fn account(&mut self, old: (usize, usize), new: (usize, usize)) {
        self.points = (self.points + new.0 as u64).saturating_sub(old.0 as u64);
        self.bytes = (self.bytes + new.1 as u64).saturating_sub(old.1 as u64);
        self.chunks = (self.chunks + (new.1 > 0) as u64).saturating_sub((old.1 > 0) as u64);
    }
}

fn metric_key(name: &str) -> Vec<u8> {
    format!("m/{name}").into_bytes()
}

fn series_prefix(metric: &str) -> Vec<u8> {
    format!("s/{metric}\0").into_bytes()
}

fn chunk_prefix(metric: &str, series: &str) -> Vec<u8> {
    format!("c/{metric}\0{series}\0").into_bytes()
}

fn block_bytes(block: i64) -> [u8; 8] {
    ((block as u64) ^ (1 << 63)).to_be_bytes()
}

fn block_of(ts: i64) -> i64 {
    ts.checked_sub(ts.rem_euclid(BLOCK_MS)).unwrap_or(i64::MIN)
}

/// Width of a sealed chunk.
pub const DAY_MS: i64 = 86_400_000;
/// Header flag of a sealed day chunk.
const SEALED: u8 = 0x80;

fn day_of(ts: i64) -> i64 {
    ts.checked_sub(ts.rem_euclid(DAY_MS)).unwrap_or(i64::MIN)
}

fn is_sealed(raw: &[u8]) -> bool {
    raw.first().is_some_and(|h| h & SEALED != 0)
}

/// The chunk a point at `ts` of `series` belongs to: the sealed chunk of its day
/// when there is one (and it is not in `skip`), else its hour. `(block, sealed)`.
fn target_block(view: &ReadView<'_>, metric: &str, series: &str, ts: i64, skip: &BTreeSet<Vec<u8>>) -> Result<(i64, bool)> {
    let day_key = chunk_key(metric, series, day_of(ts));
    if !skip.contains(&day_key) && view.get(&day_key)?.is_some_and(|raw| is_sealed(&raw)) {
        return Ok((day_of(ts), true));
    }
    Ok((block_of(ts), false))
}

fn chunk_key(metric: &str, series: &str, block: i64) -> Vec<u8> {
    let mut k = chunk_prefix(metric, series);
    k.extend_from_slice(&block_bytes(block));
    k
}

/// A decoded chunk value: resolution (None = raw) and points.
fn decode_value(raw: &[u8]) -> Result<(Option<i64>, Vec<Point>)> {
    let corrupt = |m: String| StorageError::Corrupt(format!("time-series chunk: {m}"));
    let (res, body) = match raw.first().map(|h| h & !SEALED) {
        Some(0) => (None, &raw[1..]),
        Some(1) if raw.len() >= 9 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&raw[1..9]);
            (Some(i64::from_be_bytes(b)), &raw[9..])
        }
        _ => return Err(corrupt("bad header".into())),
    };
    Ok((res, decode_chunk(body).map_err(|e| corrupt(e.to_string()))?))
}

fn encode_value(res: Option<i64>, points: &[Point], sealed: bool) -> std::result::Result<Vec<u8>, String> {
    let body = encode_chunk(points).map_err(|e| e.to_string())?;
    let mut v = Vec::with_capacity(body.len() + 9);
    let flag = if sealed { SEALED } else { 0 };
    match res {
        None => v.push(flag),
        Some(r) => {
            v.push(1 | flag);
            v.extend_from_slice(&r.to_be_bytes());
        }
    }
    v.extend_from_slice(&body);
    Ok(v)
}

fn load_metric(view: &ReadView<'_>, name: &str) -> Result<Option<MetricRecord>> {
    Ok(view.get(&metric_key(name))?.map(|raw| serde_json::from_slice(&raw)).transpose()?)
}

fn rejected(kind: ErrorCode, message: impl Into<String>) -> Response {
    Response::rejected(kind, message)
}

/// Time-series engine.
pub struct TimeSeriesEngine;

impl TimeSeriesEngine {
    fn write(tx: &mut Tx<'_>, now: i64, metric: &str, points: &[tessera_api::timeseries::TsPointIn]) -> Result<Response> {
        let view = tx.view();
        let (mut rec, created) = match load_metric(view, metric)? {
            Some(r) => (r, false),
            None => (
                MetricRecord {
                    name: metric.to_string(),
                    metric_type: "gauge".into(),
                    description: String::new(),
                    unit: String::new(),
                    created_at_ms: now,
                    retention: None,
                    series: 0,
                    points: 0,
                    bytes: 0,
                    chunks: 0,
                },
                true,
            ),
        };
        // (series, block) → ts → value; later points of the request win.
        let mut blocks: BTreeMap<(String, i64), BTreeMap<i64, f64>> = BTreeMap::new();
        let mut targets: BTreeMap<(String, i64), i64> = BTreeMap::new();
        let none = BTreeSet::new();
        for (i, p) in points.iter().enumerate() {
            let ts = match parse_timestamp_at(&p.timestamp, now) {
                Ok(ts) => ts,
                Err(e) => return Ok(rejected(ErrorCode::Invalid, format!("points[{i}]: {e}"))),
            };
            let series = serde_json::to_string(&p.tags)?;
            let block = match targets.get(&(series.clone(), block_of(ts))) {
                Some(b) => *b,
                None => {
                    let (b, _) = target_block(view, metric, &series, ts, &none)?;
                    targets.insert((series.clone(), block_of(ts)), b);
                    b
                }
            };
            blocks.entry((series, block)).or_default().insert(ts, p.value);
        }
        let mut puts: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut seen = BTreeSet::new();
        for ((series, block), new) in &blocks {
            if seen.insert(series.clone()) {
                let mut sk = series_prefix(metric);
                sk.extend_from_slice(series.as_bytes());
                if view.get(&sk)?.is_none() {
                    rec.series += 1;
                    puts.push((sk, Vec::new()));
                }
            }
            let key = chunk_key(metric, series, *block);
            let (res, mut merged, old, sealed) = match view.get(&key)? {
                Some(raw) => {
                    let (res, pts) = decode_value(&raw)?;
                    let old = (pts.len(), raw.len());
                    (res, pts.into_iter().collect::<BTreeMap<i64, f64>>(), old, is_sealed(&raw))
                }
                None => (None, BTreeMap::new(), (0, 0), false),
            };
            merged.extend(new.iter().map(|(t, v)| (*t, *v)));
            let pts: Vec<Point> = merged.into_iter().collect();
            let value = match encode_value(res, &pts, sealed) {
                Ok(v) => v,
                Err(e) => return Ok(rejected(ErrorCode::Invalid, e)),
            };
            rec.account(old, (pts.len(), value.len()));
            puts.push((key, value));
        }
        let written = blocks.values().map(|b| b.len() as u64).sum();
        puts.push((metric_key(metric), serde_json::to_vec(&rec)?));
        for (k, v) in puts {
            tx.put(&k, &v);
        }
        Ok(Response::TimeSeries(TsResponse::Written { points: written, series: seen.len() as u64, created_metric: created }))
    }

    /// Applies one metric's policy at `now`; returns (dropped chunks, dropped points, downsampled chunks).
    fn enforce_metric(tx: &mut Tx<'_>, now: i64, rec: &mut MetricRecord, policy: &RetentionPolicy) -> Result<(u64, u64, u64)> {
        struct Stored {
            key: Vec<u8>,
            series: String,
            len: usize,
            points: Vec<Point>,
        }
        let name = rec.name.clone();
        let prefix = format!("c/{name}\0").into_bytes();
        let mut chunks = Vec::new();
        let mut metas = Vec::new();
        tx.view().scan_prefix(&prefix, |k, v| {
            let rest = &k[prefix.len()..];
            if rest.len() < 9 {
                return Ok(true);
            }
            let series = String::from_utf8_lossy(&rest[..rest.len() - 9]).into_owned();
            let (res, points) = decode_value(v)?;
            if let (Some(first), Some(last)) = (points.first(), points.last()) {
                metas.push(ChunkMeta { id: chunks.len() as u64, min_ts: first.0, max_ts: last.0, resolution_ms: res });
            }
            chunks.push(Stored { key: k.to_vec(), series, len: v.len(), points });
            Ok(true)
        })?;
        let plan = plan_retention(policy, now, &metas);
        let planned: BTreeSet<Vec<u8>> =
            plan.drop.iter().chain(plan.downsample.iter()).map(|id| chunks[*id as usize].key.clone()).collect();
        let mut dropped_points = 0u64;
        for id in &plan.drop {
            let c = &chunks[*id as usize];
            tx.delete(&c.key);
            rec.account((c.points.len(), c.len), (0, 0));
            dropped_points += c.points.len() as u64;
        }
        if let Some(interval) = plan.downsample_interval_ms {
            let mut by_series: BTreeMap<&str, Vec<Point>> = BTreeMap::new();
            for id in &plan.downsample {
                let c = &chunks[*id as usize];
                tx.delete(&c.key);
                rec.account((c.points.len(), c.len), (0, 0));
                by_series.entry(&c.series).or_default().extend_from_slice(&c.points);
            }
            for (series, pts) in by_series {
                let mut out: BTreeMap<(i64, bool), BTreeMap<i64, f64>> = BTreeMap::new();
                for (t, v) in downsample(&pts, interval, plan.downsample_fn) {
                    out.entry(target_block(tx.view(), &name, series, t, &planned)?).or_default().insert(t, v);
                }
                for ((block, sealed), new) in out {
                    let key = chunk_key(&name, series, block);
                    let mut merged = BTreeMap::new();
                    if !planned.contains(&key)
                        && let Some(raw) = tx.view().get(&key)?
                    {
                        let (_, old) = decode_value(&raw)?;
                        rec.account((old.len(), raw.len()), (0, 0));
                        merged.extend(old);
                    }
                    merged.extend(new);
                    let pts: Vec<Point> = merged.into_iter().collect();
                    let value = encode_value(Some(interval), &pts, sealed).map_err(StorageError::Corrupt)?;
                    rec.account((0, 0), (pts.len(), value.len()));
                    tx.put(&key, &value);
                }
            }
        }
        Ok((plan.drop.len() as u64, dropped_points, plan.downsample.len() as u64))
    }

    /// Merges, per series, the chunks of every UTC day that ended at or before
    /// `cutoff` into one sealed day chunk, re-encoded (days with one chunk,
    /// chunks of different resolutions, or days whose merged chunk would not be
    /// smaller are left as they are).
    fn compact(tx: &mut Tx<'_>, cutoff: i64) -> Result<Response> {
        let mut recs: Vec<MetricRecord> = Vec::new();
        tx.view().scan_prefix(b"m/", |_, v| {
            recs.push(serde_json::from_slice(v)?);
            Ok(true)
        })?;
        let (mut series_compacted, mut merged_chunks, mut before, mut after) = (0u64, 0u64, 0u64, 0u64);
        for mut rec in recs {
            struct Stored {
                key: Vec<u8>,
                len: usize,
                res: Option<i64>,
                points: Vec<Point>,
            }
            let prefix = format!("c/{}\0", rec.name).into_bytes();
            // (series, day) → chunks, in key order.
            let mut days: BTreeMap<(String, i64), Vec<Stored>> = BTreeMap::new();
            tx.view().scan_prefix(&prefix, |k, v| {
                let rest = &k[prefix.len()..];
                if rest.len() < 9 {
                    return Ok(true);
                }
                let series = String::from_utf8_lossy(&rest[..rest.len() - 9]).into_owned();
                let mut b = [0u8; 8];
                b.copy_from_slice(&rest[rest.len() - 8..]);
                let block = (u64::from_be_bytes(b) ^ (1 << 63)) as i64;
                let day = day_of(block);
                if day.checked_add(DAY_MS).is_none_or(|end| end > cutoff) {
                    return Ok(true);
                }
                let (res, points) = decode_value(v)?;
                days.entry((series, day)).or_default().push(Stored { key: k.to_vec(), len: v.len(), res, points });
                Ok(true)
            })?;
            let mut touched = BTreeSet::new();
            for ((series, day), chunks) in days {
                if chunks.len() < 2 || chunks.iter().any(|c| c.res != chunks[0].res) {
                    continue;
                }
                let merged: BTreeMap<i64, f64> = chunks.iter().flat_map(|c| c.points.iter().copied()).collect();
                let pts: Vec<Point> = merged.into_iter().collect();
                let key = chunk_key(&rec.name, &series, day);
                let value = encode_value(chunks[0].res, &pts, true).map_err(StorageError::Corrupt)?;
                let old_bytes: usize = chunks.iter().map(|c| c.key.len() + c.len).sum();
                if key.len() + value.len() >= old_bytes {
                    continue; // sealing would not save space
                }
                for c in &chunks {
                    tx.delete(&c.key);
                    rec.account((c.points.len(), c.len), (0, 0));
                }
                before += old_bytes as u64;
                rec.account((0, 0), (pts.len(), value.len()));
                after += (key.len() + value.len()) as u64;
                tx.put(&key, &value);
                merged_chunks += chunks.len() as u64;
                touched.insert(series);
            }
            if !touched.is_empty() {
                series_compacted += touched.len() as u64;
                tx.put(&metric_key(&rec.name), &serde_json::to_vec(&rec)?);
            }
        }
        Ok(Response::TimeSeries(TsResponse::Compacted {
            series_compacted,
            blocks_merged: merged_chunks,
            bytes_before: before,
            bytes_after: after,
        }))
    }

    /// Applies each metric's retention policy, or `default` to a metric without one.
    fn enforce(tx: &mut Tx<'_>, now: i64, default: Option<RetentionPolicy>) -> Result<Response> {
        let mut recs: Vec<MetricRecord> = Vec::new();
        tx.view().scan_prefix(b"m/", |_, v| {
            recs.push(serde_json::from_slice(v)?);
            Ok(true)
        })?;
        let (mut metrics, mut dc, mut dp, mut ds) = (0, 0, 0, 0);
        for mut rec in recs {
            let Some(policy) = rec.retention.or(default) else { continue };
            metrics += 1;
            let (a, b, c) = Self::enforce_metric(tx, now, &mut rec, &policy)?;
            if a + c > 0 {
                tx.put(&metric_key(&rec.name), &serde_json::to_vec(&rec)?);
            }
            dc += a;
            dp += b;
            ds += c;
        }
        Ok(Response::TimeSeries(TsResponse::Retention { metrics, dropped_chunks: dc, dropped_points: dp, downsampled_chunks: ds }))
    }
}

impl Engine for TimeSeriesEngine {
    const SPACE: u8 = super::space::TIMESERIES;
    type Op = TsOp;
    type Query = TsQuery;
    type Answer = TsQueryResult;

    fn query(&self, ctx: &QueryCtx<'_>, query: &TsQuery) -> Result<Answer<TsQueryResult>> {
        self::query(&ctx.view::<Self>(), query)
    }

    fn apply(&self, tx: &mut Tx<'_>, now: i64, op: &TsOp) -> Result<Response> {
        match op {
            TsOp::CreateMetric { name, metric_type, description, unit } => {
                if tx.view().get(&metric_key(name))?.is_some() {
                    return Ok(rejected(ErrorCode::Conflict, format!("metric {name} already exists")));
                }
                let rec = MetricRecord {
                    name: name.clone(),
                    metric_type: metric_type.clone(),
                    description: description.clone(),
                    unit: unit.clone(),
                    created_at_ms: now,
                    retention: None,
                    series: 0,
                    points: 0,
                    bytes: 0,
                    chunks: 0,
                };
                tx.put(&metric_key(name), &serde_json::to_vec(&rec)?);
                Ok(Response::TimeSeries(TsResponse::Metric(rec.info())))
            }
            TsOp::Write { metric, points } => Self::write(tx, now, metric, points),
            TsOp::SetRetention { metric, policy } => {
                let Some(mut rec) = load_metric(tx.view(), metric)? else {
                    return Ok(rejected(ErrorCode::NotFound, format!("metric {metric} does not exist")));
                };
                rec.retention = match policy {
                    Value::Null => None,
                    p => match RetentionPolicy::from_json(p) {
                        Ok(p) => Some(p),
                        Err(e) => return Ok(rejected(ErrorCode::Invalid, e.to_string())),
                    },
                };
                tx.put(&metric_key(metric), &serde_json::to_vec(&rec)?);
                Ok(Response::TimeSeries(TsResponse::Metric(rec.info())))
            }
            TsOp::EnforceRetention => Self::enforce(tx, now, None),
            TsOp::EnforceRetentionWithDefault { drop_after_ms } => {
                let default: RetentionPolicy = serde_json::from_value(serde_json::json!({"drop_after_ms": drop_after_ms}))?;
                Self::enforce(tx, now, Some(default))
            }
            TsOp::Compact { older_than_ms } => Self::compact(tx, now.saturating_sub(*older_than_ms)),
        }
    }
}

fn parse_bound(v: &Value, now: i64, default: i64) -> std::result::Result<i64, String> {
    match v {
        Value::Null => Ok(default),
        v => parse_timestamp_at(v, now).map_err(|e| e.to_string()),
    }
}

/// Answers a time-series query.
pub fn query(view: &ReadView<'_>, q: &TsQuery) -> Result<Answer<TsQueryResult>> {
    match q {
        TsQuery::ListMetrics => {
            let mut out = Vec::new();
            view.scan_prefix(b"m/", |_, v| {
                out.push(serde_json::from_slice::<MetricRecord>(v)?.info());
                Ok(true)
            })?;
            Ok(Ok(TsQueryResult::Metrics(out)))
        }
        TsQuery::GetMetric { name } => Ok(Ok(TsQueryResult::Metric(load_metric(view, name)?.map(|r| r.info())))),
        TsQuery::Query { metric, start, end, tags, aggregation, now_ms, max_rows } => {
            let (start, end) = match (parse_bound(start, *now_ms, i64::MIN), parse_bound(end, *now_ms, i64::MAX)) {
                (Ok(s), Ok(e)) => (s, e),
                (Err(e), _) | (_, Err(e)) => return Ok(Err(Rejection::invalid(e))),
            };
            let agg = match aggregation {
                Value::Null => None,
                a => match parse_aggregation(a) {
                    Ok(a) => Some(a),
                    Err(e) => return Ok(Err(Rejection::invalid(e.to_string()))),
                },
            };
            if load_metric(view, metric)?.is_none() {
                return Ok(Ok(TsQueryResult::Series(None)));
            }
            let max_rows = *max_rows;
            // Raw answers stop reading one point past the row cap (enough to
            // know there is more); aggregations read every point in range, up
            // to the work bound MAX_AGG_POINTS.
            let read_cap = if agg.is_some() { MAX_AGG_POINTS } else { max_rows.saturating_add(1) };
            let sp = series_prefix(metric);
            let mut series = Vec::new();
            view.scan_prefix(&sp, |k, _| {
                let s = String::from_utf8_lossy(&k[sp.len()..]).into_owned();
                let t: BTreeMap<String, String> = serde_json::from_str(&s)?;
                if tags.iter().all(|(k, v)| t.get(k) == Some(v)) {
                    series.push((s, t));
                }
                Ok(true)
            })?;
            let mut out = Vec::new();
            let (mut read, mut rows, mut truncated) = (0usize, 0usize, false);
            for (s, t) in series {
                let mut points = Vec::new();
                if start <= end {
                    let mut lo = chunk_prefix(metric, &s);
                    let mut hi = lo.clone();
                    // A sealed day chunk starting before `start` may hold points after it.
                    lo.extend_from_slice(&block_bytes(day_of(start)));
                    hi.extend_from_slice(&block_bytes(block_of(end)));
                    hi.push(0);
                    view.scan_range(&lo, &hi, |_, v| {
                        let (_, pts) = decode_value(v)?;
                        points.extend(pts.into_iter().filter(|p| p.0 >= start && p.0 <= end));
                        Ok(points.len() + read <= read_cap)
                    })?;
                }
                read += points.len();
                if agg.is_some() && read > MAX_AGG_POINTS {
                    return Ok(Err(Rejection::invalid(format!(
                        "the aggregation reads more than {MAX_AGG_POINTS} points: narrow the time range or tags"
                    ))));
                }
                if points.is_empty() {
                    continue;
                }
                let mut points = match &agg {
                    Some(a) => a.apply(&points),
                    None => points,
                };
                let room = max_rows - rows;
                if points.len() > room {
                    points.truncate(room);
                    truncated = true;
                }
                rows += points.len();
                if !points.is_empty() {
                    out.push(SeriesPoints { tags: t, points });
                }
                if truncated {
                    break;
                }
            }
            Ok(Ok(TsQueryResult::Series(Some(SeriesSet { series: out, truncated }))))
        }
    }
}

/// Series of a data subject: those with a tag named as a subject field
/// (`user_id`, …) whose value is the subject id. Erasing one deletes the series
/// and all its points; the metric stays, its statistics follow.
impl crate::subject::SubjectRecords for TimeSeriesEngine {
    const STORE: &'static str = "timeseries";
    fn subject_items(
        &self,
        view: &ReadView<'_>,
        rule: &tessera_api::compliance::SubjectRule,
        _now: i64,
    ) -> Result<Vec<tessera_api::compliance::SubjectItem>> {
        let mut found = Vec::new();
        view.scan_prefix(b"s/", |k, _| {
            let rest = String::from_utf8_lossy(&k[2..]).into_owned();
            if let Some((metric, series)) = rest.split_once('\0') {
                let tags: Value = serde_json::from_str(series).unwrap_or(Value::Null);
                if rule.matches_object(&tags) {
                    found.push((metric.to_string(), series.to_string(), tags));
                }
            }
            Ok(true)
        })?;
        let mut items = Vec::new();
        for (metric, series, tags) in found {
            let (mut points, mut bytes, mut last) = (Vec::new(), 0u64, None);
            view.scan_prefix(&chunk_prefix(&metric, &series), |k, v| {
                bytes += (k.len() + v.len()) as u64;
                for (ts, value) in decode_value(v)?.1 {
                    points.push(serde_json::json!([ts, value]));
                    last = Some(ts);
                }
                Ok(true)
            })?;
            // The id names the series without its tag values (they are the
            // subject's data; answers and job records keep only ids).
            use sha2::Digest;
            let digest = sha2::Sha256::digest(format!("{metric}\0{series}").as_bytes());
            let item_id = format!("series-{}", digest.iter().take(8).map(|b| format!("{b:02x}")).collect::<String>());
            items.push(tessera_api::compliance::SubjectItem {
                store: Self::STORE.into(),
                location: metric,
                item_id,
                data: serde_json::json!({"tags": tags, "points": points, "series": series}),
                bytes,
                at_ms: last,
            });
        }
        Ok(items)
    }
    fn erase_items(
        &self,
        tx: &mut Tx<'_>,
        _now: i64,
        items: &[tessera_api::compliance::SubjectItem],
    ) -> Result<Option<tessera_api::error::Rejection>> {
        let mut by_metric: std::collections::BTreeMap<&str, Vec<&str>> = std::collections::BTreeMap::new();
        for item in items {
            let Some(series) = item.data["series"].as_str() else { continue };
            by_metric.entry(item.location.as_str()).or_default().push(series);
        }
        for (metric, all_series) in by_metric {
            let mut rec = load_metric(tx.view(), metric)?;
            for series in all_series {
                let mut chunks = Vec::new();
                tx.view().scan_prefix(&chunk_prefix(metric, series), |k, v| {
                    chunks.push((k.to_vec(), decode_value(v)?.1.len(), v.len()));
                    Ok(true)
                })?;
                for (key, points, len) in chunks {
                    tx.delete(&key);
                    if let Some(rec) = rec.as_mut() {
                        rec.account((points, len), (0, 0));
                    }
                }
                let mut index = series_prefix(metric);
                index.extend_from_slice(series.as_bytes());
                tx.delete(&index);
                if let Some(rec) = rec.as_mut() {
                    rec.series = rec.series.saturating_sub(1);
                }
            }
            if let Some(rec) = rec {
                tx.put(&metric_key(metric), &serde_json::to_vec(&rec)?);
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {

    use tessera_api::timeseries::TsPointIn;

    use super::*;
    use crate::engine::{GroupData, space};

    fn open() -> (tempfile::TempDir, GroupData) {
        crate::engine::test_support::open_group(1)
    }

    fn apply(data: &GroupData, now: i64, op: TsOp) -> Response {
        crate::engine::test_support::apply_op(&TimeSeriesEngine, data, space::TIMESERIES, now, &op)
    }

    fn points(data: &GroupData, start: i64, end: i64) -> Vec<Point> {
        let q = TsQuery::Query {
            metric: "m".into(),
            start: json!(start),
            end: json!(end),
            tags: BTreeMap::new(),
            aggregation: Value::Null,
            now_ms: 0,
            max_rows: usize::MAX,
        };
        match query(&data.space(space::TIMESERIES), &q).unwrap() {
            Ok(TsQueryResult::Series(Some(s))) => s.series.into_iter().flat_map(|s| s.points).collect(),
            other => panic!("{other:?}"),
        }
    }

    fn write(data: &GroupData, pts: impl Iterator<Item = (i64, f64)>) {
        let points = pts.map(|(t, v)| TsPointIn { timestamp: json!(t), value: v, tags: BTreeMap::new() }).collect();
        assert!(matches!(apply(data, 0, TsOp::Write { metric: "m".into(), points }), Response::TimeSeries(TsResponse::Written { .. })));
    }

    #[test]
    fn compact_seals_cold_days_and_reads_stay_identical() {
        let (_dir, data) = open();
        let day0 = 19_700 * DAY_MS; // epoch milliseconds (small numbers read as seconds)
        write(&data, (0..2 * 24 * 60).map(|i| (day0 + i * 60_000, (i % 17) as f64 * 0.5)));
        let all = points(&data, 0, i64::MAX);
        // Only the first day has ended at `now`.
        let now = day0 + DAY_MS + 1;
        let r = apply(&data, now, TsOp::Compact { older_than_ms: 0 });
        let Response::TimeSeries(TsResponse::Compacted { series_compacted, blocks_merged, bytes_before, bytes_after }) = r else {
            panic!("{r:?}")
        };
        assert_eq!((series_compacted, blocks_merged), (1, 24));
        assert!(bytes_after < bytes_before);
        assert_eq!(points(&data, 0, i64::MAX), all);
        // A range starting inside the sealed day, and writes into it.
        assert_eq!(points(&data, day0 + 5 * BLOCK_MS, day0 + 5 * BLOCK_MS + 60_000).len(), 2);
        write(&data, [(day0 + 60_000, -1.0), (day0 + 30_000, -2.0)].into_iter());
        let head = points(&data, day0, day0 + 60_000);
        assert_eq!(head, vec![(day0, 0.0), (day0 + 30_000, -2.0), (day0 + 60_000, -1.0)]);
        assert_eq!(data.space(space::TIMESERIES).get(&chunk_key("m", "{}", day0 + BLOCK_MS)).unwrap(), None);
        // Nothing more to do; the second day seals once it has ended.
        let again = apply(&data, now, TsOp::Compact { older_than_ms: 0 });
        assert!(matches!(again, Response::TimeSeries(TsResponse::Compacted { blocks_merged: 0, .. })));
        let later = apply(&data, day0 + 3 * DAY_MS, TsOp::Compact { older_than_ms: DAY_MS / 2 });
        assert!(matches!(later, Response::TimeSeries(TsResponse::Compacted { blocks_merged: 24, .. })));
        assert_eq!(points(&data, 0, i64::MAX).len(), all.len() + 1);
    }

    fn write_tagged(data: &GroupData, metric: &str, host: &str, pts: impl Iterator<Item = (i64, f64)>) {
        let tags: BTreeMap<String, String> = [("host".to_string(), host.to_string())].into();
        let points = pts.map(|(t, v)| TsPointIn { timestamp: json!(t), value: v, tags: tags.clone() }).collect();
        let r = apply(data, 0, TsOp::Write { metric: metric.into(), points });
        assert!(matches!(r, Response::TimeSeries(TsResponse::Written { .. })), "{r:?}");
    }

    fn ask(data: &GroupData, metric: &str, aggregation: Value, max_rows: usize) -> SeriesSet {
        let q = TsQuery::Query {
            metric: metric.into(),
            start: Value::Null,
            end: Value::Null,
            tags: BTreeMap::new(),
            aggregation,
            now_ms: 0,
            max_rows,
        };
        match query(&data.space(space::TIMESERIES), &q).unwrap() {
            Ok(TsQueryResult::Series(Some(s))) => s,
            other => panic!("{other:?}"),
        }
    }

    fn stored(data: &GroupData, metric: &str) -> MetricRecord {
        load_metric(&data.space(space::TIMESERIES), metric).unwrap().expect("metric")
    }

    fn set_retention(data: &GroupData, metric: &str, policy: Value) {
        let r = apply(data, 0, TsOp::SetRetention { metric: metric.into(), policy });
        assert!(matches!(r, Response::TimeSeries(TsResponse::Metric(_))), "{r:?}");
    }

    fn enforce(data: &GroupData, now: i64) -> (u64, u64, u64, u64) {
        match apply(data, now, TsOp::EnforceRetention) {
            Response::TimeSeries(TsResponse::Retention { metrics, dropped_chunks, dropped_points, downsampled_chunks }) => {
                (metrics, dropped_chunks, dropped_points, downsampled_chunks)
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_default_retention_drops_old_points_of_metrics_without_a_policy() {
        let (_dir, data) = open();
        let now = 20_000 * DAY_MS + 12 * BLOCK_MS;
        write_tagged(
            &data,
            "plain",
            "a",
            (0..60).map(|i| (now - 10 * DAY_MS + i * 60_000, 1.0)).chain((0..5).map(|i| (now - i * 60_000, 2.0))),
        );
        write_tagged(&data, "own", "a", (0..60).map(|i| (now - 10 * DAY_MS + i * 60_000, 1.0)));
        set_retention(&data, "own", json!({"drop_after": "30d"}));
        let r = apply(&data, now, TsOp::EnforceRetentionWithDefault { drop_after_ms: 2 * DAY_MS });
        assert!(matches!(r, Response::TimeSeries(TsResponse::Retention { metrics: 2, dropped_points: 60, .. })), "{r:?}");
        assert_eq!(ask(&data, "plain", Value::Null, usize::MAX).series[0].points.len(), 5, "only the recent points stay");
        assert_eq!(ask(&data, "own", Value::Null, usize::MAX).series[0].points.len(), 60, "its own policy keeps 30 days");
    }

    #[test]
    fn retention_drop_after_removes_old_points_and_keeps_new_ones() {
        let (_dir, data) = open();
        let now = 20_000 * DAY_MS + 12 * BLOCK_MS;
        // Two series: 3 old hours (10 days ago) and 30 recent points (last hour) each.
        for host in ["a", "b"] {
            let old = (0..180).map(|i| (now - 10 * DAY_MS + i * 60_000, i as f64));
            let recent = (0..30).map(|i| (now - 30 * 60_000 + i * 60_000, 1000.0 + i as f64));
            write_tagged(&data, "drop", host, old.chain(recent));
        }
        // A metric without a policy is never touched.
        write_tagged(&data, "keep", "a", (0..10).map(|i| (now - 100 * DAY_MS + i, 1.0)));
        set_retention(&data, "drop", json!({"drop_after": "2d"}));
        assert_eq!(stored(&data, "drop").points, 420);

        let (metrics, chunks, points, downsampled) = enforce(&data, now);
        assert_eq!((metrics, points, downsampled), (1, 360, 0));
        assert!(chunks >= 6, "3 hours of 2 series dropped: {chunks}");
        let left = ask(&data, "drop", Value::Null, usize::MAX);
        assert_eq!(left.series.len(), 2);
        for s in &left.series {
            let want: Vec<Point> = (0..30).map(|i| (now - 30 * 60_000 + i * 60_000, 1000.0 + i as f64)).collect();
            assert_eq!(s.points, want);
        }
        let rec = stored(&data, "drop");
        assert_eq!((rec.points, rec.series), (60, 2));
        assert_eq!(ask(&data, "keep", Value::Null, usize::MAX).series[0].points.len(), 10);
        // Idempotent: nothing is left to drop at the same time.
        assert_eq!(enforce(&data, now), (1, 0, 0, 0));
    }

    #[test]
    fn retention_downsample_after_replaces_old_raw_points_with_aggregates() {
        let (_dir, data) = open();
        let now = 20_000 * DAY_MS + 12 * BLOCK_MS;
        // One hour of 10 s points 5 days ago, and 20 raw points in the last hour.
        let t0 = now - 5 * DAY_MS;
        let old: Vec<Point> = (0..360).map(|i| (t0 + i * 10_000, i as f64)).collect();
        let recent: Vec<Point> = (0..20).map(|i| (now - 20 * 60_000 + i * 60_000, -(i as f64))).collect();
        write_tagged(&data, "ds", "a", old.iter().chain(recent.iter()).copied());
        set_retention(
            &data,
            "ds",
            json!({"drop_after": "30d", "downsample_after": "1d", "downsample_interval": "10m", "downsample_function": "max"}),
        );

        let (metrics, dropped_chunks, dropped_points, downsampled) = enforce(&data, now);
        assert_eq!((metrics, dropped_chunks, dropped_points), (1, 0, 0));
        assert_eq!(downsampled, 1, "the old hour chunk is downsampled");
        let got = ask(&data, "ds", Value::Null, usize::MAX).series.remove(0).points;
        // 10 minute maxima (bucket start, max of its 60 points), then the untouched recent points.
        let mut want: Vec<Point> = (0..6).map(|k| (t0 + k * 600_000, (k * 60 + 59) as f64)).collect();
        want.extend(recent.iter().copied());
        assert_eq!(got, want);
        let rec = stored(&data, "ds");
        assert_eq!(rec.points, 26);
        // The old chunk is stored at the coarser resolution; downsampling again is a no-op.
        let key = chunk_key("ds", r#"{"host":"a"}"#, block_of(t0));
        let (res, pts) = decode_value(&data.space(space::TIMESERIES).get(&key).unwrap().expect("chunk")).unwrap();
        assert_eq!((res, pts.len()), (Some(600_000), 6));
        assert_eq!(enforce(&data, now), (1, 0, 0, 0));
        // 26 days later the old buckets are past drop_after and go; the once
        // recent points are past downsample_after and become 10 minute maxima.
        let (_, _, dropped_points, downsampled) = enforce(&data, now + 26 * DAY_MS);
        assert_eq!((dropped_points, downsampled), (6, 1));
        let t1 = now - 20 * 60_000;
        assert_eq!(ask(&data, "ds", Value::Null, usize::MAX).series[0].points, vec![(t1, 0.0), (t1 + 600_000, -10.0)]);
        assert_eq!(stored(&data, "ds").points, 2);
    }

    #[test]
    fn queries_cut_at_max_rows_and_flag_truncation() {
        let (_dir, data) = open();
        let base = 20_000 * DAY_MS;
        for host in ["a", "b"] {
            write_tagged(&data, "cap", host, (0..100).map(|i| (base + i * 60_000, i as f64)));
        }
        // Raw: 200 rows match; 150 come back, series a whole, then the first 50 of b.
        let s = ask(&data, "cap", Value::Null, 150);
        assert!(s.truncated);
        assert_eq!(s.series.iter().map(|x| x.points.len()).collect::<Vec<_>>(), vec![100, 50]);
        assert_eq!(s.series[1].points[49], (base + 49 * 60_000, 49.0));
        // Exactly at the cap, or above it: not truncated.
        for cap in [200, 201, usize::MAX] {
            let s = ask(&data, "cap", Value::Null, cap);
            assert!(!s.truncated && s.series.iter().map(|x| x.points.len()).sum::<usize>() == 200, "cap {cap}");
        }
        // A cap that ends exactly at a series boundary with more series to come.
        let s = ask(&data, "cap", Value::Null, 100);
        assert!(s.truncated && s.series.len() == 1 && s.series[0].points.len() == 100);
        // Aggregations are computed over every point, then their rows are cut.
        let s = ask(&data, "cap", json!({"function": "sum", "interval": "10m"}), 15);
        assert!(s.truncated);
        assert_eq!(s.series.iter().map(|x| x.points.len()).collect::<Vec<_>>(), vec![10, 5]);
        assert_eq!(s.series[0].points[0], (base, (0..10).sum::<i32>() as f64));
        let s = ask(&data, "cap", json!({"function": "count"}), 2);
        assert!(!s.truncated && s.series.iter().all(|x| x.points == vec![(base, 100.0)]));
    }
}
