//! sqlparser glue: statement and expression parsing, and the bound on how
//! deep a request's expressions may nest.
//!
//! Generated SQL nests far deeper than hand-written SQL (sqllogictest's
//! `index/between` has WHERE clauses some hundred levels deep), and a long
//! chain of `OR`s, `AND`s or other binary operators is as deep a tree as
//! nested parentheses. Every request's expression trees may be at most
//! [`MAX_EXPR_DEPTH`] deep (SQLite's `SQLITE_MAX_EXPR_DEPTH`); deeper ones are
//! refused with a `PARSE_ERROR` that says so. Requests run on a stack of
//! [`REQUEST_STACK_BYTES`] ([`on_request_stack`]), enough to parse, evaluate
//! and drop trees of that depth, so no input overflows a stack: on the apply
//! path that would crash every replica replaying the entry.
use std::ops::ControlFlow;
use std::sync::{Arc, LazyLock};

use crate::error::{Result, from_parser};
use sqlparser::ast::{Expr, Statement, Visit, Visitor};
use sqlparser::dialect::{Dialect, GenericDialect};
use sqlparser::parser::{Parser, ParserError};

/// The deepest expression tree a request may hold.
pub const MAX_EXPR_DEPTH: usize = 1000;

/// The stack a request is parsed, evaluated and dropped on (reserved, not
/// committed: only what a request touches is backed by memory).
pub const REQUEST_STACK_BYTES: usize = 256 << 20;

/// The stack size of a thread that runs requests on its own stack
/// ([`on_request_stack`]): a request's stack and room for its caller.
pub const REQUEST_THREAD_STACK_BYTES: usize = REQUEST_STACK_BYTES + (16 << 20);

/// The size of a memory page.
const PAGE: usize = 4096;

/// How much of a thread's stack below the caller stays committed between
/// requests (a shallow request then touches no new page).
const KEPT_STACK_BYTES: usize = 1 << 20;

/// Runs `f` with at least [`REQUEST_STACK_BYTES`] of stack: on this thread's
/// own stack when it has that much left (threads built with
/// [`REQUEST_THREAD_STACK_BYTES`]), else on a stack allocated for the call.
/// Allocating one per call costs an `mmap`, an `munmap` and a page fault for
/// every page the request touches, which was a large share of a point query.
/// On the thread's own stack, the pages a deep request touched below the
/// first [`KEPT_STACK_BYTES`] are given back afterwards, so a deep request
/// leaves no resident memory behind.
pub fn on_request_stack<R>(f: impl FnOnce() -> R) -> R {
    match stacker::remaining_stack() {
        Some(left) if left >= REQUEST_STACK_BYTES => {
            let out = f();
            release_deep_stack();
            out
        }
        _ => stacker::grow(REQUEST_STACK_BYTES, f),
    }
}

/// Returns to the system the pages of this thread's stack that lie more than
/// [`KEPT_STACK_BYTES`] below the current frame: they hold no live frame.
fn release_deep_stack() {
    let marker = 0u8;
    let here = std::ptr::addr_of!(marker) as usize;
    let Some(left) = stacker::remaining_stack() else { return };
    // The limit is where the usable stack ends; the guard page lies below it.
    let limit = here.saturating_sub(left);
    let start = (limit + 2 * PAGE) & !(PAGE - 1);
    let end = here.saturating_sub(KEPT_STACK_BYTES) & !(PAGE - 1);
    if limit > 0 && end > start && touched(end - PAGE) {
        // SAFETY: [start, end) is part of this thread's stack, more than a
        // megabyte below the live frames; MADV_DONTNEED only drops its pages,
        // which read as zeroes when touched again.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
        }
    }
}

/// Whether the stack page at `page` is backed by memory. A request that went
/// deeper than [`KEPT_STACK_BYTES`] touched the page just below that mark
/// (Rust probes every page of a large frame), so when it is not backed there
/// is nothing to give back and the `madvise` over the whole reserve, a walk
/// of its page tables on every request, is skipped.
fn touched(page: usize) -> bool {
    let mut resident = 0u8;
    // SAFETY: `page` is page-aligned and lies within this thread's stack
    // mapping; `mincore` writes one byte for the one page asked about.
    let answered = unsafe { libc::mincore(page as *mut libc::c_void, PAGE, &mut resident) };
    answered != 0 || resident & 1 == 1
}

fn too_deep() -> crate::error::SqlError {
    crate::error::parse(format!("expressions nest too deeply (the limit is {MAX_EXPR_DEPTH} levels)"))
}

fn parse_with(dialect: &dyn Dialect, sql: &str) -> std::result::Result<Vec<Statement>, ParserError> {
    Parser::new(dialect).with_recursion_limit(MAX_EXPR_DEPTH).try_with_sql(sql)?.parse_statements()
}

