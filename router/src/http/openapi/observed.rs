//! Response bodies the handlers build as JSON values (rather than typed
//! structs) are documented by their observed shape: every answer the router's
//! in-process tests receive is checked against `observed.json`, and
//! `TESSERA_BLESS=1` records the shapes instead (merged over every answer of a
//! route and status: a field is `required` when every answer had it,
//! `nullable` when one answered `null`).
//!
//! Routes only real nodes can serve (backups, node lifecycle, rolling update,
//! shutdown) are recorded by the router binary itself while the cluster tests
//! run with `TESSERA_RECORD_API_SHAPES` set ([`RECORDING`]).
//!
//! Refresh after changing an answer's shape (docs/operations.md "API description"):
//! `echo {} > router/src/http/openapi/observed.json`, `TESSERA_BLESS=1 cargo nextest run -p tessera-router`
//! twice, then `cargo build -p tessera-node -p tessera-router`, `cp router/src/http/openapi/observed.json /tmp/shapes.json`,
//! `TESSERA_RECORD_API_SHAPES=/tmp/shapes.json cargo nextest run -p tessera-tests -E 'not binary(chaos)'` (the
//! black-box suite, about 12 minutes here; its answers also show what real clusters answer, `null`s included)
//! and `cp /tmp/shapes.json router/src/http/openapi/observed.json` (the harness refuses binaries older than a source
//! file, so the routers record into a copy).

#![cfg_attr(not(test), allow(dead_code))]

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde_json::{Map, Value, json};

/// Route (`"GET /api/v1/kv/keys"`) → status (`"200"`) → schema (OpenAPI 3.0).
pub type Observed = BTreeMap<String, BTreeMap<String, Value>>;

/// The recorded shapes, compiled in.
pub static OBSERVED: LazyLock<Observed> =
    LazyLock::new(|| serde_json::from_str(include_str!("observed.json")).expect("observed.json is a map of route → status → schema"));

/// Objects with more keys than this are maps keyed by data (routes, node ids,
/// user fields): documented as `additionalProperties` of one merged schema.
const MAX_PROPERTIES: usize = 48;

/// The key of a route in [`OBSERVED`].
pub fn route_key(method: &str, template: &str) -> String {
    format!("{method} {template}")
}

/// The schema of one JSON value.
pub fn infer(value: &Value) -> Value {
    match value {
        Value::Null => json!({"nullable": true}),
        Value::Bool(_) => json!({"type": "boolean"}),
        Value::Number(n) if n.is_f64() => json!({"type": "number"}),
        Value::Number(_) => json!({"type": "integer"}),
        Value::String(_) => json!({"type": "string"}),
        Value::Array(items) => {
            let item = items.iter().map(infer).reduce(|a, b| merge(&a, &b)).unwrap_or_else(|| json!({}));
            json!({"type": "array", "items": item})
        }
        Value::Object(fields) => {
            let properties: Map<String, Value> = fields.iter().map(|(k, v)| (k.clone(), infer(v))).collect();
            let required: Vec<Value> = fields.keys().map(|k| Value::String(k.clone())).collect();
            collapse_maps(json!({"type": "object", "properties": properties, "required": required}))
        }
    }
}

fn type_of(schema: &Value) -> Option<&str> {
    schema.get("type").and_then(Value::as_str)
}

fn nullable(schema: &Value) -> bool {
    schema.get("nullable") == Some(&Value::Bool(true))
}

/// One schema that both `a` and `b` satisfy.
pub fn merge(a: &Value, b: &Value) -> Value {
    let null = nullable(a) || nullable(b);
    let mut merged = match (type_of(a), type_of(b)) {
        _ if varies(a) || varies(b) => json!({"description": VARIES}),
        (None, _) => strip_nullable(b),
        (_, None) => strip_nullable(a),
        (Some(x), Some(y)) if x == y => match x {
            "object" => merge_objects(a, b),
            "array" => json!({"type": "array", "items": merge(&a["items"], &b["items"])}),
            _ => json!({"type": x}),
        },
        (Some("integer" | "number"), Some("integer" | "number")) => json!({"type": "number"}),
        // Answers of different types: documented as any value.
        _ => json!({"description": VARIES}),
    };
    if null {
        merged["nullable"] = Value::Bool(true);
    }
    merged
}

