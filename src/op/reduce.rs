//! The neighbour-reduce adapter: `op(A, X)`, row i of the output a fold of X's rows at i's
//! neighbours (the pattern of the sparse A, each with its entry's value a), column by
//! column: y[i, c] = fold(…fold(neutral, a_ij₁, X[j₁, c])…, a_ijₖ, X[jₖ, c]) in CSR order,
//! `empty` for a row without neighbours. The author gives the fold's start (its neutral value), the fold and how
//! the gradient routes ([`NeighbourReduce`]); [`neighbour_reduce`] makes
//! * the in-memory forward, split into row blocks run at once (each row alone: the same
//!   bits for any split),
//! * the neighbour capability with its blocked forward (the same loop over a block's
//!   adjacency rows, X read in place by global id: bit-identical to the in-memory forward),
//!   so plans using it are evaluated out of core,
//! * the backward: `NAME_backward(A, X, ∇Y)` for ∂X, split into column blocks (each writes
//!   only its columns of ∂X, summing over rows in CSR order: the same bits for any split),
//!   and for a [`Routing::Weighted`] fold ∂A by `sddmm`.
//!
//! GraphSAGE's max pooling aggregator without its inner layer is the whole of:
//!
//! ```
//! use saintflow::op::{neighbour_reduce, NeighbourReduce, Routing};
//!
//! #[derive(Clone, Debug)]
//! struct Max;
//!
//! impl NeighbourReduce for Max {
//!     fn name(&self) -> &str {
//!         "user.max"
//!     }
//!     fn neutral(&self) -> f32 {
//!         f32::NEG_INFINITY
//!     }
//!     fn fold(&self, acc: f32, _a: f32, x: f32) -> f32 {
//!         if x > acc { x } else { acc }
//!     }
//!     fn routing(&self) -> Routing {
//!         Routing::Selected
//!     }
//! }
//!
//! let op = neighbour_reduce(Max);
//! assert!(op.as_neighbour().is_some());
//! ```
//!
//! The adapter differentiates three classes of folds, one per [`Routing`] ([`ROUTING_RULES`]):
//! a weighted sum (acc + a·x), a selection (the fold keeps acc or x), and a weighted sum of
//! a map of x finished by a function of the sum ([`Routing::Mapped`]: acc + a·g(x), then
//! h(acc), with g′ and h′ given). A fold outside the class it declares is refused when
//! the op's types are inferred ([`check_rule`], on probe values), naming the rule: a mean
//! of squares declared `Weighted` used to train with the gradient of a mean. Written as a
//! mapped fold it is right — here the root mean square over the neighbours (with `A_mean`),
//! checked against finite differences:
//!
//! ```
//! use saintflow::op::{neighbour_reduce, AdjKind, NeighbourReduce, Routing};
//! use saintflow::testing::{check_op_gradients, Arg};
//!
//! #[derive(Clone, Debug)]
//! struct Rms;
//!
//! impl NeighbourReduce for Rms {
//!     fn name(&self) -> &str {
//!         "user.rms"
//!     }
//!     fn neutral(&self) -> f32 {
//!         0.0
//!     }
//!     fn fold(&self, acc: f32, a: f32, x: f32) -> f32 {
//!         acc + a * x * x
//!     }
//!     fn routing(&self) -> Routing {
//!         Routing::Mapped
//!     }
//!     /// g(x) = x², g′(x) = 2x.
//!     fn map(&self, x: f32) -> (f32, f32) {
//!         (x * x, 2.0 * x)
//!     }
//!     /// h(s) = √s, h′(s) = 1/(2√s).
//!     fn finish(&self, s: f32) -> (f32, f32) {
//!         let r = s.max(0.0).sqrt();
//!         (r, if r > 0.0 { 0.5 / r } else { 0.0 })
//!     }
//! }
//!
//! let args = [Arg::Adjacency(AdjKind::Mean), Arg::Nodes(3)];
//! check_op_gradients(neighbour_reduce(Rms), &args).unwrap();
//!
//! /// The same fold declared a weighted sum is refused, naming the rule.
//! #[derive(Clone, Debug)]
//! struct Wrong;
//! impl NeighbourReduce for Wrong {
//!     fn name(&self) -> &str { "user.wrong" }
//!     fn neutral(&self) -> f32 { 0.0 }
//!     fn fold(&self, acc: f32, a: f32, x: f32) -> f32 { acc + a * x * x }
//!     fn routing(&self) -> Routing { Routing::Weighted }
//! }
//! let e = check_op_gradients(neighbour_reduce(Wrong), &args).unwrap_err();
//! assert!(e.to_string().contains("acc + a·x"));
//! ```

