//! JSON-schema-style validation (a subset).
//!
//! Supported keywords:
//! * `type`: `"object"`, `"array"`, `"string"`, `"number"` (any number),
//!   `"integer"` (a number with no fractional part, `1.0` included), `"boolean"`,
//!   `"null"`, or an array of these;
//! * objects: `required` (array of names), `properties` (name → schema,
//!   recursive), `additionalProperties` (`false`, `true` or a schema applied to
//!   properties not listed in `properties`);
//! * arrays: `items` (schema applied to every element), `minItems`, `maxItems`;
//! * strings: `minLength`, `maxLength` (counted in Unicode scalar values), `pattern` (regex);
//! * numbers: `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`;
//! * any: `enum` (array of allowed values, compared with numeric normalisation), `const`.
//!
//! A schema may also be `true` (accept anything) or `false` (reject anything).
//! Type-specific keywords only apply to values of that type (`minLength` ignores
//! numbers), as in JSON Schema. Unknown keywords (`title`, `description`,
//! `$schema`, `format`, ...) are ignored; a known keyword with a malformed value is
//! a [`SchemaError`].
//!
//! Validation reports every violation, each message starting with the path of
//! the offending value: `$` is the document, `$.address.zip` a nested field,
//! `$.tags[2]` an array element.

use crate::MAX_DEPTH;
use crate::error::SchemaError;
use crate::order::values_equal;
use regex::Regex;
use serde_json::{Map, Value};

/// A compiled validation schema.
#[derive(Debug, Clone)]
pub struct Schema {
    root: Node,
    source: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JsonType {
    Object,
    Array,
    String,
    Number,
    Integer,
    Boolean,
    Null,
}

impl JsonType {
    fn parse(s: &str) -> Option<JsonType> {
        Some(match s {
            "object" => JsonType::Object,
            "array" => JsonType::Array,
            "string" => JsonType::String,
            "number" => JsonType::Number,
            "integer" => JsonType::Integer,
            "boolean" => JsonType::Boolean,
            "null" => JsonType::Null,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            JsonType::Object => "object",
            JsonType::Array => "array",
            JsonType::String => "string",
            JsonType::Number => "number",
            JsonType::Integer => "integer",
            JsonType::Boolean => "boolean",
            JsonType::Null => "null",
        }
    }

    fn accepts(self, v: &Value) -> bool {
        match self {
            JsonType::Object => v.is_object(),
            JsonType::Array => v.is_array(),
            JsonType::String => v.is_string(),
            JsonType::Number => v.is_number(),
            JsonType::Integer => match v {
                Value::Number(n) => n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0),
                _ => false,
            },
            JsonType::Boolean => v.is_boolean(),
            JsonType::Null => v.is_null(),
        }
    }
}

fn value_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[derive(Debug, Clone, Default)]
enum Additional {
    #[default]
    Allow,
    Deny,
    Schema(Box<Node>),
}

#[derive(Debug, Clone, Default)]
struct Node {
    never: bool,
    types: Option<Vec<JsonType>>,
    required: Vec<String>,
    properties: Vec<(String, Node)>,
    additional: Additional,
    items: Option<Box<Node>>,
    min_items: Option<usize>,
    max_items: Option<usize>,
    enumeration: Option<Vec<Value>>,
    constant: Option<Value>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    exclusive_minimum: Option<f64>,
    exclusive_maximum: Option<f64>,
    min_length: Option<usize>,
    max_length: Option<usize>,
    pattern: Option<Regex>,
}

fn err(path: &str, message: impl Into<String>) -> SchemaError {
    SchemaError { path: path.to_string(), message: message.into() }
}

fn get_f64(m: &Map<String, Value>, key: &str, path: &str) -> Result<Option<f64>, SchemaError> {
    match m.get(key) {
        None => Ok(None),
        Some(v) => v.as_f64().map(Some).ok_or_else(|| err(path, format!("'{key}' must be a number"))),
    }
}

fn get_usize(m: &Map<String, Value>, key: &str, path: &str) -> Result<Option<usize>, SchemaError> {
    match m.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 1e18).map(|f| f as u64))
            .map(|n| Some(usize::try_from(n).unwrap_or(usize::MAX)))
            .ok_or_else(|| err(path, format!("'{key}' must be a non-negative integer"))),
    }
}

