//! Scenario: the graph store end to end through the router on a three-node
//! cluster — nodes and edges (ids assigned or given), breadth-first traversal to
//! depths 1..3 with each node's depth, label listings, pattern queries (variable
//! length, WHERE, parameters, aggregates), batches, deletes (a node takes its
//! edges along), bad input as 4xx JSON, consistency levels, the death of the
//! graph group's leader, and a full cluster restart.

use std::collections::BTreeMap;

use anyhow::{Context, Result, ensure};
use tessera_tests::{Cluster, ClusterOptions, HDR_GROUP, Http, Resp, Value, json};

const NODES: &str = "/api/v1/graph/nodes";
const EDGES: &str = "/api/v1/graph/edges";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graph() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("graph scenario failed: {e:?}\n{}", cluster.log_tails(30));
    }
}

async fn node(api: &Http, id: &str, label: &str, props: Value) -> Result<Resp> {
    api.post(NODES, &json!({"id": id, "label": label, "properties": props})).await?.ensure_status(201)
}

async fn edge(api: &Http, from: &str, to: &str, label: &str, props: Value) -> Result<String> {
    let r = api.post(EDGES, &json!({"from_node": from, "to_node": to, "label": label, "properties": props})).await?.ensure_status(201)?;
    ensure!(r.json["from_node"] == from && r.json["to_node"] == to && r.json["label"] == label, "edge reply {r}");
    Ok(r.json["id"].as_str().context("edge id")?.to_string())
}

/// `GET /graph/data` → node id → depth (null outside traversals), and the edge ids.
async fn data(api: &Http, query: &str) -> Result<(BTreeMap<String, Value>, Vec<String>)> {
    let r = api.get(&format!("/api/v1/graph/data?{query}")).await?.ensure_status(200)?;
    let nodes = r.json["nodes"].as_array().with_context(|| format!("nodes in {r}"))?;
    let edges = r.json["edges"].as_array().with_context(|| format!("edges in {r}"))?;
    ensure!(r.json["node_count"] == json!(nodes.len()) && r.json["edge_count"] == json!(edges.len()), "counts {r}");
    let nodes = nodes.iter().map(|n| (n["id"].as_str().unwrap_or_default().to_string(), n["depth"].clone())).collect();
    let mut edges: Vec<String> = edges.iter().map(|e| e["id"].as_str().unwrap_or_default().to_string()).collect();
    edges.sort();
    Ok((nodes, edges))
}

fn depths(pairs: &[(&str, u64)]) -> BTreeMap<String, Value> {
    pairs.iter().map(|(id, d)| (id.to_string(), json!(d))).collect()
}

async fn cypher(api: &Http, query: &str, params: Value) -> Result<Resp> {
    api.post("/api/v1/graph/query", &json!({"query": query, "params": params})).await
}

/// The rows of a successful pattern query.
async fn rows(api: &Http, query: &str, params: Value) -> Result<Vec<Value>> {
    let r = cypher(api, query, params).await?.ensure_status(200).with_context(|| query.to_string())?;
    ensure!(r.json["row_count"] == json!(r.json["rows"].as_array().map_or(0, Vec::len)), "row_count {r}");
    Ok(r.json["rows"].as_array().context("rows")?.clone())
}

