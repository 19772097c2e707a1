//! Checks for op authors, one call each: an op's gradients against finite differences
//! ([`check_op_gradients`]), and its blocked forward against its in-memory forward
//! ([`check_blocked_equals_in_memory`]). Every built-in op's gradient test and the example
//! crate's use them.
//!
//! The op gets its arguments from small random graphs ([`Arg`] says what each argument
//! is); its output is reduced to a loss through a classifier, as in a real model, and every
//! parameter upstream and downstream of the op is checked by [`crate::exec::check_gradients`]
//! (directional central differences, the tolerance reasoned for f32 there).
//!
//! The graphs: 23 nodes (single-label), 15 nodes (multi-label), and a single node; node 0
//! is isolated in each, so an op's empty rows are always exercised. Their features are
//! `[I_n | R]`: the identity of the nodes next to 4 random columns. A per-node argument
//! [`Arg::Nodes`] is `features @ W` with W a parameter, so W's first n rows *are* the
//! argument's rows and its gradient is checked entry by entry.

use std::ops::Range;
use std::sync::Arc;

use crate::autodiff::differentiate;
use crate::exec::{check_gradients, run, Discrepancy, GradCheck};
use crate::ir::{Bindings, Fact, Graph, Init, NodeId, ParamDecl, Params, SparseMat};
use crate::ir::{Tensor, Value};
use crate::op::builtin::{
    Add, AdjKind, Adjacency, Features, Loss, LossKind, MatMul, Param, Sample, TargetsOp,
};
use crate::op::{
    Ctx, GraphSource, MemorySource, NeighbourFold, NeighbourOp, NodeRows, NodeStats, Op, RowBlock,
};

/// What one argument of the op under test is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg {
    /// A per-node dense matrix with this many columns, differentiated (`features @ W`).
    Nodes(usize),
    /// A dense `rows × cols` matrix not tied to the nodes (a weight, a bias row: `1 × c`),
    /// differentiated (a parameter).
    Param(usize, usize),
    /// The graph's adjacency in a flavour (sparse, one value per entry), not differentiated.
    Adjacency(AdjKind),
    /// The graph's features `[I_n | R]` (n × (n + 4)), not differentiated.
    Features,
    /// The same node as argument `i` (an op applied to one value twice: `mul(p, p)`).
    Same(usize),
    /// The step's subgraph (the `sample` node; `batchnorm` reads its node weights).
    Subgraph,
}

/// Why a check failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The op refused its arguments, has no backward, or its graph would not run.
    #[error("{op}: {what}")]
    Setup {
        /// The op.
        op: String,
        /// What went wrong.
        what: String,
    },
    /// Gradients that disagree with finite differences.
    #[error("{op} on {graph}: {} gradient comparison(s) failed: {discrepancies:#?}", discrepancies.len())]
    Gradients {
        /// The op.
        op: String,
        /// Which test graph.
        graph: String,
        /// Every failing comparison.
        discrepancies: Vec<Discrepancy>,
    },
    /// A blocked forward that differs from the in-memory forward.
    #[error("{op}: rows {rows:?} computed alone differ from the in-memory pass: {what}")]
    Blocked {
        /// The op.
        op: String,
        /// The block.
        rows: std::ops::Range<usize>,
        /// The first difference.
        what: String,
    },
}

/// The test graphs (see the module header), with identity features.
fn graphs() -> Vec<(&'static str, MemorySource)> {
    [
        ("23 nodes", 23, 4, 3, false, 11),
        ("15 nodes, multi-label", 15, 3, 4, true, 7),
        ("a single node", 1, 0, 2, false, 5),
    ]
    .into_iter()
    .map(|(label, n, degree, classes, multi, seed)| {
        let mut src = MemorySource::random(n, degree, n + 4, classes, multi, seed);
        for v in 0..n {
            let row = &mut src.features[v * (n + 4)..(v + 1) * (n + 4)];
            row[..n].fill(0.0);
            row[v] = 1.0;
        }
        (label, src)
    })
    .collect()
}

/// The op's graph on one source: the arguments, the op, and (with `loss`) a classifier and
/// the loss, differentiated.
struct Built {
    g: Graph,
    sample: NodeId,
    args: Vec<NodeId>,
    op: NodeId,
    decls: Vec<ParamDecl>,
    params: Vec<NodeId>,
}

