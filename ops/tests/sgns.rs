//! The SGNS step ([`saintflow_ops::sgns`]) against its naive f64 oracle over hostile dims
//! (0, 1, odd, a lane multiple and one past, wider than a vector), one whole sample at a
//! time: a positive term, negatives with a repeat and one equal to the positive (the
//! terms must run in order, each on the rows the earlier ones left), then u += acc.
//!
//! Tolerance: the kernel sums the dot in lanes, the oracle in f64, so a logit differs by at
//! most 2·d·u·Σ|u_i||c_i| (u = 2⁻²⁴); g = lr·w·(y − σ(s)) then by lr·w/4 times that (σ' ≤
//! 1/4), and an element by |Δg|·(|c_i| + |u_i|) per term plus a rounding of 2u per stored
//! value. Terms compound, so the bound sums over the sample's terms with the largest
//! magnitudes seen. A sign or index mistake moves an element by about lr·w·|c_i| ≈ 1e-2,
//! far above it.

mod common;

use common::{values, U};
use saintflow_ops::isa::Isa;
use saintflow_ops::naive;
use saintflow_ops::sgns::{sgns_apply, sgns_loss, sgns_sample, sgns_sample_on, sgns_term, sigmoid};

const DIMS: [usize; 9] = [0, 1, 3, 15, 16, 17, 27, 128, 131];

/// A term kernel: (u, c, acc, positive, weight, lr) → logit.
type Term = fn(&[f32], &mut [f32], &mut [f32], bool, f32, f32) -> f32;

/// Runs one sample (positive context 0; negatives 1, 2, 1, 0) through `term` and `apply`.
fn sample(
    d: usize,
    seed: u64,
    term: Term,
    apply: fn(&mut [f32], &mut [f32]),
) -> (Vec<f32>, Vec<Vec<f32>>, Vec<f32>) {
    let mut u = values(d, seed);
    let mut ctx: Vec<Vec<f32>> = (0..3).map(|k| values(d, seed + 10 + k)).collect();
    let mut acc = vec![0f32; d];
    let mut logits = Vec::new();
    for (k, (c, pos, w)) in [
        (0, true, 1.0),
        (1, false, 5.0),
        (2, false, 5.0),
        (1, false, 5.0),
        (0, false, 5.0),
    ]
    .into_iter()
    .enumerate()
    {
        let lr = 0.025 * (1.0 - k as f32 * 0.1);
        logits.push(term(&u, &mut ctx[c], &mut acc, pos, w, lr));
    }
    apply(&mut u, &mut acc);
    assert!(
        acc.iter().all(|&a| a == 0.0),
        "acc is cleared for the next sample"
    );
    (u, ctx, logits)
}

#[test]
fn sgns_sample_matches_the_naive_oracle() {
    for d in DIMS {
        for seed in [1, 7, 99] {
            let (u, ctx, s) = sample(d, seed, sgns_term, sgns_apply);
            let (u0, ctx0, s0) = sample(d, seed, naive::sgns::sgns_term, naive::sgns::sgns_apply);
            // Entries are in [−1, 1) and move by at most lr·w·|·| per term: ≤ 2 in magnitude.
            let m = 2.0f64;
            let ds = 2.0 * d as f64 * U * d as f64 * m * m;
            let terms = 5.0;
            let tol = terms * (0.025 * 5.0 / 4.0 * ds * 2.0 * m + 2.0 * U * m) + 1e-12;
            for (k, (&a, &b)) in s.iter().zip(&s0).enumerate() {
                assert!(
                    (f64::from(a) - f64::from(b)).abs() <= ds + 1e-12,
                    "d {d} seed {seed}: logit {k}: {a} vs {b}"
                );
            }
            for (i, (&a, &b)) in u.iter().zip(&u0).enumerate() {
                assert!(
                    (f64::from(a) - f64::from(b)).abs() <= tol,
                    "d {d} seed {seed}: u[{i}] {a} vs {b}, tol {tol:e}"
                );
            }
            for (c, (r, r0)) in ctx.iter().zip(&ctx0).enumerate() {
                for (i, (&a, &b)) in r.iter().zip(r0).enumerate() {
                    assert!(
                        (f64::from(a) - f64::from(b)).abs() <= tol,
                        "d {d} seed {seed}: ctx {c}[{i}] {a} vs {b}, tol {tol:e}"
                    );
                }
            }
            // The step did something (a no-op kernel would pass the comparison only if the
            // oracle were a no-op too): the rows moved.
            if d > 0 {
                assert!(u != values(d, seed), "d {d}: u moved");
            }
        }
    }
}

