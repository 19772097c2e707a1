//! The precision pass (issue 33, item 4): every op with a choice of arithmetic
//! ([`Op::as_precision`](crate::op::Op::as_precision)) — the dense products (`gemm`: X·W and, after
//! differentiation, ∇X = ∇Y·Wᵀ and ∇W = Xᵀ·∇Y) takes the plan's arithmetic,
//! [`PlanOptions::precision`]. For bf16 that is mixed precision as PyTorch's autocast does
//! it on a CPU: the product's operands are rounded to bfloat16 as the GEMM packs them and
//! accumulated in f32 (`saintflow_ops::gemm::bf16`); parameters, Adam's moments, every
//! activation and the sparse products stay f32, so nothing else in the step changes. A
//! product whose shape the GEMM runs on another tile (a classifier of a few classes) stays
//! f32 there (`saintflow_ops::gemm::Precision::Bf16`). `explain` shows the products as
//! `gemm[NN bf16]`.

use crate::ir::{Graph, IrError};

use super::{Pass, PlanOptions};

/// The precision pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct PrecisionPass;

impl Pass for PrecisionPass {
    fn name(&self) -> &str {
        "precision"
    }

    /// Errors: a precision this CPU cannot run (bf16 without AVX512_BF16).
    fn run(&self, graph: &mut Graph, opts: &PlanOptions) -> Result<Vec<(String, usize)>, IrError> {
        opts.precision.check().map_err(IrError::Unsupported)?;
        let mut changed = 0;
        for id in graph.ids() {
            if let Some(op) = graph.node(id).op.with_precision(opts.precision) {
                graph.replace_op(id, op)?;
                changed += 1;
            }
        }
        Ok(vec![(format!("gemm → {}", opts.precision.name()), changed)])
    }
}
