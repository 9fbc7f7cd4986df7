//! The in-process test tier: the router's own axum app over a
//! [`MemoryCluster`](crate::cluster::memory::MemoryCluster) (real state machine
//! and engines, no processes or sockets). Scenarios here cover what the router
//! itself decides: fan-out merges across shards, the multi-shard catalog steps
//! and their repair, and how engine rejections become HTTP answers.

pub(crate) mod harness;

mod api_tour;
mod catalog;
mod catalog_more;
mod compliance;
mod compliance_controls;
mod errors;
mod fan_out;
mod fan_out_more;
mod monitoring;
mod nodes;
mod openapi;
