//! Evaluation of pattern queries: a backtracking matcher over a [`GraphSource`].
//!
//! Each path pattern starts from its most selective node (a variable bound by an
//! earlier pattern, then `id(v) = …` in WHERE, then the label with the fewest
//! nodes, then a scan) and extends hop by hop through the adjacency of the node
//! at hand, in both directions along the chain. Every `WHERE` conjunct is checked
//! as soon as the variables it reads are bound. Relationships are unique within
//! one match (as in Cypher), which also bounds variable-length expansion.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use serde_json::{Map, Value, json};

use crate::ast::*;
use crate::value::{self, compare, equals, truth};
use crate::{Adjacent, Direction, Edge, EvalError, GraphSource, Node, QueryError};

/// Label sizes are counted up to this many nodes when choosing anchors.
const LABEL_COUNT_CAP: u64 = 100_000;

/// Limits of one evaluation.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Rows returned at most (a larger `LIMIT` is lowered to this; without
    /// `LIMIT`, more rows set `truncated`).
    pub max_rows: usize,
    /// Graph elements (anchor candidates and adjacency entries) visited at most.
    pub max_work: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options { max_rows: 100_000, max_work: 20_000_000 }
    }
}

/// A query's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryOutput {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
    /// More rows existed than `max_rows` (no `LIMIT` given).
    pub truncated: bool,
    /// Graph elements visited.
    pub work: u64,
    /// How each path pattern was started, e.g. `a by label Person`.
    pub plan: Vec<String>,
}

/// A bound variable.
#[derive(Debug, Clone)]
enum Bound {
    Node(Rc<Node>),
    Edge(Rc<Edge>),
    Path(Rc<Vec<Rc<Edge>>>),
}

/// An evaluated expression.
#[derive(Debug, Clone)]
enum Val {
    J(Value),
    B(Bound),
}

fn node_json(n: &Node) -> Value {
    json!({"id": n.id, "label": n.label, "properties": n.properties})
}

fn edge_json(e: &Edge) -> Value {
    json!({"id": e.id, "from_node": e.from_node, "to_node": e.to_node, "label": e.label, "properties": e.properties})
}

impl Val {
    fn into_json(self) -> Value {
        match self {
            Val::J(v) => v,
            Val::B(Bound::Node(n)) => node_json(&n),
            Val::B(Bound::Edge(e)) => edge_json(&e),
            Val::B(Bound::Path(p)) => Value::Array(p.iter().map(|e| edge_json(e)).collect()),
        }
    }
}

struct NodeEl {
    slot: usize,
    var: Option<String>,
    label: Option<String>,
    props: Vec<(String, Value)>,
    /// From a `id(v) = value` conjunct.
    id: Option<String>,
}

struct RelEl {
    /// `None` for an anonymous relationship.
    slot: Option<usize>,
    types: Vec<String>,
    props: Vec<(String, Value)>,
    dir: RelDir,
    length: Option<(u32, u32)>,
}

enum Step {
    /// Bind `paths[p].nodes[n]` from its candidates.
    Anchor { p: usize, n: usize },
    /// From node `from` (bound) over rel `r` to node `to`.
    Hop { p: usize, r: usize, from: usize, to: usize, forward: bool },
}

struct CPath {
    nodes: Vec<NodeEl>,
    rels: Vec<RelEl>,
}

struct Plan<'q> {
    paths: Vec<CPath>,
    steps: Vec<Step>,
    /// Conjuncts checked after step k.
    checks: Vec<Vec<&'q Expr>>,
    /// Conjuncts without variables, checked once.
    constant: Vec<&'q Expr>,
    slots: usize,
    vars: HashMap<String, (usize, bool)>,
    params: &'q Map<String, Value>,
}

/// Parses and runs `text` with `params` against `src`.
pub fn run_query<S: GraphSource>(
    src: &S,
    text: &str,
    params: &Map<String, Value>,
    opts: Options,
) -> Result<QueryOutput, EvalError<S::Error>> {
    let q = crate::parse(text)?;
    run_parsed(src, &q, params, opts)
}

fn split_and<'q>(e: &'q Expr, out: &mut Vec<&'q Expr>) {
    match e {
        Expr::And(a, b) => {
            split_and(a, out);
            split_and(b, out);
        }
        other => out.push(other),
    }
}

fn param<'p>(params: &'p Map<String, Value>, name: &str, pos: usize) -> Result<&'p Value, QueryError> {
    params.get(name).ok_or_else(|| QueryError::at(pos, format!("parameter ${name} is not given")))
}

/// A literal, parameter or list of them (property maps, SKIP, LIMIT).
fn constant(e: &Expr, params: &Map<String, Value>) -> Result<Value, QueryError> {
    Ok(match e {
        Expr::Literal(v) => v.clone(),
        Expr::Param(p, pos) => param(params, p, *pos)?.clone(),
        Expr::List(xs) => Value::Array(xs.iter().map(|x| constant(x, params)).collect::<Result<_, _>>()?),
        Expr::Neg(x) => match constant(x, params)? {
            Value::Number(n) => crate::parse::negate(&n),
            _ => return Err(QueryError::new("only numbers can be negated")),
        },
        _ => return Err(QueryError::new("property maps, SKIP and LIMIT take literals or $parameters")),
    })
}

