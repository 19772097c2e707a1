//! The built-in ops, one family per file, and their registration under the names plan
//! files use.

mod activation;
mod arith;
mod attention;
mod dropout;
mod loss;
mod matmul;
mod norm;
mod source;
mod structure;

use std::sync::Arc;

pub use activation::{Activate, ActivateBackward, Activation, RELU};
pub use arith::{Add, AddN, BroadcastRows, Mul, Scale, Sub, SumRows};
pub use attention::{Gat, GatScoresBackward, GatVecBackward, GatZBackward, Side};
pub use dropout::{Dropout, DropoutBackward};
pub use loss::{Loss, LossBackward, LossKind};
pub use matmul::{
    chain_factors, product, product_flops, transpose, Factor, Gemm, MatMul, Sddmm, Spmm, Transpose,
};
pub use norm::{L2Norm, L2NormBackward, L2_EPS};
pub use source::{AdjKind, Adjacency, Features, One, Param, Sample, TargetsOp};
pub use structure::{Concat, MeanHeads, MeanHeadsBackward, Slice, SliceBackward};

use crate::ir::{Bindings, Fact, Tensor, Value};

use super::{Attrs, Cost, OpError, Registry};

/// A required attribute (`mean_heads(x, heads=4)`, `slice(x, start=0, len=8)`).
fn required(attrs: &Attrs, op: &str, name: &str) -> Result<(), OpError> {
    if attrs.0.contains_key(name) {
        Ok(())
    } else {
        Err(OpError::Attr {
            name: name.into(),
            what: format!("{op} needs `{name}=`, got none"),
        })
    }
}

/// Registers every built-in op callable from a plan file. (Source ops, parameters and
/// products are created by lowering, not called by name; backward ops by autodiff.)
/// A plan's `a - b`, `a * b`, `c * x` and `-x` lower to `sub`, `mul` and `scale`.
pub fn register(r: &mut Registry) {
    let ok = |res: Result<(), OpError>| res.expect("built-in names are distinct");
    ok(r.register("relu", &[], "relu(x): max(x, 0)", |_| Ok(Arc::new(RELU))));
    ok(r.register(
        "leaky_relu",
        &["slope"],
        "leaky_relu(x, slope=0.2): x if x > 0 else slope·x",
        |a| {
            Ok(Arc::new(Activate(Activation::leaky_relu(
                a.num("slope", 0.2)?,
            )?)))
        },
    ));
    ok(
        r.register("sigmoid", &[], "sigmoid(x): 1 / (1 + e^−x)", |_| {
            Ok(Arc::new(Activate(Activation::Sigmoid)))
        }),
    );
    ok(r.register("tanh", &[], "tanh(x)", |_| {
        Ok(Arc::new(Activate(Activation::Tanh)))
    }));
    ok(r.register(
        "elu",
        &["alpha"],
        "elu(x, alpha=1.0): x if x > 0 else alpha·(e^x − 1), alpha ≥ 0",
        |a| Ok(Arc::new(Activate(Activation::elu(a.num("alpha", 1.0)?)?))),
    ));
    ok(r.register(
        "dropout",
        &["p"],
        "dropout(x, p=0.5): inverted dropout while training (p in [0, 1)), identity in evaluation",
        |a| Ok(Arc::new(Dropout::new(a.num("p", 0.5)?)?)),
    ));
    ok(r.register(
        "l2norm",
        &[],
        "l2norm(x): each row divided by its L2 norm",
        |_| Ok(Arc::new(L2Norm)),
    ));
    ok(r.register(
        "concat",
        &[],
        "concat(a, b, ...): columns side by side, equal row counts",
        |_| Ok(Arc::new(Concat)),
    ));
    ok(r.register(
        "slice",
        &["start", "len"],
        "slice(x, start=s, len=l): columns s..s+l",
        |a| {
            required(a, "slice", "start")?;
            required(a, "slice", "len")?;
            Ok(Arc::new(Slice {
                start: a.count("start", 0, 0)?,
                len: a.count("len", 0, 0)?,
            }))
        },
    ));
    ok(
        r.register("sub", &[], "sub(a, b): a − b, equal shapes", |_| {
            Ok(Arc::new(Sub))
        }),
    );
    ok(r.register(
        "mul",
        &[],
        "mul(a, b): a ⊙ b elementwise, equal shapes",
        |_| Ok(Arc::new(Mul)),
    ));
    ok(r.register("scale", &["c"], "scale(x, c=1.0): c·x", |a| {
        Ok(Arc::new(Scale::new(a.num("c", 1.0)?)?))
    }));
    ok(r.register(
        "gat",
        &["heads", "slope"],
        "gat(adj, z, a_l, a_r, heads=1, slope=0.2): GAT attention α on adj's pattern, H values per entry (multiply by z next)",
        |a| Ok(Arc::new(Gat::new(a.count("heads", 1, 1)?, a.num("slope", 0.2)?)?)),
    ));
    ok(r.register(
        "mean_heads",
        &["heads"],
        "mean_heads(x, heads=H): the average of x's H equal column blocks",
        |a| {
            required(a, "mean_heads", "heads")?;
            Ok(Arc::new(MeanHeads {
                heads: a.count("heads", 1, 1)?,
            }))
        },
    ));
}

