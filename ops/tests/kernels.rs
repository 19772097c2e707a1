//! Every kernel against its naive f64 oracle over a hostile shape list (empty dimensions,
//! one element, odd sizes, thin and tall, a hub row, empty rows) crossed with 1–3 threads.
//! Tolerance: the standard bound for a length-k f32 dot product, |err| ≤ 2·k·u·Σ|a||b|,
//! u = 2⁻²⁴, computed per element from the absolute-value product.

mod common;

use common::{
    abs, assert_close, in_pool, oriented, packed_in_row_halves, packed_in_row_parts, random_csr,
    values, GEMM_SHAPES, U,
};
use proptest::prelude::*;
use saintflow_ops::gemm::{gemm_nn, gemm_nt, gemm_tn, Trans};
use saintflow_ops::naive;
use saintflow_ops::spmm::{block_width, spmm, spmm_blocked, spmm_view_with, CsrRef, Gather};
use saintflow_ops::{KernelError, MatMut, MatRef};

#[test]
fn gemm_products_match_the_naive_loop() {
    for (m, k, n) in GEMM_SHAPES {
        let a = values(m * k, 1);
        let b = values(k * n, 2);
        let want = naive::gemm_nn(m, k, n, &a, &b);
        let bound = naive::gemm_nn(m, k, n, &abs(&a), &abs(&b));
        let at = naive::transpose(m, k, &a);
        let bt = naive::transpose(k, n, &b);
        for threads in [1, 2, 3] {
            in_pool(threads, || {
                let mut c = vec![f32::NAN; m * n];
                gemm_nn(m, k, n, &a, &b, &mut c, false).unwrap();
                assert_close("gemm_nn", &c, &want, &bound, k);
                let mut c = vec![f32::NAN; m * n];
                gemm_nt(m, k, n, &a, &bt, &mut c, false).unwrap();
                assert_close("gemm_nt", &c, &want, &bound, k);
                let mut c = vec![f32::NAN; m * n];
                gemm_tn(m, k, n, &at, &b, &mut c, false).unwrap();
                assert_close("gemm_tn", &c, &want, &bound, k);
                // Accumulate: C = C0 + A·B.
                let c0 = values(m * n, 3);
                let mut c = c0.clone();
                gemm_nn(m, k, n, &a, &b, &mut c, true).unwrap();
                let want_acc: Vec<f32> = c0.iter().zip(&want).map(|(x, y)| x + y).collect();
                let bound_acc: Vec<f32> = c0
                    .iter()
                    .zip(&bound)
                    .map(|(x, y)| x.abs() + y + 1.0)
                    .collect();
                assert_close("gemm_nn accumulate", &c, &want_acc, &bound_acc, k + 1);
            });
        }
    }
}

/// The GEMM's bits depend on neither the thread count nor the x86 path: each element is
/// summed in k order with one FMA per step on AVX2 and AVX-512 alike, and a thread only
/// chooses which tiles it computes, and a long k splits where k alone says (the halves run
/// side by side on 2 or 3 threads, one after the other on 1). Shapes cross every blocking
/// boundary (k past KC = 256, n past the widest NC, edge tiles of every tile shape, k past
/// the split).
#[test]
fn gemm_bits_depend_on_neither_threads_nor_the_fma_path() {
    use saintflow_ops::gemm::{gemm_view_isa, Isa};
    let fma: Vec<Isa> = Isa::supported()
        .into_iter()
        .filter(|&i| i != Isa::Generic)
        .collect();
    // Shapes that run as given, transposed (301×129 on AVX-512; few columns with Aᵀ), and
    // on the AVX2 tile on an AVX-512 CPU (few columns).
    for (m, k, n) in [
        (29, 531, 1061),
        (301, 600, 129),
        (7, 1000, 70),
        (500, 300, 2),
        (300, 700, 7),
        (61, 4400, 45),
        // Past the split with 67 row panels of 6: two whole groups of transposed panels
        // and a short one, claimed by 2 and 3 threads.
        (400, 4400, 40),
    ] {
        let a = values(m * k, 11);
        let b = values(k * n, 12);
        for (ta, tb, (ar, ac), (br, bc)) in oriented(m, k, n) {
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
            let mut fma_bits: Option<(Isa, Vec<u32>)> = None;
            for isa in Isa::supported() {
                let mut per_thread = Vec::new();
                for threads in [1, 2, 3] {
                    per_thread.push(in_pool(threads, || {
                        let mut c = vec![f32::NAN; m * n];
                        gemm_view_isa(
                            isa,
                            MatRef::row_major(&a, ar, ac).unwrap(),
                            ta,
                            MatRef::row_major(&b, br, bc).unwrap(),
                            tb,
                            MatMut::row_major(&mut c, m, n).unwrap(),
                            false,
                        )
                        .unwrap();
                        bits(&c)
                    }));
                }
                let what = format!("{isa:?} {ta:?}{tb:?} {m}×{k}×{n}");
                assert!(
                    per_thread.iter().all(|c| *c == per_thread[0]),
                    "{what}: threads differ"
                );
                if fma.contains(&isa) {
                    match &fma_bits {
                        None => fma_bits = Some((isa, per_thread.swap_remove(0))),
                        Some((first, c)) => {
                            assert!(*c == per_thread[0], "{what} differs from {first:?}")
                        }
                    }
                }
            }
        }
    }
}