fn setup(op: &dyn Op, what: impl std::fmt::Display) -> CheckError {
    CheckError::Setup {
        op: op.name().to_string(),
        what: what.to_string(),
    }
}

impl Built {
    fn new(op: &Arc<dyn Op>, args: &[Arg], src: &MemorySource) -> Result<Built, CheckError> {
        let err = |e: crate::ir::IrError| setup(op.as_ref(), e);
        let mut g = Graph::new();
        let sample = g.add(Arc::new(Sample), &[], "sample").map_err(err)?;
        let width = src.n_features;
        let x = g
            .add(Arc::new(Features { width }), &[sample], "features")
            .map_err(err)?;
        let mut b = Built {
            g,
            sample,
            args: Vec::new(),
            op: sample,
            decls: Vec::new(),
            params: Vec::new(),
        };
        for (i, arg) in args.iter().enumerate() {
            let id = match *arg {
                Arg::Nodes(cols) => {
                    let w = b.param(&format!("W{}", i + 1), width, cols).map_err(err)?;
                    b.g.add(
                        Arc::new(MatMul::plain(2)),
                        &[x, w],
                        format!("arg {}", i + 1),
                    )
                    .map_err(err)?
                }
                Arg::Param(rows, cols) => {
                    b.param(&format!("P{}", i + 1), rows, cols).map_err(err)?
                }
                Arg::Adjacency(kind) => {
                    b.g.add(Arc::new(Adjacency { kind }), &[sample], kind.plan_name())
                        .map_err(err)?
                }
                Arg::Features => x,
                Arg::Subgraph => sample,
                Arg::Same(j) => *b.args.get(j).ok_or_else(|| {
                    setup(
                        op.as_ref(),
                        format!("argument {}: Same({j}) names no earlier argument", i + 1),
                    )
                })?,
            };
            b.args.push(id);
        }
        b.op =
            b.g.add(op.clone(), &b.args, format!("{} under test", op.name()))
                .map_err(err)?;
        Ok(b)
    }

    fn param(
        &mut self,
        name: &str,
        rows: usize,
        cols: usize,
    ) -> Result<NodeId, crate::ir::IrError> {
        let id = self.g.add(
            Arc::new(Param {
                name: name.into(),
                rows,
                cols,
            }),
            &[],
            name,
        )?;
        self.decls.push(ParamDecl {
            name: name.into(),
            rows,
            cols,
            init: Init::Glorot,
        });
        self.params.push(id);
        Ok(id)
    }
}

/// Checks `op`'s backward against central finite differences on every test graph, with
/// [`GradCheck::default`]. `args` says what each argument is; the op's output must be a
/// per-node dense matrix or an n × n sparse value (which is then multiplied by a per-node
/// matrix, as attention coefficients are).
///
/// ```
/// use saintflow::op::{elementwise, Elementwise};
/// use saintflow::testing::{check_op_gradients, Arg};
///
/// #[derive(Clone, Debug)]
/// struct Cube;
/// impl Elementwise for Cube {
///     fn name(&self) -> &str { "user.cube" }
///     fn f(&self, x: f32) -> f32 { x * x * x }
///     fn df(&self, x: f32) -> f32 { 3.0 * x * x }
/// }
/// check_op_gradients(elementwise(Cube), &[Arg::Nodes(4)]).unwrap();
///
/// /// A wrong derivative is caught.
/// #[derive(Clone, Debug)]
/// struct Wrong;
/// impl Elementwise for Wrong {
///     fn name(&self) -> &str { "user.wrong" }
///     fn f(&self, x: f32) -> f32 { x * x * x }
///     fn df(&self, x: f32) -> f32 { 2.0 * x * x }
/// }
/// assert!(check_op_gradients(elementwise(Wrong), &[Arg::Nodes(4)]).is_err());
/// ```
pub fn check_op_gradients(op: Arc<dyn Op>, args: &[Arg]) -> Result<(), CheckError> {
    check_op_gradients_with(op, args, GradCheck::default())
}

