use serde_json::{Value, json};
use std::cmp::Ordering;
use tessera_document::{Direction, Schema, SortSpec, apply_inc, apply_set, apply_unset, apply_update, compare, get_path, sort_documents};

fn names(docs: &[Value]) -> Vec<String> {
    docs.iter().map(|d| d["n"].as_str().unwrap_or("?").to_string()).collect()
}

#[test]
fn sort_multiple_keys() {
    let mut docs = vec![
        json!({"n": "a", "age": 30, "name": "Zed"}),
        json!({"n": "b", "age": 25, "name": "Amy"}),
        json!({"n": "c", "age": 30, "name": "Bob"}),
        json!({"n": "d", "name": "Cat"}),
        json!({"n": "e", "age": 25.0, "name": "Ann"}),
        json!({"n": "f", "age": "thirty", "name": "Dan"}),
    ];
    let spec = SortSpec::parse(&json!([["age", -1], ["name", 1]])).unwrap();
    sort_documents(&mut docs, &spec);
    // strings rank above numbers, missing (null) below
    assert_eq!(names(&docs), ["f", "c", "a", "b", "e", "d"]);

    let spec = SortSpec::parse(&json!([{"age": 1}, {"name": -1}])).unwrap();
    sort_documents(&mut docs, &spec);
    assert_eq!(names(&docs), ["d", "e", "b", "a", "c", "f"]);
}