/// op(B) packed once and shared by row blocks of C (the executor's GEMM parts) gives the
/// bits of the whole product, on every path, for every blocking edge; a packed B of the
/// wrong depth is refused.
#[test]
fn gemm_on_a_packed_b_equals_the_whole_product_bit_for_bit() {
    use saintflow_ops::gemm::{gemm_packed, gemm_view_isa, Isa, PackedB};
    let mut split_by_halves = 0;
    for (m, k, n) in GEMM_SHAPES.into_iter().chain([(70, 1000, 130)]) {
        let a = values(m * k, 21);
        let b = values(k * n, 22);
        for (ta, tb, (ar, ac), (br, bc)) in oriented(m, k, n) {
            let av = MatRef::row_major(&a, ar, ac).unwrap();
            let bv = MatRef::row_major(&b, br, bc).unwrap();
            for isa in Isa::supported() {
                let mut want = vec![f32::NAN; m * n];
                let wv = MatMut::row_major(&mut want, m, n).unwrap();
                gemm_view_isa(isa, av, ta, bv, tb, wv, false).unwrap();
                for threads in [1, 2] {
                    let (got, halves) = in_pool(threads, || {
                        let packed = PackedB::new(isa, bv, tb).unwrap();
                        assert_eq!((packed.rows(), packed.cols()), (k, n));
                        (
                            packed_in_row_parts(av, ta, &packed, (m, n)),
                            packed_in_row_halves(av, ta, &packed, (m, n)),
                        )
                    });
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
                    assert!(
                        bits(&got) == bits(&want),
                        "{isa:?} {ta:?}{tb:?} {m}×{k}×{n} on {threads} threads"
                    );
                    split_by_halves += halves.is_some() as usize;
                    if let Some(halves) = halves {
                        assert!(
                            bits(&halves) == bits(&want),
                            "{isa:?} {ta:?}{tb:?} {m}×{k}×{n}, halves apart, {threads} threads"
                        );
                    }
                }
            }
        }
    }
    // (19, 4097, 37) and (200, 4097, 40): k runs as two halves, in every orientation, path
    // and thread count.
    assert_eq!(split_by_halves, 2 * 3 * 2 * Isa::supported().len());
    let b = values(12, 1);
    let packed =
        PackedB::new(Isa::Generic, MatRef::row_major(&b, 3, 4).unwrap(), Trans::N).unwrap();
    let a = values(8, 2);
    let mut c = vec![0f32; 8];
    let e = gemm_packed(
        MatRef::row_major(&a, 2, 4).unwrap(),
        Trans::N,
        &packed,
        MatMut::row_major(&mut c, 2, 4).unwrap(),
        false,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("gemm_packed: rows of packed B"),
        "{e}"
    );
}

