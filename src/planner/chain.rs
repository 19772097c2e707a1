//! Matrix-chain ordering: every chain node ([`ChainRole::Chain`]: `matmul`) — forward ones from lowering, backward
//! ones from `MatMul::backward` — becomes a tree of binary products chosen by the classic
//! O(k³) dynamic programme with the sparse-aware cost of JPDC §6.1 ([`product_flops`]:
//! sparse·dense = 2·nnz·f, dense·dense = 2·m·k·n, sparse·sparse impossible).
//!
//! CSE-aware: chains are processed in topological order and every product emitted (or
//! already in the graph: nodes whose [`Op::as_chain`] is a product or a transpose) is recorded under its operand
//! sequence `[(node, transposed)]`; the transpose of `[(a,ta),(b,tb)]` is `[(b,!tb),(a,!ta)]`.
//! In the programme a sub-chain whose product or its transpose exists costs 0 and is reused:
//! this is how Â·X of the forward is shared by ∇W = (Â·X)ᵀ·∇Y.
//!
//! Emission carries an orientation flag per subproduct (the node holds P or Pᵀ):
//! dense·dense → `gemm[ta,tb]` (both transposed: the swapped product, flagged transposed);
//! sparse·dense → `spmm[T?]` with a row-major dense operand (a `transpose` copy when only
//! its transpose exists); dense·sparse → (op(S)ᵀ·op(D)ᵀ)ᵀ, an `spmm` flagged transposed.
//! A chain's result is always plain (a final `transpose` if needed). Invariant: the value
//! of every node emitted equals the unordered chain's sub-product it is recorded under.

use std::collections::HashMap;
use std::sync::Arc;

use crate::ir::{Bindings, Fact, Graph, IrError, NodeId};
use crate::op::builtin::{chain_factors, product_flops, Factor, Gemm, Spmm, Transpose};
use crate::op::{ChainRole, Op};

use super::{Pass, PlanOptions};

/// A parenthesisation of a chain of operands `0..k`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tree {
    /// Operand `i`.
    Leaf(usize),
    /// The product of operands `lo..=hi`, which exists already (costs nothing).
    Reuse(usize, usize),
    /// The product of two sub-trees over adjacent spans.
    Product(Box<Tree>, Box<Tree>),
}

impl Tree {
    /// The operands `(lo, hi)` the tree covers.
    pub fn span(&self) -> (usize, usize) {
        match self {
            Tree::Leaf(i) => (*i, *i),
            Tree::Reuse(lo, hi) => (*lo, *hi),
            Tree::Product(l, r) => (l.span().0, r.span().1),
        }
    }

    /// `A·(X·W)` with operand `i` written `names[i]`; a reused product is `⟨…⟩`.
    pub fn render(&self, names: &[String]) -> String {
        self.render_inner(names, true)
    }

    fn render_inner(&self, names: &[String], top: bool) -> String {
        match self {
            Tree::Leaf(i) => names[*i].clone(),
            Tree::Reuse(lo, hi) => format!("⟨{}⟩", names[*lo..=*hi].join("·")),
            Tree::Product(l, r) => {
                let s = format!(
                    "{}·{}",
                    l.render_inner(names, false),
                    r.render_inner(names, false)
                );
                if top {
                    s
                } else {
                    format!("({s})")
                }
            }
        }
    }

    /// Products reused in the tree.
    pub fn reused(&self) -> usize {
        match self {
            Tree::Leaf(_) => 0,
            Tree::Reuse(..) => 1,
            Tree::Product(l, r) => l.reused() + r.reused(),
        }
    }

    /// ((M₀·M₁)·M₂)·…, the left-to-right evaluation of `k ≥ 1` operands.
    pub fn left_to_right(k: usize) -> Tree {
        (1..k).fold(Tree::Leaf(0), |acc, i| {
            Tree::Product(Box::new(acc), Box::new(Tree::Leaf(i)))
        })
    }

    /// M₀·(…·(M_{k−2}·M_{k−1})), the right-to-left evaluation of `k ≥ 1` operands.
    pub fn right_to_left(k: usize) -> Tree {
        (0..k.saturating_sub(1))
            .rev()
            .fold(Tree::Leaf(k - 1), |acc, i| {
                Tree::Product(Box::new(Tree::Leaf(i)), Box::new(acc))
            })
    }
}

/// The factor of the product of operands `lo..=hi` (the operand itself when `lo == hi`).
fn span_factor(f: &[Factor], lo: usize, hi: usize) -> Factor {
    if lo == hi {
        f[lo]
    } else {
        f[lo].times(&f[hi])
    }
}