#[test]
fn a_positive_step_raises_the_logit_and_a_negative_step_lowers_it() {
    let d = 64;
    let u0 = values(d, 3);
    for positive in [true, false] {
        let (mut u, mut c, mut acc) = (u0.clone(), values(d, 4), vec![0f32; d]);
        let before = sgns_term(&u, &mut c, &mut acc, positive, 1.0, 0.1);
        sgns_apply(&mut u, &mut acc);
        let mut scratch = vec![0f32; d];
        let after = sgns_term(&u, &mut c.clone(), &mut scratch, positive, 1.0, 0.0);
        assert_eq!(
            positive,
            after > before,
            "positive {positive}: {before} → {after}"
        );
        assert!(sgns_loss(after, positive, 1.0) < sgns_loss(before, positive, 1.0));
    }
}

#[test]
fn sigmoid_is_within_two_ulp_of_the_f64_one() {
    // Every 1/4096 over the clamped range, and the clamp's ends.
    let mut worst = 0f64;
    for k in -(15 * 4096)..=(15 * 4096) {
        let s = k as f32 / 4096.0;
        let exact = 1.0 / (1.0 + (-f64::from(s)).exp());
        let got = f64::from(sigmoid(s));
        let ulp = f64::from(f32::EPSILON) * exact.max(f64::from(f32::MIN_POSITIVE));
        worst = worst.max((got - exact).abs() / ulp);
    }
    assert!(worst <= 2.0, "σ off by {worst} ulp");
}

#[test]
fn sigmoid_and_loss_are_finite_far_out() {
    assert_eq!(sigmoid(0.0), 0.5);
    assert!(sigmoid(1e30) < 1.0 + 1e-6 && sigmoid(-1e30) >= 0.0);
    for s in [-1e30f32, -100.0, 0.0, 100.0, 1e30] {
        assert!(sgns_loss(s, true, 5.0).is_finite() && sgns_loss(s, false, 5.0).is_finite());
    }
    assert!((sgns_loss(0.0, true, 1.0) - std::f64::consts::LN_2).abs() < 1e-12);
}

/// Term counts of a sample: one (the positive alone), the shipped plans' two, each count
/// the kernels unroll (up to word2vec's five negatives), past them (7, a dynamic count),
/// and the most the kernel takes.
const TERMS: [usize; 8] = [1, 2, 3, 4, 5, 6, 7, saintflow_ops::sgns::MAX_SAMPLE_TERMS];

/// One sample of `m` terms on distinct context rows, by `sgns_sample_on(isa)` and by the
/// term-by-term kernel (`sgns_term` in order with a zeroed acc, then `sgns_apply`), from
/// the same rows: (u, context rows, logits) of each.
#[allow(clippy::type_complexity)]
fn sample_both(
    isa: Isa,
    d: usize,
    m: usize,
    seed: u64,
    lr: f32,
) -> [(Vec<f32>, Vec<Vec<f32>>, Vec<f32>); 2] {
    let u0 = values(d, seed);
    // Rows scaled up so that logits spread over σ's range (saturated ones included).
    let ctx0: Vec<Vec<f32>> = (0..m)
        .map(|k| {
            values(d, seed + 100 + k as u64)
                .iter()
                .map(|x| x * (1.0 + k as f32))
                .collect()
        })
        .collect();
    let (mut u, mut ctx, mut logits) = (u0.clone(), ctx0.clone(), vec![0f32; m]);
    let mut rows: Vec<&mut [f32]> = ctx.iter_mut().map(|r| r.as_mut_slice()).collect();
    sgns_sample_on(isa, &mut u, &mut rows, (1.0, 5.0), lr, &mut logits);
    let (mut u1, mut ctx1, mut acc) = (u0, ctx0, vec![0f32; d]);
    let logits1: Vec<f32> = ctx1
        .iter_mut()
        .enumerate()
        .map(|(k, c)| sgns_term(&u1, c, &mut acc, k == 0, if k == 0 { 1.0 } else { 5.0 }, lr))
        .collect();
    sgns_apply(&mut u1, &mut acc);
    [(u, ctx, logits), (u1, ctx1, logits1)]
}

