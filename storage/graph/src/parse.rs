//! Lexer and recursive-descent parser of the pattern language (grammar in
//! `docs/graph.md`). Positions are 0-based character offsets into the query.

use serde_json::{Number, Value};

use crate::QueryError;
use crate::ast::*;

/// The upper bound of `*` and `*n..` (variable length without a maximum).
pub const DEFAULT_MAX_HOPS: u32 = 10;
/// The largest upper bound a variable-length relationship may give.
pub const MAX_HOPS: u32 = 32;
/// Hops of all relationships of a query together (a variable-length one counts
/// its upper bound), which bounds the matcher's recursion.
pub const MAX_TOTAL_HOPS: u32 = 100;
/// Node patterns of a query at most.
pub const MAX_NODE_PATTERNS: usize = 128;
/// Longest query text, in characters.
pub const MAX_QUERY_CHARS: usize = 64 * 1024;
/// Deepest nesting of expressions.
const MAX_NESTING: usize = 64;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// A name; `quoted` for backtick names (never keywords).
    Ident(String, bool),
    Str(String),
    Int(i64),
    Float(f64),
    Param(String),
    Sym(&'static str),
    Eof,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    start: usize,
    end: usize,
}

const SYMBOLS: [&str; 22] =
    ["..", "<>", "!=", "<=", ">=", "(", ")", "[", "]", "{", "}", ",", ":", ".", "|", "*", "=", "<", ">", "-", ";", "+"];

const RESERVED: [&str; 26] = [
    "match",
    "where",
    "return",
    "distinct",
    "as",
    "and",
    "or",
    "not",
    "xor",
    "order",
    "by",
    "asc",
    "desc",
    "ascending",
    "descending",
    "skip",
    "limit",
    "is",
    "null",
    "true",
    "false",
    "in",
    "starts",
    "ends",
    "with",
    "contains",
];

fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(s, _) => format!("'{s}'"),
        Tok::Str(s) => format!("string '{s}'"),
        Tok::Int(i) => format!("number {i}"),
        Tok::Float(f) => format!("number {f}"),
        Tok::Param(p) => format!("parameter ${p}"),
        Tok::Sym(s) => format!("'{s}'"),
        Tok::Eof => "the end of the query".into(),
    }
}

