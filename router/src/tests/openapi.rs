//! `GET /api/v1/openapi.json` describes every route of the router's table.

use super::harness::TestRouter;

#[tokio::test]
async fn every_route_of_the_table_is_in_the_openapi_document() {
    let router = TestRouter::new(1).await;
    let doc = router.get("/api/v1/openapi.json").await.expect(200);
    assert_eq!(doc["openapi"], "3.0.3");
    let decisions = router.state.decisions();
    assert!(decisions.len() > 150, "the whole table: {}", decisions.len());
    for d in decisions {
        let path = crate::openapi::openapi_path(&d.path);
        let op = &doc["paths"][&path][d.method.to_ascii_lowercase()];
        assert!(op.is_object(), "{} {} is missing from the document", d.method, d.path);
        assert!(op["x-tessera-permission"].is_string(), "{} {}: {op}", d.method, d.path);
    }
    let get_key = &doc["paths"]["/api/v1/kv/keys/{key}"]["get"];
    assert_eq!(get_key["x-tessera-permission"], "read:kv", "{get_key}");
    assert_eq!(get_key["parameters"][0]["name"], "key");
    assert_eq!(doc["paths"]["/api/v1/auth/login"]["post"]["security"], serde_json::json!([]), "login is public");
}