/// Everything the scenario expects of the `default` graph at any later point.
async fn verify(api: &Http, edges: &BTreeMap<&str, String>) -> Result<()> {
    let (nodes, got) = data(api, "start_node=alice&depth=3").await?;
    ensure!(nodes == depths(&[("alice", 0), ("erin", 1), ("oslo", 1), ("zoe", 1)]), "traversal after deletes: {nodes:?}");
    let mut want: Vec<String> = ["alice-erin", "alice-oslo", "alice-zoe"].iter().map(|k| edges[k].clone()).collect();
    want.sort();
    ensure!(got == want, "traversal edges after deletes: {got:?} vs {want:?}");
    let r = rows(api, "MATCH (a:Person)-[:KNOWS*1..3]->(b:Person) WHERE a.name = 'Alice' RETURN b.name ORDER BY b.name", json!({})).await?;
    ensure!(r == vec![json!(["Erin"]), json!(["Zoe"])], "pattern after deletes: {r:?}");
    let r = rows(api, "MATCH (p:Person) RETURN count(*)", json!({})).await?;
    ensure!(r == vec![json!([5])], "people after deletes: {r:?}");
    api.get(&format!("{NODES}/bob")).await?.ensure_status(404)?;
    Ok(())
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    let group_hint = nodes_are_created_with_given_or_assigned_ids(&api).await?;
    let mut e = edges_are_created_and_read(&api).await?;
    bad_input_is_a_4xx_json_error(&api, &e).await?;
    traversals_report_each_nodes_depth(&api).await?;
    label_listings_hold_the_nodes_and_the_edges_among_them(&api, &e).await?;
    pattern_queries_match_paths(&api).await?;
    malformed_and_runaway_queries_are_refused(&api).await?;
    batches_are_all_or_nothing(&api).await?;
    deletes_take_a_nodes_edges_along(&api, &mut e).await?;
    let edges_ref: BTreeMap<&str, String> = e.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    verify(&api, &edges_ref).await.context("after deletes")?;
    let (leader, group) = writes_acknowledged_by_all_are_on_every_replica(&api, &group_hint).await?;
    the_graph_survives_its_leaders_death(c, &api, &edges_ref, leader, &group).await?;
    the_graph_survives_a_full_restart(c, &edges_ref).await
}

/// Nodes: ids given or assigned; properties default to {}. Returns the group
/// that served the assigned-id node.
async fn nodes_are_created_with_given_or_assigned_ids(api: &Http) -> Result<Option<String>> {
    let people = [
        ("alice", "Alice", 30, "Oslo"),
        ("bob", "Bob", 25, "Oslo"),
        ("carol", "Carol", 35, "Paris"),
        ("dave", "Dave", 40, "Rome"),
        ("erin", "Erin", 28, "Oslo"),
    ];
    for (id, name, age, city) in people {
        let r = node(api, id, "Person", json!({"name": name, "age": age, "city": city})).await?;
        ensure!(r.json["id"] == id && r.json["label"] == "Person" && r.json["properties"]["age"] == age, "node reply {r}");
        ensure!(r.json["created_at"].is_string() && r.json["graph"] == "default", "node reply {r}");
    }
    node(api, "oslo", "City", json!({"name": "Oslo"})).await?;
    node(api, "paris", "City", json!({"name": "Paris"})).await?;
    let r = api.post(NODES, &json!({"label": "Person"})).await?.ensure_status(201)?;
    let zoe_like = r.json["id"].as_str().context("assigned id")?.to_string();
    ensure!(zoe_like.len() >= 16 && r.json["properties"] == json!({}), "assigned node {r}");
    let group_hint = r.group();
    let got = api.get(&format!("{NODES}/{zoe_like}")).await?.ensure_status(200)?;
    ensure!(got.json["label"] == "Person", "get node {got}");
    ensure!(api.delete(&format!("{NODES}/{zoe_like}")).await?.ensure_status(200)?.json["edges_removed"] == json!(0), "delete lone node");
    node(api, "zoe", "Person", json!({"name": "Zoe", "age": 22, "city": "Rome"})).await?;
    Ok(group_hint)
}

/// Edges are created and read back; returns their ids by `from-to`.
async fn edges_are_created_and_read(api: &Http) -> Result<BTreeMap<String, String>> {
    let mut e = BTreeMap::new();
    for (from, to, label, props) in [
        ("alice", "bob", "KNOWS", json!({"since": 2010})),
        ("bob", "carol", "KNOWS", json!({"since": 2015})),
        ("carol", "dave", "KNOWS", json!({"since": 2020})),
        ("alice", "erin", "KNOWS", json!({"since": 2018})),
        ("alice", "oslo", "LIVES_IN", json!({})),
        ("bob", "oslo", "LIVES_IN", json!({})),
        ("carol", "paris", "LIVES_IN", json!({})),
    ] {
        e.insert(format!("{from}-{to}"), edge(api, from, to, label, props).await?);
    }
    let r = api.get(&format!("{EDGES}/{}", e["alice-bob"])).await?.ensure_status(200)?;
    ensure!(r.json["properties"]["since"] == 2010 && r.json["from_node"] == "alice", "get edge {r}");
    Ok(e)
}

