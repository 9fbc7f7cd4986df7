//! The vector routes: not built yet.

use axum::Router;

use crate::state::AppState;

/// The vector routes, merged into the router's table.
pub fn routes() -> Router<AppState> {
    Router::new()
}
