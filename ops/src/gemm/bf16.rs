//! The bf16 product (issue 33, item 4): op(A) and op(B) rounded to bfloat16 as they are
//! packed, multiplied with `vdpbf16ps` (AVX512_BF16) and accumulated in f32; C, and every
//! value outside the product, stays f32. This is what mixed-precision training does with
//! a CPU's bf16 dot product (oneDNN's, PyTorch's autocast): half the bytes per packed
//! operand and twice the multiply-adds per instruction of the f32 AVX-512 tile.
//!
//! Layout: a packed step is a *pair* of consecutive k elements, one 32-bit lane holding
//! (x\[k\], x\[k+1\]) as two bf16 (k even, low half first), since `vdpbf16ps` folds each f32
//! lane of its accumulator with the two products of such a pair. An A panel is ⌈kc/2⌉
//! steps of MR lanes (rows), a B panel ⌈kc/2⌉ steps of NR lanes (columns); an odd kc pads
//! the last pair's high half with zero in both, which adds 0·0. The blocking, threads and
//! shared [`super::PackedB`] are the f32 path's (`run`), with KC pairs per block. Two
//! tiles: 6×64 for the step's wide products, 6×16 where the f32 plan takes AVX2's narrow
//! tile (a C of few columns).
//!
//! Rounding: to nearest even, as `vcvtne2ps2bf16` does — which also reads a subnormal f32
//! as a signed zero and quiets NaN; [`round`] is the same function in plain Rust (the
//! tests' oracle). `vdpbf16ps` adds each pair's two exact products to the lane in turn,
//! high element first, rounding each sum to f32 and flushing subnormal results; the order
//! over k is fixed, so the bits depend on neither the thread count nor the split.

use super::kernel::{ARows, CTile, MicroKernel};

/// Whether this CPU runs the bf16 product: AVX512_BF16 (with the AVX-512F and BW it
/// builds on).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// `x` rounded to bfloat16 as the hardware conversion does (the upper 16 bits of the
/// returned f32 pattern): nearest even; a subnormal reads as zero of its sign; NaN stays
/// NaN, quieted.
pub fn round(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    if b & 0x7f80_0000 == 0 {
        return ((b >> 16) & 0x8000) as u16;
    }
    ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
}

