//! `GET /api/v1/openapi.json` describes every route of the router's table,
//! with its parameters and bodies.

use serde_json::{Value, json};

use super::harness::TestRouter;

async fn document() -> (TestRouter, Value) {
    let router = TestRouter::new(1).await;
    let doc = router.get("/api/v1/openapi.json").await.expect(200);
    // For checking the document with outside tools (an OpenAPI validator).
    if let Ok(path) = std::env::var("TESSERA_OPENAPI_OUT") {
        std::fs::write(path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    }
    (router, doc)
}

/// The schema at `schema`, following a `$ref` into `components/schemas`.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/schemas/")) {
        Some(name) => &doc["components"]["schemas"][name],
        None => schema,
    }
}

#[tokio::test]
async fn every_route_of_the_table_is_in_the_openapi_document() {
    let (router, doc) = document().await;
    assert_eq!(doc["openapi"], "3.0.3");
    let decisions = router.state.decisions();
    assert!(decisions.len() > 150, "the whole table: {}", decisions.len());
    let mut described = 0;
    for d in decisions {
        let path = crate::http::openapi::openapi_path(&d.path);
        let op = &doc["paths"][&path][d.method.to_ascii_lowercase()];
        assert!(op.is_object(), "{} {} is missing from the document", d.method, d.path);
        assert!(op["x-tessera-permission"].is_string(), "{} {}: {op}", d.method, d.path);
        let success = op["responses"].as_object().unwrap().iter().find(|(status, _)| status.starts_with('2'));
        let (_, success) = success.unwrap_or_else(|| panic!("{} {} has no success answer: {op}", d.method, d.path));
        if !success["description"].as_str().unwrap_or_default().contains("not recorded") {
            described += 1;
        }
        if op["requestBody"]["content"].get("*/*").is_some() {
            println!("bytes body: {} {}", d.method, d.path);
        }
    }
    println!("{described} of {} routes have a described success body", decisions.len());
    let get_key = &doc["paths"]["/api/v1/kv/keys/{key}"]["get"];
    assert_eq!(get_key["x-tessera-permission"], "read:kv", "{get_key}");
    assert_eq!(get_key["parameters"][0]["name"], "key");
    assert_eq!(doc["paths"]["/api/v1/auth/login"]["post"]["security"], json!([]), "login is public");
}

#[tokio::test]
async fn request_bodies_and_query_parameters_come_from_the_handlers() {
    let (_router, doc) = document().await;
    // A typed JSON body: the fields the handler reads.
    let put = &doc["paths"]["/api/v1/kv/keys"]["post"]["requestBody"];
    assert_eq!(put["required"], true);
    let schema = resolve(&doc, &put["content"]["application/json"]["schema"]);
    for field in ["key", "value", "ttl"] {
        assert!(schema["properties"][field].is_object(), "POST /api/v1/kv/keys body lacks {field}: {schema}");
    }
    assert!(schema["required"].as_array().unwrap().contains(&json!("key")), "{schema}");
    // An optional body (backups take none or {encrypted, compliance_mode}).
    let backup = &doc["paths"]["/api/v1/admin/backup"]["post"]["requestBody"];
    assert_eq!(backup["required"], false, "{backup}");
    let schema = resolve(&doc, &backup["content"]["application/json"]["schema"]);
    assert_eq!(schema["properties"]["encrypted"]["type"], "boolean", "{schema}");
    // A body the handler reads by hand, documented at its route.
    let add = resolve(&doc, &doc["paths"]["/api/v1/admin/nodes"]["post"]["requestBody"]["content"]["application/json"]["schema"]);
    assert!(add["properties"]["node_id"].is_object() && add["properties"]["address"].is_object(), "{add}");
    // Bytes: an object's content.
    let object = &doc["paths"]["/api/v1/objects/buckets/{bucket}/object/{key}"]["put"]["requestBody"];
    assert_eq!(object["content"]["*/*"]["schema"]["format"], "binary", "{object}");
    // Query parameters: the handler's query type, one parameter per field.
    let list = doc["paths"]["/api/v1/kv/keys"]["get"]["parameters"].as_array().unwrap();
    let names: Vec<&str> = list.iter().filter(|p| p["in"] == "query").filter_map(|p| p["name"].as_str()).collect();
    assert!(names.contains(&"prefix") && names.contains(&"limit"), "GET /api/v1/kv/keys query parameters: {names:?}");
    // A GET has no body.
    assert!(doc["paths"]["/api/v1/kv/keys"]["get"].get("requestBody").is_none());
}

#[tokio::test]
async fn success_bodies_are_typed_or_observed() {
    let (_router, doc) = document().await;
    // A typed answer: the handler's view type.
    let entry = &doc["paths"]["/api/v1/kv/keys/{key}"]["get"]["responses"]["200"]["content"]["application/json"]["schema"];
    let entry = resolve(&doc, entry);
    assert!(entry["properties"]["key"].is_object() && entry["properties"]["value"].is_object(), "{entry}");
    // A typed answer with nested views.
    let query = &doc["paths"]["/api/v1/query"]["post"]["responses"]["200"]["content"]["application/json"]["schema"];
    let query = resolve(&doc, query);
    let data = resolve(&doc, &query["properties"]["data"]);
    assert_eq!(data["properties"]["columns"]["type"], "array", "{data}");
    assert!(query["required"].as_array().unwrap().contains(&json!("success")), "{query}");
    // Errors share one body.
    assert_eq!(doc["paths"]["/api/v1/query"]["post"]["responses"]["400"]["$ref"], "#/components/responses/Error");
}

