//! C = op(A)·op(B) for a C of one or two columns: a classifier's logits H·W (5931×1024 ·
//! 1024×2 in the JPDC step) and its weight gradient Hᵀ·∇Y (1024×2 over k = 5931). The tile
//! path pads those columns to a 16- or 64-wide B panel: for H·W it read H in place six rows
//! at a time, 4.4–4.7 ms on one thread for a product bound by reading H's 24 MB once; for
//! Hᵀ·∇Y it computed Cᵀ = ∇Yᵀ·H and packed all of H as op(B) first. Here both stream H once,
//! in order, and pack nothing:
//! * op(A) row-major (H·W): eight rows of op(A) are the lanes of a vector; 8×8 blocks of
//!   them are transposed in registers. 1.5–1.6 ms in the same process, and 2.0–2.2 ms
//!   against OpenBLAS's 4.4–5.4 in the GEMM bench (BENCHMARKS.md).
//! * op(A) column-major (Hᵀ·∇Y: a row of op(A) is a column of H): a stripe of up to
//!   [`STRIPE`] rows of C are the lanes, read along H's rows, so each step of k is one
//!   contiguous run of H.
//!
//! Arithmetic: the tile path's, element by element. The blocks of k come from
//! [`k_blocks_of`] (with its split into halves, the second added last), each block a chain
//! of FMAs from zero in k order, added to C in order; so the bits equal the tile's on
//! every path, whatever the thread count.
//!
//! bf16 (`Precision::Bf16`) takes this path too: both operands rounded to bfloat16 as they
//! are read ([`round`], the hardware conversion's rounding), products and sums in f32 as
//! above — the bits of the f32 path on operands rounded first. The tiles would pad C's
//! columns to 32 (AMX) or 16 (`vdpbf16ps`) and convert all of op(A) into packed pairs for
//! them: the JPDC step's bf16 logits (5931×1024 · 1024×2) took 5.8 ms a step on the AMX
//! tiles against the f32 path's 1.6 (docs/bench/kernels-gemm.md).

use rayon::prelude::*;

use super::{k_blocks_of, KHalf, Precision, Strided};
use crate::isa::Isa;

/// Columns of C this path takes at most.
const MAX_COLS: usize = 2;

/// Rows of op(A) per vector (AVX2 lanes).
const LANES: usize = 8;

/// Rows of C per stripe of a column-major op(A) at most. A stripe reads its run of every
/// row of H, and runs shorter than a row cost: Hᵀ·∇Y of 1024×2 over k = 5931 took 4.4–4.6
/// ms in stripes of 512 rows (2 KiB of each 4 KiB row) and 1.7–1.9 in one of 1024, where
/// the tile path (packing H) took 3.2–4.0 (one process, one thread). A software prefetch
/// of the run 8 steps ahead made it slower (2.2–2.7 ms against 1.6–1.7).
const STRIPE: usize = 4096;

/// Whether a product of `precision` on `isa` with an `n`-column C and an op(A) of `m` rows
/// runs here: op(A) row-major or column-major (`a_contiguous`: one of its strides is 1).
pub(super) fn applies(
    precision: Precision,
    isa: Isa,
    (m, n): (usize, usize),
    a_contiguous: bool,
) -> bool {
    cfg!(target_arch = "x86_64")
        && matches!(precision, Precision::F32 | Precision::Bf16)
        && isa != Isa::Generic
        && (1..=MAX_COLS).contains(&n)
        && a_contiguous
        && m >= LANES
}

