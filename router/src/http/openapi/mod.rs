//! `GET /api/v1/openapi.json`: an OpenAPI 3.0 description generated from the
//! route table, so every route the router serves is in it, with its method,
//! path and query parameters, request body, success body, the permission it
//! needs (`x-tessera-permission`) and the error body every route shares.
//!
//! Where each part comes from:
//! - request bodies and query parameters: the handler's extractors
//!   ([`describe`]; the types derive `schemars::JsonSchema`), or
//!   [`crate::http::route_table::RouteTable::body`] for a body read by hand;
//! - success bodies: the handler's answer type when it is typed, else the
//!   shape its answers were observed to have ([`observed`], checked on every
//!   answer of the in-process tests).

pub mod describe;
pub mod formats;
pub mod observed;

use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

use crate::http::permissions::Access;
use crate::http::route_table::Decision;
use describe::RequestBody;

/// The matched route template of an answer (set on responses by the request
/// middleware; the in-process tests read it to check the answer's shape).
#[derive(Debug, Clone)]
#[cfg_attr(not(test), allow(dead_code))]
pub struct RouteTemplate(pub String);

/// A route's operation id, a name a generated client can use as is:
/// `put_objects_buckets_bucket_object_key` for `PUT /api/v1/objects/buckets/{bucket}/object/{*key}`.
pub fn operation_id(method: &str, template: &str) -> String {
    let path = template.strip_prefix("/api/v1/").unwrap_or(template);
    let words: Vec<&str> = path.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).collect();
    format!("{}_{}", method.to_ascii_lowercase(), words.join("_").to_ascii_lowercase())
}

/// The OpenAPI path of an axum template: `{*key}` becomes `{key}`.
pub fn openapi_path(template: &str) -> String {
    template.replace("{*", "{")
}

fn path_parameters(template: &str) -> Vec<Value> {
    template
        .split('/')
        .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(|name| {
            let (name, rest) = match name.strip_prefix('*') {
                Some(n) => (n, " (the rest of the path, slashes included)"),
                None => (name, ""),
            };
            json!({"name": name, "in": "path", "required": true, "schema": formats::path_parameter(template, name), "description": format!("{name}{rest}")})
        })
        .collect()
}

/// The query parameters of an object schema: one per property.
fn query_parameters(schema: &Value) -> Vec<Value> {
    let required: Vec<&str> = schema["required"].as_array().map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    match schema["properties"].as_object() {
        Some(properties) if !properties.is_empty() => properties
            .iter()
            .map(|(name, property)| {
                let mut property = property.clone();
                let description = property.as_object_mut().and_then(|p| p.remove("description"));
                let mut p = json!({"name": name, "in": "query", "required": required.contains(&name.as_str()), "schema": property});
                if let Some(d) = description {
                    p["description"] = d;
                }
                p
            })
            .collect(),
        // A free-form map of parameters (`?field=value` filters).
        _ => vec![json!({"name": "params", "in": "query", "required": false, "style": "form", "explode": true,
            "schema": {"type": "object", "additionalProperties": {"type": "string"}}})],
    }
}

/// Success statuses a route answers by rule, beyond those observed: a PUT
/// that creates (201) also replaces (200); a route taking `?consistency=`
/// answers 202 with `one` (recorded, finishing in the background).
fn also_answered(d: &Decision, takes_consistency: bool, out: &mut Map<String, Value>) {
    let like = |out: &Map<String, Value>, from: &str| out.get(from).cloned();
    if d.method == "PUT" {
        if let Some(created) = like(out, "201") {
            out.entry("200").or_insert(created);
        } else if let Some(replaced) = like(out, "200") {
            out.entry("201").or_insert(replaced);
        }
    }
    if takes_consistency && let Some(ok) = like(out, "200").or_else(|| like(out, "201")) {
        out.entry("202").or_insert(ok);
    }
}

