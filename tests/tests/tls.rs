//! Scenario: a TLS cluster with a CA made inside the test (rcgen).
//!
//! Nodes talk to each other and to the router over mutual TLS against the
//! cluster CA; the router serves HTTPS only. A KV round trip works over HTTPS
//! with a client trusting the CA; plaintext HTTP to the router port gets no HTTP
//! answer; TLS 1.2 works and no session is ever resumed; a node refuses gRPC
//! from a plaintext client, from a TLS client without a certificate and from one
//! whose certificate another CA issued, while the router's certificate passes.
//! Everything stops gracefully and comes back over TLS.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use tessera_api::rpc::StatusRequest;
use tessera_api::rpc::data_service_client::DataServiceClient;
use tessera_tests::{Cluster, ClusterOptions, Http, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// A CA able to issue leaf certificates.
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl Ca {
    fn new(name: &str) -> Result<Ca> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        params.distinguished_name = dn;
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(Ca { pem: cert.pem(), issuer: Issuer::new(params, key) })
    }

    /// A leaf for `names` with the given extended key usages: (cert PEM, key PEM).
    fn issue(&self, cn: &str, names: &[&str], usages: Vec<ExtendedKeyUsagePurpose>) -> Result<(String, String)> {
        self.issue_until(cn, names, usages, None)
    }

    /// [`Ca::issue`], valid until `days` days from today when given.
    fn issue_until(&self, cn: &str, names: &[&str], usages: Vec<ExtendedKeyUsagePurpose>, days: Option<i64>) -> Result<(String, String)> {
        let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())?;
        // The role the holder plays, as the cluster CA states it (see tessera_api::certs).
        let role = match cn {
            "tessera-node" => Some(tessera_api::certs::ROLE_NODE),
            "tessera-router" | "intruder" => Some(tessera_api::certs::ROLE_ROUTER),
            _ => None,
        };
        if let Some(role) = role {
            params.subject_alt_names.push(rcgen::SanType::URI(role.try_into()?));
        }
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, cn);
        params.distinguished_name = dn;
        params.extended_key_usages = usages;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        if let Some(days) = days {
            let (y, m, d) = civil_date(unix_days_now() + days);
            params.not_after = rcgen::date_time_ymd(y, m, d);
        }
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

fn unix_days_now() -> i64 {
    (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs() / 86_400) as i64
}

/// The (year, month, day) of a count of days since 1970-01-01 (H. Hinnant's civil_from_days).
fn civil_date(days: i64) -> (i32, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = (yoe + era * 400 + i64::from(month <= 2)) as i32;
    (year, month, day)
}

fn write(dir: &Path, name: &str, contents: &str) -> Result<String> {
    let path: PathBuf = dir.join(name);
    std::fs::write(&path, contents)?;
    Ok(path.display().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_cluster() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs = tempfile::tempdir().expect("cert dir");
    let (opts, material) = tls_options(certs.path()).expect("certificates");
    let mut cluster = Cluster::start(opts).await.expect("TLS cluster start");
    if let Err(e) = scenario(&mut cluster, &material).await {
        panic!("tls scenario failed: {e:?}\n{}", cluster.log_tails(30));
    }
}

/// PEMs the scenario's own clients use.
struct Material {
    ca: String,
    router_client: (String, String),
    rogue_client: (String, String),
}

fn tls_options(dir: &Path) -> Result<(ClusterOptions, Material)> {
    use ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};
    let ca = Ca::new("tessera test cluster CA")?;
    // The nodes' certificate runs out in 20 days: the alerts say so.
    let node = ca.issue_until("tessera-node", &["127.0.0.1", "localhost"], vec![ServerAuth, ClientAuth], Some(20))?;
    let router_client = ca.issue("tessera-router", &["tessera-router"], vec![ClientAuth])?;
    let https = ca.issue("tessera-router-https", &["127.0.0.1", "localhost"], vec![ServerAuth])?;
    let rogue_ca = Ca::new("some other CA")?;
    let rogue_client = rogue_ca.issue("intruder", &["tessera-router"], vec![ClientAuth])?;

    let ca_path = write(dir, "ca.pem", &ca.pem)?;
    let node_env = vec![
        ("SERVICE_CLUSTER_CA".to_string(), ca_path.clone()),
        ("SERVICE_NODE_CERT".to_string(), write(dir, "node.pem", &node.0)?),
        ("SERVICE_NODE_KEY".to_string(), write(dir, "node.key", &node.1)?),
    ];
    let router_env = vec![
        ("SERVICE_TLS_CERT".to_string(), write(dir, "https.pem", &https.0)?),
        ("SERVICE_TLS_KEY".to_string(), write(dir, "https.key", &https.1)?),
        ("SERVICE_CLUSTER_CA".to_string(), ca_path),
        ("SERVICE_CLUSTER_CLIENT_CERT".to_string(), write(dir, "router.pem", &router_client.0)?),
        ("SERVICE_CLUSTER_CLIENT_KEY".to_string(), write(dir, "router.key", &router_client.1)?),
    ];
    let opts =
        ClusterOptions { node_env, router_env, https_ca: Some(ca.pem.clone().into_bytes()), shard_count: 4, ..ClusterOptions::default() };
    Ok((opts, Material { ca: ca.pem, router_client, rogue_client }))
}

