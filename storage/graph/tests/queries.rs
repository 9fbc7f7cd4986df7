//! The pattern language and traversal against an in-memory graph: every
//! construct of the grammar, evaluation semantics, and error positions.

use serde_json::{Map, Value, json};
use tessera_graph::eval::{Options, run_parsed};
use tessera_graph::mem::MemGraph;
use tessera_graph::{Direction, EvalError, QueryOutput, TraversalSpec, parse, run_query, traverse};

/// alice → bob → carol → dave → alice (KNOWS, a cycle), WORKS_AT edges to two
/// companies, and erin with a self-loop.
fn graph() -> MemGraph {
    let mut g = MemGraph::new();
    g.node("alice", "Person", json!({"name": "Alice", "age": 30, "city": "Oslo"}))
        .node("bob", "Person", json!({"name": "Bob", "age": 25, "city": "Paris"}))
        .node("carol", "Person", json!({"name": "Carol", "age": 35, "city": "Oslo"}))
        .node("dave", "Person", json!({"name": "Dave", "age": 40, "city": "Rome", "vip": true}))
        .node("erin", "Person", json!({"name": "Erin"}))
        .node("acme", "Company", json!({"name": "Acme"}))
        .node("globex", "Company", json!({"name": "Globex"}))
        .edge("k1", "alice", "bob", "KNOWS", json!({"since": 2010}))
        .edge("k2", "bob", "carol", "KNOWS", json!({"since": 2015}))
        .edge("k3", "carol", "dave", "KNOWS", json!({"since": 2020}))
        .edge("k4", "dave", "alice", "KNOWS", json!({"since": 2021}))
        .edge("w1", "alice", "acme", "WORKS_AT", json!({}))
        .edge("w2", "bob", "acme", "WORKS_AT", json!({}))
        .edge("w3", "carol", "globex", "WORKS_AT", json!({}))
        .edge("l1", "erin", "erin", "LIKES", json!({}));
    g
}

fn run_with(q: &str, params: Value) -> QueryOutput {
    let params: Map<String, Value> = params.as_object().cloned().unwrap_or_default();
    match run_query(&graph(), q, &params, Options::default()) {
        Ok(out) => out,
        Err(e) => panic!("{q}: {e}"),
    }
}

fn run(q: &str) -> QueryOutput {
    run_with(q, json!({}))
}

/// The rows, each row as JSON, sorted (for order-insensitive comparisons).
fn sorted(out: &QueryOutput) -> Vec<Value> {
    let mut rows: Vec<Value> = out.rows.iter().map(|r| json!(r)).collect();
    rows.sort_by_key(|r| r.to_string());
    rows
}

fn col(out: &QueryOutput) -> Vec<Value> {
    let mut v: Vec<Value> = out.rows.iter().map(|r| r[0].clone()).collect();
    v.sort_by_key(|r| r.to_string());
    v
}

fn err(q: &str) -> (String, Option<usize>) {
    match run_query(&graph(), q, &Map::new(), Options::default()) {
        Err(EvalError::Query(e)) => (e.message, e.position),
        Ok(out) => panic!("{q} should fail, got {out:?}"),
        Err(EvalError::Source(_)) => unreachable!(),
    }
}

#[test]
fn node_patterns_with_label_and_properties() {
    assert_eq!(run("MATCH (n) RETURN count(*)").rows, vec![vec![json!(7)]]);
    assert_eq!(run("MATCH (n:Company) RETURN n.name").rows.len(), 2);
    assert_eq!(col(&run("MATCH (p:Person {city: 'Oslo'}) RETURN p.name")), vec![json!("Alice"), json!("Carol")]);
    assert_eq!(col(&run("MATCH (p:Person {city: 'Oslo', age: 35}) RETURN p.name")), vec![json!("Carol")]);
    assert_eq!(col(&run("MATCH ({name: 'Acme'}) RETURN 1")), vec![json!(1)]);
    assert_eq!(col(&run_with("MATCH (p {age: $a}) RETURN id(p)", json!({"a": 40}))), vec![json!("dave")]);
    // A whole node is returned as {id, label, properties}.
    let out = run("MATCH (c:Company {name: 'Globex'}) RETURN c");
    assert_eq!(out.rows[0][0], json!({"id": "globex", "label": "Company", "properties": {"name": "Globex"}}));
    assert_eq!(out.columns, vec!["c"]);
}

