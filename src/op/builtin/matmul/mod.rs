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

mod chain;
mod gemm;
mod sddmm;
mod spmm;
mod transpose;

use chain::shape_error;
pub use chain::{chain_factors, product_flops, Factor};
pub use gemm::{Gemm, PREPACK_K_MIN};
pub use sddmm::Sddmm;
pub(in crate::op::builtin) use spmm::spmm_column_split;
pub use spmm::Spmm;
pub use transpose::Transpose;

use crate::op::{
    Arity, Axis, ChainLink, ChainRole, Cost, Ctx, GradBuilder, MatMut, MatRef, Neighbour, NodeRows,
    Op, OpError, RowBlock, Split, Stage,
};
use crate::op::{
    ColumnViews, FeaturePartitioned, NeighbourFold, NeighbourOp, Partitioned, PartitionedDyn,
    PrecisionChoice, RowBlocks, RowBlocksDyn, RowLocal,
};

/// The kernel's transpose flag of an operand used transposed or not.
fn trans(t: bool) -> Trans {
    if t {
        Trans::T
    } else {
        Trans::N
    }
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

impl Op for MatMul {
    fn name(&self) -> &str {
        "matmul"
    }
    fn as_chain(&self) -> Option<&dyn ChainLink> {
        Some(self)
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

impl ChainLink for MatMul {
    fn role(&self) -> ChainRole {
        ChainRole::Chain(self.transposed.clone())
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
    let (offsets, indices) = st.pattern(ts);
    if cols == 0 || n == 0 {
        return Ok(Tensor::zeros(n, cols));
    }
    // Every row is written (an empty row as zeros), head by head below.
    let mut out = Tensor::scratch(n, cols);
    if heads == 1 {
        let a = CsrRef {
            offsets,
            indices,
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
            offsets,
            indices,
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
