use serde_json::{Value, json};
use tessera_document::{Bound, Filter, FilterError, matches};

fn m(filter: Value, doc: Value) -> bool {
    matches(&filter, &doc).unwrap_or_else(|e| panic!("filter {filter} failed to parse: {e}"))
}

fn doc() -> Value {
    json!({
        "name": "Ada",
        "age": 36,
        "score": 9.5,
        "active": true,
        "nothing": null,
        "tags": ["math", "poetry"],
        "nums": [1, 5, 10],
        "address": {"city": "London", "zip": "N1", "geo": {"lat": 51.5}},
        "items": [{"name": "pen", "qty": 2}, {"name": "ink", "qty": 0}],
        "empty": [],
    })
}

#[test]
fn implicit_equality() {
    assert!(m(json!({"name": "Ada"}), doc()));
    assert!(!m(json!({"name": "ada"}), doc()));
    assert!(m(json!({"age": 36.0}), doc()), "int/float equality");
    assert!(m(json!({"age": 36, "name": "Ada"}), doc()));
    assert!(!m(json!({"age": 36, "name": "Bob"}), doc()));
    assert!(m(json!({"address": {"zip": "N1", "city": "London", "geo": {"lat": 51.5}}}), doc()));
    assert!(!m(json!({"address": {"city": "London"}}), doc()), "object equality is exact");
    assert!(m(json!({"tags": "math"}), doc()), "array element equality");
    assert!(m(json!({"tags": ["math", "poetry"]}), doc()), "whole-array equality");
    assert!(!m(json!({"tags": ["poetry", "math"]}), doc()));
    assert!(m(json!({}), doc()), "empty filter matches all");
    assert!(m(json!({"active": true}), doc()));
    assert!(!m(json!({"active": 1}), doc()), "no bool/number coercion");
    assert!(!m(json!({"age": "36"}), doc()), "no string/number coercion");
}

#[test]
fn nulls_and_missing() {
    assert!(m(json!({"nothing": null}), doc()));
    assert!(m(json!({"missing": null}), doc()), "null matches missing");
    assert!(!m(json!({"name": null}), doc()));
    assert!(m(json!({"name": {"$ne": null}}), doc()));
    assert!(!m(json!({"nothing": {"$ne": null}}), doc()));
    assert!(!m(json!({"missing": {"$ne": null}}), doc()));
    assert!(m(json!({"missing": {"$ne": 5}}), doc()));
    assert!(m(json!({"missing": {"$gte": null}}), doc()));
    assert!(m(json!({"nothing": {"$lte": null}}), doc()));
    assert!(!m(json!({"nothing": {"$gt": null}}), doc()));
    assert!(!m(json!({"missing": {"$gt": 1}}), doc()));
    assert!(!m(json!({"missing": {"$lt": 1}}), doc()));
    assert!(m(json!({"missing": {"$in": [1, null]}}), doc()));
    assert!(!m(json!({"missing": {"$in": [1, 2]}}), doc()));
    assert!(m(json!({"missing": {"$nin": [1, 2]}}), doc()));
}

#[test]
fn eq_ne() {
    assert!(m(json!({"age": {"$eq": 36}}), doc()));
    assert!(!m(json!({"age": {"$eq": 37}}), doc()));
    assert!(m(json!({"age": {"$ne": 37}}), doc()));
    assert!(!m(json!({"age": {"$ne": 36}}), doc()));
    assert!(!m(json!({"tags": {"$ne": "math"}}), doc()), "$ne is negated element equality");
    assert!(m(json!({"tags": {"$ne": "art"}}), doc()));
    assert!(m(json!({"address": {"$eq": {"city": "London", "zip": "N1", "geo": {"lat": 51.5}}}}), doc()));
    assert!(m(json!({"empty": {"$eq": []}}), doc()));
}