fn expr_pos(e: &Expr) -> Option<usize> {
    match e {
        Expr::Var(_, p) | Expr::Param(_, p) | Expr::Call(_, _, p) => Some(*p),
        Expr::Prop(x, _) | Expr::Neg(x) | Expr::Not(x) | Expr::IsNull(x, _) => expr_pos(x),
        Expr::Cmp(_, a, b) | Expr::Str(_, a, b) | Expr::In(a, b) | Expr::And(a, b) | Expr::Or(a, b) => expr_pos(a).or_else(|| expr_pos(b)),
        Expr::List(xs) => xs.iter().find_map(expr_pos),
        Expr::Agg(_, _, x) => x.as_deref().and_then(expr_pos),
        Expr::Literal(_) => None,
    }
}

/// `id(v) = value` (either side): the variable and the id.
fn id_equality(e: &Expr, params: &Map<String, Value>) -> Option<(String, String)> {
    let Expr::Cmp(CmpOp::Eq, a, b) = e else { return None };
    let pick = |f: &Expr, v: &Expr| -> Option<(String, String)> {
        let Expr::Call(name, args, _) = f else { return None };
        let [Expr::Var(var, _)] = args.as_slice() else { return None };
        if name != "id" {
            return None;
        }
        match constant(v, params).ok()? {
            Value::String(s) => Some((var.clone(), s)),
            _ => None,
        }
    };
    pick(a, b).or_else(|| pick(b, a))
}

/// Assigns the slot of a (possibly anonymous) variable: name, is it a node, position.
type SlotFor<'a> = dyn FnMut(&Option<String>, bool, usize) -> Result<usize, QueryError> + 'a;

fn compile<'q>(q: &'q Query, params: &'q Map<String, Value>, label_counts: &HashMap<String, u64>) -> Result<Plan<'q>, QueryError> {
    let mut vars: HashMap<String, (usize, bool)> = HashMap::new();
    let mut slots = 0usize;
    let mut slot_for = |var: &Option<String>, is_node: bool, pos: usize| -> Result<usize, QueryError> {
        if let Some(v) = var {
            if let Some((s, n)) = vars.get(v) {
                if *n != is_node {
                    return Err(QueryError::at(pos, format!("variable {v} is used both as a node and as a relationship")));
                }
                if !is_node {
                    return Err(QueryError::at(pos, format!("relationship variable {v} is bound twice")));
                }
                return Ok(*s);
            }
            vars.insert(v.clone(), (slots, is_node));
        }
        slots += 1;
        Ok(slots - 1)
    };
    let props = |ps: &[(String, Expr)]| -> Result<Vec<(String, Value)>, QueryError> {
        ps.iter().map(|(k, e)| Ok((k.clone(), constant(e, params)?))).collect()
    };
    let mut conjuncts = Vec::new();
    if let Some(f) = &q.filter {
        split_and(f, &mut conjuncts);
    }
    let ids: Vec<(String, String)> = conjuncts.iter().filter_map(|c| id_equality(c, params)).collect();
    let mut paths = Vec::new();
    for p in &q.patterns {
        let mut nodes = Vec::new();
        let mut rels = Vec::new();
        let el = |n: &NodePattern, slot_for: &mut SlotFor<'_>| -> Result<NodeEl, QueryError> {
            let slot = slot_for(&n.var, true, n.pos)?;
            let id = n.var.as_ref().and_then(|v| ids.iter().find(|(x, _)| x == v).map(|(_, id)| id.clone()));
            Ok(NodeEl { slot, var: n.var.clone(), label: n.label.clone(), props: props(&n.props)?, id })
        };
        nodes.push(el(&p.start, &mut slot_for)?);
        for (r, n) in &p.hops {
            let slot = match &r.var {
                Some(_) => Some(slot_for(&r.var, false, r.pos)?),
                None => None,
            };
            rels.push(RelEl { slot, types: r.types.clone(), props: props(&r.props)?, dir: r.dir, length: r.length });
            nodes.push(el(n, &mut slot_for)?);
        }
        paths.push(CPath { nodes, rels });
    }
    // Every variable read must be bound by a pattern.
    let mut read = Vec::new();
    for c in &conjuncts {
        c.vars(&mut read);
    }
    for i in &q.items {
        i.expr.vars(&mut read);
    }
    let aliases: Vec<&str> = q.items.iter().filter_map(|i| i.alias.as_deref()).collect();
    for s in &q.order {
        let mut v = Vec::new();
        s.expr.vars(&mut v);
        read.extend(v.into_iter().filter(|x| !aliases.contains(x)));
    }
    for v in read {
        if !vars.contains_key(v) {
            let pos = find_var_pos(q, v);
            return Err(QueryError { message: format!("variable {v} is not defined in MATCH"), position: pos });
        }
    }
    for i in &q.items {
        if i.expr.has_aggregate() && !matches!(i.expr, Expr::Agg(..)) {
            return Err(QueryError { message: format!("aggregates must be a whole RETURN item: {}", i.text), position: expr_pos(&i.expr) });
        }
    }
    let mut plan = Plan { paths, steps: Vec::new(), checks: Vec::new(), constant: Vec::new(), slots, vars, params };
    plan_steps(&mut plan, &conjuncts, label_counts);
    Ok(plan)
}