#[test]
fn sort_object_form_keeps_key_order_when_deserialized() {
    let spec: SortSpec = serde_json::from_str(r#"{"name": 1, "age": -1}"#).unwrap();
    let keys: Vec<_> = spec.keys().iter().map(|k| (k.path.as_str(), k.direction)).collect();
    assert_eq!(keys, vec![("name", Direction::Asc), ("age", Direction::Desc)]);
    let spec = SortSpec::from_json_str(r#"{"z": "desc", "a": "asc"}"#).unwrap();
    assert_eq!(spec.keys()[0].path, "z");
    assert_eq!(spec.keys()[0].direction, Direction::Desc);

    #[derive(serde::Deserialize)]
    struct Req {
        sort: SortSpec,
    }
    let r: Req = serde_json::from_str(r#"{"sort": {"b.c": -1, "a": 1}}"#).unwrap();
    assert_eq!(r.sort.keys()[0].path, "b.c");
    let r: Req = serde_json::from_str(r#"{"sort": [["b", -1], {"a": 1}, "-c"]}"#).unwrap();
    let keys: Vec<_> = r.sort.keys().iter().map(|k| (k.path.as_str(), k.direction)).collect();
    assert_eq!(keys, vec![("b", Direction::Desc), ("a", Direction::Asc), ("c", Direction::Desc)]);
    assert!(serde_json::from_str::<Req>(r#"{"sort": {"a": 2}}"#).is_err());
}

#[test]
fn sort_forms_and_errors() {
    let s = SortSpec::parse(&json!("-age, name")).unwrap();
    assert_eq!(s.keys().len(), 2);
    assert_eq!(s.keys()[0].direction, Direction::Desc);
    assert!(SortSpec::parse(&json!(null)).unwrap().is_empty());
    assert!(SortSpec::parse(&json!({"a": 0})).is_err());
    assert!(SortSpec::parse(&json!({"a": "up"})).is_err());
    assert!(SortSpec::parse(&json!({"a..b": 1})).is_err());
    assert!(SortSpec::parse(&json!(5)).is_err());
    assert!(SortSpec::parse(&json!([{"a": 1, "b": 1}])).is_err());
    assert!(SortSpec::parse(&json!({"a": 1.0})).is_ok());
}

#[test]
fn sort_nested_and_missing() {
    let spec = SortSpec::parse(&json!({"a.b": 1})).unwrap();
    let x = json!({"a": {"b": 1}});
    let y = json!({"a": {"c": 1}});
    let z = json!({"a": {"b": null}});
    assert_eq!(compare(&x, &y, &spec), Ordering::Greater);
    assert_eq!(compare(&y, &z, &spec), Ordering::Equal, "missing sorts as null");
    let spec = SortSpec::parse(&json!({"items.0": -1})).unwrap();
    assert_eq!(compare(&json!({"items": [2]}), &json!({"items": [3]}), &spec), Ordering::Greater);
    assert_eq!(compare(&x, &y, &SortSpec::default()), Ordering::Equal);
}

#[test]
fn schema_validation() {
    let schema = Schema::parse(&json!({
        "type": "object",
        "required": ["name", "age"],
        "properties": {
            "name": {"type": "string", "minLength": 2, "maxLength": 5},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "score": {"type": ["number", "null"], "exclusiveMaximum": 10},
            "role": {"enum": ["admin", "user"]},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
            "address": {
                "type": "object",
                "required": ["city"],
                "properties": {"city": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                "additionalProperties": false
            }
        }
    }))
    .unwrap();
    assert_eq!(schema.validate(&json!({"name": "Ada", "age": 36})), Ok(()));
    assert_eq!(schema.validate(&json!({"name": "Ada", "age": 36.0, "score": null})), Ok(()));
    assert_eq!(
        schema.validate(&json!({"name": "Ada", "age": 36, "role": "user", "tags": ["a"],
            "address": {"city": "X", "zip": "12345"}, "extra": 1})),
        Ok(()),
        "additional properties allowed at the root"
    );

    let errs = schema
        .validate(&json!({
            "name": "A",
            "age": 36.5,
            "score": 10,
            "role": "root",
            "tags": ["a", 2, "c", "d"],
            "address": {"zip": "1234", "country": "UK"}
        }))
        .unwrap_err();
    let has = |needle: &str| errs.iter().any(|e| e.contains(needle));
    assert!(has("$.name: string length 1 is less than minLength 2"), "{errs:?}");
    assert!(has("$.age: expected type integer, got number"), "{errs:?}");
    assert!(has("$.score: 10 must be less than 10"), "{errs:?}");
    assert!(has("$.role: value \"root\" is not one of the allowed values"), "{errs:?}");
    assert!(has("$.tags[1]: expected type string, got integer"), "{errs:?}");
    assert!(has("$.tags: array has 4 items, more than maxItems 3"), "{errs:?}");
    assert!(has("$.address.city: required property is missing"), "{errs:?}");
    assert!(has("$.address.zip: string does not match pattern"), "{errs:?}");
    assert!(has("$.address.country: additional property is not allowed"), "{errs:?}");
    assert_eq!(errs.len(), 9, "{errs:?}");

    let errs = schema.validate(&json!({"age": -1})).unwrap_err();
    assert!(errs.iter().any(|e| e == "$.name: required property is missing"), "{errs:?}");
    assert!(errs.iter().any(|e| e.starts_with("$.age: -1 is less than minimum")), "{errs:?}");
    let errs = schema.validate(&json!([1])).unwrap_err();
    assert_eq!(errs, vec!["$: expected type object, got array".to_string()]);
    let errs = schema.validate(&json!({"name": "Ada", "age": 200})).unwrap_err();
    assert_eq!(errs.len(), 1);
}

#[test]
fn schema_misc() {
    assert!(Schema::parse(&json!(true)).unwrap().validate(&json!(1)).is_ok());
    assert!(Schema::parse(&json!(false)).unwrap().validate(&json!(1)).is_err());
    let s = Schema::parse(&json!({"additionalProperties": {"type": "number"}, "properties": {"a": {}}})).unwrap();
    assert!(s.validate(&json!({"a": "x", "b": 1})).is_ok());
    assert_eq!(s.validate(&json!({"a": "x", "b": "1"})).unwrap_err(), vec!["$.b: expected type number, got string".to_string()]);
    let s = Schema::parse(&json!({"type": "string", "minLength": 3, "title": "ignored"})).unwrap();
    assert!(s.validate(&json!("héé")).is_ok(), "length counts characters");
    let s = Schema::parse(&json!({"minLength": 3})).unwrap();
    assert!(s.validate(&json!(5)).is_ok(), "string keywords ignore numbers");
    let s = Schema::parse(&json!({"const": 1})).unwrap();
    assert!(s.validate(&json!(1.0)).is_ok());
    assert!(s.validate(&json!(2)).is_err());
    assert_eq!(s.source(), &json!({"const": 1}));
}

#[test]
fn schema_parse_errors() {
    for bad in [
        json!({"type": "text"}),
        json!({"type": []}),
        json!({"type": 5}),
        json!({"required": "name"}),
        json!({"required": [1]}),
        json!({"properties": []}),
        json!({"properties": {"a": 5}}),
        json!({"minimum": "0"}),
        json!({"minLength": -1}),
        json!({"enum": "a"}),
        json!({"additionalProperties": 1}),
        json!({"pattern": "("}),
        json!(5),
    ] {
        let e = Schema::parse(&bad).expect_err(&bad.to_string());
        assert!(e.to_string().starts_with("invalid schema at $"), "{e}");
    }
    let e = Schema::parse(&json!({"properties": {"a": {"type": "nope"}}})).unwrap_err();
    assert_eq!(e.path, "$.properties.a");
}

#[test]
fn set_unset_inc() {
    let mut d = json!({"a": 1, "items": [{"q": 1}], "n": null});
    let set = json!({"b.c.d": 5, "a": "x", "items.0.q": 2, "items.1": {"q": 3}, "n.m": true});
    apply_set(&mut d, set.as_object().unwrap()).unwrap();
    assert_eq!(d, json!({"a": "x", "b": {"c": {"d": 5}}, "items": [{"q": 2}, {"q": 3}], "n": {"m": true}}));
    assert_eq!(get_path(&d, "b.c.d"), Some(&json!(5)));

    // errors leave the document unchanged
    let before = d.clone();
    for bad in [json!({"x": 1, "a.b": 1}), json!({"items.5": 1}), json!({"items.name": 1}), json!({"a..b": 1})] {
        assert!(apply_set(&mut d, bad.as_object().unwrap()).is_err(), "{bad}");
        assert_eq!(d, before);
    }

    apply_inc(&mut d, json!({"b.c.d": 2, "counter": 1, "f": 0.5}).as_object().unwrap()).unwrap();
    assert_eq!(d["b"]["c"]["d"], json!(7));
    assert_eq!(d["counter"], json!(1));
    apply_inc(&mut d, json!({"counter": 1.5}).as_object().unwrap()).unwrap();
    assert_eq!(d["counter"], json!(2.5));
    assert!(apply_inc(&mut d, json!({"a": 1}).as_object().unwrap()).is_err());
    assert!(apply_inc(&mut d, json!({"counter": "1"}).as_object().unwrap()).is_err());
    let mut big = json!({"v": i64::MAX});
    apply_inc(&mut big, json!({"v": 1}).as_object().unwrap()).unwrap();
    assert!(big["v"].as_f64().unwrap() > 9.2e18);

    apply_unset(&mut d, ["b.c", "items.0", "missing.x", "f"]).unwrap();
    assert_eq!(d["b"], json!({}));
    assert_eq!(d["items"], json!([null, {"q": 3}]));
    assert!(d.get("f").is_none());

    let mut s = json!("scalar");
    assert!(apply_set(&mut s, json!({"a": 1}).as_object().unwrap()).is_err());
}

#[test]
fn update_documents() {
    let mut d = json!({"a": 1, "b": 2, "c": 3});
    apply_update(&mut d, &json!({"$set": {"x.y": 1}, "$inc": {"a": 10}, "$unset": {"b": ""}})).unwrap();
    assert_eq!(d, json!({"a": 11, "c": 3, "x": {"y": 1}}));
    apply_update(&mut d, &json!({"$unset": ["c"]})).unwrap();
    assert_eq!(d, json!({"a": 11, "x": {"y": 1}}));
    let before = d.clone();
    for bad in [
        json!({}),
        json!({"a": 1}),
        json!({"$push": {"a": 1}}),
        json!({"$set": 1}),
        json!({"$set": {"z": 1}, "$inc": {"x": 1}}),
        json!({"$unset": 5}),
        json!([]),
    ] {
        assert!(apply_update(&mut d, &bad).is_err(), "{bad}");
        assert_eq!(d, before, "atomic on {bad}");
    }
}
