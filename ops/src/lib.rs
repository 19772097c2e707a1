//! `saintflow-ops`: the numeric kernels of saintflow on row-major slices and strided views
//! ([`MatRef`], [`MatMut`]: a column block of a wider matrix, no copy). It knows nothing of
//! the engine: views in, results out, so every kernel can be tested against its naive
//! oracle and benchmarked alone.
//!
//! Threads: kernels run on the *current* rayon pool (the engine's), never on threads of
//! their own; call them inside `pool.install(..)` to choose the pool.
//!
//! Today: GEMM (any transpose combination on strided views; packed panels and AVX-512 /
//! AVX2 micro-kernels of our own, at OpenBLAS's rate: BENCHMARKS.md), CSR SpMM (feature-partitioned, JPDC Algorithm 7, strided
//! X and output), column concatenation and its split, elementwise ops, losses, optimisers
//! and GAT attention (edge scores, edge softmax), and the skip-gram negative-sampling step of
//! node embedding ([`sgns`]). The elementwise-style kernels are generic
//! over [`Real`] (f32 for the engine, f64 for the tests' reference path).
//!
//! Instruction sets: every kernel with vector variants runs the widest the CPU has, or
//! the one `SAINTFLOW_ISA` forces ([`isa::Isa`]).
#![warn(missing_docs)]

pub mod aligned;
pub mod attention;
pub mod cache;
pub mod concat;
pub mod elementwise;
pub mod gather;
pub mod gemm;
pub mod isa;
pub mod loss;
pub mod naive;
pub mod optim;
pub mod real;
pub mod sgns;
mod simd;
pub mod spmm;
pub mod view;

pub use aligned::AlignedVec;
pub use real::Real;
pub use view::{MatMut, MatRef};

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
    /// A strided view that does not fit its slice, or a sub-view outside its view.
    #[error("{kernel}: {what}")]
    View {
        /// The constructor or kernel.
        kernel: &'static str,
        /// What is wrong, with the shapes.
        what: String,
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
