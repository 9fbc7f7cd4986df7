//! The browser frontend (port 3000): one page built into the binary, served
//! with the API under the same origin, so the page calls it without CORS.

use axum::Router;
use axum::response::Html;
use axum::routing::get;

use crate::state::AppState;

const INDEX: &str = include_str!("../web/index.html");

/// The frontend's page plus every API route.
pub fn routes(state: AppState) -> Router {
    Router::new().route("/", get(|| async { Html(INDEX) })).merge(crate::http::routes(state))
}
