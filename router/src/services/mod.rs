//! The router's services: what it does for a request, without HTTP (no axum,
//! nothing of `handlers/`). Handlers parse, authorize, call one service and
//! shape the answer. (Issue 38 moves the rest of the domain logic here; see
//! `tests/tests/module_layers.rs`.)

pub mod alerts;
pub mod auth;
pub mod block_list;
pub mod classification;
pub mod compliance;
pub mod ids;
pub mod monitoring;
pub mod nodes;
pub mod rate_limits;
pub mod request_stats;
pub mod security_state;
pub mod sessions;
pub mod vector_layouts;
