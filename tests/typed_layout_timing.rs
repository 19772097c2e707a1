//! Issue 57's layout decision, measured (docs/bench/typed-layout.md): how a typed store
//! should hold its relations. (a) the global CSR with each row's entries sorted by
//! (relation, column) and a u8 relation id per entry, one relation's part of a row found by
//! two binary searches of the row's relation bytes; against (b) one CSR per relation, its
//! rows the source type's nodes, columns global ids. Measured on what the typed samplers
//! and a per-relation SpMM do: walk one relation's neighbours of random rows, and visit all
//! of one relation's entries (y[u] += x[v] over the relation, widths 1 and 16).
//!
//! `cargo test --release --test typed_layout_timing -- --ignored --nocapture`; one thread.
//! The graph is ogbn-mag's shape at half its size (types paper, author, institution,
//! field_of_study; relations cites, writes, affiliated_with, has_topic and the reverses of
//! the last three), ends drawn uniformly at random.

use std::hint::black_box;
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// (name, count) of the node types, in id order.
const TYPES: [(&str, u32); 4] = [
    ("paper", 368_000),
    ("author", 565_000),
    ("institution", 4_400),
    ("field_of_study", 30_000),
];

/// (name, src type, dst type, undirected edges).
const RELATIONS: [(&str, usize, usize, usize); 4] = [
    ("cites", 0, 0, 2_700_000),
    ("writes", 1, 0, 3_550_000),
    ("affiliated_with", 1, 2, 520_000),
    ("has_topic", 0, 3, 3_750_000),
];

struct Typed {
    starts: Vec<u32>,
    /// (src type, dst type) per relation, reverses included.
    rels: Vec<(usize, usize)>,
    /// Per relation, its entries (u, v), global ids.
    entries: Vec<Vec<(u32, u32)>>,
}

