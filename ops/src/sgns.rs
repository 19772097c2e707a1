//! Skip-gram with negative sampling (SGNS): the SGD step of node embedding (DeepWalk, LINE,
//! node2vec as GraphVite trains them) on one vertex row `u` and the context rows of one
//! positive sample and its negatives.
//!
//! For each term (context row c, label y ∈ {1 positive, 0 negative}, weight w):
//! s = u·c, g = lr·w·(y − σ(s)), acc += g·c, c += g·u — the context row is updated with the
//! vertex row *before* the vertex row moves, as word2vec and GraphVite do; after all terms
//! of the sample, [`sgns_apply`] adds acc to u. Each call touches only its own rows, so a
//! caller may run calls on disjoint rows at once (the partition grid guarantees that).
//!
//! Vectorised: the dot product sums in 16 independent lanes, and the fused update is one
//! pass over acc, c and u, compiled for AVX-512F or AVX2 when the CPU has it (chosen per
//! call); the naive oracle is [`crate::naive::sgns`].
//!
//! [`sgns_sample`] is a whole sample at once when its context rows are distinct (the
//! common case: a repeat needs a negative equal to the positive or to another negative):
//! every term's logit reads the vertex row and its own context row, neither of which an
//! earlier term of the sample has changed, so all logits are computed first, side by side
//! (independent dependency chains, where the term-by-term order waits on one σ before the
//! next dot product starts), then one pass updates every context row and u, the vertex
//! gradient held in registers instead of `acc`. The operations per element and their order
//! are the term-by-term ones, so the result is the same bits (`ops/tests/sgns.rs` holds
//! both to each other on every path).

use crate::isa::Isa;
use crate::simd::{dot, wide, LANES};

/// Logits beyond ±this saturate σ: 1/(1+e^15) < 3.1e-7, below an f32 step of 1.0, so the
/// gradient is the one at the clamp. Keeps `exp` finite.
pub const MAX_LOGIT: f32 = 15.0;

/// σ(s) = 1/(1+e^−s) with s clamped to ±[`MAX_LOGIT`]. (libm's `expf`: a Taylor
/// polynomial inlined here was slower end to end, its longer dependency chain sitting
/// between the dot product and the update.)
#[inline]
pub fn sigmoid(s: f32) -> f32 {
    let s = s.clamp(-MAX_LOGIT, MAX_LOGIT);
    1.0 / (1.0 + (-s).exp())
}

/// One SGNS term on `u` (read) and `c` (updated), accumulating the vertex gradient in `acc`:
/// s = u·c, g = lr·weight·(y − σ(s)) with y = 1 if `positive`, acc += g·c, c += g·u.
/// Returns s (the caller computes a loss from it when it wants one). The three rows have
/// the same length (the embedding dim); a shorter one bounds the loop.
#[inline]
pub fn sgns_term(
    u: &[f32],
    c: &mut [f32],
    acc: &mut [f32],
    positive: bool,
    weight: f32,
    lr: f32,
) -> f32 {
    let d = u.len().min(c.len()).min(acc.len());
    let (u, c, acc) = (&u[..d], &mut c[..d], &mut acc[..d]);
    // Written with the vector unit's intrinsics: LLVM compiled the generic body's
    // 16-lane dot product into 4-wide pieces and scalar adds even inside a function
    // compiled for AVX-512 (perf annotate: `vaddss` chains hottest). The lanes are the
    // generic body's, so every path gives the same bits.
    #[cfg(target_arch = "x86_64")]
    {
        match Isa::current() {
            // SAFETY: `Isa::current` is capped to what the CPU has; the rows have length d.
            Isa::Avx512 => return unsafe { x86::term_avx512(u, c, acc, positive, weight, lr) },
            // SAFETY: as above (AVX2 and FMA).
            Isa::Avx2 => return unsafe { x86::term_avx2(u, c, acc, positive, weight, lr) },
            Isa::Generic => {}
        }
    }
    term_with(u, c, acc, positive, weight, lr, dot, update)
}