/// C = (or += with `accumulate`) op(A)·op(B), op(A) m×k row-major (cs 1: groups of 8 rows)
/// or column-major (rs 1: stripes of up to [`STRIPE`] rows), op(B) k×n with n ≤
/// [`MAX_COLS`]; the groups or stripes shared by the pool's threads with `parallel` (one
/// stripe: its two halves of k, where k splits). With `only`, one half of k of a k that
/// splits ([`k_blocks_of`]), as [`super::gemm_view_half`] defines it.
///
/// With `bf16`, both operands are rounded to bfloat16 as they are read (module doc).
///
/// # Safety
/// As [`super::run`]: the views address op(A), op(B) and C in bounds and C aliases
/// neither; a.cs or a.rs is 1; the CPU has AVX2 and FMA, and with `bf16` AVX-512F and
/// AVX512_BF16; with `only`, k splits.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn product(
    (m, n, k): (usize, usize, usize),
    a: Strided,
    b: Strided,
    c: Strided,
    accumulate: bool,
    parallel: bool,
    only: Option<KHalf>,
    bf16: bool,
) {
    debug_assert!((a.cs == 1 || a.rs == 1) && (1..=MAX_COLS).contains(&n));
    // op(B)'s columns, each contiguous (the second a copy of the first when n is 1).
    let mut w = vec![0f32; MAX_COLS * k];
    for (j, col) in w.chunks_exact_mut(k).enumerate() {
        for (p, x) in col.iter_mut().enumerate() {
            // SAFETY: p < k, min(j, n − 1) < n: inside op(B).
            let v = unsafe { *b.at(p, j.min(n - 1)) };
            *x = if bf16 { round(v) } else { v };
        }
    }
    let (kc, split) = k_blocks_of(k, 1);
    let job = Job {
        n,
        k,
        a,
        w: &w,
        c,
        accumulate,
        kc,
        split,
        only,
        bf16,
    };
    if a.cs != 1 {
        let stripes = m.div_ceil(STRIPE);
        if parallel && stripes == 1 && split.is_some() && only.is_none() {
            // The halves on two threads, the second into a buffer added last (as the
            // tile path's `run`): the same bits.
            let mut h = vec![0f32; m * n];
            let second = Strided {
                ptr: h.as_mut_ptr(),
                rs: n,
                cs: 1,
            };
            let half = |c: Strided, accumulate: bool, only: KHalf| {
                let job = Job {
                    c,
                    accumulate,
                    only: Some(only),
                    ..job
                };
                // SAFETY: as below, for the buffer (m×n) too.
                unsafe { stripe(0, m, job) }
            };
            rayon::join(
                || half(c, accumulate, KHalf::First),
                || half(second, false, KHalf::Second),
            );
            for i in 0..m {
                for j in 0..n {
                    // SAFETY: (i, j) is inside C and the buffer.
                    unsafe { *c.at(i, j) += *second.at(i, j) };
                }
            }
            return;
        }
        let stripe = |s: usize| {
            let i0 = s * STRIPE;
            // SAFETY: rows i0..i0 + len of op(A) and C (the caller's contract); this
            // stripe's rows of C are its own; the CPU has AVX2 and FMA.
            unsafe { stripe(i0, STRIPE.min(m - i0), job) }
        };
        if parallel {
            (0..stripes).into_par_iter().for_each(stripe);
        } else {
            (0..stripes).for_each(stripe);
        }
        return;
    }
    let group = |g: usize| {
        let i0 = g * LANES;
        let rows = LANES.min(m - i0);
        // SAFETY: rows i0..i0 + rows of op(A) and C (the caller's contract); this group's
        // rows of C are its own; the CPU has AVX2 and FMA.
        unsafe {
            if rows == LANES {
                rows8(i0, job)
            } else {
                for i in i0..i0 + rows {
                    row1(i, job)
                }
            }
        }
    };
    let groups = m.div_ceil(LANES);
    if parallel {
        (0..groups).into_par_iter().for_each(group);
    } else {
        (0..groups).for_each(group);
    }
}

/// One product's operands and blocking, shared by its row groups: C (n ≤ [`MAX_COLS`]
/// columns) from op(A) (row-major, k columns) and op(B)'s columns `w` (k floats each, the
/// second a copy of the first when n is 1), in blocks of `kc` with the split of
/// [`k_blocks_of`]; all of k, or `only` one half; in bf16 or f32.
#[derive(Clone, Copy)]
struct Job<'w> {
    n: usize,
    k: usize,
    a: Strided,
    w: &'w [f32],
    c: Strided,
    accumulate: bool,
    kc: usize,
    split: Option<usize>,
    only: Option<KHalf>,
    /// op(A)'s elements rounded to bfloat16 as they are read (`w` already is).
    bf16: bool,
}

impl Job<'_> {
    /// Σ over k as the tile adds it, for any lane type `T`: each block of `kc` (`block`, a
    /// chain of FMAs from zero) added in order to `start` (None: the first block is the
    /// sum) over the first half of k; the second half's blocks ([`k_blocks_of`]) summed
    /// apart and added last; with `only`, that half's sum alone (the second without
    /// `start`). None only for k = 0 without a start.
    #[inline(always)]
    fn sum<T>(
        &self,
        start: Option<T>,
        block: impl Fn(std::ops::Range<usize>) -> T,
        add: impl Fn(T, T) -> T,
    ) -> Option<T> {
        let blocks = |ks: std::ops::Range<usize>, start: Option<T>| {
            ks.clone().step_by(self.kc).fold(start, |total, pc| {
                let b = block(pc..(pc + self.kc).min(ks.end));
                Some(match total {
                    Some(t) => add(t, b),
                    None => b,
                })
            })
        };
        let first = self.split.unwrap_or(self.k);
        match self.only {
            Some(KHalf::First) => blocks(0..first, start),
            Some(KHalf::Second) => blocks(first..self.k, None),
            None => match (blocks(0..first, start), blocks(first..self.k, None)) {
                (Some(t), Some(h)) => Some(add(t, h)),
                (t, h) => t.or(h),
            },
        }
    }
}