#[test]
fn gemm_rejects_wrong_lengths() {
    let e = gemm_nn(2, 3, 4, &[0.0; 6], &[0.0; 11], &mut [0.0; 8], false).unwrap_err();
    assert_eq!(
        e,
        KernelError::Shape {
            kernel: "gemm_nn",
            what: "B",
            expected: 12,
            got: 11
        }
    );
    assert!(e.to_string().contains("gemm_nn: B, expected 12, got 11"));
    assert!(gemm_tn(2, 3, 4, &[0.0; 6], &[0.0; 12], &mut [0.0; 7], false).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn spmm_matches_the_triple_loop(
        n in 1usize..70,
        n_cols in 1usize..70,
        f in prop::sample::select(vec![0usize, 1, 3, 16, 17, 40, 100]),
        width in prop::sample::select(vec![1usize, 5, 16, 32, 1000]),
        weighted in any::<bool>(),
        threads in 1usize..4,
        seed in any::<u64>(),
    ) {
        let (offsets, indices) = random_csr(n, n_cols, seed);
        let vals = values(indices.len(), seed ^ 1);
        let a = CsrRef { offsets: &offsets, indices: &indices, values: weighted.then_some(&vals[..]), n_cols };
        let x = values(n_cols * f, seed ^ 2);
        let want = naive::spmm(&offsets, &indices, a.values, &x, f);
        let abs_vals = abs(&vals);
        let bound = naive::spmm(&offsets, &indices, weighted.then_some(&abs_vals[..]), &abs(&x), f);
        let got = in_pool(threads, || {
            let mut out = vec![f32::NAN; n * f];
            spmm_blocked(a, &x, f, &mut out, width).unwrap();
            out
        });
        assert_close("spmm", &got, &want, &bound, n_cols);
        // Partitioned == default == unpartitioned, bit for bit (same summation order).
        let mut whole = vec![0f32; n * f];
        spmm_blocked(a, &x, f, &mut whole, usize::MAX).unwrap();
        let mut default = vec![0f32; n * f];
        spmm(a, &x, f, &mut default).unwrap();
        prop_assert_eq!(&got, &whole);
        prop_assert_eq!(&default, &whole);
        // Packed and in-place gathers too.
        for gather in [Gather::InPlace, Gather::Packed] {
            let mut o = vec![f32::NAN; n * f];
            let xv = MatRef::row_major(&x, n_cols, f).unwrap();
            let ov = MatMut::row_major(&mut o, n, f).unwrap();
            in_pool(threads, || spmm_view_with(a, xv, ov, width, gather)).unwrap();
            prop_assert_eq!(&o, &whole, "{:?}", gather);
        }
    }
}

#[test]
fn spmm_rejects_malformed_operands() {
    let x = [0f32; 8];
    let mut out = [0f32; 8];
    let bad_index = CsrRef {
        offsets: &[0, 1, 2],
        indices: &[0, 9],
        values: None,
        n_cols: 4,
    };
    assert!(spmm(bad_index, &x, 2, &mut out[..4])
        .unwrap_err()
        .to_string()
        .contains("indices[1] = 9 out of range"));
    let decreasing = CsrRef {
        offsets: &[0, 2, 1, 2],
        indices: &[0, 1],
        values: None,
        n_cols: 4,
    };
    assert!(spmm(decreasing, &x, 2, &mut out[..6])
        .unwrap_err()
        .to_string()
        .contains("decrease"));
    let short_values = CsrRef {
        offsets: &[0, 2],
        indices: &[0, 1],
        values: Some(&[1.0]),
        n_cols: 4,
    };
    assert!(spmm(short_values, &x, 2, &mut out[..2]).is_err());
    let ok = CsrRef {
        offsets: &[0, 2],
        indices: &[0, 1],
        values: None,
        n_cols: 4,
    };
    assert!(spmm(ok, &x[..7], 2, &mut out[..2])
        .unwrap_err()
        .to_string()
        .contains("X, expected 8, got 7"));
}

#[test]
fn block_width_follows_the_cache_rule() {
    // Small problems: one block per thread, rounded up to whole 16-column units.
    assert_eq!(block_width(100, 512, 2), 256);
    assert_eq!(block_width(100, 8, 2), 8);
    assert_eq!(block_width(100, 100, 2), 64);
    // Large: X's block of n rows fits the L2 in whole units, and is the widest that does
    // up to the rounding of f into equal blocks.
    let l2 = saintflow_ops::cache::l2_bytes();
    let (n, f) = (5500, 1024);
    let w = block_width(n, f, 2);
    let fit = (l2 / (4 * n) / 16 * 16).max(16);
    assert_eq!(w % 16, 0);
    assert!(
        w <= fit,
        "block of {w} columns overflows L2 ({l2} bytes): {fit} fit"
    );
    assert!(
        2 * w > fit,
        "block of {w} columns where {fit} fit L2 ({l2} bytes)"
    );
    assert!(w < f);
    // The planner's count gives the same width.
    let q = saintflow_ops::spmm::feature_partitions(n, f, 2, l2);
    assert_eq!(f.div_ceil(q).div_ceil(16) * 16, w);
}

// ---- Elementwise, row-wise, gather, losses, edge softmax, Adam: against the naive
// oracles of `naive::*` evaluated in f64 (f32 results within a few roundings), or in f32
// where the kernel must equal the definition bit for bit. Sizes straddle the parallel
// chunking (several chunks plus an odd remainder) and run on 1 and 2 threads.

use saintflow_ops::{attention, elementwise as ew, gather, loss, optim};

/// Element counts: one, odd small, and three 16 Ki chunks plus an odd remainder.
const LENGTHS: [usize; 4] = [0, 1, 7, 3 * (1 << 14) + 123];

fn wide(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| f64::from(x)).collect()
}