fn find_var_pos(q: &Query, v: &str) -> Option<usize> {
    fn walk(e: &Expr, v: &str) -> Option<usize> {
        match e {
            Expr::Var(x, p) if x == v => Some(*p),
            Expr::Var(..) | Expr::Literal(_) | Expr::Param(..) => None,
            Expr::List(xs) | Expr::Call(_, xs, _) => xs.iter().find_map(|x| walk(x, v)),
            Expr::Prop(x, _) | Expr::Neg(x) | Expr::Not(x) | Expr::IsNull(x, _) => walk(x, v),
            Expr::Cmp(_, a, b) | Expr::Str(_, a, b) | Expr::In(a, b) | Expr::And(a, b) | Expr::Or(a, b) => {
                walk(a, v).or_else(|| walk(b, v))
            }
            Expr::Agg(_, _, x) => x.as_deref().and_then(|x| walk(x, v)),
        }
    }
    q.filter.iter().chain(q.items.iter().map(|i| &i.expr)).chain(q.order.iter().map(|s| &s.expr)).find_map(|e| walk(e, v))
}

/// Orders the steps (anchor per path, then hops right, then left) and places
/// each conjunct after the step that binds its last variable.
fn plan_steps<'q>(plan: &mut Plan<'q>, conjuncts: &[&'q Expr], label_counts: &HashMap<String, u64>) {
    let mut bound_at: Vec<Option<usize>> = vec![None; plan.slots];
    let mut steps = Vec::new();
    for (p, path) in plan.paths.iter().enumerate() {
        // Anchor: a bound variable, an id, the label with the fewest nodes, a scan.
        let cost = |n: &NodeEl| -> u64 {
            if bound_at[n.slot].is_some() {
                0
            } else if n.id.is_some() {
                1
            } else if let Some(l) = &n.label {
                2 + label_counts.get(l).copied().unwrap_or(0)
            } else if !n.props.is_empty() {
                u64::MAX - 1
            } else {
                u64::MAX
            }
        };
        let anchor = (0..path.nodes.len()).min_by_key(|i| (cost(&path.nodes[*i]), *i)).unwrap_or(0);
        let mut order = vec![Step::Anchor { p, n: anchor }];
        for r in anchor..path.rels.len() {
            order.push(Step::Hop { p, r, from: r, to: r + 1, forward: true });
        }
        for r in (0..anchor).rev() {
            order.push(Step::Hop { p, r, from: r + 1, to: r, forward: false });
        }
        for s in order {
            let k = steps.len();
            match &s {
                Step::Anchor { n, .. } => {
                    let slot = path.nodes[*n].slot;
                    bound_at[slot].get_or_insert(k);
                }
                Step::Hop { r, to, .. } => {
                    if let Some(slot) = path.rels[*r].slot {
                        bound_at[slot].get_or_insert(k);
                    }
                    let slot = path.nodes[*to].slot;
                    bound_at[slot].get_or_insert(k);
                }
            }
            steps.push(s);
        }
    }
    let mut checks: Vec<Vec<&'q Expr>> = (0..steps.len()).map(|_| Vec::new()).collect();
    for c in conjuncts {
        let mut vs = Vec::new();
        c.vars(&mut vs);
        let at = vs.iter().filter_map(|v| plan.vars.get(*v).and_then(|(s, _)| bound_at[*s])).max();
        match at {
            Some(k) => checks[k].push(c),
            None => plan.constant.push(c),
        }
    }
    plan.steps = steps;
    plan.checks = checks;
}

/// What the matcher feeds rows to.
struct Sink<'q> {
    q: &'q Query,
    aggregate: bool,
    /// Stop after this many rows (no ORDER BY, no aggregation).
    stop_at: Option<usize>,
    rows: Vec<(Vec<Value>, Vec<Value>)>,
    seen: HashSet<String>,
    groups: HashMap<String, usize>,
    group_rows: Vec<(Vec<Value>, Vec<Agg>)>,
}

#[derive(Debug, Clone)]
enum Agg {
    Count(u64),
    Sum(Option<i64>, f64),
    Avg(f64, u64),
    Min(Option<Value>),
    Max(Option<Value>),
    Collect(Vec<Value>),
}

struct Exec<'a, S: GraphSource> {
    src: &'a S,
    plan: &'a Plan<'a>,
    opts: Options,
    nodes: HashMap<String, Option<Rc<Node>>>,
    work: u64,
    used: Vec<String>,
    sink: Sink<'a>,
    agg_seen: Vec<HashSet<String>>,
}

enum Flow {
    Go,
    Stop,
}

type R<T, E> = Result<T, EvalError<E>>;

fn work_error(max: u64) -> QueryError {
    QueryError::new(format!("the query visited more than {max} graph elements; narrow it with labels, id(v) = … or a smaller hop range"))
}

impl<'a, S: GraphSource> Exec<'a, S> {
    fn tick(&mut self, n: u64) -> Result<(), QueryError> {
        self.work += n;
        if self.work > self.opts.max_work { Err(work_error(self.opts.max_work)) } else { Ok(()) }
    }

    fn node(&mut self, id: &str) -> R<Option<Rc<Node>>, S::Error> {
        if let Some(n) = self.nodes.get(id) {
            return Ok(n.clone());
        }
        let n = self.src.node(id).map_err(EvalError::Source)?.map(Rc::new);
        if self.nodes.len() < 1_000_000 {
            self.nodes.insert(id.to_string(), n.clone());
        }
        Ok(n)
    }

