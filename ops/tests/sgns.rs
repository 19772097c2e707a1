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
use saintflow_ops::naive;
use saintflow_ops::sgns::{sgns_apply, sgns_loss, sgns_term, sigmoid};

const DIMS: [usize; 8] = [0, 1, 3, 15, 16, 17, 128, 131];

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