/// |got − want| ≤ ulps·u·(|want| + floor) per element.
fn assert_rel(kernel: &str, got: &[f32], want: &[f64], ulps: f64, floor: f64) {
    assert_eq!(got.len(), want.len(), "{kernel}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let tol = ulps * U * (w.abs() + floor);
        assert!(
            (f64::from(g) - w).abs() <= tol,
            "{kernel}: element {i}: got {g}, want {w}, tol {tol:e}"
        );
    }
}

#[test]
fn activations_match_naive() {
    for n in LENGTHS {
        let x: Vec<f32> = values(n, 31).iter().map(|v| 6.0 * v).collect();
        let xw = wide(&x);
        let dy = values(n, 30);
        let dyw = wide(&dy);
        let mut want = vec![0f64; n];
        for threads in [1, 2] {
            in_pool(threads, || {
                let mut y = vec![f32::NAN; n];
                ew::relu(&x, &mut y).unwrap();
                naive::elementwise::relu(&xw, &mut want);
                assert_rel("relu", &y, &want, 0.0, 0.0);
                ew::leaky_relu(&x, 0.2, &mut y).unwrap();
                naive::elementwise::leaky_relu(&xw, f64::from(0.2f32), &mut want);
                assert_rel("leaky_relu", &y, &want, 1.0, 0.0);
                ew::sigmoid(&x, &mut y).unwrap();
                naive::elementwise::sigmoid(&xw, &mut want);
                assert_rel("sigmoid", &y, &want, 4.0, 0.0);
                ew::elu(&x, 1.3, &mut y).unwrap();
                naive::elementwise::elu(&xw, f64::from(1.3f32), &mut want);
                assert_rel("elu", &y, &want, 4.0, 0.0);
                // Backwards, from the forward's saved values where the kernel takes them.
                let mut dx = vec![f32::NAN; n];
                ew::elu_backward(&x, &y, 1.3, &dy, &mut dx).unwrap();
                naive::elementwise::elu_backward(&xw, f64::from(1.3f32), &dyw, &mut want);
                // The kernel forms α e^x as y + α from the saved y = α(e^x − 1): it cancels
                // for x ≪ 0, so the error is a few u of α·|dy| (≤ 1.3), not of the result.
                assert_rel("elu_backward", &dx, &want, 4.0, 1.3);
                ew::relu(&x, &mut y).unwrap();
                ew::relu_backward(&y, &dy, &mut dx).unwrap();
                naive::elementwise::relu_backward(&wide(&y), &dyw, &mut want);
                assert_rel("relu_backward", &dx, &want, 0.0, 0.0);
                ew::leaky_relu_backward(&x, 0.2, &dy, &mut dx).unwrap();
                naive::elementwise::leaky_relu_backward(&xw, f64::from(0.2f32), &dyw, &mut want);
                assert_rel("leaky_relu_backward", &dx, &want, 1.0, 0.0);
                ew::sigmoid(&x, &mut y).unwrap();
                ew::sigmoid_backward(&y, &dy, &mut dx).unwrap();
                naive::elementwise::sigmoid_backward(&wide(&y), &dyw, &mut want);
                assert_rel("sigmoid_backward", &dx, &want, 4.0, 0.0);
            });
        }
    }
}

#[test]
fn dropout_matches_naive_draw_for_draw() {
    for n in LENGTHS {
        let x = values(n, 32);
        for p in [0.0, 0.3, 0.9] {
            let (mut y0, mut m0) = (vec![0f64; n], vec![9u8; n]);
            naive::elementwise::dropout(&wide(&x), p, common::xorshift(5), &mut y0, &mut m0);
            for threads in [1, 2] {
                in_pool(threads, || {
                    let (mut y, mut m) = (vec![f32::NAN; n], vec![9u8; n]);
                    ew::dropout(&x, p, common::xorshift(5), &mut y, &mut m).unwrap();
                    assert_eq!(m, m0, "dropout mask, n={n}, p={p}");
                    assert_rel("dropout", &y, &y0, 2.0, 0.0);
                    let dy = values(n, 29);
                    let mut dx = vec![f32::NAN; n];
                    ew::dropout_backward(&m, p, &dy, &mut dx).unwrap();
                    let mut want = vec![0f64; n];
                    naive::elementwise::dropout_backward(&m, p, &wide(&dy), &mut want);
                    assert_rel("dropout_backward", &dx, &want, 2.0, 0.0);
                });
            }
        }
    }
}