/// FLOPs of a product, infinite when impossible (two sparse factors).
fn flops(a: &Factor, b: &Factor, bind: &Bindings) -> f64 {
    product_flops(a, b, bind).unwrap_or(f64::INFINITY)
}

/// FLOPs of evaluating `tree` over `factors`, a span with `available(lo, hi)` (hi > lo)
/// costing 0; `None` when impossible (a sparse·sparse product).
pub fn tree_cost(
    tree: &Tree,
    factors: &[Factor],
    available: &dyn Fn(usize, usize) -> bool,
    b: &Bindings,
) -> Option<f64> {
    let (lo, hi) = tree.span();
    let c = match tree {
        Tree::Leaf(_) => 0.0,
        _ if available(lo, hi) => 0.0,
        Tree::Reuse(..) => f64::INFINITY,
        Tree::Product(l, r) => {
            let (ll, lh) = l.span();
            let (rl, rh) = r.span();
            tree_cost(l, factors, available, b)?
                + tree_cost(r, factors, available, b)?
                + flops(
                    &span_factor(factors, ll, lh),
                    &span_factor(factors, rl, rh),
                    b,
                )
        }
    };
    c.is_finite().then_some(c)
}

/// The cheapest parenthesisation of the chain `factors` (k ≥ 1) under `b`, where the
/// product of operands `lo..=hi` (hi > lo) costs nothing when `available(lo, hi)`: the
/// classic O(k³) programme, cost\[i\]\[j\] = min over split s of cost\[i\]\[s\] + cost\[s+1\]\[j\] +
/// flops(M_i..s, M_s+1..j). Ties go to the leftmost split, so the result is deterministic.
/// `None` when every order needs a sparse·sparse product.
pub fn best_order(
    factors: &[Factor],
    available: &dyn Fn(usize, usize) -> bool,
    b: &Bindings,
) -> Option<(f64, Tree)> {
    let k = factors.len();
    if k == 0 {
        return None;
    }
    // cost[i][j], split[i][j] (None: leaf or reused).
    let mut cost = vec![vec![f64::INFINITY; k]; k];
    let mut split = vec![vec![None::<usize>; k]; k];
    for (i, row) in cost.iter_mut().enumerate() {
        row[i] = 0.0;
    }
    for len in 2..=k {
        for i in 0..=k - len {
            let j = i + len - 1;
            if available(i, j) {
                cost[i][j] = 0.0;
                continue;
            }
            for s in i..j {
                let c = cost[i][s]
                    + cost[s + 1][j]
                    + flops(
                        &span_factor(factors, i, s),
                        &span_factor(factors, s + 1, j),
                        b,
                    );
                if c < cost[i][j] {
                    cost[i][j] = c;
                    split[i][j] = Some(s);
                }
            }
        }
    }
    fn build(split: &[Vec<Option<usize>>], i: usize, j: usize) -> Tree {
        if i == j {
            return Tree::Leaf(i);
        }
        match split[i][j] {
            None => Tree::Reuse(i, j),
            Some(s) => Tree::Product(
                Box::new(build(split, i, s)),
                Box::new(build(split, s + 1, j)),
            ),
        }
    }
    let c = cost[0][k - 1];
    c.is_finite().then(|| (c, build(&split, 0, k - 1)))
}

/// An operand sequence: the key a product is recorded under.
pub type Key = Vec<(NodeId, bool)>;

/// The key of the transpose of the product `key`: reversed, every flag flipped.
pub fn transpose_key(key: &[(NodeId, bool)]) -> Key {
    key.iter().rev().map(|&(n, t)| (n, !t)).collect()
}

/// Products the graph holds, by operand sequence: per canonical key, the node holding the
/// product plain and the node holding its transpose.
#[derive(Default)]
struct Products {
    map: HashMap<Key, [Option<NodeId>; 2]>,
}

impl Products {
    /// The canonical form of `key` (the smaller of it and its transpose) and whether it is
    /// the transpose.
    fn canon(key: &[(NodeId, bool)]) -> (Key, bool) {
        let rev = transpose_key(key);
        if rev.as_slice() < key {
            (rev, true)
        } else {
            (key.to_vec(), false)
        }
    }

    /// `[plain, transposed]` nodes of the product `key`. A single plain dense operand is
    /// its own plain node (and the transposed one of its flipped key).
    fn get(&self, key: &[(NodeId, bool)]) -> [Option<NodeId>; 2] {
        let (c, flipped) = Products::canon(key);
        let mut e = self.map.get(&c).copied().unwrap_or([None, None]);
        if flipped {
            e.swap(0, 1);
        }
        if let [(n, t)] = key {
            e[usize::from(*t)] = Some(*n);
        }
        e
    }