/// Observation checks the document; it never writes a typed route's answer,
/// and every route's answer is typed (or is the stored bytes of an object).
#[tokio::test]
async fn typed_answers_are_not_observed() {
    let router = TestRouter::new(1).await;
    let decisions = router.state.decisions();
    let observed = &*crate::http::openapi::observed::OBSERVED;
    let typed_and_observed: Vec<String> = decisions
        .iter()
        .filter(|d| d.doc.response.is_some())
        .map(|d| crate::http::openapi::observed::route_key(d.method, &d.path))
        .filter(|key| observed.contains_key(key))
        .collect();
    assert!(typed_and_observed.is_empty(), "typed routes with observed shapes (remove them from observed.json): {typed_and_observed:?}");
    let by_observation = decisions
        .iter()
        .filter(|d| d.doc.response.is_none() && !d.doc.bytes_only)
        .filter(|d| observed.contains_key(&crate::http::openapi::observed::route_key(d.method, &d.path)));
    let untyped: Vec<String> = by_observation.map(|d| crate::http::openapi::observed::route_key(d.method, &d.path)).collect();
    assert!(untyped.is_empty(), "routes documented by observation rather than by a type: {untyped:?}");
    eprintln!("{} routes typed", decisions.iter().filter(|d| d.doc.response.is_some()).count());
}

/// Every integer schema in `value`, with where it is.
fn integers<'a>(value: &'a Value, at: String, out: &mut Vec<(String, &'a Value)>) {
    match value {
        Value::Object(fields) => {
            if fields.get("type") == Some(&json!("integer")) {
                out.push((at.clone(), value));
            }
            for (k, v) in fields {
                integers(v, format!("{at}/{k}"), out);
            }
        }
        Value::Array(items) => items.iter().enumerate().for_each(|(i, v)| integers(v, format!("{at}/{i}"), out)),
        _ => {}
    }
}

/// What a generated client needs to build only requests the router takes:
/// name formats, bounds and required fields are in the document.
#[tokio::test]
async fn the_document_states_the_formats_and_bounds_the_router_checks() {
    let (_router, doc) = document().await;
    let param = |path: &str, method: &str, name: &str| -> Value {
        let op = &doc["paths"][path][method];
        op["parameters"].as_array().unwrap().iter().find(|p| p["name"] == name).unwrap_or_else(|| panic!("{path}: no {name}"))["schema"]
            .clone()
    };
    // Path parameters carry their name's pattern.
    assert_eq!(param("/api/v1/vector/collections/{name}", "get", "name")["pattern"], crate::http::openapi::formats::VECTOR_COLLECTION);
    assert_eq!(param("/api/v1/streaming/channels/{channel}", "get", "channel")["not"]["enum"][0], "channels");
    assert_eq!(param("/api/v1/admin/nodes/{node_id}", "delete", "node_id")["type"], "integer");
    // Query parameters carry their bounds.
    let limit = param("/api/v1/admin/security/alerts", "get", "limit");
    assert_eq!((limit["minimum"].as_u64(), limit["maximum"].as_u64()), (Some(1), Some(1000)), "{limit}");
    // Every integer has bounds: a number beyond its type is refused, so it is not valid.
    let mut all = Vec::new();
    integers(&doc, String::new(), &mut all);
    for (at, schema) in &all {
        assert!(schema["minimum"].is_number() && schema["maximum"].is_number(), "{at}: {schema}");
    }
    // A body field the handler requires even when its type is optional.
    let leader = resolve(
        &doc,
        &doc["paths"]["/api/v1/admin/groups/{group_id}/leader"]["put"]["requestBody"]["content"]["application/json"]["schema"],
    );
    assert!(leader["required"].as_array().unwrap().contains(&json!("node_id")), "{leader}");
    // A change may conflict with the state (409); a read is never one.
    let create = &doc["paths"]["/api/v1/streaming/channels"]["post"]["responses"];
    assert!(create["409"].is_object() && create["429"].is_object(), "{create}");
    assert!(doc["paths"]["/api/v1/streaming/channels"]["get"]["responses"].get("409").is_none());
    // Operation ids are unique names a generated client uses as function names.
    let mut ids: Vec<&str> = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|ops| ops.as_object().unwrap().values())
        .filter_map(|op| op["operationId"].as_str())
        .collect();
    let count = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), count, "operation ids repeat");
    assert!(ids.contains(&"put_objects_buckets_bucket_object_key"), "{ids:?}");
    // The user's own data in an answer is any object, not the tests' data.
    let docs =
        &doc["paths"]["/api/v1/documents/collections/{name}/documents"]["get"]["responses"]["200"]["content"]["application/json"]["schema"];
    let docs = resolve(&doc, docs);
    let view = resolve(&doc, &docs["properties"]["documents"]["items"]);
    let data = &view["properties"]["data"];
    assert!(data["type"] == "object" && data["additionalProperties"] == true && data.get("properties").is_none(), "{view}");
}

/// A JSON number is read as the value it writes: a bound stated in the
/// document holds for a number one ULP inside it (serde_json's default float
/// parser could round such a number onto the bound, found by schemathesis).
#[test]
fn numbers_in_bodies_are_read_exactly() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut inexact = Vec::new();
    for _ in 0..200_000 {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let x = f64::from_bits(state >> 2); // positive, finite
        let text = serde_json::to_string(&x).unwrap();
        let read: f64 = serde_json::from_str(&text).unwrap();
        if read.to_bits() != x.to_bits() {
            inexact.push(text);
        }
    }
    let below_one = serde_json::from_str::<f64>(&serde_json::to_string(&f64::from_bits(1f64.to_bits() - 1)).unwrap()).unwrap();
    assert!(below_one < 1.0, "one ULP below 1 was read as {below_one}");
    assert!(inexact.is_empty(), "{} of 200000 numbers read back differently, e.g. {:?}", inexact.len(), &inexact[..inexact.len().min(3)]);
}