async fn scenario(c: &mut Cluster, m: &Material) -> Result<()> {
    let api = c.http.clone();
    ensure!(api.base().starts_with("https://"), "router URL is not https: {}", api.base());

    // A KV round trip over HTTPS: router → node and node → node traffic is all mTLS.
    let value = json!({"secret": "over-tls", "n": 42});
    api.kv_put("tls/key-1", value.clone(), None).await?.ensure_status(200)?;
    let got = api.kv_get("tls/key-1").await?.ensure_status(200)?;
    ensure!(got.json["value"] == value, "read back {got}");
    for i in 0..20 {
        api.kv_put(&format!("tls/many-{i}"), json!(i), None).await?.ensure_status(200)?;
    }
    ensure!(api.consistency("all").kv_count("tls/").await? == 21, "count over all shards");
    let alerts = api.get("/api/v1/admin/alerts").await?.ensure_status(200)?.json;
    let expiring: Vec<&serde_json::Value> =
        alerts["alerts"].as_array().into_iter().flatten().filter(|a| a["type"] == "certificate_expiry").collect();
    ensure!(
        expiring.len() == 3
            && expiring.iter().all(|a| a["severity"] == "warning"
                && a["message"].as_str().is_some_and(|m| m.contains("expires in 19 days") || m.contains("expires in 20 days"))),
        "one certificate_expiry warning per node: {alerts}"
    );

    // Plaintext HTTP on the router port: refused, no HTTP answer.
    let port = api.base().rsplit(':').next().context("router port")?.to_string();
    let plain = Http::new(format!("http://127.0.0.1:{port}")).timeout(Duration::from_secs(5));
    if let Ok(r) = plain.get("/health").await {
        bail!("plaintext HTTP request to the HTTPS router got an answer: {r}");
    }
    let mut tcp = tokio::net::TcpStream::connect(format!("127.0.0.1:{port}")).await?;
    tcp.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await?;
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut reply)).await;
    ensure!(!reply.starts_with(b"HTTP/"), "plaintext got an HTTP reply: {:?}", String::from_utf8_lossy(&reply));

    https_protocol_checks(&port, &m.ca).await?;
    grpc_checks(&c.node_addr(1)?, m).await?;

    // TLS listeners shut down gracefully, and the cluster comes back over TLS.
    c.stop_all().await?;
    c.start_all().await?;
    let got = c.http.kv_get("tls/key-1").await?.ensure_status(200)?;
    ensure!(got.json["value"] == value, "after restart: {got}");
    Ok(())
}

/// TLS 1.2 works next to 1.3, and a client that caches sessions is never resumed.
async fn https_protocol_checks(port: &str, ca_pem: &str) -> Result<()> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert?)?;
    }
    let roots = Arc::new(roots);
    for (label, versions) in [("TLS 1.2", vec![&rustls::version::TLS12]), ("TLS 1.3", vec![&rustls::version::TLS13])] {
        let config = Arc::new(
            rustls::ClientConfig::builder_with_protocol_versions(&versions).with_root_certificates(roots.clone()).with_no_client_auth(),
        );
        let connector = tokio_rustls::TlsConnector::from(config);
        for attempt in 0..2 {
            let tcp = tokio::net::TcpStream::connect(format!("127.0.0.1:{port}")).await?;
            let name = rustls::pki_types::ServerName::try_from("127.0.0.1")?;
            let mut tls = connector.connect(name, tcp).await.with_context(|| format!("{label} handshake"))?;
            tls.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").await?;
            let mut reply = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut reply)).await;
            ensure!(reply.starts_with(b"HTTP/1.1 200"), "{label}: {:?}", String::from_utf8_lossy(&reply));
            let kind = tls.get_ref().1.handshake_kind();
            ensure!(
                kind == Some(rustls::HandshakeKind::Full),
                "{label} connection {attempt}: expected a full handshake (no resumption), got {kind:?}"
            );
        }
    }
    Ok(())
}

/// A node refuses every gRPC client but one holding a certificate from the cluster CA.
async fn grpc_checks(node: &str, m: &Material) -> Result<()> {
    async fn status(endpoint: Result<Endpoint, tonic::transport::Error>) -> Result<u64> {
        let endpoint = endpoint?.connect_timeout(Duration::from_secs(3)).timeout(Duration::from_secs(5));
        let channel = endpoint.connect().await?;
        let reply = DataServiceClient::new(channel).status(StatusRequest { from_node: 0, ..Default::default() }).await?;
        Ok(reply.into_inner().node_id)
    }
    let https = || Endpoint::from_shared(format!("https://{node}"));
    let ca = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&m.ca));
    let with = |(cert, key): &(String, String)| ca.clone().identity(Identity::from_pem(cert, key));

    let plaintext = status(Endpoint::from_shared(format!("http://{node}"))).await;
    ensure!(plaintext.is_err(), "a plaintext gRPC client was served: {plaintext:?}");
    let no_cert = status(https().and_then(|e| e.tls_config(ca.clone()))).await;
    ensure!(no_cert.is_err(), "a TLS client without a certificate was served: {no_cert:?}");
    let rogue = status(https().and_then(|e| e.tls_config(with(&m.rogue_client)))).await;
    ensure!(rogue.is_err(), "a client certificate from another CA was accepted: {rogue:?}");
    // Control: the same client with the router's certificate is served.
    let ok = status(https().and_then(|e| e.tls_config(with(&m.router_client)))).await;
    ensure!(ok.as_ref().is_ok_and(|id| *id == 1), "the router's certificate was refused: {ok:?}");
    Ok(())
}
