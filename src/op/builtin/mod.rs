//! The built-in ops, one family per file, and their registration under the names plan
//! files use.

mod activation;
mod arith;
mod loss;
mod matmul;
mod source;

use std::sync::Arc;

pub use activation::{Relu, ReluBackward};
pub use arith::{Add, AddN, BroadcastRows, SumRows};
pub use loss::{Loss, LossBackward, LossKind};
pub use matmul::{product, product_flops, transpose, Factor, Gemm, MatMul, Sddmm, Spmm, Transpose};
pub use source::{AdjKind, Adjacency, Features, One, Param, Sample, TargetsOp};

use crate::ir::{Tensor, Value};

use super::{OpError, Registry};

/// Registers every built-in op callable from a plan file. (Source ops, parameters and
/// products are created by lowering, not called by name.)
pub fn register(r: &mut Registry) {
    let ok = |res: Result<(), OpError>| res.expect("built-in names are distinct");
    ok(r.register("relu", &[], "relu(x): max(x, 0)", |_| Ok(Arc::new(Relu))));
}

/// Input `i` as a dense matrix (the arity check guarantees the kind; this is a guard).
pub(crate) fn dense<'v>(inputs: &[&'v Value], i: usize, op: &str) -> Result<&'v Tensor, OpError> {
    inputs[i]
        .as_dense()
        .ok_or_else(|| OpError::args(format!("{op}: argument {} is not a dense matrix", i + 1)))
}