#[test]
fn relationship_types_and_directions() {
    let out = run("MATCH (a:Person)-[:KNOWS]->(b:Person) RETURN a.name, b.name");
    assert_eq!(sorted(&out), vec![json!(["Alice", "Bob"]), json!(["Bob", "Carol"]), json!(["Carol", "Dave"]), json!(["Dave", "Alice"])]);
    let out = run("MATCH (a {name: 'Alice'})<-[:KNOWS]-(b) RETURN b.name");
    assert_eq!(col(&out), vec![json!("Dave")]);
    let out = run("MATCH (a {name: 'Alice'})-[:KNOWS]-(b) RETURN b.name");
    assert_eq!(col(&out), vec![json!("Bob"), json!("Dave")]);
    let out = run("MATCH (a {name: 'Alice'})-->(b) RETURN b.name");
    assert_eq!(col(&out), vec![json!("Acme"), json!("Bob")]);
    let out = run("MATCH (a {name: 'Acme'})<--(b) RETURN b.name");
    assert_eq!(col(&out), vec![json!("Alice"), json!("Bob")]);
    let out = run("MATCH (a {name: 'Alice'})--(b) RETURN count(*)");
    assert_eq!(out.rows, vec![vec![json!(3)]]);
    let out = run("MATCH (a {name: 'Alice'})-[r:KNOWS|WORKS_AT]->(b) RETURN type(r), b.name ORDER BY b.name");
    assert_eq!(out.rows, vec![vec![json!("WORKS_AT"), json!("Acme")], vec![json!("KNOWS"), json!("Bob")]]);
    let out = run("MATCH (a)-[r:KNOWS {since: 2015}]->(b) RETURN r");
    assert_eq!(
        out.rows[0][0],
        json!({"id": "k2", "from_node": "bob", "to_node": "carol", "label": "KNOWS", "properties": {"since": 2015}})
    );
    // A self-loop matches once in each direction form.
    assert_eq!(run("MATCH (e)-[:LIKES]->(x) RETURN x.name").rows, vec![vec![json!("Erin")]]);
    assert_eq!(run("MATCH (e)-[:LIKES]-(x) RETURN count(*)").rows, vec![vec![json!(1)]]);
    assert_eq!(run("MATCH (e)<-[:LIKES]-(e) RETURN count(*)").rows, vec![vec![json!(1)]]);
}

#[test]
fn chains_of_hops() {
    let out = run("MATCH (a:Person {name: 'Alice'})-[:KNOWS]->(b)-[:KNOWS]->(c)-[:WORKS_AT]->(co) RETURN b.name, c.name, co.name");
    assert_eq!(out.rows, vec![vec![json!("Bob"), json!("Carol"), json!("Globex")]]);
    // The anchor may sit in the middle or at the end; the chain extends both ways.
    let out = run("MATCH (x)-[:KNOWS]->(y)-[:WORKS_AT]->(c:Company {name: 'Acme'}) RETURN x.name, y.name ORDER BY x.name");
    assert_eq!(out.rows, vec![vec![json!("Alice"), json!("Bob")], vec![json!("Dave"), json!("Alice")]]);
    assert_eq!(out.plan, vec!["c by label Company"]);
    // Mixed directions.
    let out = run("MATCH (p1:Person)-[:WORKS_AT]->(c)<-[:WORKS_AT]-(p2:Person) RETURN p1.name, p2.name ORDER BY p1.name");
    assert_eq!(out.rows, vec![vec![json!("Alice"), json!("Bob")], vec![json!("Bob"), json!("Alice")]]);
}