/// `x` rounded to bfloat16 and widened back ([`super::bf16::round`]): the scalar reads
/// (op(B)'s columns, the rows and columns past whole vectors).
#[inline(always)]
fn round(x: f32) -> f32 {
    super::bf16::widen(super::bf16::round(x))
}

/// [`round`] on 8 lanes, without branches (nearest even; a subnormal to zero of its sign;
/// NaN quieted), in the AVX2 of the row groups that call it.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn round8(v: std::arch::x86_64::__m256) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    // SAFETY: AVX2 (the callers' target features); register operations only.
    unsafe {
        let b = _mm256_castps_si256(v);
        let odd = _mm256_and_si256(_mm256_srli_epi32::<16>(b), _mm256_set1_epi32(1));
        let bias = _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff));
        let high = _mm256_set1_epi32(0xffff_0000u32 as i32);
        let nearest = _mm256_and_si256(_mm256_add_epi32(b, bias), high);
        let exp = _mm256_and_si256(b, _mm256_set1_epi32(0x7f80_0000));
        let sub = _mm256_cmpeq_epi32(exp, _mm256_setzero_si256());
        let sign = _mm256_and_si256(b, _mm256_set1_epi32(0x8000_0000u32 as i32));
        let r = _mm256_blendv_epi8(nearest, sign, sub);
        let mag = _mm256_and_si256(b, _mm256_set1_epi32(0x7fff_ffff));
        let nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7f80_0000));
        let quiet = _mm256_and_si256(_mm256_or_si256(b, _mm256_set1_epi32(0x0040_0000)), high);
        _mm256_castsi256_ps(_mm256_blendv_epi8(r, quiet, nan))
    }
}

/// `s0 += round(x)·y0`, `s1 += round(x)·y1` lane by lane over a run (one step of k of a
/// bf16 stripe), 16 lanes at a time with the hardware conversion: a select-based rounding
/// cost a dozen instructions an element there, and the bf16 stripe ran at half the f32
/// one's speed. The conversion rounds as [`round`] does.
///
/// # Safety
/// The CPU has AVX-512F, AVX512_BF16 and FMA (bf16 products require them:
/// `Precision::check`); `x`, `s0` and `s1` have the same length.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16,fma")]
unsafe fn round_fma_run(x: &[f32], (y0, y1): (f32, f32), (s0, s1): (&mut [f32], &mut [f32])) {
    use std::arch::x86_64::*;
    let len = x.len();
    debug_assert!(s0.len() == len && s1.len() == len);
    let (v0, v1) = (_mm512_set1_ps(y0), _mm512_set1_ps(y1));
    let mut l = 0;
    while l < len {
        let m: __mmask16 = if len - l >= 16 {
            0xffff
        } else {
            (1u16 << (len - l)) - 1
        };
        // SAFETY: the masked lanes l.. of the three runs only (the contract: equal
        // lengths); masked-off lanes are neither read nor written.
        unsafe {
            let v = _mm512_maskz_loadu_ps(m, x.as_ptr().add(l));
            let h: __m256i = std::mem::transmute(_mm512_cvtneps_pbh(v));
            let v = _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)));
            let (p0, p1) = (s0.as_mut_ptr().add(l), s1.as_mut_ptr().add(l));
            let a0 = _mm512_fmadd_ps(v, v0, _mm512_maskz_loadu_ps(m, p0));
            let a1 = _mm512_fmadd_ps(v, v1, _mm512_maskz_loadu_ps(m, p1));
            _mm512_mask_storeu_ps(p0, m, a0);
            _mm512_mask_storeu_ps(p1, m, a1);
        }
        l += 16;
    }
}

/// Row i of C, element by element (the rows past the last whole group of 8).
///
/// # Safety
/// Row i of op(A) and C in bounds (`job`'s views).
unsafe fn row1(i: usize, job: Job<'_>) {
    let (n, k, w, c) = (job.n, job.k, job.w, job.c);
    // SAFETY: row i of op(A), k contiguous floats (cs 1).
    let x = unsafe { std::slice::from_raw_parts(job.a.at(i, 0), k) };
    let at = |p: usize| if job.bf16 { round(x[p]) } else { x[p] };
    for j in 0..n {
        let col = &w[j * k..(j + 1) * k];
        let block = |ks: std::ops::Range<usize>| ks.fold(0f32, |acc, p| at(p).mul_add(col[p], acc));
        // SAFETY: (i, j) is inside C.
        let out = unsafe { &mut *c.at(i, j) };
        *out = job
            .sum(job.accumulate.then_some(*out), block, |t, b| t + b)
            .unwrap_or(0.0);
    }
}

