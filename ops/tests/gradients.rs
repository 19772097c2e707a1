//! Every backward against central finite differences on the f64 path (the kernels are
//! generic; f64 makes h = 1e-6 differences accurate to ~1e-9, so a tolerance of 1e-6
//! relative catches any wrong term). Inputs avoid the kinks of ReLU-like ops (|x| > 1e-3),
//! include zero rows, masked and unlabelled rows, and extreme logits.

mod common;

use saintflow_ops::elementwise::*;
use saintflow_ops::loss::{sigmoid_bce, softmax_cross_entropy};
use saintflow_ops::optim::{Adam, Sgd};

const H: f64 = 1e-6;

fn rand_vec(n: usize, seed: u64, scale: f64) -> Vec<f64> {
    // Kept away from 0 so ReLU-like kinks are not straddled by ±h.
    common::uniform(n, seed)
        .into_iter()
        .map(|u| scale * if u.abs() < 1e-3 { 0.5 } else { u })
        .collect()
}

/// Checks `grad` = ∂L/∂x by central differences of `loss` at `x`.
fn check(name: &str, x: &[f64], grad: &[f64], loss: impl Fn(&[f64]) -> f64) {
    assert_eq!(x.len(), grad.len());
    let mut xp = x.to_vec();
    for i in 0..x.len() {
        xp[i] = x[i] + H;
        let lp = loss(&xp);
        xp[i] = x[i] - H;
        let lm = loss(&xp);
        xp[i] = x[i];
        let fd = (lp - lm) / (2.0 * H);
        let tol = 1e-6 * (1.0 + grad[i].abs().max(fd.abs()));
        assert!(
            (fd - grad[i]).abs() <= tol,
            "{name}: ∂/∂x[{i}]: analytic {}, finite difference {fd}",
            grad[i]
        );
    }
}

/// L = Σ r ⊙ op(x) for a fixed random projection r, so dy = r.
fn check_unary(
    name: &str,
    n: usize,
    fwd: impl Fn(&[f64], &mut [f64]),
    bwd: impl Fn(&[f64], &[f64], &[f64], &mut [f64]),
) {
    let x = rand_vec(n, 1, 3.0);
    let r = rand_vec(n, 2, 1.0);
    let mut y = vec![0.0; n];
    fwd(&x, &mut y);
    let mut dx = vec![0.0; n];
    bwd(&x, &y, &r, &mut dx);
    check(name, &x, &dx, |x| {
        let mut y = vec![0.0; n];
        fwd(x, &mut y);
        y.iter().zip(&r).map(|(a, b)| a * b).sum()
    });
}

#[test]
fn activations() {
    for n in [1, 7, 40_000] {
        let n_check = n.min(300);
        check_unary(
            "relu",
            n_check,
            |x, y| relu(x, y).unwrap(),
            |_, y, dy, dx| relu_backward(y, dy, dx).unwrap(),
        );
        check_unary(
            "leaky_relu",
            n_check,
            |x, y| leaky_relu(x, 0.2, y).unwrap(),
            |x, _, dy, dx| leaky_relu_backward(x, 0.2, dy, dx).unwrap(),
        );
        check_unary(
            "sigmoid",
            n_check,
            |x, y| sigmoid(x, y).unwrap(),
            |_, y, dy, dx| sigmoid_backward(y, dy, dx).unwrap(),
        );
        check_unary(
            "elu",
            n_check,
            |x, y| elu(x, 1.0, y).unwrap(),
            |x, y, dy, dx| elu_backward(x, y, 1.0, dy, dx).unwrap(),
        );
    }
    // Parallel chunks give the same values as the definition on a large input.
    let x: Vec<f32> = (0..100_000)
        .map(|i| (i as f32 - 50_000.0) / 1000.0)
        .collect();
    let mut y = vec![0f32; x.len()];
    sigmoid(&x, &mut y).unwrap();
    for (i, (&a, &b)) in x.iter().zip(&y).enumerate() {
        let want = 1.0 / (1.0 + (-f64::from(a)).exp());
        assert!((f64::from(b) - want).abs() < 1e-6, "sigmoid({a}) at {i}");
    }
    // Extreme inputs stay finite.
    let big = [1e4f32, -1e4, 88.0, -104.0];
    let mut out = [0f32; 4];
    sigmoid(&big, &mut out).unwrap();
    assert_eq!(out, [1.0, 0.0, 1.0, 0.0]);
}

