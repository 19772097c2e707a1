//! `saintflow-ops`: the numeric kernels of saintflow (SpMM, GEMM, elementwise, losses,
//! attention, optimisers) on plain slices. It knows nothing of the engine.
//!
//! Skeleton only: the kernels arrive with the kernel-crate issue. The crate exists now so
//! the workspace layout, CI and dependency direction are fixed from the first commit.
#![warn(missing_docs)]

/// Bytes in one cache line on the x86-64 and aarch64 machines we target; kernels and the
/// samplers' node clipping align to it.
pub const CACHE_LINE_BYTES: usize = 64;
