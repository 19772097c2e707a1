//! Every kernel against its naive f64 oracle over a hostile shape list (empty dimensions,
//! one element, odd sizes, thin and tall, a hub row, empty rows) crossed with 1–3 threads.
//! Tolerance: the standard bound for a length-k f32 dot product, |err| ≤ 2·k·u·Σ|a||b|,
//! u = 2⁻²⁴, computed per element from the absolute-value product.

mod common;

use common::{abs, assert_close, in_pool, random_csr, values, GEMM_SHAPES};
use proptest::prelude::*;
use saintflow_ops::gemm::{gemm_nn, gemm_nt, gemm_tn};
use saintflow_ops::naive;
use saintflow_ops::spmm::{block_width, spmm, spmm_blocked, CsrRef};
use saintflow_ops::KernelError;

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
    // Small problems: one block per thread, rounded to whole 64-column panels.
    assert_eq!(block_width(100, 512, 2), 256);
    assert_eq!(block_width(100, 8, 2), 8);
    assert_eq!(block_width(100, 100, 2), 64);
    // Large: 8·n·f / L2 blocks, whole panels, each within one panel of fitting L2.
    let l2 = saintflow_ops::cache::l2_bytes();
    let (n, f) = (5500, 1024);
    let w = block_width(n, f, 2);
    assert_eq!(w % 64, 0);
    assert!(
        8 * n * (w - 64) <= l2,
        "block of {w} columns overflows L2 ({l2} bytes) by more than a panel"
    );
    assert!(w < f);
}