    fn exists(&self, key: &[(NodeId, bool)]) -> bool {
        self.get(key).iter().any(Option::is_some)
    }

    /// Records `node` as holding the product `key` (transposed when `transposed`), unless
    /// that orientation is recorded already.
    fn put(&mut self, key: &[(NodeId, bool)], node: NodeId, transposed: bool) {
        let (c, flipped) = Products::canon(key);
        let slot =
            &mut self.map.entry(c).or_insert([None, None])[usize::from(transposed ^ flipped)];
        slot.get_or_insert(node);
    }

    /// Records the binary products and transposes already in `graph`.
    fn seed(&mut self, graph: &Graph) {
        for id in graph.ids() {
            let n = graph.node(id);
            match n.op.chain() {
                Some(ChainRole::Transpose) => self.put(&[(n.inputs[0], false)], id, true),
                Some(ChainRole::Product(ta, tb)) => {
                    self.put(&[(n.inputs[0], ta), (n.inputs[1], tb)], id, false)
                }
                Some(ChainRole::Chain(_)) | None => {}
            }
        }
    }
}

/// A sub-product during emission.
#[derive(Clone, Debug)]
enum Val {
    /// A sparse operand, used transposed or not.
    Sparse(NodeId, bool),
    /// A dense product `key`: `node` holds it, or its transpose when the flag is set.
    Dense(Key, NodeId, bool),
}

/// Emits one chain's products.
struct Emitter<'a> {
    graph: &'a mut Graph,
    table: &'a mut Products,
    ops: Key,
    label: String,
    note: String,
    counts: &'a mut Counts,
}

#[derive(Default)]
struct Counts {
    chains: usize,
    gemm: usize,
    spmm: usize,
    transpose: usize,
    reused: usize,
}

impl Emitter<'_> {
    fn add(&mut self, op: Arc<dyn Op>, inputs: &[NodeId], why: &str) -> Result<NodeId, IrError> {
        let id = self.graph.add(op, inputs, self.label.clone())?;
        self.graph.node_mut(id).note = format!("{}{why}", self.note);
        Ok(id)
    }

    /// A node holding `key`'s product in orientation `transposed`, adding a copy-transpose
    /// when only the other orientation exists.
    fn oriented(&mut self, key: &[(NodeId, bool)], transposed: bool) -> Result<NodeId, IrError> {
        let e = self.table.get(key);
        if let Some(n) = e[usize::from(transposed)] {
            return Ok(n);
        }
        let other = e[usize::from(!transposed)].ok_or_else(|| {
            IrError::Invariant("chain: a sub-product vanished from the product table".into())
        })?;
        let t = self.add(Arc::new(Transpose), &[other], "; row-major copy")?;
        self.counts.transpose += 1;
        self.table.put(key, t, transposed);
        Ok(t)
    }

    fn emit(&mut self, tree: &Tree) -> Result<Val, IrError> {
        match tree {
            Tree::Leaf(i) => {
                let (n, t) = self.ops[*i];
                Ok(if matches!(self.graph.fact(n), Fact::Sparse { .. }) {
                    Val::Sparse(n, t)
                } else {
                    // The node holds M; the operand is op(M) = Mᵀ when flagged.
                    Val::Dense(vec![(n, t)], n, t)
                })
            }
            Tree::Reuse(lo, hi) => {
                let key = self.ops[*lo..=*hi].to_vec();
                let e = self.table.get(&key);
                let (node, t) = match e {
                    [Some(p), _] => (p, false),
                    [None, Some(q)] => (q, true),
                    [None, None] => {
                        return Err(IrError::Invariant(
                            "chain: a product marked available is not in the table".into(),
                        ))
                    }
                };
                self.counts.reused += 1;
                Ok(Val::Dense(key, node, t))
            }
            Tree::Product(l, r) => {
                let (lv, rv) = (self.emit(l)?, self.emit(r)?);
                let (lo, hi) = tree.span();
                let key = self.ops[lo..=hi].to_vec();
                let (node, t) = match (lv, rv) {
                    (Val::Dense(_, a, ta), Val::Dense(_, b, tb)) => {
                        self.counts.gemm += 1;
                        if ta && tb {
                            // Aᵀ·Bᵀ = (B·A)ᵀ: one plain GEMM, the result flagged.
                            let g = Gemm::new(false, false);
                            (self.add(Arc::new(g), &[b, a], "")?, true)
                        } else {
                            (self.add(Arc::new(Gemm::new(ta, tb)), &[a, b], "")?, false)
                        }
                    }
                    (Val::Sparse(s, ts), Val::Dense(rk, ..)) => {
                        let x = self.oriented(&rk, false)?;
                        self.counts.spmm += 1;
                        let op = Spmm::new(ts);
                        (self.add(Arc::new(op), &[s, x], "")?, false)
                    }
                    (Val::Dense(lk, ..), Val::Sparse(s, ts)) => {
                        // op(D)·op(S) = (op(S)ᵀ·op(D)ᵀ)ᵀ.
                        let y = self.oriented(&lk, true)?;
                        self.counts.spmm += 1;
                        let op = Spmm::new(!ts);
                        (self.add(Arc::new(op), &[s, y], "")?, true)
                    }
                    (Val::Sparse(..), Val::Sparse(..)) => {
                        return Err(IrError::Invariant(
                            "chain: a sparse·sparse product was chosen".into(),
                        ))
                    }
                };
                self.table.put(&key, node, t);
                Ok(Val::Dense(key, node, t))
            }
        }
    }
}

