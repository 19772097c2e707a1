//! Packing: op(B)'s blocks into NR-column panels and op(A)'s rows into MR-row panels, in
//! the k-major layout the tile routines read, and the prefetches that bring the next
//! rows towards L1 while a panel computes.

use super::*;

/// Packs op(B)'s rows pc..pc+kc, columns jc..jc+nc into `K::NR`-column panels of
/// `K::steps(kc)` steps, one after another in `dst` (lanes along columns, k along rows).
///
/// # Safety
/// The block is inside op(B); dst holds steps(kc)·⌈nc/NR⌉·NR slots; the CPU runs `K`.
pub(super) unsafe fn pack_b_block<K: MicroKernel>(
    b: Strided,
    (jc, nc): (usize, usize),
    (pc, kc): (usize, usize),
    dst: &mut [f32],
    parallel: bool,
) {
    let width = K::NR;
    if b.cs == 1 && K::K_STEP <= 2 {
        // Rows of op(B) are contiguous: read each row of the block once, in order, and
        // deal it out to the panels. Panel by panel, the reads would be NR floats every
        // row stride — for AVX2 one cache line per 2 KiB, a new strided stream per panel,
        // and ∇Y of ∇W = Xᵀ·∇Y comes from memory: tn on the AVX2 path ran at 80–91 % of
        // OpenBLAS, 27 % slower than the AVX-512 path (4 lines per row) on the same CPU.
        // Threads take groups of whole panels (contiguous in dst), each still reading
        // rows in order. bf16 pairs (K_STEP 2) likewise.
        let panel = K::steps(kc) * width;
        let panels = nc.div_ceil(width);
        let groups = if parallel {
            (2 * rayon::current_num_threads()).min(panels)
        } else {
            1
        };
        let per = panels.div_ceil(groups);
        // A few rows at a time (`rows_per_part`) dealt panel by panel: one row at a time
        // wrote every panel's stream at once, and the panels lie kc·NR·4 bytes apart
        // (64 KiB on AVX-512), all in one L1 set.
        let rows_at = rows_per_part(K::K_STEP);
        let pack_rows = |(g, dst): (usize, &mut [f32])| {
            let q0 = g * per;
            let n_pan = dst.len() / panel;
            for t0 in (0..kc).step_by(rows_at) {
                let t_n = rows_at.min(kc - t0);
                for q in 0..n_pan {
                    let cols = width.min(nc - (q0 + q) * width);
                    // `pack` copies a whole panel's row at a length the compiler knows
                    // (`K::NR`, a constant here, where the closure's captured `width` is
                    // not): a `memmove` call per 64-byte row took 4.6 % of the samples of
                    // ∇W's 512×512 over k = 8000 on the AVX2 path (perf; BENCHMARKS.md,
                    // twelfth session). A last, narrower panel gets its zero tail there.
                    // SAFETY: rows pc + t0 .. + t_n of op(B), columns jc + (q0 + q)·width
                    // .. + cols, are in bounds (row-contiguous: cs 1); the destination
                    // holds steps(t_n) steps of `width` from step t0/K_STEP of panel q
                    // (t0 is a multiple of 32 pairs' rows, so those steps end within
                    // the panel); the CPU runs K (the caller's contract).
                    unsafe {
                        K::pack(
                            &mut dst[q * panel + t0 / K::K_STEP * width..],
                            b.at(pc + t0, jc + (q0 + q) * width).cast_const(),
                            1,
                            b.rs,
                            cols,
                            t_n,
                            K::NR,
                        )
                    };
                }
            }
        };
        let chunk = per * panel;
        if parallel {
            dst.par_chunks_mut(chunk).enumerate().for_each(pack_rows);
        } else {
            dst.chunks_mut(chunk).enumerate().for_each(pack_rows);
        }
        return;
    }
    let pack_b = |(q, dst): (usize, &mut [f32])| {
        let j0 = jc + q * width;
        // SAFETY: rows pc..pc+kc and columns j0..j0+cols of op(B) are in bounds; the CPU
        // runs K (the caller's contract).
        unsafe {
            K::pack(
                dst,
                b.at(pc, j0),
                b.cs,
                b.rs,
                width.min(jc + nc - j0),
                kc,
                width,
            )
        }
    };
    let panel = K::steps(kc) * width;
    if parallel {
        dst.par_chunks_mut(panel).enumerate().for_each(pack_b);
    } else {
        dst.chunks_mut(panel).enumerate().for_each(pack_b);
    }
}

