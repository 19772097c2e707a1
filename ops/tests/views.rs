//! Strided views: GEMM in every transpose combination and SpMM on column blocks of wider
//! matrices against the naive oracles (hostile shapes × layouts × 1 and 2 threads); the
//! elements around a written block are checked untouched and the gaps around a read block
//! hold NaN, so a kernel that reads or writes outside its view fails. A concatenation
//! written in place equals the concatenation of the products; `concat_cols` and
//! `split_cols` against naive; views reject what their slices cannot hold, with an error.

mod common;

use common::{abs, assert_close, in_pool, random_csr, values, GEMM_SHAPES};
use proptest::prelude::*;
use saintflow_ops::concat::{concat_cols, split_cols};
use saintflow_ops::gemm::{gemm_nn, gemm_nt, gemm_view, gemm_view_isa, Isa, Trans};
use saintflow_ops::naive;
use saintflow_ops::spmm::{spmm, spmm_blocked, spmm_view, spmm_view_blocked, CsrRef};
use saintflow_ops::{KernelError, MatMut, MatRef};

/// Where a matrix sits in its buffer: a column block starting at column `offset` of a wider
/// matrix with `pad` more columns after it, so the row stride is offset + cols + pad.
#[derive(Clone, Copy, Debug)]
struct Layout {
    offset: usize,
    pad: usize,
}

const LAYOUTS: [Layout; 3] = [
    Layout { offset: 0, pad: 0 }, // contiguous
    Layout { offset: 0, pad: 5 }, // row stride > cols
    Layout { offset: 3, pad: 6 }, // a column block at an odd offset of a wider matrix
];

/// Filled around written blocks; must survive every kernel.
const GAP: f32 = 777.0;

/// A rows × cols matrix embedded in a buffer of exactly the length its view needs (plus
/// the offset), every other element `fill`.
struct Embedded {
    buf: Vec<f32>,
    rows: usize,
    cols: usize,
    offset: usize,
    stride: usize,
}

impl Embedded {
    fn new(dense: &[f32], rows: usize, cols: usize, l: Layout, fill: f32) -> Self {
        assert_eq!(dense.len(), rows * cols);
        let stride = l.offset + cols + l.pad;
        let len = l.offset
            + if rows == 0 {
                0
            } else {
                (rows - 1) * stride + cols
            };
        let mut buf = vec![fill; len];
        for i in 0..rows {
            for j in 0..cols {
                buf[l.offset + i * stride + j] = dense[i * cols + j];
            }
        }
        Embedded {
            buf,
            rows,
            cols,
            offset: l.offset,
            stride,
        }
    }

    fn view(&self) -> MatRef<'_> {
        MatRef::new(&self.buf[self.offset..], self.rows, self.cols, self.stride).unwrap()
    }

    fn view_mut(&mut self) -> MatMut<'_> {
        MatMut::new(
            &mut self.buf[self.offset..],
            self.rows,
            self.cols,
            self.stride,
        )
        .unwrap()
    }

    fn dense(&self) -> Vec<f32> {
        naive::dense(&self.buf[self.offset..], self.rows, self.cols, self.stride)
    }

    /// Every element outside the view still holds `GAP`.
    fn assert_gaps(&self, what: &str) {
        for (p, &v) in self.buf.iter().enumerate() {
            let inside = p >= self.offset
                && (p - self.offset) % self.stride < self.cols
                && (p - self.offset) / self.stride < self.rows;
            assert!(
                inside || v == GAP,
                "{what}: element {p} outside the view became {v}"
            );
        }
    }
}

/// Stored shape of an operand whose op(X) is r × c.
fn stored(t: Trans, r: usize, c: usize, x: &[f32]) -> (usize, usize, Vec<f32>) {
    match t {
        Trans::N => (r, c, x.to_vec()),
        Trans::T => (c, r, naive::transpose(r, c, x)),
    }
}

