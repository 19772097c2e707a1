//! `Real`: the float types the kernels run on (f32 for the engine, f64 for the tests'
//! finite-difference reference path), with e^x and e^x − 1 in a form that vectorises for
//! f32. `f32::exp` is a libm call per element (≈ 4 ns: the sigmoid over 4 M floats took
//! 16 ms against a 1.4 ms memory bound, BENCHMARKS.md); the polynomial below is plain
//! arithmetic, so the loops that use it compile to SIMD. f64 keeps libm's exp, exact to
//! half an ulp, since the f64 path exists to be the accurate reference.
//!
//! f32 method (Cephes `expf`): e^x = 2^n · e^r with n = round(x / ln 2) and
//! r = x − n·ln 2 ∈ [−ln2/2, ln2/2], ln 2 split in two (C1 has 9 significant bits, so n·C1
//! is exact for |n| < 2¹⁵); e^r − 1 = r + r²·P(r), P of degree 5 (error ≤ 1 ulp on that
//! interval, 2 in all, checked against f64 by the tests); 2^n applied as two factors
//! 2^⌊n/2⌋ · 2^⌈n/2⌉, each a normal float for n ∈ [−150, 129], so results that underflow
//! to subnormals or 0 and those that overflow to ∞ come out as libm's do.

use num_traits::Float;

/// A float type the kernels accept.
pub trait Real: Float + Send + Sync + 'static {
    /// e^x (f32: the vectorising polynomial, ≤ 2 ulp; f64: libm).
    fn exp_fast(self) -> Self;
    /// e^x − 1, accurate near 0 as `exp_m1` is (f32: from the same polynomial).
    fn exp_m1_fast(self) -> Self;
    /// ln(1 + x) for x ∈ [0, 1] only (the BCE loss's ln(1 + e^−|z|)); f32: a series in
    /// arithmetic only, ≤ 4 ulp there (2.85 the worst of 34 M points tested); f64: libm.
    fn ln_1p_unit(self) -> Self;
}

impl Real for f64 {
    #[inline(always)]
    fn exp_fast(self) -> f64 {
        self.exp()
    }

    #[inline(always)]
    fn exp_m1_fast(self) -> f64 {
        self.exp_m1()
    }

    #[inline(always)]
    fn ln_1p_unit(self) -> f64 {
        self.ln_1p()
    }
}

impl Real for f32 {
    #[inline(always)]
    fn exp_fast(self) -> f32 {
        let (q, s1, s2) = exp_parts(self);
        (q + 1.0) * s1 * s2
    }

    #[inline(always)]
    fn exp_m1_fast(self) -> f32 {
        // e^x − 1 = 2^n (q + 1) − 1 = 2^n q + (2^n − 1): for n = 0 it is q itself, which
        // keeps its relative accuracy as x → 0; for |n| ≥ 1, |e^x − 1| ≥ 0.29 and nothing
        // cancels. From n = 128 on, 2^n alone overflows: there e^x − 1 = e^x (to f32).
        let (q, s1, s2) = exp_parts(self);
        let s = s1 * s2;
        if s.is_finite() {
            s * q + (s - 1.0)
        } else {
            (q + 1.0) * s1 * s2
        }
    }

    #[inline(always)]
    fn ln_1p_unit(self) -> f32 {
        // ln(1 + x) = 2 atanh(s) = 2s (1 + s²/3 + s⁴/5 + …) with s = x / (2 + x) ∈ [0, ⅓]:
        // the series through s¹⁴/15 leaves (1/9)⁸/17 < 2·10⁻⁹ (relative) out, and s keeps
        // its relative accuracy as x → 0 (no 1 + x is rounded away).
        let s = self / (2.0 + self);
        let w = s * s;
        let p = 1.0 / 15.0;
        let p = p * w + 1.0 / 13.0;
        let p = p * w + 1.0 / 11.0;
        let p = p * w + 1.0 / 9.0;
        let p = p * w + 1.0 / 7.0;
        let p = p * w + 1.0 / 5.0;
        let p = p * w + 1.0 / 3.0;
        let p = p * w + 1.0;
        2.0 * s * p
    }
}

