//! The fuzz targets and their seed corpora.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tessera_api::codec;
use tessera_api::command::{Command, KvOp, KvQuery, Operation, Query, QueryResult, Response};
use tessera_api::document::DocOp;
use tessera_api::sql::SqlOp;
use tessera_sql::ExecContext;
use tessera_sql::mem::MemStore;

use super::Target;

/// Every target, in the order the runner reports them.
pub fn all() -> Vec<Target> {
    vec![
        Target { name: "sql", run: sql, seeds: sql_seeds, dictionary: SQL_TOKENS },
        Target { name: "document_filter", run: document_filter, seeds: filter_seeds, dictionary: JSON_TOKENS },
        Target { name: "command_decode", run: command_decode, seeds: command_seeds, dictionary: &[] },
    ]
}

const SQL_TOKENS: &[&str] = &[
    "SELECT ",
    " FROM ",
    " WHERE ",
    " GROUP BY ",
    " HAVING ",
    " ORDER BY ",
    " LIMIT ",
    " OFFSET ",
    " JOIN ",
    " LEFT JOIN ",
    " ON ",
    " UNION ",
    " DISTINCT ",
    " IN (",
    " NOT ",
    " EXISTS (",
    " CASE WHEN ",
    " THEN ",
    " ELSE ",
    " END",
    " CAST(",
    " AS ",
    " NULL",
    " IS NULL",
    " BETWEEN ",
    " LIKE ",
    "'%'",
    " AND ",
    " OR ",
    "; ",
    "BEGIN; ",
    "COMMIT",
    "ROLLBACK",
    "INSERT INTO t VALUES (",
    "UPDATE t SET ",
    "DELETE FROM t",
    "CREATE TABLE ",
    "DROP TABLE ",
    "ALTER TABLE t ",
    "CREATE INDEX i ON t (",
    " DECIMAL(38,10)",
    " VARCHAR(3)",
    " TIMESTAMP ",
    "'2024-02-30'",
    "9223372036854775807",
    "-9223372036854775808",
    "1e308",
    "0.0",
    "/ 0",
    "$1",
    "$0",
    "$99999999999",
    "(SELECT ",
    "count(*)",
    "sum(",
    "avg(",
    "max(",
    "substring(",
    "upper(",
    "coalesce(",
    "length(",
    "'\u{0}'",
    "'é'",
    "\"",
    "--",
    "/*",
    "*/",
    "::",
    "||",
    "%",
    "<>",
];

const JSON_TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"$eq\"",
    "\"$ne\"",
    "\"$gt\"",
    "\"$gte\"",
    "\"$lt\"",
    "\"$lte\"",
    "\"$in\"",
    "\"$nin\"",
    "\"$and\"",
    "\"$or\"",
    "\"$not\"",
    "\"$exists\"",
    "\"$contains\"",
    "\"$regex\"",
    "\"a.b.c\"",
    "\"(a+)+$\"",
    "\"[\"",
    "null",
    "true",
    "false",
    "1e400",
    "-0",
    "\"\\u0000\"",
    "\"\\ud800\"",
];

fn statements_of_slt(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.starts_with("statement") || line.starts_with("query") {
            let mut sql = String::new();
            for l in lines.by_ref() {
                if l.trim().is_empty() || l.starts_with("----") {
                    break;
                }
                sql.push_str(l);
                sql.push('\n');
            }
            out.push(sql);
        }
    }
    out
}

fn sql_seeds() -> Vec<Vec<u8>> {
    let files = [
        include_str!("../../../storage/sql/tests/slt/01_basic.slt"),
        include_str!("../../../storage/sql/tests/slt/02_types.slt"),
        include_str!("../../../storage/sql/tests/slt/03_nulls_ops.slt"),
        include_str!("../../../storage/sql/tests/slt/04_aggregates.slt"),
        include_str!("../../../storage/sql/tests/slt/05_joins.slt"),
        include_str!("../../../storage/sql/tests/slt/06_subqueries.slt"),
        include_str!("../../../storage/sql/tests/slt/07_transactions.slt"),
        include_str!("../../../storage/sql/tests/slt/08_ddl.slt"),
        include_str!("../../../storage/sql/tests/slt/09_constraints.slt"),
        include_str!("../../../storage/sql/tests/slt/10_misc.slt"),
    ];
    files.iter().flat_map(|f| statements_of_slt(f)).map(String::into_bytes).collect()
}

