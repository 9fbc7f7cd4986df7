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
    let script = tessera_tests::manifest_dir().join("../helm/tests/chart.py");
    let out = Command::new(chart_python()?)
        .arg(&script)
        .args(["render", "--name", "tessera", "--namespace", "db", "--set-json"])
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
    let (grpc, health, http) = (pick_port()?, pick_port()?, pick_port()?);
    let hosts = ["127.0.0.1", "127.0.0.2", "127.0.0.3"];
    let rendered = render(&json!({
        "node": {"peerHosts": hosts, "ports": {"grpc": grpc, "health": health}},
        "router": {"port": http},
        // Not the binaries' default (8): the groups below show the ConfigMap was read.
        "cluster": {"shardCount": 4},
        "metrics": {"serviceMonitor": {"enabled": true}},
    }))?;
    let dir = tempfile::Builder::new().prefix("tessera-helm-boot-").tempdir()?;
    let mut procs = Processes(Vec::new());
    let result = boot(&rendered, dir.path(), &hosts, http, &mut procs).await;
    if let Err(e) = &result {
        eprintln!("{e:#}\n{}", procs.tails());
    }
    result
}

/// Starts every pod of the rendered StatefulSet (pod N on `hosts[N]`) and one
/// router pod; answers the prepared node containers (with their pod IPs) and the router's.
fn start_pods(
    rendered: &Rendered,
    root: &std::path::Path,
    hosts: &[&str],
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
        root: root.to_path_buf(),
    };
    let router = router_pod.prepare("router", &bin_dir()?)?;
    let (child, log) = router_pod.start(&router)?;
    procs.0.push((router_pod.name.clone(), child, log));
    Ok((nodes, router))
}

async fn boot(rendered: &Rendered, root: &std::path::Path, hosts: &[&str], http: u16, procs: &mut Processes) -> Result<()> {
    let (nodes, router) = start_pods(rendered, root, hosts, procs)?;

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
async fn scaling_the_statefulset_adds_nodes_through_the_registration_job() -> Result<()> {
    binary("tessera-node")?;
    binary("tessera-router")?;
    let (grpc, health, http) = (pick_port()?, pick_port()?, pick_port()?);
    let hosts = ["127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"];
    // A release installed with three nodes, upgraded to four.
    let rendered = render(&json!({
        "node": {"peerHosts": hosts, "ports": {"grpc": grpc, "health": health}, "replicas": 4, "initialReplicas": 3},
        "router": {"port": http},
        "cluster": {"shardCount": 4},
        "registration": {"url": format!("http://127.0.0.1:{http}"), "timeoutSeconds": 120},
        // Plain HTTP on the router: this scenario is about the registration Job.
        "tls": {"http": {"enabled": false}},
    }))?;
    let dir = tempfile::Builder::new().prefix("tessera-helm-scale-").tempdir()?;
    let mut procs = Processes(Vec::new());
    let result = scale(&rendered, dir.path(), &hosts, http, &mut procs).await;
    if let Err(e) = &result {
        eprintln!("{e:#}\n{}", procs.tails());
    }
    result
}

async fn scale(rendered: &Rendered, root: &std::path::Path, hosts: &[&str], http: u16, procs: &mut Processes) -> Result<()> {
    let (nodes, _router) = start_pods(rendered, root, hosts, procs)?;
    for (ip, node) in &nodes {
        let (path, port) = node.probe("readinessProbe")?;
        let url = format!("http://{ip}:{port}{path}");
        wait_for(Duration::from_secs(90), &format!("{url} ready"), || async { Ok(probe_ok(&url).await.then_some(())) }).await?;
    }
    let ready = format!("http://127.0.0.1:{http}/readyz");
    wait_for(Duration::from_secs(90), "router ready", || async { Ok(probe_ok(&ready).await.then_some(())) }).await?;
    let secret = rendered.object("Secret", Some("tessera-secrets"))?["metadata"]["name"].as_str().context("Secret name")?.to_string();
    let api = Http::new(format!("http://127.0.0.1:{http}"))
        .login_as(&rendered.secret_value(&secret, "admin-username")?, &rendered.secret_value(&secret, "admin-password")?)
        .await?;
    for i in 0..20 {
        api.kv_put(&format!("scale/{i}"), json!(i), None).await?.ensure_status(200)?;
    }
    let before = api.get("/api/v1/admin/nodes").await?.ensure_status(200)?.json;
    ensure!(before["nodes"].as_array().map(Vec::len) == Some(3), "pod 3 waits to be added: {before}");

    // The post-upgrade hook: the rendered Job's container, run to completion.
    let job = rendered.object("Job", None)?;
    ensure!(job["metadata"]["annotations"]["helm.sh/hook"].as_str().is_some_and(|h| h.contains("post-upgrade")), "{job}");
    let pod = Pod {
        rendered,
        template: &job["spec"]["template"],
        name: "register-nodes-x7k2p".into(),
        ip: "127.0.0.1".into(),
        root: root.to_path_buf(),
    };
    let register = pod.prepare("register", &bin_dir()?)?;
    let (mut child, log) = pod.start(&register)?;
    let status = wait_for(Duration::from_secs(150), "the registration Job to finish", async || Ok(child.try_wait()?)).await?;
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    ensure!(status.success(), "the registration Job failed: {output}");
    ensure!(output.contains("node 4 added"), "{output}");

    let after = api.get("/api/v1/admin/nodes").await?.ensure_status(200)?.json;
    let listed = after["nodes"].as_array().cloned().unwrap_or_default();
    ensure!(listed.len() == 4 && listed.iter().all(|n| n["state"] == "active"), "{after}");
    let new = listed.iter().find(|n| n["id"] == 4).cloned().unwrap_or_default();
    let data = new["groups_hosted"].as_array().map_or(0, |g| g.iter().filter(|g| g.as_u64() != Some(0)).count());
    ensure!(data == 3, "node 4 holds its share (3 of 12 data replicas): {new}");
    for i in 0..20 {
        let r = api.kv_get(&format!("scale/{i}")).await?.ensure_status(200)?;
        ensure!(r.json["value"] == json!(i), "{r}");
    }
    // Run again (the next upgrade), the Job leaves the member as it is.
    let (mut child, log) = pod.start(&register)?;
    let status = wait_for(Duration::from_secs(60), "the second registration run", async || Ok(child.try_wait()?)).await?;
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    ensure!(status.success() && output.contains("member already"), "{output}");
    Ok(())
}
