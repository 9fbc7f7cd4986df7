//! Process plumbing shared by `tessera-node` and `tessera-router`: the layered
//! configuration loader, node lists in configuration, and the shutdown signal.

use std::path::Path;

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::NodeId;

/// Nodes named in configuration (a node's peers, a router's seeds): a TOML
/// list `["1=host:port", …]` or one comma-separated string; each entry
/// `id=host:port` or, where an id is optional, `host:port`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NodeList {
    List(Vec<String>),
    Csv(String),
}

impl Default for NodeList {
    fn default() -> Self {
        NodeList::List(Vec::new())
    }
}

impl NodeList {
    /// Every entry as (id if given, address), trimmed, empty entries skipped;
    /// `Err(entry)` for an entry whose id is not a number.
    pub fn entries(&self) -> Result<Vec<(Option<NodeId>, String)>, String> {
        let items: Vec<&str> = match self {
            NodeList::List(v) => v.iter().map(|s| s.trim()).collect(),
            NodeList::Csv(s) => s.split(',').map(str::trim).collect(),
        };
        items
            .into_iter()
            .filter(|item| !item.is_empty())
            .map(|item| match item.split_once('=') {
                Some((id, addr)) => id.trim().parse().map(|id| (Some(id), addr.trim().to_string())).map_err(|_| item.to_string()),
                None => Ok((None, item.to_string())),
            })
            .collect()
    }

    /// Every entry as (id, address); `Err(entry)` for one without a numeric id.
    pub fn with_ids(&self) -> Result<Vec<(NodeId, String)>, String> {
        self.entries()?.into_iter().map(|(id, addr)| id.map(|id| (id, addr.clone())).ok_or(addr)).collect()
    }
}

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
        refuse_unknown_file_keys(path)?;
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

/// Every configuration key `tessera-node` reads (dotted paths, one per line),
/// kept equal to the code by the node's `every_key_is_listed` test.
pub const NODE_KEYS: &str = include_str!("config_keys/node.txt");
/// Every configuration key `tessera-router` reads, kept equal to the code by
/// the router's `every_key_is_listed` test.
pub const ROUTER_KEYS: &str = include_str!("config_keys/router.txt");

/// The dotted paths of the leaves of a configuration serialized to JSON (a
/// table's keys, recursively; anything else is a leaf).
pub fn key_paths(config: &serde_json::Value) -> std::collections::BTreeSet<String> {
    fn walk(prefix: &str, value: &serde_json::Value, out: &mut std::collections::BTreeSet<String>) {
        match value {
            serde_json::Value::Object(map) if !map.is_empty() => {
                for (k, v) in map {
                    let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                    walk(&path, v, out);
                }
            }
            _ => {
                out.insert(prefix.to_string());
            }
        }
    }
    let mut out = std::collections::BTreeSet::new();
    walk("", config, &mut out);
    out
}

/// The keys of the TOML text `file` that neither binary reads. One file may
/// serve both binaries, so a key of the other binary is not unknown.
pub fn unknown_keys(file: &str) -> Result<Vec<String>, String> {
    let table: toml::Table = file.parse().map_err(|e: toml::de::Error| e.to_string())?;
    let json = serde_json::to_value(&table).map_err(|e| e.to_string())?;
    let known: std::collections::HashSet<&str> = NODE_KEYS.lines().chain(ROUTER_KEYS.lines()).map(str::trim).collect();
    Ok(key_paths(&json)
        .into_iter()
        .filter(|path| {
            // A key is known, or lies under a known key (a value given as a table).
            let mut prefix = path.as_str();
            loop {
                if known.contains(prefix) {
                    return false;
                }
                match prefix.rsplit_once('.') {
                    Some((head, _)) => prefix = head,
                    None => return true,
                }
            }
        })
        .collect())
}