/// What a place answered values of several types is documented as (any value).
const VARIES: &str = "any value (answers differ in type)";

fn varies(schema: &Value) -> bool {
    schema.get("description").and_then(Value::as_str) == Some(VARIES)
}

fn strip_nullable(schema: &Value) -> Value {
    let mut s = schema.clone();
    if let Some(m) = s.as_object_mut() {
        m.remove("nullable");
    }
    s
}

fn merge_objects(a: &Value, b: &Value) -> Value {
    if a.get("additionalProperties").is_some() || b.get("additionalProperties").is_some() {
        return json!({"type": "object", "additionalProperties": merge(&values_schema(a), &values_schema(b))});
    }
    let empty = Map::new();
    let pa = a["properties"].as_object().unwrap_or(&empty);
    let pb = b["properties"].as_object().unwrap_or(&empty);
    let mut properties = pa.clone();
    for (k, v) in pb {
        let m = match pa.get(k) {
            Some(existing) => merge(existing, v),
            None => v.clone(),
        };
        properties.insert(k.clone(), m);
    }
    let required_in = |s: &Value| -> Vec<String> {
        s["required"].as_array().map(|r| r.iter().filter_map(|v| v.as_str().map(str::to_string)).collect()).unwrap_or_default()
    };
    let rb = required_in(b);
    let required: Vec<Value> = required_in(a).into_iter().filter(|k| rb.contains(k)).map(Value::String).collect();
    collapse_maps(json!({"type": "object", "properties": properties, "required": required}))
}

/// One schema for every value of an object (its properties or its additional ones).
fn values_schema(object: &Value) -> Value {
    if let Some(extra) = object.get("additionalProperties") {
        return extra.clone();
    }
    object["properties"].as_object().and_then(|p| p.values().cloned().reduce(|a, b| merge(&a, &b))).unwrap_or_else(|| json!({}))
}

/// Objects keyed by data become maps: more than [`MAX_PROPERTIES`] keys, or
/// keys that are all numbers (node and group ids).
fn collapse_maps(object: Value) -> Value {
    let keyed_by_data = object["properties"]
        .as_object()
        .is_some_and(|p| p.len() > MAX_PROPERTIES || (!p.is_empty() && p.keys().all(|k| k.parse::<u64>().is_ok())));
    if keyed_by_data { json!({"type": "object", "additionalProperties": values_schema(&object)}) } else { object }
}

/// Fields whose content is the user's own data (a document, a value, a row):
/// what the tests stored there says nothing about what another client stores.
const USER_DATA: [&str; 13] =
    ["data", "document", "value", "metadata", "properties", "params", "before", "after", "old", "new", "row", "fields", "schema"];

/// `schema` as OpenAPI 3.0 takes it and as far as observation can vouch for
/// it: no empty `required` lists; the user's data any value; a scalar seen
/// only with values may be null too (observation cannot prove it never is).
pub fn tidy(schema: &Value) -> Value {
    let Value::Object(fields) = schema else { return schema.clone() };
    let mut out = Map::new();
    for (k, v) in fields {
        match k.as_str() {
            "required" if v.as_array().is_some_and(Vec::is_empty) => {}
            "required" => {
                out.insert(k.clone(), v.clone());
            }
            "properties" => {
                let properties = v.as_object().map(|p| {
                    p.iter()
                        .map(|(name, s)| {
                            // SQL's `data` is its result set: `{columns, rows}`.
                            let result_set = s["properties"].get("columns").is_some();
                            let s = match name.as_str() {
                                n if USER_DATA.contains(&n) && !result_set => json!({}),
                                // A result set's rows hold the user's values (a table's `rows` is a count).
                                "rows" if s["type"] == "array" => json!({"type": "array", "items": {}}),
                                _ => tidy(s),
                            };
                            (name.clone(), s)
                        })
                        .collect::<Map<String, Value>>()
                });
                out.insert(k.clone(), properties.map(Value::Object).unwrap_or_else(|| v.clone()));
            }
            _ => {
                out.insert(k.clone(), tidy(v));
            }
        }
    }
    if matches!(out.get("type").and_then(Value::as_str), Some("string" | "number" | "integer" | "boolean")) {
        out.insert("nullable".into(), true.into());
    }
    Value::Object(out)
}

