//! Runs the sqllogictest-style files in tests/slt/*.slt against the in-memory store.
//!
//! Records: `statement ok`, `statement error [CODE]`, `query <types> [rowsort]` + `----` + rows.
//! SQL runs until a blank line (or `----`); a first SQL line `-- params: [json]` binds $1.. params.
//! Values print as: NULL, true/false, numbers, strings (`(empty)` for ""), one row per line,
//! columns joined by a single space.
use std::path::Path;
use tessera_sql::mem::MemStore;

fn fmt(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "NULL".into(),
        serde_json::Value::String(s) if s.is_empty() => "(empty)".into(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn run_file(path: &Path, failures: &mut Vec<String>) -> usize {
    let text = std::fs::read_to_string(path).expect("read slt");
    let lines: Vec<&str> = text.lines().collect();
    let mut store = MemStore::new();
    let mut i = 0;
    let mut records = 0;
    let name = path.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    while i < lines.len() {
        let line = lines[i].trim_end();
        if line.is_empty() || line.starts_with('#') {
            i += 1;
            continue;
        }
        let header_line = i + 1;
        let header: Vec<&str> = line.split_whitespace().collect();
        i += 1;
        let mut sql_lines = Vec::new();
        while i < lines.len() && !lines[i].trim().is_empty() && lines[i].trim() != "----" {
            sql_lines.push(lines[i]);
            i += 1;
        }
        let mut params = Vec::new();
        if let Some(first) = sql_lines.first()
            && let Some(p) = first.trim().strip_prefix("-- params:")
        {
            params = serde_json::from_str::<Vec<serde_json::Value>>(p.trim()).expect("params json");
            sql_lines.remove(0);
        }
        let sql = sql_lines.join("\n");
        let mut expected = Vec::new();
        if i < lines.len() && lines[i].trim() == "----" {
            i += 1;
            while i < lines.len() && !lines[i].trim().is_empty() {
                expected.push(lines[i].trim().to_string());
                i += 1;
            }
        }
        records += 1;
        let loc = format!("{name}:{header_line}");
        let res = store.exec(&sql, &params);
        match header.first().copied() {
            Some("statement") => match (header.get(1).copied(), res) {
                (Some("ok"), Ok(_)) => {}
                (Some("ok"), Err(e)) => failures.push(format!("{loc}: expected ok, got {e}\n  {sql}")),
                (Some("error"), Ok(_)) => failures.push(format!("{loc}: expected error, got ok\n  {sql}")),
                (Some("error"), Err(e)) => {
                    if let Some(code) = header.get(2)
                        && e.code.as_str() != *code
                    {
                        failures.push(format!("{loc}: expected {code}, got {e}\n  {sql}"));
                    }
                }
                _ => failures.push(format!("{loc}: bad statement header")),
            },
            Some("query") => {
                let rowsort = header.get(2) == Some(&"rowsort");
                match res {
                    Err(e) => failures.push(format!("{loc}: query failed: {e}\n  {sql}")),
                    Ok(r) => {
                        let mut got: Vec<String> = r.rows.iter().map(|row| row.iter().map(fmt).collect::<Vec<_>>().join(" ")).collect();
                        let mut exp = expected.clone();
                        if rowsort {
                            got.sort();
                            exp.sort();
                        }
                        if let Some(types) = header.get(1)
                            && r.columns.len() != types.len()
                        {
                            failures.push(format!("{loc}: expected {} columns, got {}\n  {sql}", types.len(), r.columns.len()));
                        }
                        if got != exp {
                            failures.push(format!("{loc}: mismatch\n  {sql}\n  expected: {exp:?}\n  got:      {got:?}"));
                        }
                    }
                }
            }
            _ => failures.push(format!("{loc}: unknown record {line}")),
        }
    }
    records
}

#[test]
fn slt_suite() {
    // The runner's CARGO_MANIFEST_DIR first: a test binary built in another
    // checkout (one target directory shared by several) names that checkout.
    let root = std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| env!("CARGO_MANIFEST_DIR").into(), std::path::PathBuf::from);
    let dir = root.join("tests/slt");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("slt dir")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "slt"))
        .collect();
    files.sort();
    let mut failures = Vec::new();
    let mut total = 0;
    for f in &files {
        total += run_file(f, &mut failures);
    }
    println!("{total} records in {} files", files.len());
    if !failures.is_empty() {
        panic!("{} of {total} records failed:\n{}", failures.len(), failures.join("\n"));
    }
    assert!(total >= 400, "only {total} records");
}
