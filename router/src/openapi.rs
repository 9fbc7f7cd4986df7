//! `GET /api/v1/openapi.json`: an OpenAPI 3.0 description generated from the
//! route table, so every route the router serves is in it, with its method,
//! path parameters, the permission it needs (`x-tessera-permission`) and the
//! error body every route shares. Request and response bodies are described
//! generically (JSON objects); the fields of each are in docs/*.md and spec 01.

use serde_json::{Map, Value, json};

use crate::permissions::Access;
use crate::route_table::Decision;

/// The OpenAPI path of an axum template: `{*key}` becomes `{key}`.
pub fn openapi_path(template: &str) -> String {
    template.replace("{*", "{")
}

fn parameters(template: &str) -> Vec<Value> {
    template
        .split('/')
        .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(|name| {
            let (name, rest) = match name.strip_prefix('*') {
                Some(n) => (n, " (the rest of the path, slashes included)"),
                None => (name, ""),
            };
            json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}, "description": format!("{name}{rest}")})
        })
        .collect()
}

/// The document for `decisions` (the router's route table).
pub fn document(decisions: &[Decision]) -> Value {
    let mut paths: Map<String, Value> = Map::new();
    for d in decisions {
        let method = d.method.to_ascii_lowercase();
        let (permission, security) = match &d.access {
            Access::Public => ("public".to_string(), json!([])),
            Access::Authenticated => ("authenticated".to_string(), json!([{"bearer": []}])),
            Access::Permission(p) => (p.to_string(), json!([{"bearer": []}])),
        };
        let mut op = json!({
            "operationId": format!("{method} {}", d.path),
            "summary": format!("{} {}", d.method, d.path),
            "x-tessera-permission": permission,
            "security": security,
            "parameters": parameters(&d.path),
            "responses": {
                "200": {"description": "success", "content": {"application/json": {"schema": {"type": "object"}}}},
                "400": {"$ref": "#/components/responses/Error"},
                "401": {"$ref": "#/components/responses/Error"},
                "403": {"$ref": "#/components/responses/Error"},
                "404": {"$ref": "#/components/responses/Error"},
                "5XX": {"$ref": "#/components/responses/Error"},
            },
        });
        if matches!(d.method, "POST" | "PUT" | "PATCH") {
            op["requestBody"] = json!({"required": false, "content": {"application/json": {"schema": {"type": "object"}}}});
        }
        let entry = paths.entry(openapi_path(&d.path)).or_insert_with(|| json!({}));
        entry[method] = op;
    }
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Tessera",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Tessera's HTTP + JSON interface (spec 01-03), generated from the router's route table.",
        },
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "responses": {"Error": {
                "description": "an error",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
            }},
            "schemas": {"Error": {
                "type": "object",
                "properties": {"error": {"type": "string"}, "code": {"type": "string"}},
                "required": ["error"],
            }},
        },
    })
}
