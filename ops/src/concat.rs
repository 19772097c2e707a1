//! Column concatenation by copying, and its backward: the fallback for inputs that were not
//! produced in place. The in-place way costs nothing: split the output with
//! [`MatMut::split_cols_mut`] and let each producing kernel (`gemm_view`, `spmm_view`)
//! write its block; the backward then feeds the gradient's column blocks
//! ([`MatRef::cols`]) to the consumers, no split needed.
//!
//! Cost: one read and one write of every element (8 bytes each in f32), in parallel row
//! blocks of about 64 KiB on the caller's rayon pool.

use rayon::prelude::*;

use crate::view::{MatMut, MatRef};
use crate::{check_len, KernelError};

/// Floats per parallel task: 64 KiB of output, enough to amortise a task.
const TASK_F32: usize = 1 << 14;

fn rows_per_task(cols: usize) -> usize {
    (TASK_F32 / cols.max(1)).max(1)
}

/// out (n × Σw_i) = [inputs\[0\] | inputs\[1\] | …], inputs\[i\] n × w_i. Any of them may be
/// strided; only out's own elements are written.
pub fn concat_cols(inputs: &[MatRef<'_>], out: MatMut<'_>) -> Result<(), KernelError> {
    let n = out.n_rows();
    let mut width = 0;
    for x in inputs {
        check_len(
            "concat_cols",
            "rows of an input (rows of out)",
            n,
            x.n_rows(),
        )?;
        width += x.n_cols();
    }
    check_len(
        "concat_cols",
        "columns of out (sum of the inputs' columns)",
        width,
        out.n_cols(),
    )?;
    let step = rows_per_task(width);
    let out = &out;
    (0..n.div_ceil(step)).into_par_iter().for_each(|t| {
        let (r0, r1) = (t * step, ((t + 1) * step).min(n));
        // SAFETY: r0 ≤ r1 ≤ n and every task takes its own row block.
        let mut block = unsafe { out.row_block_unchecked(r0, r1) };
        for i in r0..r1 {
            let dst = block.row_mut(i - r0);
            let mut c = 0;
            for x in inputs {
                let src = x.row(i);
                dst[c..c + src.len()].copy_from_slice(src);
                c += src.len();
            }
        }
    });
    Ok(())
}

/// Backward of [`concat_cols`]: with y = [x_0 | x_1 | …], ∂L/∂x_i = the columns
/// c_i..c_i + w_i of ∂L/∂y (c_i = Σ_{j<i} w_j): copies `input`'s column blocks into
/// `outputs` in order. (In place, take `input.cols(c_i..c_i + w_i)` instead.)
pub fn split_cols(input: MatRef<'_>, outputs: &mut [MatMut<'_>]) -> Result<(), KernelError> {
    let n = input.n_rows();
    let mut width = 0;
    for y in outputs.iter() {
        check_len(
            "split_cols",
            "rows of an output (rows of input)",
            n,
            y.n_rows(),
        )?;
        width += y.n_cols();
    }
    check_len(
        "split_cols",
        "columns of input (sum of the outputs' columns)",
        width,
        input.n_cols(),
    )?;
    let step = rows_per_task(width);
    let outputs = &*outputs;
    (0..n.div_ceil(step)).into_par_iter().for_each(|t| {
        let (r0, r1) = (t * step, ((t + 1) * step).min(n));
        for i in r0..r1 {
            let src = input.row(i);
            let mut c = 0;
            for y in outputs {
                // SAFETY: i < n = rows of y, and row i of each output is touched by this
                // task alone.
                let mut row = unsafe { y.row_block_unchecked(i, i + 1) };
                let dst = row.row_mut(0);
                dst.copy_from_slice(&src[c..c + dst.len()]);
                c += dst.len();
            }
        }
    });
    Ok(())
}