use std::fmt;
use std::sync::Arc;

use crate::ir::{Bindings, Fact, Kind, NodeId, SparseMat, Tensor, Value};

use super::builtin::Sddmm;
use super::util::dense;
use super::{
    Arity, Axis, Cost, Ctx, GradBuilder, MatMut, Neighbour, NeighbourFold, NeighbourOp, NodeRows,
    Op, OpError, Partitioned, PartitionedDyn, RowBlock, Split, Stage,
};

/// How the gradient of a [`NeighbourReduce`] reaches X.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routing {
    /// The fold is a weighted sum (acc + a·x): ∂X\[j\] += a_ij·∇Y\[i\] for every entry, and A's
    /// values get ∂a_ij = ⟨∇Y\[i\], X\[j\]⟩.
    Weighted,
    /// The fold keeps one neighbour's value (a maximum, a minimum): ∇Y[i, c] goes to the
    /// neighbour j at which the fold last changed the accumulator (for a strict comparison,
    /// the first of tied neighbours in CSR order). A's values get no gradient.
    Selected,
    /// The fold is a weighted sum of a map of x, acc + a·g(x), finished by y = h(acc): with
    /// g and g′ given by [`NeighbourReduce::map`] and h, h′ by [`NeighbourReduce::finish`],
    /// ∂X\[j\] += h′(acc_i)·a_ij·g′(X\[j\])·∇Y\[i\] (acc_i the row's sum before h). Mean of
    /// squares, a power mean ((Σ a·x^p)^(1/p)), a root mean square. A's values get no
    /// gradient.
    Mapped,
}

/// The class of folds each [`Routing`] differentiates correctly, as [`check_rule`] tests it
/// (and the error it gives names).
pub const ROUTING_RULES: &str = "Weighted: fold(acc, a, x) = acc + a·x; Selected: fold(acc, \
     a, x) is acc or x; Mapped: fold(acc, a, x) = acc + a·g(x) with (g, g′) = map(x) and \
     g′, h′ (finish) the derivatives of g, h";

/// What a neighbour-reduce op's author writes (see the module header).
pub trait NeighbourReduce: fmt::Debug + Clone + Send + Sync + 'static {
    /// The name plan files use; the backward is `NAME_backward`.
    fn name(&self) -> &str;

    /// Attributes as `explain` prints them (display only; CSE keys on the `Debug` text).
    fn attrs(&self) -> String {
        String::new()
    }

    /// The fold's start: its neutral value (0 for a sum, −∞ for a maximum). Named apart
    /// from [`Op::identity`], the CSE key every op has.
    fn neutral(&self) -> f32;

    /// The accumulator after one more neighbour: its value `x` over an entry of value `a`.
    fn fold(&self, acc: f32, a: f32, x: f32) -> f32;

    /// The output of a row without neighbours. Default: 0.
    fn empty(&self) -> f32 {
        0.0
    }

    /// How the gradient routes.
    fn routing(&self) -> Routing;

    /// For [`Routing::Mapped`]: g(x) and its derivative g′(x). Default: (x, 1).
    fn map(&self, x: f32) -> (f32, f32) {
        (x, 1.0)
    }

    /// For [`Routing::Mapped`]: the output h(acc) of a row's sum and its derivative
    /// h′(acc). Default: (acc, 1). Not applied to a row without neighbours (`empty`).
    fn finish(&self, acc: f32) -> (f32, f32) {
        (acc, 1.0)
    }
}