/// The success answers of one route: its typed body, else its observed shapes.
fn success_responses(d: &Decision, generator: &mut SchemaGenerator) -> Map<String, Value> {
    let json_answer = |schema: Value| json!({"description": "success", "content": {"application/json": {"schema": schema}}});
    let mut out = Map::new();
    if d.path == "/api/v1/openapi.json" {
        out.insert(
            "200".into(),
            json!({"description": "this OpenAPI 3.0.3 document", "content": {"application/json": {"schema": {"type": "object"}}}}),
        );
        return out;
    }
    if d.doc.bytes_only {
        out.insert(
            "200".into(),
            json!({"description": "the stored bytes, in the media type they were stored with", "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}}}),
        );
        return out;
    }
    let observed = observed::OBSERVED.get(&observed::route_key(d.method, &d.path));
    let takes_consistency = d.doc.query.is_some_and(|q| q(generator).to_value()["properties"].get("consistency").is_some());
    if let Some(schema) = d.doc.response {
        // A typed answer, under each status its route states (200 unless stated).
        let schema = schema(generator).to_value();
        let statuses: &[u16] = if d.doc.statuses.is_empty() { &[200] } else { d.doc.statuses };
        for status in statuses {
            let mut answer = json_answer(schema.clone());
            for media in d.doc.file_media {
                answer["content"][*media] = json!({"schema": {"type": "string", "format": "binary"}});
            }
            out.insert(status.to_string(), answer);
        }
        also_answered(d, takes_consistency, &mut out);
        return out;
    }
    if let Some(by_status) = observed {
        for (status, schema) in by_status {
            let mut answer = json_answer(observed::tidy(schema));
            if d.doc.raw_response {
                // A handler answering raw bytes may answer JSON (as seen) or the
                // resource's own bytes, in the type it was stored with.
                answer["content"]["*/*"] = json!({"schema": {"type": "string", "format": "binary"}});
            }
            out.insert(status.clone(), answer);
        }
    }
    also_answered(d, takes_consistency, &mut out);
    if out.is_empty() {
        let answer = if d.doc.raw_response {
            json!({"description": "success: the bytes or text of the resource", "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}}})
        } else {
            json!({"description": "success (shape not recorded: see docs/)", "content": {"application/json": {"schema": {"type": "object"}}}})
        };
        out.insert("200".into(), answer);
    }
    out
}

/// Gives every integer schema the bounds of its Rust type (`format`), where no
/// tighter ones are stated: a number beyond them is refused, so it is invalid.
fn bound_integers(schema: &mut Value) {
    match schema {
        Value::Object(fields) => {
            if fields.get("type").and_then(Value::as_str) == Some("integer") {
                let (min, max): (Value, Value) = match fields.get("format").and_then(Value::as_str) {
                    Some("uint" | "uint64") => (0.into(), u64::MAX.into()),
                    Some("uint32") => (0.into(), u32::MAX.into()),
                    Some("uint16") => (0.into(), u16::MAX.into()),
                    Some("uint8") => (0.into(), u8::MAX.into()),
                    Some("int32") => (i32::MIN.into(), i32::MAX.into()),
                    _ => (i64::MIN.into(), i64::MAX.into()),
                };
                fields.entry("minimum").or_insert(min);
                fields.entry("maximum").or_insert(max);
            }
            fields.values_mut().for_each(bound_integers);
        }
        Value::Array(items) => items.iter_mut().for_each(bound_integers),
        _ => {}
    }
}

/// The document for `decisions` (the router's route table).
pub fn document(decisions: &[Decision]) -> Value {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let mut paths: Map<String, Value> = Map::new();
    for d in decisions {
        let method = d.method.to_ascii_lowercase();
        let (permission, security) = match &d.access {
            Access::Public => ("public".to_string(), json!([])),
            Access::Authenticated => ("authenticated".to_string(), json!([{"bearer": []}])),
            Access::Permission(p) => (p.to_string(), json!([{"bearer": []}])),
            Access::Metrics => (format!("{} or the metrics token", crate::http::permissions::METRICS_PERMISSION), json!([{"bearer": []}])),
        };
        let mut parameters = path_parameters(&d.path);
        if let Some(query) = d.doc.query {
            parameters.extend(query_parameters(&query(&mut generator).to_value()));
        }
        let mut responses = success_responses(d, &mut generator);
        // Every route may refuse its input, its caller or a missing resource,
        // be rate limited (429) or find the cluster unable (5XX); a change may
        // conflict with the current state (409); a body may be too large (413).
        let mut errors = vec!["400", "401", "403", "404", "429", "5XX"];
        if d.method != "GET" {
            errors.push("409");
        }
        // A body beyond the router's limit (a KV value's limit plus 64 KiB; uploads and
        // imports have their own) is refused whole.
        if d.doc.request.is_some() {
            errors.push("413");
        }
        for status in errors {
            responses.insert(status.into(), json!({"$ref": "#/components/responses/Error"}));
        }
        let mut op = json!({
            "operationId": operation_id(&method, &d.path),
            "summary": format!("{} {}", d.method, d.path),
            "x-tessera-permission": permission,
            "security": security,
            "parameters": parameters,
            "responses": responses,
        });
        match d.doc.request {
            Some(RequestBody::Json { schema, required }) => {
                // Every JSON body is an object (`serde_json::Value` bodies say no more).
                let schema = match schema(&mut generator).to_value() {
                    Value::Bool(true) => json!({"type": "object"}),
                    schema => schema,
                };
                op["requestBody"] = json!({"required": required, "content": {"application/json": {"schema": schema}}});
            }
            Some(RequestBody::Bytes) => {
                // Any media type is taken (and an object keeps it); client
                // generators know octet-stream by name.
                let bytes = json!({"schema": {"type": "string", "format": "binary"}});
                op["requestBody"] = json!({"required": false, "content": {"application/octet-stream": bytes, "*/*": bytes}});
            }
            None => {}
        }
        let entry = paths.entry(openapi_path(&d.path)).or_insert_with(|| json!({}));
        entry[method] = op;
    }
    let mut schemas = generator.take_definitions(true);
    schemas.insert(
        "Error".into(),
        json!({
            "type": "object",
            "description": "every error: a message, or for SQL statements (spec 01) an object naming the code, the position and the statement",
            "properties": {
                "error": {"oneOf": [
                    {"type": "string"},
                    {"type": "object", "properties": {
                        "code": {"type": "string"},
                        "message": {"type": "string"},
                        "position": {"type": "object", "nullable": true, "properties": {"line": {"type": "integer"}, "column": {"type": "integer"}}},
                        "sql": {"type": "string"},
                    }, "required": ["code", "message"]},
                ]},
                "code": {"type": "string"},
            },
            "required": ["error"],
        }),
    );
    let mut document = json!({
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
            "schemas": schemas,
        },
    });
    bound_integers(&mut document);
    document
}