#[test]
fn bias_add_and_l2_normalisation_match_naive() {
    for (n, f) in [(0usize, 3usize), (1, 1), (5, 7), (3000, 33), (200, 512)] {
        let x = values(n * f, 33);
        let b = values(f, 34);
        let mut want = x.clone();
        naive::elementwise::bias_add(&mut want, &b);
        let (mut yw, mut nw) = (vec![0f64; n * f], vec![0f64; n]);
        let mut xz = x.clone();
        if n > 2 {
            xz[f..2 * f].fill(0.0); // a zero row: the ε branch
        }
        naive::elementwise::l2_normalize_rows(&wide(&xz), f, 1e-6, &mut yw, &mut nw);
        for threads in [1, 2] {
            in_pool(threads, || {
                let mut y = x.clone();
                ew::bias_add(&mut y, &b).unwrap();
                assert_eq!(y, want, "bias_add {n}×{f}");
                let (mut y, mut norms) = (vec![f32::NAN; n * f], vec![f32::NAN; n]);
                ew::l2_normalize_rows(&xz, f, 1e-6, &mut y, &mut norms).unwrap();
                assert_rel("l2_normalize_rows norms", &norms, &nw, 2.0 * f as f64, 0.0);
                assert_rel("l2_normalize_rows", &y, &yw, 2.0 * f as f64, 0.0);
                let dy = values(n * f, 28);
                let mut dx = vec![f32::NAN; n * f];
                ew::l2_normalize_rows_backward(&y, &norms, f, 1e-6, &dy, &mut dx).unwrap();
                let mut want = vec![0f64; n * f];
                naive::elementwise::l2_normalize_rows_backward(
                    &wide(&y),
                    &wide(&norms),
                    f,
                    1e-6,
                    &wide(&dy),
                    &mut want,
                );
                // dx_i = (dy − y (y·dy)) / n: the dot's absolute sum bounds its error.
                let bound: Vec<f64> = (0..n * f)
                    .map(|k| {
                        let i = k / f;
                        let dot_abs: f64 = (0..f)
                            .map(|j| f64::from((y[i * f + j] * dy[i * f + j]).abs()))
                            .sum();
                        (f64::from(dy[k].abs()) + f64::from(y[k].abs()) * dot_abs)
                            / f64::from(norms[i]).max(1e-6)
                    })
                    .collect();
                for k in 0..n * f {
                    let err = (f64::from(dx[k]) - want[k]).abs();
                    assert!(
                        err <= 4.0 * (f + 2) as f64 * U * bound[k],
                        "l2_normalize_rows_backward[{k}]: got {}, want {}",
                        dx[k],
                        want[k]
                    );
                }
            });
        }
    }
}

#[test]
fn gather_and_scatter_add_match_naive_bit_for_bit() {
    for (n_src, n_ids, f) in [
        (1usize, 0usize, 4usize),
        (5, 9, 1),
        (40, 3000, 17),
        (3000, 9000, 64),
    ] {
        let src = values(n_src * f, 35);
        // Repeats and a hub: every third id is row 0.
        let ids: Vec<u32> = (0..n_ids)
            .map(|i| {
                if i % 3 == 0 {
                    0
                } else {
                    ((i * 7919) % n_src) as u32
                }
            })
            .collect();
        let mut want = vec![0f32; n_ids * f];
        naive::gather::gather_rows(&src, f, &ids, &mut want);
        let grad = values(n_ids * f, 36);
        let mut dst_want = values(n_src * f, 37);
        let dst0 = dst_want.clone();
        naive::gather::scatter_add_rows(&grad, f, &ids, &mut dst_want);
        for threads in [1, 2] {
            in_pool(threads, || {
                let mut out = vec![f32::NAN; n_ids * f];
                gather::gather_rows(&src, f, &ids, &mut out).unwrap();
                assert_eq!(out, want, "gather_rows");
                let mut dst = dst0.clone();
                gather::scatter_add_rows(&grad, f, &ids, &mut dst).unwrap();
                assert_eq!(dst, dst_want, "scatter_add_rows {n_src}×{f}, {n_ids} ids");
            });
        }
    }
}

