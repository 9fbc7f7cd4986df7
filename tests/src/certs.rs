//! The cluster certificates the harness gives its processes: a CA and one
//! certificate per node and for the routers, made on demand (with
//! `tessera_api::certs`, as `tessera-node certs` makes them) under the
//! cluster's directory. Clusters run secure, as they do by default; a scenario
//! asks for plaintext by name (`ClusterOptions::insecure`).

use std::path::Path;

use anyhow::Result;
use tessera_api::certs::{Role, cert_files, init_dir};

/// The variable that asks for plaintext gRPC.
pub const INSECURE: (&str, &str) = ("SERVICE_CLUSTER_INSECURE", "true");

fn path(p: std::path::PathBuf) -> String {
    p.display().to_string()
}

/// The env giving node `id` its certificate, key and the cluster CA.
pub fn node_env(root: &Path, id: u64) -> Result<Vec<(String, String)>> {
    let dir = root.join("certs");
    let name = format!("node-{id}");
    init_dir(&dir, &[(Role::Node, name.clone())], &["127.0.0.1".into(), "localhost".into()])?;
    let (cert, key) = cert_files(&dir, &name);
    Ok(vec![
        ("SERVICE_CLUSTER_CA".into(), path(dir.join("ca.pem"))),
        ("SERVICE_NODE_CERT".into(), path(cert)),
        ("SERVICE_NODE_KEY".into(), path(key)),
    ])
}

/// The env giving a router its client certificate, key and the cluster CA.
pub fn router_env(root: &Path) -> Result<Vec<(String, String)>> {
    let dir = root.join("certs");
    init_dir(&dir, &[(Role::Router, "router".into())], &["127.0.0.1".into(), "localhost".into()])?;
    let (cert, key) = cert_files(&dir, "router");
    Ok(vec![
        ("SERVICE_CLUSTER_CA".into(), path(dir.join("ca.pem"))),
        ("SERVICE_CLUSTER_CLIENT_CERT".into(), path(cert)),
        ("SERVICE_CLUSTER_CLIENT_KEY".into(), path(key)),
    ])
}