#[test]
fn strided_gemm_matches_the_naive_loop_in_every_transpose_combination() {
    for (m, k, n) in GEMM_SHAPES {
        let a = values(m * k, 1);
        let b = values(k * n, 2);
        let want = naive::gemm_nn(m, k, n, &a, &b);
        let bound = naive::gemm_nn(m, k, n, &abs(&a), &abs(&b));
        let c0 = values(m * n, 3);
        let want_acc: Vec<f32> = c0.iter().zip(&want).map(|(x, y)| x + y).collect();
        let bound_acc: Vec<f32> = c0
            .iter()
            .zip(&bound)
            .map(|(x, y)| x.abs() + y + 1.0)
            .collect();
        for ta in [Trans::N, Trans::T] {
            for tb in [Trans::N, Trans::T] {
                let (ar, ac, a_st) = stored(ta, m, k, &a);
                let (br, bc, b_st) = stored(tb, k, n, &b);
                // Each operand takes each layout once over the three rotations.
                for rot in 0..3 {
                    let (la, lb, lc) =
                        (LAYOUTS[rot], LAYOUTS[(rot + 1) % 3], LAYOUTS[(rot + 2) % 3]);
                    let ea = Embedded::new(&a_st, ar, ac, la, f32::NAN);
                    let eb = Embedded::new(&b_st, br, bc, lb, f32::NAN);
                    for isa in Isa::supported() {
                        let what = format!(
                            "gemm_view {isa:?} {ta:?}{tb:?} {m}×{k}×{n} {la:?} {lb:?} {lc:?}"
                        );
                        let nan = vec![f32::NAN; m * n];
                        // (C before, accumulate, expected, its bound, summands per element)
                        let cases = [
                            (&nan, false, &want, &bound, k),
                            (&c0, true, &want_acc, &bound_acc, k + 1),
                        ];
                        for threads in [1, 2, 3] {
                            in_pool(threads, || {
                                for (start, acc, want, bound, terms) in cases {
                                    let mut ec = Embedded::new(start, m, n, lc, GAP);
                                    let (av, bv) = (ea.view(), eb.view());
                                    gemm_view_isa(isa, av, ta, bv, tb, ec.view_mut(), acc).unwrap();
                                    assert_close(&what, &ec.dense(), want, bound, terms);
                                    ec.assert_gaps(&what);
                                }
                            });
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn gemm_view_rejects_disagreeing_shapes() {
    let (a, b, mut c) = ([0f32; 6], [0f32; 12], [0f32; 8]);
    let av = MatRef::row_major(&a, 2, 3).unwrap();
    let bv = MatRef::row_major(&b, 4, 3).unwrap();
    // A·B with inner dimensions 3 and 4.
    let e = gemm_view(
        av,
        Trans::N,
        bv,
        Trans::N,
        MatMut::row_major(&mut c, 2, 4).unwrap(),
        false,
    )
    .unwrap_err();
    assert_eq!(
        e,
        KernelError::Shape {
            kernel: "gemm_view",
            what: "rows of op(B) (columns of op(A))",
            expected: 3,
            got: 4
        }
    );
    // A·Bᵀ is 2×4: C must be 2×4, not 4×2.
    assert!(gemm_view(
        av,
        Trans::N,
        bv,
        Trans::T,
        MatMut::row_major(&mut c, 4, 2).unwrap(),
        false
    )
    .is_err());
    gemm_view(
        av,
        Trans::N,
        bv,
        Trans::T,
        MatMut::row_major(&mut c, 2, 4).unwrap(),
        false,
    )
    .unwrap();
}

/// (n, n_cols, f): no rows, no columns of A, no features, one row, one feature, odd widths,
/// widths not a multiple of 16 on both sides of the 64-column panel.
const SPMM_SHAPES: [(usize, usize, usize); 10] = [
    (0, 5, 17),
    (5, 0, 16),
    (7, 7, 0),
    (1, 1, 1),
    (1, 70, 33),
    (33, 40, 3),
    (40, 33, 17),
    (64, 64, 130),
    (90, 70, 100),
    (200, 150, 67),
];

/// Checks spmm_view with X and out in `lx`, `lo` against the triple loop, the gaps around
/// out, and bit-equality with the contiguous kernel (same summation order).
#[allow(clippy::too_many_arguments)]
fn check_spmm(
    (n, n_cols, f): (usize, usize, usize),
    lx: Layout,
    lo: Layout,
    width: Option<usize>,
    weighted: bool,
    threads: usize,
    seed: u64,
) {
    let (offsets, indices) = random_csr(n, n_cols, seed);
    let vals = values(indices.len(), seed ^ 1);
    let a = CsrRef {
        offsets: &offsets,
        indices: &indices,
        values: weighted.then_some(&vals[..]),
        n_cols,
    };
    let x = values(n_cols * f, seed ^ 2);
    let want = naive::spmm(&offsets, &indices, a.values, &x, f);
    let abs_vals = abs(&vals);
    let bound = naive::spmm(
        &offsets,
        &indices,
        weighted.then_some(&abs_vals[..]),
        &abs(&x),
        f,
    );
    let ex = Embedded::new(&x, n_cols, f, lx, f32::NAN);
    let what = format!(
        "spmm_view {n}×{n_cols}, f={f}, X {lx:?}, out {lo:?}, width {width:?}, {threads} thread(s)"
    );
    let (got, contiguous) = in_pool(threads, || {
        let mut eo = Embedded::new(&vec![f32::NAN; n * f], n, f, lo, GAP);
        let mut contiguous = vec![f32::NAN; n * f];
        match width {
            Some(w) => {
                spmm_view_blocked(a, ex.view(), eo.view_mut(), w).unwrap();
                spmm_blocked(a, &x, f, &mut contiguous, w).unwrap();
            }
            None => {
                spmm_view(a, ex.view(), eo.view_mut()).unwrap();
                spmm(a, &x, f, &mut contiguous).unwrap();
            }
        }
        eo.assert_gaps(&what);
        (eo.dense(), contiguous)
    });
    assert_close(&what, &got, &want, &bound, n_cols);
    assert_eq!(got, contiguous, "{what}: strided and contiguous differ");
}

#[test]
fn strided_spmm_matches_the_triple_loop_over_hostile_shapes() {
    for (s, shape) in SPMM_SHAPES.into_iter().enumerate() {
        for lx in LAYOUTS {
            for lo in LAYOUTS {
                for threads in [1, 2] {
                    for width in [None, Some(16)] {
                        check_spmm(shape, lx, lo, width, s % 2 == 0, threads, s as u64 + 7);
                    }
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn strided_spmm_matches_the_triple_loop(
        n in 0usize..70,
        n_cols in 0usize..70,
        f in prop::sample::select(vec![0usize, 1, 3, 16, 17, 40, 64, 100, 130]),
        lx in 0usize..3,
        lo in 0usize..3,
        width in prop::sample::select(vec![None, Some(1usize), Some(16), Some(64), Some(1000)]),
        weighted in any::<bool>(),
        threads in 1usize..=2,
        seed in any::<u64>(),
    ) {
        check_spmm((n, n_cols, f), LAYOUTS[lx], LAYOUTS[lo], width, weighted, threads, seed);
    }
}

#[test]
fn spmm_view_rejects_disagreeing_shapes() {
    let a = CsrRef {
        offsets: &[0, 1, 2],
        indices: &[0, 2],
        values: None,
        n_cols: 3,
    };
    let x = [0f32; 12];
    let mut out = [0f32; 8];
    let e = spmm_view(
        a,
        MatRef::row_major(&x, 3, 4).unwrap(),
        MatMut::row_major(&mut out, 2, 3).unwrap(),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("spmm_view: columns of out (columns of X), expected 4, got 3"),
        "{e}"
    );
    assert!(spmm_view(
        a,
        MatRef::row_major(&x, 2, 4).unwrap(),
        MatMut::row_major(&mut out, 2, 4).unwrap()
    )
    .is_err());
    let bad = CsrRef {
        indices: &[0, 3],
        ..a
    };
    assert!(spmm_view(
        bad,
        MatRef::row_major(&x, 3, 4).unwrap(),
        MatMut::row_major(&mut out, 2, 4).unwrap()
    )
    .is_err());
}

/// Aᵀ of a CSR (counting sort by column), for the backward of A·X.
fn csr_transpose(
    offsets: &[u32],
    indices: &[u32],
    values: &[f32],
    n_cols: usize,
) -> (Vec<u32>, Vec<u32>, Vec<f32>) {
    let mut t_off = vec![0u32; n_cols + 1];
    for &j in indices {
        t_off[j as usize + 1] += 1;
    }
    for j in 0..n_cols {
        t_off[j + 1] += t_off[j];
    }
    let mut next = t_off.clone();
    let (mut t_idx, mut t_val) = (vec![0u32; indices.len()], vec![0f32; indices.len()]);
    for i in 0..offsets.len() - 1 {
        for k in offsets[i] as usize..offsets[i + 1] as usize {
            let p = &mut next[indices[k] as usize];
            t_idx[*p as usize] = i as u32;
            t_val[*p as usize] = values[k];
            *p += 1;
        }
    }
    (t_off, t_idx, t_val)
}

/// concat(x·W1, A·x·W2), the MixHop/GraphSAGE-style layer: forward written in place into
/// the two column blocks of one buffer (the two kernels running at once on 2 threads), and
/// backward reading the gradient's column blocks as inputs. Both equal the copying path
/// (separate products, then `concat_cols`; `split_cols`, then contiguous kernels) bit for
/// bit, and the naive oracle within rounding.
#[test]
fn products_written_into_column_blocks_equal_their_concatenation() {
    let (n, k, f1, f2) = (150, 40, 37, 70); // the second block starts at odd column 37
    let (offsets, indices) = random_csr(n, n, 5);
    let vals = values(indices.len(), 6);
    let a = CsrRef {
        offsets: &offsets,
        indices: &indices,
        values: Some(&vals),
        n_cols: n,
    };
    let (t_off, t_idx, t_val) = csr_transpose(&offsets, &indices, &vals, n);
    let at = CsrRef {
        offsets: &t_off,
        indices: &t_idx,
        values: Some(&t_val),
        n_cols: n,
    };
    let x = values(n * k, 7);
    let w1 = values(k * f1, 8);
    let w2 = values(k * f2, 9);
    let g = values(n * (f1 + f2), 10); // ∂L/∂y
    for threads in [1, 2] {
        in_pool(threads, || {
            // Copying path.
            let mut y1 = vec![0f32; n * f1];
            gemm_nn(n, k, f1, &x, &w1, &mut y1, false).unwrap();
            let mut xw2 = vec![0f32; n * f2];
            gemm_nn(n, k, f2, &x, &w2, &mut xw2, false).unwrap();
            let mut y2 = vec![0f32; n * f2];
            spmm(a, &xw2, f2, &mut y2).unwrap();
            let mut y_copy = vec![f32::NAN; n * (f1 + f2)];
            concat_cols(
                &[
                    MatRef::row_major(&y1, n, f1).unwrap(),
                    MatRef::row_major(&y2, n, f2).unwrap(),
                ],
                MatMut::row_major(&mut y_copy, n, f1 + f2).unwrap(),
            )
            .unwrap();
            // In place: each product writes its block.
            let mut y = vec![f32::NAN; n * (f1 + f2)];
            let (left, right) = MatMut::row_major(&mut y, n, f1 + f2)
                .unwrap()
                .split_cols_mut(f1)
                .unwrap();
            let xv = MatRef::row_major(&x, n, k).unwrap();
            let (r1, r2) = rayon::join(
                || {
                    gemm_view(
                        xv,
                        Trans::N,
                        MatRef::row_major(&w1, k, f1).unwrap(),
                        Trans::N,
                        left,
                        false,
                    )
                },
                || spmm_view(a, MatRef::row_major(&xw2, n, f2).unwrap(), right),
            );
            r1.unwrap();
            r2.unwrap();
            assert_eq!(y, y_copy, "{threads} thread(s): in place vs concat_cols");
            assert_eq!(y, naive::concat_cols(n, &[(f1, &y1), (f2, &y2)]));

            // Backward: ∂L/∂x = G₁·W1ᵀ + (Aᵀ·G₂)·W2ᵀ with G = [G₁ | G₂].
            let gv = MatRef::row_major(&g, n, f1 + f2).unwrap();
            let mut dx = vec![f32::NAN; n * k];
            let mut atg2 = vec![0f32; n * f2];
            gemm_view(
                gv.cols(0..f1).unwrap(),
                Trans::N,
                MatRef::row_major(&w1, k, f1).unwrap(),
                Trans::T,
                MatMut::row_major(&mut dx, n, k).unwrap(),
                false,
            )
            .unwrap();
            spmm_view(
                at,
                gv.cols(f1..f1 + f2).unwrap(),
                MatMut::row_major(&mut atg2, n, f2).unwrap(),
            )
            .unwrap();
            gemm_nt(n, f2, k, &atg2, &w2, &mut dx, true).unwrap();
            // Copying path.
            let (mut g1, mut g2) = (vec![0f32; n * f1], vec![0f32; n * f2]);
            split_cols(
                gv,
                &mut [
                    MatMut::row_major(&mut g1, n, f1).unwrap(),
                    MatMut::row_major(&mut g2, n, f2).unwrap(),
                ],
            )
            .unwrap();
            let mut dx_copy = vec![0f32; n * k];
            gemm_nt(n, f1, k, &g1, &w1, &mut dx_copy, false).unwrap();
            let mut atg2_copy = vec![0f32; n * f2];
            spmm(at, &g2, f2, &mut atg2_copy).unwrap();
            gemm_nt(n, f2, k, &atg2_copy, &w2, &mut dx_copy, true).unwrap();
            assert_eq!(atg2, atg2_copy);
            assert_eq!(
                dx, dx_copy,
                "{threads} thread(s): backward through column blocks"
            );
            // And the oracle, within the f32 bound of the longer accumulation.
            let parts = naive::split_cols(n, &[f1, f2], &g);
            let t1 = naive::gemm_nn(n, f1, k, &parts[0], &naive::transpose(k, f1, &w1));
            let atg2_naive = naive::spmm(&t_off, &t_idx, Some(&t_val), &parts[1], f2);
            let t2 = naive::gemm_nn(n, f2, k, &atg2_naive, &naive::transpose(k, f2, &w2));
            let want: Vec<f32> = t1.iter().zip(&t2).map(|(p, q)| p + q).collect();
            let b_atg2 = naive::spmm(&t_off, &t_idx, Some(&abs(&t_val)), &abs(&parts[1]), f2);
            let b1 = naive::gemm_nn(
                n,
                f1,
                k,
                &abs(&parts[0]),
                &abs(&naive::transpose(k, f1, &w1)),
            );
            let b2 = naive::gemm_nn(n, f2, k, &b_atg2, &abs(&naive::transpose(k, f2, &w2)));
            let bound: Vec<f32> = b1.iter().zip(&b2).map(|(p, q)| p + q).collect();
            assert_close("concat backward", &dx, &want, &bound, f1 + f2 + n);
        });
    }
}

#[test]
fn concat_and_split_match_naive() {
    // Rows: none, one, a few, and enough for several parallel tasks (64 KiB each).
    for rows in [0usize, 1, 5, 3000] {
        let widths = [3usize, 0, 17, 1, 16];
        let total: usize = widths.iter().sum();
        let parts: Vec<Vec<f32>> = widths
            .iter()
            .enumerate()
            .map(|(i, &w)| values(rows * w, 20 + i as u64))
            .collect();
        let pieces: Vec<(usize, &[f32])> = widths
            .iter()
            .zip(&parts)
            .map(|(&w, p)| (w, &p[..]))
            .collect();
        let want = naive::concat_cols(rows, &pieces);
        for threads in [1, 2] {
            in_pool(threads, || {
                for (li, l) in LAYOUTS.into_iter().enumerate() {
                    // Strided inputs, each in a different layout, into a strided output.
                    let emb: Vec<Embedded> = widths
                        .iter()
                        .zip(&parts)
                        .enumerate()
                        .map(|(i, (&w, p))| {
                            Embedded::new(p, rows, w, LAYOUTS[(li + i) % 3], f32::NAN)
                        })
                        .collect();
                    let views: Vec<MatRef<'_>> = emb.iter().map(Embedded::view).collect();
                    let mut out = Embedded::new(&vec![f32::NAN; rows * total], rows, total, l, GAP);
                    concat_cols(&views, out.view_mut()).unwrap();
                    out.assert_gaps("concat_cols");
                    assert_eq!(out.dense(), want, "concat_cols, {rows} rows, {l:?}");
                    // Split it back into strided outputs.
                    let mut outs: Vec<Embedded> = widths
                        .iter()
                        .enumerate()
                        .map(|(i, &w)| {
                            Embedded::new(
                                &vec![f32::NAN; rows * w],
                                rows,
                                w,
                                LAYOUTS[(li + i + 1) % 3],
                                GAP,
                            )
                        })
                        .collect();
                    let mut views: Vec<MatMut<'_>> =
                        outs.iter_mut().map(Embedded::view_mut).collect();
                    split_cols(out.view(), &mut views).unwrap();
                    for (i, o) in outs.iter().enumerate() {
                        o.assert_gaps("split_cols");
                        assert_eq!(o.dense(), naive::split_cols(rows, &widths, &want)[i]);
                        assert_eq!(o.dense(), parts[i]);
                    }
                }
            });
        }
    }
    // Disagreeing shapes are errors.
    let x = [0f32; 6];
    let mut y = [0f32; 12];
    let xv = MatRef::row_major(&x, 2, 3).unwrap();
    assert!(concat_cols(&[xv, xv], MatMut::row_major(&mut y, 2, 5).unwrap()).is_err());
    assert!(concat_cols(&[xv, xv], MatMut::row_major(&mut y, 3, 4).unwrap()).is_err());
    let (mut p, mut q) = ([0f32; 6], [0f32; 4]);
    let e = split_cols(
        MatRef::row_major(&y, 2, 6).unwrap(),
        &mut [
            MatMut::row_major(&mut p, 2, 3).unwrap(),
            MatMut::row_major(&mut q, 2, 2).unwrap(),
        ],
    )
    .unwrap_err();
    assert!(
        e.to_string().contains(
            "split_cols: columns of input (sum of the outputs' columns), expected 5, got 6"
        ),
        "{e}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// A view is accepted exactly when its stride covers its width and the slice holds
    /// (rows − 1)·stride + cols elements; otherwise an error, never a panic.
    #[test]
    fn views_accept_exactly_what_their_slice_holds(
        rows in 0usize..6,
        cols in 0usize..6,
        stride in 0usize..9,
        len in 0usize..45,
    ) {
        let need = if rows == 0 { 0 } else { (rows - 1) * stride + cols };
        let ok = stride >= cols && len >= need;
        let mut data = vec![0f32; len];
        let r = MatRef::new(&data, rows, cols, stride);
        prop_assert_eq!(r.is_ok(), ok, "{:?}", r);
        if let Err(e) = r {
            let is_view_error = matches!(e, KernelError::View { kernel: "MatRef::new", .. });
            prop_assert!(is_view_error, "{:?}", e);
        }
        prop_assert_eq!(MatMut::new(&mut data, rows, cols, stride).is_ok(), ok);
        if let Ok(v) = MatRef::new(&data, rows, cols, stride) {
            // Sub-views: any in-range block is accepted, anything else rejected.
            for c0 in 0..=cols + 1 {
                for c1 in 0..=cols + 1 {
                    let inside = c0 <= c1 && c1 <= cols;
                    prop_assert_eq!(v.cols(c0..c1).is_ok(), inside);
                    if let Ok(b) = v.cols(c0..c1) {
                        prop_assert_eq!((b.n_rows(), b.n_cols(), b.row_stride()), (rows, c1 - c0, stride));
                    }
                }
            }
            prop_assert_eq!(v.rows(0..rows + 1).is_err(), true);
            let m = MatMut::new(&mut data, rows, cols, stride).unwrap();
            prop_assert_eq!(m.split_cols_mut(cols + 1).is_err(), true);
        }
    }
}

#[test]
fn views_reject_overflow_and_short_slices_with_messages() {
    let e = MatRef::new(&[0.0; 13], 3, 4, 5).unwrap_err();
    assert_eq!(
        e.to_string(),
        "MatRef::new: data of a 3×4 view with row stride 5, expected ≥ 14 elements, got 13"
    );
    let e = MatRef::new(&[0.0; 100], 3, 4, 3).unwrap_err();
    assert_eq!(
        e.to_string(),
        "MatRef::new: row stride of a 3×4 view, expected ≥ 4, got 3"
    );
    assert!(MatRef::new(&[], usize::MAX, 2, usize::MAX).is_err());
    assert!(MatMut::new(&mut [], 2, usize::MAX, usize::MAX).is_err());
    // The smallest slice that fits: the last row needs no padding after it.
    let data: Vec<f32> = (0..14).map(|v| v as f32).collect();
    let v = MatRef::new(&data, 3, 4, 5).unwrap();
    assert_eq!(v.to_vec(), naive::dense(&data, 3, 4, 5));
    assert_eq!(v.row(2), &[10.0, 11.0, 12.0, 13.0]);
    let b = v.cols(1..3).unwrap().rows(1..3).unwrap();
    assert_eq!(b.to_vec(), [6.0, 7.0, 11.0, 12.0]);
    // Split halves write only their own columns.
    let mut buf = vec![0f32; 14];
    let (mut l, mut r) = MatMut::new(&mut buf, 3, 4, 5)
        .unwrap()
        .split_cols_mut(1)
        .unwrap();
    l.fill(1.0);
    r.fill(2.0);
    assert_eq!(
        buf,
        [1., 2., 2., 2., 0., 1., 2., 2., 2., 0., 1., 2., 2., 2.]
    );
}