/// Bad input: 4xx with a JSON error body, nothing half-applied.
async fn bad_input_is_a_4xx_json_error(api: &Http, e: &BTreeMap<String, String>) -> Result<()> {
    for (body, status) in [
        (json!({"from_node": "alice", "to_node": "ghost", "label": "KNOWS"}), 404),
        (json!({"from_node": "ghost", "to_node": "alice", "label": "KNOWS"}), 404),
        (json!({"from_node": "alice", "to_node": "bob"}), 400),
        (json!({"from_node": "alice", "to_node": "bob", "label": "KNOWS", "properties": [1]}), 400),
        (json!({"from_node": "alice", "to_node": "bob", "label": ""}), 400),
        (json!({"from_node": "alice", "to_node": "bob", "label": "K", "graph": "bad name"}), 400),
        (json!({"from_node": "alice", "to_node": "bob", "label": "K", "id": e["alice-bob"]}), 409),
    ] {
        let r = api.post(EDGES, &body).await?.ensure_client_error()?;
        ensure!(r.status == status, "edge {body}: expected {status}, got {r}");
    }
    for (body, status) in [
        (json!({"properties": {}}), 400),
        (json!({"label": "P", "id": "a/b"}), 400),
        (json!({"label": "P", "properties": "x"}), 400),
        (json!({"label": "Person", "id": "alice"}), 409),
    ] {
        let r = api.post(NODES, &body).await?.ensure_client_error()?;
        ensure!(r.status == status, "node {body}: expected {status}, got {r}");
    }
    api.post_raw(NODES, b"[1]".to_vec(), Some("application/json")).await?.ensure_client_error()?;
    api.get(&format!("{NODES}/ghost")).await?.ensure_status(404)?.ensure_error_body()?;
    api.delete(&format!("{NODES}/ghost")).await?.ensure_status(404)?.ensure_error_body()?;
    api.delete(&format!("{EDGES}/ghost")).await?.ensure_status(404)?.ensure_error_body()?;
    for q in [
        "start_node=ghost&depth=2",
        "depth=2",
        "start_node=alice&depth=11",
        "start_node=alice&depth=x",
        "direction=up&start_node=alice",
        "limit=0",
    ] {
        let r = api.get(&format!("/api/v1/graph/data?{q}")).await?.ensure_client_error()?;
        ensure!(r.status == if q.starts_with("start_node=ghost") { 404 } else { 400 }, "data {q}: {r}");
    }
    Ok(())
}

/// Traversal to depth 1..3 from alice, with each node's depth.
async fn traversals_report_each_nodes_depth(api: &Http) -> Result<()> {
    let (n, edges) = data(api, "start_node=alice&depth=1").await?;
    ensure!(n == depths(&[("alice", 0), ("bob", 1), ("erin", 1), ("oslo", 1)]), "depth 1: {n:?}");
    ensure!(edges.len() == 3, "depth 1 edges {edges:?}");
    let (n, edges) = data(api, "start_node=alice&depth=2").await?;
    ensure!(n == depths(&[("alice", 0), ("bob", 1), ("carol", 2), ("erin", 1), ("oslo", 1)]), "depth 2: {n:?}");
    ensure!(edges.len() == 5, "depth 2 edges (bob→oslo joins a known node) {edges:?}");
    let (n, edges) = data(api, "start_node=alice&depth=3").await?;
    ensure!(n == depths(&[("alice", 0), ("bob", 1), ("carol", 2), ("dave", 3), ("erin", 1), ("oslo", 1), ("paris", 3)]), "depth 3: {n:?}");
    ensure!(edges.len() == 7, "depth 3 edges {edges:?}");
    let (n, _) = data(api, "start_node=alice").await?;
    ensure!(n.len() == 4, "default depth is 1: {n:?}");
    let (n, _) = data(api, "start_node=oslo&depth=2&direction=in").await?;
    ensure!(n == depths(&[("alice", 1), ("bob", 1), ("oslo", 0)]), "incoming: {n:?}");
    let (n, _) = data(api, "start_node=carol&depth=1&direction=both&edge_label=KNOWS").await?;
    ensure!(n == depths(&[("bob", 1), ("carol", 0), ("dave", 1)]), "both ways over KNOWS: {n:?}");
    let r = api.get("/api/v1/graph/data?start_node=alice&depth=3&limit=3").await?.ensure_status(200)?;
    ensure!(r.json["nodes"].as_array().map(Vec::len) == Some(3) && r.json["truncated"] == true, "limited traversal {r}");
    Ok(())
}