#[test]
fn variable_length_relationships() {
    let names = |q: &str| col(&run(q));
    assert_eq!(names("MATCH (a {name: 'Alice'})-[:KNOWS*1..3]->(b) RETURN b.name"), vec![json!("Bob"), json!("Carol"), json!("Dave")]);
    assert_eq!(names("MATCH (a {name: 'Alice'})-[:KNOWS*2]->(b) RETURN b.name"), vec![json!("Carol")]);
    assert_eq!(names("MATCH (a {name: 'Alice'})-[:KNOWS*..2]->(b) RETURN b.name"), vec![json!("Bob"), json!("Carol")]);
    assert_eq!(names("MATCH (a {name: 'Alice'})-[:KNOWS*0..1]->(b) RETURN b.name"), vec![json!("Alice"), json!("Bob")]);
    assert_eq!(names("MATCH (a {name: 'Alice'})-[:KNOWS*3..]->(b) RETURN b.name"), vec![json!("Alice"), json!("Dave")]);
    // `*` goes around the 4-cycle once: each edge at most once per path.
    assert_eq!(run("MATCH (a {name: 'Alice'})-[:KNOWS*]->(b) RETURN count(*)").rows, vec![vec![json!(4)]]);
    assert_eq!(names("MATCH (a {name: 'Alice'})<-[:KNOWS*2]-(b) RETURN b.name"), vec![json!("Carol")]);
    assert_eq!(run("MATCH (a {name: 'Alice'})-[:KNOWS*2]-(b) RETURN count(*)").rows, vec![vec![json!(2)]]);
    // The variable binds the list of edges.
    let out = run("MATCH (a {name: 'Alice'})-[r:KNOWS*2..2]->(b) RETURN size(r), r");
    assert_eq!(out.rows[0][0], json!(2));
    let ids: Vec<&str> = out.rows[0][1].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec!["k1", "k2"]);
    // Properties on a variable-length relationship apply to every edge.
    assert_eq!(names("MATCH (a {name: 'Alice'})-[:KNOWS*1..3 {since: 2010}]->(b) RETURN b.name"), vec![json!("Bob")]);
    // Followed by more hops.
    let out = run("MATCH (a {name: 'Alice'})-[:KNOWS*1..2]->(b)-[:WORKS_AT]->(c) RETURN b.name, c.name");
    assert_eq!(sorted(&out), vec![json!(["Bob", "Acme"]), json!(["Carol", "Globex"])]);
}

#[test]
fn where_comparisons_and_logic() {
    let names = |q: &str| col(&run(q));
    assert_eq!(names("MATCH (p:Person) WHERE p.age > 30 RETURN p.name"), vec![json!("Carol"), json!("Dave")]);
    assert_eq!(names("MATCH (p:Person) WHERE p.age >= 30 RETURN p.name"), vec![json!("Alice"), json!("Carol"), json!("Dave")]);
    assert_eq!(names("MATCH (p:Person) WHERE p.age < 30 RETURN p.name"), vec![json!("Bob")]);
    assert_eq!(names("MATCH (p:Person) WHERE p.age <= 30 RETURN p.name"), vec![json!("Alice"), json!("Bob")]);
    assert_eq!(names("MATCH (p:Person) WHERE p.age = 30.0 RETURN p.name"), vec![json!("Alice")]);
    assert_eq!(names("MATCH (p:Person) WHERE p.city <> 'Oslo' RETURN p.name"), vec![json!("Bob"), json!("Dave")]);
    assert_eq!(names("MATCH (p:Person) WHERE p.city != 'Oslo' AND p.age > 30 RETURN p.name"), vec![json!("Dave")]);
    assert_eq!(names("MATCH (p:Person) WHERE p.city = 'Rome' OR p.age < 26 RETURN p.name"), vec![json!("Bob"), json!("Dave")]);
    assert_eq!(names("MATCH (p:Person) WHERE NOT p.city = 'Oslo' RETURN p.name"), vec![json!("Bob"), json!("Dave")]);
    assert_eq!(names("MATCH (p:Person) WHERE NOT (p.age > 26 AND p.age < 40) RETURN p.name"), vec![json!("Bob"), json!("Dave")]);
    assert_eq!(names("MATCH (p:Person) WHERE p.vip = true RETURN p.name"), vec![json!("Dave")]);
    assert_eq!(names("MATCH (p:Person) WHERE p.age IS NULL RETURN p.name"), vec![json!("Erin")]);
    assert_eq!(names("MATCH (p:Person) WHERE p.vip IS NOT NULL RETURN p.name"), vec![json!("Dave")]);
    // Comparing with null is unknown, never true.
    assert!(run("MATCH (p:Person) WHERE p.age = null RETURN p").rows.is_empty());
    assert!(run("MATCH (p:Person) WHERE p.age > 'x' RETURN p").rows.is_empty());
    assert_eq!(names("MATCH (p:Person) WHERE p.name IN ['Bob', 'Erin', 'Zed'] RETURN p.name"), vec![json!("Bob"), json!("Erin")]);
    assert_eq!(
        names("MATCH (p:Person) WHERE p.name STARTS WITH 'Ca' OR p.name ENDS WITH 've' RETURN p.name"),
        vec![json!("Carol"), json!("Dave")]
    );
    assert_eq!(names("MATCH (p:Person) WHERE p.name CONTAINS 'li' RETURN p.name"), vec![json!("Alice")]);
    assert_eq!(names("MATCH (p:Person) WHERE p.age > -1 AND p.age < 26.5 RETURN p.name"), vec![json!("Bob")]);
    assert_eq!(names("match (p:Person) where toLower(p.name) = 'bob' return p.name"), vec![json!("Bob")]);
    // Conditions over two variables, and on relationships.
    let out = run("MATCH (a:Person)-[r:KNOWS]->(b:Person) WHERE b.age > a.age AND r.since >= 2015 RETURN a.name");
    assert_eq!(col(&out), vec![json!("Bob"), json!("Carol")]);
    let out = run("MATCH (a:Person)-[r:KNOWS]->(b:Person) WHERE a.age > b.age RETURN a.name, b.name ORDER BY a.name");
    assert_eq!(out.rows, vec![vec![json!("Alice"), json!("Bob")], vec![json!("Dave"), json!("Alice")]]);
    // A false constant condition matches nothing.
    assert!(run("MATCH (p) WHERE 1 = 2 RETURN p").rows.is_empty());
}

