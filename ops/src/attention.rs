//! GAT attention on a CSR graph (JPDC Eqs. 6–7), multi-head, with backward.
//!
//! Row u aggregates its neighbours v. With per-node, per-head projections
//! s_l\[u\] = a_lᵀ z_u and s_r\[v\] = a_rᵀ z_v (two GEMVs the caller does with `gemm`):
//!
//! * scores (SDDMM-like, one value per entry and head): ê_uv = s_l\[u\] + s_r\[v\],
//!   e_uv = LeakyReLU(ê_uv);
//! * edge softmax over each row: α_uv = exp(e_uv − max_u) / Σ_w exp(e_uw − max_u);
//! * the aggregation Σ_v α_uv z_v is then `spmm` with α as the edge values.
//!
//! Layout: per-entry values are entry-major, `e[k·heads + h]`; per-node ones node-major,
//! `s[u·heads + h]`. Forward saves ê (for LeakyReLU's slope) and α.

use crate::real::Real;

use crate::simd::wide;
use crate::spmm::{validate_offsets, CsrRef};
use crate::{check_len, KernelError};

/// Validates the graph (through [`CsrRef::validate`]) and returns its row count.
fn check_graph(
    kernel: &'static str,
    offsets: &[u32],
    indices: &[u32],
    n_cols: usize,
) -> Result<usize, KernelError> {
    CsrRef {
        offsets,
        indices,
        values: None,
        n_cols,
    }
    .validate(kernel)?;
    Ok(offsets.len() - 1)
}

/// ê = s_l\[u\] + s_r\[v\] per entry and head, e = LeakyReLU_slope(ê).
#[allow(clippy::too_many_arguments)]
pub fn gat_scores<T: Real>(
    offsets: &[u32],
    indices: &[u32],
    heads: usize,
    s_l: &[T],
    s_r: &[T],
    slope: T,
    e_raw: &mut [T],
    e: &mut [T],
) -> Result<(), KernelError> {
    let n_cols = s_r.len() / heads.max(1);
    let n = check_graph("gat_scores", offsets, indices, n_cols)?;
    check_len("gat_scores", "s_l", n * heads, s_l.len())?;
    check_len("gat_scores", "e_raw", indices.len() * heads, e_raw.len())?;
    check_len("gat_scores", "e", indices.len() * heads, e.len())?;
    for u in 0..n {
        let (lo, hi) = (offsets[u] as usize, offsets[u + 1] as usize);
        for (k, &v) in (lo..hi).zip(&indices[lo..hi]) {
            let v = v as usize;
            for h in 0..heads {
                let x = s_l[u * heads + h] + s_r[v * heads + h];
                e_raw[k * heads + h] = x;
                e[k * heads + h] = if x > T::zero() { x } else { slope * x };
            }
        }
    }
    Ok(())
}

/// Backward of [`gat_scores`]: from ∂L/∂e, dê = de · (1 if ê > 0 else slope);
/// ds_l\[u\] = Σ_{v ∈ row u} dê_uv, ds_r\[v\] = Σ over entries (u, v) of dê_uv (scatter-add).
#[allow(clippy::too_many_arguments)]
pub fn gat_scores_backward<T: Real>(
    offsets: &[u32],
    indices: &[u32],
    heads: usize,
    slope: T,
    e_raw: &[T],
    de: &[T],
    ds_l: &mut [T],
    ds_r: &mut [T],
) -> Result<(), KernelError> {
    let n_cols = ds_r.len() / heads.max(1);
    let n = check_graph("gat_scores_backward", offsets, indices, n_cols)?;
    check_len("gat_scores_backward", "ds_l", n * heads, ds_l.len())?;
    check_len(
        "gat_scores_backward",
        "e_raw",
        indices.len() * heads,
        e_raw.len(),
    )?;
    check_len("gat_scores_backward", "de", indices.len() * heads, de.len())?;
    ds_l.iter_mut()
        .chain(ds_r.iter_mut())
        .for_each(|x| *x = T::zero());
    for u in 0..n {
        let (lo, hi) = (offsets[u] as usize, offsets[u + 1] as usize);
        for (k, &v) in (lo..hi).zip(&indices[lo..hi]) {
            let v = v as usize;
            for h in 0..heads {
                let i = k * heads + h;
                let d = if e_raw[i] > T::zero() {
                    de[i]
                } else {
                    slope * de[i]
                };
                ds_l[u * heads + h] = ds_l[u * heads + h] + d;
                ds_r[v * heads + h] = ds_r[v * heads + h] + d;
            }
        }
    }
    Ok(())
}

/// Per-entry values (heads per entry) at most this many per serial task: 64 KiB of f32.
const TASK_VALUES: usize = 1 << 14;