/// A term from a dot product and an update (one vector unit's pair).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn term_with(
    u: &[f32],
    c: &mut [f32],
    acc: &mut [f32],
    positive: bool,
    weight: f32,
    lr: f32,
    dot: impl Fn(&[f32], &[f32]) -> f32,
    update: impl Fn(&[f32], &mut [f32], &mut [f32], f32),
) -> f32 {
    let s = dot(u, c);
    let y = if positive { 1.0 } else { 0.0 };
    let g = lr * weight * (y - sigmoid(s));
    update(u, c, acc, g);
    s
}

/// acc += g·c, then c += g·u, elementwise (the generic body).
#[inline(always)]
fn update(u: &[f32], c: &mut [f32], acc: &mut [f32], g: f32) {
    for ((a, ci), &ui) in acc.iter_mut().zip(c.iter_mut()).zip(u) {
        *a += g * *ci;
        *ci += g * ui;
    }
}

/// Ends a sample: u += acc, then acc = 0 for the next sample.
#[inline]
pub fn sgns_apply(u: &mut [f32], acc: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if Isa::current() == Isa::Avx512 {
            // SAFETY: `Isa::current` is capped to what the CPU has.
            return unsafe { x86::apply_avx512(u, acc) };
        }
    }
    wide(|| apply(u, acc))
}

/// u += acc, acc = 0 (the generic body).
#[inline(always)]
fn apply(u: &mut [f32], acc: &mut [f32]) {
    for (ui, a) in u.iter_mut().zip(acc.iter_mut()) {
        *ui += *a;
        *a = 0.0;
    }
}

/// A whole sample on distinct context rows: the positive term on `ctx[0]` (weight
/// `weights.0`) and a negative term on each later row (weight `weights.1`), then u +=
/// their vertex gradient; `logits[k]` receives term k's logit (the caller computes a loss
/// from them when it wants one). Equal, bit for bit, to [`sgns_term`] on each row in order
/// with a zeroed `acc` and then [`sgns_apply`] (the rows' being distinct is what makes the
/// logits independent of the earlier terms' updates; the `&mut` rows guarantee it). Rows
/// and u have one length (the embedding dim); a shorter one bounds the loop. At most
/// [`MAX_SAMPLE_TERMS`] terms (a caller with more runs [`sgns_term`] per term).
///
/// # Panics
/// If `logits` is shorter than `ctx`, or `ctx` is empty or longer than
/// [`MAX_SAMPLE_TERMS`].
pub fn sgns_sample(
    u: &mut [f32],
    ctx: &mut [&mut [f32]],
    weights: (f32, f32),
    lr: f32,
    logits: &mut [f32],
) {
    sample_with(Isa::current(), u, ctx, weights, lr, logits)
}

/// The most terms (a positive and its negatives) [`sgns_sample`] takes: the gradients sit
/// in an array on the stack.
pub const MAX_SAMPLE_TERMS: usize = 32;

/// [`sgns_sample`] on a given instruction set (capped to what the CPU has), for the tests
/// of every path in one process.
pub fn sgns_sample_on(
    isa: Isa,
    u: &mut [f32],
    ctx: &mut [&mut [f32]],
    weights: (f32, f32),
    lr: f32,
    logits: &mut [f32],
) {
    sample_with(isa.capped(), u, ctx, weights, lr, logits)
}

