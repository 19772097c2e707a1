//! Sampler benchmarks on generated Kronecker graphs (degree 16): the Dashboard frontier
//! against the straightforward O(m)-per-pop frontier, whole-subgraph time (sample + induce)
//! per sampler on one thread, and pool throughput on 1 vs 2 threads.
//!
//! Run: `cargo bench --bench sample`.

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use saintflow::progress::Progress;
use saintflow::sample::naive::NaiveFrontier;
use saintflow::sample::*;
use saintflow::store::gen::{generate_kronecker, KroneckerSpec};
use saintflow::store::GraphStore;

const M: usize = 1000;
const N: usize = 8000;

fn store(dir: &Path, scale: u32) -> GraphStore {
    let out = dir.join(format!("kron{scale}.sf"));
    let spec = KroneckerSpec {
        scale,
        degree: 16.0,
        n_features: 0,
        n_classes: 2,
        ..Default::default()
    };
    generate_kronecker(&spec, &out, true, &Progress::hidden()).unwrap();
    GraphStore::open(&out).unwrap()
}

fn one_thread<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(f)
}

fn frontier_vs_naive(c: &mut Criterion) {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    for scale in [17, 20] {
        let s = store(tmp.path(), scale);
        let g = s.full();
        let dash = FrontierSampler::new(
            g,
            FrontierParams {
                frontier: M,
                budget: N,
                ..Default::default()
            },
        )
        .unwrap();
        let capped = FrontierSampler::new(
            g,
            FrontierParams {
                frontier: M,
                budget: N,
                pin_cap: Some(30),
                ..Default::default()
            },
        )
        .unwrap();
        let naive = NaiveFrontier::new(g, M, N).unwrap();
        let textbook = NaiveFrontier::textbook(g, M, N).unwrap();
        let mut grp = c.benchmark_group(format!("frontier_nodes/kron{scale}_d16"));
        grp.sample_size(10).measurement_time(Duration::from_secs(6));
        grp.throughput(Throughput::Elements(N as u64));
        let mut i = 0u64;
        grp.bench_function("dashboard", |b| {
            b.iter(|| {
                let mut out = Vec::with_capacity(N);
                i += 1;
                dash.sample_nodes(&mut subgraph_rng(1, i), &mut out)
                    .unwrap();
                black_box(out)
            })
        });
        grp.bench_function("dashboard_pin_cap30", |b| {
            b.iter(|| {
                let mut out = Vec::with_capacity(N);
                i += 1;
                capped
                    .sample_nodes(&mut subgraph_rng(1, i), &mut out)
                    .unwrap();
                black_box(out)
            })
        });
        grp.bench_function("naive_scan", |b| {
            b.iter(|| {
                let mut out = Vec::with_capacity(N);
                i += 1;
                naive
                    .sample_nodes(&mut subgraph_rng(1, i), &mut out)
                    .unwrap();
                black_box(out)
            })
        });
        // The floor of any frontier sampler: per pop, a random neighbour of a frontier node
        // and that neighbour's degree (two dependent random reads), with a free "selection"
        // (a uniform slot, which needs no structure).
        let cand = nodes_with_edges(g);
        grp.bench_function("graph_reads_floor", |b| {
            b.iter(|| {
                let mut r = subgraph_rng(2, i);
                i += 1;
                let mut fs: Vec<u32> = (0..M)
                    .map(|_| cand[below(&mut r, cand.len() as u64) as usize])
                    .collect();
                let mut acc = 0usize;
                for _ in M..N {
                    let slot = below(&mut r, M as u64) as usize;
                    let v = random_neighbor(g, fs[slot], &mut r).unwrap();
                    acc += g.degree(v);
                    fs[slot] = v;
                }
                black_box((fs, acc))
            })
        });
        grp.bench_function("naive_textbook", |b| {
            b.iter(|| {
                let mut out = Vec::with_capacity(N);
                i += 1;
                textbook
                    .sample_nodes(&mut subgraph_rng(1, i), &mut out)
                    .unwrap();
                black_box(out)
            })
        });
        grp.finish();
    }
}

