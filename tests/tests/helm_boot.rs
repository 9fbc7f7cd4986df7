//! Scenario: the Helm chart configures the binaries it ships. The chart is
//! rendered by a real Helm engine (helm/tests/chart.py) with host names mapped
//! to loopback addresses and per-test ports as the only overrides; three node
//! processes (pods tessera-node-0..2 on 127.0.0.1..3) and a router run with
//! exactly the rendered command, environment, ConfigMap and Secret; the test
//! waits on the rendered probe paths, then writes and reads through the router.
//!
//! A second scenario starts a cluster configured only through the environment,
//! its peers given by host name (`localhost`), node ids taken from host names.

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use serde_json::{Value, json};
use tessera_tests::pods::{Pod, Rendered};
use tessera_tests::{Http, bin_dir, binary, pick_port, spawn, wait_for};

/// Children killed when the scenario ends, however it ends.
struct Processes(Vec<(String, Child, PathBuf)>);

impl Processes {
    fn tails(&self) -> String {
        let mut out = String::new();
        for (name, _, log) in &self.0 {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            out.push_str(&format!("----- {name} -----\n{}\n", lines[lines.len().saturating_sub(30)..].join("\n")));
        }
        out
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        for (_, child, _) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The Python with the chart's checkers (deploy/chart-prerequisites.sh makes it).
fn chart_python() -> Result<PathBuf> {
    let path = match std::env::var_os("TESSERA_CHART_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/tessera/chart-venv/bin/python"),
    };
    ensure!(path.is_file(), "{} not found: run deploy/chart-prerequisites.sh (deploy/test.sh does)", path.display());
    Ok(path)
}

fn render(values: &Value) -> Result<Rendered> {
    render_with(values, &[])
}

/// The chart rendered with `values` and more arguments of `chart.py render`
/// (`--existing-replicas N`: the upgrade of a release that runs N pods).
fn render_with(values: &Value, args: &[&str]) -> Result<Rendered> {
    let script = tessera_tests::manifest_dir().join("../helm/tests/chart.py");
    let out = Command::new(chart_python()?)
        .arg(&script)
        .args(["render", "--name", "tessera", "--namespace", "db"])
        .args(args)
        .arg("--set-json")
        .arg(values.to_string())
        .output()
        .context("running helm/tests/chart.py")?;
    ensure!(out.status.success(), "rendering the chart failed: {}", String::from_utf8_lossy(&out.stderr));
    Rendered::from_chart_output(&serde_json::from_slice(&out.stdout)?)
}

async fn probe_ok(url: &str) -> bool {
    reqwest::get(url).await.is_ok_and(|r| r.status().is_success())
}

/// The JSON body of a successful probe at `url`.
async fn probe_json(url: &str) -> Option<Value> {
    let r = reqwest::get(url).await.ok()?;
    if !r.status().is_success() {
        return None;
    }
    r.json().await.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rendered_chart_boots_a_cluster() -> Result<()> {
    binary("tessera-node")?;
    binary("tessera-router")?;
    let (grpc, health, http, console, pg) = (pick_port()?, pick_port()?, pick_port()?, pick_port()?, pick_port()?);
    let hosts = ["127.0.0.1", "127.0.0.2", "127.0.0.3"];
    let rendered = render(&json!({
        "node": {"peerHosts": hosts, "ports": {"grpc": grpc, "health": health}},
        "router": {"port": http, "console": {"port": console}, "pgwire": {"port": pg}},
        // Not the binaries' default (8): the groups below show the ConfigMap was read.
        "cluster": {"shardCount": 4},
        "metrics": {"serviceMonitor": {"enabled": true}},
    }))?;
    let dir = tempfile::Builder::new().prefix("tessera-helm-boot-").tempdir()?;
    let mut procs = Processes(Vec::new());
    let result = boot(&rendered, dir.path(), &hosts, Ports { http, console, pg }, &mut procs).await;
    if let Err(e) = &result {
        eprintln!("{e:#}\n{}", procs.tails());
    }
    result
}

/// Starts every pod of the rendered StatefulSet (pod N on `hosts[N]`, in
/// zone `zones[N]` when given: its `topology.kubernetes.io/zone` label) and
/// one router pod; answers the prepared node containers (with their pod IPs)
/// and the router's.
fn start_pods(
    rendered: &Rendered,
    root: &std::path::Path,
    hosts: &[&str],
    zones: &[&str],
    procs: &mut Processes,
) -> Result<(Vec<(String, tessera_tests::pods::Prepared)>, tessera_tests::pods::Prepared)> {
    let sts = rendered.object("StatefulSet", None)?;
    let sts_name = sts["metadata"]["name"].as_str().context("StatefulSet name")?;
    ensure!(sts["spec"]["podManagementPolicy"] == "Parallel", "nodes start in parallel");
    let replicas = sts["spec"]["replicas"].as_u64().context("replicas")? as usize;
    ensure!(replicas == hosts.len(), "{} pods expected, the StatefulSet has {replicas}", hosts.len());
    let mut nodes = Vec::new();
    for (ordinal, ip) in hosts.iter().enumerate() {
        let pod = Pod {
            rendered,
            template: &sts["spec"]["template"],
            name: format!("{sts_name}-{ordinal}"),
            ip: ip.to_string(),
            labels: zone_label(zones.get(ordinal).copied()),
            root: root.to_path_buf(),
        };
        let prepared = pod.prepare("node", &bin_dir()?)?;
        let (child, log) = pod.start(&prepared)?;
        procs.0.push((pod.name.clone(), child, log));
        nodes.push((ip.to_string(), prepared));
    }
    let deploy = rendered.object("Deployment", None)?;
    let router_pod = Pod {
        rendered,
        template: &deploy["spec"]["template"],
        name: format!("{}-5d9c7b-x2x4q", deploy["metadata"]["name"].as_str().context("Deployment name")?),
        ip: "127.0.0.1".into(),
        labels: Default::default(),
        root: root.to_path_buf(),
    };
    let router = router_pod.prepare("router", &bin_dir()?)?;
    let (child, log) = router_pod.start(&router)?;
    procs.0.push((router_pod.name.clone(), child, log));
    Ok((nodes, router))
}

/// The labels of a pod the platform put in `zone`.
fn zone_label(zone: Option<&str>) -> std::collections::BTreeMap<String, String> {
    zone.map(|z| ("topology.kubernetes.io/zone".to_string(), z.to_string())).into_iter().collect()
}

/// The router ports a boot test gives the chart.
struct Ports {
    http: u16,
    console: u16,
    pg: u16,
}

async fn boot(rendered: &Rendered, root: &std::path::Path, hosts: &[&str], ports: Ports, procs: &mut Processes) -> Result<()> {
    let Ports { http, console, pg } = ports;
    let (nodes, router) = start_pods(rendered, root, hosts, &[], procs)?;

    // The rendered probes: startup, then readiness, of every node and the router.
    for (ordinal, (ip, node)) in nodes.iter().enumerate() {
        let (path, port) = node.probe("startupProbe")?;
        let url = format!("http://{ip}:{port}{path}");
        wait_for(Duration::from_secs(60), &format!("node pod {ordinal} {url}"), || async { Ok(probe_json(&url).await) }).await.and_then(
            |body| {
                ensure!(body["node_id"] == json!(ordinal + 1), "pod {ordinal} is node {}: {body}", body["node_id"]);
                Ok(())
            },
        )?;
    }
    for (ip, node) in &nodes {
        let (path, port) = node.probe("readinessProbe")?;
        let url = format!("http://{ip}:{port}{path}");
        wait_for(Duration::from_secs(90), &format!("{url} ready"), || async { Ok(probe_ok(&url).await.then_some(())) }).await?;
    }
    // The router serves HTTPS by default, with a certificate of the chart's CA.
    let ca = rendered.secret_value("tessera-http-tls", "ca.crt")?;
    let https = reqwest::Client::builder().add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes())?).build()?;
    let (path, port) = router.probe("readinessProbe")?;
    ensure!(port == http, "the router's probe port {port} is its HTTP port {http}");
    ensure!(router.container["readinessProbe"]["httpGet"]["scheme"] == "HTTPS", "the router's probes speak HTTPS");
    let url = format!("https://127.0.0.1:{port}{path}");
    wait_for(Duration::from_secs(90), "router ready", || async {
        Ok(https.get(&url).send().await.is_ok_and(|r| r.status().is_success()).then_some(()))
    })
    .await?;
    let (live, _) = router.probe("livenessProbe")?;
    ensure!(https.get(format!("https://127.0.0.1:{port}{live}")).send().await?.status().is_success(), "router liveness probe");
    // The web console, over the same HTTPS, on the port the router Service names `console`.
    let service = rendered.object("Service", Some("tessera-router"))?;
    let ports = service["spec"]["ports"].as_array().context("ports")?;
    ensure!(ports.iter().any(|p| p["name"] == "console" && p["port"] == json!(console)), "{service}");
    let page = https.get(format!("https://127.0.0.1:{console}/")).send().await?.text().await?;
    ensure!(page.contains("<title>Tessera console</title>"), "the console page: {page}");