#[test]
fn losses_match_naive_and_do_not_depend_on_threads() {
    for (n, c) in [(0usize, 3usize), (1, 1), (7, 5), (3000, 41), (300, 121)] {
        let z: Vec<f32> = values(n * c, 38).iter().map(|v| 8.0 * v).collect();
        let labels: Vec<u32> = (0..n)
            .map(|i| {
                if i % 11 == 3 {
                    u32::MAX
                } else {
                    ((i * 31) % c) as u32
                }
            })
            .collect();
        let weights: Vec<f32> = (0..n)
            .map(|i| {
                if i % 13 == 5 {
                    0.0
                } else {
                    0.5 + (i % 4) as f32 / 4.0
                }
            })
            .collect();
        let targets: Vec<f32> = (0..n * c)
            .map(|i| f32::from(u8::from(i % 3 == 0)))
            .collect();
        let (zw, ww) = (wide(&z), wide(&weights));
        let mut dw = vec![0f64; n * c];
        let lw = naive::loss::softmax_cross_entropy(&zw, c, &labels, &ww, &mut dw);
        let mut dbw = vec![0f64; n * c];
        let lbw = naive::loss::sigmoid_bce(&zw, c, &wide(&targets), &ww, &mut dbw);
        let mut first: Option<(f32, Vec<f32>, f32, Vec<f32>)> = None;
        for threads in [1, 2] {
            let got = in_pool(threads, || {
                let mut d = vec![f32::NAN; n * c];
                let l = loss::softmax_cross_entropy(&z, c, &labels, &weights, &mut d).unwrap();
                let mut db = vec![f32::NAN; n * c];
                let lb = loss::sigmoid_bce(&z, c, &targets, &weights, &mut db).unwrap();
                (l, d, lb, db)
            });
            // Per-row terms are O(c·u) accurate; the sums add n of them.
            let sum_tol = (n * c) as f64 * 8.0;
            assert_rel("softmax_cross_entropy loss", &[got.0], &[lw], sum_tol, 1.0);
            assert_rel(
                "softmax_cross_entropy grad",
                &got.1,
                &dw,
                8.0 * c as f64,
                1.0,
            );
            assert_rel("sigmoid_bce loss", &[got.2], &[lbw], sum_tol, 1.0);
            assert_rel("sigmoid_bce grad", &got.3, &dbw, 8.0, 1.0);
            match &first {
                None => first = Some(got),
                Some(f) => assert!(
                    f.0.to_bits() == got.0.to_bits()
                        && f.1 == got.1
                        && f.2.to_bits() == got.2.to_bits()
                        && f.3 == got.3,
                    "losses differ between 1 and 2 threads ({n}×{c})"
                ),
            }
        }
    }
}

#[test]
fn edge_softmax_matches_naive() {
    for (n, heads) in [(0usize, 2usize), (1, 1), (30, 3), (4000, 4)] {
        let (offsets, _) = random_csr(n, n.max(1), 39);
        let nnz = *offsets.last().unwrap() as usize;
        let e: Vec<f32> = values(nnz * heads, 40).iter().map(|v| 10.0 * v).collect();
        let mut want = vec![0f64; nnz * heads];
        naive::attention::edge_softmax(&offsets, heads, &wide(&e), &mut want);
        let max_deg = offsets.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0) as f64;
        for threads in [1, 2] {
            in_pool(threads, || {
                let mut alpha = vec![f32::NAN; nnz * heads];
                attention::edge_softmax(&offsets, heads, &e, &mut alpha).unwrap();
                assert_rel("edge_softmax", &alpha, &want, 8.0 * (max_deg + 2.0), 0.0);
                let dalpha = values(nnz * heads, 41);
                let mut de = vec![f32::NAN; nnz * heads];
                attention::edge_softmax_backward(&offsets, heads, &alpha, &dalpha, &mut de)
                    .unwrap();
                let mut want_de = vec![0f64; nnz * heads];
                naive::attention::edge_softmax_backward(
                    &offsets,
                    heads,
                    &wide(&alpha),
                    &wide(&dalpha),
                    &mut want_de,
                );
                // |de| ≤ α (|dα| + Σ α|dα|) ≤ 2α·max|dα|: the dot's error scales with it.
                let bound: Vec<f64> = alpha.iter().map(|&a| 2.0 * f64::from(a)).collect();
                for k in 0..nnz * heads {
                    let err = (f64::from(de[k]) - want_de[k]).abs();
                    assert!(
                        err <= 4.0 * (max_deg + 2.0) * U * bound[k] + 1e-30,
                        "edge_softmax_backward[{k}]: got {}, want {}",
                        de[k],
                        want_de[k]
                    );
                }
            });
        }
    }
}

