//! Rate limits, counted in Tessera so that every instance shares them: a
//! fixed one-minute window per client address and route class, one
//! conditional upsert per request. Sign-in routes (register, login, refresh)
//! have their own, tighter budget. Over budget: 429 `rate_limited` with
//! `Retry-After` (the seconds left in the window).

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::clock::now_ms;
use crate::error::AppError;
use crate::state::AppState;

/// The table this service owns.
pub const SCHEMA: &[&str] =
    &["CREATE TABLE IF NOT EXISTS rate_buckets (bucket TEXT PRIMARY KEY, win BIGINT NOT NULL, hits BIGINT NOT NULL)"];

const WINDOW_MS: i64 = 60_000;

/// Sign-in attempts per minute and address, whatever the general budget.
const SIGN_IN_PER_MIN: u64 = 30;

pub async fn middleware(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let per_min = state.config.rate_limit_per_min;
    let path = request.uri().path();
    if per_min == 0 || path == "/health" {
        return next.run(request).await;
    }
    let sign_in = matches!(path, "/api/v1/auth/login" | "/api/v1/auth/register" | "/api/v1/auth/refresh");
    let (class, budget) = if sign_in { ("sign-in", SIGN_IN_PER_MIN.min(per_min)) } else { ("api", per_min) };
    let client = request.extensions().get::<ConnectInfo<SocketAddr>>().map_or_else(|| "unknown".to_string(), |c| c.0.ip().to_string());
    let now = now_ms();
    let window = now / WINDOW_MS;
    match hit(&state, &format!("{class}:{client}"), window).await {
        Ok(hits) if hits > budget => {
            let retry_after_secs = (((window + 1) * WINDOW_MS - now) / 1000).max(1) as u64;
            AppError::RateLimited {
                message: format!("more than {budget} requests a minute from {client}; try again in {retry_after_secs} s"),
                retry_after_secs,
            }
            .into_response()
        }
        Ok(_) => next.run(request).await,
        // The limiter never takes the API down with it: a failed count lets the request through.
        Err(e) => {
            tracing::warn!("rate limit not counted: {e}");
            next.run(request).await
        }
    }
}

/// Counts one request of `bucket` in `window`; answers the window's count so far.
async fn hit(state: &AppState, bucket: &str, window: i64) -> Result<u64, crate::db::DbError> {
    let rows = state
        .db
        .sql(
            "INSERT INTO rate_buckets (bucket, win, hits) VALUES ($1, $2, 1) ON CONFLICT (bucket) DO UPDATE SET hits = CASE WHEN rate_buckets.win = $2 THEN rate_buckets.hits + 1 ELSE 1 END, win = $2 RETURNING hits",
            &[json!(bucket), json!(window)],
        )
        .await?;
    Ok(rows.rows.first().and_then(|r| r.first()).and_then(Value::as_u64).unwrap_or(1))
}
