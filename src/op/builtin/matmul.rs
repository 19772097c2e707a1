//! Matrix products. Lowering turns `A_mean @ x @ W` into one [`MatMul`] chain node; its
//! backward emits the gradient chains (also [`MatMul`] nodes), and the planner's chain pass
//! replaces every chain by binary products — [`Gemm`] (dense·dense), [`Spmm`] (sparse·
//! dense, feature-partitioned), [`Transpose`] — in the order its dynamic programme chose.
//! [`Sddmm`] computes the gradient of a sparse operand's values on its pattern.
//!
//! Transposes are flags on operands, never copies, except where a kernel needs a row-major
//! operand that only exists transposed (then [`Transpose`] copies, and the cost says so).
//! A sparse matrix transposes through the Algorithm-6 permutation of its values.

use saintflow_ops::gemm::{
    add_half, gemm_packed, gemm_packed_half, gemm_view_half, gemm_view_with, k_splits, narrow_path,
    plan, Isa, KHalf, PackedB, Precision, Trans,
};
use saintflow_ops::spmm::{block_width, spmm_accumulate, spmm_blocked, spmm_view_blocked, CsrRef};

use crate::ir::{Bindings, Dim, Fact, Kind, NodeId, SparseMat, Tensor, Value};
use std::sync::{Arc, Mutex};

use crate::op::{
    Arity, Axis, ChainRole, Cost, Ctx, GradBuilder, MatMut, MatRef, Neighbour, NodeRows, Op,
    OpError, RowBlock, Split, Stage,
};
use crate::op::{
    FeaturePartitioned, NeighbourFold, NeighbourOp, Partitioned, Prepared, RowBlocks, RowLocal,
};

/// The kernel's transpose flag of an operand used transposed or not.
fn trans(t: bool) -> Trans {
    if t {
        Trans::T
    } else {
        Trans::N
    }
}

/// Below this many multiply-adds a GEMM is one task (as `saintflow_ops::gemm` runs such a
/// product on one thread: splitting costs more than it saves).
const GEMM_SPLIT_MIN_MACS: usize = 1 << 18;
/// Rows per GEMM part at least: a part packs op(A) in 6-row panels and sweeps all of op(B)
/// per panel, so a thinner part pays op(B)'s sweep for little work.
const GEMM_MIN_ROWS: usize = 64;
/// Columns per GEMM part at least, when C has too few rows to split by rows: one panel of
/// the widest tile.
const GEMM_MIN_COLS: usize = 64;

/// A chain operand's shape after its transpose flag: what the chain's cost model sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Factor {
    /// Rows as used.
    pub rows: Dim,
    /// Columns as used.
    pub cols: Dim,
    /// Entries, for a sparse operand.
    pub nnz: Option<Dim>,
    /// Values per entry of a sparse operand (1 for dense).
    pub heads: usize,
}

impl Factor {
    /// The factor of a matrix fact used plain or transposed.
    pub fn of(fact: &Fact, transposed: bool) -> Option<Factor> {
        let (r, c) = fact.matrix()?;
        let (rows, cols) = if transposed { (c, r) } else { (r, c) };
        let (nnz, heads) = match *fact {
            Fact::Sparse { nnz, heads, .. } => (Some(nnz), heads),
            _ => (None, 1),
        };
        Some(Factor {
            rows,
            cols,
            nnz,
            heads,
        })
    }

    /// The dense result of this · other (shapes assumed to fit).
    pub fn times(&self, other: &Factor) -> Factor {
        Factor {
            rows: self.rows,
            cols: other.cols,
            nnz: None,
            heads: 1,
        }
    }
}

/// FLOPs of the product of two factors under `b` (2 per multiply-add): 2·nnz·f for a
/// sparse one, 2·m·k·n for two dense ones; `None` for two sparse ones (no SpGEMM).
pub fn product_flops(a: &Factor, b: &Factor, bind: &Bindings) -> Option<f64> {
    let r = |d: Dim| d.resolve(bind) as f64;
    match (a.nnz, b.nnz) {
        (Some(_), Some(_)) => None,
        // Each of the h heads multiplies nnz entries by a block of cols/h columns.
        (Some(nnz), None) => Some(2.0 * r(nnz) * r(b.cols)),
        (None, Some(nnz)) => Some(2.0 * r(nnz) * r(a.rows)),
        (None, None) => Some(2.0 * r(a.rows) * r(a.cols) * r(b.cols)),
    }
}

fn shape_error(i: usize, a: &Factor, b: &Factor) -> OpError {
    OpError::args(format!(
        "matmul operands {} and {} do not fit: [{}, {}] @ [{}, {}], expected {} = {}",
        i + 1,
        i + 2,
        a.rows,
        a.cols,
        b.rows,
        b.cols,
        a.cols,
        b.rows
    ))
}

/// A chain product M₁·M₂·…·M_k (each operand optionally transposed), before ordering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatMul {
    /// Per operand: used transposed.
    pub transposed: Vec<bool>,
}

impl MatMul {
    /// A chain of `k` operands, none transposed.
    pub fn plain(k: usize) -> MatMul {
        MatMul {
            transposed: vec![false; k],
        }
    }

    /// The factors of the operands `inputs`.
    pub fn factors(&self, inputs: &[&Fact]) -> Result<Vec<Factor>, OpError> {
        chain_factors(&self.transposed, inputs)
    }
}

/// The factors of a chain's operands `inputs`, operand i used transposed when
/// `transposed[i]` (what the chain pass orders a [`ChainRole::Chain`] by).
pub fn chain_factors(transposed: &[bool], inputs: &[&Fact]) -> Result<Vec<Factor>, OpError> {
    if transposed.len() != inputs.len() {
        return Err(OpError::args(format!(
            "matmul has {} transpose flags for {} operands",
            transposed.len(),
            inputs.len()
        )));
    }
    inputs
        .iter()
        .zip(transposed)
        .map(|(f, &t)| {
            Factor::of(f, t).ok_or_else(|| OpError::args("matmul operand is not a matrix"))
        })
        .collect()
}

