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
    // An answer built as a JSON value: its observed shape.
    let query = &doc["paths"]["/api/v1/query"]["post"]["responses"]["200"]["content"]["application/json"]["schema"];
    assert_eq!(query["properties"]["data"]["properties"]["columns"]["type"], "array", "{query}");
    assert!(query["required"].as_array().unwrap().contains(&json!("success")), "{query}");
    // Errors share one body.
    assert_eq!(doc["paths"]["/api/v1/query"]["post"]["responses"]["400"]["$ref"], "#/components/responses/Error");
}
