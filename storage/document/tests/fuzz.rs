//! Random inputs never panic: filters, sort specs, schemas and updates either
//! parse or return an error, and evaluation is total.

use serde_json::{Map, Value, json};
use tessera_document::{Filter, Schema, SortSpec, apply_update, compare};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const KEYS: &[&str] = &[
    "a",
    "b",
    "a.b",
    "items.0",
    "items.x",
    "$eq",
    "$ne",
    "$gt",
    "$gte",
    "$lt",
    "$lte",
    "$in",
    "$nin",
    "$and",
    "$or",
    "$nor",
    "$not",
    "$exists",
    "$contains",
    "$regex",
    "$options",
    "$size",
    "$set",
    "$unset",
    "$inc",
    "type",
    "properties",
    "required",
    "items",
    "enum",
    "minimum",
    "maxLength",
    "additionalProperties",
    "0",
    "",
    "a..b",
];

fn value(r: &mut Rng, depth: u32) -> Value {
    match r.below(if depth > 4 { 6 } else { 9 }) {
        0 => Value::Null,
        1 => json!(r.below(2) == 0),
        2 => json!(r.below(20) as i64 - 10),
        3 => json!((r.below(2000) as f64 - 1000.0) / 7.0),
        4 => json!(["i", "a.*", "(", "object", "string", "x", "1"][r.below(7) as usize]),
        5 => json!(u64::MAX - r.below(3)),
        6 | 7 => {
            let mut m = Map::new();
            for _ in 0..r.below(4) {
                m.insert(KEYS[r.below(KEYS.len() as u64) as usize].to_string(), value(r, depth + 1));
            }
            Value::Object(m)
        }
        _ => Value::Array((0..r.below(4)).map(|_| value(r, depth + 1)).collect()),
    }
}

#[test]
fn random_inputs_never_panic() {
    let mut r = Rng(0x1234_5678_9abc_def1);
    let docs: Vec<Value> = (0..30).map(|_| value(&mut r, 0)).collect();
    let mut parsed = 0;
    for _ in 0..20_000 {
        let f = value(&mut r, 0);
        if let Ok(filter) = Filter::parse(&f) {
            parsed += 1;
            for d in &docs {
                let _ = filter.matches(d);
            }
            let _ = filter.index_hint();
        }
        if let Ok(s) = Schema::parse(&f) {
            for d in &docs {
                let _ = s.validate(d);
            }
        }
        if let Ok(s) = SortSpec::parse(&f) {
            let _ = compare(&docs[0], &docs[1], &s);
        }
        let mut d = docs[r.below(docs.len() as u64) as usize].clone();
        let _ = apply_update(&mut d, &f);
    }
    assert!(parsed > 1000, "only {parsed} random filters parsed");
}