impl Op for MatMul {
    fn name(&self) -> &str {
        "matmul"
    }
    fn chain(&self) -> Option<ChainRole> {
        Some(ChainRole::Chain(self.transposed.clone()))
    }
    fn attrs(&self) -> String {
        if self.transposed.iter().any(|&t| t) {
            let flags: Vec<&str> = self
                .transposed
                .iter()
                .map(|&t| if t { "T" } else { "N" })
                .collect();
            format!("t={}", flags.join(""))
        } else {
            String::new()
        }
    }
    fn args(&self) -> Arity {
        Arity::Variadic {
            kind: Kind::Matrix,
            min: 2,
        }
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let fs = self.factors(inputs)?;
        if fs.iter().all(|f| f.nnz.is_some()) {
            return Err(OpError::args(
                "a product of sparse matrices only (SpGEMM) is not supported: multiply by a dense matrix",
            ));
        }
        for (i, w) in fs.windows(2).enumerate() {
            if w[0].cols != w[1].rows {
                return Err(shape_error(i, &w[0], &w[1]));
            }
        }
        if let Some(i) = fs.iter().position(|f| f.heads > 1) {
            let h = fs[i].heads;
            let ok = fs.len() == 2
                && i == 0
                && fs[1].nnz.is_none()
                && fs[1].cols.as_known().is_some_and(|c| c % h == 0);
            if !ok {
                return Err(OpError::args(format!(
                    "a {h}-head attention adjacency multiplies exactly one dense matrix whose width is a multiple of {h} (bind `z = x @ W` first)"
                )));
            }
        }
        Ok(Fact::dense(fs[0].rows, fs[fs.len() - 1].cols))
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        // Unordered, the chain runs right to left (see forward).
        let mut cost = Cost::streaming(inputs, output, b);
        if let Ok(fs) = self.factors(inputs) {
            let mut acc = fs[fs.len() - 1];
            for f in fs[..fs.len() - 1].iter().rev() {
                cost.flops += product_flops(f, &acc, b).unwrap_or(f64::INFINITY);
                acc = f.times(&acc);
            }
        }
        cost
    }
    /// Unordered evaluation (the planner replaces chains; this serves unplanned graphs):
    /// right to left when the last operand is dense, else left to right.
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let k = inputs.len();
        let ops: Vec<(&Value, bool)> = inputs
            .iter()
            .copied()
            .zip(self.transposed.iter().copied())
            .collect();
        let acc = if inputs[k - 1].as_dense().is_some() {
            let mut acc = oriented(ops[k - 1].0, ops[k - 1].1)?;
            for &(v, t) in ops[..k - 1].iter().rev() {
                acc = product(v, t, &Value::dense(acc), false)?;
            }
            acc
        } else {
            let mut acc = oriented(ops[0].0, ops[0].1)?;
            for &(v, t) in &ops[1..] {
                acc = product(&Value::dense(acc), false, v, t)?;
            }
            acc
        };
        Ok(Value::dense(acc))
    }
    /// Y = M₁⋯M_k. For a dense operand i: ∂M_i = (M₁⋯M_{i−1})ᵀ · ∇Y · (M_{i+1}⋯M_k)ᵀ, a chain
    /// again (reversed and transposed when M_i is used transposed). For a sparse operand
    /// with trainable values: ∂S_uv = ⟨((M₁⋯M_{i−1})ᵀ∇Y)_u, (M_{i+1}⋯M_k)_v⟩ on S's pattern
    /// (SDDMM).
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let k = self.transposed.len();
        let operands: Vec<NodeId> = (0..k).map(|i| g.input(i)).collect();
        let t = &self.transposed;
        let mut out = vec![None; k];
        for i in 0..k {
            if !g.needs_grad(i) {
                continue;
            }
            // Left part, transposed: M_{i−1}ᵀ … M₁ᵀ, then ∇Y.
            let mut left: Vec<(NodeId, bool)> =
                (0..i).rev().map(|j| (operands[j], !t[j])).collect();
            left.push((grad, false));
            let right: Vec<(NodeId, bool)> = (i + 1..k).map(|j| (operands[j], t[j])).collect();
            let sparse = matches!(g.fact(operands[i]), Fact::Sparse { .. });
            if sparse {
                if right.is_empty() {
                    return Err(OpError::args(
                        "a sparse operand with trainable values must be followed by a dense operand",
                    ));
                }
                let l = chain(g, &left)?;
                let r = chain(g, &right)?;
                let (a, b) = if t[i] { (r, l) } else { (l, r) };
                out[i] = Some(g.add(Sddmm, &[operands[i], a, b])?);
            } else {
                // ∂op(M_i) = left · ∇Y · rightᵀ; rightᵀ = M_kᵀ … M_{i+1}ᵀ.
                let mut parts = left;
                parts.extend((i + 1..k).rev().map(|j| (operands[j], !t[j])));
                if t[i] {
                    // ∂M_i = (∂op(M_i))ᵀ: reverse the chain, flip every flag.
                    parts = parts.into_iter().rev().map(|(n, f)| (n, !f)).collect();
                }
                out[i] = Some(chain(g, &parts)?);
            }
        }
        Ok(out)
    }
}

/// A chain node for `parts`, or the single operand itself (a copy-transpose if flagged).
fn chain(g: &mut GradBuilder<'_>, parts: &[(NodeId, bool)]) -> Result<NodeId, OpError> {
    match parts {
        [(n, false)] => Ok(*n),
        [(n, true)] => g.add(Transpose, &[*n]),
        _ => {
            let nodes: Vec<NodeId> = parts.iter().map(|p| p.0).collect();
            g.add(
                MatMul {
                    transposed: parts.iter().map(|p| p.1).collect(),
                },
                &nodes,
            )
        }
    }
}

/// A dense value in the orientation used (a copy when transposed).
fn oriented(v: &Value, t: bool) -> Result<Tensor, OpError> {
    let d = v
        .as_dense()
        .ok_or_else(|| OpError::args("matmul: an end operand of the chain must be dense"))?;
    Ok(if t { transpose(d) } else { d.clone() })
}

/// Row-major transpose (blocked for cache reuse).
pub fn transpose(d: &Tensor) -> Tensor {
    const B: usize = 32;
    let mut t = Tensor::zeros(d.cols, d.rows);
    for i0 in (0..d.rows).step_by(B) {
        for j0 in (0..d.cols).step_by(B) {
            for i in i0..(i0 + B).min(d.rows) {
                for j in j0..(j0 + B).min(d.cols) {
                    t.data[j * d.rows + i] = d.data[i * d.cols + j];
                }
            }
        }
    }
    t
}

/// op(a) · op(b) for any pair but two sparse operands.
pub fn product(a: &Value, ta: bool, b: &Value, tb: bool) -> Result<Tensor, OpError> {
    match (a, b) {
        (Value::Dense(x), Value::Dense(y)) => {
            let xv = MatRef::row_major(&x.data, x.rows, x.cols)?;
            let yv = MatRef::row_major(&y.data, y.rows, y.cols)?;
            dense_product(xv, ta, yv, tb, Precision::F32)
        }
        (Value::Sparse(s), Value::Dense(y)) => {
            let y = if tb { transpose(y) } else { (**y).clone() };
            sparse_product(s, ta, MatRef::row_major(&y.data, y.rows, y.cols)?, None)
        }
        (Value::Dense(x), Value::Sparse(s)) => {
            // op(X)·op(S) = (op(S)ᵀ · op(X)ᵀ)ᵀ.
            let xt = if ta { (**x).clone() } else { transpose(x) };
            let xt = MatRef::row_major(&xt.data, xt.rows, xt.cols)?;
            Ok(transpose(&sparse_product(s, !tb, xt, None)?))
        }
        _ => Err(OpError::args(
            "matmul: product of two sparse matrices (SpGEMM) is not supported",
        )),
    }
}

