//! Scenarios: the catalog queries `psql` 15 sends for `\dt`, `\di`, `\dv`, `\l`
//! and `\d name` (captured with `psql -E` against PostgreSQL 15, in
//! `tests/psql15/`), and `information_schema`, answer from the database's own
//! tables, indexes, constraints and views.
use serde_json::{Value, json};
use tessera_sql::mem::MemStore;

fn shop() -> MemStore {
    let mut s = MemStore::new();
    for sql in [
        "CREATE TABLE acct (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL DEFAULT 'x', bal NUMERIC(10,2), uq TEXT UNIQUE, CHECK (bal >= 0))",
        "CREATE INDEX acct_name ON acct (name)",
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, acct_id INT REFERENCES acct (id), placed DATE)",
        "CREATE VIEW rich AS SELECT id, name FROM acct WHERE bal > 100",
    ] {
        s.exec(sql, &[]).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    }
    s
}

fn psql(name: &str) -> String {
    let path = format!("{}/tests/psql15/{name}.sql", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn run(s: &mut MemStore, sql: &str) -> Vec<Vec<Value>> {
    s.exec(sql, &[]).unwrap_or_else(|e| panic!("{e:?}\n{sql}")).rows
}

#[test]
fn psql_lists_tables_indexes_views_and_the_database() {
    let mut s = shop();
    assert_eq!(
        run(&mut s, &psql("dt")),
        vec![
            vec![json!("public"), json!("acct"), json!("table"), json!("tessera")],
            vec![json!("public"), json!("orders"), json!("table"), json!("tessera")]
        ]
    );
    let indexes: Vec<(Value, Value)> = run(&mut s, &psql("di")).into_iter().map(|r| (r[1].clone(), r[4].clone())).collect();
    assert_eq!(
        indexes,
        vec![
            (json!("acct_name"), json!("acct")),
            (json!("acct_pkey"), json!("acct")),
            (json!("acct_uq_key"), json!("acct")),
            (json!("orders_pkey"), json!("orders")),
        ]
    );
    let views = run(&mut s, &psql("dv"));
    assert_eq!(views.len(), 1);
    assert_eq!(views[0][1], json!("rich"));
    assert_eq!(views[0][2], json!("view"));
    let databases = run(&mut s, &psql("l"));
    assert_eq!(databases.len(), 1);
    assert_eq!(databases[0][2], json!("UTF8"));
}

#[test]
fn psql_describes_a_table_column_by_column_with_its_indexes_and_checks() {
    let mut s = shop();
    let found = run(&mut s, &psql("d_lookup"));
    assert_eq!(found.len(), 1, "{found:?}");
    let oid = found[0][0].as_i64().expect("an oid").to_string();
    assert_eq!(found[0][1..], [json!("public"), json!("acct")]);
    let with = |name: &str| psql(name).replace("$OID", &oid);

    let table = run(&mut s, &with("d_table"));
    assert_eq!(table[0][0], json!(1), "one check: {table:?}");
    assert_eq!(table[0][1], json!("r"));
    assert_eq!(table[0][2], json!(true), "it has indexes");

    let columns: Vec<Vec<Value>> = run(&mut s, &with("d_columns")).into_iter().map(|r| r[..4].to_vec()).collect();
    assert_eq!(
        columns,
        vec![
            vec![json!("id"), json!("integer"), Value::Null, json!(true)],
            vec![json!("name"), json!("character varying(20)"), json!("'x'"), json!(true)],
            vec![json!("bal"), json!("numeric(10,2)"), Value::Null, json!(false)],
            vec![json!("uq"), json!("text"), Value::Null, json!(false)],
        ]
    );

    let indexes: Vec<(Value, Value, Value)> =
        run(&mut s, &with("d_indexes")).into_iter().map(|r| (r[0].clone(), r[5].clone(), r[6].clone())).collect();
    assert_eq!(
        indexes,
        vec![
            (json!("acct_pkey"), json!("CREATE UNIQUE INDEX acct_pkey ON public.acct USING btree (id)"), json!("PRIMARY KEY (id)")),
            (json!("acct_name"), json!("CREATE INDEX acct_name ON public.acct USING btree (name)"), Value::Null),
            (json!("acct_uq_key"), json!("CREATE UNIQUE INDEX acct_uq_key ON public.acct USING btree (uq)"), json!("UNIQUE (uq)")),
        ]
    );

    let checks = run(&mut s, &with("d_checks"));
    assert_eq!(checks.len(), 1);
    assert!(checks[0][1].as_str().is_some_and(|c| c.starts_with("CHECK (bal >= 0")), "{checks:?}");

    // Features Tessera does not have answer with no rows, not an error.
    for empty in ["d_policies", "d_statistics", "d_publications", "d_inherits", "d_partitions"] {
        assert_eq!(run(&mut s, &with(empty)), Vec::<Vec<Value>>::new(), "{empty}");
    }
}

#[test]
fn information_schema_lists_tables_columns_and_keys() {
    let mut s = shop();
    let tables = run(&mut s, "SELECT table_name, table_type FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1");
    assert_eq!(
        tables,
        vec![vec![json!("acct"), json!("BASE TABLE")], vec![json!("orders"), json!("BASE TABLE")], vec![json!("rich"), json!("VIEW")]]
    );
    let columns = run(
        &mut s,
        "SELECT column_name, data_type, is_nullable, character_maximum_length FROM information_schema.columns \
         WHERE table_name = 'acct' ORDER BY ordinal_position",
    );
    assert_eq!(columns[1], vec![json!("name"), json!("character varying"), json!("NO"), json!(20)]);
    let keys = run(
        &mut s,
        "SELECT tc.constraint_type, k.column_name FROM information_schema.table_constraints tc \
         JOIN information_schema.key_column_usage k ON k.constraint_name = tc.constraint_name \
         WHERE tc.table_name = 'orders' ORDER BY 1",
    );
    assert_eq!(keys, vec![vec![json!("FOREIGN KEY"), json!("acct_id")], vec![json!("PRIMARY KEY"), json!("id")]]);
}

#[test]
fn regclass_casts_and_regular_expressions_work_as_in_postgresql() {
    let mut s = shop();
    let oid = run(&mut s, "SELECT 'acct'::regclass::oid")[0][0].clone();
    let by_name = run(&mut s, "SELECT oid FROM pg_class WHERE relname = 'acct'")[0][0].clone();
    assert_eq!(oid, by_name);
    assert_eq!(run(&mut s, "SELECT 'abc' ~ '^a', 'abc' !~ 'b', 'ABC' ~* 'b'"), vec![vec![json!(true), json!(false), json!(true)]]);
    let err = s.exec("SELECT 'nope'::regclass", &[]).unwrap_err();
    assert!(err.message.contains("does not exist"), "{err:?}");
    let err = s.exec("SELECT 'a' ~ '('", &[]).unwrap_err();
    assert!(err.message.contains("invalid regular expression"), "{err:?}");
}

#[test]
fn sqlalchemy_reflects_a_primary_key_with_unnest_in_the_select_list() {
    let mut s = shop();
    s.exec("CREATE TABLE pair (a INT, b TEXT, c INT, PRIMARY KEY (c, a))", &[]).unwrap();
    let oid = run(&mut s, "SELECT c.oid FROM pg_catalog.pg_class c WHERE c.relname = 'pair'")[0][0].to_string();
    // SQLAlchemy 1.4's get_pk_constraint.
    let sql = format!(
        "SELECT a.attname FROM pg_attribute a JOIN (
            SELECT unnest(ix.indkey) attnum, generate_subscripts(ix.indkey, 1) ord
            FROM pg_index ix WHERE ix.indrelid = {oid} AND ix.indisprimary
         ) k ON a.attnum=k.attnum
         WHERE a.attrelid = {oid} ORDER BY k.ord"
    );
    assert_eq!(run(&mut s, &sql), vec![vec![json!("c")], vec![json!("a")]]);
    assert_eq!(run(&mut s, "SELECT unnest('{3,1,2}') AS x ORDER BY x"), vec![vec![json!(1)], vec![json!(2)], vec![json!(3)]]);
    let err = s.exec("SELECT 1 WHERE unnest('{1}') = 1", &[]).unwrap_err();
    assert!(err.message.contains("set-returning"), "{err:?}");
}

#[test]
fn any_and_all_compare_with_every_element_of_an_array() {
    let mut s = shop();
    assert_eq!(
        run(&mut s, "SELECT 2 = ANY('{1,2}'), 3 = ANY('{1,2}'), 3 <> ALL('{1,2}'), 1 <> ALL('{1,2}')"),
        vec![vec![json!(true), json!(false), json!(true), json!(false)]]
    );
    // SQLAlchemy's get_unique_constraints: the key comes back as an array.
    let oid = run(&mut s, "SELECT 'acct'::regclass")[0][0].to_string();
    let sql = format!(
        "SELECT cons.conname as name, cons.conkey as key, a.attnum as col_num, a.attname as col_name
         FROM pg_catalog.pg_constraint cons join pg_attribute a
           on cons.conrelid = a.attrelid AND a.attnum = ANY(cons.conkey)
         WHERE cons.conrelid = {oid} AND cons.contype = 'u'"
    );
    assert_eq!(run(&mut s, &sql), vec![vec![json!("acct_uq_key"), json!([4]), json!(4), json!("uq")]]);
}

#[test]
fn psql_verbose_listings_roles_functions_and_privileges_answer() {
    let mut s = shop();
    let oid = run(&mut s, "SELECT 'acct'::regclass")[0][0].to_string();
    let with = |name: &str| psql(name).replace("$OID", &oid);
    let table = run(&mut s, &with("dplus_table"));
    assert_eq!(table.len(), 1, "{table:?}");
    assert_eq!(table[0][9], Value::Null, "no storage options");
    let columns = run(&mut s, &with("dplus_columns"));
    assert_eq!(columns.iter().map(|r| r[7].clone()).collect::<Vec<_>>(), [json!("p"), json!("x"), json!("x"), json!("x")], "attstorage");
    let tables = run(&mut s, &psql("dtplus"));
    assert_eq!(tables.len(), 2);
    assert_eq!(tables[0][6], Value::Null, "sizes are not tracked per relation");
    let roles = run(&mut s, &psql("du"));
    assert_eq!(roles[0][0], json!("tessera"));
    assert_eq!(roles[0][8], json!([]), "member of no role");
    assert_eq!(run(&mut s, &psql("df")), Vec::<Vec<Value>>::new());
    let privileges = run(&mut s, &psql("z"));
    assert_eq!(privileges.iter().map(|r| r[1].clone()).collect::<Vec<_>>(), [json!("acct"), json!("orders"), json!("rich")]);
    assert_eq!(privileges[0][4], json!(""), "no column privileges");
}

#[test]
fn table_functions_and_array_subqueries() {
    let mut s = shop();
    assert_eq!(run(&mut s, "SELECT x * 2 FROM generate_series(1, 3) x"), vec![vec![json!(2)], vec![json!(4)], vec![json!(6)]]);
    assert_eq!(run(&mut s, "SELECT count(*) FROM generate_series(10, 1, -3)"), vec![vec![json!(4)]]);
    assert_eq!(run(&mut s, "SELECT u FROM unnest('{5,6}') u ORDER BY u DESC"), vec![vec![json!(6)], vec![json!(5)]]);
    assert_eq!(
        run(&mut s, "SELECT ARRAY(SELECT relname FROM pg_class WHERE relkind = 'r' ORDER BY 1)"),
        vec![vec![json!(["acct", "orders"])]]
    );
    assert_eq!(
        run(&mut s, "SELECT array_to_string(ARRAY(SELECT relname FROM pg_class WHERE relkind = 'v'), ', ')"),
        vec![vec![json!("rich")]]
    );
    let err = s.exec("SELECT * FROM generate_series(1, 10, 0)", &[]).unwrap_err();
    assert!(err.message.contains("step size cannot equal zero"), "{err:?}");
    let err = s.exec("SELECT * FROM generate_series(1, 100000000)", &[]).unwrap_err();
    assert!(err.message.contains("at most"), "{err:?}");
}

#[test]
fn edge_cases_found_in_review_answer_as_postgresql_does() {
    let mut s = shop();
    // More column aliases than a table function has: an error, not a panic.
    let err = s.exec("SELECT * FROM generate_series(1, 3) AS g(a, b)", &[]).unwrap_err();
    assert!(err.message.contains("2 columns specified"), "{err:?}");
    // `= ANY (SELECT …)` reads every row of the subquery.
    assert_eq!(
        run(&mut s, "SELECT 2 = ANY (SELECT x FROM generate_series(1, 3) x), 'a b' = ANY (SELECT 'a b')"),
        vec![vec![json!(true), json!(true)]]
    );
    // `.` matches a newline, as in PostgreSQL's regular expressions.
    assert_eq!(run(&mut s, "SELECT 'a\nb' ~ 'a.b'"), vec![vec![json!(true)]]);
    // A schema-qualified catalog is never a CTE of the same name.
    let relations = run(&mut s, "WITH pg_class AS (SELECT 1 AS x) SELECT count(*) FROM pg_catalog.pg_class");
    assert_eq!(relations, vec![vec![json!(7)]], "two tables, their four indexes and the view");
    // A set-returning call inside a subquery of a set-returning select list.
    assert_eq!(run(&mut s, "SELECT (SELECT unnest('{7}')), unnest('{1,2}')"), vec![vec![json!(7), json!(1)], vec![json!(7), json!(2)]]);
    assert_eq!(run(&mut s, "SELECT cardinality('{}'), pg_size_pretty(9223372036854775807)"), vec![vec![json!(0), json!("8192 PB")]]);
}
