//! Row gather and scatter-add: out[i] = src[ids[i]] (features of sampled nodes), and its
//! backward dst[ids[i]] += grad[i] (repeated ids accumulate). Row-major, `f` columns.

use num_traits::Float;
use rayon::prelude::*;

use crate::{check_len, KernelError};

fn check_ids(kernel: &'static str, ids: &[u32], n_rows: usize) -> Result<(), KernelError> {
    match ids.iter().position(|&v| v as usize >= n_rows) {
        Some(i) => Err(KernelError::Sparse {
            kernel,
            what: format!("ids[{i}] = {} out of range, expected < {n_rows}", ids[i]),
        }),
        None => Ok(()),
    }
}

/// out (|ids| × f) = the rows `ids` of `src` (n × f), in parallel over output rows.
pub fn gather_rows<T: Float + Send + Sync>(
    src: &[T],
    f: usize,
    ids: &[u32],
    out: &mut [T],
) -> Result<(), KernelError> {
    check_len("gather_rows", "out", ids.len() * f, out.len())?;
    if f == 0 {
        return Ok(());
    }
    check_len(
        "gather_rows",
        "src (a multiple of f)",
        src.len() / f * f,
        src.len(),
    )?;
    check_ids("gather_rows", ids, src.len() / f)?;
    out.par_chunks_mut(f)
        .zip(ids.par_iter())
        .for_each(|(row, &v)| {
            row.copy_from_slice(&src[v as usize * f..(v as usize + 1) * f]);
        });
    Ok(())
}

/// dst[ids[i]] += grad[i] for each row i of `grad` (|ids| × f): the backward of
/// [`gather_rows`]. Sequential in `ids` order, so repeated ids sum deterministically.
pub fn scatter_add_rows<T: Float>(
    grad: &[T],
    f: usize,
    ids: &[u32],
    dst: &mut [T],
) -> Result<(), KernelError> {
    check_len("scatter_add_rows", "grad", ids.len() * f, grad.len())?;
    if f == 0 {
        return Ok(());
    }
    check_len(
        "scatter_add_rows",
        "dst (a multiple of f)",
        dst.len() / f * f,
        dst.len(),
    )?;
    check_ids("scatter_add_rows", ids, dst.len() / f)?;
    for (i, &v) in ids.iter().enumerate() {
        let d = &mut dst[v as usize * f..(v as usize + 1) * f];
        for (x, &g) in d.iter_mut().zip(&grad[i * f..(i + 1) * f]) {
            *x = *x + g;
        }
    }
    Ok(())
}