#[test]
fn parameters() {
    let out = run_with("MATCH (p:Person) WHERE p.city = $city AND p.age > $min RETURN p.name", json!({"city": "Oslo", "min": 31}));
    assert_eq!(col(&out), vec![json!("Carol")]);
    let out = run_with("MATCH (p:Person) WHERE p.name IN $names RETURN p.name LIMIT $n", json!({"names": ["Bob", "Dave"], "n": 1}));
    assert_eq!(out.rows.len(), 1);
    let (msg, pos) = match run_query(&graph(), "MATCH (p) WHERE p.x = $nope RETURN p", &Map::new(), Options::default()) {
        Err(EvalError::Query(e)) => (e.message, e.position),
        other => panic!("{other:?}"),
    };
    assert!(msg.contains("$nope"), "{msg}");
    assert_eq!(pos, Some(22));
}

#[test]
fn return_forms() {
    let out = run("MATCH (p:Person {name: 'Bob'}) RETURN p.name AS who, p.age, id(p) AS id, label(p), labels(p), properties(p).city");
    assert_eq!(out.columns, vec!["who", "p.age", "id", "label(p)", "labels(p)", "properties(p).city"]);
    assert_eq!(out.rows, vec![vec![json!("Bob"), json!(25), json!("bob"), json!("Person"), json!(["Person"]), json!("Paris")]]);
    // DISTINCT.
    assert_eq!(run("MATCH (p:Person) WHERE p.city IS NOT NULL RETURN DISTINCT p.city").rows.len(), 3);
    assert_eq!(
        run("MATCH (p:Person)-[:WORKS_AT]->(c) RETURN DISTINCT c.name ORDER BY c.name").rows,
        vec![vec![json!("Acme")], vec![json!("Globex")]]
    );
    // count(*), count(expr), count(DISTINCT), grouping, other aggregates.
    assert_eq!(
        run("MATCH (p:Person) RETURN count(*), count(p.age), count(DISTINCT p.city)").rows,
        vec![vec![json!(5), json!(4), json!(3)]]
    );
    let out = run("MATCH (p:Person)-[:WORKS_AT]->(c) RETURN c.name AS company, count(*) AS staff ORDER BY staff DESC");
    assert_eq!(out.rows, vec![vec![json!("Acme"), json!(2)], vec![json!("Globex"), json!(1)]]);
    let out = run("MATCH (p:Person) RETURN sum(p.age), avg(p.age), min(p.age), max(p.name), collect(p.city)");
    assert_eq!(out.rows[0][0], json!(130));
    assert_eq!(out.rows[0][1], json!(32.5));
    assert_eq!(out.rows[0][2], json!(25));
    assert_eq!(out.rows[0][3], json!("Erin"));
    assert_eq!(out.rows[0][4].as_array().unwrap().len(), 4);
    // No match: one row of empty aggregates, none when grouped.
    assert_eq!(run("MATCH (p:Nobody) RETURN count(*)").rows, vec![vec![json!(0)]]);
    assert!(run("MATCH (p:Nobody) RETURN p.name, count(*)").rows.is_empty());
    // ORDER BY, SKIP, LIMIT.
    let out = run("MATCH (p:Person) WHERE p.age IS NOT NULL RETURN p.name ORDER BY p.age DESC SKIP 1 LIMIT 2");
    assert_eq!(out.rows, vec![vec![json!("Carol")], vec![json!("Alice")]]);
    let out = run("MATCH (p:Person) RETURN p.name, p.age ORDER BY p.age, p.name");
    assert_eq!(out.rows.last().unwrap(), &vec![json!("Erin"), json!(null)], "null sorts last");
    assert_eq!(run("MATCH (n) RETURN n LIMIT 3").rows.len(), 3);
    assert_eq!(run("MATCH (n) RETURN n LIMIT 0").rows.len(), 0);
}