#[test]
fn ranges() {
    assert!(m(json!({"age": {"$gt": 35}}), doc()));
    assert!(!m(json!({"age": {"$gt": 36}}), doc()));
    assert!(m(json!({"age": {"$gte": 36}}), doc()));
    assert!(m(json!({"age": {"$gte": 35.5}}), doc()));
    assert!(m(json!({"age": {"$lt": 36.5}}), doc()));
    assert!(!m(json!({"age": {"$lt": 36}}), doc()));
    assert!(m(json!({"age": {"$lte": 36}}), doc()));
    assert!(m(json!({"score": {"$gt": 9, "$lt": 10}}), doc()));
    assert!(!m(json!({"score": {"$gt": 9, "$lt": 9.5}}), doc()));
    // strings
    assert!(m(json!({"name": {"$gt": "Ab"}}), doc()));
    assert!(m(json!({"name": {"$lt": "B"}}), doc()));
    assert!(!m(json!({"name": {"$lt": "Ad"}}), doc()));
    // booleans
    assert!(m(json!({"active": {"$gt": false}}), doc()));
    assert!(!m(json!({"active": {"$lt": true}}), doc()));
    // type bracketing: a number bound never matches a string and vice versa
    assert!(!m(json!({"name": {"$gt": 5}}), doc()));
    assert!(!m(json!({"age": {"$gt": "a"}}), doc()));
    assert!(!m(json!({"age": {"$lt": true}}), doc()));
    assert!(!m(json!({"nothing": {"$lt": 5}}), doc()));
    // arrays: any element
    assert!(m(json!({"nums": {"$gt": 9}}), doc()));
    assert!(!m(json!({"nums": {"$gt": 10}}), doc()));
    assert!(m(json!({"nums": {"$lt": 2}}), doc()));
    assert!(!m(json!({"empty": {"$gt": 0}}), doc()));
    // big integers compare exactly
    let d = json!({"n": u64::MAX});
    assert!(m(json!({"n": {"$gt": i64::MAX}}), d.clone()));
    assert!(m(json!({"n": {"$gt": 1.0e19}}), d));
}

#[test]
fn in_nin() {
    assert!(m(json!({"age": {"$in": [1, 36]}}), doc()));
    assert!(m(json!({"age": {"$in": [1, 36.0]}}), doc()));
    assert!(!m(json!({"age": {"$in": [1, 2]}}), doc()));
    assert!(!m(json!({"age": {"$in": []}}), doc()));
    assert!(m(json!({"tags": {"$in": ["art", "poetry"]}}), doc()));
    assert!(!m(json!({"tags": {"$in": ["art"]}}), doc()));
    assert!(m(json!({"age": {"$nin": [1, 2]}}), doc()));
    assert!(!m(json!({"age": {"$nin": [36]}}), doc()));
    assert!(!m(json!({"tags": {"$nin": ["math"]}}), doc()));
    assert!(m(json!({"age": {"$nin": []}}), doc()));
    assert!(m(json!({"nothing": {"$in": [null]}}), doc()));
}

#[test]
fn exists() {
    assert!(m(json!({"name": {"$exists": true}}), doc()));
    assert!(m(json!({"nothing": {"$exists": true}}), doc()), "null counts as present");
    assert!(!m(json!({"missing": {"$exists": true}}), doc()));
    assert!(m(json!({"missing": {"$exists": false}}), doc()));
    assert!(!m(json!({"name": {"$exists": false}}), doc()));
    assert!(m(json!({"address.geo.lat": {"$exists": 1}}), doc()));
    assert!(m(json!({"address.geo.lon": {"$exists": 0}}), doc()));
    assert!(m(json!({"items.qty": {"$exists": true}}), doc()));
}

#[test]
fn contains() {
    assert!(m(json!({"tags": {"$contains": "math"}}), doc()));
    assert!(!m(json!({"tags": {"$contains": "art"}}), doc()));
    assert!(m(json!({"nums": {"$contains": 5.0}}), doc()));
    assert!(m(json!({"items": {"$contains": {"qty": 0, "name": "ink"}}}), doc()));
    assert!(!m(json!({"empty": {"$contains": 1}}), doc()));
    assert!(!m(json!({"age": {"$contains": 36}}), doc()), "not an array");
    assert!(m(json!({"name": {"$contains": "d"}}), doc()), "substring on strings");
    assert!(!m(json!({"name": {"$contains": "x"}}), doc()));
    assert!(!m(json!({"missing": {"$contains": 1}}), doc()));
}