fn graph() -> Typed {
    let mut starts = vec![0u32];
    for (_, c) in TYPES {
        starts.push(starts.last().unwrap() + c);
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(57);
    let mut rels = Vec::new();
    let mut entries = Vec::new();
    let mut reverses = Vec::new();
    for (_, s, d, m) in RELATIONS {
        let mut e = Vec::with_capacity(m * 2);
        for _ in 0..m {
            let u = starts[s] + rng.random_range(0..TYPES[s].1);
            let v = starts[d] + rng.random_range(0..TYPES[d].1);
            if u != v {
                e.push((u, v));
                if s == d {
                    e.push((v, u));
                }
            }
        }
        if s != d {
            reverses.push(((d, s), e.iter().map(|&(u, v)| (v, u)).collect::<Vec<_>>()));
        }
        rels.push((s, d));
        entries.push(e);
    }
    for (r, e) in reverses {
        rels.push(r);
        entries.push(e);
    }
    for e in &mut entries {
        e.sort_unstable();
        e.dedup();
    }
    Typed {
        starts,
        rels,
        entries,
    }
}

/// Layout (a): one CSR, rows sorted by (relation, column), a relation byte per entry.
struct Global {
    offsets: Vec<u64>,
    indices: Vec<u32>,
    rel: Vec<u8>,
}

impl Global {
    fn build(g: &Typed) -> Global {
        let n = *g.starts.last().unwrap() as usize;
        let mut all: Vec<(u32, u8, u32)> = g
            .entries
            .iter()
            .enumerate()
            .flat_map(|(r, e)| e.iter().map(move |&(u, v)| (u, r as u8, v)))
            .collect();
        all.sort_unstable();
        let mut offsets = vec![0u64; n + 1];
        for &(u, _, _) in &all {
            offsets[u as usize + 1] += 1;
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        Global {
            offsets,
            indices: all.iter().map(|e| e.2).collect(),
            rel: all.iter().map(|e| e.1).collect(),
        }
    }

    /// Row `u`'s entries of relation `r`: two binary searches of the row's relation bytes.
    #[inline]
    fn row(&self, u: u32, r: u8) -> &[u32] {
        let (a, b) = (
            self.offsets[u as usize] as usize,
            self.offsets[u as usize + 1] as usize,
        );
        let rels = &self.rel[a..b];
        let lo = rels.partition_point(|&x| x < r);
        let hi = lo + rels[lo..].partition_point(|&x| x == r);
        &self.indices[a + lo..a + hi]
    }
}

/// Layout (b): one CSR per relation over its source type's rows.
struct PerRelation {
    /// Per relation: (first source id, offsets over the source type's rows, indices).
    rels: Vec<(u32, Vec<u64>, Vec<u32>)>,
}

impl PerRelation {
    fn build(g: &Typed) -> PerRelation {
        let rels = g
            .entries
            .iter()
            .zip(&g.rels)
            .map(|(e, &(s, _))| {
                let (lo, rows) = (g.starts[s], TYPES[s].1 as usize);
                let mut offsets = vec![0u64; rows + 1];
                for &(u, _) in e {
                    offsets[(u - lo) as usize + 1] += 1;
                }
                for i in 0..rows {
                    offsets[i + 1] += offsets[i];
                }
                (lo, offsets, e.iter().map(|x| x.1).collect())
            })
            .collect();
        PerRelation { rels }
    }

    #[inline]
    fn row(&self, u: u32, r: usize) -> &[u32] {
        let (lo, o, i) = &self.rels[r];
        let k = (u - lo) as usize;
        &i[o[k] as usize..o[k + 1] as usize]
    }
}

/// y[u] += Σ x[v] over row(u), for every u in `rows` (width f).
fn spmm<'a>(
    y: &mut [f32],
    x: &[f32],
    f: usize,
    rows: std::ops::Range<u32>,
    row: impl Fn(u32) -> &'a [u32],
) -> u64 {
    for u in rows {
        let out = &mut y[u as usize * f..(u as usize + 1) * f];
        for &v in row(u) {
            let xv = &x[v as usize * f..(v as usize + 1) * f];
            for (o, &xi) in out.iter_mut().zip(xv) {
                *o += xi;
            }
        }
    }
    0
}

/// Best of `reps` runs of `f`, in seconds.
fn best(reps: usize, mut f: impl FnMut() -> u64) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            black_box(f());
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

#[test]
#[ignore = "timing for docs/bench/typed-layout.md: run with --release -- --ignored --nocapture"]
fn typed_layout_timing() {
    let g = graph();
    let n = *g.starts.last().unwrap() as usize;
    let a = Global::build(&g);
    let b = PerRelation::build(&g);
    let nnz = a.indices.len();
    println!("graph: N = {n}, {} relations, {nnz} entries", g.rels.len());
    // Same answers both ways, on every row of every relation.
    for (r, &(s, _)) in g.rels.iter().enumerate() {
        for u in g.starts[s]..g.starts[s + 1] {
            assert_eq!(a.row(u, r as u8), b.row(u, r), "row {u} relation {r}");
        }
    }
    let bytes_a = nnz * 5 + (n + 1) * 8;
    let bytes_b: usize = b
        .rels
        .iter()
        .map(|(_, o, i)| o.len() * 8 + i.len() * 4)
        .sum();
    println!(
        "bytes: (a) {:.1} MB (global CSR + relation bytes); (b) {:.1} MB per-relation CSRs, {:.1} MB with the global CSR a homogeneous reader needs",
        bytes_a as f64 / 1e6,
        bytes_b as f64 / 1e6,
        (bytes_b + nnz * 4 + (n + 1) * 8) as f64 / 1e6
    );

    // 1. Row walks: 4 M (row, relation) pairs, rows random among the relation's sources.
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let walks: Vec<(u32, usize)> = (0..4_000_000)
        .map(|_| {
            let r = rng.random_range(0..g.rels.len());
            let s = g.rels[r].0;
            (g.starts[s] + rng.random_range(0..TYPES[s].1), r)
        })
        .collect();
    let ta = best(5, || {
        walks
            .iter()
            .map(|&(u, r)| a.row(u, r as u8).iter().map(|&v| u64::from(v)).sum::<u64>())
            .sum()
    });
    let tb = best(5, || {
        walks
            .iter()
            .map(|&(u, r)| b.row(u, r).iter().map(|&v| u64::from(v)).sum::<u64>())
            .sum()
    });
    let visited: usize = walks.iter().map(|&(u, r)| b.row(u, r).len()).sum();
    println!(
        "row walk, {} rows ({visited} entries): (a) {:.1} ns/row, (b) {:.1} ns/row, (a)/(b) {:.2}",
        walks.len(),
        ta * 1e9 / walks.len() as f64,
        tb * 1e9 / walks.len() as f64,
        ta / tb
    );

    // 2. One relation's entries: y[u] += x[v] (width f) over every source row.
    for f in [1usize, 16] {
        let x: Vec<f32> = (0..n * f).map(|i| (i % 97) as f32).collect();
        let mut y = vec![0f32; n * f];
        for (r, &(s, d)) in g.rels.iter().enumerate() {
            let rows = g.starts[s]..g.starts[s + 1];
            let ta = best(3, || {
                spmm(&mut y, &x, f, rows.clone(), |u| a.row(u, r as u8))
            });
            let tb = best(3, || spmm(&mut y, &x, f, rows.clone(), |u| b.row(u, r)));
            println!(
                "relation scan f = {f:2}, relation {r} ({} → {}, {} entries): (a) {:.2} ms, (b) {:.2} ms, (a)/(b) {:.2}",
                TYPES[s].0,
                TYPES[d].0,
                b.rels[r].2.len(),
                ta * 1e3,
                tb * 1e3,
                ta / tb
            );
        }
        black_box(&y);
    }
}