#[test]
fn several_patterns_share_variables() {
    let out = run("MATCH (a:Person)-[:WORKS_AT]->(c), (b:Person)-[:WORKS_AT]->(c) WHERE a.name < b.name RETURN a.name, b.name, c.name");
    assert_eq!(out.rows, vec![vec![json!("Alice"), json!("Bob"), json!("Acme")]]);
    // Two MATCH clauses behave as one.
    let out = run("MATCH (a:Person {name: 'Alice'}) MATCH (a)-[:KNOWS]->(b) RETURN b.name");
    assert_eq!(out.rows, vec![vec![json!("Bob")]]);
    // A cartesian product.
    assert_eq!(run("MATCH (a:Company), (b:Company) RETURN count(*)").rows, vec![vec![json!(4)]]);
}

#[test]
fn anchors_are_chosen_by_selectivity() {
    let out = run("MATCH (a)-[:KNOWS]->(b) WHERE id(b) = 'carol' RETURN a.name");
    assert_eq!(out.rows, vec![vec![json!("Bob")]]);
    assert_eq!(out.plan, vec!["b by id"]);
    // Company (2 nodes) is smaller than Person (5).
    let out = run("MATCH (p:Person)-[:WORKS_AT]->(c:Company) RETURN count(*)");
    assert_eq!(out.plan, vec!["c by label Company"]);
    assert_eq!(out.rows, vec![vec![json!(3)]]);
    let out = run("MATCH (a)-[:KNOWS]->(b) RETURN count(*)");
    assert_eq!(out.plan, vec!["a by scanning every node"]);
    // Matching visits few elements from an id anchor.
    let out = run("MATCH (a)-[:KNOWS]->(b) WHERE id(a) = 'alice' RETURN b.name");
    assert!(out.work <= 3, "work {}", out.work);
}

#[test]
fn limits_of_work_and_rows() {
    let params = Map::new();
    let q = parse("MATCH (a)-[*1..10]-(b) RETURN count(*)").unwrap();
    match run_parsed(&graph(), &q, &params, Options { max_rows: 10, max_work: 50 }) {
        Err(EvalError::Query(e)) => assert!(e.message.contains("visited more than 50"), "{e}"),
        other => panic!("{other:?}"),
    }
    let q = parse("MATCH (n) RETURN n").unwrap();
    let out = run_parsed(&graph(), &q, &params, Options { max_rows: 3, max_work: 1000 }).unwrap();
    assert_eq!(out.rows.len(), 3);
    assert!(out.truncated);
    let q = parse("MATCH (n) RETURN n LIMIT 2").unwrap();
    let out = run_parsed(&graph(), &q, &params, Options { max_rows: 3, max_work: 1000 }).unwrap();
    assert!(!out.truncated && out.rows.len() == 2);
}

