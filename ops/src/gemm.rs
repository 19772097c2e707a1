//! Dense f32 GEMM on row-major slices, through the `gemm` crate (pure Rust, runtime
//! dispatch up to AVX-512, parallel on the current rayon pool). The three products forward
//! and backward need:
//!
//! * `gemm_nn`: C (m×n) = A (m×k) · B (k×n)        — forward X·W
//! * `gemm_nt`: C (m×n) = A (m×k) · Bᵀ, B is n×k    — ∇X = ∇Y·Wᵀ
//! * `gemm_tn`: C (m×n) = Aᵀ · B, A is k×m, B k×n   — ∇W = Xᵀ·∇Y
//!
//! With `accumulate`, C += product (gradient accumulation); otherwise C = product.
//! Library choice: see BENCHMARKS.md ("GEMM").

use gemm::Parallelism;

use crate::{check_len, KernelError};

/// Below this many multiply-adds a product runs on the calling thread: forking costs more.
const PARALLEL_MIN_MACS: usize = 1 << 18;

/// How an operand is laid out relative to the product it enters.
#[derive(Clone, Copy)]
enum Layout {
    /// Row-major as used.
    Plain,
    /// Row-major storage of the transpose.
    Transposed,
}

#[allow(clippy::too_many_arguments)]
fn product(
    kernel: &'static str,
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    la: Layout,
    b: &[f32],
    lb: Layout,
    c: &mut [f32],
    accumulate: bool,
) -> Result<(), KernelError> {
    check_len(kernel, "A", m * k, a.len())?;
    check_len(kernel, "B", k * n, b.len())?;
    check_len(kernel, "C", m * n, c.len())?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        if !accumulate {
            c.fill(0.0);
        }
        return Ok(());
    }
    // (row stride, column stride) of each operand as the product sees it.
    let (a_rs, a_cs) = match la {
        Layout::Plain => (k as isize, 1),
        Layout::Transposed => (1, m as isize),
    };
    let (b_rs, b_cs) = match lb {
        Layout::Plain => (n as isize, 1),
        Layout::Transposed => (1, k as isize),
    };
    let par = if m * n * k >= PARALLEL_MIN_MACS && rayon::current_num_threads() > 1 {
        Parallelism::Rayon(rayon::current_num_threads())
    } else {
        Parallelism::None
    };
    // SAFETY: the lengths were checked against the shapes above, so every index the strides
    // reach is in bounds; `c` is a unique borrow, distinct from `a` and `b`. dst =
    // alpha·dst + beta·lhs·rhs with alpha = 1 (read only when accumulating), beta = 1.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            a.as_ptr(),
            a_cs,
            a_rs,
            b.as_ptr(),
            b_cs,
            b_rs,
            1.0f32,
            1.0f32,
            false,
            false,
            false,
            par,
        );
    }
    Ok(())
}

/// C (m×n) = A (m×k) · B (k×n), or C += it.
pub fn gemm_nn(
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    accumulate: bool,
) -> Result<(), KernelError> {
    product(
        "gemm_nn",
        m,
        k,
        n,
        a,
        Layout::Plain,
        b,
        Layout::Plain,
        c,
        accumulate,
    )
}

/// C (m×n) = A (m×k) · Bᵀ where B is stored n×k, or C += it.
pub fn gemm_nt(
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    accumulate: bool,
) -> Result<(), KernelError> {
    product(
        "gemm_nt",
        m,
        k,
        n,
        a,
        Layout::Plain,
        b,
        Layout::Transposed,
        c,
        accumulate,
    )
}

/// C (m×n) = Aᵀ · B where A is stored k×m and B is k×n, or C += it.
pub fn gemm_tn(
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    accumulate: bool,
) -> Result<(), KernelError> {
    product(
        "gemm_tn",
        m,
        k,
        n,
        a,
        Layout::Transposed,
        b,
        Layout::Plain,
        c,
        accumulate,
    )
}