    fn node_ok(&self, el: &NodeEl, n: &Node) -> bool {
        el.label.as_ref().is_none_or(|l| *l == n.label)
            && el.id.as_ref().is_none_or(|id| *id == n.id)
            && el.props.iter().all(|(k, v)| n.properties.get(k).is_some_and(|x| equals(x, v) == Some(true)))
    }

    fn edge_ok(el: &RelEl, e: &Edge) -> bool {
        el.props.iter().all(|(k, v)| e.properties.get(k).is_some_and(|x| equals(x, v) == Some(true)))
    }

    fn checks_pass(&mut self, k: usize, b: &[Option<Bound>]) -> R<bool, S::Error> {
        for c in &self.plan.checks[k] {
            if !self.test(c, b)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn test(&self, c: &Expr, b: &[Option<Bound>]) -> R<bool, S::Error> {
        let v = self.eval(c, b)?.into_json();
        Ok(truth(&v).map_err(|m| QueryError { message: format!("WHERE: {m}"), position: expr_pos(c) })? == Some(true))
    }

    fn run(&mut self, k: usize, b: &mut Vec<Option<Bound>>) -> R<Flow, S::Error> {
        let plan = self.plan;
        let Some(step) = plan.steps.get(k) else { return self.emit(b) };
        match *step {
            Step::Anchor { p, n } => {
                let el = &plan.paths[p].nodes[n];
                if let Some(Bound::Node(existing)) = &b[el.slot] {
                    let existing = existing.clone();
                    if self.node_ok(el, &existing) && self.checks_pass(k, b)? {
                        return self.run(k + 1, b);
                    }
                    return Ok(Flow::Go);
                }
                for cand in self.candidates(el)? {
                    self.tick(1)?;
                    if !self.node_ok(el, &cand) {
                        continue;
                    }
                    b[el.slot] = Some(Bound::Node(cand));
                    if self.checks_pass(k, b)? && matches!(self.run(k + 1, b)?, Flow::Stop) {
                        b[el.slot] = None;
                        return Ok(Flow::Stop);
                    }
                    b[el.slot] = None;
                }
                Ok(Flow::Go)
            }
            Step::Hop { p, r, from, to, forward } => {
                let path = &plan.paths[p];
                let (rel, target) = (&path.rels[r], &path.nodes[to]);
                let Some(Bound::Node(start)) = b[path.nodes[from].slot].clone() else {
                    return Err(QueryError::new("internal: hop from an unbound node").into());
                };
                let dir = match (rel.dir, forward) {
                    (RelDir::Either, _) => Direction::Both,
                    (RelDir::Right, true) | (RelDir::Left, false) => Direction::Out,
                    _ => Direction::In,
                };
                match rel.length {
                    None => self.single_hop(k, b, rel, target, &start, dir),
                    Some((min, max)) => {
                        let h = VarHop { rel, target, dir, min, max };
                        self.var_hop(k, b, &h, &start, 0, &mut Vec::new())
                    }
                }
            }
        }
    }

    fn candidates(&mut self, el: &NodeEl) -> R<Vec<Rc<Node>>, S::Error> {
        if let Some(id) = &el.id {
            return Ok(self.node(id)?.into_iter().collect());
        }
        let mut ids = Vec::new();
        if let Some(label) = &el.label {
            let max = self.opts.max_work;
            let mut n = self.work;
            self.src
                .label_nodes(label, &mut |id| {
                    ids.push(id.to_string());
                    n += 1;
                    Ok(n <= max)
                })
                .map_err(EvalError::Source)?;
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                out.extend(self.node(&id)?);
            }
            return Ok(out);
        }
        let mut out = Vec::new();
        let max = self.opts.max_work.saturating_sub(self.work);
        self.src
            .all_nodes(&mut |n| {
                out.push(Rc::new(n));
                Ok((out.len() as u64) <= max)
            })
            .map_err(EvalError::Source)?;
        Ok(out)
    }

    /// The adjacency of `node` for `rel` (every type of it) in `dir`.
    fn adjacency(&mut self, node: &str, rel: &RelEl, dir: Direction) -> R<Vec<Adjacent>, S::Error> {
        let mut out = Vec::new();
        let dirs: &[Direction] = match dir {
            Direction::Both => &[Direction::Out, Direction::In],
            Direction::Out => &[Direction::Out],
            Direction::In => &[Direction::In],
        };
        let types: Vec<Option<&str>> = if rel.types.is_empty() { vec![None] } else { rel.types.iter().map(|t| Some(t.as_str())).collect() };
        for d in dirs {
            for t in &types {
                self.src
                    .adjacent(node, *d, *t, &mut |a| {
                        // A self-loop appears in both directions; report it once.
                        if !(dir == Direction::Both && *d == Direction::In && a.other == node) {
                            out.push(a);
                        }
                        Ok(true)
                    })
                    .map_err(EvalError::Source)?;
            }
        }
        self.tick(out.len() as u64)?;
        Ok(out)
    }

    fn load_edge(&self, id: &str) -> R<Option<Rc<Edge>>, S::Error> {
        Ok(self.src.edge(id).map_err(EvalError::Source)?.map(Rc::new))
    }

    /// Binds the target node (or checks an already bound one).
    fn target(&mut self, b: &[Option<Bound>], el: &NodeEl, id: &str) -> R<Option<Rc<Node>>, S::Error> {
        if let Some(Bound::Node(n)) = &b[el.slot] {
            return Ok((n.id == id).then(|| n.clone()));
        }
        Ok(self.node(id)?.filter(|n| self.node_ok(el, n)))
    }

    fn single_hop(
        &mut self,
        k: usize,
        b: &mut Vec<Option<Bound>>,
        rel: &RelEl,
        target: &NodeEl,
        start: &Node,
        dir: Direction,
    ) -> R<Flow, S::Error> {
        let was_bound = b[target.slot].is_some();
        for a in self.adjacency(&start.id, rel, dir)? {
            if self.used.contains(&a.edge) {
                continue;
            }
            let Some(node) = self.target(b, target, &a.other)? else { continue };
            let edge = if rel.slot.is_some() || !rel.props.is_empty() {
                match self.load_edge(&a.edge)? {
                    Some(e) if Self::edge_ok(rel, &e) => Some(e),
                    _ => continue,
                }
            } else {
                None
            };
            if let (Some(slot), Some(e)) = (rel.slot, edge) {
                b[slot] = Some(Bound::Edge(e));
            }
            b[target.slot] = Some(Bound::Node(node));
            self.used.push(a.edge);
            let flow = if self.checks_pass(k, b)? { self.run(k + 1, b)? } else { Flow::Go };
            self.used.pop();
            if let Some(slot) = rel.slot {
                b[slot] = None;
            }
            if !was_bound {
                b[target.slot] = None;
            }
            if let Flow::Stop = flow {
                return Ok(Flow::Stop);
            }
        }
        Ok(Flow::Go)
    }

    /// Extends a variable-length relationship from `at`, `hops` edges so far.
    fn var_hop(
        &mut self,
        k: usize,
        b: &mut Vec<Option<Bound>>,
        h: &VarHop<'_>,
        at: &Node,
        hops: u32,
        trail: &mut Vec<Rc<Edge>>,
    ) -> R<Flow, S::Error> {
        let (rel, target) = (h.rel, h.target);
        if hops >= h.min {
            let was_bound = b[target.slot].is_some();
            if let Some(node) = self.target(b, target, &at.id)? {
                if let Some(slot) = rel.slot {
                    b[slot] = Some(Bound::Path(Rc::new(trail.clone())));
                }
                b[target.slot] = Some(Bound::Node(node));
                let flow = if self.checks_pass(k, b)? { self.run(k + 1, b)? } else { Flow::Go };
                if let Some(slot) = rel.slot {
                    b[slot] = None;
                }
                if !was_bound {
                    b[target.slot] = None;
                }
                if let Flow::Stop = flow {
                    return Ok(Flow::Stop);
                }
            }
        }
        if hops >= h.max {
            return Ok(Flow::Go);
        }
        let need_edges = rel.slot.is_some() || !rel.props.is_empty();
        for a in self.adjacency(&at.id, rel, h.dir)? {
            if self.used.contains(&a.edge) {
                continue;
            }
            let Some(next) = self.node(&a.other)? else { continue };
            if need_edges {
                match self.load_edge(&a.edge)? {
                    Some(e) if Self::edge_ok(rel, &e) => trail.push(e),
                    _ => continue,
                }
            }
            self.used.push(a.edge);
            let flow = self.var_hop(k, b, h, &next, hops + 1, trail);
            self.used.pop();
            if need_edges {
                trail.pop();
            }
            if let Flow::Stop = flow? {
                return Ok(Flow::Stop);
            }
        }
        Ok(Flow::Go)
    }
}

/// A variable-length relationship being expanded.
struct VarHop<'p> {
    rel: &'p RelEl,
    target: &'p NodeEl,
    dir: Direction,
    min: u32,
    max: u32,
}