/// Probe values of [`check_rule`]: accumulators, entry values, neighbour values.
const PROBE_ACC: [f32; 4] = [0.0, 0.75, -1.5, 3.0];
const PROBE_A: [f32; 4] = [1.0, 0.5, 0.125, -2.0];
const PROBE_X: [f32; 5] = [0.5, -0.75, 1.25, 2.0, 0.0625];

/// Whether `got` is `want` up to a few roundings (a fold may fuse its multiply-add).
fn close(got: f32, want: f32, scale: f32) -> bool {
    (got - want).abs() <= 1e-5 * (scale.abs() + 1.0)
}

/// Whether a declared derivative `d` of `f` at `x` agrees with a central difference (where
/// f is finite around x): the check that `map` and `finish` state their own derivatives.
fn derivative_agrees(f: impl Fn(f32) -> f32, d: f32, x: f32) -> bool {
    let h = 1e-3 * (x.abs() + 1.0) as f64;
    let (lo, hi) = (f((x as f64 - h) as f32), f((x as f64 + h) as f32));
    if !lo.is_finite() || !hi.is_finite() || !d.is_finite() {
        return true;
    }
    let fd = (hi as f64 - lo as f64) / (2.0 * h);
    (fd - d as f64).abs() <= 2e-2 * (fd.abs().max(d.abs() as f64) + 1e-2)
}

/// Tests `r`'s fold against the class its [`Routing`] differentiates ([`ROUTING_RULES`]) on
/// probe values: an error naming the rule and the first probe that breaks it. What stops a
/// fold whose backward the adapter cannot derive (a mean of squares declared `Weighted`
/// trained with a wrong gradient) before it runs: every op made by [`neighbour_reduce`]
/// runs it when its types are inferred.
pub fn check_rule<R: NeighbourReduce>(r: &R) -> Result<(), OpError> {
    let refuse = |rule: &str, acc: f32, a: f32, x: f32, got: f32, want: String| {
        Err(OpError::args(format!(
            "{}: declared Routing::{:?}, whose rule is {rule}, but fold({acc}, {a}, {x}) = {got}, \
             expected {want}; declare the routing that matches the fold ({ROUTING_RULES}) or \
             write the op on the `Op` trait",
            r.name(),
            r.routing()
        )))
    };
    for &acc in &PROBE_ACC {
        for &a in &PROBE_A {
            for &x in &PROBE_X {
                let got = r.fold(acc, a, x);
                match r.routing() {
                    Routing::Weighted => {
                        let want = acc + a * x;
                        if !close(got, want, acc.abs() + (a * x).abs()) {
                            return refuse("acc + a·x", acc, a, x, got, want.to_string());
                        }
                    }
                    Routing::Selected => {
                        if got.to_bits() != acc.to_bits() && got.to_bits() != x.to_bits() {
                            return refuse("acc or x", acc, a, x, got, format!("{acc} or {x}"));
                        }
                    }
                    Routing::Mapped => {
                        let (gx, _) = r.map(x);
                        if !gx.is_finite() {
                            continue;
                        }
                        let want = acc + a * gx;
                        if !close(got, want, acc.abs() + (a * gx).abs()) {
                            return refuse("acc + a·g(x)", acc, a, x, got, want.to_string());
                        }
                    }
                }
            }
        }
    }
    if r.routing() == Routing::Mapped {
        // Away from 0, where clamps and roots put their kinks.
        for &x in PROBE_X.iter().chain(&PROBE_ACC).filter(|&&x| x != 0.0) {
            let (_, dg) = r.map(x);
            if !derivative_agrees(|t| r.map(t).0, dg, x) {
                return Err(OpError::args(format!(
                    "{}: map's derivative at {x} is {dg}, but g's slope there is not (the rule: \
                     map(x) returns g(x) and g′(x))",
                    r.name()
                )));
            }
            let (_, dh) = r.finish(x);
            if !derivative_agrees(|t| r.finish(t).0, dh, x) {
                return Err(OpError::args(format!(
                    "{}: finish's derivative at {x} is {dh}, but h's slope there is not (the \
                     rule: finish(acc) returns h(acc) and h′(acc))",
                    r.name()
                )));
            }
        }
    }
    Ok(())
}