#[test]
fn dropout_gradient_and_statistics() {
    let n = 20_000;
    let p = 0.3;
    let stream = common::xorshift;
    let x = rand_vec(n, 3, 1.0);
    let r = rand_vec(n, 4, 1.0);
    let (mut y, mut mask) = (vec![0.0; n], vec![0u8; n]);
    dropout(&x, p, stream(9), &mut y, &mut mask).unwrap();
    let kept = mask.iter().filter(|&&m| m == 1).count() as f64 / n as f64;
    let sd = (p * (1.0 - p) / n as f64).sqrt();
    assert!((kept - (1.0 - p)).abs() < 5.0 * sd, "kept fraction {kept}");
    // Inverted scaling keeps the sum in expectation.
    let ones = vec![1.0; n];
    let mut y1 = vec![0.0; n];
    dropout(&ones, p, stream(10), &mut y1, &mut mask.clone()).unwrap();
    let mean = y1.iter().sum::<f64>() / n as f64;
    assert!((mean - 1.0).abs() < 5.0 * sd / (1.0 - p), "mean {mean}");
    let mut dx = vec![0.0; n];
    dropout_backward(&mask, p, &r, &mut dx).unwrap();
    let m = 500;
    check("dropout", &x[..m], &dx[..m], |xs| {
        let (mut y, mut mk) = (vec![0.0; n], vec![0u8; n]);
        let mut full = x.clone();
        full[..m].copy_from_slice(xs);
        dropout(&full, p, stream(9), &mut y, &mut mk).unwrap();
        y.iter().zip(&r).map(|(a, b)| a * b).sum()
    });
    assert!(dropout(&x, 1.0, stream(1), &mut y, &mut mask).is_err());
}

#[test]
fn bias_add_and_its_gradient() {
    let (n, f) = (9, 5);
    let x = rand_vec(n * f, 5, 1.0);
    let b = rand_vec(f, 6, 1.0);
    let r = rand_vec(n * f, 7, 1.0);
    let mut db = vec![0.0; f];
    bias_add_backward(&r, &mut db).unwrap();
    check("bias_add (b)", &b, &db, |b| {
        let mut y = x.clone();
        bias_add(&mut y, b).unwrap();
        y.iter().zip(&r).map(|(a, c)| a * c).sum()
    });
    let mut y = x.clone();
    bias_add(&mut y, &b).unwrap();
    assert_eq!(y[2 * f + 3], x[2 * f + 3] + b[3]);
    assert!(bias_add(&mut [0.0; 7], &b).is_err());
}

#[test]
fn row_l2_normalisation() {
    let (n, f) = (6, 4);
    let mut x = rand_vec(n * f, 8, 2.0);
    x[2 * f..3 * f].iter_mut().for_each(|v| *v = 0.0); // a zero row: the ε branch
    let r = rand_vec(n * f, 9, 1.0);
    let eps = 1e-6;
    let (mut y, mut norms) = (vec![0.0; n * f], vec![0.0; n]);
    l2_normalize_rows(&x, f, eps, &mut y, &mut norms).unwrap();
    for i in [0, 1, 3] {
        let len: f64 = y[i * f..(i + 1) * f].iter().map(|v| v * v).sum();
        assert!((len - 1.0).abs() < 1e-12);
    }
    assert!(y[2 * f..3 * f].iter().all(|&v| v == 0.0));
    let mut dx = vec![0.0; n * f];
    l2_normalize_rows_backward(&y, &norms, f, eps, &r, &mut dx).unwrap();
    check("l2_normalize_rows", &x, &dx, |x| {
        let (mut y, mut nr) = (vec![0.0; n * f], vec![0.0; n]);
        l2_normalize_rows(x, f, eps, &mut y, &mut nr).unwrap();
        y.iter().zip(&r).map(|(a, b)| a * b).sum()
    });
}

#[test]
fn softmax_cross_entropy_gradient_masks_and_stability() {
    let (n, c) = (7, 5);
    let mut z = rand_vec(n * c, 10, 3.0);
    z[c] = 1000.0; // would overflow a naive exp
    let labels = [0u32, 4, 2, u32::MAX, 1, 3, 0];
    let weights = [0.5, 1.0, 0.0, 1.0, 2.0, 0.1, 1.0]; // row 2 masked, row 3 unlabelled
    let mut dz = vec![0.0; n * c];
    let loss = softmax_cross_entropy(&z, c, &labels, &weights, &mut dz).unwrap();
    assert!(loss.is_finite());
    assert!(
        dz[2 * c..4 * c].iter().all(|&v| v == 0.0),
        "masked and unlabelled rows have no gradient"
    );
    check("softmax_cross_entropy", &z, &dz, |z| {
        let mut d = vec![0.0; n * c];
        softmax_cross_entropy(z, c, &labels, &weights, &mut d).unwrap()
    });
    // Uniform logits: ℓ = ln c per unit weight.
    let mut d = vec![0.0; c];
    let l = softmax_cross_entropy(&vec![0.3; c], c, &[2], &[1.0], &mut d).unwrap();
    assert!((l - (c as f64).ln()).abs() < 1e-12);
    let e = softmax_cross_entropy(&z, c, &[9, 0, 0, 0, 0, 0, 0], &weights, &mut dz).unwrap_err();
    assert!(e.to_string().contains("label 9 out of range"));
}