/// Label filter: the nodes of a label and the edges among them.
async fn label_listings_hold_the_nodes_and_the_edges_among_them(api: &Http, e: &BTreeMap<String, String>) -> Result<()> {
    let (n, edges) = data(api, "label=City").await?;
    ensure!(n.keys().cloned().collect::<Vec<_>>() == ["oslo", "paris"] && edges.is_empty(), "label City: {n:?} {edges:?}");
    let (n, edges) = data(api, "label=Person").await?;
    ensure!(n.len() == 6 && n.values().all(Value::is_null), "label Person: {n:?}");
    let mut knows: Vec<String> = ["alice-bob", "bob-carol", "carol-dave", "alice-erin"].iter().map(|k| e[*k].clone()).collect();
    knows.sort();
    ensure!(edges == knows, "edges among people: {edges:?}");
    let (n, edges) = data(api, "").await?;
    ensure!(n.len() == 8 && edges.len() == 7, "whole graph: {} nodes, {} edges", n.len(), edges.len());
    Ok(())
}

/// Pattern queries: variable length, WHERE, parameters, aggregates, whole
/// nodes and id anchors.
async fn pattern_queries_match_paths(api: &Http) -> Result<()> {
    let r = rows(api, "MATCH (a:Person {name: 'Alice'})-[:KNOWS*1..3]->(b) RETURN b.name ORDER BY b.name", json!({})).await?;
    ensure!(r == vec![json!(["Bob"]), json!(["Carol"]), json!(["Dave"]), json!(["Erin"])], "variable length: {r:?}");
    let r = rows(api, "MATCH (a:Person)-[:KNOWS*2]->(b:Person) RETURN a.name, b.name ORDER BY a.name", json!({})).await?;
    ensure!(r == vec![json!(["Alice", "Carol"]), json!(["Bob", "Dave"])], "exactly two hops: {r:?}");
    let r = rows(
        api,
        "MATCH (a:Person)-[r:KNOWS]->(b:Person) WHERE r.since >= 2015 AND NOT b.city = 'Rome' RETURN a.name AS from, b.name AS to",
        json!({}),
    )
    .await?;
    ensure!(
        r == vec![json!(["Alice", "Erin"]), json!(["Bob", "Carol"])] || r == vec![json!(["Bob", "Carol"]), json!(["Alice", "Erin"])],
        "WHERE on edges: {r:?}"
    );
    let r = rows(
        api,
        "MATCH (p:Person)-[:LIVES_IN]->(c:City) WHERE p.age > $min OR p.name = $who RETURN c.name, count(*) AS n ORDER BY n DESC, c.name",
        json!({"min": 26, "who": "Bob"}),
    )
    .await?;
    ensure!(r == vec![json!(["Oslo", 2]), json!(["Paris", 1])], "grouped count with params: {r:?}");
    let r = rows(api, "MATCH (p:Person)<-[:KNOWS]-(q) RETURN DISTINCT q.name ORDER BY q.name LIMIT 2", json!({})).await?;
    ensure!(r == vec![json!(["Alice"]), json!(["Bob"])], "distinct + limit: {r:?}");
    let r = rows(api, "MATCH (c:City {name: 'Oslo'})-[]-(p) RETURN p", json!({})).await?;
    ensure!(r.len() == 2 && r.iter().all(|row| row[0]["label"] == "Person" && row[0]["properties"].is_object()), "whole nodes: {r:?}");
    let r = cypher(api, "MATCH (a:Person) WHERE id(a) = 'alice' RETURN a.age", json!({})).await?.ensure_status(200)?;
    ensure!(r.json["plan"] == json!(["a by id"]) && r.json["rows"] == json!([[30]]), "id anchor {r}");
    ensure!(r.json["columns"] == json!(["a.age"]) && r.json["execution_time_ms"].is_u64(), "query reply {r}");
    Ok(())
}

