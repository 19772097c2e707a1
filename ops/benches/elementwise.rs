//! Elementwise and structure kernels against their naive oracles (`saintflow_ops::naive`),
//! on the same inputs: activations, dropout, bias add, row L2 normalisation, row gather and
//! scatter-add, both losses, edge softmax and the Adam step. Each group times the naive
//! loop (serial by definition, so once) and the kernel on 1 and 2 threads (rayon pools
//! built here), with Throughput::Bytes = the bytes the operation must read and write once.
//!
//! Shapes: `n8000_f512` (a GraphSAINT subgraph's hidden layer, 4.1 M floats = 16 MiB per
//! operand, past the L2 and most of the L3); losses on `ppi_like_n8000_c121`; gather and
//! scatter-add between 8000 sampled rows and a 32 768 × 512 feature table; edge softmax on
//! `deg40_n8000` (320 000 entries, 4 heads); Adam on 4 Mi parameters.
//!
//! Run: `cargo bench -p saintflow-ops --bench elementwise -- --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use saintflow_ops::naive;
use saintflow_ops::optim::Adam;
use saintflow_ops::{attention, elementwise as ew, gather, loss};

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
}

/// Deterministic values in [−1, 1).
fn fill(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed | 1;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

/// One group: the naive oracle once (it is serial), the kernel on 1 and 2 threads.
fn pair(
    c: &mut Criterion,
    name: &str,
    bytes: usize,
    mut naive: impl FnMut(),
    mut kernel: impl FnMut() + Send,
) {
    let mut g = c.benchmark_group(name);
    g.sample_size(20)
        .throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("naive/1", |b| b.iter(&mut naive));
    for threads in [1, 2] {
        let p = pool(threads);
        g.bench_function(format!("kernel/{threads}"), |b| {
            b.iter(|| p.install(&mut kernel))
        });
    }
    g.finish();
}

const N: usize = 8000;
const F: usize = 512;

fn activations(c: &mut Criterion) {
    let x = fill(N * F, 1);
    let (mut y0, mut y1) = (vec![0f32; N * F], vec![0f32; N * F]);
    let bytes = 8 * N * F; // read x, write y
    let s = "n8000_f512";
    pair(
        c,
        &format!("relu/{s}"),
        bytes,
        || naive::elementwise::relu(&x, &mut y0),
        || ew::relu(&x, &mut y1).unwrap(),
    );
    pair(
        c,
        &format!("leaky_relu/{s}"),
        bytes,
        || naive::elementwise::leaky_relu(&x, 0.2, &mut y0),
        || ew::leaky_relu(&x, 0.2, &mut y1).unwrap(),
    );
    pair(
        c,
        &format!("sigmoid/{s}"),
        bytes,
        || naive::elementwise::sigmoid(&x, &mut y0),
        || ew::sigmoid(&x, &mut y1).unwrap(),
    );
    pair(
        c,
        &format!("elu/{s}"),
        bytes,
        || naive::elementwise::elu(&x, 1.0, &mut y0),
        || ew::elu(&x, 1.0, &mut y1).unwrap(),
    );
    let (mut m0, mut m1) = (vec![0u8; N * F], vec![0u8; N * F]);
    pair(
        c,
        &format!("dropout_p0.5/{s}"),
        9 * N * F, // read x, write y and the mask byte
        || naive::elementwise::dropout(&x, 0.5, xorshift(7), &mut y0, &mut m0),
        || ew::dropout(&x, 0.5, xorshift(7), &mut y1, &mut m1).unwrap(),
    );
    let b = fill(F, 2);
    pair(
        c,
        &format!("bias_add/{s}"),
        8 * N * F, // y read and written in place
        || naive::elementwise::bias_add(&mut y0, &b),
        || ew::bias_add(&mut y1, &b).unwrap(),
    );
    let (mut n0, mut n1) = (vec![0f32; N], vec![0f32; N]);
    pair(
        c,
        &format!("l2_normalize_rows/{s}"),
        8 * N * F + 4 * N,
        || naive::elementwise::l2_normalize_rows(&x, F, 1e-12, &mut y0, &mut n0),
        || ew::l2_normalize_rows(&x, F, 1e-12, &mut y1, &mut n1).unwrap(),
    );
}

fn gather_scatter(c: &mut Criterion) {
    let n_src = 32_768;
    let src = fill(n_src * F, 3);
    let mut r = xorshift(11);
    let ids: Vec<u32> = (0..N).map(|_| (r() % n_src as u64) as u32).collect();
    let (mut o0, mut o1) = (vec![0f32; N * F], vec![0f32; N * F]);
    let s = "n8000_of_32768_f512";
    pair(
        c,
        &format!("gather_rows/{s}"),
        8 * N * F + 4 * N, // read the rows, write them, read the ids
        || naive::gather::gather_rows(&src, F, &ids, &mut o0),
        || gather::gather_rows(&src, F, &ids, &mut o1).unwrap(),
    );
    let grad = fill(N * F, 4);
    let (mut d0, mut d1) = (vec![0f32; n_src * F], vec![0f32; n_src * F]);
    pair(
        c,
        &format!("scatter_add_rows/{s}"),
        12 * N * F + 4 * N, // read grad, read and write the destination rows
        || naive::gather::scatter_add_rows(&grad, F, &ids, &mut d0),
        || gather::scatter_add_rows(&grad, F, &ids, &mut d1).unwrap(),
    );
}

fn losses(c: &mut Criterion) {
    let cl = 121;
    let z: Vec<f32> = fill(N * cl, 5).iter().map(|v| 6.0 * v).collect();
    let labels: Vec<u32> = (0..N).map(|i| ((i * 31) % cl) as u32).collect();
    let weights: Vec<f32> = (0..N).map(|i| 0.5 + (i % 4) as f32 / 4.0).collect();
    let targets: Vec<f32> = (0..N * cl)
        .map(|i| f32::from(u8::from(i % 3 == 0)))
        .collect();
    let (mut d0, mut d1) = (vec![0f32; N * cl], vec![0f32; N * cl]);
    let s = "ppi_like_n8000_c121";
    pair(
        c,
        &format!("softmax_cross_entropy/{s}"),
        8 * N * cl + 8 * N, // logits in, gradient out, labels and weights
        || {
            black_box(naive::loss::softmax_cross_entropy(
                &z, cl, &labels, &weights, &mut d0,
            ));
        },
        || {
            black_box(loss::softmax_cross_entropy(&z, cl, &labels, &weights, &mut d1).unwrap());
        },
    );
    pair(
        c,
        &format!("sigmoid_bce/{s}"),
        12 * N * cl + 4 * N, // logits and targets in, gradient out, weights
        || {
            black_box(naive::loss::sigmoid_bce(
                &z, cl, &targets, &weights, &mut d0,
            ));
        },
        || {
            black_box(loss::sigmoid_bce(&z, cl, &targets, &weights, &mut d1).unwrap());
        },
    );
}

fn edge_softmax(c: &mut Criterion) {
    // 8000 rows, degrees 1..=79 (mean 40): 320 000 entries, 4 heads.
    let heads = 4;
    let mut offsets = vec![0u32];
    let mut deg = xorshift(13);
    for _ in 0..N {
        let d = 1 + (deg() % 79) as u32;
        offsets.push(offsets.last().unwrap() + d);
    }
    let nnz = *offsets.last().unwrap() as usize;
    let e: Vec<f32> = fill(nnz * heads, 6).iter().map(|v| 4.0 * v).collect();
    let (mut a0, mut a1) = (vec![0f32; nnz * heads], vec![0f32; nnz * heads]);
    pair(
        c,
        &format!("edge_softmax/deg40_n8000_nnz{nnz}_h4"),
        8 * nnz * heads + 4 * (N + 1),
        || naive::attention::edge_softmax(&offsets, heads, &e, &mut a0),
        || attention::edge_softmax(&offsets, heads, &e, &mut a1).unwrap(),
    );
}

fn adam(c: &mut Criterion) {
    let n = 1 << 22;
    let adam = Adam {
        weight_decay: 5e-4,
        ..Adam::default()
    };
    let g = fill(n, 7);
    let (mut p0, mut m0, mut v0) = (fill(n, 8), vec![0f32; n], vec![0f32; n]);
    let (mut p1, mut m1, mut v1) = (p0.clone(), m0.clone(), v0.clone());
    pair(
        c,
        "adam_step/4Mi_params",
        28 * n, // p, m, v read and written, g read
        || naive::optim::adam_step(&adam, 10, &mut p0, &g, &mut m0, &mut v0),
        || adam.step(10, &mut p1, &g, &mut m1, &mut v1).unwrap(),
    );
}

criterion_group!(
    benches,
    activations,
    gather_scatter,
    losses,
    edge_softmax,
    adam
);
criterion_main!(benches);