#[test]
fn parse_errors_carry_positions() {
    for (q, pos, needle) in [
        ("", 0, "expected MATCH"),
        ("MATCH (a RETURN a", 9, "expected ')'"),
        ("MATCH (a)-[:KNOWS->(b) RETURN a", 17, "expected ']'"),
        ("MATCH (a)<-[:R]->(b) RETURN a", 9, "both ways"),
        ("MATCH (a) WHERE a.x > RETURN a", 22, "expected an expression"),
        ("MATCH (a) RETURN a LIMIT 1 extra", 27, "end of the query"),
        ("MATCH (a)-[*3..1]->(b) RETURN a", 12, "empty"),
        ("MATCH (a) WHERE a.name = 'x RETURN a", 25, "unterminated string"),
        ("MATCH (a) RETURN a ORDER a", 25, "expected BY"),
        ("MATCH (a) RETURN nope(a)", 17, "unknown function"),
        ("MATCH (a) RETURN count(count(a))", 17, "nested"),
        ("MATCH (a) WHERE a.x = 1 = 2 RETURN a", 24, "chained"),
        ("MATCH (a:A:B) RETURN a", 10, "single label"),
        ("MATCH (a) RETURN a # b", 19, "unexpected character"),
        ("MATCH (match) RETURN 1", 7, "expected ')'"),
    ] {
        let e = parse(q).expect_err(q);
        assert_eq!(e.position, Some(pos), "{q}: {}", e.message);
        assert!(e.message.contains(needle), "{q}: {}", e.message);
    }
    // Errors found while compiling also point at the culprit.
    let (msg, pos) = err("MATCH (a) RETURN b");
    assert!(msg.contains("variable b is not defined"), "{msg}");
    assert_eq!(pos, Some(17));
    let (msg, _) = err("MATCH (a)-[a]->(b) RETURN a");
    assert!(msg.contains("both as a node and as a relationship"), "{msg}");
    let (msg, _) = err("MATCH (a) RETURN a.name, count(*) ORDER BY a.age");
    assert!(msg.contains("ORDER BY must name a RETURN column"), "{msg}");
    let (msg, _) = err("MATCH (a) WHERE a.name RETURN a");
    assert!(msg.contains("expected a boolean"), "{msg}");
    let (msg, _) = err("MATCH (a) RETURN a LIMIT -1");
    assert!(msg.contains("LIMIT needs a non-negative integer"), "{msg}");
    assert_eq!(tessera_graph::parse::line_col("MATCH (a)\nRETURN b", 17), (2, 8));
    // Inputs that could exhaust the stack are refused.
    let deep = format!("MATCH (a) WHERE {}true{} RETURN a", "(".repeat(500), ")".repeat(500));
    assert!(parse(&deep).unwrap_err().message.contains("nest at most"));
    let nots = format!("MATCH (a) WHERE {} true RETURN a", "NOT ".repeat(500));
    assert!(parse(&nots).unwrap_err().message.contains("nest at most"));
    let negs = format!("MATCH (a) RETURN {}1", "-".repeat(500));
    assert!(parse(&negs).unwrap_err().message.contains("nest at most"));
    let chain = format!("MATCH (a){} RETURN a", "-->()".repeat(200));
    assert!(parse(&chain).unwrap_err().message.contains("at most 100 hops"));
    assert!(parse("MATCH (a)-[*1..33]->(b) RETURN a").unwrap_err().message.contains("at most 32"));
    assert!(parse("MATCH (a)-[*..32]->(b)-[*..32]->(c)-[*..32]->(d)-[*..32]->(e) RETURN a").unwrap_err().message.contains("at most 100"));
    let many = format!("MATCH {} RETURN 1", vec!["()"; 200].join(", "));
    assert!(parse(&many).unwrap_err().message.contains("at most 128 node patterns"));
    assert!(parse(&"x".repeat(70_000)).unwrap_err().message.contains("at most 65536"));
}

#[test]
fn keywords_are_case_insensitive_and_names_can_be_quoted() {
    let out = run("match (`order`:Person {name: \"Alice\"})-[:KNOWS]->(b) where b.age > 1 return distinct b.name as `the name` limit 5;");
    assert_eq!(out.columns, vec!["the name"]);
    assert_eq!(out.rows, vec![vec![json!("Bob")]]);
    // Comments are ignored.
    assert_eq!(run("MATCH (n:Company) // companies only\nRETURN count(*)").rows, vec![vec![json!(2)]]);
}