fn dense_product(
    x: MatRef<'_>,
    tx: bool,
    y: MatRef<'_>,
    ty: bool,
    precision: Precision,
) -> Result<Tensor, OpError> {
    let (m, k) = if tx {
        (x.n_cols(), x.n_rows())
    } else {
        (x.n_rows(), x.n_cols())
    };
    let (k2, n) = if ty {
        (y.n_cols(), y.n_rows())
    } else {
        (y.n_rows(), y.n_cols())
    };
    if k != k2 {
        return Err(OpError::args(format!(
            "gemm: inner dimensions {k} and {k2} differ"
        )));
    }
    if tx && ty {
        // Xᵀ·Yᵀ = (Y·X)ᵀ. The product overwrites every element (zeros where k = 0).
        let mut yx = Tensor::scratch(n, m);
        let out = MatMut::row_major(&mut yx.data, n, m)?;
        gemm_view_with(precision, y, Trans::N, x, Trans::N, out, false)?;
        return Ok(transpose(&yx));
    }
    // Overwritten whole by the product (zeros where k = 0): no zeroing pass first.
    let mut c = Tensor::scratch(m, n);
    let out = MatMut::row_major(&mut c.data, m, n)?;
    gemm_view_with(precision, x, trans(tx), y, trans(ty), out, false)?;
    Ok(c)
}

/// op(S) · Y with Y row-major, head by head on column blocks; `width` fixes the feature
/// block width (None: the Q_f rule of the kernel).
fn sparse_product(
    s: &SparseMat,
    ts: bool,
    y: MatRef<'_>,
    width: Option<usize>,
) -> Result<Tensor, OpError> {
    let st = &s.structure;
    let n = st.n_rows();
    if y.n_rows() != n {
        return Err(OpError::args(format!(
            "spmm: sparse matrix is {n}×{n}, dense operand has {} rows",
            y.n_rows()
        )));
    }
    let cols = y.n_cols();
    let heads = s.heads();
    // Sᵀ's values in its CSR order, permuted; S's read where they are (no copy).
    let permuted;
    let values: &Tensor = if ts {
        permuted = s.transposed_values();
        &permuted
    } else {
        &s.values
    };
    if cols == 0 || n == 0 {
        return Ok(Tensor::zeros(n, cols));
    }
    // Every row is written (an empty row as zeros), head by head below.
    let mut out = Tensor::scratch(n, cols);
    if heads == 1 {
        let a = CsrRef {
            offsets: &st.offsets,
            indices: &st.indices,
            values: Some(&values.data),
            n_cols: n,
        };
        let w = width.unwrap_or_else(|| block_width(n, cols, rayon::current_num_threads()));
        spmm_view_blocked(a, y, MatMut::row_major(&mut out.data, n, cols)?, w)?;
        return Ok(out);
    }
    let f = cols / heads;
    let mut xh = Tensor::zeros(n, f);
    let mut oh = Tensor::zeros(n, f);
    let mut vh = vec![0.0f32; st.nnz()];
    for h in 0..heads {
        for (k, v) in vh.iter_mut().enumerate() {
            *v = values.data[k * heads + h];
        }
        for i in 0..n {
            xh.data[i * f..(i + 1) * f].copy_from_slice(&y.row(i)[h * f..(h + 1) * f]);
        }
        let a = CsrRef {
            offsets: &st.offsets,
            indices: &st.indices,
            values: Some(&vh),
            n_cols: n,
        };
        let w = width.unwrap_or_else(|| block_width(n, f, rayon::current_num_threads()));
        spmm_blocked(a, &xh.data, f, &mut oh.data, w)?;
        for i in 0..n {
            out.data[i * cols + h * f..i * cols + (h + 1) * f]
                .copy_from_slice(&oh.data[i * f..(i + 1) * f]);
        }
    }
    Ok(out)
}

/// Columns `start .. start + len` of a stored operand, read in place: what the fusion pass
/// makes of a `slice` feeding a product (the backward of `concat` slices its gradient
/// into the products' operands; the GEMM reads the block through its row stride).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ColumnView {
    /// First column.
    pub start: usize,
    /// Columns.
    pub len: usize,
}

impl ColumnView {
    /// The fact of operand `slot` of `op` as read through `view` (`f` itself without one):
    /// an error unless `f` is dense with the view's columns.
    fn fact(view: Option<ColumnView>, f: &Fact, op: &str, slot: usize) -> Result<Fact, OpError> {
        let Some(v) = view else {
            return Ok(f.clone());
        };
        match f {
            Fact::Dense { rows, cols } if cols.as_known().is_some_and(|c| v.start + v.len <= c) => {
                Ok(Fact::dense(*rows, Dim::known(v.len)))
            }
            other => Err(OpError::args(format!(
                "{op}: operand {} viewed as columns {}..{} of {other}",
                slot + 1,
                v.start,
                v.start + v.len
            ))),
        }
    }

    /// `whole` as read through `view`: its column block, or the whole.
    fn apply(view: Option<ColumnView>, whole: MatRef<'_>) -> Result<MatRef<'_>, OpError> {
        Ok(match view {
            Some(v) => whole.cols(v.start..v.start + v.len)?,
            None => whole,
        })
    }

    /// [`ColumnView::apply`] to a stored tensor.
    fn read(view: Option<ColumnView>, t: &Tensor) -> Result<MatRef<'_>, OpError> {
        ColumnView::apply(view, MatRef::row_major(&t.data, t.rows, t.cols)?)
    }

    /// `, name[:, a..b]` for an op's attributes, or nothing.
    fn attr(view: Option<ColumnView>, name: &str) -> String {
        view.map_or(String::new(), |v| {
            format!(", {name}[:, {}..{}]", v.start, v.start + v.len)
        })
    }
}

/// C = op(A) · op(B), dense, through the GEMM library.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gemm {
    /// A used transposed.
    pub ta: bool,
    /// B used transposed.
    pub tb: bool,
    /// The product's arithmetic: f32, or bf16 operands with f32 accumulation (set by the
    /// planner's precision pass from the plan's `[compute] precision`).
    pub precision: Precision,
    /// Per operand (A, B): a column block of the stored input read in place instead of
    /// the whole input (set by the fusion pass; planned graphs only, never differentiated).
    pub views: [Option<ColumnView>; 2],
}

impl Gemm {
    /// op(A)·op(B) in f32.
    pub fn new(ta: bool, tb: bool) -> Gemm {
        Gemm {
            ta,
            tb,
            precision: Precision::F32,
            views: [None; 2],
        }
    }

    /// The fact operand `i` has as the product reads it (its column view's block).
    fn operand_fact(&self, i: usize, f: &Fact) -> Result<Fact, OpError> {
        ColumnView::fact(self.views[i], f, "gemm", i)
    }

    /// Operand `i` as the product reads it: the stored input, or its column view.
    fn operand<'v>(&self, inputs: &[&'v Value], i: usize) -> Result<MatRef<'v>, OpError> {
        ColumnView::read(self.views[i], super::dense(inputs, i, "gemm")?)
    }

    /// A product of the same precision with other transpose flags (the gradients').
    fn with(self, ta: bool, tb: bool) -> Gemm {
        Gemm { ta, tb, ..self }
    }
}

