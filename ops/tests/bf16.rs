//! The bf16 product (issue 33, item 4) against its oracle: the f64 sum of the operands
//! rounded to bf16 ([`bf16::round`]), within the f32 accumulation bound, on the wide and
//! the narrow tile, plain and transposed; the same bits on every thread count and row
//! split; and a clear refusal on a CPU without AVX512_BF16. On such a CPU the oracle
//! tests check that refusal instead (they cannot run the instruction). Where the CPU has
//! AMX, the default bf16 path is its tiles, and the AVX512_BF16 tiles are checked by
//! name beside them (and the other way round on a CPU without AMX: refused by name).

mod common;

use common::{
    abs, assert_close, in_pool, oriented, packed_in_row_halves, packed_in_row_parts, values,
    GEMM_SHAPES,
};
use saintflow_ops::gemm::{
    amx, bf16, gemm_view_bf16, gemm_view_half, gemm_view_with, k_splits, narrow_path, plan,
    Bf16Tiles, Isa, KHalf, PackedB, Precision, Trans,
};
use saintflow_ops::{naive, KernelError, MatMut, MatRef};

/// Shapes crossing every blocking edge of the bf16 path: odd k (a half-empty last pair),
/// k past one block of 512 elements (256 pairs), n past NC, edge tiles, and narrow C
/// (which the plan moves to the narrow tile, or computes as Cᵀ), and k long enough to run
/// as two halves (16 blocks of 256 pairs), an odd element past them.
const SHAPES: [(usize, usize, usize); 7] = [
    (29, 1101, 1061),
    (301, 600, 129),
    (7, 1001, 70),
    (64, 513, 64),
    (500, 301, 2),
    (300, 700, 7),
    (13, 8193, 20),
];