fn spec(start: Option<&str>, depth: u32) -> TraversalSpec {
    TraversalSpec {
        start: start.map(str::to_string),
        depth,
        label: None,
        edge_label: None,
        direction: Direction::Out,
        limit: 1000,
        edge_limit: 1000,
    }
}

#[test]
fn breadth_first_traversal_reports_depths() {
    let g = graph();
    let depths = |t: &tessera_graph::Traversal| -> Vec<(String, u32)> {
        let mut v: Vec<(String, u32)> = t.nodes.iter().map(|(n, d)| (n.id.clone(), d.unwrap())).collect();
        v.sort();
        v
    };
    let t = traverse(&g, &spec(Some("alice"), 1)).unwrap();
    assert_eq!(depths(&t), vec![("acme".into(), 1), ("alice".into(), 0), ("bob".into(), 1)]);
    assert_eq!(t.edges.len(), 2);
    let t = traverse(&g, &spec(Some("alice"), 3)).unwrap();
    assert_eq!(
        depths(&t),
        vec![("acme".into(), 1), ("alice".into(), 0), ("bob".into(), 1), ("carol".into(), 2), ("dave".into(), 3), ("globex".into(), 3)]
    );
    // Edges reached: every edge followed, including bob→acme (acme already at depth 1).
    let mut ids: Vec<String> = t.edges.iter().map(|e| e.id.clone()).collect();
    ids.sort();
    assert_eq!(ids, vec!["k1", "k2", "k3", "w1", "w2", "w3"]);
    // Depth 0 is the start node alone; a missing start is reported.
    assert_eq!(traverse(&g, &spec(Some("alice"), 0)).unwrap().nodes.len(), 1);
    assert!(!traverse(&g, &spec(Some("nobody"), 2)).unwrap().start_found);
    // Incoming and both directions, edge label filter, node label filter.
    let mut s = spec(Some("acme"), 2);
    s.direction = Direction::In;
    assert_eq!(depths(&traverse(&g, &s).unwrap()), vec![("acme".into(), 0), ("alice".into(), 1), ("bob".into(), 1), ("dave".into(), 2)]);
    let mut s = spec(Some("alice"), 1);
    s.direction = Direction::Both;
    s.edge_label = Some("KNOWS".into());
    assert_eq!(depths(&traverse(&g, &s).unwrap()), vec![("alice".into(), 0), ("bob".into(), 1), ("dave".into(), 1)]);
    let mut s = spec(Some("alice"), 3);
    s.label = Some("Person".into());
    assert!(traverse(&g, &s).unwrap().nodes.iter().all(|(n, _)| n.label == "Person"));
    // A self-loop is one edge.
    let t = traverse(&g, &spec(Some("erin"), 2)).unwrap();
    assert_eq!((t.nodes.len(), t.edges.len()), (1, 1));
    // Limits.
    let mut s = spec(Some("alice"), 3);
    s.limit = 2;
    let t = traverse(&g, &s).unwrap();
    assert!(t.truncated && t.nodes.len() == 2);
}

#[test]
fn label_listing_returns_edges_among_the_nodes() {
    let g = graph();
    let mut s = spec(None, 0);
    s.label = Some("Person".into());
    let t = traverse(&g, &s).unwrap();
    assert_eq!(t.nodes.len(), 5);
    let mut ids: Vec<String> = t.edges.iter().map(|e| e.id.clone()).collect();
    ids.sort();
    assert_eq!(ids, vec!["k1", "k2", "k3", "k4", "l1"]);
    let t = traverse(&g, &spec(None, 0)).unwrap();
    assert_eq!((t.nodes.len(), t.edges.len(), t.truncated), (7, 8, false));
    let mut s = spec(None, 0);
    s.limit = 3;
    let t = traverse(&g, &s).unwrap();
    assert!(t.truncated && t.nodes.len() == 3);
    assert!(t.edges.iter().all(|e| t.nodes.iter().any(|(n, _)| n.id == e.from_node) && t.nodes.iter().any(|(n, _)| n.id == e.to_node)));
}