/// `r` as an op `NAME(A, X)` (see the module header).
pub fn neighbour_reduce<R: NeighbourReduce>(r: R) -> Arc<dyn Op> {
    Arc::new(Reduce(r))
}

/// The forward op of a [`NeighbourReduce`].
#[derive(Clone, Debug, PartialEq)]
pub struct Reduce<R>(pub R);

/// Its backward: ∂X from A, X and ∇Y.
#[derive(Clone, Debug, PartialEq)]
pub struct ReduceGrad<R> {
    /// The fold.
    pub r: R,
    /// `NAME_backward`.
    pub name: String,
}

/// The CSR of the rows being computed, with global column ids and one value per entry.
struct Rows<'a> {
    offsets: &'a [u32],
    indices: &'a [u32],
    values: &'a [f32],
}

impl<'a> Rows<'a> {
    fn of(a: &'a SparseMat, op: &str) -> Result<Rows<'a>, OpError> {
        if a.heads() != 1 {
            return Err(OpError::args(format!(
                "{op}: an adjacency with {} values per entry, expected 1",
                a.heads()
            )));
        }
        Ok(Rows {
            offsets: &a.structure.offsets,
            indices: &a.structure.indices,
            values: &a.values.data,
        })
    }

    /// Row i's entries: (neighbour, value).
    fn row(&self, i: usize) -> impl Iterator<Item = (usize, f32)> + '_ {
        let r = self.offsets[i] as usize..self.offsets[i + 1] as usize;
        self.indices[r.clone()]
            .iter()
            .zip(&self.values[r])
            .map(|(&j, &a)| (j as usize, a))
    }

    fn is_empty(&self, i: usize) -> bool {
        self.offsets[i] == self.offsets[i + 1]
    }
}

/// Rows `first..first + y.n_rows()` of the output into `y`; X's row j is `x.row(j)`.
fn fold_rows<R: NeighbourReduce>(
    r: &R,
    a: &Rows<'_>,
    first: usize,
    x: NodeRows<'_>,
    mut y: MatMut<'_>,
) -> Result<(), OpError> {
    for k in 0..y.n_rows() {
        let i = first + k;
        let out = y.row_mut(k);
        out.fill(if a.is_empty(i) {
            r.empty()
        } else {
            r.neutral()
        });
    }
    fold_entries(r, a, first, x, &mut y)?;
    if r.routing() == Routing::Mapped {
        for k in 0..y.n_rows() {
            if !a.is_empty(first + k) {
                finish_row(r, y.row_mut(k));
            }
        }
    }
    Ok(())
}

/// A [`Routing::Mapped`] row's sums through h.
fn finish_row<R: NeighbourReduce>(r: &R, row: &mut [f32]) {
    for v in row {
        *v = r.finish(*v).0;
    }
}

/// Folds rows `first..first + y.n_rows()`'s entries into `y`, continuing each row's fold.
fn fold_entries<R: NeighbourReduce>(
    r: &R,
    a: &Rows<'_>,
    first: usize,
    x: NodeRows<'_>,
    y: &mut MatMut<'_>,
) -> Result<(), OpError> {
    for k in 0..y.n_rows() {
        let i = first + k;
        let out = y.row_mut(k);
        for (j, w) in a.row(i) {
            if j >= x.n_rows() {
                return Err(OpError::args(format!(
                    "{}: neighbour {j} beyond X's {} rows",
                    r.name(),
                    x.n_rows()
                )));
            }
            for (o, &v) in out.iter_mut().zip(x.row(j)) {
                *o = r.fold(*o, w, v);
            }
        }
    }
    Ok(())
}

/// Checks `[n, n]` sparse (one value per entry) with `[n, f]` dense; returns `[n, f]`.
fn check(op: &str, a: &Fact, x: &Fact) -> Result<Fact, OpError> {
    let Fact::Sparse { rows, heads, .. } = *a else {
        unreachable!("arity checked")
    };
    let (xr, xc) = x.matrix().expect("dense");
    if heads != 1 {
        return Err(OpError::args(format!(
            "{op}: an adjacency with {heads} values per entry, expected 1"
        )));
    }
    if xr != rows {
        return Err(OpError::args(format!(
            "{op}: X for a [{rows}, {rows}] adjacency, expected [{rows}, {xc}], got {x}"
        )));
    }
    Ok(Fact::dense(rows, xc))
}

