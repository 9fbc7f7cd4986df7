//! The router's services: what it does for a request, without HTTP (no axum,
//! nothing of `handlers/`). Handlers parse, authorize, call one service and
//! shape the answer; `tests/tests/module_layers.rs` keeps it so.

pub mod activity;
pub mod alerts;
pub mod auth;
pub mod backup;
pub mod block_list;
pub mod catalog;
pub mod classification;
pub mod compliance;
pub mod external_roles;
pub mod external_users;
pub mod idempotency;
pub mod ids;
pub mod import;
pub mod ldap;
pub mod monitoring;
pub mod nodes;
pub mod oidc;
pub mod rate_limits;
pub mod request_stats;
pub mod security;
pub mod security_state;
pub mod sessions;
pub mod sign_in;
pub mod sql;
pub mod vault;
pub mod vector_layouts;
