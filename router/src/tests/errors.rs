//! How the engines' rejections and the cluster's failures reach the client:
//! statuses and bodies chosen in `error.rs`, never a 500 for bad input.

use serde_json::json;

use super::harness::TestRouter;

async fn sql(router: &TestRouter, text: &str) -> super::harness::Answer {
    router.post("/api/v1/query", &json!({"sql": text})).await
}

/// SQL errors carry the spec's body `{error: {code, message, position, sql}}`.
#[tokio::test]
async fn sql_errors_keep_their_code_position_and_statement() {
    let router = TestRouter::new(2).await;
    let parse = sql(&router, "SELEC 1").await;
    assert_eq!(parse.status.as_u16(), 400, "{}", parse.json);
    assert_eq!(parse.json["error"]["code"], json!("PARSE_ERROR"));
    assert_eq!(parse.json["error"]["sql"], json!("SELEC 1"));
    assert!(parse.json["error"]["position"]["line"].is_u64(), "{}", parse.json);

    let missing = sql(&router, "SELECT * FROM nowhere").await;
    assert_eq!(missing.json["error"]["code"], json!("TABLE_NOT_FOUND"), "{}", missing.json);
    assert!(missing.status.is_client_error());

    sql(&router, "CREATE TABLE t (id INT PRIMARY KEY, v INT)").await.expect(200);
    sql(&router, "INSERT INTO t VALUES (1, 1)").await.expect(200);
    let dup = sql(&router, "INSERT INTO t VALUES (1, 2)").await;
    assert_eq!(dup.json["error"]["code"], json!("CONSTRAINT_VIOLATION"), "{}", dup.json);
    assert!(dup.status.is_client_error());
    let zero = sql(&router, "SELECT v / 0 FROM t").await;
    assert_eq!(zero.json["error"]["code"], json!("DIVISION_BY_ZERO"), "{}", zero.json);
    let rows = sql(&router, "SELECT v FROM t").await.expect(200);
    assert_eq!(rows["data"]["rows"], json!([[1]]), "the refused insert changed the table: {rows}");
}

/// Engine rejections of other models: a vector of the wrong dimension is a
/// 400, a missing collection a 404, a second create a 409; each with `{error, code}`.
#[tokio::test]
async fn model_rejections_map_to_client_errors() {
    let router = TestRouter::new(2).await;
    let v = "/api/v1/vector/collections";
    router.post(v, &json!({"name": "pts", "dim": 3, "metric": "cosine"})).await.expect(201);
    let again = router.post(v, &json!({"name": "pts", "dim": 3, "metric": "cosine"})).await.expect(409);
    assert!(again["error"].is_string() && again["code"].is_string(), "{again}");
    let wrong = router.post(&format!("{v}/pts/upsert"), &json!({"id": "a", "vector": [1, 2]})).await.expect(400);
    assert!(wrong["error"].as_str().unwrap().contains('3'), "{wrong}");
    router.post(&format!("{v}/none/search"), &json!({"vector": [1, 2, 3]})).await.expect(404);
    router.get("/api/v1/documents/collections/none/documents/x").await.expect(404);
    let graph = router.post("/api/v1/graph/query", &json!({"query": "MATCH (n RETURN n"})).await.expect(400);
    assert!(graph["line"].is_u64() && graph["column"].is_u64(), "a graph syntax error without its position: {graph}");
}

/// A shard with no reachable leader is a 503 with a JSON body, for a write
/// routed to it and for a fan-out read that needs it; the other shards serve.
#[tokio::test]
async fn an_unreachable_shard_is_a_503() {
    let router = TestRouter::new(2).await;
    let (down, up) = (1, 2);
    let key_on = |g: u64| (0..).map(|i| format!("k{i}")).find(|k| router.cluster.shard_of(k) == g).unwrap();
    let (k_down, k_up) = (key_on(down), key_on(up));
    router.cluster.set_down(down, true);
    let w = router.post("/api/v1/kv/keys", &json!({"key": k_down, "value": 1})).await.expect(503);
    assert!(w["error"].is_string(), "{w}");
    router.post("/api/v1/kv/keys", &json!({"key": k_up, "value": 1})).await.expect(200);
    router.get("/api/v1/kv/keys?prefix=k").await.expect(503);
    router.cluster.set_down(down, false);
    router.post("/api/v1/kv/keys", &json!({"key": k_down, "value": 1})).await.expect(200);
    assert_eq!(router.get("/api/v1/kv/count?prefix=k").await.expect(200)["count"], json!(2));
}

/// A model query that runs past `query_timeout_secs` answers 408
/// `QUERY_TIMEOUT` when the limit passes, not when the query would end.
#[tokio::test]
async fn a_query_past_its_time_limit_answers_408() {
    let mut config = crate::config::RouterConfig::default();
    config.query_limits.query_timeout_secs = 1;
    let cluster = std::sync::Arc::new(crate::cluster::memory::MemoryCluster::new(1));
    let state = crate::state::AppState::new(config, cluster).expect("router state");
    let never = std::future::pending::<Result<(), crate::error::ApiError>>();
    let started = std::time::Instant::now();
    let err = crate::http::handlers::within_query_timeout(&state, never).await.expect_err("the limit passes first");
    assert!((1000..3000).contains(&started.elapsed().as_millis()), "{:?}", started.elapsed());
    assert_eq!(err.status_and_code(), (axum::http::StatusCode::REQUEST_TIMEOUT, "QUERY_TIMEOUT"));
    let quick = crate::http::handlers::within_query_timeout(&state, async { Ok::<_, crate::error::ApiError>(7) }).await;
    assert_eq!(quick.ok(), Some(7));
}

/// A body of the wrong shape is a 400 that names the field at fault, as the
/// OpenAPI document's types say (a generated client shows where it went wrong);
/// trailing bytes after the object are refused too.
#[tokio::test]
async fn a_field_of_the_wrong_type_is_named_in_the_400() {
    let router = TestRouter::new(2).await;
    let wrong = router.post("/api/v1/query", &json!({"sql": 5})).await;
    assert_eq!(wrong.status.as_u16(), 400, "{}", wrong.json);
    assert!(wrong.json.to_string().contains("at sql: invalid type: integer `5`, expected a string"), "{}", wrong.json);
    let missing = router.post("/api/v1/query", &json!({"params": []})).await;
    assert_eq!(missing.status.as_u16(), 400, "{}", missing.json);
    assert!(missing.json.to_string().contains("missing field `sql`"), "{}", missing.json);
    let (status, _, body) = router
        .send_raw(
            axum::http::Request::post("/api/v1/query")
                .header("content-type", "application/json")
                .header("authorization", format!("Bearer {}", router.token()))
                .body(axum::body::Body::from(r#"{"sql": "SELECT 1"} {"#))
                .unwrap(),
        )
        .await;
    assert_eq!(status.as_u16(), 400, "{}", String::from_utf8_lossy(&body));
}