fn operands<'v>(inputs: &[&'v Value], op: &str) -> Result<(&'v SparseMat, &'v Tensor), OpError> {
    let a = inputs[0]
        .as_sparse()
        .ok_or_else(|| OpError::args(format!("{op}: argument 1 is not sparse")))?;
    Ok((a, dense(inputs, 1, op)?))
}

fn node_rows(x: &Tensor) -> NodeRows<'_> {
    NodeRows::new(&x.data, x.cols)
}

/// One pass over the entries per output column, reading A's indices and X's rows.
fn reduce_cost(inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
    let nnz = match inputs[0] {
        Fact::Sparse { nnz, .. } => nnz.resolve(b) as f64,
        _ => 0.0,
    };
    let f = output.matrix().map_or(0, |(_, c)| c.resolve(b)) as f64;
    Cost {
        flops: nnz * f,
        bytes_read: 4.0 * nnz * (1.0 + f),
        bytes_written: output.bytes(b) as f64,
    }
}

impl<R: NeighbourReduce> Op for Reduce<R> {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn attrs(&self) -> String {
        self.0.attrs()
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Sparse, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        check_rule(&self.0)?;
        check(self.0.name(), inputs[0], inputs[1])
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        reduce_cost(inputs, output, b)
    }
    fn stage(&self) -> Stage {
        Stage::Aggregation
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let (a, x) = operands(inputs, self.0.name())?;
        let rows = a.structure.n_rows();
        let mut y = Tensor::scratch(rows, x.cols);
        let view = MatMut::row_major(&mut y.data, rows, x.cols)?;
        fold_rows(&self.0, &Rows::of(a, self.0.name())?, 0, node_rows(x), view)?;
        Ok(Value::dense(y))
    }
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let (a, x) = (g.input(0), g.input(1));
        let da = match (g.needs_grad(0), self.0.routing()) {
            (false, _) => None,
            (true, Routing::Weighted) => Some(g.add(Sddmm, &[a, grad, x])?),
            (true, Routing::Selected) => {
                return Err(OpError::args(format!(
                    "{}: the adjacency's values are not differentiable (a selecting fold reads only its pattern)",
                    self.0.name()
                )))
            }
            (true, Routing::Mapped) => {
                return Err(OpError::args(format!(
                    "{}: the adjacency's values are not differentiable through a mapped fold (give it a fixed adjacency such as A_mean)",
                    self.0.name()
                )))
            }
        };
        let dx = if g.needs_grad(1) {
            let back = ReduceGrad {
                r: self.0.clone(),
                name: format!("{}_backward", self.0.name()),
            };
            Some(g.add(back, &[a, x, grad])?)
        } else {
            None
        };
        Ok(vec![da, dx])
    }
    fn as_partitioned(&self) -> Option<&dyn PartitionedDyn> {
        Some(self)
    }
    fn as_neighbour(&self) -> Option<&dyn NeighbourOp> {
        Some(self)
    }
}

impl<R: NeighbourReduce> Partitioned for Reduce<R> {
    type Prepared = ();
    fn split(
        &self,
        inputs: &[&Value],
        _: &Fact,
        _: &Ctx<'_>,
        threads: usize,
    ) -> Result<Option<Split>, OpError> {
        let (a, x) = operands(inputs, self.0.name())?;
        let work = a.structure.nnz().saturating_mul(x.cols);
        Ok((threads >= 2 && work >= SPLIT_MIN_WORK)
            .then(|| Split::even(Axis::Rows, a.structure.n_rows(), 2 * threads).writing_all()))
    }
    fn forward_part(
        &self,
        inputs: &[&Value],
        _: &Ctx<'_>,
        split: &Split,
        part: usize,
        out: MatMut<'_>,
    ) -> Result<(), OpError> {
        let (a, x) = operands(inputs, self.0.name())?;
        let rows = Rows::of(a, self.0.name())?;
        fold_rows(&self.0, &rows, split.ranges[part].start, node_rows(x), out)
    }
}