/// A short name of operand `i` for the order note: its label when that is a short word,
/// else `#i` (1-based), with `ᵀ` when used transposed.
fn operand_name(graph: &Graph, i: usize, (n, t): (NodeId, bool)) -> String {
    let label = &graph.node(n).label;
    let mut s = if !label.is_empty() && label.chars().count() <= 12 && !label.contains(' ') {
        label.clone()
    } else {
        format!("#{}", i + 1)
    };
    if t {
        s.push('ᵀ');
    }
    s
}

/// The chain-ordering pass. `reuse: false` orders each chain on its own (the baseline the
/// CSE-aware order is measured against).
#[derive(Clone, Copy, Debug)]
pub struct ChainPass {
    /// Whether products already computed cost nothing in the programme.
    pub reuse: bool,
}

impl Pass for ChainPass {
    fn name(&self) -> &str {
        if self.reuse {
            "chain"
        } else {
            "chain (no reuse)"
        }
    }

    fn run(&self, graph: &mut Graph, opts: &PlanOptions) -> Result<Vec<(String, usize)>, IrError> {
        let mut table = Products::default();
        if self.reuse {
            table.seed(graph);
        }
        let mut counts = Counts::default();
        for id in graph.topo_order()? {
            let Some(ChainRole::Chain(transposed)) = graph.node(id).op.chain() else {
                continue;
            };
            if !self.reuse {
                table = Products::default();
            }
            let node = graph.node(id).clone();
            let ops: Key = node
                .inputs
                .iter()
                .copied()
                .zip(transposed.iter().copied())
                .collect();
            let facts: Vec<&Fact> = node.inputs.iter().map(|&i| graph.fact(i)).collect();
            let factors = chain_factors(&transposed, &facts).map_err(|source| IrError::Op {
                op: node.op.name().to_string(),
                label: node.label.clone(),
                source,
            })?;
            let available = |lo: usize, hi: usize| hi > lo && table.exists(&ops[lo..=hi]);
            let (_, tree) = best_order(&factors, &available, &opts.bindings).ok_or_else(|| {
                IrError::Invariant(format!(
                    "chain `{}`: every order needs a sparse·sparse product",
                    node.label
                ))
            })?;
            let names: Vec<String> = ops
                .iter()
                .enumerate()
                .map(|(i, &o)| operand_name(graph, i, o))
                .collect();
            let mut em = Emitter {
                graph,
                table: &mut table,
                ops: ops.clone(),
                label: node.label.clone(),
                note: format!("order: {}", tree.render(&names)),
                counts: &mut counts,
            };
            let result = match em.emit(&tree)? {
                Val::Dense(key, n, t) => {
                    if t {
                        em.oriented(&key, false)?
                    } else {
                        n
                    }
                }
                Val::Sparse(..) => {
                    return Err(IrError::Invariant(format!(
                        "chain `{}` evaluates to a sparse operand",
                        node.label
                    )))
                }
            };
            counts.chains += 1;
            graph.replace_uses(id, result)?;
            graph.remove(id)?;
        }
        Ok(vec![
            ("chains".into(), counts.chains),
            ("gemm".into(), counts.gemm),
            ("spmm".into(), counts.spmm),
            ("transpose".into(), counts.transpose),
            ("reused".into(), counts.reused),
        ])
    }
}