/// [`check_op_gradients`] with the check's settings (a smaller ε for an op with kinks
/// close to where its arguments lie).
pub fn check_op_gradients_with(
    op: Arc<dyn Op>,
    args: &[Arg],
    settings: GradCheck,
) -> Result<(), CheckError> {
    for (label, src) in graphs() {
        let mut b = Built::new(&op, args, &src)?;
        let err = |e: &dyn std::fmt::Display| setup(op.as_ref(), e);
        let mut h = b.op;
        if let Fact::Sparse { heads, .. } = *b.g.fact(h) {
            let v = b
                .param("V", src.n_features, 2 * heads)
                .map_err(|e| err(&e))?;
            let feats =
                b.g.add(
                    Arc::new(Features {
                        width: src.n_features,
                    }),
                    &[b.sample],
                    "features",
                )
                .map_err(|e| err(&e))?;
            let xv =
                b.g.add(Arc::new(MatMul::plain(2)), &[feats, v], "features @ V")
                    .map_err(|e| err(&e))?;
            h =
                b.g.add(Arc::new(MatMul::plain(2)), &[h, xv], "out @ (features @ V)")
                    .map_err(|e| err(&e))?;
        }
        let width = match (b.g.fact(h), b.g.fact(h).matrix()) {
            (Fact::Dense { .. }, Some((r, c))) if r == crate::ir::Dim::NODES => c
                .as_known()
                .ok_or_else(|| err(&"the output's width is not a number"))?,
            _ => {
                let what = format!("the output {} is not a per-node matrix", b.g.fact(b.op));
                return Err(err(&what));
            }
        };
        let c = src.targets.classes;
        let w = b.param("W_out", width, c).map_err(|e| err(&e))?;
        let bias = b.param("b_out", 1, c).map_err(|e| err(&e))?;
        let z =
            b.g.add(Arc::new(MatMul::plain(2)), &[h, w], "logits")
                .map_err(|e| err(&e))?;
        let z =
            b.g.add(Arc::new(Add), &[z, bias], "logits + b")
                .map_err(|e| err(&e))?;
        let t =
            b.g.add(Arc::new(TargetsOp { classes: c }), &[b.sample], "y")
                .map_err(|e| err(&e))?;
        let kind = if src.multilabel() {
            LossKind::SigmoidBce
        } else {
            LossKind::SoftmaxCe
        };
        let loss =
            b.g.add(Arc::new(Loss { kind }), &[z, t], "loss")
                .map_err(|e| err(&e))?;
        let d = differentiate(&mut b.g, loss, &b.params).map_err(|e| err(&e))?;
        b.g.validate().map_err(|e| err(&e))?;
        let grads: Vec<(String, NodeId)> = b
            .decls
            .iter()
            .map(|d| d.name.clone())
            .zip(d.grads.iter().map(|x| x.1))
            .collect();
        let params = Params::init(&b.decls, 3);
        let bad =
            check_gradients(&b.g, loss, &grads, &src, &params, settings).map_err(|e| err(&e))?;
        if !bad.is_empty() {
            return Err(CheckError::Gradients {
                op: op.name().to_string(),
                graph: label.to_string(),
                discrepancies: bad,
            });
        }
    }
    Ok(())
}

/// Rows `r` of a whole-graph sparse value, with its global column ids and its values (what
/// out-of-core inference hands a neighbour op).
fn rows_of(a: &SparseMat, r: std::ops::Range<usize>) -> SparseMat {
    let st = &a.structure;
    let (lo, hi) = (st.offsets[r.start] as usize, st.offsets[r.end] as usize);
    let h = a.heads();
    SparseMat::csr(
        st.offsets[r.start..=r.end]
            .iter()
            .map(|&o| o - lo as u32)
            .collect(),
        st.indices[lo..hi].to_vec(),
        a.values.data[lo * h..hi * h].to_vec(),
        h,
    )
}

/// The bits of a value as compared: a dense matrix's elements, or a sparse value's
/// pattern and values.
fn bits(v: &Value) -> Option<(Vec<u32>, Vec<u32>)> {
    if let Some(t) = v.as_dense() {
        return Some((Vec::new(), t.data.iter().map(|x| x.to_bits()).collect()));
    }
    let s = v.as_sparse()?;
    Some((
        s.structure.indices.clone(),
        s.values.data.iter().map(|x| x.to_bits()).collect(),
    ))
}

