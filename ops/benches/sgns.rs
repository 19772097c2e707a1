//! The SGNS step of node embedding (`saintflow_ops::sgns`) against its naive oracle
//! (`saintflow_ops::naive::sgns`) on the same samples: a vertex row, one positive and
//! `negatives` context rows drawn from a table of 65 536 rows (32 MiB at d = 128: past the
//! L2, the regime of a real run's random rows), then u += acc. Throughput::Elements = the
//! samples trained (one positive and its negatives each); the ratio of the two is what
//! BENCHMARKS.md quotes; `sample` is the whole-sample kernel on the same rows (sorted and
//! made distinct, as the grid calls it). One thread: the grid runs this loop on each worker alone.
//!
//! Shapes: `d128_neg1` (GraphVite's DeepWalk: 1 negative, weight 5), `d128_neg5`
//! (word2vec's 5 negatives), `d32_neg1`, `d128_neg9` (past the unrolled counts).
//!
//! Run: `cargo bench -p saintflow-ops --bench sgns -- --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use saintflow_ops::naive;
use saintflow_ops::sgns::{sgns_apply, sgns_sample, sgns_term};

const ROWS: usize = 1 << 16;
const SAMPLES: usize = 4096;

fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

type Term = fn(&[f32], &mut [f32], &mut [f32], bool, f32, f32) -> f32;
type Apply = fn(&mut [f32], &mut [f32]);

/// Trains `SAMPLES` samples; rows chosen by a fixed stream so both kernels see the same.
fn run(
    vertex: &mut [f32],
    context: &mut [f32],
    d: usize,
    negatives: usize,
    term: Term,
    apply: Apply,
) -> f32 {
    let mut next = xorshift(7);
    let mut acc = vec![0f32; d];
    let mut s = 0.0;
    for _ in 0..SAMPLES {
        let u = (next() % ROWS as u64) as usize;
        let urow = &mut vertex[u * d..(u + 1) * d];
        for k in 0..=negatives {
            let c = (next() % ROWS as u64) as usize;
            s += term(
                urow,
                &mut context[c * d..(c + 1) * d],
                &mut acc,
                k == 0,
                if k == 0 { 1.0 } else { 5.0 },
                0.025,
            );
        }
        apply(urow, &mut acc);
    }
    s
}

/// `run` through the whole-sample kernel (`sgns_sample`, what the grid calls when a
/// sample's context rows are distinct) on `N` terms, rows drawn from the same kind of
/// stream (a sample whose rows repeat is drawn again).
fn run_samples<const N: usize>(vertex: &mut [f32], context: &mut [f32], d: usize) -> f32 {
    let mut next = xorshift(7);
    let mut logits = [0f32; saintflow_ops::sgns::MAX_SAMPLE_TERMS];
    let mut s = 0.0;
    for _ in 0..SAMPLES {
        let u = (next() % ROWS as u64) as usize;
        let urow = &mut vertex[u * d..(u + 1) * d];
        let mut picked = [0usize; N];
        loop {
            picked
                .iter_mut()
                .for_each(|c| *c = (next() % ROWS as u64) as usize);
            picked.sort_unstable();
            if picked.windows(2).all(|w| w[0] < w[1]) {
                break;
            }
        }
        // The distinct rows in ascending order, split off the table one by one.
        let (mut rest, mut at) = (&mut context[..], 0);
        let mut rows: [&mut [f32]; N] = std::array::from_fn(|k| {
            let (_, tail) = std::mem::take(&mut rest).split_at_mut((picked[k] - at) * d);
            let (row, after) = tail.split_at_mut(d);
            (rest, at) = (after, picked[k] + 1);
            row
        });
        sgns_sample(urow, &mut rows, (1.0, 5.0), 0.025, &mut logits);
        s += logits[0];
    }
    s
}

fn bench(c: &mut Criterion) {
    for (name, d, negatives) in [
        ("d128_neg1", 128, 1),
        ("d128_neg5", 128, 5),
        ("d32_neg1", 32, 1),
        ("d128_neg9", 128, 9),
    ] {
        let mut next = xorshift(1);
        let init: Vec<f32> = (0..ROWS * d)
            .map(|_| ((next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) / d as f32)
            .collect();
        let mut g = c.benchmark_group(format!("sgns/{name}"));
        g.throughput(Throughput::Elements(SAMPLES as u64));
        let (mut v, mut ctx) = (init.clone(), init.clone());
        g.bench_function("naive", |b| {
            b.iter(|| {
                black_box(run(
                    &mut v,
                    &mut ctx,
                    d,
                    negatives,
                    naive::sgns::sgns_term,
                    naive::sgns::sgns_apply,
                ))
            })
        });
        let (mut v, mut ctx) = (init.clone(), init.clone());
        g.bench_function("kernel", |b| {
            b.iter(|| black_box(run(&mut v, &mut ctx, d, negatives, sgns_term, sgns_apply)))
        });
        let (mut v, mut ctx) = (init.clone(), init);
        g.bench_function("sample", |b| {
            b.iter(|| {
                black_box(match negatives {
                    1 => run_samples::<2>(&mut v, &mut ctx, d),
                    5 => run_samples::<6>(&mut v, &mut ctx, d),
                    _ => run_samples::<10>(&mut v, &mut ctx, d),
                })
            })
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