#[test]
fn regex() {
    assert!(m(json!({"name": {"$regex": "^A"}}), doc()));
    assert!(!m(json!({"name": {"$regex": "^a"}}), doc()));
    assert!(m(json!({"name": {"$regex": "^a", "$options": "i"}}), doc()));
    assert!(m(json!({"tags": {"$regex": "^po"}}), doc()), "array element");
    assert!(!m(json!({"age": {"$regex": "3"}}), doc()), "numbers are not strings");
    assert!(!m(json!({"missing": {"$regex": ".*"}}), doc()));
    assert!(m(json!({"address.city": {"$regex": "don$"}}), doc()));
    assert!(m(json!({"name": {"$not": {"$regex": "^B"}}}), doc()));
}

#[test]
fn size() {
    assert!(m(json!({"tags": {"$size": 2}}), doc()));
    assert!(!m(json!({"tags": {"$size": 3}}), doc()));
    assert!(m(json!({"empty": {"$size": 0}}), doc()));
    assert!(!m(json!({"name": {"$size": 3}}), doc()));
}

#[test]
fn logical() {
    assert!(m(json!({"$and": [{"age": 36}, {"name": "Ada"}]}), doc()));
    assert!(!m(json!({"$and": [{"age": 36}, {"name": "Bob"}]}), doc()));
    assert!(m(json!({"$or": [{"age": 1}, {"name": "Ada"}]}), doc()));
    assert!(!m(json!({"$or": [{"age": 1}, {"name": "Bob"}]}), doc()));
    assert!(m(json!({"$nor": [{"age": 1}, {"name": "Bob"}]}), doc()));
    assert!(!m(json!({"$nor": [{"age": 36}]}), doc()));
    assert!(m(json!({"$not": {"age": 1}}), doc()));
    assert!(!m(json!({"$not": {"age": 36}}), doc()));
    assert!(m(json!({"age": {"$not": {"$gt": 40}}}), doc()));
    assert!(!m(json!({"age": {"$not": {"$gt": 30}}}), doc()));
    assert!(m(json!({"missing": {"$not": {"$gt": 30}}}), doc()), "$not matches missing");
    assert!(m(json!({"age": {"$not": 5}}), doc()));
    assert!(!m(json!({"age": {"$not": 36}}), doc()));
    assert!(m(json!({"$or": [{"$and": [{"age": {"$gte": 30}}, {"active": true}]}, {"x": 1}], "name": "Ada"}), doc()));
}

#[test]
fn nested_paths() {
    assert!(m(json!({"address.city": "London"}), doc()));
    assert!(m(json!({"address.geo.lat": {"$gt": 50}}), doc()));
    assert!(!m(json!({"address.geo.lat": {"$gt": 52}}), doc()));
    assert!(m(json!({"items.0.name": "pen"}), doc()));
    assert!(!m(json!({"items.1.name": "pen"}), doc()));
    assert!(m(json!({"items.name": "ink"}), doc()), "fan-out over array of objects");
    assert!(m(json!({"items.qty": {"$gt": 1}}), doc()));
    assert!(!m(json!({"items.qty": {"$gt": 5}}), doc()));
    assert!(m(json!({"tags.1": "poetry"}), doc()));
    assert!(m(json!({"items.5.name": null}), doc()), "out of range index is missing");
    assert!(m(json!({"name.first": null}), doc()), "path through a scalar is missing");
    assert!(!m(json!({"name.first": {"$exists": true}}), doc()));
}

#[test]
fn non_object_documents() {
    assert!(matches(&json!({"a": null}), &json!(5)).unwrap());
    assert!(!matches(&json!({"a": 1}), &json!([1, 2])).unwrap());
    assert!(matches(&json!({}), &json!("x")).unwrap());
}