#[test]
fn sigmoid_bce_gradient_and_stability() {
    let (n, c) = (5, 6);
    let mut z = rand_vec(n * c, 11, 4.0);
    z[0] = 60.0;
    z[1] = -60.0;
    let t: Vec<f64> = (0..n * c)
        .map(|i| f64::from(u8::from(i % 3 == 0)))
        .collect();
    let w = [1.0, 0.5, 0.0, 2.0, 1.0];
    let mut dz = vec![0.0; n * c];
    let loss = sigmoid_bce(&z, c, &t, &w, &mut dz).unwrap();
    assert!(loss.is_finite());
    check("sigmoid_bce", &z, &dz, |z| {
        let mut d = vec![0.0; n * c];
        sigmoid_bce(z, c, &t, &w, &mut d).unwrap()
    });
    // ℓ(0, t) = ln 2 per label.
    let mut d = [0.0; 2];
    assert!(
        (sigmoid_bce(&[0.0, 0.0], 2, &[1.0, 0.0], &[1.0], &mut d).unwrap() - 2.0 * 2f64.ln()).abs()
            < 1e-12
    );
    // f32 with extreme logits stays finite.
    let mut d32 = [0f32; 2];
    let l32 = sigmoid_bce(&[100f32, -100.0], 2, &[0.0, 1.0], &[1.0f32], &mut d32).unwrap();
    assert!((l32 - 200.0).abs() < 1e-3, "{l32}");
}

#[test]
fn adam_matches_its_closed_form_and_minimises() {
    // First step: m̂ = g, v̂ = g², so p moves by lr·g/(|g| + ε) ≈ lr·sign(g).
    let adam = Adam {
        lr: 0.1,
        ..Adam::default()
    };
    let mut p = vec![1.0f64, -2.0, 0.5];
    let g = vec![0.3, -4.0, 1e-3];
    let (mut m, mut v) = (vec![0.0; 3], vec![0.0; 3]);
    adam.step(1, &mut p, &g, &mut m, &mut v).unwrap();
    for (i, (&p1, &p0)) in p.iter().zip(&[1.0, -2.0, 0.5]).enumerate() {
        let want = p0 - 0.1 * g[i] / (g[i].abs() + 1e-8);
        assert!((p1 - want).abs() < 1e-12, "param {i}: {p1} vs {want}");
    }
    // Weight decay enters the gradient: g' = g + wd·p.
    let adam_wd = Adam {
        lr: 0.1,
        weight_decay: 0.5,
        ..Adam::default()
    };
    let (mut p, mut m, mut v) = (vec![2.0f64], vec![0.0], vec![0.0]);
    adam_wd.step(1, &mut p, &[0.0], &mut m, &mut v).unwrap();
    assert!((m[0] - 0.1).abs() < 1e-15, "m = {}", m[0]);
    assert!(
        (p[0] - (2.0 - 0.1 / (1.0 + 1e-8))).abs() < 1e-12,
        "p = {}",
        p[0]
    );
    // Minimises a quadratic Σ (p − c)².
    let c = [3.0f64, -1.0, 0.25];
    let (mut p, mut m, mut v) = (vec![0.0; 3], vec![0.0; 3], vec![0.0; 3]);
    let adam = Adam {
        lr: 0.05,
        ..Adam::default()
    };
    for t in 1..=2000 {
        let g: Vec<f64> = p.iter().zip(&c).map(|(a, b)| 2.0 * (a - b)).collect();
        adam.step(t, &mut p, &g, &mut m, &mut v).unwrap();
    }
    for (a, b) in p.iter().zip(&c) {
        assert!((a - b).abs() < 1e-3, "{a} vs {b}");
    }
    assert!(adam.step(0, &mut p, &[0.0; 3], &mut m, &mut v).is_err());
}

#[test]
fn sgd_with_momentum_matches_its_recurrence() {
    let sgd = Sgd {
        lr: 0.1,
        momentum: 0.9,
        weight_decay: 0.0,
    };
    let (mut p, mut buf) = (vec![1.0f64], vec![0.0]);
    sgd.step(&mut p, &[2.0], &mut buf).unwrap(); // buf = 2, p = 1 − 0.2
    sgd.step(&mut p, &[2.0], &mut buf).unwrap(); // buf = 1.8 + 2 = 3.8, p = 0.8 − 0.38
    assert!((buf[0] - 3.8).abs() < 1e-12 && (p[0] - 0.42).abs() < 1e-12);
    assert!(sgd.step(&mut p, &[1.0, 2.0], &mut buf).is_err());
}