impl Op for Gemm {
    fn stage(&self) -> Stage {
        Stage::Transformation
    }

    fn name(&self) -> &str {
        "gemm"
    }
    fn chain(&self) -> Option<ChainRole> {
        Some(ChainRole::Product(self.ta, self.tb))
    }
    fn attrs(&self) -> String {
        let view = |i: usize| ColumnView::attr(self.views[i], ["A", "B"][i]);
        format!(
            "{}{}{}{}{}",
            if self.ta { "T" } else { "N" },
            if self.tb { "T" } else { "N" },
            match self.precision {
                Precision::F32 => "",
                Precision::Bf16 => " bf16",
            },
            view(0),
            view(1)
        )
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let (fa, fb) = (
            self.operand_fact(0, inputs[0])?,
            self.operand_fact(1, inputs[1])?,
        );
        let a = Factor::of(&fa, self.ta).expect("dense");
        let b = Factor::of(&fb, self.tb).expect("dense");
        if a.cols != b.rows {
            return Err(shape_error(0, &a, &b));
        }
        Ok(Fact::dense(a.rows, b.cols))
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        let viewed = |i: usize| {
            self.operand_fact(i, inputs[i])
                .unwrap_or_else(|_| inputs[i].clone())
        };
        let (va, vb) = (viewed(0), viewed(1));
        let fa = Factor::of(&va, self.ta).expect("dense");
        let fb = Factor::of(&vb, self.tb).expect("dense");
        Cost {
            flops: product_flops(&fa, &fb, b).unwrap_or(0.0),
            // A column view reads its block only.
            ..Cost::streaming(&[&va, &vb], output, b)
        }
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let (a, b) = (self.operand(inputs, 0)?, self.operand(inputs, 1)?);
        Ok(Value::dense(dense_product(
            a,
            self.ta,
            b,
            self.tb,
            self.precision,
        )?))
    }
    /// C = op(A)·op(B): ∂op(A) = ∇C·op(B)ᵀ, ∂op(B) = op(A)ᵀ·∇C, transposed back when the
    /// operand is used transposed.
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        if self.views != [None, None] {
            return Err(OpError::args(
                "gemm: a product reading column views is planned, not differentiated",
            ));
        }
        let (a, b) = (g.input(0), g.input(1));
        let da = if !g.needs_grad(0) {
            None
        } else if self.ta {
            // ∂A = op(B)·∇Cᵀ.
            Some(g.add(self.with(self.tb, true), &[b, grad])?)
        } else {
            Some(g.add(self.with(false, !self.tb), &[grad, b])?)
        };
        let db = if !g.needs_grad(1) {
            None
        } else if self.tb {
            // ∂B = ∇Cᵀ·op(A).
            Some(g.add(self.with(true, self.ta), &[grad, a])?)
        } else {
            Some(g.add(self.with(!self.ta, false), &[a, grad])?)
        };
        Ok(vec![da, db])
    }
    fn as_row_local(&self) -> Option<&dyn RowLocal> {
        Some(self)
    }
    fn as_row_blocks(&self) -> Option<&dyn RowBlocks> {
        Some(self)
    }
    fn as_partitioned(&self) -> Option<&dyn Partitioned> {
        Some(self)
    }
    fn with_column_view(&self, slot: usize, cols: std::ops::Range<usize>) -> Option<Arc<dyn Op>> {
        if slot >= 2 || self.views[slot].is_some() {
            return None;
        }
        let mut g = *self;
        g.views[slot] = Some(ColumnView {
            start: cols.start,
            len: cols.len(),
        });
        Some(Arc::new(g))
    }
    fn with_precision(&self, precision: Precision) -> Option<Arc<dyn Op>> {
        (precision != self.precision).then(|| Arc::new(Gemm { precision, ..*self }) as Arc<dyn Op>)
    }
}

impl RowLocal for Gemm {
    /// op(A)·B with A not transposed and B of a static shape (a parameter): row i of the
    /// output is row i of A times B.
    fn row_local(&self, inputs: &[&Fact]) -> bool {
        !self.ta && inputs[1].is_static()
    }
}

/// The shortest k at which a `gemm` inside a fused chain packs op(B) once for all its
/// blocks ([`RowBlocks::prepare`]). A shorter one (∇H = ∇Y·W_outᵀ of a classifier of a few
/// classes, k = classes) packs its few rows of op(B) per block, which costs about what
/// reading a shared packing would.
pub const PREPACK_K_MIN: usize = 17;

impl RowBlocks for Gemm {
    /// Rows of op(A)·op(B), op(A) not transposed: the product of A's rows, through the same
    /// kernel as `forward` (its k-sums do not depend on the rows around them, so the block
    /// has the whole product's bits).
    fn rows_at(
        &self,
        _: usize,
        x: &[MatRef<'_>],
        y: MatMut<'_>,
        _: &Ctx<'_>,
    ) -> Result<(), OpError> {
        let a = self.block_rows_of_a(x)?;
        let b = ColumnView::apply(self.views[1], x[1])?;
        gemm_view_with(self.precision, a, Trans::N, b, trans(self.tb), y, false)?;
        Ok(())
    }

    /// Row-local ([`RowLocal::row_local`]: op(A) not transposed, op(B) a parameter),
    /// whatever k. A long k packs op(B) once ([`RowBlocks::prepare`]), and the blocks then
    /// run the kernel on the shared packing as the row parts of a whole product do, while
    /// the chain's next ops find their rows in cache: the JPDC GraphSAGE step went from
    /// 71.6 to 69.9 ms per 1000 nodes at one thread (docs/bench/kernels-gemm.md, thirteenth
    /// session). The fusion pass itself keeps a product whole where fusing it would keep its
    /// wider op(A) alive longer.
    fn fusible(&self, inputs: &[&Fact]) -> bool {
        self.row_local(inputs)
    }

    /// op(B) packed once for every block ([`PackedB`], for the tile path `forward` would
    /// take), when k is at least [`PREPACK_K_MIN`], op(B) is an input of the fused node, and
    /// C is wide enough to pack for (not the narrow path of one or two columns).
    fn prepare(&self, x: &[Option<MatRef<'_>>]) -> Result<Option<Prepared>, OpError> {
        let (false, Some(Some(b))) = (self.ta, x.get(1)) else {
            return Ok(None);
        };
        let b = ColumnView::apply(self.views[1], *b)?;
        let (k, n) = if self.tb {
            (b.n_cols(), b.n_rows())
        } else {
            (b.n_rows(), b.n_cols())
        };
        // C's rows (op(A)'s, when the fused node holds it whole; else a stand-in: the tile
        // path depends on m only through padding to MR, the same on every path).
        let m = match x.first() {
            Some(Some(a)) => a.n_rows(),
            _ => 1 << 16,
        };
        if k < PREPACK_K_MIN {
            return Ok(None);
        }
        Ok(self
            .shared_packing(m, n, b)?
            .map(|packed| Arc::new(packed) as Prepared))
    }

    /// The block's rows of op(A) times the packed op(B) ([`gemm_packed`]: the same bits as
    /// [`gemm_view_with`]).
    fn rows_at_prepared(
        &self,
        r0: usize,
        x: &[MatRef<'_>],
        y: MatMut<'_>,
        ctx: &Ctx<'_>,
        prepared: &Prepared,
    ) -> Result<(), OpError> {
        let Some(packed) = prepared.downcast_ref::<PackedB>() else {
            return self.rows_at(r0, x, y, ctx);
        };
        let a = self.block_rows_of_a(x)?;
        gemm_packed(a, Trans::N, packed, y, false)?;
        Ok(())
    }
}

impl Gemm {
    /// op(B) packed for the tile path the kernel takes for an m × n C, to be shared by
    /// row blocks ([`gemm_packed`]); none where the kernel packs nothing shareable: a C
    /// of one or two columns (the narrow path: each block streams its rows of op(A) once;
    /// `gemm::narrow_path`) or one it computes transposed.
    fn shared_packing(
        &self,
        m: usize,
        n: usize,
        b: MatRef<'_>,
    ) -> Result<Option<PackedB>, OpError> {
        if narrow_path(self.precision, m, n) {
            return Ok(None);
        }
        let (isa, transposed) = plan(Isa::current(), m, n, trans(self.ta));
        if transposed {
            return Ok(None);
        }
        Ok(Some(PackedB::new_with(
            self.precision,
            isa,
            b,
            trans(self.tb),
        )?))
    }

    /// op(A)'s rows of a block (its view applied), refusing a transposed op(A).
    fn block_rows_of_a<'a>(&self, x: &[MatRef<'a>]) -> Result<MatRef<'a>, OpError> {
        if self.ta || x.len() != 2 {
            return Err(OpError::args(
                "gemm: rows of a product need op(A) not transposed and two operands",
            ));
        }
        ColumnView::apply(self.views[0], x[0])
    }
}

