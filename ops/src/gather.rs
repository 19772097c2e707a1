//! Row gather and scatter-add: out\[i\] = src[ids\[i\]] (features of sampled nodes), and its
//! backward dst[ids\[i\]] += grad\[i\] (repeated ids accumulate). Row-major, `f` columns.

use crate::real::Real;
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
pub fn gather_rows<T: Real>(
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

/// dst[ids\[i\]] += grad\[i\] for each row i of `grad` (|ids| × f): the backward of
/// [`gather_rows`]. Repeated ids sum in `ids` order, whatever the thread count.
///
/// Parallel by destination: the rows of `dst` are cut into up to 4 contiguous ranges per
/// thread (one range on one thread), one task each; every task scans all of `ids` and adds the gradient rows whose
/// destination lies in its range, in `ids` order. So each destination row receives exactly
/// the serial sequence of additions (bit-identical to the serial loop), no two tasks touch
/// one row, and the price is one extra read of `ids` (4 bytes per id) per task, small
/// beside the 4·f bytes of gradient each id moves.
pub fn scatter_add_rows<T: Real>(
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
    let n_dst = dst.len() / f;
    check_ids("scatter_add_rows", ids, n_dst)?;
    if n_dst == 0 {
        return Ok(());
    }
    // One part on one thread: there an extra part only rescans `ids` (a compare per id).
    let threads = rayon::current_num_threads();
    let parts = if threads == 1 { 1 } else { 4 * threads }.min(n_dst);
    let rows_per_part = n_dst.div_ceil(parts);
    dst.par_chunks_mut(rows_per_part * f)
        .enumerate()
        .for_each(|(t, block)| {
            let r0 = t * rows_per_part;
            let r1 = r0 + block.len() / f;
            for (g, &v) in grad.chunks_exact(f).zip(ids) {
                let v = v as usize;
                if (r0..r1).contains(&v) {
                    let d = &mut block[(v - r0) * f..(v - r0 + 1) * f];
                    for (x, &g) in d.iter_mut().zip(g) {
                        *x = *x + g;
                    }
                }
            }
        });
    Ok(())
}