/// Stops the start on a configuration file with a key no binary reads (a
/// misspelt key would otherwise be dropped silently).
fn refuse_unknown_file_keys(path: &Path) -> Result<(), Box<figment::Error>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        // figment reports the missing or unreadable file.
        Err(_) => return Ok(()),
    };
    match unknown_keys(&text) {
        Ok(unknown) if !unknown.is_empty() => Err(Box::new(figment::Error::from(format!(
            "{}: unknown configuration key{} {} (neither tessera-node nor tessera-router reads {}; see docs/configuration.md)",
            path.display(),
            if unknown.len() == 1 { "" } else { "s" },
            unknown.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", "),
            if unknown.len() == 1 { "it" } else { "them" },
        )))),
        // Syntax errors are figment's to report, with their position.
        _ => Ok(()),
    }
}

/// For each binary's `every_key_is_listed` test: the difference between the
/// keys of `config` and the checked-in list `listed`, as a message; with
/// `TESSERA_BLESS=1` the list at `list_path` is rewritten instead.
/// `aliases` are the further names serde accepts (`#[serde(alias)]`), which
/// serializing cannot show.
pub fn compare_key_list(config: &serde_json::Value, aliases: &[&str], listed: &str, list_path: &Path) -> Result<(), String> {
    let mut actual = key_paths(config);
    actual.extend(aliases.iter().map(|a| a.to_string()));
    let listed: std::collections::BTreeSet<String> = listed.lines().map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect();
    if actual == listed {
        return Ok(());
    }
    if std::env::var_os("TESSERA_BLESS").is_some() {
        let text: String = actual.iter().map(|k| format!("{k}\n")).collect();
        std::fs::write(list_path, text).map_err(|e| e.to_string())?;
        return Ok(());
    }
    let missing: Vec<&String> = actual.difference(&listed).collect();
    let stale: Vec<&String> = listed.difference(&actual).collect();
    Err(format!(
        "{} does not match the configuration: not listed {missing:?}, listed but gone {stale:?} (rerun with TESSERA_BLESS=1 to rewrite it)",
        list_path.display()
    ))
}

/// The `SERVICE_*` variables of `aliases` (a binary's flat names) that no
/// Markdown file of `docs_dir` mentions: each binary's test keeps
/// `docs/configuration.md` and the topic documents in step with the code.
pub fn undocumented_env_vars(aliases: &[(&str, &str)], docs_dir: &Path) -> std::io::Result<Vec<String>> {
    let mut docs = String::new();
    for entry in std::fs::read_dir(docs_dir)?.flatten() {
        if entry.path().extension().is_some_and(|x| x == "md") {
            docs.push_str(&std::fs::read_to_string(entry.path())?);
        }
    }
    Ok(aliases
        .iter()
        .map(|(flat, _)| format!("SERVICE_{}", flat.to_ascii_uppercase()))
        .filter(|var| !docs.contains(var.as_str()))
        .collect())
}

/// `config` as an admin may see it: the value of every key that names a
/// secret (a password, secret, passphrase, token or key) replaced by
/// `"<redacted>"` when set.
pub fn redacted(mut config: serde_json::Value) -> serde_json::Value {
    fn secret(name: &str) -> bool {
        let n = name.to_ascii_lowercase();
        ["password", "secret", "passphrase", "token", "credential"].iter().any(|s| n.contains(s)) || n == "key" || n.ends_with("_key")
    }
    fn walk(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                for (name, value) in map.iter_mut() {
                    if secret(name) && !value.is_null() && !value.is_object() {
                        *value = serde_json::Value::String("<redacted>".into());
                    } else {
                        walk(value);
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut config);
    config
}

/// The process's Tokio runtime: `worker_threads` threads drive tasks
/// (`server.worker_threads`; 0: one per core, Tokio's default), each thread
/// (blocking ones too) with a stack of `thread_stack_bytes` (reserved address
/// space: only the pages a thread touches are backed by memory).
pub fn build_runtime(worker_threads: usize, thread_stack_bytes: usize) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if worker_threads > 0 {
        builder.worker_threads(worker_threads);
    }
    builder.thread_stack_size(thread_stack_bytes).enable_all().build()
}

/// The process's Prometheus recorder, installed as the `metrics` facade's
/// global recorder on first use; `render()` gives the text exposition format.
/// Durations (`*_seconds`) are histograms with buckets from 0.1 ms to 60 s.
pub fn prometheus() -> &'static metrics_exporter_prometheus::PrometheusHandle {
    static HANDLE: std::sync::OnceLock<metrics_exporter_prometheus::PrometheusHandle> = std::sync::OnceLock::new();
    HANDLE.get_or_init(|| {
        const BUCKETS: &[f64] =
            &[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new()
            .set_buckets_for_metric(metrics_exporter_prometheus::Matcher::Suffix("_seconds".into()), BUCKETS)
            .expect("non-empty buckets")
            .build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("a metrics recorder was installed already: /metrics shows only what this one records");
        }
        handle
    })
}