/// Runs `f(offsets, in, out)` on blocks of whole rows in parallel (rayon::join, halving by
/// entries), each block given its rows' offsets (still absolute) and its slices of the
/// entry-major `input` and `out` (heads values per entry). A row is never split, so a
/// per-row computation sees all of its entries.
fn par_row_blocks<T: Send + Sync>(
    offsets: &[u32],
    heads: usize,
    input: &[T],
    out: &mut [T],
    f: &(impl Fn(&[u32], &[T], &mut [T]) + Sync),
) {
    let rows = offsets.len() - 1;
    let (first, last) = (offsets[0], offsets[rows]);
    if rows <= 1 || (last - first) as usize * heads <= TASK_VALUES {
        f(offsets, input, out);
        return;
    }
    let half = first + (last - first) / 2;
    let mid = offsets.partition_point(|&o| o < half).clamp(1, rows - 1);
    let cut = (offsets[mid] - first) as usize * heads;
    let (in_l, in_r) = input.split_at(cut);
    let (out_l, out_r) = out.split_at_mut(cut);
    rayon::join(
        || par_row_blocks(&offsets[..=mid], heads, in_l, out_l, f),
        || par_row_blocks(&offsets[mid..], heads, in_r, out_r, f),
    );
}

/// α = softmax of e over each row's entries, per head (max-subtracted; an empty row has no
/// entries and so nothing to normalise). In parallel blocks of whole rows.
pub fn edge_softmax<T: Real>(
    offsets: &[u32],
    heads: usize,
    e: &[T],
    alpha: &mut [T],
) -> Result<(), KernelError> {
    let nnz = offsets.last().map_or(0, |&o| o as usize);
    check_len("edge_softmax", "e", nnz * heads, e.len())?;
    check_len("edge_softmax", "alpha", nnz * heads, alpha.len())?;
    validate_offsets("edge_softmax", offsets, nnz)?;
    par_row_blocks(offsets, heads, e, alpha, &|offsets, e, alpha| {
        wide(|| edge_softmax_rows(offsets, heads, e, alpha))
    });
    Ok(())
}

/// The rows `offsets` (absolute) of [`edge_softmax`], `e` and `alpha` starting at their
/// first entry. A function of its own so `alpha` is known not to alias `e`.
fn edge_softmax_rows<T: Real>(offsets: &[u32], heads: usize, e: &[T], alpha: &mut [T]) {
    let base = offsets[0] as usize;
    for w in offsets.windows(2) {
        let (lo, hi) = (w[0] as usize - base, w[1] as usize - base);
        if lo == hi {
            continue; // no entries, nothing to normalise
        }
        let (e, alpha) = (
            &e[lo * heads..hi * heads],
            &mut alpha[lo * heads..hi * heads],
        );
        // Per head: the max, then e − max written to α (strided, cheap: the row is in
        // L1); then one contiguous pass of exponentials over the whole row, which
        // vectorises (per-head strided exponentials did not); then per-head sums and
        // the division. The same operations in the same order as head by head.
        for h in 0..heads {
            let max = e[h..]
                .iter()
                .step_by(heads)
                .fold(T::neg_infinity(), |m, &v| m.max(v));
            for (a, &x) in alpha[h..]
                .iter_mut()
                .step_by(heads)
                .zip(e[h..].iter().step_by(heads))
            {
                *a = x - max;
            }
        }
        alpha.iter_mut().for_each(|a| *a = a.exp_fast());
        for h in 0..heads {
            let sum = alpha[h..]
                .iter()
                .step_by(heads)
                .fold(T::zero(), |s, &a| s + a);
            for a in alpha[h..].iter_mut().step_by(heads) {
                *a = *a / sum;
            }
        }
    }
}

/// Backward of [`edge_softmax`]: de_k = α_k (dα_k − Σ_{j ∈ row} α_j dα_j).
pub fn edge_softmax_backward<T: Real>(
    offsets: &[u32],
    heads: usize,
    alpha: &[T],
    dalpha: &[T],
    de: &mut [T],
) -> Result<(), KernelError> {
    let nnz = offsets.last().map_or(0, |&o| o as usize);
    check_len("edge_softmax_backward", "alpha", nnz * heads, alpha.len())?;
    check_len("edge_softmax_backward", "dalpha", nnz * heads, dalpha.len())?;
    check_len("edge_softmax_backward", "de", nnz * heads, de.len())?;
    validate_offsets("edge_softmax_backward", offsets, nnz)?;
    par_row_blocks(offsets, heads, dalpha, de, &|offsets, dalpha, de| {
        let base = offsets[0] as usize;
        let alpha = &alpha[base * heads..];
        for w in offsets.windows(2) {
            let (lo, hi) = (w[0] as usize - base, w[1] as usize - base);
            for h in 0..heads {
                let dot = (lo..hi).fold(T::zero(), |s, k| {
                    s + alpha[k * heads + h] * dalpha[k * heads + h]
                });
                for k in lo..hi {
                    let i = k * heads + h;
                    de[i] = alpha[i] * (dalpha[i] - dot);
                }
            }
        }
    });
    Ok(())
}