#[test]
fn malformed_filters() {
    let cases = [
        json!([1, 2]),
        json!("name"),
        json!(null),
        json!({"age": {"$gt": 1, "plain": 2}}),
        json!({"age": {"$in": 5}}),
        json!({"age": {"$nin": "x"}}),
        json!({"age": {"$exists": "yes"}}),
        json!({"name": {"$regex": 5}}),
        json!({"name": {"$regex": "("}}),
        json!({"name": {"$regex": "a", "$options": "q"}}),
        json!({"name": {"$options": "i"}}),
        json!({"$and": {"a": 1}}),
        json!({"$or": []}),
        json!({"$or": [1]}),
        json!({"$not": [1]}),
        json!({"$gt": 5}),
        json!({"a..b": 1}),
        json!({"": 1}),
        json!({"tags": {"$size": -1}}),
        json!({"tags": {"$size": 1.5}}),
    ];
    for c in cases {
        let e = Filter::parse(&c).expect_err(&format!("{c} should be rejected"));
        assert!(!e.to_string().is_empty());
    }
    assert_eq!(Filter::parse(&json!({"age": {"$between": [1, 2]}})).unwrap_err(), FilterError::UnknownOperator("$between".into()));
    assert_eq!(Filter::parse(&json!({"$where": "x"})).unwrap_err(), FilterError::UnknownOperator("$where".into()));
    let e = Filter::parse(&json!({"name": {"$regex": "("}})).unwrap_err();
    assert!(e.to_string().contains("invalid regular expression"), "{e}");
}

#[test]
fn deep_nesting_is_rejected_not_overflowed() {
    let mut f = json!({"a": 1});
    for _ in 0..200 {
        f = json!({"$and": [f]});
    }
    assert!(Filter::parse(&f).is_err());
    let mut f = json!({"$gt": 1});
    for _ in 0..200 {
        f = json!({"$not": f});
    }
    assert!(Filter::parse(&json!({"a": f})).is_err());
}

#[test]
fn compiled_filter_reuse() {
    let f = Filter::parse(&json!({"age": {"$gte": 18}, "tags": {"$contains": "x"}})).unwrap();
    let docs =
        [json!({"age": 20, "tags": ["x"]}), json!({"age": 17, "tags": ["x"]}), json!({"age": 20, "tags": ["y"]}), json!({"tags": ["x"]})];
    let hits: Vec<bool> = docs.iter().map(|d| f.matches(d)).collect();
    assert_eq!(hits, vec![true, false, false, false]);
    assert!(Filter::match_all().matches(&json!({"any": 1})));
}

#[test]
fn index_hints() {
    let f = Filter::parse(&json!({
        "age": {"$gt": 18, "$lte": 65, "$gte": 10},
        "status": "active",
        "city": {"$in": ["A", "B"]},
        "$and": [{"age": {"$lt": 60}}, {"score": {"$gte": 1.5}}],
        "$or": [{"x": 1}, {"y": 2}],
        "deleted": null,
        "kind": {"$ne": "x"},
        "z": {"$in": [1, null]},
    }))
    .unwrap();
    let hints = f.index_hint();
    let get = |p: &str| hints.iter().find(|(k, _)| k == p).map(|(_, b)| b.clone());
    assert_eq!(get("age"), Some(Bound::Range { lower: Some((json!(18), false)), upper: Some((json!(60), false)) }));
    assert_eq!(get("status"), Some(Bound::Eq(json!("active"))));
    assert_eq!(get("city"), Some(Bound::In(vec![json!("A"), json!("B")])));
    assert_eq!(get("score"), Some(Bound::Range { lower: Some((json!(1.5), true)), upper: None }));
    assert_eq!(get("x"), None);
    assert_eq!(get("deleted"), None, "null equality also matches missing fields");
    assert_eq!(get("kind"), None);
    assert_eq!(get("z"), None);
    assert_eq!(hints.len(), 4);

    // equality wins over a range on the same path
    let f = Filter::parse(&json!({"a": {"$gt": 1, "$eq": 5}})).unwrap();
    assert_eq!(f.index_hint(), vec![("a".to_string(), Bound::Eq(json!(5)))]);
    // $or at top level gives nothing
    assert!(Filter::parse(&json!({"$or": [{"a": 1}]})).unwrap().index_hint().is_empty());

    let b = Bound::Range { lower: Some((json!(18), false)), upper: Some((json!(60), true)) };
    assert!(b.contains(&json!(60)));
    assert!(b.contains(&json!(18.5)));
    assert!(!b.contains(&json!(18)));
    assert!(!b.contains(&json!("30")));
}
