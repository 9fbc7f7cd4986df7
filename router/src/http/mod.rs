//! The HTTP layer: the handlers (one per resource: parse, authorize, call a
//! service, shape the answer), the route table every route is declared in,
//! with its access decision; the middleware every request passes (rate
//! limits, request statistics, the permission check); and the OpenAPI
//! document built from the table. It calls services (`crate::services`); no
//! service imports it.

pub mod block_check;
pub mod caller;
pub mod front_door;
pub mod handlers;
pub mod openapi;
pub mod permissions;
pub mod ratelimit;
pub mod request_stats;
pub mod route_table;
