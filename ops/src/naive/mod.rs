//! Naive oracles: the definitions, in f64 where they sum, that every optimised kernel is
//! tested against and benchmarked beside. Dense products and SpMM here; the elementwise,
//! gather, loss, attention and optimiser oracles in submodules named after their kernels'
//! modules, generic over f32/f64 like the kernels (f32 for the benches, f64 as test oracle).
//! Indexed loops on purpose: they are the definitions as written, and the bench baseline.
#![allow(clippy::needless_range_loop)]

pub mod attention;
pub mod elementwise;
pub mod gather;
pub mod loss;
pub mod optim;
pub mod sgns;

/// C = A·B for row-major A (m×k), B (k×n), accumulated in f64.
pub fn gemm_nn(m: usize, k: usize, n: usize, a: &[f32], b: &[f32]) -> Vec<f32> {
    let mut c = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut s = 0f64;
            for p in 0..k {
                s += f64::from(a[i * k + p]) * f64::from(b[p * n + j]);
            }
            c[i * n + j] = s as f32;
        }
    }
    c
}

/// Row-major transpose of an r×c matrix.
pub fn transpose(r: usize, c: usize, a: &[f32]) -> Vec<f32> {
    let mut t = vec![0f32; r * c];
    for i in 0..r {
        for j in 0..c {
            t[j * r + i] = a[i * c + j];
        }
    }
    t
}

/// out = A·X for a CSR A (offsets, indices, optional values; missing values are 1) and a
/// row-major X with `f` columns; the triple loop, accumulated in f64.
pub fn spmm(
    offsets: &[u32],
    indices: &[u32],
    values: Option<&[f32]>,
    x: &[f32],
    f: usize,
) -> Vec<f32> {
    let n = offsets.len() - 1;
    let mut out = vec![0f32; n * f];
    for i in 0..n {
        for c in 0..f {
            let mut s = 0f64;
            for k in offsets[i] as usize..offsets[i + 1] as usize {
                let v = values.map_or(1.0, |v| f64::from(v[k]));
                s += v * f64::from(x[indices[k] as usize * f + c]);
            }
            out[i * f + c] = s as f32;
        }
    }
    out
}

/// The row-major `rows × cols` matrix whose element (i, j) is `data[i·row_stride + j]`:
/// a strided view read the obvious way.
pub fn dense(data: &[f32], rows: usize, cols: usize, row_stride: usize) -> Vec<f32> {
    let mut d = Vec::with_capacity(rows * cols);
    for i in 0..rows {
        for j in 0..cols {
            d.push(data[i * row_stride + j]);
        }
    }
    d
}

/// [x_0 | x_1 | …] for row-major `rows × w_i` matrices given as `(w_i, x_i)`.
pub fn concat_cols(rows: usize, pieces: &[(usize, &[f32])]) -> Vec<f32> {
    let width: usize = pieces.iter().map(|p| p.0).sum();
    let mut out = vec![0f32; rows * width];
    let mut c0 = 0;
    for &(w, x) in pieces {
        for i in 0..rows {
            for j in 0..w {
                out[i * width + c0 + j] = x[i * w + j];
            }
        }
        c0 += w;
    }
    out
}

/// The column blocks of widths `widths` of a row-major `rows × Σw` matrix, in order.
pub fn split_cols(rows: usize, widths: &[usize], a: &[f32]) -> Vec<Vec<f32>> {
    let width: usize = widths.iter().sum();
    let mut c0 = 0;
    let mut out = Vec::new();
    for &w in widths {
        let mut x = vec![0f32; rows * w];
        for i in 0..rows {
            for j in 0..w {
                x[i * w + j] = a[i * width + c0 + j];
            }
        }
        out.push(x);
        c0 += w;
    }
    out
}