/// Not reached off x86-64 ([`applies`]); row by row there.
///
/// # Safety
/// As [`row1`] for the 8 rows.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn rows8(i0: usize, job: Job<'_>) {
    for i in i0..i0 + LANES {
        // SAFETY: forwarded contract.
        unsafe { row1(i, job) }
    }
}

/// Rows i0..i0 + 8 of C, the rows as the lanes.
///
/// # Safety
/// As [`row1`] for the 8 rows; the CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows8(i0: usize, job: Job<'_>) {
    use std::arch::x86_64::*;
    let (n, k, w, c) = (job.n, job.k, job.w, job.c);
    let row = |r: usize| job.a.at(i0 + r, 0).cast_const();
    // One block of k for the 8 rows and both columns: a chain of FMAs per lane.
    let block = |ks: std::ops::Range<usize>| {
        let mut acc = [_mm256_setzero_ps(); MAX_COLS];
        let mut p = ks.start;
        while p + LANES <= ks.end {
            // SAFETY: columns p..p + 8 of the 8 rows are inside op(A).
            let r: [__m256; LANES] = std::array::from_fn(|q| {
                let v = unsafe { _mm256_loadu_ps(row(q).add(p)) };
                if job.bf16 {
                    round8(v)
                } else {
                    v
                }
            });
            // The 8×8 transpose: pairs of rows interleaved, then pairs of pairs, then
            // the 128-bit halves swapped; cols[d] is column p + d of the 8 rows.
            let t: [__m256; LANES] = std::array::from_fn(|i| {
                let (x, y) = (r[i & !1], r[i | 1]);
                match i % 2 {
                    0 => _mm256_unpacklo_ps(x, y),
                    _ => _mm256_unpackhi_ps(x, y),
                }
            });
            let s: [__m256; LANES] = std::array::from_fn(|i| {
                let q = i / 4 * 4 + i / 2 % 2;
                match i % 2 {
                    0 => _mm256_shuffle_ps::<0x44>(t[q], t[q + 2]),
                    _ => _mm256_shuffle_ps::<0xEE>(t[q], t[q + 2]),
                }
            });
            let cols: [__m256; LANES] = std::array::from_fn(|d| match d / 4 {
                0 => _mm256_permute2f128_ps::<0x20>(s[d % 4], s[d % 4 + 4]),
                _ => _mm256_permute2f128_ps::<0x31>(s[d % 4], s[d % 4 + 4]),
            });
            for (d, x) in cols.iter().enumerate() {
                for (j, acc) in acc.iter_mut().enumerate() {
                    let y = _mm256_set1_ps(w[j * k + p + d]);
                    *acc = _mm256_fmadd_ps(*x, y, *acc);
                }
            }
            p += LANES;
        }
        for p in p..ks.end {
            // SAFETY: column p of the 8 rows is inside op(A).
            let x: [f32; LANES] = std::array::from_fn(|q| {
                let v = unsafe { *row(q).add(p) };
                if job.bf16 {
                    round(v)
                } else {
                    v
                }
            });
            let x = _mm256_loadu_ps(x.as_ptr());
            for (j, acc) in acc.iter_mut().enumerate() {
                *acc = _mm256_fmadd_ps(x, _mm256_set1_ps(w[j * k + p]), *acc);
            }
        }
        acc
    };
    let start = job.accumulate.then(|| {
        std::array::from_fn(|j| {
            // SAFETY: rows i0..i0 + 8 of C; column j.min(n − 1) < n.
            let v: [f32; LANES] = std::array::from_fn(|q| unsafe { *c.at(i0 + q, j.min(n - 1)) });
            _mm256_loadu_ps(v.as_ptr())
        })
    });
    let add = |t: [__m256; MAX_COLS], b: [__m256; MAX_COLS]| {
        std::array::from_fn(|j| _mm256_add_ps(t[j], b[j]))
    };
    let sums = job
        .sum(start, block, add)
        .unwrap_or([_mm256_setzero_ps(); MAX_COLS]);
    for (j, v) in sums.iter().enumerate().take(n) {
        let mut out = [0f32; LANES];
        _mm256_storeu_ps(out.as_mut_ptr(), *v);
        for (q, x) in out.into_iter().enumerate() {
            // SAFETY: (i0 + q, j) is inside C.
            unsafe { *c.at(i0 + q, j) = x };
        }
    }
}

