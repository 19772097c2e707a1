//! Deterministic test inputs and checks shared by the kernel tests.
#![allow(dead_code)]

use saintflow_ops::gemm::{add_half, gemm_packed, gemm_packed_half, KHalf, PackedB, Trans};
use saintflow_ops::{MatMut, MatRef};

/// A xorshift64 stream of u64 from `seed` (any seed; 0 is mapped to 1).
pub fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

/// `n` values uniform in [−1, 1) from `seed`.
pub fn uniform(n: usize, seed: u64) -> Vec<f64> {
    let mut next = xorshift(seed);
    (0..n)
        .map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
        .collect()
}

/// f32 unit roundoff.
pub const U: f64 = 1.0 / (1u64 << 24) as f64;

/// `n` values uniform in [−1, 1) as f32.
pub fn values(n: usize, seed: u64) -> Vec<f32> {
    uniform(n, seed).into_iter().map(|v| v as f32).collect()
}

/// Elementwise |v|.
pub fn abs(v: &[f32]) -> Vec<f32> {
    v.iter().map(|x| x.abs()).collect()
}

/// |got − want| ≤ 2·k·u·bound + tiny, per element: the f32 bound for length-k dot
/// products whose absolute-value product is `bound`.
pub fn assert_close(kernel: &str, got: &[f32], want: &[f32], bound: &[f32], k: usize) {
    assert_eq!(got.len(), want.len());
    for i in 0..got.len() {
        let tol = 2.0 * k.max(1) as f64 * U * f64::from(bound[i]) + 1e-30;
        let err = (f64::from(got[i]) - f64::from(want[i])).abs();
        assert!(
            err <= tol,
            "{kernel}: element {i}: got {}, want {}, err {err:e} > tol {tol:e}",
            got[i],
            want[i]
        );
    }
}

/// Runs `f` on a fresh rayon pool of `threads` threads.
pub fn in_pool<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> T {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(f)
}

/// A random CSR with a hub row, empty rows and duplicates allowed in no row (sorted).
pub fn random_csr(n: usize, n_cols: usize, seed: u64) -> (Vec<u32>, Vec<u32>) {
    let r = values(n * 8 + 1, seed);
    let mut offsets = vec![0u32];
    let mut indices = Vec::new();
    for i in 0..n {
        let deg = if i == n / 2 {
            n_cols
        } else {
            ((r[i].abs() * 9.0) as usize).saturating_sub(2)
        };
        let mut row: Vec<u32> = (0..deg.min(n_cols))
            .map(|t| {
                ((r[(i * 7 + t) % r.len()].abs() * n_cols as f32) as u32).min(n_cols as u32 - 1)
            })
            .collect();
        if i == n / 2 {
            row = (0..n_cols as u32).collect();
        }
        row.sort_unstable();
        row.dedup();
        indices.extend(row);
        offsets.push(indices.len() as u32);
    }
    (offsets, indices)
}

/// GEMM shapes (m, k, n): empty dimensions, one element, odd sizes, thin and tall.
pub const GEMM_SHAPES: [(usize, usize, usize); 18] = [
    (0, 5, 7),
    (5, 0, 7),
    (5, 7, 0),
    (1, 1, 1),
    (1, 1000, 1),
    (7, 13, 5),
    (17, 33, 65),
    (64, 64, 64),
    (130, 257, 33),
    (2, 3000, 2),
    (1000, 3, 7),
    (3, 5, 1000),
    (257, 129, 300),
    (600, 512, 64),
    // Every blocking boundary of the GEMM at once: k past two KC blocks (256), n past the
    // widest NC block (1024 with a 2 MiB L2), edge tiles in both directions.
    (29, 531, 1061),
    // One row and one column panel short of a tile, k one past a block.
    (13, 257, 31),
    // k long enough to run as two halves (16 blocks of KC = 256), 17 blocks with the last
    // one element deep: the halves meet at block 8; C of 4 row panels of AVX2's tile (the
    // transposed op(A) packs them as one group, short of 32).
    (19, 4097, 37),
    // The same halves with 34 row panels of 6: a whole group of 32 transposed panels and a
    // short one.
    (200, 4097, 40),
];