/// Parses a `;`-separated request. What the generic dialect cannot parse is
/// tried once more as PostgreSQL (it alone takes `INSERT INTO t AS alias`);
/// the generic dialect's error is the one reported. Expression trees deeper
/// than [`MAX_EXPR_DEPTH`] are refused.
pub fn parse_statements(sql: &str) -> Result<Vec<Statement>> {
    let statements = parse_with(&GenericDialect {}, sql)
        .or_else(|generic| parse_with(&sqlparser::dialect::PostgreSqlDialect {}, sql).map_err(|_| generic))
        .map_err(|e| if e == ParserError::RecursionLimitExceeded { too_deep() } else { from_parser(e) })?;
    if deeper_than_allowed(&statements) {
        drop_deep(statements);
        return Err(too_deep());
    }
    Ok(statements)
}

/// How many request texts keep their parsed statements ([`parse_shared`]).
const PARSED_CACHE_ENTRIES: usize = 1024;

/// Longer texts are parsed afresh each time (bulk `INSERT`s: rarely sent twice).
pub(crate) const PARSED_CACHE_MAX_TEXT_BYTES: usize = 4096;

/// Statements whose expressions nest deeper are not kept: dropping a kept tree
/// happens on whichever thread evicts it, with whatever stack that thread has.
const PARSED_CACHE_MAX_DEPTH: usize = 64;

/// Parsed statements by request text, shared by every request that sends the
/// same text (a client's prepared statement, an application's fixed queries
/// with `$n` parameters): a point read or a single-row write spent a third of
/// its execution time tokenizing and parsing.
static PARSED: LazyLock<quick_cache::sync::Cache<String, Arc<Vec<Statement>>>> =
    LazyLock::new(|| quick_cache::sync::Cache::new(PARSED_CACHE_ENTRIES));

/// [`parse_statements`], answered from the cache of recently parsed request
/// texts when it holds `sql`. Parsing is a pure function of the text, so a
/// cached answer is the one parsing would give (errors are not kept).
pub fn parse_shared(sql: &str) -> Result<Arc<Vec<Statement>>> {
    if sql.len() > PARSED_CACHE_MAX_TEXT_BYTES {
        return parse_statements(sql).map(Arc::new);
    }
    if let Some(statements) = PARSED.get(sql) {
        return Ok(statements);
    }
    let statements = Arc::new(parse_statements(sql)?);
    if expression_depth(&*statements) <= PARSED_CACHE_MAX_DEPTH {
        PARSED.insert(sql.to_string(), statements.clone());
    }
    Ok(statements)
}

/// Parses one stored expression (CHECK / DEFAULT text).
pub fn parse_expr(text: &str) -> Result<Expr> {
    let expr = Parser::new(&GenericDialect {})
        .with_recursion_limit(MAX_EXPR_DEPTH)
        .try_with_sql(text)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| if e == ParserError::RecursionLimitExceeded { too_deep() } else { from_parser(e) })?;
    if deeper_than_allowed(&expr) {
        drop_deep(expr);
        return Err(too_deep());
    }
    Ok(expr)
}

/// Whether an expression tree in `node` is deeper than [`MAX_EXPR_DEPTH`]
/// (the walk stops at that depth, so it never goes deeper itself).
fn deeper_than_allowed(node: &impl Visit) -> bool {
    expression_depth(node) > MAX_EXPR_DEPTH
}

/// How deep the deepest expression tree of `node` nests; the walk stops past
/// [`MAX_EXPR_DEPTH`] (the answer is then `MAX_EXPR_DEPTH + 1`).
fn expression_depth(node: &impl Visit) -> usize {
    struct Depth {
        now: usize,
        deepest: usize,
    }
    impl Visitor for Depth {
        type Break = ();
        fn pre_visit_expr(&mut self, _: &Expr) -> ControlFlow<()> {
            self.now += 1;
            self.deepest = self.deepest.max(self.now);
            if self.now > MAX_EXPR_DEPTH { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
        }
        fn post_visit_expr(&mut self, _: &Expr) -> ControlFlow<()> {
            self.now -= 1;
            ControlFlow::Continue(())
        }
    }
    let mut depth = Depth { now: 0, deepest: 0 };
    let _ = node.visit(&mut depth);
    depth.deepest
}

/// Drops a refused tree, however deep (a chain of binary operators is as
/// deep as the text is long), on a thread whose stack is reserved for it.
fn drop_deep<T: Send + 'static>(tree: T) {
    const DROP_STACK_BYTES: usize = 1 << 30;
    // Without a thread the tree is leaked: that beats overflowing this stack.
    let tree = std::mem::ManuallyDrop::new(tree);
    let dropped = std::thread::Builder::new()
        .name("sql-drop".into())
        .stack_size(DROP_STACK_BYTES)
        .spawn(move || drop(std::mem::ManuallyDrop::into_inner(tree)));
    if let Ok(handle) = dropped {
        let _ = handle.join();
    }
}