/// Malformed queries: 400 with the position of the problem; runaway queries
/// are refused too.
async fn malformed_and_runaway_queries_are_refused(api: &Http) -> Result<()> {
    let r = cypher(api, "MATCH (a:Person)-[:KNOWS->(b) RETURN a", json!({})).await?.ensure_status(400)?.ensure_error_body()?;
    ensure!(r.json["position"] == 24 && r.json["line"] == 1 && r.json["column"] == 25, "parse error position {r}");
    let r = cypher(api, "MATCH (a)\nRETURN b", json!({})).await?.ensure_status(400)?;
    ensure!(r.json["line"] == 2 && r.error().is_some_and(|m| m.contains("variable b")), "undefined variable {r}");
    cypher(api, "MATCH (a) WHERE a.x = $missing RETURN a", json!({})).await?.ensure_status(400)?;
    // Queries that could exhaust a node's stack or run away are refused, not crashed on.
    let deep = format!("MATCH (a) WHERE {}true{} RETURN a", "(".repeat(5000), ")".repeat(5000));
    cypher(api, &deep, json!({})).await?.ensure_status(400)?.ensure_error_body()?;
    cypher(api, "MATCH (a)-[*1..1000]->(b) RETURN a", json!({})).await?.ensure_status(400)?;
    let long_chain = format!("MATCH (a){} RETURN a", "-->()".repeat(5000));
    cypher(api, &long_chain, json!({})).await?.ensure_status(400)?;
    api.post("/api/v1/graph/query", &json!({"query": ""})).await?.ensure_status(400)?;
    api.post("/api/v1/graph/query", &json!({"query": "MATCH (a) RETURN a", "params": [1]})).await?.ensure_status(400)?;
    Ok(())
}

/// Batches: one command, all or nothing; a separate graph.
async fn batches_are_all_or_nothing(api: &Http) -> Result<()> {
    let nodes: Vec<Value> = (0..50).map(|i| json!({"id": format!("s{i}"), "label": "User", "properties": {"n": i}})).collect();
    let edges: Vec<Value> = (0..100)
        .map(|i| json!({"from_node": format!("s{}", i % 50), "to_node": format!("s{}", (i * 7 + 1) % 50), "label": "FOLLOWS"}))
        .collect();
    let mut bad_edges = edges.clone();
    bad_edges.push(json!({"from_node": "s1", "to_node": "ghost", "label": "FOLLOWS"}));
    let r =
        api.post("/api/v1/graph/batch", &json!({"graph": "social", "nodes": nodes, "edges": bad_edges})).await?.ensure_client_error()?;
    ensure!(r.status == 404 && r.error().is_some_and(|m| m.contains("edges[100]")), "bad batch {r}");
    let r = rows(api, "MATCH (n) RETURN count(*)", json!({})).await?;
    ensure!(r == vec![json!([8])], "the default graph is untouched: {r:?}");
    let r = api.get("/api/v1/graph/data?graph=social").await?.ensure_status(200)?;
    ensure!(r.json["node_count"] == 0, "a refused batch wrote something: {r}");
    let r = api.post("/api/v1/graph/batch", &json!({"graph": "social", "nodes": nodes, "edges": edges})).await?.ensure_status(201)?;
    ensure!(
        r.json["nodes_created"] == 50 && r.json["edges_created"] == 100 && r.json["edge_ids"].as_array().map(Vec::len) == Some(100),
        "batch {r}"
    );
    let r = api
        .post("/api/v1/graph/query?graph=social", &json!({"query": "MATCH (a:User)-[:FOLLOWS]->(b:User) RETURN count(*)"}))
        .await?
        .ensure_status(200)?;
    ensure!(r.json["rows"] == json!([[100]]), "batch edges by query {r}");
    api.post("/api/v1/graph/batch", &json!({"nodes": []})).await?.ensure_status(400)?;
    // A graph named inside a batch item, or in `?graph=` beside the body's, is checked too.
    let bad_item = json!({"graph": "social", "nodes": [{"id": "s99", "label": "User", "graph": "bad name"}]});
    let r = api.post("/api/v1/graph/batch", &bad_item).await?.ensure_status(400)?;
    ensure!(r.error().is_some_and(|m| m.contains("graph")), "a batch item's bad graph name {r}");
    api.get("/api/v1/graph/nodes/s1?graph=bad%20name").await?.ensure_status(400)?.ensure_error_body()?;
    let r = api.post("/api/v1/graph/query?graph=bad%20name", &json!({"graph": "social", "query": "MATCH (n) RETURN 1"})).await?;
    ensure!(r.status == 400, "a bad ?graph= beside a good body graph {r}");
    Ok(())
}