/// op(A)'s and op(B)'s transposes, and the stored shapes of A and B.
pub type Oriented = (Trans, Trans, (usize, usize), (usize, usize));

/// The three products of a step (forward A·B, ∇W = Aᵀ·B, ∇X = A·Bᵀ) for op(A) m×k and
/// op(B) k×n: the transposes and the stored shapes of A and B.
pub fn oriented(m: usize, k: usize, n: usize) -> [Oriented; 3] {
    [
        (Trans::N, Trans::N, (m, k), (k, n)),
        (Trans::T, Trans::N, (k, m), (k, n)),
        (Trans::N, Trans::T, (m, k), (n, k)),
    ]
}

/// The three row blocks of an m-row C that the packed-B helpers cut, each with its rows
/// of op(A) (a block of rows of op(A) is a block of columns of a transposed A).
fn row_blocks(
    av: MatRef<'_>,
    ta: Trans,
    m: usize,
) -> impl Iterator<Item = (std::ops::Range<usize>, MatRef<'_>)> {
    let cuts = [0, m / 3, 2 * m / 3, m];
    (0..3).map(move |i| {
        let rows = cuts[i]..cuts[i + 1];
        let ap = match ta {
            Trans::N => av.rows(rows.clone()).unwrap(),
            Trans::T => av.cols(rows.clone()).unwrap(),
        };
        (rows, ap)
    })
}

/// C (m×n) = op(A)·B on a packed B in three row blocks, as the executor's GEMM parts take
/// them.
pub fn packed_in_row_parts(
    av: MatRef<'_>,
    ta: Trans,
    packed: &PackedB,
    (m, n): (usize, usize),
) -> Vec<f32> {
    let mut got = vec![f32::NAN; m * n];
    for (rows, ap) in row_blocks(av, ta, m) {
        let cv = MatMut::row_major(&mut got, m, n)
            .unwrap()
            .rows_mut(rows)
            .unwrap();
        gemm_packed(ap, ta, packed, cv, false).unwrap();
    }
    got
}

/// [`packed_in_row_parts`] with each row block's two halves of k computed apart
/// (`gemm_packed_half`: the first into C, the second into a buffer) and then added
/// (`add_half`), as the executor's GEMM parts and their `finish` do. `None` where
/// the packed B's k does not split, after checking that `gemm_packed_half` refuses it.
pub fn packed_in_row_halves(
    av: MatRef<'_>,
    ta: Trans,
    packed: &PackedB,
    (m, n): (usize, usize),
) -> Option<Vec<f32>> {
    if !packed.splits_k() {
        let mut c = vec![0f32; m * n];
        let cv = MatMut::row_major(&mut c, m, n).unwrap();
        let e = gemm_packed_half(av, ta, packed, KHalf::First, cv).unwrap_err();
        assert!(e.to_string().contains("below the split"), "{e}");
        return None;
    }
    let mut got = vec![f32::NAN; m * n];
    for (rows, ap) in row_blocks(av, ta, m) {
        let mut half = vec![f32::NAN; rows.len() * n];
        let hv = MatMut::row_major(&mut half, rows.len(), n).unwrap();
        gemm_packed_half(ap, ta, packed, KHalf::Second, hv).unwrap();
        let cv = MatMut::row_major(&mut got, m, n)
            .unwrap()
            .rows_mut(rows.clone())
            .unwrap();
        gemm_packed_half(ap, ta, packed, KHalf::First, cv).unwrap();
        let cv = MatMut::row_major(&mut got, m, n)
            .unwrap()
            .rows_mut(rows.clone())
            .unwrap();
        add_half(cv, MatRef::row_major(&half, rows.len(), n).unwrap()).unwrap();
    }
    Some(got)
}
