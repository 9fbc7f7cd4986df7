//! `POST /api/v1/admin/compress {older_than?}` (admins): compresses the cold
//! sections of time-series and document data on every data group, each as one
//! replicated command (so every replica stores the same bytes), and reports
//! what it did. `older_than` (default `"1h"`; seconds or `"30s"`, `"15m"`, `"2h"`,
//! `"7d"`) decides what is cold: time-series days that ended at least that long
//! ago, documents last written at least that long ago.

use std::time::Instant;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use serde_json::Value;
use tessera_api::command::{Operation, Response as Reply};
use tessera_api::document::{DocOp, DocResponse};
use tessera_api::timeseries::{TsOp, TsResponse};

use super::ReadPrefs;
use crate::cluster::typed::{self, shape};
use crate::error::ApiError;
use crate::services::auth::Caller;
use crate::services::import::parse_duration_ms;
use crate::state::AppState;

/// Default age of cold data.
const DEFAULT_OLDER_THAN_MS: i64 = 3_600_000;

/// `POST /api/v1/admin/compress`; the body may be empty or `{older_than}`.
/// The body of `POST /api/v1/admin/compress` (documentation only): empty or
/// `{"older_than": "7d"}`.
#[derive(schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
pub struct CompressBody {
    /// Compress values written before this long ago: a duration (`"90s"`, `"7d"`) or whole seconds.
    #[serde(default)]
    #[schemars(schema_with = "crate::http::openapi::formats::duration_or_seconds")]
    older_than: Option<serde_json::Value>,
}

/// What time-series compaction did, summed over the data groups.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct TimeSeriesCompaction {
    pub series_compacted: u64,
    pub blocks_merged: u64,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// What document compression did, summed over the data groups.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct DocumentCompression {
    pub collections: usize,
    pub collection_names: std::collections::BTreeSet<String>,
    pub documents_compressed: u64,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// The answer of `POST /api/v1/admin/compress`.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct Compression {
    pub success: bool,
    pub older_than_ms: i64,
    pub timeseries: TimeSeriesCompaction,
    pub documents: DocumentCompression,
    pub duration_ms: u64,
}

pub async fn compress(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    body: Bytes,
) -> Result<Json<Compression>, ApiError> {
    let started = Instant::now();
    let older_than_ms = if body.iter().all(u8::is_ascii_whitespace) {
        DEFAULT_OLDER_THAN_MS
    } else {
        let v: Value = serde_json::from_slice(&body).map_err(|e| ApiError::BadRequest(format!("invalid JSON body: {e}")))?;
        let obj = v.as_object().ok_or_else(|| ApiError::BadRequest("the request body must be a JSON object".into()))?;
        if let Some(k) = obj.keys().find(|k| k.as_str() != "older_than") {
            return Err(ApiError::BadRequest(format!("unknown field {k:?} (only older_than is accepted)")));
        }
        match obj.get("older_than") {
            None | Some(Value::Null) => DEFAULT_OLDER_THAN_MS,
            Some(d) => parse_duration_ms(d).map_err(ApiError::BadRequest)?,
        }
    };
    let groups = state.cluster.data_groups()?;
    let ts_op = Operation::TimeSeries(TsOp::Compact { older_than_ms });
    let doc_op = Operation::Document(DocOp::Compress { older_than_ms });
    let ts_calls = groups.iter().map(|g| state.cluster.write(*g, &ts_op, prefs.consistency));
    let doc_calls = groups.iter().map(|g| state.cluster.write(*g, &doc_op, prefs.consistency));
    let (ts, docs) = futures::future::join(futures::future::join_all(ts_calls), futures::future::join_all(doc_calls)).await;
    let (mut series, mut merged, mut ts_before, mut ts_after) = (0u64, 0u64, 0u64, 0u64);
    for r in ts {
        let reply = typed::pick(r?.value, shape!(Reply::TimeSeries))?;
        let compacted = shape!(TsResponse::Compacted { series_compacted, blocks_merged, bytes_before, bytes_after });
        let (series_compacted, blocks_merged, bytes_before, bytes_after) = typed::pick(reply, compacted)?;
        series += series_compacted;
        merged += blocks_merged;
        ts_before += bytes_before;
        ts_after += bytes_after;
    }
    let mut collections = std::collections::BTreeSet::new();
    let (mut documents, mut doc_before, mut doc_after) = (0u64, 0u64, 0u64);
    for r in docs {
        let reply = typed::pick(r?.value, shape!(Reply::Document))?;
        let compressed = shape!(DocResponse::Compressed { collections, documents, bytes_before, bytes_after });
        let (c, d, bytes_before, bytes_after) = typed::pick(reply, compressed)?;
        collections.extend(c);
        documents += d;
        doc_before += bytes_before;
        doc_after += bytes_after;
    }
    Ok(Json(Compression {
        success: true,
        older_than_ms,
        timeseries: TimeSeriesCompaction {
            series_compacted: series,
            blocks_merged: merged,
            bytes_before: ts_before,
            bytes_after: ts_after,
        },
        documents: DocumentCompression {
            collections: collections.len(),
            collection_names: collections,
            documents_compressed: documents,
            bytes_before: doc_before,
            bytes_after: doc_after,
        },
        duration_ms: started.elapsed().as_millis() as u64,
    }))
}
