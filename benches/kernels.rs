//! Kernel benchmarks (issue: kernels). GEMM at the shapes through ours (and
//! `matrixmultiply` on one thread, the alternative measured), 1 and 2 threads, in FLOP/s;
//! SpMM on real frontier subgraphs (scale-17 degree-16 Kronecker, m=1000 n=8000) at
//! f = 512 and 1024, partitioned vs unpartitioned, packed vs in place, 1 and 2 threads,
//! against the bytes-moved bound over a STREAM-style triad measured in the same run, with
//! the roofline's other sides (the same loop with X's panel in L1, and in L2). The view
//! path (a product written into, or read from, a column block of a wider matrix) beside
//! the contiguous one.
//!
//! Run: `cargo bench --bench kernels`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rayon::prelude::*;
use saintflow::progress::Progress;
use saintflow::sample::{sample_subgraph, FrontierParams, FrontierSampler};
use saintflow::store::gen::{generate_kronecker, KroneckerSpec};
use saintflow::store::GraphStore;
use saintflow_ops::gemm::{gemm_nn, gemm_nt, gemm_tn, gemm_view, Trans};
use saintflow_ops::spmm::{
    block_width, spmm, spmm_blocked, spmm_view, spmm_view_with, CsrRef, Gather,
};
use saintflow_ops::{AlignedVec, MatMut, MatRef};

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
}

fn fill(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5)
        .collect()
}

fn gemm_bench(c: &mut Criterion) {
    // (name, m, k, n, kind): forward X·W and the two backward products of each layer.
    let shapes = [
        ("nn_8000x512x512", 8000, 512, 512, 'n'),
        ("tn_512x8000x512", 512, 8000, 512, 't'),
        ("nt_8000x512x512", 8000, 512, 512, 'r'),
        ("nn_8000x1024x512", 8000, 1024, 512, 'n'),
        ("tn_1024x8000x512", 1024, 8000, 512, 't'),
        ("nt_8000x512x1024", 8000, 512, 1024, 'r'),
    ];
    let mut g = c.benchmark_group("gemm");
    g.sample_size(10).measurement_time(Duration::from_secs(4));
    for (name, m, k, n, kind) in shapes {
        let a = fill(m * k);
        let b = fill(k * n);
        let mut out = vec![0f32; m * n];
        g.throughput(Throughput::Elements(2 * (m * k * n) as u64));
        for threads in [1, 2] {
            let p = pool(threads);
            g.bench_with_input(
                BenchmarkId::new(format!("ours/{name}"), threads),
                &threads,
                |bch, _| {
                    bch.iter(|| {
                        p.install(|| match kind {
                            'n' => gemm_nn(m, k, n, &a, &b, &mut out, false),
                            't' => gemm_tn(m, k, n, &a, &b, &mut out, false),
                            _ => gemm_nt(m, k, n, &a, &b, &mut out, false),
                        })
                        .unwrap()
                    })
                },
            );
        }
        if kind == 'n' {
            // The alternative library, single-threaded (its threading uses a pool of its own,
            // which the one-pool rule excludes anyway).
            g.bench_function(format!("matrixmultiply/{name}/1"), |bch| {
                bch.iter(|| unsafe {
                    matrixmultiply::sgemm(
                        m,
                        k,
                        n,
                        1.0,
                        a.as_ptr(),
                        k as isize,
                        1,
                        b.as_ptr(),
                        n as isize,
                        1,
                        0.0,
                        out.as_mut_ptr(),
                        n as isize,
                        1,
                    )
                })
            });
        }
    }
    g.finish();
}

/// The view path against the contiguous one at the forward shape: C = X·W (8000×512·512×512)
/// written into columns 512..1024 of an 8000×1024 buffer (one block of a concatenation),
/// and ∇X = G·Wᵀ reading its G from those columns (the concatenation's backward).
fn gemm_view_bench(c: &mut Criterion) {
    let (m, k, n) = (8000, 512, 512);
    let a = fill(m * k);
    let b = fill(k * n);
    let mut out = vec![0f32; m * n];
    let mut wide = vec![0f32; m * 2 * n];
    let mut g = c.benchmark_group("gemm_view/nn_8000x512x512");
    g.sample_size(10);
    g.throughput(Throughput::Elements(2 * (m * k * n) as u64));
    for threads in [1, 2] {
        let p = pool(threads);
        let av = MatRef::row_major(&a, m, k).unwrap();
        let bv = MatRef::row_major(&b, k, n).unwrap();
        g.bench_function(format!("contiguous/{threads}"), |bch| {
            bch.iter(|| {
                p.install(|| gemm_nn(m, k, n, &a, &b, &mut out, false))
                    .unwrap()
            })
        });
        g.bench_function(format!("into_cols_512_of_1024/{threads}"), |bch| {
            bch.iter(|| {
                let cv = MatMut::row_major(&mut wide, m, 2 * n)
                    .unwrap()
                    .cols_mut(n..2 * n)
                    .unwrap();
                p.install(|| gemm_view(av, Trans::N, bv, Trans::N, cv, false))
                    .unwrap()
            })
        });
        g.bench_function(format!("nt_contiguous/{threads}"), |bch| {
            bch.iter(|| {
                p.install(|| gemm_nt(m, n, k, &out, &b, &mut wide[..m * k], false))
                    .unwrap()
            })
        });
        g.bench_function(format!("nt_from_cols_512_of_1024/{threads}"), |bch| {
            let mut dx = vec![0f32; m * k];
            bch.iter(|| {
                let gv = MatRef::row_major(&wide, m, 2 * n)
                    .unwrap()
                    .cols(n..2 * n)
                    .unwrap();
                let dxv = MatMut::row_major(&mut dx, m, k).unwrap();
                p.install(|| gemm_view(gv, Trans::N, bv, Trans::T, dxv, false))
                    .unwrap()
            })
        });
    }
    g.finish();
}