fn parse_node(v: &Value, path: &str, depth: usize) -> Result<Node, SchemaError> {
    if depth > MAX_DEPTH {
        return Err(err(path, "schema is nested too deeply"));
    }
    let m = match v {
        Value::Bool(true) => return Ok(Node::default()),
        Value::Bool(false) => {
            return Ok(Node { never: true, ..Node::default() });
        }
        Value::Object(m) => m,
        _ => return Err(err(path, "a schema must be an object or a boolean")),
    };
    let mut n = Node::default();
    if let Some(t) = m.get("type") {
        let one = |s: &Value| -> Result<JsonType, SchemaError> {
            s.as_str()
                .and_then(JsonType::parse)
                .ok_or_else(|| err(path, format!("unknown type {s} (expected object, array, string, number, integer, boolean or null)")))
        };
        n.types = Some(match t {
            Value::Array(ts) if !ts.is_empty() => ts.iter().map(one).collect::<Result<_, _>>()?,
            Value::Array(_) => return Err(err(path, "'type' must not be an empty array")),
            other => vec![one(other)?],
        });
    }
    if let Some(r) = m.get("required") {
        let arr = r.as_array().ok_or_else(|| err(path, "'required' must be an array of strings"))?;
        n.required = arr
            .iter()
            .map(|s| s.as_str().map(str::to_string).ok_or_else(|| err(path, "'required' must be an array of strings")))
            .collect::<Result<_, _>>()?;
    }
    if let Some(p) = m.get("properties") {
        let props = p.as_object().ok_or_else(|| err(path, "'properties' must be an object"))?;
        for (k, s) in props {
            n.properties.push((k.clone(), parse_node(s, &format!("{path}.properties.{k}"), depth + 1)?));
        }
    }
    if let Some(a) = m.get("additionalProperties") {
        n.additional = match a {
            Value::Bool(true) => Additional::Allow,
            Value::Bool(false) => Additional::Deny,
            Value::Object(_) => Additional::Schema(Box::new(parse_node(a, &format!("{path}.additionalProperties"), depth + 1)?)),
            _ => {
                return Err(err(path, "'additionalProperties' must be a boolean or a schema"));
            }
        };
    }
    if let Some(i) = m.get("items") {
        n.items = Some(Box::new(parse_node(i, &format!("{path}.items"), depth + 1)?));
    }
    if let Some(e) = m.get("enum") {
        n.enumeration = Some(e.as_array().cloned().ok_or_else(|| err(path, "'enum' must be an array"))?);
    }
    n.constant = m.get("const").cloned();
    n.minimum = get_f64(m, "minimum", path)?;
    n.maximum = get_f64(m, "maximum", path)?;
    n.exclusive_minimum = get_f64(m, "exclusiveMinimum", path)?;
    n.exclusive_maximum = get_f64(m, "exclusiveMaximum", path)?;
    n.min_length = get_usize(m, "minLength", path)?;
    n.max_length = get_usize(m, "maxLength", path)?;
    n.min_items = get_usize(m, "minItems", path)?;
    n.max_items = get_usize(m, "maxItems", path)?;
    if let Some(p) = m.get("pattern") {
        let s = p.as_str().ok_or_else(|| err(path, "'pattern' must be a string"))?;
        n.pattern =
            Some(regex::RegexBuilder::new(s).size_limit(1 << 20).build().map_err(|e| err(path, format!("invalid 'pattern': {e}")))?);
    }
    Ok(n)
}

fn child_path(path: &str, key: &str) -> String {
    format!("{path}.{key}")
}