/// A small database the SQL target runs against: a few typed tables with an
/// index, a foreign key and a handful of rows.
fn sql_base() -> &'static MemStore {
    static BASE: OnceLock<MemStore> = OnceLock::new();
    BASE.get_or_init(|| {
        let mut store = MemStore::new();
        let setup = [
            "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL, v INT DEFAULT 0, d DECIMAL(10,2), at TIMESTAMP, flag BOOLEAN)",
            "CREATE TABLE u (id SERIAL PRIMARY KEY, t_id INT REFERENCES t(id), note TEXT UNIQUE, CHECK (t_id > 0))",
            "CREATE INDEX t_v ON t (v)",
            "INSERT INTO t VALUES (1, 'a', 10, 1.50, '2024-01-01 10:00:00', true), (2, 'b', NULL, NULL, NULL, false), (3, 'c', 30, 2.25, '2024-03-01 00:00:00', NULL)",
            "INSERT INTO u (t_id, note) VALUES (1, 'x'), (3, 'y')",
        ];
        for s in setup {
            let out = tessera_sql::execute(&store, s, &[], &ExecContext::default()).expect("fuzz base schema");
            store.apply(&out.writes);
        }
        store
    })
}

/// SQL text (any bytes, read as lossy UTF-8) executed against [`sql_base`]:
/// any result or error is fine, a panic is a crash.
pub fn sql(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let ctx = ExecContext {
        now_ms: 1_700_000_000_000,
        max_result_rows: 1000,
        deadline: Some(Instant::now() + Duration::from_millis(200)),
        enforce_deadline_on_writes: true,
        max_memory_bytes: 64 * 1024 * 1024,
        cancel: None,
        memory_pool: None,
        database: "fuzz".into(),
        max_work: None,
    };
    let params = [json!(1), json!("x"), Value::Null];
    let _ = tessera_sql::is_point_read(&text);
    let _ = tessera_sql::execute(sql_base(), &text, &params, &ctx);
}

fn filter_seeds() -> Vec<Vec<u8>> {
    [
        json!({"age": {"$gt": 30}}),
        json!({"age": {"$gte": 18, "$lt": 65}, "status": "active"}),
        json!({"$or": [{"a": 1}, {"b": {"$in": [1, 2, "x"]}}]}),
        json!({"$and": [{"a.b.c": {"$exists": true}}, {"tags": {"$contains": "x"}}]}),
        json!({"name": {"$regex": "^ab.*c$"}}),
        json!({"name": {"$not": {"$eq": "x"}}, "n": {"$nin": [null, 3]}}),
        json!({"n": {"$ne": null}, "arr.0": 5}),
        json!({}),
    ]
    .iter()
    .map(|v| serde_json::to_vec(v).expect("json"))
    .collect()
}

/// A document filter (JSON bytes) parsed and matched against sample documents.
pub fn document_filter(data: &[u8]) {
    let Ok(filter) = serde_json::from_slice::<Value>(data) else { return };
    let docs = [
        json!({"age": 31, "status": "active", "name": "abxc", "tags": ["x", "y"], "a": {"b": {"c": 1}}, "arr": [5, 6]}),
        json!({"age": "old", "n": null, "name": 7, "a": [1, {"b": 2}]}),
        json!([1, 2, 3]),
        Value::Null,
    ];
    if let Ok(f) = tessera_document::Filter::parse(&filter) {
        for d in &docs {
            let _ = f.matches(d);
        }
        let _ = f.index_hint();
    }
    for d in &docs {
        let _ = tessera_document::matches(&filter, d);
    }
}

fn command_seeds() -> Vec<Vec<u8>> {
    let ops = vec![
        Operation::Kv(KvOp::Put { key: "k".into(), value: json!({"a": [1, 2.5, "x"]}), ttl_secs: Some(60) }),
        Operation::Kv(KvOp::Delete { key: "k".into() }),
        Operation::Kv(KvOp::DeletePrefix { prefix: "p/".into(), range: None }),
        Operation::Kv(KvOp::PutMany { pairs: vec![("a".into(), json!(1)), ("b".into(), Value::Null)] }),
        Operation::Sql(SqlOp {
            database: "default".into(),
            sql: "INSERT INTO t VALUES ($1)".into(),
            params: vec![json!(1)],
            max_result_rows: 100,
            timeout_ms: 1000,
            max_memory_mb: 0,
            transaction: None,
        }),
        Operation::Document(DocOp::Insert { collection: "c".into(), id: "1".into(), data: json!({"x": 1}) }),
        Operation::Document(DocOp::Update { collection: "c".into(), id: "1".into(), update: json!({"$set": {"x": 2}}) }),
    ];
    let mut seeds: Vec<Vec<u8>> = ops
        .into_iter()
        .map(|op| {
            codec::encode(&Command { issued_at_ms: 1_700_000_000_000, op, request_id: Some("0123456789abcdef0123456789abcdef".into()) })
                .expect("encode")
        })
        .collect();
    seeds.push(codec::encode(&Query::Kv(KvQuery::List { prefix: "a".into(), limit: 10, range: None })).expect("encode"));
    seeds.push(codec::encode(&Response::Deleted(3)).expect("encode"));
    seeds
}

/// Bytes as they would arrive in a Raft log entry or an RPC: decoded as every
/// replicated type; a decode error is fine, a panic is a crash.
pub fn command_decode(data: &[u8]) {
    let _ = codec::decode::<Command>(data);
    let _ = codec::decode::<Query>(data);
    let _ = codec::decode::<Response>(data);
    let _ = codec::decode::<QueryResult>(data);
}