/// [`sgns_sample`] on `isa`, which the CPU has.
#[inline(always)]
fn sample_with(
    isa: Isa,
    u: &mut [f32],
    ctx: &mut [&mut [f32]],
    weights: (f32, f32),
    lr: f32,
    logits: &mut [f32],
) {
    let m = ctx.len();
    assert!(
        (1..=MAX_SAMPLE_TERMS).contains(&m) && logits.len() >= m,
        "sgns_sample: {m} terms (1 to {MAX_SAMPLE_TERMS}) and {} logits",
        logits.len()
    );
    let d = ctx.iter().map(|c| c.len()).fold(u.len(), usize::min);
    #[cfg(target_arch = "x86_64")]
    {
        match isa {
            // SAFETY: the CPU has `isa` (the callers cap it); every row has ≥ d elements.
            Isa::Avx512 => {
                return unsafe { x86::sample_avx512_any(u, ctx, d, weights, lr, logits) }
            }
            // SAFETY: as above (AVX2 and FMA).
            Isa::Avx2 => return unsafe { x86::sample_avx2_any(u, ctx, d, weights, lr, logits) },
            Isa::Generic => {}
        }
    }
    let _ = isa;
    for (k, c) in ctx.iter().enumerate() {
        logits[k] = dot(&u[..d], &c[..d]);
    }
    let g = gradients(&logits[..m], weights, lr);
    for (i, ui) in u[..d].iter_mut().enumerate() {
        let mut a = 0.0;
        for (c, &gk) in ctx.iter_mut().zip(&g) {
            let ci = &mut c[i];
            a += gk * *ci;
            *ci += gk * *ui;
        }
        *ui += a;
    }
}

/// g_k = lr·w_k·(y_k − σ(s_k)) of a sample's terms (k = 0 the positive), as
/// [`sgns_term`] computes each.
#[inline(always)]
fn gradients(logits: &[f32], (wp, wn): (f32, f32), lr: f32) -> [f32; MAX_SAMPLE_TERMS] {
    let mut g = [0f32; MAX_SAMPLE_TERMS];
    for (k, (gk, &s)) in g.iter_mut().zip(logits).enumerate() {
        let (y, w) = if k == 0 { (1.0, wp) } else { (0.0, wn) };
        *gk = lr * w * (y - sigmoid(s));
    }
    g
}