impl Partitioned for Gemm {
    /// Row blocks of C (rows of op(A)), about two per worker so a slow block can be
    /// balanced; op(B) packed once for all of them ([`PackedB`]), each block one sequential
    /// call of the kernel on it. A C of too few rows for that (∇W of a first layer, F × h)
    /// splits into column blocks instead (columns of op(B)), so the workers share it
    /// rather than one computing it while the others wait. The k-sum of every
    /// element is the kernel's, whatever the blocks (measured bit-identical in
    /// tests/executor.rs). Xᵀ·Yᵀ (computed as (Y·X)ᵀ by `forward`) is not split.
    ///
    /// A product of long k (∇W = Xᵀ·∇Y over a subgraph's thousands of nodes, which the
    /// kernel runs as two halves of k, [`PackedB::splits_k`]) also splits by k: each row
    /// block's second half is a part of its own (an empty range of the output), computed
    /// into a buffer that [`Partitioned::finish`] adds to the block, as the kernel adds its
    /// halves: the same bits. Each part then reads half of the packed B, and the last part
    /// of a step (a ∇W, whose only reader is the optimiser, ran alone on one worker for
    /// 4–16 ms at the end of a 2-thread GraphSAGE step; BENCHMARKS.md) is half as long.
    fn split(
        &self,
        inputs: &[&Value],
        _: &Fact,
        _: &Ctx<'_>,
        threads: usize,
    ) -> Result<Option<Split>, OpError> {
        if inputs[0].as_dense().is_none() || inputs[1].as_dense().is_none() {
            return Ok(None);
        }
        if threads < 2 || (self.ta && self.tb) {
            return Ok(None);
        }
        let (a, b) = (self.operand(inputs, 0)?, self.operand(inputs, 1)?);
        let (m, k) = if self.ta {
            (a.n_cols(), a.n_rows())
        } else {
            (a.n_rows(), a.n_cols())
        };
        let n = if self.tb { b.n_rows() } else { b.n_cols() };
        if m * n * k < GEMM_SPLIT_MIN_MACS {
            return Ok(None);
        }
        let halves = k_splits(self.precision, k);
        if m < 2 * GEMM_MIN_ROWS {
            if n < 2 * GEMM_MIN_COLS {
                return Ok(None);
            }
            // Column blocks, each a whole product on its columns of op(B). A long k (∇W of
            // a first layer, 50×512 over the subgraph's nodes) splits by its halves instead,
            // on half as many column blocks: each block packs all of op(A) (Xᵀ, a gather),
            // and 4 blocks of 128 columns ran at 40 GF/s on two threads against 62 for the
            // whole on one (BENCHMARKS.md).
            let blocks = if halves {
                threads.div_ceil(2)
            } else {
                2 * threads
            };
            let blocks = blocks.min(n / GEMM_MIN_COLS);
            let split = Split::even(Axis::Cols, n, blocks).writing_all();
            return Ok(Some(if halves {
                by_halves(split, n, |cols| (m, cols))
            } else {
                split
            }));
        }
        let narrow = narrow_path(self.precision, m, n);
        if narrow && self.ta {
            // ∇W of a classifier (Hᵀ·∇Y, C of one or two columns): the narrow path reads
            // whole rows of H, and row blocks of C would read a short run of each (a third
            // of the speed: `gemm::narrow`). A long k runs as its two halves; a short one
            // whole.
            if !halves {
                return Ok(None);
            }
            let split = Split::even(Axis::Rows, m, 1).writing_all();
            return Ok(Some(by_halves(split, m, |rows| (rows, n))));
        }
        // Four row blocks per thread, not two: the step's last node is a ∇W (1024×512 over
        // the subgraph's 6 thousand nodes, ~65 CPU-ms), and at two per thread its last part
        // ran alone for 8 ms at the step's end; a gemm running alone went from 7.9–9.0 ms
        // of a 2-thread step to 3.1–6.3 (BENCHMARKS.md). A part costs its own rows of op(A)
        // only.
        let parts = (4 * threads).min(m / GEMM_MIN_ROWS);
        // op(B) packed once here for every part (each used to pack all of it: for
        // ∇W = Xᵀ·∇Y that was all of ∇Y, per part; issue 33). The parts then compute the
        // same bits as `forward` (same packing, same tile routine).
        // (A C with few columns runs transposed, and each part packs its own rows of
        // op(A) then: nothing to share.)
        let mut split = Split::even(Axis::Rows, m, parts).writing_all();
        if let Some(packed) = self.shared_packing(m, n, b)? {
            let halves = packed
                .splits_k()
                .then(|| split_halves(&mut split, m, |rows| (rows, n)));
            split.prepared = Some(Box::new(GemmParts::Packed { packed, halves }));
        }
        // gemm_packed and gemm_view without accumulation write all of C.
        Ok(Some(split))
    }
    fn forward_part(
        &self,
        inputs: &[&Value],
        _: &Ctx<'_>,
        split: &Split,
        part: usize,
        out: MatMut<'_>,
    ) -> Result<(), OpError> {
        let (ta, tb) = (trans(self.ta), trans(self.tb));
        let prepared = split
            .prepared
            .as_ref()
            .map(|p| {
                p.downcast_ref::<GemmParts>()
                    .ok_or_else(|| OpError::Missing("gemm: part without its packed B".into()))
            })
            .transpose()?;
        // A second half of k (parts past the blocks) computes its block's rows or columns.
        let blocks = prepared.and_then(GemmParts::halves).map(Vec::len);
        let block = match blocks {
            Some(b) if part >= b => part - b,
            _ => part,
        };
        let range = split.ranges[block].clone();
        let (mut av, mut bv) = (self.operand(inputs, 0)?, self.operand(inputs, 1)?);
        // A part is rows of op(A) (rows of C) or columns of op(B) (columns of C); a
        // transposed operand's rows are its stored columns.
        match (split.axis, self.ta, self.tb) {
            (Axis::Rows, false, _) => av = av.rows(range)?,
            (Axis::Rows, true, _) => av = av.cols(range)?,
            (Axis::Cols, _, false) => bv = bv.cols(range)?,
            (Axis::Cols, _, true) => bv = bv.rows(range)?,
        }
        let Some(parts) = prepared else {
            gemm_view_with(self.precision, av, ta, bv, tb, out, false)?;
            return Ok(());
        };
        // One half of k, on the packed B or on op(B) as it is.
        let half = |half: KHalf, c: MatMut<'_>| match parts {
            GemmParts::Packed { packed, .. } => gemm_packed_half(av, ta, packed, half, c),
            GemmParts::Halves(_) => gemm_view_half(self.precision, av, ta, bv, tb, half, c),
        };
        match parts {
            GemmParts::Packed {
                packed,
                halves: None,
            } => gemm_packed(av, ta, packed, out, false)?,
            _ if block == part => half(KHalf::First, out)?,
            GemmParts::Packed {
                halves: Some(halves),
                ..
            }
            | GemmParts::Halves(halves) => {
                let mut buf = halves[block]
                    .lock()
                    .map_err(|_| OpError::Missing("gemm: a half's buffer".into()))?;
                let (r, c) = (buf.rows, buf.cols);
                half(KHalf::Second, MatMut::row_major(&mut buf.data, r, c)?)?;
            }
        }
        Ok(())
    }

    /// Adds each row block's second half of k to the block (split by k only).
    fn finish(&self, split: &Split, mut out: MatMut<'_>) -> Result<(), OpError> {
        let Some(halves) = split
            .prepared
            .as_ref()
            .and_then(|p| p.downcast_ref::<GemmParts>())
            .and_then(GemmParts::halves)
        else {
            return Ok(());
        };
        for (block, half) in halves.iter().enumerate() {
            let rows = split.ranges[block].clone();
            let mut half = half
                .lock()
                .map_err(|_| OpError::Missing("gemm: a half's buffer".into()))?;
            let h = MatRef::row_major(&half.data, half.rows, half.cols)?;
            let block = match split.axis {
                Axis::Rows => out.rb_mut().rows_mut(rows)?,
                Axis::Cols => out.rb_mut().cols_mut(rows)?,
            };
            add_half(block, h)?;
            // Back to the free-list for the next step's halves (`Tensor::scratch`).
            crate::ir::recycle::give(std::mem::take(&mut half.data));
        }
        Ok(())
    }
}

