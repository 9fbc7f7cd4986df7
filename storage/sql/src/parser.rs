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

use crate::error::{Result, from_parser};
use sqlparser::ast::{Expr, Statement, Visit, Visitor};
use sqlparser::dialect::{Dialect, GenericDialect};
use sqlparser::parser::{Parser, ParserError};

/// The deepest expression tree a request may hold.
pub const MAX_EXPR_DEPTH: usize = 1000;

/// The stack a request is parsed, evaluated and dropped on (reserved, not
/// committed: only what a request touches is backed by memory).
pub const REQUEST_STACK_BYTES: usize = 256 << 20;

/// Runs `f` on a stack of [`REQUEST_STACK_BYTES`].
pub fn on_request_stack<R>(f: impl FnOnce() -> R) -> R {
    stacker::grow(REQUEST_STACK_BYTES, f)
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
    struct Depth(usize);
    impl Visitor for Depth {
        type Break = ();
        fn pre_visit_expr(&mut self, _: &Expr) -> ControlFlow<()> {
            self.0 += 1;
            if self.0 > MAX_EXPR_DEPTH { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
        }
        fn post_visit_expr(&mut self, _: &Expr) -> ControlFlow<()> {
            self.0 -= 1;
            ControlFlow::Continue(())
        }
    }
    node.visit(&mut Depth(0)).is_break()
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