/// The pop data structure alone, without graph reads: 7000 replacements of frontier nodes
/// (m = 1000) by pre-drawn nodes with the kron17 degree distribution. Dashboard: probe,
/// take, put. Naive: one scan of the m cached degrees per pop.
fn pop_structure(c: &mut Criterion) {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let s = store(tmp.path(), 17);
    let g = s.full();
    let cand = nodes_with_edges(g);
    let mut r = subgraph_rng(5, 0);
    let pick = |r: &mut SampleRng| cand[below(r, cand.len() as u64) as usize];
    let init: Vec<u32> = (0..M).map(|_| pick(&mut r)).collect();
    // Replacements drawn as the sampler would: a random neighbour of a random node, so
    // their degrees are size-biased like real frontier nodes.
    let repl: Vec<(u32, usize)> = (0..N - M)
        .map(|_| {
            let v = random_neighbor(g, pick(&mut r), &mut r).unwrap();
            (v, g.degree(v))
        })
        .collect();
    let init_deg: Vec<usize> = init.iter().map(|&v| g.degree(v)).collect();
    let mut grp = c.benchmark_group("frontier_pop/kron17_d16_m1000");
    grp.sample_size(20);
    grp.throughput(Throughput::Elements((N - M) as u64));
    let sampler = FrontierSampler::new(
        g,
        FrontierParams {
            frontier: M,
            budget: N,
            ..Default::default()
        },
    )
    .unwrap();
    let mut db = sampler.dashboard();
    grp.bench_function("dashboard", |b| {
        b.iter(|| {
            db.reset(db.capacity(), M);
            for (slot, (&v, &d)) in init.iter().zip(&init_deg).enumerate() {
                db.put(slot, v, d);
            }
            let mut r = subgraph_rng(6, 0);
            for &(v, d) in &repl {
                let slot = db.select(&mut r).unwrap();
                db.take(slot);
                db.put(slot, v, d);
            }
        })
    });
    // IPDPS 2019's setting for skewed graphs: at most 30 pins per node.
    grp.bench_function("dashboard_pin_cap30", |b| {
        b.iter(|| {
            db.reset(db.capacity(), M);
            for (slot, (&v, &d)) in init.iter().zip(&init_deg).enumerate() {
                db.put(slot, v, d.min(30));
            }
            let mut r = subgraph_rng(6, 0);
            for &(v, d) in &repl {
                let slot = db.select(&mut r).unwrap();
                db.take(slot);
                db.put(slot, v, d.min(30));
            }
        })
    });
    grp.bench_function("naive_scan", |b| {
        b.iter(|| {
            let mut deg: Vec<u64> = init_deg.iter().map(|&d| d as u64).collect();
            let mut total: u64 = deg.iter().sum();
            let mut r = subgraph_rng(6, 0);
            for &(_, d) in &repl {
                let mut x = below(&mut r, total);
                let i = deg.iter().position(|&e| {
                    let hit = x < e;
                    x = x.wrapping_sub(e);
                    hit
                });
                let i = i.unwrap();
                total = total - deg[i] + d as u64;
                deg[i] = d as u64;
            }
            black_box(total)
        })
    });
    grp.finish();
}

fn subgraph_per_sampler(c: &mut Criterion) {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    for scale in [17, 20] {
        let s = store(tmp.path(), scale);
        let g = s.full();
        let samplers: Vec<(&str, Box<dyn Sampler>)> = vec![
            (
                "frontier",
                Box::new(
                    FrontierSampler::new(
                        g,
                        FrontierParams {
                            frontier: M,
                            budget: N,
                            ..Default::default()
                        },
                    )
                    .unwrap(),
                ),
            ),
            ("rw", Box::new(RandomWalkSampler::new(g, 3000, 2).unwrap())),
            ("edge", Box::new(EdgeSampler::new(g, 4000).unwrap())),
            ("node", Box::new(NodeSampler::new(g, N, true).unwrap())),
        ];
        let mut grp = c.benchmark_group(format!("subgraph_1thread/kron{scale}_d16"));
        grp.sample_size(20).measurement_time(Duration::from_secs(5));
        for (name, smp) in &samplers {
            let probe = sample_subgraph(smp.as_ref(), 7, 0, 16).unwrap();
            eprintln!(
                "{name} kron{scale}: {} nodes, {} undirected edges",
                probe.n_nodes(),
                probe.n_entries() / 2
            );
            let mut i = 0u64;
            grp.bench_function(*name, |b| {
                one_thread(|| {
                    b.iter(|| {
                        i += 1;
                        black_box(sample_subgraph(smp.as_ref(), 7, i, 16).unwrap())
                    })
                })
            });
        }
        grp.finish();
    }
}

fn pool_threads(c: &mut Criterion) {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let s = store(tmp.path(), 17);
    let f = FrontierSampler::new(
        s.full(),
        FrontierParams {
            frontier: M,
            budget: N,
            ..Default::default()
        },
    )
    .unwrap();
    let mut grp = c.benchmark_group("pool/kron17_d16");
    grp.sample_size(10).measurement_time(Duration::from_secs(8));
    let count = 32u64;
    grp.throughput(Throughput::Elements(count));
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let mut first = 0u64;
        grp.bench_with_input(
            BenchmarkId::new("frontier_threads", threads),
            &threads,
            |b, _| {
                b.iter(|| {
                    first += count;
                    pool.install(|| black_box(sample_pool(&f, 3, first, count, 16).unwrap()))
                })
            },
        );
    }
    grp.finish();
}

criterion_group!(
    benches,
    frontier_vs_naive,
    pop_structure,
    subgraph_per_sampler,
    pool_threads
);
criterion_main!(benches);