#[test]
fn adam_matches_naive() {
    // Hyper-parameters representable in f32, so the f64 oracle runs the same update (0.999
    // itself is not: 1 − β2 would differ by 1.3e-5 relative between the two precisions).
    let f = |x: f32| f64::from(x);
    let adam = optim::Adam {
        lr: f(0.01),
        beta1: f(0.9),
        beta2: f(0.999),
        eps: f(1e-8),
        weight_decay: f(5e-4),
    };
    let t = 7;
    for n in LENGTHS {
        let p0 = values(n, 41);
        let g = values(n, 42);
        let m0: Vec<f32> = values(n, 43).iter().map(|v| 0.1 * v).collect();
        let v0: Vec<f32> = values(n, 44).iter().map(|v| 0.01 * v.abs()).collect();
        let (mut pw, mut mw, mut vw) = (wide(&p0), wide(&m0), wide(&v0));
        naive::optim::adam_step(&adam, t, &mut pw, &wide(&g), &mut mw, &mut vw);
        // Error bounds from the absolute values of each sum's terms (m can cancel), the
        // update's through m̂'s: a few roundings of each, and the f32 hyper-parameters.
        let (b1, b2) = (adam.beta1, adam.beta2);
        let m_abs: Vec<f64> = (0..n)
            .map(|i| b1 * f64::from(m0[i].abs()) + (1.0 - b1) * f64::from(g[i].abs()) + 1e-3)
            .collect();
        let p_abs: Vec<f64> = (0..n)
            .map(|i| {
                let v_hat = vw[i] / (1.0 - b2.powi(t as i32));
                let step =
                    adam.lr * m_abs[i] / (1.0 - b1.powi(t as i32)) / (v_hat.sqrt() + adam.eps);
                pw[i].abs() + step
            })
            .collect();
        for threads in [1, 2] {
            in_pool(threads, || {
                let (mut p, mut m, mut v) = (p0.clone(), m0.clone(), v0.clone());
                adam.step(t, &mut p, &g, &mut m, &mut v).unwrap();
                for i in 0..n {
                    let close = |what: &str, got: f32, want: f64, bound: f64, ulps: f64| {
                        let err = (f64::from(got) - want).abs();
                        assert!(
                            err <= ulps * U * bound,
                            "adam {what}[{i}]: got {got}, want {want}, err {err:e}"
                        );
                    };
                    close("m", m[i], mw[i], m_abs[i], 4.0);
                    close("v", v[i], vw[i], vw[i], 6.0);
                    close("p", p[i], pw[i], p_abs[i], 8.0);
                }
            });
        }
    }
}