#[test]
fn gat_attention_chain() {
    use saintflow_ops::attention::*;
    // 6 nodes: row 2 empty, row 4 a single edge (softmax 1, gradient 0), others several.
    let offsets = [0u32, 3, 5, 5, 8, 9, 12];
    let indices = [1u32, 3, 5, 0, 4, 0, 1, 5, 1, 0, 3, 4];
    let (n, heads, slope) = (6, 3, 0.2);
    let nnz = indices.len();
    let s_l = rand_vec(n * heads, 12, 2.0);
    let s_r = rand_vec(n * heads, 13, 2.0);
    let r = rand_vec(nnz * heads, 14, 1.0);
    let forward = |s_l: &[f64], s_r: &[f64]| {
        let (mut e_raw, mut e, mut alpha) = (
            vec![0.0; nnz * heads],
            vec![0.0; nnz * heads],
            vec![0.0; nnz * heads],
        );
        gat_scores(
            &offsets, &indices, heads, s_l, s_r, slope, &mut e_raw, &mut e,
        )
        .unwrap();
        edge_softmax(&offsets, heads, &e, &mut alpha).unwrap();
        (e_raw, alpha)
    };
    let (e_raw, alpha) = forward(&s_l, &s_r);
    // Each non-empty row's attention sums to 1 per head.
    for w in offsets.windows(2).filter(|w| w[1] > w[0]) {
        for h in 0..heads {
            let s: f64 = (w[0]..w[1]).map(|k| alpha[k as usize * heads + h]).sum();
            assert!((s - 1.0).abs() < 1e-12);
        }
    }
    let mut de = vec![0.0; nnz * heads];
    edge_softmax_backward(&offsets, heads, &alpha, &r, &mut de).unwrap();
    assert!(
        de[8 * heads..9 * heads].iter().all(|&d| d == 0.0),
        "single-entry row has no gradient"
    );
    let (mut ds_l, mut ds_r) = (vec![0.0; n * heads], vec![0.0; n * heads]);
    gat_scores_backward(
        &offsets, &indices, heads, slope, &e_raw, &de, &mut ds_l, &mut ds_r,
    )
    .unwrap();
    let loss = |a: &[f64]| a.iter().zip(&r).map(|(x, y)| x * y).sum::<f64>();
    check("gat (s_l)", &s_l, &ds_l, |s| loss(&forward(s, &s_r).1));
    check("gat (s_r)", &s_r, &ds_r, |s| loss(&forward(&s_l, s).1));
    // Large scores stay finite (max subtraction).
    let big = vec![500.0; n * heads];
    let (_, a) = forward(&big, &big);
    assert!(a.iter().all(|x| x.is_finite()));
    let mut e_bad = vec![0.0; nnz * heads];
    assert!(gat_scores(
        &offsets,
        &[9u32; 12],
        heads,
        &s_l,
        &s_r,
        slope,
        &mut e_bad.clone(),
        &mut e_bad
    )
    .is_err());
}

#[test]
fn gather_and_scatter_add_are_adjoint() {
    use saintflow_ops::gather::{gather_rows, scatter_add_rows};
    let (n, f) = (7, 3);
    let src = rand_vec(n * f, 15, 1.0);
    let ids = [4u32, 0, 4, 6, 2]; // a repeated id: its gradient rows must add up
    let mut out = vec![0.0; ids.len() * f];
    gather_rows(&src, f, &ids, &mut out).unwrap();
    assert_eq!(&out[f..2 * f], &src[..f]);
    assert_eq!(&out[..f], &out[2 * f..3 * f]);
    let r = rand_vec(ids.len() * f, 16, 1.0);
    let mut dsrc = vec![0.0; n * f];
    scatter_add_rows(&r, f, &ids, &mut dsrc).unwrap();
    assert!(
        dsrc[f..2 * f].iter().all(|&v| v == 0.0),
        "row 1 was never gathered"
    );
    check("gather_rows", &src, &dsrc, |s| {
        let mut o = vec![0.0; ids.len() * f];
        gather_rows(s, f, &ids, &mut o).unwrap();
        o.iter().zip(&r).map(|(a, b)| a * b).sum()
    });
    let e = gather_rows(&src, f, &[7], &mut [0.0; 3]).unwrap_err();
    assert!(
        e.to_string()
            .contains("ids[0] = 7 out of range, expected < 7"),
        "{e}"
    );
    assert!(scatter_add_rows(&r, f, &ids, &mut [0.0; 6]).is_err());
}