impl<R: NeighbourReduce> NeighbourOp for Reduce<R> {
    fn neighbour(&self, _: &[&Fact]) -> Neighbour {
        Neighbour { adjacency: 0, x: 1 }
    }
    /// The block's adjacency rows carry global ids; X is read in place by them.
    fn any_rows(&self) -> bool {
        true
    }

    fn forward_block(&self, block: &RowBlock<'_>, _: &Ctx<'_>) -> Result<Value, OpError> {
        let rows = block.rows();
        let cols = block.x.cols();
        let mut y = Tensor::scratch(rows, cols);
        let view = MatMut::row_major(&mut y.data, rows, cols)?;
        let a = Rows::of(block.adjacency, self.0.name())?;
        fold_rows(&self.0, &a, 0, block.x, view)?;
        Ok(Value::dense(y))
    }

    fn fold(&self) -> Option<&dyn NeighbourFold> {
        Some(self)
    }
}

/// The fold of the module header, part after part: rows start at the neutral value, and a row
/// with no entry in any part ends as `empty`.
impl<R: NeighbourReduce> NeighbourFold for Reduce<R> {
    fn start(&self, rows: usize, cols: usize) -> Tensor {
        Tensor::from_vec(rows, cols, vec![self.0.neutral(); rows * cols]).expect("rows × cols")
    }

    fn fold_part(&self, part: &RowBlock<'_>, acc: &mut Tensor, _: &Ctx<'_>) -> Result<(), OpError> {
        let a = Rows::of(part.adjacency, self.0.name())?;
        let cols = acc.cols;
        let mut y = MatMut::row_major(&mut acc.data, part.rows(), cols)?;
        fold_entries(&self.0, &a, 0, part.x, &mut y)
    }

    fn finish(&self, mut acc: Tensor, degree: &[u32]) -> Result<Value, OpError> {
        let cols = acc.cols;
        if cols > 0 {
            for (row, &d) in acc.data.chunks_exact_mut(cols).zip(degree) {
                if d == 0 {
                    row.fill(self.0.empty());
                } else if self.0.routing() == Routing::Mapped {
                    finish_row(&self.0, row);
                }
            }
        }
        Ok(Value::dense(acc))
    }
}

/// Entries × columns below which a reduce is one task.
const SPLIT_MIN_WORK: usize = 1 << 16;

/// ∂X's columns `cols` (`dx` is those columns of every row, zeroed): the gradient of every
/// output row routed to its neighbours, rows in CSR order.
fn route<R: NeighbourReduce>(
    r: &R,
    a: &Rows<'_>,
    x: &Tensor,
    dy: &Tensor,
    cols: std::ops::Range<usize>,
    mut dx: MatMut<'_>,
) -> Result<(), OpError> {
    let n = a.offsets.len().saturating_sub(1);
    let width = cols.len();
    let mut acc = vec![0.0f32; width];
    let mut sel = vec![usize::MAX; width];
    for i in 0..n {
        let g = &dy.row(i)[cols.clone()];
        match r.routing() {
            Routing::Weighted => {
                for (j, w) in a.row(i) {
                    check_row(r, j, x.rows)?;
                    for (d, &gi) in dx.row_mut(j).iter_mut().zip(g) {
                        *d += w * gi;
                    }
                }
            }
            Routing::Mapped => {
                if a.is_empty(i) {
                    continue;
                }
                // The row's sums again (acc_i), then h′(acc_i)·∇Y[i] spread by a·g′(x).
                acc.fill(r.neutral());
                for (j, w) in a.row(i) {
                    check_row(r, j, x.rows)?;
                    let xj = &x.row(j)[cols.clone()];
                    for c in 0..width {
                        acc[c] = r.fold(acc[c], w, xj[c]);
                    }
                }
                for c in 0..width {
                    acc[c] = r.finish(acc[c]).1 * g[c];
                }
                for (j, w) in a.row(i) {
                    let xj = &x.row(j)[cols.clone()];
                    let dj = dx.row_mut(j);
                    for c in 0..width {
                        dj[c] += w * r.map(xj[c]).1 * acc[c];
                    }
                }
            }
            Routing::Selected => {
                if a.is_empty(i) {
                    continue;
                }
                acc.fill(r.neutral());
                sel.fill(usize::MAX);
                for (j, w) in a.row(i) {
                    check_row(r, j, x.rows)?;
                    let xj = &x.row(j)[cols.clone()];
                    for c in 0..width {
                        let next = r.fold(acc[c], w, xj[c]);
                        if next.to_bits() != acc[c].to_bits() {
                            acc[c] = next;
                            sel[c] = j;
                        }
                    }
                }
                for c in 0..width {
                    if sel[c] != usize::MAX {
                        dx.row_mut(sel[c])[c] += g[c];
                    }
                }
            }
        }
    }
    Ok(())
}