impl<'a, S: GraphSource> Exec<'a, S> {
    /// A full match: project it (or fold it into its group).
    fn emit(&mut self, b: &[Option<Bound>]) -> R<Flow, S::Error> {
        let q = self.sink.q;
        if self.sink.aggregate {
            let mut keys = Vec::new();
            for i in &q.items {
                if !matches!(i.expr, Expr::Agg(..)) {
                    keys.push(self.eval(&i.expr, b)?.into_json());
                }
            }
            let gk = keys.iter().map(value::key).collect::<Vec<_>>().join("\u{1}");
            let idx = match self.sink.groups.get(&gk) {
                Some(i) => *i,
                None => {
                    let aggs = q.items.iter().filter_map(|i| match &i.expr {
                        Expr::Agg(f, ..) => Some(new_agg(*f)),
                        _ => None,
                    });
                    self.sink.group_rows.push((keys, aggs.collect()));
                    self.sink.groups.insert(gk.clone(), self.sink.group_rows.len() - 1);
                    self.sink.group_rows.len() - 1
                }
            };
            let mut ai = 0;
            for i in &q.items {
                let Expr::Agg(f, distinct, arg) = &i.expr else { continue };
                let v = match arg {
                    None => Some(Val::J(Value::Bool(true))),
                    Some(e) => Some(self.eval(e, b)?).filter(|v| !matches!(v, Val::J(Value::Null))),
                };
                if let Some(v) = v {
                    // Nodes and relationships are told apart by id, without building their JSON.
                    let fresh = !*distinct || self.agg_seen[ai].insert(format!("{gk}\u{2}{}", value::key(&identity(v.clone()))));
                    if fresh {
                        let v = if *f == AggFn::Count { Value::Null } else { v.into_json() };
                        fold(&mut self.sink.group_rows[idx].1[ai], v).map_err(QueryError::new)?;
                    }
                }
                ai += 1;
            }
            return Ok(Flow::Go);
        }
        let mut row = Vec::with_capacity(q.items.len());
        for i in &q.items {
            row.push(self.eval(&i.expr, b)?.into_json());
        }
        if q.distinct && !self.sink.seen.insert(row.iter().map(value::key).collect::<Vec<_>>().join("\u{1}")) {
            return Ok(Flow::Go);
        }
        let mut sort = Vec::with_capacity(q.order.len());
        for s in &q.order {
            sort.push(match column_of(q, s) {
                Some(c) => row[c].clone(),
                None => self.eval(&s.expr, b)?.into_json(),
            });
        }
        self.sink.rows.push((sort, row));
        if self.sink.stop_at.is_some_and(|n| self.sink.rows.len() >= n) {
            return Ok(Flow::Stop);
        }
        Ok(Flow::Go)
    }