fn lex(src: &[char]) -> Result<Vec<Token>, QueryError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < src.len() {
        let c = src[i];
        let start = i;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c == '/' && src.get(i + 1) == Some(&'/') {
            while i < src.len() && src[i] != '\n' {
                i += 1;
            }
            continue;
        }
        let tok = if c.is_alphabetic() || c == '_' {
            while i < src.len() && (src[i].is_alphanumeric() || src[i] == '_') {
                i += 1;
            }
            Tok::Ident(src[start..i].iter().collect(), false)
        } else if c == '`' {
            i += 1;
            let mut s = String::new();
            loop {
                match src.get(i) {
                    None => return Err(QueryError::at(start, "unterminated `name`")),
                    Some('`') if src.get(i + 1) == Some(&'`') => {
                        s.push('`');
                        i += 2;
                    }
                    Some('`') => {
                        i += 1;
                        break;
                    }
                    Some(ch) => {
                        s.push(*ch);
                        i += 1;
                    }
                }
            }
            if s.is_empty() {
                return Err(QueryError::at(start, "empty `name`"));
            }
            Tok::Ident(s, true)
        } else if c == '$' {
            i += 1;
            while i < src.len() && (src[i].is_alphanumeric() || src[i] == '_') {
                i += 1;
            }
            if i == start + 1 {
                return Err(QueryError::at(start, "expected a parameter name after '$'"));
            }
            Tok::Param(src[start + 1..i].iter().collect())
        } else if c == '\'' || c == '"' {
            i += 1;
            let mut s = String::new();
            loop {
                match src.get(i) {
                    None => return Err(QueryError::at(start, "unterminated string literal")),
                    Some(ch) if *ch == c => {
                        i += 1;
                        break;
                    }
                    Some('\\') => {
                        let esc = src.get(i + 1).ok_or_else(|| QueryError::at(i, "unterminated string literal"))?;
                        s.push(match esc {
                            'n' => '\n',
                            't' => '\t',
                            'r' => '\r',
                            '\\' | '\'' | '"' => *esc,
                            other => return Err(QueryError::at(i, format!("unknown escape '\\{other}'"))),
                        });
                        i += 2;
                    }
                    Some(ch) => {
                        s.push(*ch);
                        i += 1;
                    }
                }
            }
            Tok::Str(s)
        } else if c.is_ascii_digit() {
            while i < src.len() && src[i].is_ascii_digit() {
                i += 1;
            }
            let mut float = false;
            if src.get(i) == Some(&'.') && src.get(i + 1).is_some_and(|d| d.is_ascii_digit()) {
                float = true;
                i += 1;
                while i < src.len() && src[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if matches!(src.get(i), Some('e' | 'E')) {
                let mut j = i + 1;
                if matches!(src.get(j), Some('+' | '-')) {
                    j += 1;
                }
                if src.get(j).is_some_and(|d| d.is_ascii_digit()) {
                    float = true;
                    i = j;
                    while i < src.len() && src[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let text: String = src[start..i].iter().collect();
            if float {
                Tok::Float(text.parse().map_err(|_| QueryError::at(start, format!("invalid number {text}")))?)
            } else {
                Tok::Int(text.parse().map_err(|_| QueryError::at(start, format!("number {text} is too large")))?)
            }
        } else {
            let sym = SYMBOLS.iter().find(|s| {
                let s: Vec<char> = s.chars().collect();
                src[i..].starts_with(&s)
            });
            match sym {
                Some(s) => {
                    i += s.len();
                    Tok::Sym(s)
                }
                None => return Err(QueryError::at(start, format!("unexpected character '{c}'"))),
            }
        };
        out.push(Token { tok, start, end: i });
    }
    out.push(Token { tok: Tok::Eof, start: src.len(), end: src.len() });
    Ok(out)
}

struct Parser<'a> {
    src: &'a [char],
    toks: Vec<Token>,
    i: usize,
    nesting: usize,
    hops: u32,
    node_patterns: usize,
}

/// Parses a pattern query.
pub fn parse(query: &str) -> Result<Query, QueryError> {
    let src: Vec<char> = query.chars().collect();
    if src.len() > MAX_QUERY_CHARS {
        return Err(QueryError::at(MAX_QUERY_CHARS, format!("a query is at most {MAX_QUERY_CHARS} characters")));
    }
    let toks = lex(&src)?;
    let mut p = Parser { src: &src, toks, i: 0, nesting: 0, hops: 0, node_patterns: 0 };
    p.query()
}

impl Parser<'_> {
    fn peek(&self) -> &Tok {
        &self.toks[self.i].tok
    }

    fn peek_at(&self, n: usize) -> &Tok {
        &self.toks[(self.i + n).min(self.toks.len() - 1)].tok
    }

    fn pos(&self) -> usize {
        self.toks[self.i].start
    }

    fn prev_end(&self) -> usize {
        if self.i == 0 { 0 } else { self.toks[self.i - 1].end }
    }

    fn bump(&mut self) -> Tok {
        let t = self.toks[self.i].tok.clone();
        if self.i < self.toks.len() - 1 {
            self.i += 1;
        }
        t
    }

    fn error<T>(&self, expected: &str) -> Result<T, QueryError> {
        Err(QueryError::at(self.pos(), format!("expected {expected} but found {}", describe(self.peek()))))
    }

    fn is_kw(&self, kw: &str) -> bool {
        matches!(self.peek(), Tok::Ident(s, false) if s.eq_ignore_ascii_case(kw))
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        if self.is_kw(kw) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect_kw(&mut self, kw: &str) -> Result<(), QueryError> {
        if self.eat_kw(kw) { Ok(()) } else { self.error(&kw.to_uppercase()) }
    }

    fn is_sym(&self, s: &str) -> bool {
        matches!(self.peek(), Tok::Sym(x) if *x == s)
    }

    fn eat_sym(&mut self, s: &str) -> bool {
        if self.is_sym(s) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect_sym(&mut self, s: &str) -> Result<(), QueryError> {
        if self.eat_sym(s) { Ok(()) } else { self.error(&format!("'{s}'")) }
    }

    /// A variable name (not a reserved word unless back-quoted).
    fn var_name(&self) -> Option<String> {
        match self.peek() {
            Tok::Ident(s, quoted) if *quoted || !RESERVED.contains(&s.to_ascii_lowercase().as_str()) => Some(s.clone()),
            _ => None,
        }
    }

    /// A label, type or property key: any name.
    fn name(&mut self, what: &str) -> Result<String, QueryError> {
        match self.peek().clone() {
            Tok::Ident(s, _) => {
                self.bump();
                Ok(s)
            }
            _ => self.error(what),
        }
    }

    fn text(&self, start: usize, end: usize) -> String {
        self.src[start..end.max(start)].iter().collect::<String>().trim().to_string()
    }

    fn query(&mut self) -> Result<Query, QueryError> {
        let mut patterns = Vec::new();
        let mut filter: Option<Expr> = None;
        if !self.is_kw("match") {
            return self.error("MATCH");
        }
        while self.eat_kw("match") {
            loop {
                patterns.push(self.path()?);
                if !self.eat_sym(",") {
                    break;
                }
            }
            if self.eat_kw("where") {
                let e = self.expr()?;
                filter = Some(match filter {
                    Some(f) => Expr::And(Box::new(f), Box::new(e)),
                    None => e,
                });
            }
        }
        self.expect_kw("return")?;
        let distinct = self.eat_kw("distinct");
        let mut items = Vec::new();
        loop {
            let start = self.pos();
            let expr = self.expr()?;
            let text = self.text(start, self.prev_end());
            let alias = if self.eat_kw("as") {
                match self.var_name() {
                    Some(n) => {
                        self.bump();
                        Some(n)
                    }
                    None => return self.error("a column name after AS"),
                }
            } else {
                None
            };
            items.push(ReturnItem { expr, alias, text });
            if !self.eat_sym(",") {
                break;
            }
        }
        let mut order = Vec::new();
        if self.eat_kw("order") {
            self.expect_kw("by")?;
            loop {
                let start = self.pos();
                let expr = self.expr()?;
                let text = self.text(start, self.prev_end());
                let descending = if self.eat_kw("desc") || self.eat_kw("descending") {
                    true
                } else {
                    let _ = self.eat_kw("asc") || self.eat_kw("ascending");
                    false
                };
                order.push(SortItem { expr, text, descending });
                if !self.eat_sym(",") {
                    break;
                }
            }
        }
        let skip = if self.eat_kw("skip") { Some(self.expr()?) } else { None };
        let limit = if self.eat_kw("limit") { Some(self.expr()?) } else { None };
        self.eat_sym(";");
        if *self.peek() != Tok::Eof {
            return self.error(if limit.is_none() {
                "WHERE, RETURN, ORDER BY, SKIP, LIMIT or the end of the query"
            } else {
                "the end of the query"
            });
        }
        Ok(Query { patterns, filter, distinct, items, order, skip, limit })
    }

    fn path(&mut self) -> Result<PathPattern, QueryError> {
        let start = self.node()?;
        let mut hops = Vec::new();
        while self.is_sym("-") || (self.is_sym("<") && matches!(self.peek_at(1), Tok::Sym("-"))) {
            let rel = self.rel()?;
            let node = self.node()?;
            hops.push((rel, node));
        }
        Ok(PathPattern { start, hops })
    }

    fn node(&mut self) -> Result<NodePattern, QueryError> {
        let pos = self.pos();
        if !self.eat_sym("(") {
            return self.error("'(' starting a node pattern");
        }
        self.node_patterns += 1;
        if self.node_patterns > MAX_NODE_PATTERNS {
            return Err(QueryError::at(pos, format!("a query has at most {MAX_NODE_PATTERNS} node patterns")));
        }
        let var = self.var_name();
        if var.is_some() {
            self.bump();
        }
        let label = if self.eat_sym(":") { Some(self.name("a node label")?) } else { None };
        if self.is_sym(":") {
            return Err(QueryError::at(self.pos(), "a node has a single label"));
        }
        let props = if self.is_sym("{") { self.props()? } else { Vec::new() };
        self.expect_sym(")")?;
        Ok(NodePattern { var, label, props, pos })
    }

    fn rel(&mut self) -> Result<RelPattern, QueryError> {
        let pos = self.pos();
        let left = self.eat_sym("<");
        self.expect_sym("-")?;
        let (mut var, mut types, mut props, mut length) = (None, Vec::new(), Vec::new(), None);
        if self.eat_sym("[") {
            var = self.var_name();
            if var.is_some() {
                self.bump();
            }
            if self.eat_sym(":") {
                types.push(self.name("a relationship type")?);
                while self.eat_sym("|") {
                    self.eat_sym(":");
                    types.push(self.name("a relationship type")?);
                }
            }
            if self.eat_sym("*") {
                length = Some(self.range()?);
            }
            if self.is_sym("{") {
                props = self.props()?;
            }
            self.expect_sym("]")?;
        }
        self.expect_sym("-")?;
        let right = self.eat_sym(">");
        let hops = length.map_or(1, |(_, max)| max);
        self.hops = self.hops.saturating_add(hops);
        if self.hops > MAX_TOTAL_HOPS {
            return Err(QueryError::at(
                pos,
                format!("a query may span at most {MAX_TOTAL_HOPS} hops in all (variable-length relationships count their maximum)"),
            ));
        }
        let dir = match (left, right) {
            (true, true) => return Err(QueryError::at(pos, "a relationship cannot point both ways (<-…->)")),
            (true, false) => RelDir::Left,
            (false, true) => RelDir::Right,
            (false, false) => RelDir::Either,
        };
        Ok(RelPattern { var, types, props, dir, length, pos })
    }

    fn int(&mut self) -> Option<Result<u32, QueryError>> {
        match self.peek().clone() {
            Tok::Int(n) => {
                let pos = self.pos();
                self.bump();
                Some(u32::try_from(n).map_err(|_| QueryError::at(pos, format!("hop count {n} is out of range"))))
            }
            _ => None,
        }
    }

    /// After `*`: `n`, `min..max`, `min..`, `..max` or nothing.
    fn range(&mut self) -> Result<(u32, u32), QueryError> {
        let pos = self.pos();
        let min = self.int().transpose()?;
        let (lo, hi) = if self.eat_sym("..") {
            let max = self.int().transpose()?;
            (min.unwrap_or(1), max.unwrap_or(DEFAULT_MAX_HOPS.max(min.unwrap_or(1))))
        } else {
            match min {
                Some(n) => (n, n),
                None => (1, DEFAULT_MAX_HOPS),
            }
        };
        if lo > hi {
            return Err(QueryError::at(pos, format!("the hop range {lo}..{hi} is empty")));
        }
        if hi > MAX_HOPS {
            return Err(QueryError::at(pos, format!("a variable-length relationship spans at most {MAX_HOPS} hops")));
        }
        Ok((lo, hi))
    }

    fn props(&mut self) -> Result<Vec<(String, Expr)>, QueryError> {
        self.expect_sym("{")?;
        let mut out = Vec::new();
        if self.eat_sym("}") {
            return Ok(out);
        }
        loop {
            let key = self.name("a property name")?;
            self.expect_sym(":")?;
            out.push((key, self.expr()?));
            if !self.eat_sym(",") {
                break;
            }
        }
        self.expect_sym("}")?;
        Ok(out)
    }

    /// Runs `f` one nesting level deeper (bounded, so no input exhausts the stack).
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T, QueryError>) -> Result<T, QueryError> {
        if self.nesting >= MAX_NESTING {
            return Err(QueryError::at(self.pos(), format!("expressions nest at most {MAX_NESTING} levels deep")));
        }
        self.nesting += 1;
        let r = f(self);
        self.nesting -= 1;
        r
    }

    fn expr(&mut self) -> Result<Expr, QueryError> {
        self.nested(|p| {
            let mut e = p.and()?;
            while p.eat_kw("or") {
                e = Expr::Or(Box::new(e), Box::new(p.and()?));
            }
            Ok(e)
        })
    }

    fn and(&mut self) -> Result<Expr, QueryError> {
        let mut e = self.not()?;
        while self.eat_kw("and") {
            e = Expr::And(Box::new(e), Box::new(self.not()?));
        }
        Ok(e)
    }

    fn not(&mut self) -> Result<Expr, QueryError> {
        if self.eat_kw("not") { self.nested(|p| Ok(Expr::Not(Box::new(p.not()?)))) } else { self.comparison() }
    }

    fn comparison(&mut self) -> Result<Expr, QueryError> {
        let left = self.unary()?;
        let op = match self.peek() {
            Tok::Sym("=") => Some(CmpOp::Eq),
            Tok::Sym("<>") | Tok::Sym("!=") => Some(CmpOp::Ne),
            Tok::Sym("<") => Some(CmpOp::Lt),
            Tok::Sym("<=") => Some(CmpOp::Le),
            Tok::Sym(">") => Some(CmpOp::Gt),
            Tok::Sym(">=") => Some(CmpOp::Ge),
            _ => None,
        };
        if let Some(op) = op {
            self.bump();
            let right = self.unary()?;
            if matches!(self.peek(), Tok::Sym("=" | "<>" | "!=" | "<" | "<=" | ">" | ">=")) {
                return Err(QueryError::at(self.pos(), "comparisons cannot be chained; combine them with AND"));
            }
            return Ok(Expr::Cmp(op, Box::new(left), Box::new(right)));
        }
        if self.is_kw("is") {
            self.bump();
            let negated = self.eat_kw("not");
            self.expect_kw("null")?;
            return Ok(Expr::IsNull(Box::new(left), negated));
        }
        if self.eat_kw("in") {
            return Ok(Expr::In(Box::new(left), Box::new(self.unary()?)));
        }
        if self.is_kw("starts") || self.is_kw("ends") {
            let op = if self.eat_kw("starts") {
                StrOp::StartsWith
            } else {
                self.bump();
                StrOp::EndsWith
            };
            self.expect_kw("with")?;
            return Ok(Expr::Str(op, Box::new(left), Box::new(self.unary()?)));
        }
        if self.eat_kw("contains") {
            return Ok(Expr::Str(StrOp::Contains, Box::new(left), Box::new(self.unary()?)));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, QueryError> {
        if self.eat_sym("-") {
            return Ok(match self.nested(|p| p.unary())? {
                Expr::Literal(Value::Number(n)) => Expr::Literal(negate(&n)),
                e => Expr::Neg(Box::new(e)),
            });
        }
        if self.eat_sym("+") {
            return self.nested(|p| p.unary());
        }
        self.postfix()
    }

    fn postfix(&mut self) -> Result<Expr, QueryError> {
        let mut e = self.primary()?;
        while self.eat_sym(".") {
            e = Expr::Prop(Box::new(e), self.name("a property name after '.'")?);
        }
        Ok(e)
    }

    fn primary(&mut self) -> Result<Expr, QueryError> {
        let pos = self.pos();
        match self.peek().clone() {
            Tok::Str(s) => {
                self.bump();
                Ok(Expr::Literal(Value::String(s)))
            }
            Tok::Int(i) => {
                self.bump();
                Ok(Expr::Literal(Value::from(i)))
            }
            Tok::Float(f) => {
                self.bump();
                Number::from_f64(f).map(|n| Expr::Literal(Value::Number(n))).ok_or_else(|| QueryError::at(pos, "invalid number"))
            }
            Tok::Param(p) => {
                self.bump();
                Ok(Expr::Param(p, pos))
            }
            Tok::Sym("(") => {
                self.bump();
                let e = self.expr()?;
                self.expect_sym(")")?;
                Ok(e)
            }
            Tok::Sym("[") => {
                self.bump();
                let mut xs = Vec::new();
                if !self.eat_sym("]") {
                    loop {
                        xs.push(self.expr()?);
                        if !self.eat_sym(",") {
                            break;
                        }
                    }
                    self.expect_sym("]")?;
                }
                Ok(Expr::List(xs))
            }
            Tok::Ident(s, quoted) => {
                let lower = s.to_ascii_lowercase();
                if !quoted && matches!(self.peek_at(1), Tok::Sym("(")) {
                    self.bump();
                    self.bump();
                    return self.call(lower, pos);
                }
                if !quoted {
                    match lower.as_str() {
                        "true" | "false" => {
                            self.bump();
                            return Ok(Expr::Literal(Value::Bool(lower == "true")));
                        }
                        "null" => {
                            self.bump();
                            return Ok(Expr::Literal(Value::Null));
                        }
                        _ => {}
                    }
                }
                match self.var_name() {
                    Some(v) => {
                        self.bump();
                        Ok(Expr::Var(v, pos))
                    }
                    None => self.error("an expression"),
                }
            }
            _ => self.error("an expression"),
        }
    }

    /// After `name(`.
    fn call(&mut self, name: String, pos: usize) -> Result<Expr, QueryError> {
        let agg = match name.as_str() {
            "count" => Some(AggFn::Count),
            "sum" => Some(AggFn::Sum),
            "avg" => Some(AggFn::Avg),
            "min" => Some(AggFn::Min),
            "max" => Some(AggFn::Max),
            "collect" => Some(AggFn::Collect),
            _ => None,
        };
        if let Some(f) = agg {
            if f == AggFn::Count && self.eat_sym("*") {
                self.expect_sym(")")?;
                return Ok(Expr::Agg(f, false, None));
            }
            let distinct = self.eat_kw("distinct");
            let arg = self.expr()?;
            if arg.has_aggregate() {
                return Err(QueryError::at(pos, "aggregates cannot be nested"));
            }
            self.expect_sym(")")?;
            return Ok(Expr::Agg(f, distinct, Some(Box::new(arg))));
        }
        const SCALAR: [(&str, usize); 9] = [
            ("id", 1),
            ("label", 1),
            ("labels", 1),
            ("type", 1),
            ("size", 1),
            ("length", 1),
            ("properties", 1),
            ("tolower", 1),
            ("toupper", 1),
        ];
        let Some((_, arity)) = SCALAR.iter().find(|(n, _)| *n == name) else {
            return Err(QueryError::at(pos, format!("unknown function {name}()")));
        };
        let mut args = Vec::new();
        if !self.eat_sym(")") {
            loop {
                args.push(self.expr()?);
                if !self.eat_sym(",") {
                    break;
                }
            }
            self.expect_sym(")")?;
        }
        if args.len() != *arity {
            return Err(QueryError::at(pos, format!("{name}() takes {arity} argument(s), got {}", args.len())));
        }
        Ok(Expr::Call(name, args, pos))
    }
}

/// `-n` as a JSON number.
pub(crate) fn negate(n: &Number) -> Value {
    if let Some(i) = n.as_i64() {
        Value::from(-i)
    } else {
        n.as_f64().and_then(|f| Number::from_f64(-f)).map(Value::Number).unwrap_or(Value::Null)
    }
}

/// Line and column (both 1-based) of a character offset in `query`.
pub fn line_col(query: &str, position: usize) -> (usize, usize) {
    let (mut line, mut col) = (1, 1);
    for c in query.chars().take(position) {
        if c == '\n' {
            line += 1;
            col = 1;
        } else {
            col += 1;
        }
    }
    (line, col)
}