    // The ServiceMonitor's endpoints answer the token of the rendered Secret, and nobody without it.
    let secret = rendered.object("Secret", Some("tessera-secrets"))?["metadata"]["name"].as_str().context("Secret name")?.to_string();
    let monitor = rendered.object("ServiceMonitor", None)?;
    let token = rendered.secret_value(&secret, "metrics-token")?;
    for endpoint in monitor["spec"]["endpoints"].as_array().context("endpoints")? {
        ensure!(endpoint["authorization"]["credentials"]["key"] == "metrics-token", "{endpoint}");
        let url = match endpoint["port"].as_str() {
            Some("http") => format!("https://127.0.0.1:{http}{}", endpoint["path"].as_str().unwrap_or_default()),
            _ => format!("http://127.0.0.1:{}{}", nodes[0].1.probe("readinessProbe")?.1, endpoint["path"].as_str().unwrap_or_default()),
        };
        let anonymous = https.get(&url).send().await?.status();
        ensure!(anonymous == reqwest::StatusCode::UNAUTHORIZED, "{url} without the token: {anonymous}");
        let text = https.get(&url).bearer_auth(&token).send().await?.text().await?;
        ensure!(text.contains("# TYPE tessera_"), "metrics at {url}: {text}");
    }

    // The admin of the rendered Secret logs in; a write and a read go through.
    let user = rendered.secret_value(&secret, "admin-username")?;
    let password = rendered.secret_value(&secret, "admin-password")?;
    let api = Http::with_root_ca(format!("https://127.0.0.1:{http}"), ca.as_bytes())?.login_as(&user, &password).await?;
    for i in 0..20 {
        api.kv_put(&format!("helm/{i}"), json!({"n": i}), None).await?.ensure_status(200)?;
    }
    let read = api.kv_get("helm/7").await?.ensure_status(200)?;
    ensure!(read.json["value"] == json!({"n": 7}), "read back {}", read.json);
    api.post("/api/v1/query", &json!({"sql": "CREATE TABLE t (id INT PRIMARY KEY, name TEXT)"})).await?.ensure_status(200)?;
    api.post("/api/v1/query", &json!({"sql": "INSERT INTO t VALUES (1, 'chart')"})).await?.ensure_status(200)?;
    let rows = api.post("/api/v1/query", &json!({"sql": "SELECT name FROM t"})).await?.ensure_status(200)?;
    ensure!(rows.json.to_string().contains("chart"), "{}", rows.json);
    // PostgreSQL clients, over TLS verified against the chart's CA, on the Service's port `postgresql`.
    ensure!(ports.iter().any(|p| p["name"] == "postgresql" && p["port"] == json!(pg)), "{service}");
    let ca_path = root.join("http-ca.pem");
    std::fs::write(&ca_path, &ca)?;
    let psql = std::process::Command::new("psql")
        .arg(format!("host=127.0.0.1 port={pg} user={user} sslmode=verify-full sslrootcert={}", ca_path.display()))
        .args(["--no-psqlrc", "-At", "-c", "SELECT name FROM t"])
        .env("PGPASSWORD", &password)
        .env("PGCONNECT_TIMEOUT", "20")
        .output()?;
    ensure!(psql.status.success() && String::from_utf8_lossy(&psql.stdout).trim() == "chart", "psql through the chart: {psql:?}");
    // The preStop hook of a node that leads groups hands them to the others.
    let leading = nodes_view_leaders(&api).await?;
    let (ordinal, _) = leading.iter().enumerate().find(|(_, led)| **led > 0).context("some node leads a group")?;
    let (status, output) = nodes[ordinal].1.run_hook("preStop", &bin_dir()?, root)?;
    ensure!(status.success() && output.contains("still leading []"), "preStop of pod {ordinal}: {output}");
    ensure!(nodes_view_leaders(&api).await?[ordinal] == 0, "pod {ordinal} leads nothing after its preStop");
    api.kv_put("helm/after-prestop", json!(true), None).await?.ensure_status(200)?;
    // Every node hosts groups of the one cluster the chart described.
    let nodes_view = api.get("/api/v1/admin/nodes").await?.ensure_status(200)?;
    let listed = nodes_view.json["nodes"].as_array().cloned().unwrap_or_default();
    ensure!(listed.len() == 3, "three nodes listed: {}", nodes_view.json);
    for node in &listed {
        let hosted = node["groups_hosted"].as_array().map(Vec::len);
        ensure!(hosted == Some(5), "the meta group and the ConfigMap's 4 data groups on every node: {node}");
    }
    Ok(())
}

