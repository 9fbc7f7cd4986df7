//! Scenario (issue 35, defect 4): a control-plane call of a deposed meta
//! leader is refused. The placement driver's calls to other nodes carry the
//! meta term of the leadership that planned them; once the meta group has
//! moved to a later term, a `DropGroup` sent with the earlier one (a deposed
//! driver resuming a stale move) must not delete a replica the group counts on.
//! Before the fence, a stale `DropGroup` deleted a replica outside the meta log.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use tessera_api::rpc::DropGroupRequest;
use tessera_api::rpc::data_service_client::DataServiceClient;
use tessera_tests::{Cluster, ClusterOptions, json, wait_for};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposed_meta_leaders_drop_group_is_refused() {
    let mut cluster = Cluster::start(ClusterOptions { shard_count: 2, ..ClusterOptions::default() }).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("deposed_meta_leader failed: {e:?}\n{}", cluster.log_tails(30));
    }
}

/// The meta group's term and leader, as the router reports them.
async fn meta_term(c: &Cluster) -> Result<(u64, u64)> {
    let info = c.cluster_info().await?;
    let g = info["groups"].as_array().context("groups")?.iter().find(|g| g["id"] == json!(0)).context("meta group")?.clone();
    Ok((g["term"].as_u64().context("term")?, g["leader"].as_u64().context("leader")?))
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let (term, leader) = meta_term(c).await?;
    // The meta leader goes away and comes back: the meta group moves to a later term.
    c.stop_node(leader).await?;
    c.start_node(leader)?;
    c.wait_ready().await?;
    let later = wait_for(Duration::from_secs(60), "a later meta term", async || {
        let (now, _) = meta_term(c).await?;
        Ok((now > term).then_some(now))
    })
    .await?;
    // Every replica has heard of it: a meta write (a login's session) committed
    // under the new leadership and applied everywhere.
    c.login().await?;
    let api = c.http.clone();
    api.kv_put("before", json!(1), None).await?.ensure_status(200)?;
    converged(&api).await?;

    // A peer node's certificate (DropGroup is a node-to-node call).
    let target = if leader == 1 { 2 } else { 1 };
    let peer = if target == 1 { 3 } else { 1 };
    let certs = c.root().join("certs");
    let read = |name: &str| std::fs::read_to_string(certs.join(name)).with_context(|| format!("reading {name}"));
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(read("ca.pem")?))
        .identity(Identity::from_pem(read(&format!("node-{peer}.pem"))?, read(&format!("node-{peer}.key"))?))
        .domain_name("127.0.0.1");
    let channel = Endpoint::from_shared(format!("https://{}", c.node_addr(target)?))?.tls_config(tls)?.connect().await?;
    let mut client = DataServiceClient::new(channel);
    let mut req = tonic::Request::new(DropGroupRequest { group_id: 1, meta_term: term });
    req.set_timeout(Duration::from_secs(15));
    let refused = client.drop_group(req).await;
    let status = match refused {
        Ok(reply) => anyhow::bail!("a DropGroup of the deposed term {term} (meta term now {later}) on node {target} was taken: {reply:?}"),
        Err(status) => status,
    };
    ensure!(status.message().contains("deposed"), "refused for another reason: {status:?}");
    eprintln!("[deposed_meta_leader] DropGroup of term {term} refused at term {later}: {}", status.message());

    // Node `target` still holds its replica of group 1, caught up with the others.
    api.kv_put("after", json!(1), None).await?.ensure_status(200)?;
    converged(&api).await
}

/// Waits until every replica of every group (three of group 1) is at one applied index.
async fn converged(api: &tessera_tests::Http) -> Result<()> {
    wait_for(Duration::from_secs(60), "every replica of every group converged", async || {
        let report = api.get("/api/v1/admin/consistency").await?.ensure_status(200)?.json;
        ensure!(report["consistent"] == true, "{report:#}");
        let group = report["groups"].as_array().context("groups")?.iter().find(|g| g["group_id"] == json!(1)).context("group 1")?.clone();
        let holders = group["replicas"].as_array().context("replicas")?.len();
        ensure!(holders == 3, "group 1 has {holders} replicas: {group:#}");
        Ok((report["converged"] == true).then_some(()))
    })
    .await
}
