//! A linearizability checker: the Wing–Gong search with Lowe's memoization, as
//! in Porcupine. Call and return events sit in one time-ordered linked list; the
//! search repeatedly linearizes a pending call whose model step is legal (lifting
//! it and its return out of the list), backtracks when it meets a return whose
//! call could not be placed, and never revisits a (linearized set, state) pair.
//! Histories are checked per key (P-compositionality: a history of independent
//! registers is linearizable iff each key's sub-history is).
//!
//! An operation with an unknown outcome (timed out, connection lost) has its
//! return at +∞: it may take effect at any point after its call, or never.

use std::collections::HashSet;
use std::hash::Hash;

/// A sequential specification.
pub trait Model {
    type State: Clone + Eq + Hash;
    type Op;
    /// The initial state.
    fn init(&self) -> Self::State;
    /// The state after `op` (with its observed output) from `state`, or `None`
    /// when `op`'s output is impossible in `state`.
    fn step(&self, state: &Self::State, op: &Self::Op) -> Option<Self::State>;
}

/// One operation of a history: its call and return instants (any unit, one
/// clock) and the operation with its observed output.
#[derive(Clone, Debug)]
pub struct Timed<O> {
    pub call: u64,
    /// `None`: the outcome is unknown (the return is at +∞).
    pub ret: Option<u64>,
    pub op: O,
}

/// The verdict on one history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Linearizable,
    /// No linearization exists. `stuck_at` is the index (in the input) of the
    /// operation whose return the deepest partial linearization could not pass;
    /// `deepest` is how many operations that partial linearization placed.
    NotLinearizable {
        stuck_at: usize,
        deepest: usize,
    },
    /// The search gave up after `steps` steps.
    Unknown {
        steps: u64,
    },
}

const NIL: usize = usize::MAX;

struct Node {
    prev: usize,
    next: usize,
    /// Index of the operation.
    op: usize,
    is_call: bool,
    /// For a call: the node of its return.
    matching: usize,
}

/// Checks one history against `model`, giving up after `max_steps` search steps.
pub fn check<M: Model>(model: &M, history: &[Timed<M::Op>], max_steps: u64) -> Verdict {
    let n = history.len();
    if n == 0 {
        return Verdict::Linearizable;
    }
    // Events: (time, kind, op); calls sort before returns at equal times, so
    // touching intervals count as concurrent. Unknown returns go last.
    let mut events: Vec<(u64, u8, usize)> = Vec::with_capacity(2 * n);
    for (i, t) in history.iter().enumerate() {
        events.push((t.call, 0, i));
        events.push((t.ret.unwrap_or(u64::MAX).max(t.call), 1, i));
    }
    events.sort();
    // Node 0 is the head sentinel; event k is node k + 1.
    let mut nodes: Vec<Node> = Vec::with_capacity(2 * n + 1);
    nodes.push(Node { prev: NIL, next: NIL, op: NIL, is_call: false, matching: NIL });
    let mut ret_node = vec![NIL; n];
    for (k, (_, kind, op)) in events.iter().enumerate() {
        let idx = k + 1;
        nodes.push(Node { prev: idx - 1, next: NIL, op: *op, is_call: *kind == 0, matching: NIL });
        nodes[idx - 1].next = idx;
        if *kind == 1 {
            ret_node[*op] = idx;
        }
    }
    for node in nodes.iter_mut().skip(1) {
        if node.is_call {
            node.matching = ret_node[node.op];
        }
    }

    fn lift(nodes: &mut [Node], e: usize) {
        let (p, nx) = (nodes[e].prev, nodes[e].next);
        nodes[p].next = nx;
        nodes[nx].prev = p; // a call always has its return after it
        let m = nodes[e].matching;
        let (mp, mn) = (nodes[m].prev, nodes[m].next);
        nodes[mp].next = mn;
        if mn != NIL {
            nodes[mn].prev = mp;
        }
    }
    fn unlift(nodes: &mut [Node], e: usize) {
        let m = nodes[e].matching;
        let (mp, mn) = (nodes[m].prev, nodes[m].next);
        nodes[mp].next = m;
        if mn != NIL {
            nodes[mn].prev = m;
        }
        let (p, nx) = (nodes[e].prev, nodes[e].next);
        nodes[p].next = e;
        nodes[nx].prev = e;
    }

    let words = n.div_ceil(64);
    let mut linearized = vec![0u64; words];
    let mut cache: HashSet<(Vec<u64>, M::State)> = HashSet::new();
    let mut calls: Vec<(usize, M::State)> = Vec::new();
    let mut state = model.init();
    let mut entry = nodes[0].next;
    let mut steps = 0u64;
    let (mut deepest, mut stuck_at) = (0usize, NIL);
    while nodes[0].next != NIL {
        steps += 1;
        if steps > max_steps {
            return Verdict::Unknown { steps };
        }
        let node = &nodes[entry];
        if node.is_call {
            let op = node.op;
            let next = node.next;
            match model.step(&state, &history[op].op) {
                Some(new_state) => {
                    let mut set = linearized.clone();
                    set[op / 64] |= 1 << (op % 64);
                    if cache.insert((set.clone(), new_state.clone())) {
                        calls.push((entry, std::mem::replace(&mut state, new_state)));
                        linearized = set;
                        lift(&mut nodes, entry);
                        entry = nodes[0].next;
                    } else {
                        entry = next;
                    }
                }
                None => entry = next,
            }
        } else {
            if calls.len() >= deepest {
                deepest = calls.len();
                stuck_at = node.op;
            }
            let Some((call, prev_state)) = calls.pop() else {
                return Verdict::NotLinearizable { stuck_at, deepest };
            };
            state = prev_state;
            let op = nodes[call].op;
            linearized[op / 64] &= !(1 << (op % 64));
            unlift(&mut nodes, call);
            entry = nodes[call].next;
        }
    }
    Verdict::Linearizable
}