/// (e^r − 1, 2^⌊n/2⌋, 2^⌈n/2⌉) for x = n·ln 2 + r. NaN gives NaN in q.
#[inline(always)]
fn exp_parts(x: f32) -> (f32, f32, f32) {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const C1: f32 = 0.693_359_4; // 355/512
    const C2: f32 = -2.121_944_4e-4; // ln 2 − C1

    // Rounds to the nearest integer for |v| < 2²²: adding 1.5·2²³ leaves no fraction bits.
    const ROUND: f32 = 12_582_912.0;
    // e^−104 < 2⁻¹⁴⁹·½ and e^89 > f32::MAX: clamping there changes no result.
    let x = x.clamp(-104.0, 89.0);
    let t = x * LOG2E + ROUND;
    let n = t - ROUND;
    // t lies in [2²³, 2²⁴), where consecutive floats are 1 apart, so n is also the
    // difference of the bit patterns: an integer subtraction, where `n as i32` would be a
    // saturating conversion that does not vectorise.
    let ni = (t.to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32);
    let r = (x - n * C1) - n * C2;
    let p = 1.987_569_2e-4;
    let p = p * r + 1.398_2e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 0.5; // Cephes: 5.0000001201e-1, which is 0.5 in f32
    let q = p * r * r + r;
    let n1 = ni >> 1;
    let n2 = ni.wrapping_sub(n1);
    // (NaN gives a meaningless ni; the result is NaN through q anyway.)
    let pow2 = |k: i32| f32::from_bits((k.wrapping_add(127) as u32) << 23);
    (q, pow2(n1), pow2(n2))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in units of the last place of `want` rounded to f32 (subnormals counted in
    /// 2⁻¹⁴⁹); an ∞ result counts as right when `want` is within 2 ulp of overflowing.
    fn ulps(got: f32, want: f64) -> f64 {
        let max = f64::from(f32::MAX);
        let ulp_max = max - f64::from(f32::from_bits(f32::MAX.to_bits() - 1));
        if got.is_infinite() {
            return if got > 0.0 && want >= max - 2.0 * ulp_max {
                0.0
            } else {
                f64::INFINITY
            };
        }
        let w = (want as f32).abs();
        let ulp = if w.is_infinite() {
            ulp_max
        } else if w < f32::MIN_POSITIVE {
            f64::from(f32::from_bits(1))
        } else {
            f64::from(f32::from_bits(w.to_bits() + 1)) - f64::from(w)
        };
        (f64::from(got) - want).abs() / ulp
    }

    #[test]
    fn f32_exp_within_two_ulps_over_its_whole_range() {
        // Every 97th float from −110 to 95 (≈ 20 M values) and the edges.
        let (lo, hi) = (-110f32, 95f32);
        let mut worst = (0.0, 0f32);
        let mut x = lo;
        let mut check = |x: f32| {
            let e = ulps(x.exp_fast(), f64::from(x).exp());
            let m = ulps(x.exp_m1_fast(), f64::from(x).exp_m1());
            assert!(e <= 2.0, "exp({x:e}) = {} is {e} ulp off", x.exp_fast());
            assert!(
                m <= 2.0,
                "exp_m1({x:e}) = {} is {m} ulp off",
                x.exp_m1_fast()
            );
            if e.max(m) > worst.0 {
                worst = (e.max(m), x);
            }
        };
        while x < hi {
            check(x);
            // Step through the bit patterns so tiny |x| are covered as densely as large.
            let b = x.to_bits();
            x = f32::from_bits(if x < 0.0 {
                if b <= 0x8000_0000 + 97 {
                    0
                } else {
                    b - 97
                }
            } else {
                b + 97
            });
        }
        for x in [
            0.0, -0.0, 1e-30, -1e-30, 88.72, 88.73, -87.33, -103.9, -104.0, -200.0, 200.0,
        ] {
            check(x);
        }
        assert!(worst.0 <= 2.0, "worst {worst:?}");
    }

    #[test]
    fn f32_ln_1p_within_four_ulps_on_the_unit_interval() {
        // Every 31st float in [0, 1]: ≈ 34 M, from subnormals to 1.
        let mut b = 0u32;
        while b <= 1f32.to_bits() {
            let x = f32::from_bits(b);
            let e = ulps(x.ln_1p_unit(), f64::from(x).ln_1p());
            assert!(e <= 4.0, "ln_1p({x:e}) = {} is {e} ulp off", x.ln_1p_unit());
            b += 31;
        }
        assert_eq!(0f32.ln_1p_unit(), 0.0);
        assert!(ulps(1f32.ln_1p_unit(), 2f64.ln()) <= 4.0);
    }

    #[test]
    fn f32_exp_specials() {
        assert_eq!(f32::INFINITY.exp_fast(), f32::INFINITY);
        assert_eq!(f32::NEG_INFINITY.exp_fast(), 0.0);
        assert_eq!(f32::NEG_INFINITY.exp_m1_fast(), -1.0);
        assert!(f32::NAN.exp_fast().is_nan());
        assert!(f32::NAN.exp_m1_fast().is_nan());
        assert_eq!(0f32.exp_fast(), 1.0);
        assert_eq!(0f32.exp_m1_fast(), 0.0);
        assert_eq!((-1e-30f32).exp_m1_fast(), -1e-30);
    }
}