/// What a split [`Gemm`] computes once for its parts.
enum GemmParts {
    /// Row blocks of a C of many columns: op(B) packed once for all of them, and for a
    /// long k each block's buffer for its second half.
    Packed {
        packed: PackedB,
        halves: Option<Vec<Mutex<Tensor>>>,
    },
    /// A product split by halves of k on op(B) as it is (a C of few rows or columns): each
    /// block's buffer for its second half.
    Halves(Vec<Mutex<Tensor>>),
}

impl GemmParts {
    /// Each block's buffer for its second half of k, where k splits.
    fn halves(&self) -> Option<&Vec<Mutex<Tensor>>> {
        match self {
            GemmParts::Packed { halves, .. } => halves.as_ref(),
            GemmParts::Halves(halves) => Some(halves),
        }
    }
}

/// `split` (blocks of an axis of `len`) with a part per block for its second half of k, on
/// op(B) as it is ([`GemmParts::Halves`]).
fn by_halves(mut split: Split, len: usize, shape: impl Fn(usize) -> (usize, usize)) -> Split {
    let halves = split_halves(&mut split, len, shape);
    split.prepared = Some(Box::new(GemmParts::Halves(halves)));
    split
}

/// Adds to `split` (blocks of an axis of `len`) a part per block for its second half of k
/// (an empty range past the axis's end) and returns each block's buffer for that half, of
/// `shape(block length)`.
fn split_halves(
    split: &mut Split,
    len: usize,
    shape: impl Fn(usize) -> (usize, usize),
) -> Vec<Mutex<Tensor>> {
    let blocks = split.ranges.clone();
    split.ranges.extend(blocks.iter().map(|_| len..len));
    blocks
        .into_iter()
        .map(|r| {
            let (rows, cols) = shape(r.len());
            Mutex::new(Tensor::scratch(rows, cols))
        })
        .collect()
}

/// out = op(S) · X: sparse times dense, feature-partitioned (JPDC Algorithm 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spmm {
    /// S used transposed (its values permuted by Algorithm 6).
    pub transpose: bool,
    /// Feature blocks Q_f chosen by the planner (None: the kernel's own rule).
    pub partitions: Option<usize>,
    /// A column block of X read in place instead of the whole input (set by the fusion
    /// pass where X is a `slice`, as the backward of `concat` makes: planned graphs only,
    /// never differentiated).
    pub view: Option<ColumnView>,
}

impl Spmm {
    /// op(S)·X with the kernel's feature blocks, reading all of X.
    pub fn new(transpose: bool) -> Spmm {
        Spmm {
            transpose,
            partitions: None,
            view: None,
        }
    }

    /// The fact X has as the product reads it (its column view's block).
    fn x_fact(&self, f: &Fact) -> Result<Fact, OpError> {
        ColumnView::fact(self.view, f, "spmm", 1)
    }

    /// X as the product reads it: `x`, or its column view.
    fn x<'v>(&self, x: &'v Tensor) -> Result<MatRef<'v>, OpError> {
        ColumnView::read(self.view, x)
    }

    /// [`Spmm::x`] of a neighbour block's rows of X.
    fn x_rows<'v>(&self, x: &NodeRows<'v>) -> Result<MatRef<'v>, OpError> {
        ColumnView::apply(
            self.view,
            MatRef::row_major(x.data(), x.n_rows(), x.cols())?,
        )
    }
}

impl Op for Spmm {
    fn stage(&self) -> Stage {
        Stage::Aggregation
    }