/// Where `value` breaks `schema` (`None` when it satisfies it); `at` names the place.
pub fn violation(schema: &Value, value: &Value, at: &str) -> Option<String> {
    if value.is_null() {
        return match type_of(schema) {
            Some(t) if !nullable(schema) => Some(format!("{at}: null where the document says {t}")),
            _ => None,
        };
    }
    let expected = type_of(schema)?;
    let fits = match expected {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        _ => true,
    };
    if !fits {
        return Some(format!("{at}: {value} where the document says {expected}"));
    }
    match value {
        Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| violation(&schema["items"], item, &format!("{at}[{i}]"))),
        Value::Object(fields) => {
            if let Some(missing) =
                schema["required"].as_array().and_then(|r| r.iter().filter_map(Value::as_str).find(|k| !fields.contains_key(*k)))
            {
                return Some(format!("{at}: field {missing:?} missing, which the document requires"));
            }
            fields.iter().find_map(|(k, v)| {
                let field_schema = schema["properties"].get(k).or_else(|| schema.get("additionalProperties"))?;
                violation(field_schema, v, &format!("{at}.{k}"))
            })
        }
        _ => None,
    }
}

/// `schema` with every `$ref` into `components/schemas` replaced by its
/// target (to `depth` levels; deeper ones become any value), and a lone
/// `allOf` (schemars' nullable reference) merged into its parent.
pub fn inline_refs(schema: &Value, components: &Value, depth: usize) -> Value {
    match schema {
        Value::Object(fields) => {
            if let Some(name) = fields.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/components/schemas/")) {
                return if depth == 0 { json!({}) } else { inline_refs(&components[name], components, depth - 1) };
            }
            let mut out: Map<String, Value> = fields.iter().map(|(k, v)| (k.clone(), inline_refs(v, components, depth))).collect();
            if let Some(Value::Array(all)) = out.get("allOf").cloned()
                && let [Value::Object(only)] = all.as_slice()
            {
                out.remove("allOf");
                for (k, v) in only {
                    out.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| inline_refs(v, components, depth)).collect()),
        other => other.clone(),
    }
}

/// What the in-process tests do with every answer (see the module's doc):
/// a typed route's answer is checked against its type's schema (`typed`,
/// `Err` when the route does not state the status it answered); any other
/// with `TESSERA_BLESS=1` records its shape in `observed.json`, else is
/// checked against it.
#[cfg(test)]
pub fn observe(method: &str, template: &str, status: u16, body: &Value, typed: Option<Result<Value, String>>) {
    // The document itself is not described by its own observations.
    if template.is_empty() || status == 204 || template == "/api/v1/openapi.json" || body.is_null() {
        return; // no route, no body, or not a JSON answer (objects, files, text)
    }
    // A probe that fails answers its own body (`{status, reason}`), not an error.
    if status >= 400 && crate::services::request_stats::PROBES.contains(&template) {
        return;
    }
    if status >= 400 {
        let error = &body["error"];
        let sql_error = error["code"].is_string() && error["message"].is_string();
        assert!(error.is_string() || sql_error, "{method} {template} answered {status} without the error body: {body}");
        return;
    }
    let key = route_key(method, template);
    match typed {
        Some(Err(why)) => panic!("{key} answered {status}: {why}"),
        Some(Ok(schema)) => {
            if let Some(why) = violation(&schema, body, "body") {
                panic!("{key} answered {status} with a shape its type's schema does not describe ({why})");
            }
            return;
        }
        None => {}
    }
    if std::env::var("TESSERA_BLESS").is_ok_and(|v| v == "1") {
        record(&key, status, body);
        return;
    }
    if let Some(schema) = OBSERVED.get(&key).and_then(|by_status| by_status.get(&status.to_string()))
        && let Some(why) = violation(schema, body, "body")
    {
        panic!(
            "{key} answered {status} with a shape its OpenAPI document does not describe ({why}); if the change is meant, \
                 refresh router/src/http/openapi/observed.json (see router/src/http/openapi/observed.rs)"
        );
    }
}

