//! The architecture, checked: which modules of the router and of the node
//! import which (`use crate::…`, `super::…`, `self::…` paths, read from the
//! sources, comments and `#[cfg(test)] mod tests` blocks left out).
//!
//! - No import cycle between the modules of the node, nor of the router.
//! - No file under a `services/` folder imports axum or the HTTP layer.
//! - Nothing in the router below its HTTP layer (`http/`) imports it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

/// Every module of a crate's `src` (by path: `a::b`), with its source.
fn modules(src: &Path) -> BTreeMap<String, String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("source dir").flatten() {
            let p = entry.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    let mut out = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(src).expect("under src").with_extension("");
        let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        if matches!(parts.last().map(String::as_str), Some("mod" | "main" | "lib")) {
            parts.pop();
        }
        // Test-only modules (in-process test suites, fakes) are not architecture.
        if parts.first().is_some_and(|p| p == "tests" || p == "bin") || parts.last().is_some_and(|p| p == "tests") {
            continue;
        }
        let name = if parts.is_empty() { "crate".to_string() } else { parts.join("::") };
        out.insert(name, code_only(&std::fs::read_to_string(&file).expect("readable source")));
    }
    out
}

/// `text` without comments and without a trailing `#[cfg(test)] mod tests { … }`.
fn code_only(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests {") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// The paths a `use` tree names, expanded (`a::{b, c::{d}}` → `a::b`, `a::c::d`).
fn expand(prefix: &str, tree: &str) -> Vec<String> {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head = tree[..open].trim_end_matches("::").trim();
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let base = if head.is_empty() { prefix.to_string() } else { format!("{prefix}::{head}") };
        let mut items = Vec::new();
        let (mut depth, mut start) = (0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(&inner[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        items.push(&inner[start..]);
        return items.into_iter().filter(|i| !i.trim().is_empty()).flat_map(|i| expand(&base, i)).collect();
    }
    let path = tree.split(" as ").next().unwrap_or(tree).trim();
    vec![if path.is_empty() { prefix.to_string() } else { format!("{prefix}::{path}") }]
}

/// Which modules each module imports.
fn imports(mods: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let resolve = |path: &str| -> Option<String> {
        let segs: Vec<&str> = path.split("::").collect();
        (1..=segs.len()).rev().map(|n| segs[..n].join("::")).find(|m| mods.contains_key(m))
    };
    let mut edges = BTreeMap::new();
    for (name, src) in mods {
        let parent = name.rsplit_once("::").map(|(p, _)| p.to_string());
        let mut targets = Vec::new();
        let bytes = src.as_bytes();
        for (kw, base) in [("crate::", String::new()), ("super::", parent.clone().unwrap_or_default()), ("self::", name.clone())] {
            for (at, _) in src.match_indices(kw) {
                if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_' || bytes[at - 1] == b':') {
                    continue;
                }
                let rest = &src[at + kw.len()..];
                // The path runs to the end of its tree: a balanced `{…}` or the first
                // character that cannot be part of a path.
                let mut end = 0;
                let mut depth = 0;
                for (i, c) in rest.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth > 0 => depth -= 1,
                        c if depth > 0 || c.is_alphanumeric() || c == '_' || c == ':' => {}
                        _ => {
                            end = i;
                            break;
                        }
                    }
                    end = i + c.len_utf8();
                }
                let tree = &rest[..end];
                let base = if base.is_empty() { "crate".to_string() } else { format!("crate::{base}") };
                for path in expand(&base, tree) {
                    let path = path.trim_start_matches("crate::").trim_start_matches("crate");
                    if let Some(m) = resolve(path.trim_start_matches("::"))
                        && m != *name
                    {
                        targets.push(m);
                    }
                }
            }
        }
        edges.insert(name.clone(), targets.into_iter().collect());
    }
    edges
}

/// The strongly connected components with more than one module (Tarjan).
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T { edges, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), on: BTreeSet::new(), out: Vec::new() };
    for v in edges.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out.sort();
    t.out
}

fn describe(cycles: &[Vec<String>], edges: &BTreeMap<String, BTreeSet<String>>) -> String {
    let mut out = String::new();
    for c in cycles {
        out.push_str(&format!("cycle of {} modules:\n", c.len()));
        for m in c {
            let inside: Vec<&String> = edges[m].iter().filter(|t| c.contains(t)).collect();
            out.push_str(&format!("  {m} -> {inside:?}\n"));
        }
    }
    out
}

fn assert_acyclic(krate: &str) {
    let mods = modules(&workspace().join(krate).join("src"));
    let edges = imports(&mods);
    let found = cycles(&edges);
    assert!(found.is_empty(), "import cycles in {krate}:\n{}", describe(&found, &edges));
}

#[test]
fn the_node_has_no_import_cycle() {
    assert_acyclic("node");
}

#[test]
fn the_router_has_no_import_cycle() {
    assert_acyclic("router");
}

#[test]
fn services_import_no_http() {
    for krate in ["router", "node"] {
        let src = workspace().join(krate).join("src");
        for (name, code) in modules(&src) {
            if !name.split("::").any(|p| p == "services") {
                continue;
            }
            for forbidden in ["axum", "crate::http"] {
                assert!(!code.contains(forbidden), "{krate}: {name} uses {forbidden} (services know no HTTP)");
            }
        }
    }
}

/// The router's HTTP layer (`http/`: handlers, route table, middleware,
/// OpenAPI) sits on top: only the crate root, which assembles it, imports it.
#[test]
fn nothing_below_the_http_layer_imports_it() {
    let src = workspace().join("router").join("src");
    for (name, code) in modules(&src) {
        if name == "crate" || name == "http" || name.starts_with("http::") {
            continue;
        }
        assert!(!code.contains("crate::http"), "router: {name} imports the HTTP layer, which sits above it");
    }
}

#[test]
fn the_reader_sees_use_trees_as_rustc_does() {
    assert_eq!(expand("crate", "a::{b, c::{d, e as f}}"), ["crate::a::b", "crate::a::c::d", "crate::a::c::e"]);
    let mods: BTreeMap<String, String> = [
        ("a".to_string(), "use crate::b::X;\n// crate::c::Y in a comment\n".to_string()),
        ("b".to_string(), "use super::c::{self, Z};\n".to_string()),
        ("c".to_string(), "fn f() { crate::a::g(); }\n#[cfg(test)]\nmod tests {\n use crate::b::W;\n}".to_string()),
        ("d".to_string(), "use crate::{a::A, b::{B}};".to_string()),
    ]
    .into_iter()
    .map(|(name, code)| (name, code_only(&code)))
    .collect();
    let edges = imports(&mods);
    assert_eq!(edges["a"], BTreeSet::from(["b".to_string()]));
    assert_eq!(edges["c"], BTreeSet::from(["a".to_string()]));
    assert_eq!(edges["d"], BTreeSet::from(["a".to_string(), "b".to_string()]));
    assert_eq!(cycles(&edges), [vec!["a".to_string(), "b".to_string(), "c".to_string()]]);
}
