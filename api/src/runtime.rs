//! Process plumbing shared by `tessera-node` and `tessera-router`: the layered
//! configuration loader and the shutdown signal.

use std::path::Path;

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Loads a configuration: `defaults`, then the TOML `file` (if any), then the
/// `SERVICE_*` environment. Nested keys use a double underscore
/// (`SERVICE_AUTH__SESSION_TIMEOUT`); `aliases` maps flat names (matched
/// case-insensitively, without the prefix) to nested keys
/// (`("node_id", "cluster.node_id")` for `SERVICE_NODE_ID`).
pub fn load_config<T: Serialize + DeserializeOwned>(
    defaults: &T,
    file: Option<&Path>,
    aliases: &'static [(&'static str, &'static str)],
) -> Result<T, Box<figment::Error>> {
    let mut fig = Figment::from(Serialized::defaults(defaults));
    if let Some(path) = file {
        fig = fig.merge(Toml::file_exact(path));
    }
    fig = fig.merge(Env::prefixed("SERVICE_").map(move |key| {
        let key = key.as_str();
        match aliases.iter().find(|(flat, _)| flat.eq_ignore_ascii_case(key)) {
            Some((_, nested)) => (*nested).into(),
            None => key.replace("__", ".").into(),
        }
    }));
    Ok(fig.extract()?)
}

/// Resolves on SIGTERM or Ctrl-C (logging which), for graceful shutdown.
pub async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupt received"),
    }
}