/// A register operation with its observed output.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RegisterOp {
    /// Sets the value.
    Write(i64),
    /// Observed the value (`None`: absent).
    Read(Option<i64>),
}

/// A register that starts absent.
pub struct Register;

impl Model for Register {
    type State = Option<i64>;
    type Op = RegisterOp;
    fn init(&self) -> Option<i64> {
        None
    }
    fn step(&self, state: &Option<i64>, op: &RegisterOp) -> Option<Option<i64>> {
        match op {
            RegisterOp::Write(v) => Some(Some(*v)),
            RegisterOp::Read(v) => (v == state).then_some(*state),
        }
    }
}

/// Checks a single register's history, first dropping writes of unknown outcome
/// whose value no read observed (linearizing such a write at +∞ is always
/// possible and changes nothing, so the verdict is the same; the search gets
/// exponentially cheaper). Returns the verdict and the indexes (into `history`)
/// of the operations actually checked.
pub fn check_register(history: &[Timed<RegisterOp>], max_steps: u64) -> (Verdict, Vec<usize>) {
    let observed: HashSet<i64> = history
        .iter()
        .filter_map(|t| match t.op {
            RegisterOp::Read(Some(v)) => Some(v),
            _ => None,
        })
        .collect();
    let kept: Vec<usize> = (0..history.len())
        .filter(|&i| match history[i].op {
            RegisterOp::Write(v) => history[i].ret.is_some() || observed.contains(&v),
            RegisterOp::Read(_) => true,
        })
        .collect();
    let sub: Vec<Timed<RegisterOp>> = kept.iter().map(|&i| history[i].clone()).collect();
    let verdict = match check(&Register, &sub, max_steps) {
        Verdict::NotLinearizable { stuck_at, deepest } => {
            Verdict::NotLinearizable { stuck_at: kept.get(stuck_at).copied().unwrap_or(usize::MAX), deepest }
        }
        v => v,
    };
    (verdict, kept)
}

#[cfg(test)]
mod tests {
    use super::RegisterOp::{Read, Write};
    use super::*;

    const BUDGET: u64 = 10_000_000;

    fn t(call: u64, ret: Option<u64>, op: RegisterOp) -> Timed<RegisterOp> {
        Timed { call, ret, op }
    }

    fn verdict(h: &[Timed<RegisterOp>]) -> Verdict {
        check_register(h, BUDGET).0
    }

    fn rejected(h: &[Timed<RegisterOp>]) -> bool {
        matches!(verdict(h), Verdict::NotLinearizable { .. })
    }

    #[test]
    fn accepts_simple_histories() {
        assert_eq!(verdict(&[]), Verdict::Linearizable);
        assert_eq!(verdict(&[t(0, Some(1), Read(None))]), Verdict::Linearizable);
        assert_eq!(verdict(&[t(0, Some(1), Write(1)), t(2, Some(3), Read(Some(1)))]), Verdict::Linearizable);
        // A read concurrent with a write may see either value, in either order
        // relative to another concurrent read that saw the other one.
        let h = [t(0, Some(100), Write(1)), t(10, Some(20), Read(None)), t(30, Some(40), Read(Some(1)))];
        assert_eq!(verdict(&h), Verdict::Linearizable);
        let h = [t(0, Some(100), Write(1)), t(10, Some(50), Read(Some(1))), t(20, Some(60), Read(None))];
        assert_eq!(verdict(&h), Verdict::Linearizable);
        // Concurrent writes can be ordered either way.
        let h = [t(0, Some(50), Write(1)), t(0, Some(50), Write(2)), t(60, Some(70), Read(Some(1))), t(80, Some(90), Read(Some(1)))];
        assert_eq!(verdict(&h), Verdict::Linearizable);
    }