fn validate_node(n: &Node, v: &Value, path: &str, errors: &mut Vec<String>) {
    if n.never {
        errors.push(format!("{path}: no value is allowed here"));
        return;
    }
    if let Some(types) = n.types.as_ref().filter(|ts| !ts.iter().any(|t| t.accepts(v))) {
        let names: Vec<_> = types.iter().map(|t| t.name()).collect();
        errors.push(format!("{path}: expected type {}, got {}", names.join(" or "), value_type_name(v)));
        return;
    }
    if n.enumeration.as_ref().is_some_and(|e| !e.iter().any(|x| values_equal(x, v))) {
        errors.push(format!("{path}: value {v} is not one of the allowed values"));
    }
    if let Some(c) = n.constant.as_ref().filter(|c| !values_equal(c, v)) {
        errors.push(format!("{path}: value must be {c}"));
    }
    match v {
        Value::Object(m) => {
            for r in &n.required {
                if !m.contains_key(r) {
                    errors.push(format!("{}: required property is missing", child_path(path, r)));
                }
            }
            for (k, child) in &n.properties {
                if let Some(cv) = m.get(k) {
                    validate_node(child, cv, &child_path(path, k), errors);
                }
            }
            match &n.additional {
                Additional::Allow => {}
                Additional::Deny => {
                    for k in m.keys().filter(|k| !n.properties.iter().any(|(p, _)| p == *k)) {
                        errors.push(format!("{}: additional property is not allowed", child_path(path, k)));
                    }
                }
                Additional::Schema(s) => {
                    for (k, cv) in m.iter().filter(|(k, _)| !n.properties.iter().any(|(p, _)| p == *k)) {
                        validate_node(s, cv, &child_path(path, k), errors);
                    }
                }
            }
        }
        Value::Array(a) => {
            if let Some(min) = n.min_items.filter(|min| a.len() < *min) {
                errors.push(format!("{path}: array has {} items, fewer than minItems {min}", a.len()));
            }
            if let Some(max) = n.max_items.filter(|max| a.len() > *max) {
                errors.push(format!("{path}: array has {} items, more than maxItems {max}", a.len()));
            }
            if let Some(items) = &n.items {
                for (i, e) in a.iter().enumerate() {
                    validate_node(items, e, &format!("{path}[{i}]"), errors);
                }
            }
        }
        Value::String(s) => {
            let len = s.chars().count();
            if let Some(min) = n.min_length.filter(|min| len < *min) {
                errors.push(format!("{path}: string length {len} is less than minLength {min}"));
            }
            if let Some(max) = n.max_length.filter(|max| len > *max) {
                errors.push(format!("{path}: string length {len} is more than maxLength {max}"));
            }
            if let Some(re) = n.pattern.as_ref().filter(|re| !re.is_match(s)) {
                errors.push(format!("{path}: string does not match pattern '{}'", re.as_str()));
            }
        }
        Value::Number(num) => {
            let x = num.as_f64().unwrap_or(f64::NAN);
            if let Some(min) = n.minimum.filter(|m| x < *m) {
                errors.push(format!("{path}: {num} is less than minimum {min}"));
            }
            if let Some(max) = n.maximum.filter(|m| x > *m) {
                errors.push(format!("{path}: {num} is greater than maximum {max}"));
            }
            if let Some(min) = n.exclusive_minimum.filter(|m| x <= *m) {
                errors.push(format!("{path}: {num} must be greater than {min}"));
            }
            if let Some(max) = n.exclusive_maximum.filter(|m| x >= *m) {
                errors.push(format!("{path}: {num} must be less than {max}"));
            }
        }
        _ => {}
    }
}

impl Schema {
    /// Compile a schema document.
    pub fn parse(schema: &Value) -> Result<Schema, SchemaError> {
        Ok(Schema { root: parse_node(schema, "$", 0)?, source: schema.clone() })
    }

    /// Validate a document; `Err` lists every violation, each prefixed with its path.
    pub fn validate(&self, doc: &Value) -> Result<(), Vec<String>> {
        let mut errors = Vec::new();
        validate_node(&self.root, doc, "$", &mut errors);
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }

    /// The schema document this was compiled from (for persisting it).
    pub fn source(&self) -> &Value {
        &self.source
    }
}