/// How a binary writes its log to stderr (`log_format`, `SERVICE_LOG_FORMAT`):
/// human-readable lines, or one JSON object per event (timestamp, level,
/// target, fields) for log collectors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Resolves on SIGTERM or Ctrl-C (logging which), for graceful shutdown.
pub async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupt received"),
    }
}

#[cfg(test)]
mod tests {
    use super::NodeList;

    #[test]
    fn node_lists_read_ids_where_given() {
        let csv = NodeList::Csv(" 1=a:1, b:2 ,,3= c:3 ".into());
        assert_eq!(csv.entries(), Ok(vec![(Some(1), "a:1".into()), (None, "b:2".into()), (Some(3), "c:3".into())]));
        assert_eq!(csv.with_ids(), Err("b:2".into()), "an entry without an id where one is needed");
        let list = NodeList::List(vec!["2=x:9".into()]);
        assert_eq!(list.with_ids(), Ok(vec![(2, "x:9".into())]));
        assert_eq!(NodeList::Csv("x=a:1".into()).entries(), Err("x=a:1".into()));
    }
}

#[cfg(test)]
mod runtime_tests {
    #[test]
    fn a_file_key_no_binary_reads_is_unknown() {
        let file = "log_level = \"info\"\n[server]\nprot = 1\nport = 8080\ngrpc_addr = \"0.0.0.0:9190\"\n[sharding]\nstrategy = \"hash\"\n[nonsense]\nx = 1\n";
        // `server.port` is the router's, `server.grpc_addr` the node's: one file serves both.
        assert_eq!(super::unknown_keys(file).unwrap(), vec!["nonsense.x".to_string(), "server.prot".to_string()]);
    }

    #[test]
    fn an_unknown_key_stops_the_load_with_its_name() {
        let dir = tempfile_dir();
        let path = dir.join("c.toml");
        std::fs::write(&path, "[storage]\ndata_dri = \"/x\"\n").unwrap();
        let err = super::load_config(&serde_json::json!({}), Some(&path), &[]).unwrap_err();
        assert!(err.to_string().contains("`storage.data_dri`"), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("tessera-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn secrets_are_redacted_and_the_rest_is_kept() {
        let config = serde_json::json!({
            "storage": {"encryption_key": "abc", "data_dir": "/d", "encryption_at_rest": true},
            "auth": {"admin_password": "p", "session_timeout": 3600},
            "backup": {"key": "k", "dir": "/b", "encryption_key": null},
            "compliance": {"breach_webhook_secret": "s"},
        });
        let shown = super::redacted(config);
        assert_eq!(shown["storage"]["encryption_key"], "<redacted>");
        assert_eq!(shown["auth"]["admin_password"], "<redacted>");
        assert_eq!(shown["backup"]["key"], "<redacted>");
        assert_eq!(shown["compliance"]["breach_webhook_secret"], "<redacted>");
        assert!(shown["backup"]["encryption_key"].is_null(), "unset stays null");
        assert_eq!((shown["storage"]["data_dir"].as_str(), shown["auth"]["session_timeout"].as_u64()), (Some("/d"), Some(3600)));
    }

    #[test]
    fn the_configured_worker_threads_drive_the_runtime() {
        assert_eq!(super::build_runtime(3, 8 << 20).unwrap().metrics().num_workers(), 3);
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        assert_eq!(super::build_runtime(0, 8 << 20).unwrap().metrics().num_workers(), cores, "0: one per core");
    }
}
