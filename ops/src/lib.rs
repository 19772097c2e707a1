//! `saintflow-ops`: the numeric kernels of saintflow on plain row-major slices. It knows
//! nothing of the engine: slices in, results out, so every kernel can be tested against its
//! naive oracle and benchmarked alone.
//!
//! Threads: kernels run on the *current* rayon pool (the engine's), never on threads of
//! their own; call them inside `pool.install(..)` to choose the pool.
//!
//! Today: GEMM (NN, NT, TN through the `gemm` crate, chosen by measurement: BENCHMARKS.md),
//! CSR SpMM (feature-partitioned, JPDC Algorithm 7), elementwise ops, losses and optimisers.
//! and GAT attention (edge scores, edge softmax).
#![warn(missing_docs)]

pub mod attention;
pub mod cache;
pub mod elementwise;
pub mod gather;
pub mod gemm;
pub mod loss;
pub mod naive;
pub mod optim;
pub mod spmm;

/// Bytes in one cache line on the x86-64 and aarch64 machines we target; kernels and the
/// samplers' node clipping align to it.
pub const CACHE_LINE_BYTES: usize = 64;

/// f32 values per cache line.
pub const CACHE_LINE_F32: usize = CACHE_LINE_BYTES / 4;

/// Errors of the kernels: a shape that does not match its buffers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// A buffer's length disagrees with the shape the call states.
    #[error("{kernel}: {what}, expected {expected}, got {got}")]
    Shape {
        /// The kernel (`gemm_nn`, `spmm`, ...).
        kernel: &'static str,
        /// Which operand.
        what: &'static str,
        /// The length the shapes imply.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// A sparse operand is malformed (offsets not monotone, index out of range).
    #[error("{kernel}: {what}")]
    Sparse {
        /// The kernel.
        kernel: &'static str,
        /// What is wrong.
        what: String,
    },
}

pub(crate) fn check_len(
    kernel: &'static str,
    what: &'static str,
    expected: usize,
    got: usize,
) -> Result<(), KernelError> {
    if expected == got {
        Ok(())
    } else {
        Err(KernelError::Shape {
            kernel,
            what,
            expected,
            got,
        })
    }
}
