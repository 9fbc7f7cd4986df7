//! Scenario: a cluster started exactly as `deploy/cluster.sh up` starts it has
//! no unauthenticated door to its data. Every RPC of `proto/tessera.proto` is
//! called on every node: in plaintext, with a certificate of another CA, with a
//! certificate of the cluster's own CA that names no role, and (the RPCs only
//! nodes may call) with the router's certificate. Every call is refused, and
//! nothing changed: the data groups' digests are the same before and after,
//! and the cluster still serves.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use tessera_api::certs::{ClusterCa, Role};
use tessera_api::rpc::{StatusReply, StatusRequest};
use tessera_tests::{Http, Value, bin_dir, json, manifest_dir, pick_port};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// `deploy/cluster.sh` run with this test's data directory and ports.
struct Deployed {
    data: tempfile::TempDir,
    node_base: u16,
    router_port: u16,
    console_port: u16,
}

impl Deployed {
    fn run(&self, args: &[&str]) -> Result<String> {
        let out = Command::new("bash")
            .arg(manifest_dir().join("../deploy/cluster.sh"))
            .args(args)
            .env("TESSERA_DATA", self.data.path().join("cluster"))
            .env("TESSERA_BACKUPS", self.data.path().join("backups"))
            .env("TESSERA_BIN_DIR", bin_dir()?)
            .env("TESSERA_NODE_PORT_BASE", self.node_base.to_string())
            .env("TESSERA_ROUTER_PORT", self.router_port.to_string())
            .env("TESSERA_CONSOLE_PORT", self.console_port.to_string())
            .env_remove("TESSERA_INSECURE")
            .env_remove("TESSERA_CERTS")
            .output()?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        ensure!(out.status.success(), "cluster.sh {args:?} failed: {text}");
        Ok(text)
    }

    fn certs(&self) -> PathBuf {
        self.data.path().join("cluster/certs")
    }
}

impl Drop for Deployed {
    fn drop(&mut self) {
        let _ = self.run(&["down"]);
    }
}

/// Three consecutive free ports above a free base (the nodes' ports).
fn node_port_base() -> Result<u16> {
    for _ in 0..50 {
        let base = pick_port()?;
        if base < 60_000 && (1..=3).all(|i| std::net::TcpListener::bind(("127.0.0.1", base + i)).is_ok()) {
            return Ok(base);
        }
    }
    bail!("no three consecutive free ports")
}

/// Every RPC path the proto file declares.
fn every_rpc() -> Vec<String> {
    let proto = include_str!("../../proto/tessera.proto");
    let mut service = String::new();
    let mut paths = Vec::new();
    for line in proto.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("service ") {
            service = rest.split_whitespace().next().unwrap_or_default().to_string();
        } else if let Some(rest) = line.strip_prefix("rpc ") {
            paths.push(format!("/tessera.v1.{service}/{}", rest.split('(').next().unwrap_or_default().trim()));
        }
    }
    paths
}

/// How a call is made.
#[derive(Clone)]
enum Caller {
    Plaintext,
    Tls { ca_pem: String, cert_pem: String, key_pem: String },
}

/// Calls `path` on `addr` with an empty message; answers the status code, or
/// the transport error when no call got through.
async fn call(addr: &str, caller: &Caller, path: &str) -> Result<tonic::Code, String> {
    let endpoint = match caller {
        Caller::Plaintext => Endpoint::from_shared(format!("http://{addr}")).map_err(|e| e.to_string())?,
        Caller::Tls { ca_pem, cert_pem, key_pem } => Endpoint::from_shared(format!("https://{addr}"))
            .map_err(|e| e.to_string())?
            .tls_config(
                ClientTlsConfig::new()
                    .ca_certificate(Certificate::from_pem(ca_pem))
                    .identity(Identity::from_pem(cert_pem, key_pem))
                    .domain_name("127.0.0.1"),
            )
            .map_err(|e| e.to_string())?,
    };
    let channel = endpoint.connect_timeout(Duration::from_secs(5)).connect().await.map_err(|e| format!("connect: {e:?}"))?;
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.map_err(|e| format!("not ready: {e}"))?;
    let path = http::uri::PathAndQuery::try_from(path).map_err(|e| e.to_string())?;
    let codec = tonic_prost::ProstCodec::<StatusRequest, StatusReply>::default();
    let mut request = tonic::Request::new(StatusRequest::default());
    request.set_timeout(Duration::from_secs(10));
    match grpc.unary(request, path, codec).await {
        Ok(_) => Ok(tonic::Code::Ok),
        Err(status) => Ok(status.code()),
    }
}