/// Checks that `op`'s out-of-core forward — row blocks of a neighbour op
/// ([`NeighbourOp::forward_block`]), or a row-local
/// op's forward on row slices — equals its in-memory forward bit for bit, in evaluation
/// mode, on the 23-node test graph cut into blocks of 1, 2, 5 and 23 rows; an op with node
/// statistics ([`NodeStats`]) with its statistics folded over x in
/// blocks of the same size first; a neighbour op that folds ([`NeighbourOp::fold`]) also with X streamed in
/// parts of 1, 3, 7 and 23 rows; one that takes any rows
/// ([`NeighbourOp::any_rows`]) also on a block of every
/// third row. An op that is neither is an error.
pub fn check_blocked_equals_in_memory(op: Arc<dyn Op>, args: &[Arg]) -> Result<(), CheckError> {
    let (_, src) = graphs().swap_remove(0);
    let b = Built::new(&op, args, &src)?;
    let err = |e: &dyn std::fmt::Display| setup(op.as_ref(), e);
    let params = Params::init(&b.decls, 3);
    let mut vals = run(
        &b.g,
        &b.args,
        Some(&src as &dyn GraphSource),
        &params,
        0,
        0,
        false,
    )
    .map_err(|e| err(&e))?;
    let mut inputs: Vec<Value> = Vec::new();
    for (i, &a) in b.args.iter().enumerate() {
        let v = match b.args[..i].iter().position(|&p| p == a) {
            Some(p) => inputs[p].clone(),
            None => vals
                .take(a)
                .ok_or_else(|| err(&"an argument was not computed"))?,
        };
        inputs.push(v);
    }
    let n = src.graph.nodes.len();
    let facts: Vec<&Fact> = b.args.iter().map(|&a| b.g.fact(a)).collect();
    let check = Blocked {
        op: op.as_ref(),
        inputs: &inputs,
        per_node: facts
            .iter()
            .map(|f| matches!(f.matrix(), Some((r, _)) if r == crate::ir::Dim::NODES))
            .collect(),
        facts,
        params: &params,
        node: b.op,
        n,
    };
    let refs: Vec<&Value> = inputs.iter().collect();
    let whole = op.forward(&refs, &check.ctx(n)).map_err(|e| err(&e))?;
    for size in [1, 2, 5, n] {
        let mut parts: Vec<Value> = Vec::new();
        for r0 in (0..n).step_by(size) {
            let r = r0..(r0 + size).min(n);
            let part = if let Some(nb) = op.as_neighbour() {
                check.neighbour_part(nb, r)?
            } else if let Some(ns) = op.as_node_stats() {
                check.stats_part(ns, r, size)?
            } else if op.as_row_local().is_some_and(|l| l.row_local(&check.facts)) {
                check.row_local_part(r)?
            } else {
                return Err(err(
                    &"neither a neighbour op nor row-local: nothing to block",
                ));
            };
            parts.push(part);
        }
        check.compare(&parts, &whole, size)?;
    }
    // A neighbour op that takes any rows: a block of every third row from row 1 gives the
    // whole forward's rows there.
    if let Some(nb) = op.as_neighbour().filter(|nb| nb.any_rows()) {
        check.any_rows(nb, &whole)?;
    }
    Ok(())
}

/// What [`check_blocked_equals_in_memory`] compares blocks against: the op, its inputs
/// and their facts, the parameters, the test graph's node count.
struct Blocked<'a> {
    op: &'a dyn Op,
    inputs: &'a [Value],
    facts: Vec<&'a Fact>,
    /// Which inputs are per-node matrices (`[N, k]`): a row-local op's block slices them.
    per_node: Vec<bool>,
    params: &'a Params,
    node: NodeId,
    n: usize,
}

/// A neighbour op's adjacency and x arguments, and its other inputs by position.
type NeighbourArgs<'a> = (&'a SparseMat, &'a Tensor, Vec<Option<&'a Value>>);