    fn name(&self) -> &str {
        "spmm"
    }
    fn chain(&self) -> Option<ChainRole> {
        Some(ChainRole::Product(self.transpose, false))
    }
    fn attrs(&self) -> String {
        let mut a = Vec::new();
        if self.transpose {
            a.push("T".to_string());
        }
        if let Some(q) = self.partitions {
            a.push(format!("Q_f={q}"));
        }
        a.join(", ") + &ColumnView::attr(self.view, "X")
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Sparse, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let s = Factor::of(inputs[0], self.transpose).expect("sparse");
        let xf = self.x_fact(inputs[1])?;
        let x = Factor::of(&xf, false).expect("dense");
        if s.cols != x.rows {
            return Err(shape_error(0, &s, &x));
        }
        if s.heads > 1 && x.cols.as_known().is_none_or(|c| c % s.heads != 0) {
            return Err(OpError::args(format!(
                "spmm: {}-head adjacency times a matrix of width {}, expected a multiple of {}",
                s.heads, x.cols, s.heads
            )));
        }
        Ok(Fact::dense(s.rows, x.cols))
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        let s = Factor::of(inputs[0], self.transpose).expect("sparse");
        let xf = self.x_fact(inputs[1]).unwrap_or_else(|_| inputs[1].clone());
        let x = Factor::of(&xf, false).expect("dense");
        let q = self.partitions.unwrap_or(1) as f64;
        let nnz = s.nnz.map_or(0.0, |d| d.resolve(b) as f64);
        Cost {
            flops: product_flops(&s, &x, b).unwrap_or(0.0),
            // Indices and values are re-read once per feature block; a column view reads
            // its block only.
            bytes_read: q * nnz * (4.0 + 4.0 * s.heads as f64) + xf.bytes(b) as f64,
            bytes_written: output.bytes(b) as f64,
        }
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let s = inputs[0]
            .as_sparse()
            .ok_or_else(|| OpError::args("spmm: argument 1 is not sparse"))?;
        let x = self.x(super::dense(inputs, 1, "spmm")?)?;
        let width = self
            .partitions
            .map(|q| x.n_cols().div_ceil(q.max(1)).max(1));
        Ok(Value::dense(sparse_product(s, self.transpose, x, width)?))
    }
    /// out = op(S)·X: ∂X = op(S)ᵀ·∇out; ∂S_uv = ⟨∇out_u, X_v⟩ (⟨X_u, ∇out_v⟩ when
    /// transposed) on S's pattern.
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        if self.view.is_some() {
            return Err(OpError::args(
                "spmm: a product reading a column view is planned, not differentiated",
            ));
        }
        let (s, x) = (g.input(0), g.input(1));
        let ds = if g.needs_grad(0) {
            let (a, b) = if self.transpose { (x, grad) } else { (grad, x) };
            Some(g.add(Sddmm, &[s, a, b])?)
        } else {
            None
        };
        let dx = if g.needs_grad(1) {
            Some(g.add(
                Spmm {
                    transpose: !self.transpose,
                    ..*self
                },
                &[s, grad],
            )?)
        } else {
            None
        };
        Ok(vec![ds, dx])
    }
    fn as_feature_partitioned(&self) -> Option<&dyn FeaturePartitioned> {
        Some(self)
    }
    /// S·X aggregates X over S's rows; a transposed S does not (its rows are S's
    /// columns).
    fn as_neighbour(&self) -> Option<&dyn NeighbourOp> {
        (!self.transpose).then_some(self)
    }
    fn as_partitioned(&self) -> Option<&dyn Partitioned> {
        Some(self)
    }
    fn with_column_view(&self, slot: usize, cols: std::ops::Range<usize>) -> Option<Arc<dyn Op>> {
        if slot != 1 || self.view.is_some() {
            return None;
        }
        Some(Arc::new(Spmm {
            view: Some(ColumnView {
                start: cols.start,
                len: cols.len(),
            }),
            ..*self
        }))
    }
}

impl FeaturePartitioned for Spmm {
    fn with_partitions(&self, q: usize) -> Arc<dyn Op> {
        Arc::new(Spmm {
            partitions: Some(q),
            ..*self
        })
    }
}

impl NeighbourOp for Spmm {
    fn neighbour(&self, _: &[&Fact]) -> Neighbour {
        Neighbour { adjacency: 0, x: 1 }
    }
    /// The block's rows of S (global column ids) times the whole of X read in place, head
    /// by head on column views: every output element the same CSR-order sum as `forward`.
    fn forward_block(&self, block: &RowBlock<'_>, _: &Ctx<'_>) -> Result<Value, OpError> {
        let s = block.adjacency;
        let st = &s.structure;
        let x = self.x_rows(&block.x)?;
        let (rows, f) = (block.rows(), x.n_cols());
        let heads = s.heads();
        let mut out = Tensor::zeros(rows, f);
        if rows == 0 || f == 0 {
            return Ok(Value::dense(out));
        }
        let threads = rayon::current_num_threads();
        if heads == 1 {
            let a = CsrRef {
                offsets: &st.offsets,
                indices: &st.indices,
                values: Some(&s.values.data),
                n_cols: block.n_nodes,
            };
            let o = MatMut::row_major(&mut out.data, rows, f)?;
            spmm_view_blocked(a, x, o, block_width(0, f, threads))?;
            return Ok(Value::dense(out));
        }
        if f % heads != 0 {
            return Err(OpError::args(format!(
                "spmm: {heads}-head matrix times a matrix of width {f}"
            )));
        }
        let fh = f / heads;
        let mut vh = vec![0.0f32; st.nnz()];
        for h in 0..heads {
            for (k, v) in vh.iter_mut().enumerate() {
                *v = s.values.data[k * heads + h];
            }
            let a = CsrRef {
                offsets: &st.offsets,
                indices: &st.indices,
                values: Some(&vh),
                n_cols: block.n_nodes,
            };
            let cols = h * fh..(h + 1) * fh;
            let o = MatMut::row_major(&mut out.data, rows, f)?.cols_mut(cols.clone())?;
            spmm_view_blocked(a, x.cols(cols)?, o, block_width(0, fh, threads))?;
        }
        Ok(Value::dense(out))
    }

    fn fold(&self) -> Option<&dyn NeighbourFold> {
        Some(self)
    }
}

/// A single-head S·X is a sum over each row's entries in CSR order, one fused
/// multiply-add per entry: the kernel's accumulate mode continues it part after part.
impl NeighbourFold for Spmm {
    fn start(&self, rows: usize, cols: usize) -> Tensor {
        Tensor::zeros(rows, cols)
    }

    fn fold_part(&self, part: &RowBlock<'_>, acc: &mut Tensor, _: &Ctx<'_>) -> Result<(), OpError> {
        let s = part.adjacency;
        if s.heads() != 1 {
            return Err(OpError::args(format!(
                "spmm: streaming X in parts takes one value per entry, not {}",
                s.heads()
            )));
        }
        let a = CsrRef {
            offsets: &s.structure.offsets,
            indices: &s.structure.indices,
            values: Some(&s.values.data),
            n_cols: part.x.n_rows(),
        };
        let x = self.x_rows(&part.x)?;
        let (rows, cols) = (acc.rows, acc.cols);
        spmm_accumulate(a, x, MatMut::row_major(&mut acc.data, rows, cols)?)?;
        Ok(())
    }