/// Rows i0..i0 + len (≤ [`STRIPE`]) of C from a column-major op(A) (rs 1), the rows as the
/// lanes: each step p of k reads op(A)'s rows i0.. at column p, one contiguous run (a row
/// of H for ∇W = Hᵀ·∇Y), into the accumulators of both columns.
///
/// # Safety
/// Rows i0..i0 + len of op(A) (rs 1) and of C in bounds (`job`'s views); the CPU has AVX2
/// and FMA.
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2,fma"))]
unsafe fn stripe(i0: usize, len: usize, job: Job<'_>) {
    let (n, k, w, c) = (job.n, job.k, job.w, job.c);
    // The second column's accumulators start a cache line past len (a 4 KiB multiple
    // apart, as for len = 1024, every load of one waited on the store to the other).
    let ld = len + crate::CACHE_LINE_F32;
    let block = |ks: std::ops::Range<usize>| {
        let mut acc = vec![0f32; MAX_COLS * ld];
        let (acc0, acc1) = acc.split_at_mut(ld);
        let (acc0, acc1) = (&mut acc0[..len], &mut acc1[..len]);
        for p in ks {
            // SAFETY: column p of op(A), rows i0..i0 + len: contiguous (rs 1), in bounds.
            let x = unsafe { std::slice::from_raw_parts(job.a.at(i0, p), len) };
            let (y0, y1) = (w[p], w[k + p]);
            if job.bf16 {
                // SAFETY: a bf16 product runs only where the CPU has AVX-512F,
                // AVX512_BF16 (`Precision::check`, which its callers pass) and FMA; acc0,
                // acc1 and x are len floats each.
                #[cfg(target_arch = "x86_64")]
                unsafe {
                    round_fma_run(x, (y0, y1), (acc0, acc1))
                };
                #[cfg(not(target_arch = "x86_64"))]
                unreachable!("bf16 takes the narrow path on x86-64 only (`applies`)");
            } else {
                for ((s0, s1), x) in acc0.iter_mut().zip(acc1.iter_mut()).zip(x) {
                    *s0 = x.mul_add(y0, *s0);
                    *s1 = x.mul_add(y1, *s1);
                }
            }
        }
        acc
    };
    let start = job.accumulate.then(|| {
        (0..MAX_COLS * ld)
            .map(|e| match (e % ld, (e / ld).min(n - 1)) {
                // SAFETY: rows i0..i0 + len of C; column min(j, n − 1) < n.
                (l, j) if l < len => unsafe { *c.at(i0 + l, j) },
                _ => 0.0,
            })
            .collect()
    });
    let add = |mut t: Vec<f32>, b: Vec<f32>| {
        t.iter_mut().zip(&b).for_each(|(t, b)| *t += b);
        t
    };
    let sums = job
        .sum(start, block, add)
        .unwrap_or_else(|| vec![0.0; MAX_COLS * ld]);
    for (j, col) in sums.chunks_exact(ld).enumerate().take(n) {
        for (l, x) in col[..len].iter().enumerate() {
            // SAFETY: (i0 + l, j) is inside C.
            unsafe { *c.at(i0 + l, j) = *x };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 8-lane rounding against [`super::super::bf16::round`] (which is held against
    /// the hardware conversion) on its hostile values.
    #[test]
    fn rounding_is_the_conversions() {
        let mut xs = super::super::bf16::hostile_values();
        xs.resize(xs.len().next_multiple_of(LANES), 1.0);
        let want = |x: f32| (super::super::bf16::round(x) as u32) << 16;
        #[cfg(target_arch = "x86_64")]
        if Isa::Avx2.available() {
            #[target_feature(enable = "avx2")]
            fn lanes(x: &[f32]) -> [u32; LANES] {
                use std::arch::x86_64::*;
                let mut out = [0u32; LANES];
                // SAFETY: 8 floats read, 8 written.
                unsafe {
                    let v = round8(_mm256_loadu_ps(x.as_ptr()));
                    _mm256_storeu_ps(out.as_mut_ptr().cast(), v);
                }
                out
            }
            for chunk in xs.chunks_exact(LANES) {
                // SAFETY: the CPU has AVX2 (checked).
                let got = unsafe { lanes(chunk) };
                let w: Vec<u32> = chunk.iter().map(|&x| want(x)).collect();
                assert_eq!(got.to_vec(), w);
            }
        }
    }
}