    fn eval(&self, e: &Expr, b: &[Option<Bound>]) -> Result<Val, QueryError> {
        let j = |v: Value| Ok(Val::J(v));
        match e {
            Expr::Literal(v) => j(v.clone()),
            Expr::Param(p, pos) => j(param(self.plan.params, p, *pos)?.clone()),
            Expr::List(xs) => j(Value::Array(xs.iter().map(|x| self.eval(x, b).map(Val::into_json)).collect::<Result<_, _>>()?)),
            Expr::Var(v, pos) => match self.plan.vars.get(v).and_then(|(s, _)| b[*s].clone()) {
                Some(bound) => Ok(Val::B(bound)),
                None => Err(QueryError::at(*pos, format!("variable {v} is not bound here"))),
            },
            Expr::Prop(x, key) => match self.eval(x, b)? {
                Val::B(Bound::Node(n)) => j(n.properties.get(key).cloned().unwrap_or(Value::Null)),
                Val::B(Bound::Edge(e)) => j(e.properties.get(key).cloned().unwrap_or(Value::Null)),
                Val::J(Value::Object(m)) => j(m.get(key).cloned().unwrap_or(Value::Null)),
                Val::J(Value::Null) => j(Value::Null),
                other => Err(QueryError { message: format!("cannot read property {key} of {}", other.into_json()), position: expr_pos(x) }),
            },
            Expr::Neg(x) => match self.eval(x, b)?.into_json() {
                Value::Number(n) => j(crate::parse::negate(&n)),
                Value::Null => j(Value::Null),
                other => Err(QueryError { message: format!("cannot negate {other}"), position: expr_pos(x) }),
            },
            Expr::Cmp(op, x, y) => {
                let (a, c) = (self.eval(x, b)?, self.eval(y, b)?);
                let (a, c) = (identity(a), identity(c));
                let r = match op {
                    CmpOp::Eq => equals(&a, &c),
                    CmpOp::Ne => equals(&a, &c).map(|t| !t),
                    CmpOp::Lt => compare(&a, &c).map(|o| o == Ordering::Less),
                    CmpOp::Le => compare(&a, &c).map(|o| o != Ordering::Greater),
                    CmpOp::Gt => compare(&a, &c).map(|o| o == Ordering::Greater),
                    CmpOp::Ge => compare(&a, &c).map(|o| o != Ordering::Less),
                };
                j(r.map(Value::Bool).unwrap_or(Value::Null))
            }
            Expr::Str(op, x, y) => match (self.eval(x, b)?.into_json(), self.eval(y, b)?.into_json()) {
                (Value::String(s), Value::String(t)) => j(Value::Bool(match op {
                    StrOp::StartsWith => s.starts_with(&t),
                    StrOp::EndsWith => s.ends_with(&t),
                    StrOp::Contains => s.contains(&t),
                })),
                _ => j(Value::Null),
            },
            Expr::In(x, y) => {
                let v = identity(self.eval(x, b)?);
                match self.eval(y, b)?.into_json() {
                    Value::Array(xs) => {
                        let mut unknown = false;
                        for item in &xs {
                            match equals(&v, item) {
                                Some(true) => return j(Value::Bool(true)),
                                None => unknown = true,
                                Some(false) => {}
                            }
                        }
                        j(if unknown { Value::Null } else { Value::Bool(false) })
                    }
                    Value::Null => j(Value::Null),
                    other => Err(QueryError { message: format!("IN needs a list, found {other}"), position: expr_pos(y) }),
                }
            }
            Expr::IsNull(x, negated) => {
                let null = matches!(self.eval(x, b)?, Val::J(Value::Null));
                j(Value::Bool(null != *negated))
            }
            Expr::And(x, y) => {
                let a = self.truth(x, b)?;
                if a == Some(false) {
                    return j(Value::Bool(false));
                }
                let c = self.truth(y, b)?;
                j(match (a, c) {
                    (_, Some(false)) => Value::Bool(false),
                    (Some(true), Some(true)) => Value::Bool(true),
                    _ => Value::Null,
                })
            }
            Expr::Or(x, y) => {
                let a = self.truth(x, b)?;
                if a == Some(true) {
                    return j(Value::Bool(true));
                }
                let c = self.truth(y, b)?;
                j(match (a, c) {
                    (_, Some(true)) => Value::Bool(true),
                    (Some(false), Some(false)) => Value::Bool(false),
                    _ => Value::Null,
                })
            }
            Expr::Not(x) => j(self.truth(x, b)?.map(|t| Value::Bool(!t)).unwrap_or(Value::Null)),
            Expr::Call(name, args, pos) => {
                let arg = self.eval(&args[0], b)?;
                let bad = |what: &str| Err(QueryError::at(*pos, format!("{name}() needs {what}")));
                match (name.as_str(), arg) {
                    (_, Val::J(Value::Null)) => j(Value::Null),
                    ("id", Val::B(Bound::Node(n))) => j(Value::String(n.id.clone())),
                    ("id", Val::B(Bound::Edge(e))) => j(Value::String(e.id.clone())),
                    ("id", _) => bad("a node or relationship"),
                    ("label", Val::B(Bound::Node(n))) => j(Value::String(n.label.clone())),
                    ("labels", Val::B(Bound::Node(n))) => j(json!([n.label])),
                    ("label" | "labels", _) => bad("a node"),
                    ("type", Val::B(Bound::Edge(e))) => j(Value::String(e.label.clone())),
                    ("type", _) => bad("a relationship"),
                    ("size" | "length", Val::B(Bound::Path(p))) => j(json!(p.len())),
                    ("size" | "length", Val::J(Value::Array(xs))) => j(json!(xs.len())),
                    ("size" | "length", Val::J(Value::String(s))) => j(json!(s.chars().count())),
                    ("size" | "length", _) => bad("a list, string or variable-length relationship"),
                    ("properties", Val::B(Bound::Node(n))) => j(Value::Object(n.properties.clone())),
                    ("properties", Val::B(Bound::Edge(e))) => j(Value::Object(e.properties.clone())),
                    ("properties", _) => bad("a node or relationship"),
                    ("tolower", Val::J(Value::String(s))) => j(Value::String(s.to_lowercase())),
                    ("toupper", Val::J(Value::String(s))) => j(Value::String(s.to_uppercase())),
                    ("tolower" | "toupper", _) => bad("a string"),
                    _ => Err(QueryError::at(*pos, format!("unknown function {name}()"))),
                }
            }
            Expr::Agg(..) => Err(QueryError::new("aggregates are only allowed as RETURN items")),
        }
    }

