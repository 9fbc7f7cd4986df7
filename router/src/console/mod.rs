//! The web console: static pages built into the binary (no Node build step),
//! served beside the whole `/api/v1` on `console.port`, so the pages call the
//! API on their own origin. The pages are a client of `/api/v1` only: every
//! action goes through the same permissions as any other client.

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

const INDEX: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("console.js");
const STYLE: &str = include_str!("console.css");

/// The console's pages, to merge with the API's routes.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|| async { page(INDEX, "text/html; charset=utf-8") }))
        .route("/console/console.js", get(|| async { page(SCRIPT, "text/javascript; charset=utf-8") }))
        .route("/console/console.css", get(|| async { page(STYLE, "text/css; charset=utf-8") }))
}

fn page(body: &'static str, media_type: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, media_type),
            (header::CACHE_CONTROL, "no-cache"),
            // Scripts from this origin only; the pages call nothing else.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'",
            ),
            (header::X_FRAME_OPTIONS, "DENY"),
        ],
        body,
    )
}