/// STREAM triad a = b + s·c over 3 × 64 MiB, best of 5, in bytes/s (24 bytes per element).
fn triad_bandwidth(threads: usize) -> f64 {
    let n = 16 << 20;
    let b = vec![1f32; n];
    let cc = vec![2f32; n];
    let mut a = vec![0f32; n];
    let p = pool(threads);
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        p.install(|| {
            a.par_chunks_mut(1 << 16)
                .zip(b.par_chunks(1 << 16))
                .zip(cc.par_chunks(1 << 16))
                .for_each(|((a, b), c)| {
                    for i in 0..a.len() {
                        a[i] = b[i] + 3.0 * c[i];
                    }
                })
        });
        best = best.min(t.elapsed().as_secs_f64());
        black_box(&a);
    }
    (12 * n) as f64 / best
}

fn spmm_bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let out_path = tmp.path().join("k17.sf");
    let spec = KroneckerSpec {
        scale: 17,
        degree: 16.0,
        n_features: 0,
        n_classes: 2,
        ..Default::default()
    };
    generate_kronecker(&spec, &out_path, true, &Progress::hidden()).unwrap();
    let store = GraphStore::open(&out_path).unwrap();
    let sampler = FrontierSampler::new(
        store.full(),
        FrontierParams {
            frontier: 1000,
            budget: 8000,
            ..Default::default()
        },
    )
    .unwrap();
    let s = sample_subgraph(&sampler, 1, 0, 16).unwrap();
    let (n, nnz) = (s.n_nodes(), s.n_entries());
    let values: Vec<f32> = (0..nnz).map(|k| 1.0 / (1.0 + (k % 7) as f32)).collect();
    let a = CsrRef {
        offsets: &s.offsets,
        indices: &s.indices,
        values: Some(&values),
        n_cols: n,
    };
    for threads in [1, 2] {
        let bw = triad_bandwidth(threads);
        for f in [512usize, 1024] {
            // Indices and values once, X read once, out written once.
            let bytes = nnz * 8 + 2 * n * f * 4;
            eprintln!(
                "spmm bound: {n} nodes, {nnz} entries, f={f}, {threads} thread(s): triad {:.1} GB/s, {bytes} bytes -> bound {:.3} ms",
                bw / 1e9,
                bytes as f64 / bw * 1e3
            );
        }
    }
    let mut g = c.benchmark_group("spmm/frontier_kron17");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    for f in [512usize, 1024] {
        let x = fill(n * f);
        let mut out = vec![0f32; n * f];
        g.throughput(Throughput::Elements(2 * (nnz * f) as u64));
        for threads in [1, 2] {
            let p = pool(threads);
            let w_default = block_width(n, f, threads);
            g.bench_with_input(
                BenchmarkId::new(format!("partitioned/f{f}"), threads),
                &threads,
                |b, _| b.iter(|| p.install(|| spmm(a, &x, f, &mut out)).unwrap()),
            );
            g.bench_with_input(
                BenchmarkId::new(format!("unpartitioned/f{f}"), threads),
                &threads,
                |b, _| b.iter(|| p.install(|| spmm_blocked(a, &x, f, &mut out, f)).unwrap()),
            );
            // The old way of reading X: in place from the contiguous layout (rows 2 or
            // 4 KiB apart, 16-byte aligned), against `partitioned`, which packs.
            g.bench_with_input(
                BenchmarkId::new(format!("in_place/f{f}"), threads),
                &threads,
                |b, _| {
                    b.iter(|| {
                        let xv = MatRef::row_major(&x, n, f).unwrap();
                        let ov = MatMut::row_major(&mut out, n, f).unwrap();
                        p.install(|| spmm_view_with(a, xv, ov, w_default, Gather::InPlace))
                            .unwrap()
                    })
                },
            );
            // A good layout: rows padded by one cache line (stride f + 16), 64-byte
            // aligned (`Auto` still packs: cheaper gathers, fewer TLB misses).
            let mut x_pad = AlignedVec::zeroed(n * (f + 16));
            x_pad.as_mut_slice().copy_from_slice(&fill(n * (f + 16)));
            let mut out_pad = AlignedVec::zeroed(n * (f + 16));
            g.bench_with_input(
                BenchmarkId::new(format!("padded_aligned_{}/f{f}", f + 16), threads),
                &threads,
                |b, _| {
                    b.iter(|| {
                        let xv = MatRef::new(x_pad.as_slice(), n, f, f + 16).unwrap();
                        let ov = MatMut::new(out_pad.as_mut_slice(), n, f, f + 16).unwrap();
                        p.install(|| spmm_view(a, xv, ov)).unwrap()
                    })
                },
            );
            g.bench_with_input(
                BenchmarkId::new(format!("padded_aligned_{}_in_place/f{f}", f + 16), threads),
                &threads,
                |b, _| {
                    b.iter(|| {
                        let xv = MatRef::new(x_pad.as_slice(), n, f, f + 16).unwrap();
                        let ov = MatMut::new(out_pad.as_mut_slice(), n, f, f + 16).unwrap();
                        p.install(|| spmm_view_with(a, xv, ov, w_default, Gather::InPlace))
                            .unwrap()
                    })
                },
            );
            // The roofline's other sides, through the shipped (packed) path: the same
            // offsets and values, but entry k reads one of only R rows of X (A has R
            // columns, so only those R rows are packed). R = 32: every gathered panel is
            // in L1 (32 · 256 B), what the loop costs when memory costs nothing. R = 2048
            // (rows drawn at random): a pass's panels (512 KiB) stay in L2 but mostly miss
            // L1, what the gathers cost when none goes past L2.
            for (name, r) in [("l1_resident_x", 32usize), ("l2_resident_x", 2048)] {
                let r = r.min(n);
                let idx: Vec<u32> = (0..nnz as u64)
                    .map(|k| match r {
                        32 => (k % 32) as u32,
                        _ => ((k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) % r as u64) as u32,
                    })
                    .collect();
                let a_r = CsrRef {
                    indices: &idx,
                    n_cols: r,
                    ..a
                };
                g.bench_with_input(
                    BenchmarkId::new(format!("{name}/f{f}"), threads),
                    &threads,
                    |b, _| {
                        b.iter(|| {
                            let xv = MatRef::row_major(&x[..r * f], r, f).unwrap();
                            let ov = MatMut::row_major(&mut out, n, f).unwrap();
                            p.install(|| spmm_view_with(a_r, xv, ov, w_default, Gather::Packed))
                                .unwrap()
                        })
                    },
                );
            }
            if f == 512 {
                // The view path: X and out are columns 512..1024 of n×W buffers, W = 1024
                // (rows 4 KiB apart) and W = 1040 (rows 4 KiB + 64 B apart).
                for wide in [2 * f, 2 * f + 16] {
                    let x_wide = fill(n * wide);
                    let mut out_wide = vec![0f32; n * wide];
                    g.bench_with_input(
                        BenchmarkId::new(format!("view_cols_512_of_{wide}/f512"), threads),
                        &threads,
                        |b, _| {
                            b.iter(|| {
                                let xv = MatRef::row_major(&x_wide, n, wide)
                                    .unwrap()
                                    .cols(f..2 * f)
                                    .unwrap();
                                let ov = MatMut::row_major(&mut out_wide, n, wide)
                                    .unwrap()
                                    .cols_mut(f..2 * f)
                                    .unwrap();
                                p.install(|| spmm_view(a, xv, ov)).unwrap()
                            })
                        },
                    );
                }
            }
        }
    }
    g.finish();
    // Block-width sweep (1 thread, f = 512): where the partition's working set fits.
    let mut g = c.benchmark_group("spmm_width/frontier_kron17_f512");
    g.sample_size(10).measurement_time(Duration::from_secs(2));
    let f = 512;
    let x = fill(n * f);
    let mut out = vec![0f32; n * f];
    let p = pool(1);
    for w in [16usize, 22, 32, 64, 128] {
        g.bench_with_input(BenchmarkId::from_parameter(w), &w, |b, &w| {
            b.iter(|| p.install(|| spmm_blocked(a, &x, f, &mut out, w)).unwrap())
        });
    }
    g.finish();
}

criterion_group!(benches, gemm_bench, gemm_view_bench, spmm_bench);
criterion_main!(benches);
