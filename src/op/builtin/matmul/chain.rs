//! The chain cost model the planner's chain pass orders products by: each operand of a
//! chain as a [`Factor`] (dense or sparse, its shape in bindings), the FLOPs of a binary
//! product ([`product_flops`]).

use super::*;

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

pub(super) fn shape_error(i: usize, a: &Factor, b: &Factor) -> OpError {
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