/// Deletes: an edge, then a node with its edges (atomically); records the
/// new alice→zoe edge in `e`.
async fn deletes_take_a_nodes_edges_along(api: &Http, e: &mut BTreeMap<String, String>) -> Result<()> {
    let r = api.delete(&format!("{EDGES}/{}", e["carol-paris"])).await?.ensure_status(200)?;
    ensure!(r.json["deleted"] == true, "delete edge {r}");
    api.get(&format!("{EDGES}/{}", e["carol-paris"])).await?.ensure_status(404)?;
    let r = api.delete(&format!("{NODES}/bob")).await?.ensure_status(200)?;
    ensure!(r.json["edges_removed"] == 3, "bob had three edges: {r}");
    api.get(&format!("{EDGES}/{}", e["alice-bob"])).await?.ensure_status(404)?;
    api.get(&format!("{EDGES}/{}", e["bob-carol"])).await?.ensure_status(404)?;
    e.insert("alice-zoe".into(), edge(api, "alice", "zoe", "KNOWS", json!({"since": 2024})).await?);
    let (n, _) = data(api, "start_node=carol&depth=2&direction=both").await?;
    ensure!(n == depths(&[("carol", 0), ("dave", 1)]), "carol after deletes: {n:?}");
    Ok(())
}

/// Consistency: a write acknowledged with `all` is visible on every replica
/// with `one`. Returns the leader that served it and the graph's group.
async fn writes_acknowledged_by_all_are_on_every_replica(api: &Http, group_hint: &Option<String>) -> Result<(u64, String)> {
    let r = api
        .consistency("all")
        .post(NODES, &json!({"id": "yan", "label": "Person", "properties": {"name": "Yan"}}))
        .await?
        .ensure_status(201)?;
    let group = r.group().context("group header")?;
    let leader = r.served_by().context("serving node")?;
    ensure!(group_hint.as_deref() == Some(group.as_str()), "the graph moved groups: {group_hint:?} vs {group}");
    for replica in [1, 2, 3] {
        let r = api.consistency("one").replica(replica).get(&format!("{NODES}/yan")).await?.ensure_status(200)?;
        ensure!(r.json["id"] == "yan" && r.header(HDR_GROUP) == Some(group.as_str()), "replica {replica}: {r}");
    }
    api.consistency("quorum").get(&format!("{NODES}/yan")).await?.ensure_status(200)?;
    api.delete(&format!("{NODES}/yan")).await?.ensure_status(200)?;
    Ok((leader, group))
}

/// The leader of the graph's group dies: reads and writes go on, data intact.
async fn the_graph_survives_its_leaders_death(
    c: &mut Cluster,
    api: &Http,
    edges_ref: &BTreeMap<&str, String>,
    leader: u64,
    group: &str,
) -> Result<()> {
    eprintln!("killing node {leader}, leader of group {group}");
    c.kill_node(leader)?;
    verify(api, edges_ref).await.context("after leader kill")?;
    node(api, "xavi", "Person", json!({"name": "Xavi", "age": 50})).await?;
    let xe = edge(api, "xavi", "alice", "KNOWS", json!({})).await?;
    let r = rows(api, "MATCH (x {name: 'Xavi'})-[:KNOWS*1..2]->(p) RETURN p.name ORDER BY p.name", json!({})).await?;
    ensure!(r == vec![json!(["Alice"]), json!(["Erin"]), json!(["Zoe"])], "writes after the leader kill: {r:?}");
    api.delete(&format!("{NODES}/xavi")).await?.ensure_status(200)?;
    api.get(&format!("{EDGES}/{xe}")).await?.ensure_status(404)?;
    c.start_node(leader)?;
    Ok(())
}

/// Full restart on the same data.
async fn the_graph_survives_a_full_restart(c: &mut Cluster, edges_ref: &BTreeMap<&str, String>) -> Result<()> {
    c.stop_all().await?;
    c.start_all().await?;
    c.login().await?;
    let api = c.http.clone();
    verify(&api, edges_ref).await.context("after restart")?;
    let r = api
        .post(
            "/api/v1/graph/query",
            &json!({"graph": "social", "query": "MATCH (a:User {n: 0})-[:FOLLOWS*1..3]->(b) RETURN count(DISTINCT b)"}),
        )
        .await?
        .ensure_status(200)?;
    ensure!(r.json["rows"][0][0].as_u64().is_some_and(|n| n > 0), "social graph after restart {r}");
    node(&api, "after", "Person", json!({})).await?;
    edge(&api, "after", "alice", "KNOWS", json!({})).await?;
    Ok(())
}