impl<'a> Blocked<'a> {
    /// The context of a forward over `nodes` rows, in evaluation mode.
    fn ctx(&self, nodes: usize) -> Ctx<'_> {
        Ctx {
            source: None,
            params: self.params,
            step: 0,
            seed: 0,
            training: false,
            node: self.node,
            bindings: Bindings {
                nodes,
                entries: 0,
                pairs: 0,
            },
        }
    }

    fn err(&self, e: &dyn std::fmt::Display) -> CheckError {
        setup(self.op, e)
    }

    /// A neighbour op's adjacency and x arguments, and its other inputs by position.
    fn neighbour_args(&self, nb: &dyn NeighbourOp) -> Result<NeighbourArgs<'a>, CheckError> {
        let inputs = self.inputs;
        let k = nb.neighbour(&self.facts);
        let a = inputs[k.adjacency]
            .as_sparse()
            .ok_or_else(|| self.err(&"the adjacency argument is not sparse"))?;
        let x = inputs[k.x]
            .as_dense()
            .ok_or_else(|| self.err(&"the x argument is not dense"))?;
        let others: Vec<Option<&Value>> = inputs
            .iter()
            .enumerate()
            .map(|(i, v)| (i != k.adjacency && i != k.x).then_some(v))
            .collect();
        Ok((a, x, others))
    }

    /// Rows `r` of a neighbour op through `forward_block`; one that folds also with X
    /// streamed in parts ([`Self::check_fold`]).
    fn neighbour_part(&self, nb: &dyn NeighbourOp, r: Range<usize>) -> Result<Value, CheckError> {
        let n = self.n;
        let (a, x, others) = self.neighbour_args(nb)?;
        let block_a = rows_of(a, r.clone());
        let rb = RowBlock {
            r0: r.start,
            ids: None,
            n_nodes: n,
            x0: 0,
            adjacency: &block_a,
            x: NodeRows::new(&x.data, x.cols),
            inputs: &others,
        };
        let part = nb
            .forward_block(&rb, &self.ctx(r.len()))
            .map_err(|e| self.err(&e))?;
        if let Some(fold) = nb.fold() {
            self.check_fold(fold, (&block_a, x, &others), &r, &part)?;
        }
        Ok(part)
    }

    /// X streamed in parts of `cut` rows must give the block's bits (`part`).
    fn check_fold(
        &self,
        fold: &dyn NeighbourFold,
        (block_a, x, others): (&SparseMat, &Tensor, &[Option<&Value>]),
        r: &Range<usize>,
        part: &Value,
    ) -> Result<(), CheckError> {
        let (n, op, err) = (self.n, self.op, |e: &dyn std::fmt::Display| self.err(e));
        let ctx = |nodes: usize| self.ctx(nodes);
        for cut in [1, 3, 7, n] {
            let mut cursor = block_a.structure.offsets[..r.len()].to_vec();
            let mut acc = fold.start(r.len(), x.cols);
            for p0 in (0..n).step_by(cut) {
                let p1 = (p0 + cut).min(n);
                let sub = block_a.column_part(&mut cursor, p0 as u32, p1 as u32);
                let rb = RowBlock {
                    r0: r.start,
                    ids: None,
                    n_nodes: p1 - p0,
                    x0: p0,
                    adjacency: &sub,
                    x: NodeRows::new(&x.data[p0 * x.cols..p1 * x.cols], x.cols),
                    inputs: others,
                };
                fold.fold_part(&rb, &mut acc, &ctx(r.len()))
                    .map_err(|e| err(&e))?;
            }
            let degree: Vec<u32> = block_a
                .structure
                .offsets
                .windows(2)
                .map(|w| w[1] - w[0])
                .collect();
            let folded = fold.finish(acc, &degree).map_err(|e| err(&e))?;
            if bits(&folded) != bits(part) {
                return Err(CheckError::Blocked {
                    op: op.name().to_string(),
                    rows: r.clone(),
                    what: format!("X streamed in parts of {cut} rows differs from the block"),
                });
            }
        }
        Ok(())
    }

    /// Rows `r` of an op with node statistics: the statistics folded over x in blocks of
    /// `size` rows, then this block.
    fn stats_part(
        &self,
        ns: &dyn NodeStats,
        r: Range<usize>,
        size: usize,
    ) -> Result<Value, CheckError> {
        let (n, inputs, err) = (self.n, self.inputs, |e: &dyn std::fmt::Display| self.err(e));
        let ctx = |nodes: usize| self.ctx(nodes);
        let x = inputs[0]
            .as_dense()
            .ok_or_else(|| err(&"the x argument is not dense"))?;
        let mut acc = ns.start(x.cols);
        for p0 in (0..n).step_by(size) {
            let p1 = (p0 + size).min(n);
            ns.fold(&mut acc, &x.data[p0 * x.cols..p1 * x.cols], x.cols);
        }
        let rows = Value::dense(
            Tensor::from_vec(
                r.len(),
                x.cols,
                x.data[r.start * x.cols..r.end * x.cols].to_vec(),
            )
            .expect("whole rows"),
        );
        let mut refs: Vec<&Value> = vec![&rows];
        refs.extend(inputs[1..].iter());
        ns.rows(&acc, n, &refs, &ctx(r.len())).map_err(|e| err(&e))
    }

    /// Rows `r` of a row-local op: its forward on those rows of every per-node input.
    fn row_local_part(&self, r: Range<usize>) -> Result<Value, CheckError> {
        let (inputs, per_node, op) = (self.inputs, &self.per_node, self.op);
        let err = |e: &dyn std::fmt::Display| self.err(e);
        let ctx = |nodes: usize| self.ctx(nodes);
        let sliced: Vec<Value> = inputs
            .iter()
            .zip(per_node)
            .map(|(v, &pn)| match (v.as_dense(), pn) {
                (Some(t), true) => Value::dense(
                    Tensor::from_vec(
                        r.len(),
                        t.cols,
                        t.data[r.start * t.cols..r.end * t.cols].to_vec(),
                    )
                    .expect("whole rows"),
                ),
                _ => v.clone(),
            })
            .collect();
        let refs: Vec<&Value> = sliced.iter().collect();
        op.forward(&refs, &ctx(r.len())).map_err(|e| err(&e))
    }

    /// The blocks of `size` rows, joined, against the whole forward, bit for bit.
    fn compare(&self, parts: &[Value], whole: &Value, size: usize) -> Result<(), CheckError> {
        let op = self.op;
        let got = parts
            .iter()
            .map(bits)
            .try_fold((Vec::new(), Vec::new()), |mut acc, p| {
                let (i, v) = p?;
                acc.0.extend(i);
                acc.1.extend(v);
                Some(acc)
            });
        let want = bits(whole);
        if got != want {
            let what = match (&got, &want) {
                (Some(g), Some(w)) => match g.1.iter().zip(&w.1).position(|(a, b)| a != b) {
                    Some(k) => format!(
                        "element {k}: {} blocked, {} in memory",
                        f32::from_bits(g.1[k]),
                        f32::from_bits(w.1[k])
                    ),
                    None => format!(
                        "{} elements blocked, {} in memory (or another pattern)",
                        g.1.len(),
                        w.1.len()
                    ),
                },
                _ => "a block or the whole is neither dense nor sparse".into(),
            };
            return Err(CheckError::Blocked {
                op: op.name().to_string(),
                rows: 0..size,
                what,
            });
        }
        Ok(())
    }

    /// A block of every third row from row 1 through `forward_block` against those rows
    /// of the whole forward.
    fn any_rows(&self, nb: &dyn NeighbourOp, whole: &Value) -> Result<(), CheckError> {
        let (n, op, err) = (self.n, self.op, |e: &dyn std::fmt::Display| self.err(e));
        let ctx = |nodes: usize| self.ctx(nodes);
        let (a, x, others) = self.neighbour_args(nb)?;
        let ids: Vec<u32> = (1..n as u32).step_by(3).collect();
        let block_a = rows_at(a, &ids);
        let rb = RowBlock {
            r0: ids[0] as usize,
            ids: Some(&ids),
            n_nodes: n,
            x0: 0,
            adjacency: &block_a,
            x: NodeRows::new(&x.data, x.cols),
            inputs: &others,
        };
        let part = nb
            .forward_block(&rb, &ctx(ids.len()))
            .map_err(|e| err(&e))?;
        let want = match (whole.as_dense(), whole.as_sparse()) {
            (Some(t), _) => Value::dense(NodeRows::new(&t.data, t.cols).gather(&ids)),
            (_, Some(s)) => Value::Sparse(rows_at(s, &ids)),
            _ => return Err(err(&"the forward is neither dense nor sparse")),
        };
        if bits(&part) != bits(&want) {
            return Err(CheckError::Blocked {
                op: op.name().to_string(),
                rows: 1..n,
                what:
                    "a block of every third row (`any_rows`) differs from those rows of the whole"
                        .into(),
            });
        }
        Ok(())
    }
}

/// Rows `ids` of a CSR value, entries in order.
fn rows_at(a: &SparseMat, ids: &[u32]) -> SparseMat {
    let st = &a.structure;
    let h = a.heads();
    let (mut offsets, mut indices, mut values) = (vec![0u32], Vec::new(), Vec::new());
    for &v in ids {
        let (lo, hi) = (
            st.offsets[v as usize] as usize,
            st.offsets[v as usize + 1] as usize,
        );
        indices.extend_from_slice(&st.indices[lo..hi]);
        values.extend_from_slice(&a.values.data[lo * h..hi * h]);
        offsets.push(indices.len() as u32);
    }
    SparseMat::csr(offsets, indices, values, h)
}
