//! Dense f32 GEMM through the `gemm` crate (pure Rust, runtime dispatch up to AVX-512,
//! parallel on the current rayon pool). One code path, [`gemm_view`]:
//! C (m×n) = op(A) · op(B), op = as stored or transposed, on strided views, so C can be a
//! column block of a wider matrix (a block of a concatenation written in place) and A or B
//! a column block of one (the backward of a concatenation reads its gradient's blocks).
//! The `gemm` crate takes a row and a column stride per operand; a transposed operand is
//! the same storage with the two strides swapped, so no transpose is ever materialised.
//!
//! The three products forward and backward need, on contiguous row-major slices, are thin
//! wrappers over it:
//!
//! * `gemm_nn`: C (m×n) = A (m×k) · B (k×n)        — forward X·W
//! * `gemm_nt`: C (m×n) = A (m×k) · Bᵀ, B is n×k    — ∇X = ∇Y·Wᵀ
//! * `gemm_tn`: C (m×n) = Aᵀ · B, A is k×m, B k×n   — ∇W = Xᵀ·∇Y
//!
//! With `accumulate`, C += product (gradient accumulation); otherwise C = product.
//! Library choice: see BENCHMARKS.md ("GEMM").

use gemm::Parallelism;

use crate::view::{MatMut, MatRef};
use crate::{check_len, KernelError};

/// Below this many multiply-adds a product runs on the calling thread: forking costs more.
const PARALLEL_MIN_MACS: usize = 1 << 18;

/// How an operand enters a product: as stored, or transposed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trans {
    /// op(X) = X.
    N,
    /// op(X) = Xᵀ.
    T,
}

/// Shape and (row, column) strides of op(X) for a stored view X.
fn operand(x: MatRef<'_>, t: Trans) -> (usize, usize, isize, isize) {
    let rs = x.row_stride() as isize;
    match t {
        Trans::N => (x.n_rows(), x.n_cols(), rs, 1),
        Trans::T => (x.n_cols(), x.n_rows(), 1, rs),
    }
}

/// C = op(A)·op(B), or C += it with `accumulate`. op(A) is m×k, op(B) k×n and C m×n;
/// any of the three may be strided (a column or row block of a wider matrix). Only C's
/// own elements are written.
pub fn gemm_view(
    a: MatRef<'_>,
    ta: Trans,
    b: MatRef<'_>,
    tb: Trans,
    c: MatMut<'_>,
    accumulate: bool,
) -> Result<(), KernelError> {
    product("gemm_view", a, ta, b, tb, c, accumulate)
}

fn product(
    kernel: &'static str,
    a: MatRef<'_>,
    ta: Trans,
    b: MatRef<'_>,
    tb: Trans,
    mut c: MatMut<'_>,
    accumulate: bool,
) -> Result<(), KernelError> {
    let (m, k, a_rs, a_cs) = operand(a, ta);
    let (kb, n, b_rs, b_cs) = operand(b, tb);
    check_len(kernel, "rows of op(B) (columns of op(A))", k, kb)?;
    check_len(kernel, "rows of C (rows of op(A))", m, c.n_rows())?;
    check_len(kernel, "columns of C (columns of op(B))", n, c.n_cols())?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        if !accumulate {
            c.fill(0.0);
        }
        return Ok(());
    }
    let par = if m * n * k >= PARALLEL_MIN_MACS && rayon::current_num_threads() > 1 {
        Parallelism::Rayon(rayon::current_num_threads())
    } else {
        Parallelism::None
    };
    let c_rs = c.row_stride() as isize;
    // The crate is handed the transposed problem, Cᵀ (n×m) = op(B)ᵀ·op(A)ᵀ, with Cᵀ
    // column-major: the same storage, strides swapped. Same arithmetic; measured faster on
    // 2 threads than handing it C = op(A)·op(B) with C row-major (its thread split follows
    // the orientation; BENCHMARKS.md, "Kernels, third slice").
    // SAFETY: the views' constructors checked that every element (i, j) at
    // i·row_stride + j, i < rows, j < cols, lies in their slices, and the shapes agree
    // (checked above), so the strides reach only in-bounds elements of each operand's own
    // view. C is a unique borrow (MatMut): no element of C is an element of A or B.
    // dst = alpha·dst + beta·lhs·rhs with alpha = 1 (read only when accumulating), beta = 1.
    // gemm's arguments per operand: pointer, column stride, row stride.
    unsafe {
        gemm::gemm(
            n,
            m,
            k,
            c.as_mut_ptr(),
            c_rs,
            1,
            accumulate,
            b.as_ptr(),
            b_rs,
            b_cs,
            a.as_ptr(),
            a_rs,
            a_cs,
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

/// Checks the slice lengths of a contiguous product (so the errors name the slice) and
/// runs it through [`gemm_view`]'s path.
#[allow(clippy::too_many_arguments)]
fn contiguous(
    kernel: &'static str,
    (m, k, n): (usize, usize, usize),
    a: &[f32],
    ta: Trans,
    b: &[f32],
    tb: Trans,
    c: &mut [f32],
    accumulate: bool,
) -> Result<(), KernelError> {
    check_len(kernel, "A", m * k, a.len())?;
    check_len(kernel, "B", k * n, b.len())?;
    check_len(kernel, "C", m * n, c.len())?;
    // Stored shapes: a transposed operand is stored as its transpose's shape.
    let a = match ta {
        Trans::N => MatRef::row_major(a, m, k)?,
        Trans::T => MatRef::row_major(a, k, m)?,
    };
    let b = match tb {
        Trans::N => MatRef::row_major(b, k, n)?,
        Trans::T => MatRef::row_major(b, n, k)?,
    };
    let c = MatMut::row_major(c, m, n)?;
    product(kernel, a, ta, b, tb, c, accumulate)
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
    contiguous(
        "gemm_nn",
        (m, k, n),
        a,
        Trans::N,
        b,
        Trans::N,
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
    contiguous(
        "gemm_nt",
        (m, k, n),
        a,
        Trans::N,
        b,
        Trans::T,
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
    contiguous(
        "gemm_tn",
        (m, k, n),
        a,
        Trans::T,
        b,
        Trans::N,
        c,
        accumulate,
    )
}