/// The f32 a bf16 pattern stands for.
pub fn widen(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// The AVX512_BF16 tile, 6×64: 24 f32 accumulators of 16 lanes, 4 B vectors of 16 pairs
/// and one broadcast pair of A per step; each `vdpbf16ps` is 32 multiply-adds.
pub(crate) struct Avx512Bf16;

/// The narrow AVX512_BF16 tile, 6×16, for a C of few columns (a GCN's hidden 16, a
/// classifier), where [`super::plan`] puts the f32 product on AVX2's 16-column tile: the
/// wide tile would compute 64 columns for each 16.
pub(crate) struct Avx512Bf16Narrow;

/// Writes the bf16 tile type `$t` of `$nv` vectors per row.
macro_rules! bf16_tile {
    ($t:ident, $nv:literal) => {
        impl MicroKernel for $t {
            const MR: usize = 6;
            const NR: usize = 16 * $nv;
            const K_STEP: usize = 2;

            unsafe fn pack(
                dst: &mut [f32],
                src: *const f32,
                lane_stride: usize,
                k_stride: usize,
                lanes: usize,
                kc: usize,
                width: usize,
            ) {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: forwarded contract; the tile (and so its packing) runs only
                // where the CPU has AVX512_BF16 (`available`, checked by every caller of
                // the bf16 path).
                unsafe {
                    pack_pairs(dst, src, lane_stride, k_stride, lanes, kc, width)
                }
                #[cfg(not(target_arch = "x86_64"))]
                let _ = (dst, src, lane_stride, k_stride, lanes, kc, width);
            }

            unsafe fn tile(steps: usize, a: ARows, b: *const f32, c: CTile) {
                let ARows::Packed(a) = a else {
                    unreachable!("the bf16 path always packs op(A)")
                };
                #[cfg(target_arch = "x86_64")]
                // SAFETY: forwarded contract (the CPU has AVX512_BF16).
                unsafe {
                    tile_6xn::<$nv>(steps, a.cast(), b.cast(), c)
                }
                #[cfg(not(target_arch = "x86_64"))]
                let _ = (steps, a, b, c);
            }
        }
    };
}

bf16_tile!(Avx512Bf16, 4);
bf16_tile!(Avx512Bf16Narrow, 1);

/// The 6×(16·NV) tile over `steps` pairs: `a` holds steps·6 pairs, `b` steps·16·NV pairs
/// (each step 64·NV bytes, 64-byte aligned).
///
/// # Safety
/// The CPU has AVX512_BF16; as [`MicroKernel::tile`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16,avx2,fma")]
unsafe fn tile_6xn<const NV: usize>(steps: usize, a: *const u32, b: *const u32, c: CTile) {
    use std::arch::x86_64::*;
    const MR: usize = 6;
    const { assert!(NV <= 4) };
    let mut acc = [[_mm512_setzero_ps(); NV]; MR];
    super::kernel::prefetch_c(&c);
    let (mut a, mut b) = (a, b);
    for _ in 0..steps {
        // SAFETY: a step of the B panel is 16·NV pairs from b, 64-byte aligned (the panel
        // starts aligned and a step is a multiple of 64 bytes); a + 0..6 is this step of
        // the A panel.
        unsafe {
            let mut bv = [_mm512_setzero_si512(); NV];
            for (h, v) in bv.iter_mut().enumerate() {
                *v = _mm512_load_si512(b.add(h * 16).cast());
            }
            for (i, row) in acc.iter_mut().enumerate() {
                let pair = _mm512_set1_epi32(*a.add(i) as i32);
                let ai = std::mem::transmute::<__m512i, __m512bh>(pair);
                for (h, r) in row.iter_mut().enumerate() {
                    let bh = std::mem::transmute::<__m512i, __m512bh>(bv[h]);
                    *r = _mm512_dpbf16_ps(*r, ai, bh);
                }
            }
            a = a.add(MR);
            b = b.add(NV * 16);
        }
    }
    if c.rows == MR && c.cols == 16 * NV && c.cs == 1 {
        for (i, row) in acc.iter().enumerate() {
            for (h, r) in row.iter().enumerate() {
                // SAFETY: the whole tile is inside C (rows = MR, cols = NR, cs = 1).
                unsafe {
                    let p = c.ptr.add(i * c.rs + h * 16);
                    let v = if c.overwrite {
                        *r
                    } else {
                        _mm512_add_ps(_mm512_loadu_ps(p), *r)
                    };
                    _mm512_storeu_ps(p, v);
                }
            }
        }
    } else {
        // Room for the widest tile (NV ≤ 4).
        let mut tmp = [[0f32; 16]; 6 * 4];
        for (i, row) in acc.iter().enumerate() {
            for (h, r) in row.iter().enumerate() {
                // SAFETY: tmp's row i·NV + h holds 16 floats.
                unsafe { _mm512_storeu_ps(tmp[i * NV + h].as_mut_ptr(), *r) };
            }
        }
        // SAFETY: forwarded contract.
        unsafe { super::kernel::store_partial(tmp.as_flattened(), 16 * NV, c) }
    }
}

/// Packs `lanes` lanes × `kc` elements of k (element (l, t) at `src + l·lane_stride +
/// t·k_stride`) into ⌈kc/2⌉ steps of `width` pairs: `dst` as u32, step s, lane l =
/// (bf16(x[l, 2s]), bf16(x[l, 2s+1])). Lanes past `lanes` and the element past an odd kc
/// are zero. Vector paths for the two layouts the views have (k contiguous: a row of a
/// row-major op(A), a column of a transposed op(B); lanes contiguous: the others), a
/// scalar one otherwise; all round alike ([`round`]).
///
/// # Safety
/// The CPU has AVX512_BF16; the elements named are readable; `dst` holds ⌈kc/2⌉·`width`
/// slots; `lanes` ≤ `width`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16,avx2,fma")]
pub(super) unsafe fn pack_pairs(
    dst: &mut [f32],
    src: *const f32,
    lane_stride: usize,
    k_stride: usize,
    lanes: usize,
    kc: usize,
    width: usize,
) {
    use std::arch::x86_64::*;
    let steps = kc.div_ceil(2);
    assert!(dst.len() >= steps * width && lanes <= width);
    let d = dst.as_mut_ptr().cast::<u32>();
    if lanes < width {
        for s in 0..steps {
            for l in lanes..width {
                // SAFETY: s < steps, l < width: inside dst.
                unsafe { *d.add(s * width + l) = 0 };
            }
        }
    }
    if k_stride == 1 {
        // Each lane's k run is contiguous: convert 32 elements (16 pairs) at a time, in
        // order, and deal the pairs to their steps.
        for l in 0..lanes {
            // SAFETY: lane l < lanes (the contract).
            let row = unsafe { src.add(l * lane_stride) };
            let mut t = 0;
            while t < kc {
                let n = (kc - t).min(32);
                let mut pairs = [0u32; 16];
                // SAFETY: elements t..t+n of the run are readable; pairs holds 16 lanes.
                unsafe {
                    let h = run_pairs(row.add(t), n);
                    _mm512_storeu_si512(pairs.as_mut_ptr().cast(), h);
                }
                for (p, &v) in pairs.iter().enumerate().take(n.div_ceil(2)) {
                    // SAFETY: step t/2 + p < steps, lane l < width.
                    unsafe { *d.add((t / 2 + p) * width + l) = v };
                }
                t += 32;
            }
        }
    } else if lane_stride == 1 {
        // Lanes contiguous: per step, the two k rows' lanes 16 at a time, converted
        // together and interleaved into pairs.
        for s in 0..steps {
            let t = 2 * s;
            let second = t + 1 < kc;
            for l0 in (0..lanes).step_by(16) {
                let m = low_mask((lanes - l0).min(16));
                // SAFETY: elements (l0..l0+16 masked to lanes, t and t+1 < kc) are
                // readable; the store writes lanes l0.. of step s, inside dst.
                unsafe {
                    let r0 = src.add(t * k_stride + l0);
                    let p = lane_pairs(r0, second.then(|| r0.add(k_stride)), m);
                    _mm512_mask_storeu_epi32(d.add(s * width + l0).cast(), m, p);
                }
            }
        }
    } else {
        for s in 0..steps {
            for l in 0..lanes {
                let at = |t: usize| {
                    if t < kc {
                        // SAFETY: l < lanes, t < kc (the contract).
                        round(unsafe { *src.add(l * lane_stride + t * k_stride) }) as u32
                    } else {
                        0
                    }
                };
                // SAFETY: s < steps, l < width.
                unsafe { *d.add(s * width + l) = at(2 * s) | (at(2 * s + 1) << 16) };
            }
        }
    }
}

/// The 16 pairs of `n` (≤ 32) contiguous elements from `run` (pair p = (x\[2p\],
/// x\[2p+1\]), those past `n` zero), rounded as [`round`].
///
/// # Safety
/// The CPU has AVX512_BF16; elements 0..n from `run` are readable.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
#[inline]
pub(super) unsafe fn run_pairs(run: *const f32, n: usize) -> std::arch::x86_64::__m512i {
    use std::arch::x86_64::*;
    // SAFETY: the masked loads read elements 0..n only.
    unsafe {
        let lo = _mm512_maskz_loadu_ps(low_mask(n.min(16)), run);
        let hi = _mm512_maskz_loadu_ps(low_mask(n.saturating_sub(16)), run.wrapping_add(16));
        std::mem::transmute::<__m512bh, __m512i>(_mm512_cvtne2ps_pbh(hi, lo))
    }
}

/// The pairs of 16 lanes (masked by `m`) from two consecutive k rows, `first` and
/// `second` (zeros without it): lane l = (first\[l\], second\[l\]), rounded as [`round`].
///
/// # Safety
/// The CPU has AVX512_BF16; the lanes of `m` are readable from both rows.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
#[inline]
pub(super) unsafe fn lane_pairs(
    first: *const f32,
    second: Option<*const f32>,
    m: u16,
) -> std::arch::x86_64::__m512i {
    use std::arch::x86_64::*;
    // Element e of the converted pair of rows: e < 16 from `first`, the rest from
    // `second`; the permutation interleaves them lane by lane.
    let idx = _mm512_set_epi16(
        31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4,
        19, 3, 18, 2, 17, 1, 16, 0,
    );
    // SAFETY: the masked loads read the lanes of `m` only.
    unsafe {
        let r0 = _mm512_maskz_loadu_ps(m, first);
        let r1 = match second {
            Some(p) => _mm512_maskz_loadu_ps(m, p),
            None => _mm512_setzero_ps(),
        };
        let h = std::mem::transmute::<__m512bh, __m512i>(_mm512_cvtne2ps_pbh(r1, r0));
        _mm512_permutexvar_epi16(idx, h)
    }
}

/// The mask of the lowest `n` (≤ 16) lanes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn low_mask(n: usize) -> u16 {
    if n >= 16 {
        u16::MAX
    } else {
        (1u16 << n) - 1
    }
}