/// A C of one or two columns (a classifier's logits H·W, op(A) row-major, and its weight
/// gradient Hᵀ·∇Y, op(A) column-major) runs on the narrow path, rows of op(A) as lanes:
/// the same bits as the tile path (a packed B, which always tiles), with and without
/// accumulation, for row counts off the 8-row groups and the 256-row stripes, k off the
/// 8-column blocks and past the split into halves, strided op(A) and C, op(B) as stored
/// or transposed, on 1 and 2 threads.
#[test]
fn the_narrow_path_gives_the_tile_paths_bits() {
    use saintflow_ops::gemm::{gemm_packed, gemm_view_isa, narrow_path, Isa, PackedB, Precision};
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
    let fma: Vec<Isa> = Isa::supported()
        .into_iter()
        .filter(|&i| i != Isa::Generic)
        .collect();
    if !fma.is_empty() {
        assert!(narrow_path(Precision::F32, 37, 2));
        assert!(narrow_path(Precision::F32, 8, 1));
        assert!(!narrow_path(Precision::F32, 7, 2));
        assert!(!narrow_path(Precision::F32, 37, 3));
        // bf16 too, where the CPU runs it (its bits: `tests/bf16.rs`).
        if Precision::Bf16.check().is_ok() {
            assert!(narrow_path(Precision::Bf16, 37, 2));
            assert!(!narrow_path(Precision::Bf16, 37, 3));
        }
    }
    for (m, k, n) in [
        (8, 1, 1),
        (9, 7, 2),
        (37, 300, 2),
        (200, 1000, 1),
        (61, 4400, 2),
        (1003, 515, 2),
        (300, 4500, 2),
    ] {
        let b = values(k * n, 32);
        let start = values(m * (n + 2), 33);
        // op(A) as stored: columns 3..3 + k of an m×(k + 5) matrix; transposed: columns
        // 3..3 + m of a k×(m + 5) one. C is columns 1..1 + n of m×(n + 2).
        let a_n = values(m * (k + 5), 31);
        let a_t = values(k * (m + 5), 34);
        let a_views = [
            (
                Trans::N,
                MatRef::row_major(&a_n, m, k + 5)
                    .unwrap()
                    .cols(3..3 + k)
                    .unwrap(),
            ),
            (
                Trans::T,
                MatRef::row_major(&a_t, k, m + 5)
                    .unwrap()
                    .cols(3..3 + m)
                    .unwrap(),
            ),
        ];
        for (ta, av) in a_views {
            for tb in [Trans::N, Trans::T] {
                let bv = match tb {
                    Trans::N => MatRef::row_major(&b, k, n).unwrap(),
                    Trans::T => MatRef::row_major(&b, n, k).unwrap(),
                };
                for isa in &fma {
                    for accumulate in [false, true] {
                        for threads in [1, 2] {
                            let (mut want, mut got) = (start.clone(), start.clone());
                            in_pool(threads, || {
                                let packed = PackedB::new(*isa, bv, tb).unwrap();
                                let w = MatMut::row_major(&mut want, m, n + 2).unwrap();
                                let wv = w.cols_mut(1..1 + n).unwrap();
                                gemm_packed(av, ta, &packed, wv, accumulate).unwrap();
                                let g = MatMut::row_major(&mut got, m, n + 2).unwrap();
                                let gv = g.cols_mut(1..1 + n).unwrap();
                                gemm_view_isa(*isa, av, ta, bv, tb, gv, accumulate).unwrap();
                            });
                            assert!(
                                bits(&got) == bits(&want),
                                "{isa:?} {m}×{k}×{n} op(A) {ta:?} op(B) {tb:?}, accumulate \
                                 {accumulate}, {threads} threads"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Issue 55 item 7: a NaN (or ±inf) input of every activation comes out NaN (inf where the
/// function is unbounded), as PyTorch's do — `max(x, 0)` written with `Float::max` gave 0
/// and hid it. Every position in lengths 1..=40 (vector bodies and tails of every width)
/// and the chunk edges of a parallel length, threads 1 and 2.
#[test]
fn issue55_activations_propagate_nan() {
    let big = 3 * (1 << 14) + 123;
    let cases = (1..=40).flat_map(|n| (0..n).map(move |at| (n, at))).chain(
        [0, 1, (1 << 14) - 1, 1 << 14, 2 << 14, big - 124, big - 1]
            .into_iter()
            .map(|at| (big, at)),
    );
    for (n, at) in cases {
        {
            for threads in [1, 2] {
                in_pool(threads, || {
                    let mut x: Vec<f32> = values(n, 7).iter().map(|v| 6.0 * v).collect();
                    x[at] = f32::NAN;
                    let mut y = vec![0.0f32; n];
                    type Kernel = fn(&[f32], &mut [f32]);
                    let kernels: [(&str, Kernel); 4] = [
                        ("relu", |x, y| ew::relu(x, y).unwrap()),
                        ("leaky_relu", |x, y| ew::leaky_relu(x, 0.2, y).unwrap()),
                        ("sigmoid", |x, y| ew::sigmoid(x, y).unwrap()),
                        ("elu", |x, y| ew::elu(x, 1.3, y).unwrap()),
                    ];
                    for (name, k) in kernels {
                        k(&x, &mut y);
                        assert!(y[at].is_nan(), "{name}: NaN at {at} of {n} gave {}", y[at]);
                        let others = y.iter().enumerate().filter(|&(i, _)| i != at);
                        assert!(others.clone().all(|(_, v)| v.is_finite()), "{name}");
                    }
                    x[at] = f32::INFINITY;
                    ew::relu(&x, &mut y).unwrap();
                    assert_eq!(y[at], f32::INFINITY, "relu(inf) at {at} of {n}");
                    x[at] = f32::NEG_INFINITY;
                    ew::relu(&x, &mut y).unwrap();
                    assert_eq!(y[at], 0.0, "relu(-inf) at {at} of {n}");
                    let mut want = vec![0f64; n];
                    x[at] = f32::NAN;
                    naive::elementwise::relu(&wide(&x), &mut want);
                    assert!(want[at].is_nan(), "the naive relu hides NaN");
                });
            }
        }
    }
}