/// How many groups each node (in id order) leads.
async fn nodes_view_leaders(api: &Http) -> Result<Vec<u64>> {
    let view = api.get("/api/v1/admin/nodes").await?.ensure_status(200)?.json;
    let mut nodes = view["nodes"].as_array().cloned().unwrap_or_default();
    nodes.sort_by_key(|n| n["id"].as_u64());
    Ok(nodes.iter().map(|n| n["groups_led"].as_array().map_or(0, |g| g.len() as u64)).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_configured_by_environment_alone_dials_peers_by_host_name() -> Result<()> {
    let (node_bin, router_bin) = (binary("tessera-node")?, binary("tessera-router")?);
    let dir = tempfile::Builder::new().prefix("tessera-env-only-").tempdir()?;
    let ports: Vec<(u16, u16)> = (0..3).map(|_| Ok((pick_port()?, pick_port()?))).collect::<Result<_>>()?;
    let peers = ports.iter().enumerate().map(|(i, (p, _))| format!("{}=localhost:{p}", i + 1)).collect::<Vec<_>>().join(",");
    let http = pick_port()?;
    let mut procs = Processes(Vec::new());
    for (i, (grpc, health)) in ports.iter().enumerate() {
        let name = format!("db-node-{i}");
        let env: Vec<(String, String)> = [
            ("HOSTNAME", name.clone()),
            ("SERVICE_NODE_ID_FROM_HOSTNAME", "true".into()),
            ("SERVICE_PEERS", peers.clone()),
            ("SERVICE_GRPC_ADDR", format!("127.0.0.1:{grpc}")),
            ("SERVICE_HEALTH_ADDR", format!("127.0.0.1:{health}")),
            ("SERVICE_METRICS_TOKEN", "env-only-scrape".into()),
            ("SERVICE_DATA_DIR", dir.path().join(&name).display().to_string()),
            ("SERVICE_SHARD_COUNT", "3".into()),
            // Plaintext asked for by name (the chart's own configuration is secure).
            ("SERVICE_CLUSTER_INSECURE", "true".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let log = dir.path().join(format!("{name}.log"));
        procs.0.push((name.clone(), spawn(&node_bin, &env, &log, dir.path(), &name)?, log));
    }
    let env: Vec<(String, String)> = [
        ("SERVICE_HOST", "127.0.0.1".to_string()),
        ("SERVICE_PORT", http.to_string()),
        ("SERVICE_NODES", peers.clone()),
        ("SERVICE_ADMIN_USERNAME", "admin".into()),
        ("SERVICE_ADMIN_PASSWORD", "Env-Only-Passw0rd!".into()),
        ("SERVICE_LOG_FORMAT", "json".into()),
        ("SERVICE_CLUSTER_INSECURE", "true".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let log = dir.path().join("router.log");
    procs.0.push(("router".into(), spawn(&router_bin, &env, &log, dir.path(), "router")?, log));
    let result = async {
        for (i, (_, health)) in ports.iter().enumerate() {
            let url = format!("http://127.0.0.1:{health}/readyz");
            let body = wait_for(Duration::from_secs(90), &format!("node {} ready", i + 1), || async { Ok(probe_json(&url).await) }).await?;
            ensure!(body["node_id"] == json!(i + 1), "db-node-{i} is node {}", body["node_id"]);
        }
        let ready = format!("http://127.0.0.1:{http}/readyz");
        wait_for(Duration::from_secs(90), "router ready", || async { Ok(probe_ok(&ready).await.then_some(())) }).await?;
        let api = Http::new(format!("http://127.0.0.1:{http}")).login_as("admin", "Env-Only-Passw0rd!").await?;
        api.kv_put("env/only", json!("by host name"), None).await?.ensure_status(200)?;
        let read = api.kv_get("env/only").await?.ensure_status(200)?;
        ensure!(read.json["value"] == json!("by host name"), "{}", read.json);
        let nodes = api.get("/api/v1/admin/nodes").await?.ensure_status(200)?;
        ensure!(nodes.json.to_string().contains("localhost:"), "peers listed by host name: {}", nodes.json);
        // The router was asked for JSON logs: every line is one JSON event.
        let text = std::fs::read_to_string(dir.path().join("router.log"))?;
        let events: Vec<&str> = text.lines().filter(|l| !l.starts_with("=====")).collect();
        ensure!(!events.is_empty(), "the router logged nothing");
        for line in &events {
            let event: Value = serde_json::from_str(line).with_context(|| format!("not a JSON log line: {line}"))?;
            ensure!(event["level"].is_string() && event["timestamp"].is_string(), "{line}");
        }
        // Each node's Prometheus figures on its health port.
        let url = format!("http://127.0.0.1:{}/metrics", ports[0].1);
        let refused = reqwest::get(&url).await?.status();
        ensure!(refused == reqwest::StatusCode::UNAUTHORIZED, "node metrics without the token: {refused}");
        let metrics = reqwest::Client::new().get(&url).bearer_auth("env-only-scrape").send().await?.text().await?;
        for name in [
            "tessera_raft_applied_index{group=\"0\"}",
            "tessera_wal_syncs_total",
            "tessera_wal_sync_seconds_count",
            "tessera_raft_log_durable_seconds_count",
            "tessera_rocksdb_sst_bytes",
            "tessera_process_resident_memory_bytes",
        ] {
            ensure!(metrics.contains(name), "node metrics lack {name}: {metrics}");
        }
        Ok(())
    }
    .await;
    if let Err(e) = &result {
        eprintln!("{e:#}\n{}", procs.tails());
    }
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_the_statefulset_up_and_down_goes_through_the_admin_api_jobs() -> Result<()> {
    binary("tessera-node")?;
    binary("tessera-router")?;
    let (grpc, health, http, console, pg) = (pick_port()?, pick_port()?, pick_port()?, pick_port()?, pick_port()?);
    let hosts = ["127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"];
    // A release installed with three nodes, upgraded to four. The routers
    // serve HTTPS (the chart's certificate names 127.0.0.1); the Jobs call
    // them there, verifying it against the chart's CA.
    let values = |replicas: usize| {
        json!({
            "node": {"peerHosts": hosts[..replicas].to_vec(), "ports": {"grpc": grpc, "health": health}, "replicas": replicas, "initialReplicas": 3},
            "router": {"port": http, "console": {"port": console}, "pgwire": {"port": pg}},
            "cluster": {"shardCount": 4},
            "registration": {"url": format!("https://127.0.0.1:{http}"), "timeoutSeconds": 120},
        })
    };
    let rendered = render(&values(4))?;
    // The upgrade back to three, rendered against a release that runs four
    // pods (lookup finds the StatefulSet): the scale-down hook.
    let shrunk = render_with(&values(3), &["--existing-replicas", "4"])?;
    // The install's revision (three nodes), whose hooks a rollback to it runs.
    let installed = render(&values(3))?;
    let dir = tempfile::Builder::new().prefix("tessera-helm-scale-").tempdir()?;
    let mut procs = Processes(Vec::new());
    let result = scale(&rendered, &shrunk, &installed, dir.path(), &hosts, http, &mut procs).await;
    if let Err(e) = &result {
        eprintln!("{e:#}\n{}", procs.tails());
    }
    result
}

/// Runs the container of the rendered Job `name` (its template from
/// `job_from`, its Secrets from `rendered`: the running release's) to
/// completion; answers its output, or fails with it.
async fn run_job(rendered: &Rendered, job_from: &Rendered, name: &str, root: &std::path::Path, hook: &str, wait: u64) -> Result<String> {
    let job = job_from.object("Job", Some(name))?;
    ensure!(job["metadata"]["annotations"]["helm.sh/hook"].as_str().is_some_and(|h| h.split(',').any(|e| e == hook)), "{job}");
    let container = job["spec"]["template"]["spec"]["containers"][0]["name"].as_str().context("container name")?;
    // A pod name (and so a log) of its own for every run.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let pod = Pod {
        rendered,
        template: &job["spec"]["template"],
        name: format!("{name}-x7k2p{run}"),
        ip: "127.0.0.1".into(),
        labels: Default::default(),
        root: root.to_path_buf(),
    };
    let prepared = pod.prepare(container, &bin_dir()?)?;
    ensure!(
        prepared.env.iter().any(|(k, v)| k == "TESSERA_CA_FILE" && std::path::Path::new(v).is_file()),
        "the Job verifies the router with the chart's CA"
    );
    let (mut child, log) = pod.start(&prepared)?;
    let status = wait_for(Duration::from_secs(wait), &format!("the Job {name} to finish"), async || Ok(child.try_wait()?)).await?;
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    eprintln!("----- the Job {name} -----\n{output}");
    ensure!(status.success(), "the Job {name} failed: {output}");
    Ok(output)
}

/// The nodes the cluster lists, by id.
async fn listed_nodes(api: &Http) -> Result<Vec<Value>> {
    let mut nodes = api.get("/api/v1/admin/nodes").await?.ensure_status(200)?.json["nodes"].as_array().cloned().unwrap_or_default();
    nodes.sort_by_key(|n| n["id"].as_u64());
    Ok(nodes)
}

/// Waits until node `id` is active holding `share` data replicas.
async fn wait_active_with_share(api: &Http, id: u64, share: usize) -> Result<()> {
    wait_for(Duration::from_secs(120), &format!("node {id} active with {share} data replicas"), || async {
        let nodes = listed_nodes(api).await?;
        let node = nodes.iter().find(|n| n["id"] == id).cloned().unwrap_or_default();
        let data = node["groups_hosted"].as_array().map_or(0, |g| g.iter().filter(|g| g.as_u64() != Some(0)).count());
        Ok((nodes.len() == 4 && nodes.iter().all(|n| n["state"] == "active") && data == share).then_some(()))
    })
    .await
}

async fn scale(
    rendered: &Rendered,
    shrunk: &Rendered,
    installed: &Rendered,
    root: &std::path::Path,
    hosts: &[&str],
    http: u16,
    procs: &mut Processes,
) -> Result<()> {
    let zones = ["a", "b", "c", "a"];
    let (nodes, _router) = start_pods(rendered, root, hosts, &zones, procs)?;
    for (ip, node) in &nodes {
        let (path, port) = node.probe("readinessProbe")?;
        let url = format!("http://{ip}:{port}{path}");
        wait_for(Duration::from_secs(90), &format!("{url} ready"), || async { Ok(probe_ok(&url).await.then_some(())) }).await?;
    }
    let ca = rendered.secret_value("tessera-http-tls", "ca.crt")?;
    let https = reqwest::Client::builder().add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes())?).build()?;
    let ready = format!("https://127.0.0.1:{http}/readyz");
    wait_for(Duration::from_secs(90), "router ready", || async {
        Ok(https.get(&ready).send().await.is_ok_and(|r| r.status().is_success()).then_some(()))
    })
    .await?;
    let secret = rendered.object("Secret", Some("tessera-secrets"))?["metadata"]["name"].as_str().context("Secret name")?.to_string();
    let api = Http::with_root_ca(format!("https://127.0.0.1:{http}"), ca.as_bytes())?
        .login_as(&rendered.secret_value(&secret, "admin-username")?, &rendered.secret_value(&secret, "admin-password")?)
        .await?;
    for i in 0..20 {
        api.kv_put(&format!("scale/{i}"), json!(i), None).await?.ensure_status(200)?;
    }
    let before = listed_nodes(&api).await?;
    ensure!(before.len() == 3, "pod 3 waits to be added: {before:?}");

    // The post-upgrade hook: it returns once node 4 is recorded joining; the
    // cluster then moves node 4's share to it by itself.
    let output = run_job(rendered, rendered, "tessera-register-nodes", root, "post-upgrade", 150).await?;
    ensure!(output.contains("node 4 added") && output.contains("does not wait for the data to move"), "{output}");
    // Node 4 shares zone a with node 1: it takes half of zone a's replicas
    // (one of each of the 4 data groups), 2, and no group gets two replicas in one zone.
    wait_active_with_share(&api, 4, 2).await?;
    // Each node reports the zone of its pod's topology label (SERVICE_LOCALITY=zone=$(TESSERA_ZONE)).
    for node in listed_nodes(&api).await? {
        let id = node["id"].as_u64().context("id")? as usize;
        ensure!(node["locality"] == format!("zone={}", zones[id - 1]), "node {id} in zone {}: {node}", zones[id - 1]);
    }
    let cluster = api.get("/api/v1/admin/cluster").await?.ensure_status(200)?.json;
    let crowded: Vec<&Value> = cluster["groups"].as_array().context("groups")?.iter().filter(|g| g["shares_a_zone"] != false).collect();
    ensure!(crowded.is_empty(), "groups with two replicas in one zone: {crowded:?}");
    for i in 0..20 {
        let r = api.kv_get(&format!("scale/{i}")).await?.ensure_status(200)?;
        ensure!(r.json["value"] == json!(i), "{r}");
    }
    // Run again (the next upgrade), the Job leaves the member as it is.
    let output = run_job(rendered, rendered, "tessera-register-nodes", root, "post-upgrade", 60).await?;
    ensure!(output.contains("node 4 is a member already (active)"), "{output}");

    // Back to three: the pre-upgrade hook drains and removes node 4 before its pod would go.
    ensure!(shrunk.object("StatefulSet", None)?["spec"]["replicas"] == 3, "the upgrade shrinks the StatefulSet");
    let output = run_job(rendered, shrunk, "tessera-scale-down", root, "pre-upgrade", 300).await?;
    ensure!(output.contains("node 4 drained") && output.contains("node 4 removed"), "{output}");
    let after = listed_nodes(&api).await?;
    ensure!(after.len() == 3 && after.iter().all(|n| n["state"] == "active" && n["id"] != 4), "node 4 left: {after:?}");
    for i in 0..20 {
        let r = api.kv_get(&format!("scale/{i}")).await?.ensure_status(200)?;
        ensure!(r.json["value"] == json!(i), "{r}");
    }
    // Run again (a retried upgrade): node 4 is no member, nothing to do.
    let output = run_job(rendered, shrunk, "tessera-scale-down", root, "pre-upgrade", 60).await?;
    ensure!(output.contains("no member above node 3"), "{output}");
    // Told it was removed, node 4's process stopped (the StatefulSet would now delete its pod).
    let pod3 = procs.0.iter_mut().find(|(name, _, _)| name == "tessera-node-3").context("pod 3")?;
    let stopped = wait_for(Duration::from_secs(30), "node 4's process to stop", async || Ok(pod3.1.try_wait()?)).await?;
    ensure!(stopped.success(), "node 4 stopped with {stopped}");

    // Scaled up again, pod 3 starts on its kept volume: SERVICE_REJOIN_WHEN_REMOVED
    // discards the removed node's data and it waits to be added; the
    // registration Job of that upgrade adds it like any new node.
    let sts = rendered.object("StatefulSet", None)?;
    let pod = Pod {
        rendered,
        template: &sts["spec"]["template"],
        name: "tessera-node-3".into(),
        ip: hosts[3].to_string(),
        labels: zone_label(Some(zones[3])),
        root: root.to_path_buf(),
    };
    let (child, log) = pod.start(&nodes[3].1)?;
    procs.0.push((pod.name.clone(), child, log.clone()));
    let output = run_job(rendered, rendered, "tessera-register-nodes", root, "post-upgrade", 150).await?;
    ensure!(output.contains("node 4 added"), "{output}");
    wait_active_with_share(&api, 4, 2).await?;
    let text = std::fs::read_to_string(&log)?;
    ensure!(text.contains("discards its old data"), "pod 3 rejoined on its old volume: {text}");
    for i in 0..20 {
        let r = api.kv_get(&format!("scale/{i}")).await?.ensure_status(200)?;
        ensure!(r.json["value"] == json!(i), "{r}");
    }

    // `helm rollback` to the three-node install runs the hooks stored with that
    // revision: its pre-rollback guard removes node 4 before its pod would go.
    let output = run_job(rendered, installed, "tessera-scale-down", root, "pre-rollback", 300).await?;
    ensure!(output.contains("node 4 drained") && output.contains("node 4 removed"), "{output}");
    let after = listed_nodes(&api).await?;
    ensure!(after.len() == 3 && after.iter().all(|n| n["state"] == "active" && n["id"] != 4), "node 4 left: {after:?}");
    for i in 0..20 {
        let r = api.kv_get(&format!("scale/{i}")).await?.ensure_status(200)?;
        ensure!(r.json["value"] == json!(i), "{r}");
    }
    Ok(())
}