/// Prefetches part `part` of `parts` of the cache lines a [`pack`] of the same arguments
/// reads. Only a hint: addresses are computed, never dereferenced.
#[inline(always)]
pub(super) fn prefetch_part(
    src: *const f32,
    lane_stride: usize,
    k_stride: usize,
    lanes: usize,
    kc: usize,
    part: usize,
    parts: usize,
) {
    // Lines along the contiguous direction, every element of the other.
    let (outer, inner, o_stride, i_stride) = if k_stride == 1 {
        (lanes, kc, lane_stride, 1)
    } else if lane_stride == 1 {
        (kc, lanes, k_stride, 1)
    } else {
        (lanes, kc, lane_stride, k_stride)
    };
    let step = if i_stride == 1 {
        crate::CACHE_LINE_F32
    } else {
        1
    };
    let per_outer = inner.div_ceil(step);
    let total = outer * per_outer;
    let (lo, hi) = (total * part / parts, total * (part + 1) / parts);
    for idx in lo..hi {
        let (o, i) = (idx / per_outer, (idx % per_outer) * step);
        let p = src.wrapping_add(o * o_stride + i * i_stride);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: prefetch never faults, whatever the address.
        unsafe {
            std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let _ = p;
    }
}

/// Packs `lanes` (≤ `W`) lanes × `kc` steps of a strided operand into a k-major panel:
/// `dst[t·W + l] = src[l·lane_stride + t·k_stride]` (W = `width`, a tile constant that
/// inlining folds), lanes `lanes..W` zero. A's panels
/// take rows as lanes, B's columns. Packing is O(1/NC) (A) and O(1/m) (B) of the work, but
/// a general element loop still cost 10–15 % of a product (perf, 8000×512·512×512): the
/// contiguous case copies whole W-float steps, the transposing case writes whole steps.
///
/// # Safety
/// `src + l·lane_stride + t·k_stride` is readable for l < lanes, t < kc; dst holds
/// kc·W floats.
#[inline(always)]
pub(super) unsafe fn pack(
    dst: &mut [f32],
    src: *const f32,
    lane_stride: usize,
    k_stride: usize,
    lanes: usize,
    kc: usize,
    width: usize,
) {
    let w = width;
    assert!(dst.len() >= kc * w && lanes <= w);
    let d = dst.as_mut_ptr();
    if lane_stride == 1 && lanes == w {
        // A step's W lanes are contiguous: one fixed-size copy per step.
        for t in 0..kc {
            // SAFETY: W floats from src + t·k_stride (the contract) into step t of dst.
            unsafe { std::ptr::copy_nonoverlapping(src.add(t * k_stride), d.add(t * w), w) };
        }
        return;
    }
    if lanes < w {
        for step in dst.chunks_exact_mut(w).take(kc) {
            step[lanes..].fill(0.0);
        }
    }
    if lane_stride == 1 {
        for t in 0..kc {
            // SAFETY: as above, `lanes` floats.
            unsafe { std::ptr::copy_nonoverlapping(src.add(t * k_stride), d.add(t * w), lanes) };
        }
    } else if lanes == w {
        // Whole steps (every panel but a last short one): per step, one element of each
        // lane, written contiguously; each lane's reads run along k (a cache line serves
        // 16 steps). `w` is the tile constant here, so the lane loop unrolls.
        for t in 0..kc {
            for l in 0..w {
                // SAFETY: l < lanes, t < kc (the contract); dst holds kc·w.
                unsafe { *d.add(t * w + l) = *src.add(l * lane_stride + t * k_stride) };
            }
        }
    } else {
        for t in 0..kc {
            for l in 0..lanes {
                // SAFETY: l < lanes, t < kc.
                unsafe { *d.add(t * w + l) = *src.add(l * lane_stride + t * k_stride) };
            }
        }
    }
}