    fn truth(&self, e: &Expr, b: &[Option<Bound>]) -> Result<Option<bool>, QueryError> {
        truth(&self.eval(e, b)?.into_json()).map_err(|m| QueryError { message: m, position: expr_pos(e) })
    }
}

/// Nodes and relationships compare by id.
fn identity(v: Val) -> Value {
    match v {
        Val::B(Bound::Node(n)) => json!({"node": n.id}),
        Val::B(Bound::Edge(e)) => json!({"edge": e.id}),
        other => other.into_json(),
    }
}

/// The RETURN column an ORDER BY item names (by alias or by the same text).
fn column_of(q: &Query, s: &SortItem) -> Option<usize> {
    q.items.iter().position(|i| i.alias.as_deref() == Some(s.text.as_str()) || i.text == s.text)
}

fn new_agg(f: AggFn) -> Agg {
    match f {
        AggFn::Count => Agg::Count(0),
        AggFn::Sum => Agg::Sum(Some(0), 0.0),
        AggFn::Avg => Agg::Avg(0.0, 0),
        AggFn::Min => Agg::Min(None),
        AggFn::Max => Agg::Max(None),
        AggFn::Collect => Agg::Collect(Vec::new()),
    }
}

fn fold(a: &mut Agg, v: Value) -> Result<(), String> {
    match a {
        Agg::Count(n) => *n += 1,
        Agg::Sum(int, f) => {
            let Value::Number(n) = &v else { return Err(format!("sum() needs numbers, found {v}")) };
            *f += n.as_f64().unwrap_or(0.0);
            *int = match (*int, n.as_i64()) {
                (Some(x), Some(y)) => x.checked_add(y),
                _ => None,
            };
        }
        Agg::Avg(sum, n) => {
            let Value::Number(x) = &v else { return Err(format!("avg() needs numbers, found {v}")) };
            *sum += x.as_f64().unwrap_or(0.0);
            *n += 1;
        }
        Agg::Min(m) => {
            if m.as_ref().is_none_or(|cur| value::order(&v, cur) == Ordering::Less) {
                *m = Some(v);
            }
        }
        Agg::Max(m) => {
            if m.as_ref().is_none_or(|cur| value::order(&v, cur) == Ordering::Greater) {
                *m = Some(v);
            }
        }
        Agg::Collect(xs) => xs.push(v),
    }
    Ok(())
}

fn finish(a: Agg) -> Value {
    match a {
        Agg::Count(n) => json!(n),
        Agg::Sum(Some(i), _) => json!(i),
        Agg::Sum(None, f) => json!(f),
        Agg::Avg(_, 0) => Value::Null,
        Agg::Avg(s, n) => json!(s / n as f64),
        Agg::Min(m) | Agg::Max(m) => m.unwrap_or(Value::Null),
        Agg::Collect(xs) => Value::Array(xs),
    }
}

fn count_arg(e: &Option<Expr>, params: &Map<String, Value>, what: &str) -> Result<Option<usize>, QueryError> {
    let Some(e) = e else { return Ok(None) };
    match constant(e, params)? {
        Value::Number(n) if n.as_u64().is_some() => Ok(n.as_u64().map(|n| n.min(usize::MAX as u64) as usize)),
        other => Err(QueryError { message: format!("{what} needs a non-negative integer, found {other}"), position: expr_pos(e) }),
    }
}

