//! Helpers for writing ops: argument access, shape checks, costs, row splits. The built-in
//! ops use them and so may a user's; the adapters ([`super::Elementwise`],
//! [`super::RowWise`], [`super::NeighbourReduce`]) use them for you.

use crate::ir::{Bindings, Fact, Tensor, Value};

use super::{Axis, Cost, MatMut, MatRef, OpError, Split};

/// Input `i` as a dense matrix (the arity check guarantees the kind; this is a guard).
pub fn dense<'v>(inputs: &[&'v Value], i: usize, op: &str) -> Result<&'v Tensor, OpError> {
    inputs[i]
        .as_dense()
        .ok_or_else(|| OpError::args(format!("{op}: argument {} is not a dense matrix", i + 1)))
}

/// The fact of two arguments that must have one shape (elementwise binary ops, backward
/// ops taking a saved value and a gradient).
pub fn same_shape(
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
pub fn elementwise_cost(inputs: &[&Fact], output: &Fact, b: &Bindings, per_element: f64) -> Cost {
    Cost {
        flops: per_element * output.bytes(b) as f64 / 4.0,
        ..Cost::streaming(inputs, output, b)
    }
}

/// Elements below which a row-wise op is one task: splitting costs more than it saves.
const SPLIT_MIN_ELEMENTS: usize = 1 << 16;

/// Row blocks, about two per worker, for a row-wise op on `rows × cols` (None: small,
/// or one worker). Row-wise ops compute each row alone: any split gives the same bits.
pub fn row_split(rows: usize, cols: usize, threads: usize) -> Option<Split> {
    (threads >= 2 && rows >= 2 && rows * cols >= SPLIT_MIN_ELEMENTS)
        .then(|| Split::even(Axis::Rows, rows, 2 * threads).writing_all())
}

/// Rows `r` of every input as contiguous views (a row-wise op's per-node inputs, which
/// have at least `r.end` rows; a shorter one is an error naming `op` and the argument).
pub fn row_blocks<'v>(
    inputs: &[&'v Value],
    r: std::ops::Range<usize>,
    op: &str,
) -> Result<Vec<MatRef<'v>>, OpError> {
    (0..inputs.len())
        .map(|k| row_block(inputs, k, r.clone(), op))
        .collect()
}

/// Rows `r` of input `k` as a contiguous view ([`row_blocks`] for one input).
pub fn row_block<'v>(
    inputs: &[&'v Value],
    k: usize,
    r: std::ops::Range<usize>,
    op: &str,
) -> Result<MatRef<'v>, OpError> {
    let x = dense(inputs, k, op)?;
    let c = x.cols;
    let data = x.data.get(r.start * c..r.end * c).ok_or_else(|| {
        OpError::args(format!(
            "{op}: argument {} has {} rows, expected at least {}",
            k + 1,
            x.rows,
            r.end
        ))
    })?;
    Ok(MatRef::row_major(data, r.end - r.start, c)?)
}

/// A block view as one slice (the row-wise adapter's and the fusion pass's blocks are
/// contiguous); an error naming `op` otherwise.
pub fn block<'a>(m: &MatRef<'a>, op: &str) -> Result<&'a [f32], OpError> {
    m.as_slice()
        .ok_or_else(|| OpError::args(format!("{op}: a non-contiguous block")))
}

/// [`block`] for the output view.
pub fn block_mut<'a>(m: &'a mut MatMut<'_>, op: &str) -> Result<&'a mut [f32], OpError> {
    m.as_mut_slice()
        .ok_or_else(|| OpError::args(format!("{op}: a non-contiguous block")))
}
