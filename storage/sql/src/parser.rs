//! sqlparser glue: statement and expression parsing.
use crate::error::{Result, from_parser};
use sqlparser::ast::{Expr, Statement};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;

/// Parses a `;`-separated request. What the generic dialect cannot parse is
/// tried once more as PostgreSQL (it alone takes `INSERT INTO t AS alias`);
/// the generic dialect's error is the one reported.
pub fn parse_statements(sql: &str) -> Result<Vec<Statement>> {
    Parser::parse_sql(&GenericDialect {}, sql)
        .or_else(|generic| Parser::parse_sql(&sqlparser::dialect::PostgreSqlDialect {}, sql).map_err(|_| generic))
        .map_err(from_parser)
}

/// Parses one stored expression (CHECK / DEFAULT text).
pub fn parse_expr(text: &str) -> Result<Expr> {
    Parser::new(&GenericDialect {}).try_with_sql(text).and_then(|mut p| p.parse_expr()).map_err(from_parser)
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