#[test]
fn a_whole_sample_is_the_term_by_term_kernel_bit_for_bit_on_every_path() {
    for isa in Isa::supported() {
        for d in DIMS {
            for m in TERMS {
                for seed in [1, 5] {
                    let [(u, ctx, s), (u1, ctx1, s1)] = sample_both(isa, d, m, seed, 0.025);
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    let at = format!("{isa:?} d {d} terms {m} seed {seed}");
                    assert_eq!(bits(&s), bits(&s1), "{at}: logits");
                    assert_eq!(bits(&u), bits(&u1), "{at}: u");
                    for (k, (r, r1)) in ctx.iter().zip(&ctx1).enumerate() {
                        assert_eq!(bits(r), bits(r1), "{at}: context row {k}");
                    }
                }
            }
        }
    }
}

#[test]
fn a_whole_sample_matches_the_naive_oracle() {
    // The oracle's f64 sums against the kernel's f32 lanes, the bound of
    // `sgns_sample_matches_the_naive_oracle` with this test's row magnitudes (≤ m).
    for isa in Isa::supported() {
        for d in [1, 17, 128, 131] {
            for m in [2, 6] {
                let [(u, ctx, s), _] = sample_both(isa, d, m, 3, 0.025);
                let u0 = values(d, 3);
                let mut ctx0: Vec<Vec<f32>> = (0..m)
                    .map(|k| {
                        values(d, 103 + k as u64)
                            .iter()
                            .map(|x| x * (1.0 + k as f32))
                            .collect()
                    })
                    .collect();
                let (mut un, mut acc) = (u0, vec![0f32; d]);
                let sn: Vec<f32> = ctx0
                    .iter_mut()
                    .enumerate()
                    .map(|(k, c)| {
                        naive::sgns::sgns_term(
                            &un,
                            c,
                            &mut acc,
                            k == 0,
                            if k == 0 { 1.0 } else { 5.0 },
                            0.025,
                        )
                    })
                    .collect();
                naive::sgns::sgns_apply(&mut un, &mut acc);
                let mag = 1.0 + m as f64;
                let ds = 2.0 * d as f64 * U * d as f64 * mag * mag;
                let tol = m as f64 * (0.025 * 5.0 / 4.0 * ds * 2.0 * mag + 2.0 * U * mag) + 1e-12;
                for (k, (&a, &b)) in s.iter().zip(&sn).enumerate() {
                    assert!(
                        (f64::from(a) - f64::from(b)).abs() <= ds + 1e-12,
                        "{isa:?} d {d}: logit {k}: {a} vs {b}"
                    );
                }
                for (i, (&a, &b)) in u.iter().zip(&un).enumerate() {
                    assert!(
                        (f64::from(a) - f64::from(b)).abs() <= tol,
                        "{isa:?} d {d}: u[{i}] {a} vs {b}"
                    );
                }
                for (c, (r, r0)) in ctx.iter().zip(&ctx0).enumerate() {
                    for (i, (&a, &b)) in r.iter().zip(r0).enumerate() {
                        assert!(
                            (f64::from(a) - f64::from(b)).abs() <= tol,
                            "{isa:?} d {d}: ctx {c}[{i}] {a} vs {b}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
#[should_panic(expected = "sgns_sample")]
fn a_sample_needs_a_logit_per_term() {
    let (mut u, mut c) = (vec![0f32; 4], vec![0f32; 4]);
    sgns_sample(&mut u, &mut [c.as_mut_slice()], (1.0, 5.0), 0.025, &mut []);
}