/// Replaces unquoted/quoted identifier `old` with `new` in expression text.
pub fn rename_ident_in(text: &str, old: &str, new: &str) -> String {
    use sqlparser::tokenizer::{Token, Tokenizer};
    let d = GenericDialect {};
    match Tokenizer::new(&d, text).tokenize() {
        Ok(toks) => toks
            .into_iter()
            .map(|t| match t {
                Token::Word(w)
                    if crate::exec::ident(&sqlparser::ast::Ident {
                        value: w.value.clone(),
                        quote_style: w.quote_style,
                        span: sqlparser::tokenizer::Span::empty(),
                    }) == old =>
                {
                    format!("\"{}\"", new.replace('"', "\"\""))
                }
                other => other.to_string(),
            })
            .collect(),
        Err(_) => text.to_string(),
    }
}

/// True when the expression text mentions identifier `name`.
pub fn mentions_ident(text: &str, name: &str) -> bool {
    rename_ident_in(text, name, "\u{1}") != text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The address of a local of the calling frame.
    #[inline(never)]
    fn frame_address() -> usize {
        let marker = 0u8;
        std::hint::black_box(std::ptr::addr_of!(marker) as usize)
    }

    fn on_thread<R: Send + 'static>(stack: usize, f: impl FnOnce() -> R + Send + 'static) -> R {
        std::thread::Builder::new().stack_size(stack).spawn(f).unwrap().join().unwrap()
    }

    #[test]
    fn a_request_text_sent_again_is_answered_from_the_parsed_cache() {
        let sql = "SELECT v FROM cache_test_a WHERE id = $1";
        let first = parse_shared(sql).unwrap();
        let again = parse_shared(sql).unwrap();
        assert!(Arc::ptr_eq(&first, &again), "parsed twice");
        assert_eq!(*first, parse_statements(sql).unwrap());
        // Another text, another answer.
        let other = parse_shared("SELECT v FROM cache_test_a WHERE id = $2").unwrap();
        assert!(!Arc::ptr_eq(&first, &other));
    }

    #[test]
    fn errors_long_texts_and_deep_trees_are_not_kept() {
        for _ in 0..2 {
            assert!(parse_shared("SELEC v FROM cache_test_b").is_err());
        }
        let long = format!("SELECT {} FROM cache_test_b", vec!["v"; PARSED_CACHE_MAX_TEXT_BYTES / 3].join(", "));
        assert!(!Arc::ptr_eq(&parse_shared(&long).unwrap(), &parse_shared(&long).unwrap()));
        let deep = on_request_stack(|| {
            let text =
                format!("SELECT {}1{} FROM cache_test_b", "(".repeat(PARSED_CACHE_MAX_DEPTH + 1), ")".repeat(PARSED_CACHE_MAX_DEPTH + 1));
            let (a, b) = (parse_shared(&text).unwrap(), parse_shared(&text).unwrap());
            Arc::ptr_eq(&a, &b)
        });
        assert!(!deep, "a deep tree was kept");
        let shallow = "SELECT ((1)) FROM cache_test_b";
        assert!(Arc::ptr_eq(&parse_shared(shallow).unwrap(), &parse_shared(shallow).unwrap()));
    }

    #[test]
    fn a_request_thread_runs_requests_on_its_own_stack() {
        let (outside, inside) = on_thread(REQUEST_THREAD_STACK_BYTES, || (frame_address(), on_request_stack(frame_address)));
        assert!(outside.abs_diff(inside) < 1 << 20, "ran {} bytes away from its caller", outside.abs_diff(inside));
    }

    #[test]
    fn a_small_thread_gets_a_request_stack_for_the_call() {
        let (outside, inside) = on_thread(2 << 20, || (frame_address(), on_request_stack(frame_address)));
        assert!(outside.abs_diff(inside) > 2 << 20, "ran on the caller's stack");
        // Nested requests find enough stack where they are.
        let depth = on_thread(2 << 20, || on_request_stack(|| on_request_stack(|| stacker::remaining_stack().unwrap())));
        assert!(depth >= REQUEST_STACK_BYTES - (1 << 20));
    }

    #[test]
    fn a_deep_request_leaves_no_resident_stack_behind() {
        let resident_deep_page = on_thread(REQUEST_THREAD_STACK_BYTES, || {
            let deep = format!("SELECT {}1{}", "(".repeat(MAX_EXPR_DEPTH - 10), ")".repeat(MAX_EXPR_DEPTH - 10));
            let top = frame_address();
            let parsed = on_request_stack(|| parse_statements(&deep).map(|s| s.len()));
            assert_eq!(parsed.unwrap(), 1);
            // Parsing that touched megabytes of stack; 3 MiB down must be given back.
            let page = (top - (3 << 20)) & !4095;
            let mut resident = 0u8;
            // SAFETY: `page` is a page of this thread's (mapped) stack; mincore writes one byte.
            let rc = unsafe { libc::mincore(page as *mut libc::c_void, PAGE, &mut resident) };
            assert_eq!(rc, 0);
            resident & 1 == 1
        });
        assert!(!resident_deep_page, "the deep pages of the request stay resident");
    }
}