    #[test]
    fn rejects_known_anomalies() {
        // A value nobody wrote.
        assert!(rejected(&[t(0, Some(1), Write(1)), t(2, Some(3), Read(Some(7)))]));
        // Stale read: 2 was acknowledged before the read began.
        assert!(rejected(&[t(0, Some(10), Write(1)), t(20, Some(30), Write(2)), t(40, Some(50), Read(Some(1)))]));
        // Lost write: acknowledged, then read as absent.
        assert!(rejected(&[t(0, Some(10), Write(1)), t(20, Some(30), Read(None))]));
        // Non-monotonic reads around a concurrent write: once 1 is seen, absent cannot be.
        assert!(rejected(&[t(0, Some(100), Write(1)), t(10, Some(20), Read(Some(1))), t(30, Some(40), Read(None))]));
        // Reading a value before its write was called.
        assert!(rejected(&[t(0, Some(10), Read(Some(1))), t(20, None, Write(1))]));
        // Two sequential reads flip between concurrent writes' values: 1, 2, 1.
        let h = [
            t(0, Some(100), Write(1)),
            t(0, Some(100), Write(2)),
            t(10, Some(20), Read(Some(1))),
            t(30, Some(40), Read(Some(2))),
            t(50, Some(60), Read(Some(1))),
        ];
        assert!(rejected(&h));
    }

    #[test]
    fn unknown_outcomes_may_or_may_not_take_effect() {
        // Timed-out write observed later: it took effect.
        assert_eq!(verdict(&[t(0, None, Write(1)), t(50, Some(60), Read(Some(1)))]), Verdict::Linearizable);
        // Timed-out write never observed: it may not have taken effect.
        assert_eq!(verdict(&[t(0, None, Write(1)), t(50, Some(60), Read(None))]), Verdict::Linearizable);
        // But once observed it cannot be undone.
        assert!(rejected(&[t(0, None, Write(1)), t(50, Some(60), Read(Some(1))), t(70, Some(80), Read(None))]));
        // Nor can it reappear after a later acknowledged write replaced it.
        let h = [t(0, None, Write(1)), t(10, Some(20), Read(Some(1))), t(30, Some(40), Write(2)), t(50, Some(60), Read(Some(1)))];
        assert!(rejected(&h));
        // The checked set omits the unobserved unknown write.
        let (v, kept) = check_register(&[t(0, None, Write(9)), t(1, Some(2), Read(None))], BUDGET);
        assert_eq!((v, kept), (Verdict::Linearizable, vec![1]));
    }

    /// A tiny deterministic PRNG for generated histories.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Histories generated from a real sequential execution (each operation's
    /// interval contains its linearization point) are always accepted; making
    /// one read return a value that was never written always gets rejected.
    #[test]
    fn generated_histories() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for round in 0..200 {
            let ops = 5 + rng.below(60) as usize;
            let mut state: Option<i64> = None;
            let mut h = Vec::new();
            for k in 0..ops {
                let point = (k as u64 + 1) * 100;
                let call = point - rng.below(250).min(point);
                let unknown = rng.below(10) == 0;
                let ret = point + rng.below(250);
                let op = if rng.below(2) == 0 {
                    let v = (round * 1000 + k) as i64;
                    state = Some(v);
                    Write(v)
                } else {
                    Read(state)
                };
                let ret = if unknown && matches!(op, Write(_)) { None } else { Some(ret) };
                h.push(t(call, ret, op));
            }
            assert_eq!(verdict(&h), Verdict::Linearizable, "round {round}: {h:?}");
            if let Some(i) = h.iter().position(|x| matches!(x.op, Read(_))) {
                h[i].op = Read(Some(-1));
                assert!(rejected(&h), "round {round}: a phantom read was accepted");
            }
        }
    }

    #[test]
    fn budget_exhaustion_is_reported() {
        // Many concurrent writes and a read that fits none: the search needs more than a few steps.
        let mut h: Vec<_> = (0..12).map(|i| t(0, Some(100), Write(i))).collect();
        h.push(t(200, Some(300), Read(Some(-1))));
        assert!(matches!(check(&Register, &h, 10), Verdict::Unknown { .. }));
        assert!(matches!(check(&Register, &h, BUDGET), Verdict::NotLinearizable { .. }));
    }
}