/// The packed pair of lane `l`, step `s` of a row-major `lanes`×`kc` block, by the
/// definition (zero past the block): the packers' oracle.
#[cfg(test)]
pub(super) fn pair_of(x: &[f32], (lanes, kc): (usize, usize), l: usize, s: usize) -> u32 {
    let at = |t: usize| {
        if l < lanes && t < kc {
            round(x[l * kc + t]) as u32
        } else {
            0
        }
    };
    at(2 * s) | (at(2 * s + 1) << 16)
}

/// Values whose rounding to bf16 is hostile (ties both ways, subnormals, infinities, quiet
/// and signalling NaNs of both signs, the largest finite values), then 4000 random bit
/// patterns: what every rounding of this crate is checked against [`round`] on.
#[cfg(test)]
pub(super) fn hostile_values() -> Vec<f32> {
    let mut xs = vec![
        0.0f32,
        -0.0,
        1.0,
        1.003_906_3, // halfway, even below: stays 1.0
        1.011_718_8, // halfway, odd below: rounds up
        f32::MAX,
        f32::MIN_POSITIVE,
        1e-40, // subnormal: zero
        -1e-40,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::from_bits(0x7f80_0001), // signalling NaN
        f32::from_bits(0xff80_0001),
        f32::from_bits(0x7f7f_ffff),
        3.4e38,
    ];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..4000 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        xs.push(f32::from_bits((state >> 32) as u32));
    }
    xs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_matches_the_hardware_conversion_on_hostile_values() {
        let xs = hostile_values();
        assert_eq!(round(1.003_906_3), 0x3f80);
        assert_eq!(round(1.011_718_8), 0x3f82);
        assert_eq!(round(-1e-40), 0x8000);
        if !available() {
            return;
        }
        // The vector packer (k contiguous) converts with the instruction; compare lane
        // by lane with `round`.
        let kc = xs.len();
        let mut dst = vec![0f32; kc.div_ceil(2)];
        // SAFETY: the CPU has AVX512_BF16; one lane of kc readable elements; dst holds
        // ⌈kc/2⌉ slots.
        unsafe { pack_pairs(&mut dst, xs.as_ptr(), 0, 1, 1, kc, 1) };
        for (t, &x) in xs.iter().enumerate() {
            let pair = dst[t / 2].to_bits();
            let got = if t % 2 == 0 {
                pair & 0xffff
            } else {
                pair >> 16
            } as u16;
            let want = round(x);
            let both_nan = widen(got).is_nan() && widen(want).is_nan();
            assert!(
                got == want || both_nan,
                "{x:e} ({:08x}): hardware {got:04x}, round {want:04x}",
                x.to_bits()
            );
        }
    }

    #[test]
    fn every_packing_layout_gives_the_same_pairs() {
        if !available() {
            return;
        }
        // A 7 × 13 block (odd both ways) read with lanes along rows and along columns.
        let (lanes, kc, width) = (7usize, 13usize, 16usize);
        let x: Vec<f32> = (0..lanes * kc)
            .map(|i| (i as f32 * 0.37).sin() * 3.0)
            .collect();
        let want: Vec<u32> = (0..kc.div_ceil(2) * width)
            .map(|i| pair_of(&x, (lanes, kc), i % width, i / width))
            .collect();
        let xt: Vec<f32> = (0..kc * lanes)
            .map(|i| x[(i % lanes) * kc + i / lanes])
            .collect();
        for (what, src, ls, ks) in [
            ("k contiguous", &x, kc, 1),
            ("lanes contiguous", &xt, 1, lanes),
        ] {
            let mut dst = vec![f32::NAN; kc.div_ceil(2) * width];
            // SAFETY: the CPU has AVX512_BF16; every (l, t) is inside src; dst's size.
            unsafe { pack_pairs(&mut dst, src.as_ptr(), ls, ks, lanes, kc, width) };
            let got: Vec<u32> = dst.iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want, "{what}");
        }
        // Neither stride 1: the scalar path.
        let mut dst = vec![f32::NAN; kc.div_ceil(2) * width];
        let spread: Vec<f32> = x.iter().flat_map(|&v| [v, f32::NAN]).collect();
        // SAFETY: as above, every other element.
        unsafe { pack_pairs(&mut dst, spread.as_ptr(), 2 * kc, 2, lanes, kc, width) };
        let got: Vec<u32> = dst.iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, want, "strided");
    }
}