/// Input `i` as a dense matrix (the arity check guarantees the kind; this is a guard).
pub(crate) fn dense<'v>(inputs: &[&'v Value], i: usize, op: &str) -> Result<&'v Tensor, OpError> {
    inputs[i]
        .as_dense()
        .ok_or_else(|| OpError::args(format!("{op}: argument {} is not a dense matrix", i + 1)))
}

/// The fact of two arguments that must have one shape (elementwise binary ops, backward
/// ops taking a saved value and a gradient).
pub(crate) fn same_shape(
    op: &str,
    a_name: &str,
    a: &Fact,
    b_name: &str,
    b: &Fact,
) -> Result<Fact, OpError> {
    if a != b {
        return Err(OpError::args(format!(
            "{op}: {b_name}, expected {a} like {a_name}, got {b}"
        )));
    }
    Ok(a.clone())
}

/// The streaming estimate plus `per_element` flops per output element (the default counts
/// no arithmetic, which undercounts transcendental activations).
pub(crate) fn elementwise_cost(
    inputs: &[&Fact],
    output: &Fact,
    b: &Bindings,
    per_element: f64,
) -> Cost {
    Cost {
        flops: per_element * output.bytes(b) as f64 / 4.0,
        ..Cost::streaming(inputs, output, b)
    }
}

/// Elements below which a row-wise op is one task: splitting costs more than it saves.
const SPLIT_MIN_ELEMENTS: usize = 1 << 16;

/// Row blocks, about two per worker, for a row-wise op on `rows × cols` (None: small,
/// or one worker). Row-wise ops compute each row alone: any split gives the same bits.
pub(crate) fn row_split(rows: usize, cols: usize, threads: usize) -> Option<crate::op::Split> {
    (threads >= 2 && rows >= 2 && rows * cols >= SPLIT_MIN_ELEMENTS)
        .then(|| crate::op::Split::even(crate::op::Axis::Rows, rows, 2 * threads).writing_all())
}

/// [`row_split`] for a row-wise op whose dense operands all have input 0's shape (an
/// activation and its backward, l2norm and its backward); None on a length mismatch,
/// which `forward` reports.
pub(crate) fn row_split_of(
    inputs: &[&Value],
    op: &str,
    threads: usize,
) -> Result<Option<crate::op::Split>, OpError> {
    let x = dense(inputs, 0, op)?;
    for k in 1..inputs.len() {
        if dense(inputs, k, op)?.data.len() != x.data.len() {
            return Ok(None);
        }
    }
    Ok(row_split(x.rows, x.cols, threads))
}

/// Rows `split.ranges[part]` of a row-wise op, one kernel call per row (a row is
/// `cols` contiguous floats of every operand).
pub(crate) fn rows_part(
    split: &crate::op::Split,
    part: usize,
    cols: usize,
    mut out: crate::op::MatMut<'_>,
    mut f: impl FnMut(std::ops::Range<usize>, &mut [f32]) -> Result<(), OpError>,
) -> Result<(), OpError> {
    let rows = split.ranges[part].clone();
    for (k, i) in rows.enumerate() {
        f(i * cols..(i + 1) * cols, out.row_mut(k))?;
    }
    Ok(())
}