/// The x86-64 kernels: the generic bodies' operations in the same order (no FMA; the dot
/// product in [`LANES`] lanes, the tail added to lanes 0.., combined pairwise), so their
/// results are bit-identical to the generic path's.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{apply, gradients, term_with, update, LANES};
    use crate::simd::combine;

    /// `$name`: [`super::sgns_term`] compiled for `$feature` from that unit's dot product
    /// and update (which inline into it).
    macro_rules! term_for {
        ($name:ident, $feature:literal, $dot:ident, $update:ident) => {
            #[doc = concat!("[`super::sgns_term`] for ", $feature, ".")]
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn $name(
                u: &[f32],
                c: &mut [f32],
                acc: &mut [f32],
                positive: bool,
                weight: f32,
                lr: f32,
            ) -> f32 {
                // SAFETY (each closure): the CPU has the feature, as this function requires.
                let dot = |u: &[f32], c: &[f32]| unsafe { $dot(u, c) };
                let update =
                    |u: &[f32], c: &mut [f32], a: &mut [f32], g| unsafe { $update(u, c, a, g) };
                term_with(u, c, acc, positive, weight, lr, dot, update)
            }
        };
    }
    term_for!(term_avx512, "avx512f", dot_avx512, update_avx512);
    term_for!(term_avx2, "avx2", dot_avx2, update_avx2);

    /// Σ u_i·c_i in 16 lanes (one 512-bit register), rows of equal length.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn dot_avx512(u: &[f32], c: &[f32]) -> f32 {
        let d = u.len().min(c.len());
        let full = d / LANES * LANES;
        let mut v = _mm512_setzero_ps();
        let mut k = 0;
        while k < full {
            // SAFETY: k + 16 ≤ full ≤ the rows' length.
            let (a, b) = unsafe {
                (
                    _mm512_loadu_ps(u.as_ptr().add(k)),
                    _mm512_loadu_ps(c.as_ptr().add(k)),
                )
            };
            v = _mm512_add_ps(v, _mm512_mul_ps(a, b));
            k += LANES;
        }
        let mut lanes = [0f32; LANES];
        // SAFETY: `lanes` holds 16 floats.
        unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), v) };
        tail(lanes, &u[full..d], &c[full..d])
    }

    /// Σ u_i·c_i in 16 lanes (two 256-bit registers: lanes 0–7 and 8–15).
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn dot_avx2(u: &[f32], c: &[f32]) -> f32 {
        let d = u.len().min(c.len());
        let full = d / LANES * LANES;
        let (mut lo, mut hi) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let mut k = 0;
        while k < full {
            // SAFETY: k + 16 ≤ full ≤ the rows' length.
            unsafe {
                let (u, c) = (u.as_ptr().add(k), c.as_ptr().add(k));
                lo = _mm256_add_ps(lo, _mm256_mul_ps(_mm256_loadu_ps(u), _mm256_loadu_ps(c)));
                hi = _mm256_add_ps(
                    hi,
                    _mm256_mul_ps(_mm256_loadu_ps(u.add(8)), _mm256_loadu_ps(c.add(8))),
                );
            }
            k += LANES;
        }
        let mut lanes = [0f32; LANES];
        // SAFETY: `lanes` holds 16 floats.
        unsafe {
            _mm256_storeu_ps(lanes.as_mut_ptr(), lo);
            _mm256_storeu_ps(lanes.as_mut_ptr().add(8), hi);
        }
        tail(lanes, &u[full..d], &c[full..d])
    }

    /// Adds the tail (fewer than 16 elements) to lanes 0.. and combines the lanes.
    #[inline(always)]
    fn tail(mut lanes: [f32; LANES], u: &[f32], c: &[f32]) -> f32 {
        for ((l, &a), &b) in lanes.iter_mut().zip(u).zip(c) {
            *l += a * b;
        }
        combine(lanes, |p, q| p + q)
    }

    /// acc += g·c, then c += g·u, 16 elements at a time. (The generic body compiled for
    /// AVX-512 in its place: `cargo bench -p saintflow-ops --bench sgns` d128_neg1 1.84 ms against 1.34 ms.)
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn update_avx512(u: &[f32], c: &mut [f32], acc: &mut [f32], g: f32) {
        let d = u.len().min(c.len()).min(acc.len());
        let full = d / LANES * LANES;
        let gv = _mm512_set1_ps(g);
        let mut k = 0;
        while k < full {
            // SAFETY: k + 16 ≤ full ≤ every row's length.
            unsafe {
                let (up, cp, ap) = (
                    u.as_ptr().add(k),
                    c.as_mut_ptr().add(k),
                    acc.as_mut_ptr().add(k),
                );
                let cv = _mm512_loadu_ps(cp);
                _mm512_storeu_ps(
                    ap,
                    _mm512_add_ps(_mm512_loadu_ps(ap), _mm512_mul_ps(gv, cv)),
                );
                _mm512_storeu_ps(
                    cp,
                    _mm512_add_ps(cv, _mm512_mul_ps(gv, _mm512_loadu_ps(up))),
                );
            }
            k += LANES;
        }
        update(&u[full..d], &mut c[full..d], &mut acc[full..d], g);
    }

    /// acc += g·c, then c += g·u, 8 elements at a time.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn update_avx2(u: &[f32], c: &mut [f32], acc: &mut [f32], g: f32) {
        let d = u.len().min(c.len()).min(acc.len());
        let full = d / 8 * 8;
        let gv = _mm256_set1_ps(g);
        let mut k = 0;
        while k < full {
            // SAFETY: k + 8 ≤ full ≤ every row's length.
            unsafe {
                let (up, cp, ap) = (
                    u.as_ptr().add(k),
                    c.as_mut_ptr().add(k),
                    acc.as_mut_ptr().add(k),
                );
                let cv = _mm256_loadu_ps(cp);
                _mm256_storeu_ps(
                    ap,
                    _mm256_add_ps(_mm256_loadu_ps(ap), _mm256_mul_ps(gv, cv)),
                );
                _mm256_storeu_ps(
                    cp,
                    _mm256_add_ps(cv, _mm256_mul_ps(gv, _mm256_loadu_ps(up))),
                );
            }
            k += 8;
        }
        update(&u[full..d], &mut c[full..d], &mut acc[full..d], g);
    }

    /// Combines 16 lanes pairwise in registers as [`combine`] does on an array (lane l +
    /// lane l+8, then l + l+4, l + l+2, l + l+1): the same additions, the same bits.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn hsum_avx512(v: __m512) -> f32 {
        // (The upper half through the f64 view: `_mm512_extractf32x8_ps` is AVX512DQ.)
        let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
        let half = _mm256_add_ps(_mm512_castps512_ps256(v), hi);
        hsum8(half)
    }

    /// Lanes 0–7 of 16 after their first pairwise step (l + l+8), combined on.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn hsum8(v: __m256) -> f32 {
        let q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let p = _mm_add_ps(q, _mm_movehl_ps(q, q));
        _mm_cvtss_f32(_mm_add_ss(p, _mm_shuffle_ps::<1>(p, p)))
    }

    /// `$any`: `$fixed::<M>` for a sample of M ≤ 6 terms (the shipped plans' 2, word2vec's
    /// 6), unrolled over its rows; `$fixed::<MAX_SAMPLE_TERMS>` beyond, over the sample's
    /// count at run time.
    macro_rules! by_terms {
        ($any:ident, $feature:literal, $fixed:ident) => {
            #[doc = concat!("[`super::sgns_sample`] for ", $feature, ", by term count.")]
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn $any(
                u: &mut [f32],
                ctx: &mut [&mut [f32]],
                d: usize,
                weights: (f32, f32),
                lr: f32,
                logits: &mut [f32],
            ) {
                // SAFETY (each arm): the CPU has the feature; the caller's contract holds.
                unsafe {
                    match ctx.len() {
                        1 => $fixed::<1>(u, ctx, d, weights, lr, logits),
                        2 => $fixed::<2>(u, ctx, d, weights, lr, logits),
                        3 => $fixed::<3>(u, ctx, d, weights, lr, logits),
                        4 => $fixed::<4>(u, ctx, d, weights, lr, logits),
                        5 => $fixed::<5>(u, ctx, d, weights, lr, logits),
                        6 => $fixed::<6>(u, ctx, d, weights, lr, logits),
                        _ => $fixed::<{ super::MAX_SAMPLE_TERMS }>(u, ctx, d, weights, lr, logits),
                    }
                }
            }
        };
    }
    by_terms!(sample_avx512_any, "avx512f", sample_avx512_fixed);
    by_terms!(sample_avx2_any, "avx2", sample_avx2_fixed);

    /// The rows of a sample of `M` terms as pointers (the slices are distinct `&mut`).
    #[inline(always)]
    fn row_ptrs<const M: usize>(ctx: &mut [&mut [f32]]) -> [*mut f32; M] {
        let mut rows = [std::ptr::null_mut::<f32>(); M];
        for (r, c) in rows.iter_mut().zip(ctx.iter_mut()) {
            *r = c.as_mut_ptr();
        }
        rows
    }

    /// [`super::sgns_sample`] for AVX-512F on `M` terms (below [`super::MAX_SAMPLE_TERMS`]:
    /// exactly M, unrolled over the rows; at it: the sample's count, ≤ M): every logit in one
    /// pass over u (one accumulator each), the gradients broadcast once, then one pass of
    /// the update over every row. The term-by-term operations per lane in their order, so
    /// the same bits.
    #[target_feature(enable = "avx512f")]
    unsafe fn sample_avx512_fixed<const M: usize>(
        u: &mut [f32],
        ctx: &mut [&mut [f32]],
        d: usize,
        weights: (f32, f32),
        lr: f32,
        logits: &mut [f32],
    ) {
        let full = d / LANES * LANES;
        let up = u.as_mut_ptr();
        // Below the most terms, M itself (a constant: the loops unroll); at it, the count.
        let m = if M < super::MAX_SAMPLE_TERMS {
            M
        } else {
            ctx.len()
        };
        let rows = row_ptrs::<M>(ctx);
        let mut acc = [_mm512_setzero_ps(); M];
        let mut i = 0;
        while i < full {
            // SAFETY: i + 16 ≤ full ≤ d ≤ every row's length.
            unsafe {
                let x = _mm512_loadu_ps(up.add(i));
                for (a, &r) in acc[..m].iter_mut().zip(&rows[..m]) {
                    *a = _mm512_add_ps(*a, _mm512_mul_ps(x, _mm512_loadu_ps(r.add(i))));
                }
            }
            i += LANES;
        }
        let ut = &u[full..d];
        for (k, &a) in acc[..m].iter().enumerate() {
            logits[k] = if ut.is_empty() {
                // SAFETY: the CPU has AVX-512F, as this function requires.
                unsafe { hsum_avx512(a) }
            } else {
                let mut l = [0f32; LANES];
                // SAFETY: `l` holds 16 floats.
                unsafe { _mm512_storeu_ps(l.as_mut_ptr(), a) };
                tail(l, ut, &ctx[k][full..d])
            };
        }
        let g = gradients(&logits[..m], weights, lr);
        let gv: [__m512; M] = std::array::from_fn(|k| _mm512_set1_ps(g[k]));
        let mut i = 0;
        while i < full {
            // SAFETY: i + 16 ≤ full ≤ d ≤ every row's length; the rows are distinct.
            unsafe {
                let x = _mm512_loadu_ps(up.add(i));
                let mut a = _mm512_setzero_ps();
                for (&r, &gk) in rows[..m].iter().zip(&gv[..m]) {
                    let c = _mm512_loadu_ps(r.add(i));
                    a = _mm512_add_ps(a, _mm512_mul_ps(gk, c));
                    _mm512_storeu_ps(r.add(i), _mm512_add_ps(c, _mm512_mul_ps(gk, x)));
                }
                _mm512_storeu_ps(up.add(i), _mm512_add_ps(x, a));
            }
            i += LANES;
        }
        tail_update(u, ctx, &g, full, d);
    }

    /// [`super::sgns_sample`] for AVX2 on `M` terms (as [`sample_avx512_fixed`]): every
    /// logit in one pass over u (lanes 0–7 and 8–15 of each in two registers, as
    /// [`dot_avx2`] sums them), the gradients broadcast once, the update 16 elements at a
    /// time. The term-by-term operations per lane in their order, so the same bits.
    #[target_feature(enable = "avx2")]
    unsafe fn sample_avx2_fixed<const M: usize>(
        u: &mut [f32],
        ctx: &mut [&mut [f32]],
        d: usize,
        weights: (f32, f32),
        lr: f32,
        logits: &mut [f32],
    ) {
        let full = d / LANES * LANES;
        let up = u.as_mut_ptr();
        // Below the most terms, M itself (a constant: the loops unroll); at it, the count.
        let m = if M < super::MAX_SAMPLE_TERMS {
            M
        } else {
            ctx.len()
        };
        let rows = row_ptrs::<M>(ctx);
        let mut acc = [[_mm256_setzero_ps(); 2]; M];
        let mut i = 0;
        while i < full {
            // SAFETY: i + 16 ≤ full ≤ d ≤ every row's length.
            unsafe {
                let (x0, x1) = (_mm256_loadu_ps(up.add(i)), _mm256_loadu_ps(up.add(i + 8)));
                for ([lo, hi], &r) in acc[..m].iter_mut().zip(&rows[..m]) {
                    *lo = _mm256_add_ps(*lo, _mm256_mul_ps(x0, _mm256_loadu_ps(r.add(i))));
                    *hi = _mm256_add_ps(*hi, _mm256_mul_ps(x1, _mm256_loadu_ps(r.add(i + 8))));
                }
            }
            i += LANES;
        }
        let ut = &u[full..d];
        for (k, &[lo, hi]) in acc[..m].iter().enumerate() {
            logits[k] = if ut.is_empty() {
                // SAFETY: the CPU has AVX2, as this function requires.
                unsafe { hsum8(_mm256_add_ps(lo, hi)) }
            } else {
                let mut l = [0f32; LANES];
                // SAFETY: `l` holds 16 floats.
                unsafe {
                    _mm256_storeu_ps(l.as_mut_ptr(), lo);
                    _mm256_storeu_ps(l.as_mut_ptr().add(8), hi);
                }
                tail(l, ut, &ctx[k][full..d])
            };
        }
        let g = gradients(&logits[..m], weights, lr);
        let gv: [__m256; M] = std::array::from_fn(|k| _mm256_set1_ps(g[k]));
        let mut i = 0;
        while i + 16 <= d {
            // SAFETY: i + 16 ≤ d ≤ every row's length; the rows are distinct.
            unsafe {
                let (x0, x1) = (_mm256_loadu_ps(up.add(i)), _mm256_loadu_ps(up.add(i + 8)));
                let (mut a0, mut a1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
                for (&r, &gk) in rows[..m].iter().zip(&gv[..m]) {
                    let (c0, c1) = (_mm256_loadu_ps(r.add(i)), _mm256_loadu_ps(r.add(i + 8)));
                    a0 = _mm256_add_ps(a0, _mm256_mul_ps(gk, c0));
                    a1 = _mm256_add_ps(a1, _mm256_mul_ps(gk, c1));
                    _mm256_storeu_ps(r.add(i), _mm256_add_ps(c0, _mm256_mul_ps(gk, x0)));
                    _mm256_storeu_ps(r.add(i + 8), _mm256_add_ps(c1, _mm256_mul_ps(gk, x1)));
                }
                _mm256_storeu_ps(up.add(i), _mm256_add_ps(x0, a0));
                _mm256_storeu_ps(up.add(i + 8), _mm256_add_ps(x1, a1));
            }
            i += 16;
        }
        if i + 8 <= d {
            // SAFETY: i + 8 ≤ d ≤ every row's length; the rows are distinct.
            unsafe {
                let x = _mm256_loadu_ps(up.add(i));
                let mut a = _mm256_setzero_ps();
                for (&r, &gk) in rows[..m].iter().zip(&gv[..m]) {
                    let c = _mm256_loadu_ps(r.add(i));
                    a = _mm256_add_ps(a, _mm256_mul_ps(gk, c));
                    _mm256_storeu_ps(r.add(i), _mm256_add_ps(c, _mm256_mul_ps(gk, x)));
                }
                _mm256_storeu_ps(up.add(i), _mm256_add_ps(x, a));
            }
            i += 8;
        }
        tail_update(u, ctx, &g, i, d);
    }

    /// The update of elements `from..d`, one at a time (the generic body's operations).
    #[inline(always)]
    fn tail_update(u: &mut [f32], ctx: &mut [&mut [f32]], g: &[f32], from: usize, d: usize) {
        for i in from..d {
            let ui = u[i];
            let mut a = 0.0;
            for (c, &gk) in ctx.iter_mut().zip(g) {
                let ci = &mut c[i];
                a += gk * *ci;
                *ci += gk * ui;
            }
            u[i] = ui + a;
        }
    }

    /// u += acc, acc = 0, 16 elements at a time.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn apply_avx512(u: &mut [f32], acc: &mut [f32]) {
        let d = u.len().min(acc.len());
        let full = d / LANES * LANES;
        let zero = _mm512_setzero_ps();
        let mut k = 0;
        while k < full {
            // SAFETY: k + 16 ≤ full ≤ both rows' length.
            unsafe {
                let (up, ap) = (u.as_mut_ptr().add(k), acc.as_mut_ptr().add(k));
                _mm512_storeu_ps(up, _mm512_add_ps(_mm512_loadu_ps(up), _mm512_loadu_ps(ap)));
                _mm512_storeu_ps(ap, zero);
            }
            k += LANES;
        }
        apply(&mut u[full..d], &mut acc[full..d]);
    }
}

/// The loss of one term with logit `s`: −weight·log σ(s) if positive, −weight·log σ(−s)
/// otherwise (stable for large |s|).
pub fn sgns_loss(s: f32, positive: bool, weight: f32) -> f64 {
    let z = f64::from(if positive { s } else { -s });
    // −log σ(z) = log(1 + e^−z) = max(−z, 0) + log(1 + e^−|z|).
    f64::from(weight) * ((-z).max(0.0) + (-z.abs()).exp().ln_1p())
}
