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

/// [`row_split`] for a row-wise op whose dense operands all have input 0's shape (an
/// activation and its backward, l2norm and its backward); None on a length mismatch,
/// which `forward` reports.
pub fn row_split_of(inputs: &[&Value], op: &str, threads: usize) -> Result<Option<Split>, OpError> {
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
pub fn rows_part(
    split: &Split,
    part: usize,
    cols: usize,
    mut out: MatMut<'_>,
    mut f: impl FnMut(std::ops::Range<usize>, &mut [f32]) -> Result<(), OpError>,
) -> Result<(), OpError> {
    let rows = split.ranges[part].clone();
    for (k, i) in rows.enumerate() {
        f(i * cols..(i + 1) * cols, out.row_mut(k))?;
    }
    Ok(())
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