/// The data groups' (applied index, digest) as the consistency check reports them.
async fn data_digests(api: &Http) -> Result<Vec<(u64, Value, Value)>> {
    let report = api.get("/api/v1/admin/consistency").await?.ensure_status(200)?.json;
    ensure!(report["consistent"] == true, "{report:#}");
    let mut out = Vec::new();
    for g in report["groups"].as_array().context("groups")? {
        let id = g["group_id"].as_u64().context("group_id")?;
        if id == 0 {
            continue; // the meta group records the router's own sessions and audit
        }
        let digests: Vec<(Value, Value)> =
            g["replicas"].as_array().context("replicas")?.iter().map(|r| (r["applied_index"].clone(), r["digest"].clone())).collect();
        out.push((id, json!(digests), g["converged"].clone()));
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secure_by_default() -> Result<()> {
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    let deployed =
        Deployed { data: tempfile::tempdir()?, node_base: node_port_base()?, router_port: pick_port()?, console_port: pick_port()? };
    let up = deployed.run(&["up"]).context("cluster.sh up")?;
    let result = scenario(&deployed, &up).await;
    if result.is_err() {
        for log in ["node-1", "node-2", "node-3", "router"] {
            let path = deployed.data.path().join(format!("cluster/logs/{log}.log"));
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(20).collect();
            eprintln!("----- {log} -----\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
        }
    }
    result
}

async fn scenario(deployed: &Deployed, up: &str) -> Result<()> {
    let field = |name: &str| -> Result<String> {
        let line = up.lines().find(|l| l.trim_start().starts_with(name)).with_context(|| format!("no {name} in: {up}"))?;
        Ok(line.split_once(':').context("field")?.1.trim().to_string())
    };
    let (user, password) = (field("admin username")?, field("admin password")?);
    let api = Http::new(format!("http://127.0.0.1:{}", deployed.router_port)).login_as(&user, &password).await?;
    // The web console is on, at the address `up` printed.
    let console = format!("http://127.0.0.1:{}", deployed.console_port);
    ensure!(field("web console")?.starts_with(&console), "{up}");
    let page = reqwest::get(format!("{console}/")).await?.text().await?;
    ensure!(page.contains("<title>Tessera console</title>"), "{page}");
    let cluster = api.get("/api/v1/admin/cluster").await?.ensure_status(200)?.json;
    ensure!(cluster["transport"] == json!({"insecure": false, "mutual_tls": true}), "{}", cluster["transport"]);
    for i in 0..20 {
        api.kv_put(&format!("secure/{i}"), json!(i), None).await?.ensure_status(200)?;
    }
    // Every replica has applied the writes (a follower one entry behind would
    // look like a change made by the refused calls).
    let before = tessera_tests::wait_for(Duration::from_secs(30), "every replica converged", async || {
        let digests = data_digests(&api).await?;
        Ok(digests.iter().all(|(_, _, converged)| *converged == json!(true)).then_some(digests))
    })
    .await?;

    // The callers: the router's own certificate, one of the cluster CA naming
    // no role, one of another CA naming the node role, and plaintext.
    let dir = deployed.certs();
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).with_context(|| format!("{}", dir.join(name).display()));
    let ca_pem = read("ca.pem")?;
    let router = Caller::Tls { ca_pem: ca_pem.clone(), cert_pem: read("router-1.pem")?, key_pem: read("router-1.key")? };
    let cluster_ca = ClusterCa::from_pem(&ca_pem, &read("ca.key")?)?;
    let roleless = no_role_certificate(&dir)?;
    let no_role = Caller::Tls { ca_pem: ca_pem.clone(), cert_pem: roleless.0, key_pem: roleless.1 };
    let rogue_ca = ClusterCa::create("rogue CA")?;
    let (cert_pem, key_pem) = rogue_ca.issue(Role::Node, "node-9", &["127.0.0.1".into()])?;
    let rogue = Caller::Tls { ca_pem: ca_pem.clone(), cert_pem, key_pem };
    // A node certificate of the cluster CA gets through (the control).
    let (cert_pem, key_pem) = cluster_ca.issue(Role::Node, "node-control", &["127.0.0.1".into()])?;
    let node = Caller::Tls { ca_pem, cert_pem, key_pem };

    let rpcs = every_rpc();
    ensure!(rpcs.len() == 30, "{rpcs:?}");
    let node_only = [
        "RaftService/Vote",
        "RaftService/AppendEntries",
        "RaftService/AppendStream",
        "RaftService/InstallSnapshot",
        "DataService/Applied",
        "DataService/AddLearner",
        "DataService/ReplaceVoters",
        "DataService/HostGroup",
        "DataService/DropGroup",
    ];
    let mut refused = 0;
    for n in 1..=3u16 {
        let addr = format!("127.0.0.1:{}", deployed.node_base + n);
        let status = call(&addr, &node, "/tessera.v1.DataService/Status").await;
        ensure!(status == Ok(tonic::Code::Ok), "node {n}: a node certificate of the cluster CA is refused Status: {status:?}");
        for rpc in &rpcs {
            for (what, caller) in [("plaintext", &Caller::Plaintext), ("another CA", &rogue), ("no role", &no_role)] {
                match call(&addr, caller, rpc).await {
                    Ok(tonic::Code::PermissionDenied) if what == "no role" => refused += 1,
                    // No TLS session: the call fails in transport (no connection, or
                    // one closed under it: UNAVAILABLE, CANCELLED, UNKNOWN).
                    Err(_) if what != "no role" => refused += 1,
                    Ok(code) if what != "no role" && code != tonic::Code::Ok && code != tonic::Code::PermissionDenied => refused += 1,
                    other => bail!("node {n}: {rpc} with {what}: {other:?} (expected a refusal)"),
                }
            }
            if node_only.iter().any(|p| rpc.ends_with(p)) {
                let answer = call(&addr, &router, rpc).await;
                ensure!(answer == Ok(tonic::Code::PermissionDenied), "node {n}: {rpc} with the router's certificate: {answer:?}");
                refused += 1;
            }
        }
    }
    ensure!(refused == 3 * (30 * 3 + 9), "{refused} refusals");

    // Nothing changed, and the cluster serves on.
    let after = data_digests(&api).await?;
    ensure!(before == after, "a data group changed:\nbefore {before:?}\nafter {after:?}");
    api.kv_put("secure/after", json!(true), None).await?.ensure_status(200)?;
    ensure!(api.kv_get("secure/7").await?.ensure_status(200)?.json["value"] == json!(7));
    Ok(())
}

/// A certificate of the cluster's CA (read from `dir`) that names no role.
fn no_role_certificate(dir: &Path) -> Result<(String, String)> {
    use rcgen::{CertificateParams, DnType, Issuer, KeyPair};
    let issuer = Issuer::from_ca_cert_pem(
        &std::fs::read_to_string(dir.join("ca.pem"))?,
        KeyPair::from_pem(&std::fs::read_to_string(dir.join("ca.key"))?)?,
    )?;
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()])?;
    params.distinguished_name.push(DnType::CommonName, "someone");
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth, rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}