    fn finish(&self, acc: Tensor, _: &[u32]) -> Result<Value, OpError> {
        Ok(Value::dense(acc))
    }
}

impl Partitioned for Spmm {
    /// Column blocks of the output (JPDC §6.2): the Q_f feature blocks of width w (the
    /// planner's Q_f, else the kernel's rule) grouped into about two runs of contiguous
    /// blocks per worker; each run is one call of the kernel, which computes its blocks one
    /// after the other. Run boundaries are block boundaries, so every block is the one the
    /// interpreter computes: bit-identical. Dispatch in order, owner from the end, thieves
    /// from the start, keeps the runs computed at once far apart. Single-head only; the
    /// transposed values (Algorithm 6) are permuted once, in `prepared`.
    fn split(
        &self,
        inputs: &[&Value],
        _: &Fact,
        _: &Ctx<'_>,
        threads: usize,
    ) -> Result<Option<Split>, OpError> {
        let (Some(s), Some(x)) = (inputs[0].as_sparse(), inputs[1].as_dense()) else {
            return Ok(None);
        };
        let n = s.structure.n_rows();
        let f = self.x(x)?.n_cols();
        if threads < 2 || s.heads() != 1 || n == 0 || f == 0 || x.rows != n {
            return Ok(None);
        }
        let w = match self.partitions {
            Some(q) => f.div_ceil(q.max(1)).max(1),
            None => block_width(n, f, threads),
        };
        if f.div_ceil(w) < 2 {
            return Ok(None);
        }
        let prepared = if self.transpose {
            s.transposed_values()
        } else {
            Tensor::zeros(0, 0)
        };
        Ok(spmm_column_split(
            f,
            w,
            threads,
            Box::new(SpmmPrepared {
                values: prepared,
                width: w,
            }),
        ))
    }
    fn forward_part(
        &self,
        inputs: &[&Value],
        _: &Ctx<'_>,
        split: &Split,
        part: usize,
        out: MatMut<'_>,
    ) -> Result<(), OpError> {
        let s = inputs[0]
            .as_sparse()
            .ok_or_else(|| OpError::args("spmm: argument 1 is not sparse"))?;
        let x = super::dense(inputs, 1, "spmm")?;
        let prep = split
            .prepared
            .as_ref()
            .and_then(|p| p.downcast_ref::<SpmmPrepared>())
            .ok_or_else(|| OpError::Missing("spmm: part without its prepared data".into()))?;
        let values = if self.transpose {
            &prep.values.data
        } else {
            &s.values.data
        };
        let st = &s.structure;
        let a = CsrRef {
            offsets: &st.offsets,
            indices: &st.indices,
            values: Some(values),
            n_cols: st.n_rows(),
        };
        let cols = split.ranges[part].clone();
        let xv = self.x(x)?.cols(cols)?;
        spmm_view_blocked(a, xv, out, prep.width)?;
        Ok(())
    }
}

/// The split of an SpMM's output of `cols` columns into feature blocks of `width`: the
/// blocks grouped into about two runs of contiguous blocks per worker (each run one call of
/// the kernel, run boundaries block boundaries, so every block is the one a whole call
/// computes); `None` under two blocks. The kernel writes every row of its block, empty
/// rows as zeros: the parts write all of the output.
pub(super) fn spmm_column_split(
    cols: usize,
    width: usize,
    threads: usize,
    prepared: Box<dyn std::any::Any + Send + Sync>,
) -> Option<Split> {
    let q = cols.div_ceil(width.max(1));
    if q < 2 {
        return None;
    }
    let runs = (2 * threads).min(q);
    let ranges = (0..runs)
        .map(|r| (r * q / runs * width).min(cols)..((r + 1) * q / runs * width).min(cols))
        .collect();
    Some(Split {
        axis: Axis::Cols,
        ranges,
        prepared: Some(prepared),
        writes_all: true,
    })
}

/// What [`Spmm::split`] computes once for its parts.
struct SpmmPrepared {
    /// The transposed values (Algorithm 6), when the product is transposed.
    values: Tensor,
    /// Feature block width w.
    width: usize,
}

/// Sampled dense-dense product on a sparse pattern: out[k, h] = ⟨L_u, R_v⟩ over head h's
/// column block, for each entry k = (u, v) of S. The gradient of a sparse operand's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sddmm;

impl Op for Sddmm {
    fn stage(&self) -> Stage {
        Stage::Aggregation
    }

    fn name(&self) -> &str {
        "sddmm"
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Sparse, Kind::Dense, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let Fact::Sparse { rows, nnz, heads } = *inputs[0] else {
            unreachable!("arity checked")
        };
        let (lr, lc) = inputs[1].matrix().expect("dense");
        let (rr, rc) = inputs[2].matrix().expect("dense");
        if lr != rows || rr != rows || lc != rc {
            return Err(OpError::args(format!(
                "sddmm: pattern [{rows}, {rows}] with L [{lr}, {lc}] and R [{rr}, {rc}], expected both [{rows}, f]"
            )));
        }
        if lc.as_known().is_none_or(|c| c % heads != 0) {
            return Err(OpError::args(format!(
                "sddmm: width {lc} is not a multiple of {heads} heads"
            )));
        }
        Ok(Fact::dense(nnz, Dim::known(heads)))
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        let nnz = output.matrix().map_or(0, |(r, _)| r.resolve(b)) as f64;
        let f = inputs[1].matrix().map_or(0, |(_, c)| c.resolve(b)) as f64;
        Cost {
            flops: 2.0 * nnz * f,
            ..Cost::streaming(inputs, output, b)
        }
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let s = inputs[0]
            .as_sparse()
            .ok_or_else(|| OpError::args("sddmm: argument 1 is not sparse"))?;
        let l = super::dense(inputs, 1, "sddmm")?;
        let r = super::dense(inputs, 2, "sddmm")?;
        let st = &s.structure;
        let heads = s.heads();
        let f = l.cols / heads;
        let mut out = Tensor::zeros(st.nnz(), heads);
        for u in 0..st.n_rows() {
            let lu = l.row(u);
            for k in st.row(u) {
                let rv = r.row(st.indices[k] as usize);
                for h in 0..heads {
                    let block = h * f..(h + 1) * f;
                    out.data[k * heads + h] = lu[block.clone()]
                        .iter()
                        .zip(&rv[block])
                        .map(|(a, b)| a * b)
                        .sum();
                }
            }
        }
        Ok(Value::dense(out))
    }
}

/// A row-major copy of a dense matrix's transpose (only where a kernel needs one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transpose;

impl Op for Transpose {
    fn name(&self) -> &str {
        "transpose"
    }
    fn chain(&self) -> Option<ChainRole> {
        Some(ChainRole::Transpose)
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let (r, c) = inputs[0].matrix().expect("dense");
        Ok(Fact::dense(c, r))
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        Ok(Value::dense(transpose(super::dense(
            inputs,
            0,
            "transpose",
        )?)))
    }
    /// Y = Xᵀ: ∂X = ∇Yᵀ.
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        Ok(vec![Some(g.add(Transpose, &[grad])?)])
    }
}