/// Where the router itself records the shapes of its JSON answers
/// (`TESSERA_RECORD_API_SHAPES=<observed.json>`): how the routes only real
/// nodes can serve (backups, node lifecycle, rolling update) get their shapes,
/// by running the cluster tests with it set. Off unless set.
pub static RECORDING: LazyLock<Option<std::path::PathBuf>> =
    LazyLock::new(|| std::env::var_os("TESSERA_RECORD_API_SHAPES").filter(|v| !v.is_empty()).map(Into::into));

/// Merges the shape of one answer into the file at `path` (a map of route →
/// status → schema), under a file lock (tests and routers record at once).
pub fn record_into(path: &std::path::Path, key: &str, status: u16, body: &Value) -> std::io::Result<()> {
    use std::io::{Read, Seek, Write};
    let mut file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
    file.lock()?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    let mut observed: Observed = serde_json::from_str(&text).unwrap_or_default();
    let slot = observed.entry(key.to_string()).or_default();
    let shape = infer(body);
    let merged = match slot.get(&status.to_string()) {
        Some(existing) => merge(existing, &shape),
        None => shape,
    };
    slot.insert(status.to_string(), merged);
    let text = serde_json::to_string_pretty(&observed).map_err(std::io::Error::other)? + "\n";
    file.set_len(0)?;
    file.seek(std::io::SeekFrom::Start(0))?;
    file.write_all(text.as_bytes())
}

#[cfg(test)]
fn record(key: &str, status: u16, body: &Value) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/http/openapi/observed.json");
    record_into(std::path::Path::new(path), key, status, body).expect("record into observed.json");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_shapes_keep_what_every_answer_had() {
        let a = infer(&json!({"key": "a", "value": 1, "ttl": null, "tags": []}));
        let b = infer(&json!({"key": "b", "value": 2.5, "tags": ["x"]}));
        let m = merge(&a, &b);
        assert_eq!(m["properties"]["value"]["type"], "number");
        assert_eq!(m["properties"]["ttl"]["nullable"], true);
        assert_eq!(m["properties"]["tags"]["items"]["type"], "string");
        let mut required: Vec<&str> = m["required"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        required.sort();
        assert_eq!(required, ["key", "tags", "value"], "ttl was missing from one answer");
        assert_eq!(violation(&m, &json!({"key": "c", "value": 3, "tags": []}), "body"), None);
        assert!(violation(&m, &json!({"value": 3, "tags": []}), "body").unwrap().contains("\"key\" missing"));
        assert!(violation(&m, &json!({"key": 1, "value": 3, "tags": []}), "body").unwrap().contains("body.key"));
        assert!(violation(&m, &json!({"key": "c", "value": 3, "tags": [1]}), "body").unwrap().contains("body.tags[0]"));
        // Values of several types stay "any value", whatever comes after.
        let mixed = [json!([1]), json!(["x"]), json!([2])].iter().map(infer).reduce(|a, b| merge(&a, &b)).unwrap();
        assert_eq!(violation(&mixed, &json!([true]), "body"), None, "{mixed}");
    }

    #[test]
    fn objects_keyed_by_ids_become_maps() {
        let s = infer(&json!({"1": {"error": "down"}, "2": {"config": {}}}));
        assert!(s.get("properties").is_none(), "{s}");
        assert_eq!(violation(&s, &json!({"3": {"config": {}}}), "body"), None, "another node id is no violation");
    }

    #[test]
    fn objects_keyed_by_data_become_maps() {
        let many: Map<String, Value> = (0..100).map(|i| (format!("k{i}"), json!({"n": i}))).collect();
        let s = infer(&Value::Object(many));
        assert_eq!(s["additionalProperties"]["properties"]["n"]["type"], "integer", "{s}");
        assert!(s.get("properties").is_none());
    }

    #[test]
    fn the_recorded_shapes_are_readable() {
        assert!(OBSERVED.keys().all(|k| k.split_once(' ').is_some_and(|(m, p)| !m.is_empty() && p.starts_with('/'))));
    }
}