fn check_row<R: NeighbourReduce>(r: &R, j: usize, rows: usize) -> Result<(), OpError> {
    if j < rows {
        Ok(())
    } else {
        Err(OpError::args(format!(
            "{}_backward: neighbour {j} beyond X's {rows} rows",
            r.name()
        )))
    }
}

impl<R: NeighbourReduce> ReduceGrad<R> {
    fn operands<'v>(
        &self,
        inputs: &[&'v Value],
    ) -> Result<(&'v SparseMat, &'v Tensor, &'v Tensor), OpError> {
        let (a, x) = operands(inputs, &self.name)?;
        let dy = dense(inputs, 2, &self.name)?;
        if dy.rows != a.structure.n_rows() || dy.cols != x.cols {
            return Err(OpError::args(format!(
                "{}: ∇Y is {} × {}, expected {} × {}",
                self.name,
                dy.rows,
                dy.cols,
                a.structure.n_rows(),
                x.cols
            )));
        }
        Ok((a, x, dy))
    }
}

impl<R: NeighbourReduce> Op for ReduceGrad<R> {
    fn name(&self) -> &str {
        &self.name
    }
    fn attrs(&self) -> String {
        self.r.attrs()
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Sparse, Kind::Dense, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let y = check(&self.name, inputs[0], inputs[1])?;
        if inputs[2] != &y {
            return Err(OpError::args(format!(
                "{}: ∇Y is {}, expected {y}",
                self.name, inputs[2]
            )));
        }
        Ok(inputs[1].clone())
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        reduce_cost(inputs, output, b)
    }
    fn stage(&self) -> Stage {
        Stage::Aggregation
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let (a, x, dy) = self.operands(inputs)?;
        let mut dx = Tensor::zeros(x.rows, x.cols);
        let view = MatMut::row_major(&mut dx.data, x.rows, x.cols)?;
        route(&self.r, &Rows::of(a, &self.name)?, x, dy, 0..x.cols, view)?;
        Ok(Value::dense(dx))
    }
    fn as_partitioned(&self) -> Option<&dyn PartitionedDyn> {
        Some(self)
    }
}

impl<R: NeighbourReduce> Partitioned for ReduceGrad<R> {
    type Prepared = ();
    /// Column blocks: a row's gradient scatters to other rows, but never to another column.
    fn split(
        &self,
        inputs: &[&Value],
        _: &Fact,
        _: &Ctx<'_>,
        threads: usize,
    ) -> Result<Option<Split>, OpError> {
        let (a, x, _) = self.operands(inputs)?;
        let work = a.structure.nnz().saturating_mul(x.cols);
        Ok((threads >= 2 && x.cols >= 2 && work >= SPLIT_MIN_WORK)
            .then(|| Split::even(Axis::Cols, x.cols, threads.min(x.cols / 8).max(2))))
    }
    fn forward_part(
        &self,
        inputs: &[&Value],
        _: &Ctx<'_>,
        split: &Split,
        part: usize,
        out: MatMut<'_>,
    ) -> Result<(), OpError> {
        let (a, x, dy) = self.operands(inputs)?;
        let rows = Rows::of(a, &self.name)?;
        route(&self.r, &rows, x, dy, split.ranges[part].clone(), out)
    }
}
