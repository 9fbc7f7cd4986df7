//! The syntax tree of a pattern query.

use serde_json::Value;

/// `MATCH patterns [WHERE expr] RETURN [DISTINCT] items [ORDER BY …] [SKIP n] [LIMIT n]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub patterns: Vec<PathPattern>,
    pub filter: Option<Expr>,
    pub distinct: bool,
    pub items: Vec<ReturnItem>,
    pub order: Vec<SortItem>,
    pub skip: Option<Expr>,
    pub limit: Option<Expr>,
}

/// A chain `(a)-[r]->(b)<-[s]-(c)…`.
#[derive(Debug, Clone, PartialEq)]
pub struct PathPattern {
    pub start: NodePattern,
    pub hops: Vec<(RelPattern, NodePattern)>,
}

/// `(var:Label {key: value, …})`, every part optional.
#[derive(Debug, Clone, PartialEq)]
pub struct NodePattern {
    pub var: Option<String>,
    pub label: Option<String>,
    pub props: Vec<(String, Expr)>,
    pub pos: usize,
}

/// Direction of a relationship pattern as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelDir {
    /// `-[]->`
    Right,
    /// `<-[]-`
    Left,
    /// `-[]-`
    Either,
}

/// `-[var:T1|T2*min..max {k: v}]->`.
#[derive(Debug, Clone, PartialEq)]
pub struct RelPattern {
    pub var: Option<String>,
    pub types: Vec<String>,
    pub props: Vec<(String, Expr)>,
    pub dir: RelDir,
    /// `Some((min, max))` for a variable-length relationship.
    pub length: Option<(u32, u32)>,
    pub pos: usize,
}

/// One `RETURN` item; `text` is the expression as written (the default column name).
#[derive(Debug, Clone, PartialEq)]
pub struct ReturnItem {
    pub expr: Expr,
    pub alias: Option<String>,
    pub text: String,
}

impl ReturnItem {
    /// The column name: the alias, or the expression as written.
    pub fn name(&self) -> &str {
        self.alias.as_deref().unwrap_or(&self.text)
    }
}

/// `ORDER BY expr [ASC|DESC]`.
#[derive(Debug, Clone, PartialEq)]
pub struct SortItem {
    pub expr: Expr,
    pub text: String,
    pub descending: bool,
}

/// Comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// String predicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrOp {
    StartsWith,
    EndsWith,
    Contains,
}

/// Aggregate functions of `RETURN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggFn {
    Count,
    Sum,
    Avg,
    Min,
    Max,
    Collect,
}

/// Expressions of `WHERE`, `RETURN`, property maps, `SKIP` and `LIMIT`.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Literal(Value),
    Param(String, usize),
    List(Vec<Expr>),
    Var(String, usize),
    Prop(Box<Expr>, String),
    Neg(Box<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    Str(StrOp, Box<Expr>, Box<Expr>),
    In(Box<Expr>, Box<Expr>),
    IsNull(Box<Expr>, bool),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    /// A scalar function: `id`, `label`, `labels`, `type`, `size`, `length`,
    /// `properties`, `tolower`, `toupper` (name lower-cased).
    Call(String, Vec<Expr>, usize),
    /// An aggregate; `None` argument is `count(*)`.
    Agg(AggFn, bool, Option<Box<Expr>>),
}

impl Expr {
    /// Whether an aggregate occurs anywhere in the expression.
    pub fn has_aggregate(&self) -> bool {
        match self {
            Expr::Agg(..) => true,
            Expr::Literal(_) | Expr::Param(..) | Expr::Var(..) => false,
            Expr::List(xs) | Expr::Call(_, xs, _) => xs.iter().any(Expr::has_aggregate),
            Expr::Prop(e, _) | Expr::Neg(e) | Expr::Not(e) | Expr::IsNull(e, _) => e.has_aggregate(),
            Expr::Cmp(_, a, b) | Expr::Str(_, a, b) | Expr::In(a, b) | Expr::And(a, b) | Expr::Or(a, b) => {
                a.has_aggregate() || b.has_aggregate()
            }
        }
    }

    /// Every variable the expression reads, outside aggregates included.
    pub fn vars<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Expr::Var(v, _) => out.push(v),
            Expr::Literal(_) | Expr::Param(..) => {}
            Expr::List(xs) | Expr::Call(_, xs, _) => xs.iter().for_each(|x| x.vars(out)),
            Expr::Prop(e, _) | Expr::Neg(e) | Expr::Not(e) | Expr::IsNull(e, _) => e.vars(out),
            Expr::Cmp(_, a, b) | Expr::Str(_, a, b) | Expr::In(a, b) | Expr::And(a, b) | Expr::Or(a, b) => {
                a.vars(out);
                b.vars(out);
            }
            Expr::Agg(_, _, e) => {
                if let Some(e) = e {
                    e.vars(out)
                }
            }
        }
    }
}