fn rounded(v: &[f32]) -> Vec<f32> {
    v.iter().map(|&x| bf16::widen(bf16::round(x))).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// One bf16 product, the kind `tiles` names (None: the default path, `gemm_view_with`),
/// into C = NaNs (overwritten) or a copy of `c0` (accumulated).
fn run_tiles(
    tiles: Option<Bf16Tiles>,
    (a, ar, ac, ta): (&[f32], usize, usize, Trans),
    (b, br, bc, tb): (&[f32], usize, usize, Trans),
    (m, n): (usize, usize),
    c0: Option<&[f32]>,
) -> Result<Vec<f32>, KernelError> {
    let mut c = c0.map_or_else(|| vec![f32::NAN; m * n], <[f32]>::to_vec);
    let (av, bv) = (
        MatRef::row_major(a, ar, ac).unwrap(),
        MatRef::row_major(b, br, bc).unwrap(),
    );
    let cv = MatMut::row_major(&mut c, m, n).unwrap();
    match tiles {
        None => gemm_view_with(Precision::Bf16, av, ta, bv, tb, cv, c0.is_some()),
        Some(t) => gemm_view_bf16(t, av, ta, bv, tb, cv, c0.is_some()),
    }
    .map(|()| c)
}

/// op(A) and op(B) as stored for an orientation: the transposed operand transposed.
fn stored(
    a: &[f32],
    b: &[f32],
    (m, k, n): (usize, usize, usize),
    ta: Trans,
    tb: Trans,
) -> (Vec<f32>, Vec<f32>) {
    let a_st = match ta {
        Trans::N => a.to_vec(),
        Trans::T => naive::transpose(m, k, a),
    };
    let b_st = match tb {
        Trans::N => b.to_vec(),
        Trans::T => naive::transpose(k, n, b),
    };
    (a_st, b_st)
}

/// [`run_tiles`] on the default path, which must run.
fn run(
    a: (&[f32], usize, usize, Trans),
    b: (&[f32], usize, usize, Trans),
    mn: (usize, usize),
    c0: Option<&[f32]>,
) -> Vec<f32> {
    run_tiles(None, a, b, mn, c0).unwrap()
}

#[test]
fn bf16_products_match_the_rounded_oracle_on_every_tile_and_orientation() {
    if let Err(why) = Precision::Bf16.check() {
        let mut c = [0f32; 4];
        let e = gemm_view_with(
            Precision::Bf16,
            MatRef::row_major(&[1.0; 4], 2, 2).unwrap(),
            Trans::N,
            MatRef::row_major(&[1.0; 4], 2, 2).unwrap(),
            Trans::N,
            MatMut::row_major(&mut c, 2, 2).unwrap(),
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("bf16"), "{e}");
        eprintln!("bf16 not run here: {why}");
        return;
    }
    for (m, k, n) in GEMM_SHAPES.into_iter().chain(SHAPES) {
        let a = values(m * k, 31);
        let b = values(k * n, 32);
        let (ar, br) = (rounded(&a), rounded(&b));
        let want = naive::gemm_nn(m, k, n, &ar, &br);
        let bound = naive::gemm_nn(m, k, n, &abs(&ar), &abs(&br));
        let c0 = values(m * n, 33);
        for (ta, tb, (sa_r, sa_c), (sb_r, sb_c)) in oriented(m, k, n) {
            let (a_st, b_st) = stored(&a, &b, (m, k, n), ta, tb);
            let what = format!("{ta:?}{tb:?} {m}×{k}×{n}");
            for threads in [1, 2, 3] {
                let got = in_pool(threads, || {
                    run(
                        (&a_st, sa_r, sa_c, ta),
                        (&b_st, sb_r, sb_c, tb),
                        (m, n),
                        None,
                    )
                });
                assert_close(&format!("bf16 {what}"), &got, &want, &bound, k);
                // Accumulating adds the same product to C.
                let acc = in_pool(threads, || {
                    run(
                        (&a_st, sa_r, sa_c, ta),
                        (&b_st, sb_r, sb_c, tb),
                        (m, n),
                        Some(&c0),
                    )
                });
                // (C0 + first k block) + the next: within the bound of k + 1 terms.
                let sum: Vec<f32> = c0.iter().zip(&want).map(|(x, y)| x + y).collect();
                let sum_bound: Vec<f32> = c0.iter().zip(&bound).map(|(x, y)| x.abs() + y).collect();
                assert_close(
                    &format!("bf16 accumulate {what}"),
                    &acc,
                    &sum,
                    &sum_bound,
                    k + 1,
                );
            }
        }
    }
}

/// Same bits on 1–3 threads, and with op(B) packed once and shared by three row blocks
/// of C (the executor's GEMM parts) as in one call.
#[test]
fn bf16_bits_depend_on_neither_threads_nor_the_split() {
    if Precision::Bf16.check().is_err() {
        let b = [1f32; 4];
        let bv = MatRef::row_major(&b, 2, 2).unwrap();
        assert!(PackedB::new_with(Precision::Bf16, Isa::current(), bv, Trans::N).is_err());
        return;
    }
    let mut split_by_halves = 0;
    for (m, k, n) in SHAPES.into_iter().chain([(70, 1000, 130)]) {
        let a = values(m * k, 41);
        let b = values(k * n, 42);
        for (ta, tb, (ar, ac), (br, bc)) in oriented(m, k, n) {
            let (isa, transposed) = plan(Isa::Avx512, m, n, ta);
            let what = format!("{ta:?}{tb:?} {m}×{k}×{n}");
            let whole: Vec<Vec<u32>> = [1, 2, 3]
                .into_iter()
                .map(|t| {
                    in_pool(t, || {
                        bits(&run((&a, ar, ac, ta), (&b, br, bc, tb), (m, n), None))
                    })
                })
                .collect();
            assert!(
                whole.iter().all(|w| *w == whole[0]),
                "{what}: threads differ"
            );
            // A C computed transposed, or of one or two columns (the narrow path, which
            // packs nothing: the executor gives each row block the whole path), shares no
            // packed op(B).
            if transposed || narrow_path(Precision::Bf16, m, n) {
                continue;
            }
            let av = MatRef::row_major(&a, ar, ac).unwrap();
            let bv = MatRef::row_major(&b, br, bc).unwrap();
            for threads in [1, 2] {
                let (got, halves) = in_pool(threads, || {
                    let packed = PackedB::new_with(Precision::Bf16, isa, bv, tb).unwrap();
                    (
                        packed_in_row_parts(av, ta, &packed, (m, n)),
                        packed_in_row_halves(av, ta, &packed, (m, n)),
                    )
                });
                assert!(
                    bits(&got) == whole[0],
                    "{what}: packed parts on {threads} threads"
                );
                if let Some(halves) = halves {
                    split_by_halves += 1;
                    assert!(
                        bits(&halves) == whole[0],
                        "{what}: halves of k apart on {threads} threads"
                    );
                }
            }
        }
    }
    // (13, 8193, 20): 4097 bf16 pairs, past the split.
    assert!(split_by_halves > 0);
}

/// Both bf16 tiles by name, in one process: each within the oracle's bound on every
/// shape and orientation, overwriting and accumulating, on 1 and 2 threads with the same
/// bits; on a CPU without AMX (or AVX512_BF16) the names it cannot run are refused.
#[test]
fn both_bf16_tiles_by_name_match_the_oracle() {
    let one = [1f32; 4];
    let probe = |tiles| {
        run_tiles(
            Some(tiles),
            (&one, 2, 2, Trans::N),
            (&one, 2, 2, Trans::N),
            (2, 2),
            None,
        )
    };
    let mut names = vec![];
    for (tiles, runs) in [
        (Bf16Tiles::Avx512Bf16, Precision::Bf16.check().is_ok()),
        (
            Bf16Tiles::Amx,
            Precision::Bf16.check().is_ok() && amx::available(),
        ),
    ] {
        if runs {
            names.push(tiles);
        } else {
            let e = probe(tiles).unwrap_err().to_string();
            assert!(e.contains("bf16") || e.contains("AMX"), "{tiles:?}: {e}");
            eprintln!("{tiles:?} not run here: {e}");
        }
    }
    // Shapes crossing the AMX tile's edges too: 32-row and 32-column tiles with a
    // ragged last one, k padded to 16 pairs within a block and across blocks.
    let shapes = SHAPES
        .into_iter()
        .chain([(33, 31, 65), (64, 64, 64), (96, 1030, 97)]);
    for (m, k, n) in shapes {
        let a = values(m * k, 51);
        let b = values(k * n, 52);
        let (ar, br) = (rounded(&a), rounded(&b));
        let want = naive::gemm_nn(m, k, n, &ar, &br);
        let bound = naive::gemm_nn(m, k, n, &abs(&ar), &abs(&br));
        let c0 = values(m * n, 53);
        let sum: Vec<f32> = c0.iter().zip(&want).map(|(x, y)| x + y).collect();
        let sum_bound: Vec<f32> = c0.iter().zip(&bound).map(|(x, y)| x.abs() + y).collect();
        for (ta, tb, (sa_r, sa_c), (sb_r, sb_c)) in oriented(m, k, n) {
            let (a_st, b_st) = stored(&a, &b, (m, k, n), ta, tb);
            for &tiles in &names {
                let what = format!("{tiles:?} {ta:?}{tb:?} {m}×{k}×{n}");
                let on = |threads, c0| {
                    in_pool(threads, || {
                        run_tiles(
                            Some(tiles),
                            (&a_st, sa_r, sa_c, ta),
                            (&b_st, sb_r, sb_c, tb),
                            (m, n),
                            c0,
                        )
                        .unwrap()
                    })
                };
                let got = on(1, None);
                assert_close(&what, &got, &want, &bound, k);
                assert!(bits(&on(2, None)) == bits(&got), "{what}: 2 threads differ");
                let acc = on(2, Some(&c0));
                assert_close(&format!("{what} accumulate"), &acc, &sum, &sum_bound, k + 1);
            }
        }
    }
}

/// A bf16 product of one or two columns (a classifier's logits H·W and its ∇W = Hᵀ·∇Y) runs
/// on the narrow path, not the tiles: the f32 path's bits on operands rounded to bf16 first,
/// bit for bit — op(A) row-major and transposed, overwriting and accumulating, on 1 and 2
/// threads, k whole and long enough to split (its halves apart, the second added last, as
/// the executor's parts run them); operands with the rounding's hostile values (halfway
/// cases both ways, subnormals, tiny values). NaN is left to the rounding's unit test.
#[test]
fn bf16_narrow_products_are_the_f32_path_on_rounded_operands() {
    if Precision::Bf16.check().is_err() {
        eprintln!("bf16 not run here");
        return;
    }
    // Values whose rounding is hostile: ties both ways, subnormals, large and tiny.
    let hostile = |n: usize, seed: u64| -> Vec<f32> {
        let base = values(n, seed);
        base.iter()
            .enumerate()
            .map(|(i, &v)| match i % 7 {
                0 => f32::from_bits(0x3f80_8000 + (((i / 7) as u32 & 1) << 16)), // ties
                1 => f32::from_bits(0x0000_1234), // subnormal: reads as zero
                2 => v * 1e-30,
                _ => v,
            })
            .collect()
    };
    for (m, k, n) in [
        (37usize, 300usize, 2usize),
        (40, 5000, 1),
        (1000, 70, 2),
        (9, 9000, 2),
    ] {
        assert!(narrow_path(Precision::Bf16, m, n), "{m}×{n} not narrow");
        let a = hostile(m * k, 61);
        let b = hostile(k * n, 62);
        let c0 = values(m * n, 63);
        for (ta, tb, (ar, ac), (br, bc)) in oriented(m, k, n) {
            let (a_st, b_st) = stored(&a, &b, (m, k, n), ta, tb);
            let (a_r, b_r) = (rounded(&a_st), rounded(&b_st));
            let what = format!("{ta:?}{tb:?} {m}×{k}×{n}");
            let product = |p: Precision, (a, b): (&[f32], &[f32]), c0: Option<&[f32]>| {
                let mut c = c0.map_or_else(|| vec![f32::NAN; m * n], <[f32]>::to_vec);
                let av = MatRef::row_major(a, ar, ac).unwrap();
                let bv = MatRef::row_major(b, br, bc).unwrap();
                let cv = MatMut::row_major(&mut c, m, n).unwrap();
                gemm_view_with(p, av, ta, bv, tb, cv, c0.is_some()).unwrap();
                c
            };
            for threads in [1, 2] {
                for c0 in [None, Some(&c0[..])] {
                    let (got, want) = in_pool(threads, || {
                        (
                            product(Precision::Bf16, (&a_st, &b_st), c0),
                            product(Precision::F32, (&a_r, &b_r), c0),
                        )
                    });
                    let acc = c0.is_some();
                    assert!(
                        bits(&got) == bits(&want),
                        "{what} on {threads}: accumulate {acc}"
                    );
                }
            }
            // The halves of a long k apart, as the executor's parts compute them.
            if k_splits(Precision::Bf16, (m, n), k) {
                let av = MatRef::row_major(&a_st, ar, ac).unwrap();
                let bv = MatRef::row_major(&b_st, br, bc).unwrap();
                let mut first = vec![f32::NAN; m * n];
                let mut second = vec![f32::NAN; m * n];
                for (half, c) in [(KHalf::First, &mut first), (KHalf::Second, &mut second)] {
                    let cv = MatMut::row_major(c, m, n).unwrap();
                    gemm_view_half(Precision::Bf16, av, ta, bv, tb, half, cv).unwrap();
                }
                let halves: Vec<f32> = first.iter().zip(&second).map(|(x, y)| x + y).collect();
                let whole = product(Precision::F32, (&a_r, &b_r), None);
                assert!(bits(&halves) == bits(&whole), "{what}: halves apart");
            }
        }
    }
    assert!(
        k_splits(Precision::Bf16, (40, 1), 5000),
        "5000 splits on the narrow path"
    );
}

/// Where the CPU has AMX, a bf16 product of k shorter than one tile chunk
/// ([`amx::K_MIN`]: a classifier's ∇H, k = its classes) runs on the AVX512_BF16 tiles, whose
/// steps are single pairs, and a longer one on AMX: the default path's bits are the named
/// tiles' bits on each side of the bound (the two tiles' bits differ: the check can
/// fail), and op(B) packed once for row parts agrees with the whole (the executor's
/// chains and row blocks).
#[test]
fn bf16_products_of_short_k_leave_the_amx_tiles() {
    if Precision::Bf16.check().is_err() || !amx::enabled() {
        eprintln!("no AMX tiles here (or turned off): nothing chooses between them");
        return;
    }
    let (mut differ, mut packed_shapes) = (false, 0);
    for (m, k, n) in [
        (50, 2, 300),
        (70, 31, 64),
        (40, 32, 64),
        (33, 47, 70),
        (64, 20, 128),
    ] {
        let a = values(m * k, 71);
        let b = values(k * n, 72);
        let (ar, br) = ((&a[..], m, k, Trans::N), (&b[..], k, n, Trans::N));
        let default = run(ar, br, (m, n), None);
        let named = |t| run_tiles(Some(t), ar, br, (m, n), None).unwrap();
        let (avx, tiles) = (named(Bf16Tiles::Avx512Bf16), named(Bf16Tiles::Amx));
        let want = if k < amx::K_MIN { &avx } else { &tiles };
        assert!(
            bits(&default) == bits(want),
            "{m}×{k}×{n}: not the expected tiles"
        );
        differ |= bits(&avx) != bits(&tiles);
        // A C computed transposed shares no packed op(B) (as in the test above).
        let (isa, transposed) = plan(Isa::Avx512, m, n, Trans::N);
        if !transposed {
            let bv = MatRef::row_major(&b, k, n).unwrap();
            let av = MatRef::row_major(&a, m, k).unwrap();
            let packed = PackedB::new_with(Precision::Bf16, isa, bv, Trans::N).unwrap();
            let parts = packed_in_row_parts(av, Trans::N, &packed, (m, n));
            assert!(
                bits(&parts) == bits(&default),
                "{m}×{k}×{n}: packed row parts"
            );
            packed_shapes += 1;
        }
    }
    assert!(packed_shapes >= 2, "too few shapes checked packed");
    assert!(differ, "the two tiles gave the same bits on every shape");
}