/// Runs a parsed query.
pub fn run_parsed<S: GraphSource>(
    src: &S,
    q: &Query,
    params: &Map<String, Value>,
    opts: Options,
) -> Result<QueryOutput, EvalError<S::Error>> {
    // Label sizes (counted up to a cap) choose the anchors.
    let mut label_counts: HashMap<String, u64> = HashMap::new();
    for l in q.patterns.iter().flat_map(|p| std::iter::once(&p.start).chain(p.hops.iter().map(|(_, n)| n))).filter_map(|n| n.label.as_ref())
    {
        if label_counts.contains_key(l) {
            continue;
        }
        let mut n = 0u64;
        src.label_nodes(l, &mut |_| {
            n += 1;
            Ok(n < LABEL_COUNT_CAP)
        })
        .map_err(EvalError::Source)?;
        label_counts.insert(l.clone(), n);
    }
    let plan = compile(q, params, &label_counts)?;
    let skip = count_arg(&q.skip, params, "SKIP")?.unwrap_or(0);
    let limit = count_arg(&q.limit, params, "LIMIT")?;
    let aggregate = q.items.iter().any(|i| matches!(i.expr, Expr::Agg(..)));
    if (aggregate || q.distinct)
        && let Some(s) = q.order.iter().find(|s| column_of(q, s).is_none())
    {
        return Err(QueryError {
            message: format!("with DISTINCT or aggregates, ORDER BY must name a RETURN column: {}", s.text),
            position: expr_pos(&s.expr),
        }
        .into());
    }
    let cap = limit.unwrap_or(opts.max_rows).min(opts.max_rows);
    // Without ORDER BY or aggregation, matching stops once enough rows exist
    // (one more than asked without LIMIT, to report truncation).
    let stop_at = (q.order.is_empty() && !aggregate).then(|| skip.saturating_add(cap).saturating_add(1));
    let agg_count = q.items.iter().filter(|i| matches!(i.expr, Expr::Agg(..))).count();
    let describe = |p: &CPath, step: &Step| -> String {
        let Step::Anchor { n, .. } = step else { return String::new() };
        let el = &p.nodes[*n];
        let name = el.var.clone().unwrap_or_else(|| format!("node {}", n + 1));
        if el.id.is_some() {
            format!("{name} by id")
        } else if let Some(l) = &el.label {
            format!("{name} by label {l}")
        } else {
            format!("{name} by scanning every node")
        }
    };
    let plan_text: Vec<String> = plan
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Anchor { p, .. } => Some(describe(&plan.paths[*p], s)),
            _ => None,
        })
        .collect();
    let mut exec = Exec {
        src,
        plan: &plan,
        opts,
        nodes: HashMap::new(),
        work: 0,
        used: Vec::new(),
        sink: Sink { q, aggregate, stop_at, rows: Vec::new(), seen: HashSet::new(), groups: HashMap::new(), group_rows: Vec::new() },
        agg_seen: vec![HashSet::new(); agg_count],
    };
    let mut bindings: Vec<Option<Bound>> = vec![None; plan.slots];
    let mut pass = true;
    for c in &plan.constant {
        pass &= exec.test(c, &bindings)?;
    }
    if pass {
        exec.run(0, &mut bindings)?;
    }
    let work = exec.work;
    let sink = exec.sink;
    let mut rows: Vec<(Vec<Value>, Vec<Value>)> = if aggregate {
        let mut groups = sink.group_rows;
        let grouped = q.items.iter().any(|i| !matches!(i.expr, Expr::Agg(..)));
        if groups.is_empty() && !grouped {
            groups.push((
                Vec::new(),
                q.items
                    .iter()
                    .filter_map(|i| match &i.expr {
                        Expr::Agg(f, ..) => Some(new_agg(*f)),
                        _ => None,
                    })
                    .collect(),
            ));
        }
        groups
            .into_iter()
            .map(|(keys, aggs)| {
                let (mut keys, mut aggs) = (keys.into_iter(), aggs.into_iter());
                let row: Vec<Value> = q
                    .items
                    .iter()
                    .map(|i| match i.expr {
                        Expr::Agg(..) => aggs.next().map(finish).unwrap_or(Value::Null),
                        _ => keys.next().unwrap_or(Value::Null),
                    })
                    .collect();
                let sort = q.order.iter().map(|s| column_of(q, s).map(|c| row[c].clone()).unwrap_or(Value::Null)).collect();
                (sort, row)
            })
            .collect()
    } else {
        sink.rows
    };
    if !q.order.is_empty() {
        rows.sort_by(|(a, _), (b, _)| {
            for (i, s) in q.order.iter().enumerate() {
                let o = value::order(&a[i], &b[i]);
                let o = if s.descending { o.reverse() } else { o };
                if o != Ordering::Equal {
                    return o;
                }
            }
            Ordering::Equal
        });
    }
    let available = rows.len().saturating_sub(skip);
    let truncated = limit.is_none() && available > cap;
    let rows = rows.into_iter().skip(skip).take(cap).map(|(_, r)| r).collect();
    Ok(QueryOutput { columns: q.items.iter().map(|i| i.name().to_string()).collect(), rows, truncated, work, plan: plan_text })
}
