//! Samplers against their stated distributions (chi-square at p = 0.001 on fixed seeds),
//! the Dashboard's cleanup and high-degree corner case, determinism, normalisation, and
//! corrupt or cold stores.

mod common;

use common::symmetric_csr;
use rand::SeedableRng;
use saintflow::sample::naive::{chi_square, chi_square_critical, NaiveFrontier};
use saintflow::sample::*;
use saintflow::store::{Csr, GraphStore, Role};

fn rng(seed: u64) -> SampleRng {
    SampleRng::seed_from_u64(seed)
}

/// A graph with a spread of degrees: node i is joined to the next (i % 7) + 1 nodes.
fn skewed_graph(n: usize) -> (Vec<u64>, Vec<u32>) {
    let mut edges = Vec::new();
    for i in 0..n as u32 {
        for d in 1..=(i % 7) + 1 {
            edges.push((i, (i + d * 3) % n as u32));
        }
    }
    symmetric_csr(n, &edges)
}

/// A ring of 1000 nodes whose even nodes also link to a hub (node 1000) of degree 500:
/// mean degree ≈ 3, so a Dashboard sized for it starts smaller than the hub's pins.
fn ring_with_hub() -> (u32, (Vec<u64>, Vec<u32>)) {
    let ring = 1000u32;
    let mut edges: Vec<(u32, u32)> = (0..ring).map(|v| (v, (v + 1) % ring)).collect();
    edges.extend((0..ring).step_by(2).map(|v| (v, ring)));
    (ring, symmetric_csr(ring as usize + 1, &edges))
}

#[test]
fn dashboard_selects_proportionally_to_degree() {
    let (o, i) = skewed_graph(200);
    let g = Csr::new(&o, &i).unwrap();
    let frontier: Vec<u32> = (0..40).map(|k| k * 5).collect();
    let mut db = Dashboard::new(
        2 * frontier.iter().map(|&v| g.degree(v)).sum::<usize>(),
        frontier.len(),
    );
    for (slot, &v) in frontier.iter().enumerate() {
        db.put(slot, v, g.degree(v));
    }
    let mut r = rng(1);
    let draws = 200_000;
    let mut counts = vec![0u64; frontier.len()];
    for _ in 0..draws {
        counts[db.select(&mut r).unwrap()] += 1;
    }
    let total: usize = frontier.iter().map(|&v| g.degree(v)).sum();
    let expected: Vec<f64> = frontier
        .iter()
        .map(|&v| g.degree(v) as f64 / total as f64 * draws as f64)
        .collect();
    let stat = chi_square(&counts, &expected);
    assert!(
        stat < chi_square_critical(frontier.len() - 1),
        "chi2 = {stat}"
    );
}

#[test]
fn cleanup_reclaims_pins_without_growing_and_keeps_the_distribution() {
    // Replace frontier nodes many times: the tail runs off the end of DB repeatedly, so
    // only cleanups keep DB at its size. Without a working cleanup DB would grow (or the
    // pins would be wrong and the chi-square would fail).
    let pins = [3usize, 5, 8, 1, 13];
    let cap = 2 * pins.iter().sum::<usize>();
    let mut db = Dashboard::new(cap, pins.len());
    for (s, &p) in pins.iter().enumerate() {
        db.put(s, s as u32, p);
    }
    let mut r = rng(2);
    for round in 0..5_000 {
        let s = round % pins.len();
        let node = db.take(s);
        db.put(s, node, pins[s]);
    }
    assert!(db.cleanups() > 100, "only {} cleanups", db.cleanups());
    assert_eq!(db.grows(), 0);
    assert_eq!(db.capacity(), cap);
    assert_eq!(db.valid_pins(), pins.iter().sum::<usize>());
    let draws = 100_000;
    let mut counts = vec![0u64; pins.len()];
    for _ in 0..draws {
        let s = db.select(&mut r).unwrap();
        assert_eq!(db.node(s), s as u32);
        counts[s] += 1;
    }
    let total: usize = pins.iter().sum();
    let expected: Vec<f64> = pins
        .iter()
        .map(|&p| p as f64 / total as f64 * draws as f64)
        .collect();
    assert!(chi_square(&counts, &expected) < chi_square_critical(pins.len() - 1));
}

#[test]
fn a_node_with_more_pins_than_db_grows_it_and_keeps_proportions() {
    let mut db = Dashboard::new(10, 3);
    db.put(0, 0, 2);
    db.put(1, 1, 3);
    db.put(2, 2, 60); // the hub: 60 pins in a 10-pin table
    assert_eq!(db.grows(), 1);
    assert!(db.capacity() >= 65);
    let mut r = rng(3);
    let draws = 65_000;
    let mut counts = [0u64; 3];
    for _ in 0..draws {
        counts[db.select(&mut r).unwrap()] += 1;
    }
    let expected = [2000.0, 3000.0, 60000.0];
    assert!(
        chi_square(&counts, &expected) < chi_square_critical(2),
        "{counts:?}"
    );
    // In a sampler: a ring of 1000 nodes whose even nodes also link to a hub of degree 500.
    // DB starts at η·m·d̃ = 2·2·85 ≈ 340 pins (d̃ = Σd²/Σd), less than the hub's 500.
    let (hub, (o, i)) = ring_with_hub();
    let g = Csr::new(&o, &i).unwrap();
    let s = FrontierSampler::new(
        g,
        FrontierParams {
            frontier: 2,
            budget: 400,
            ..Default::default()
        },
    )
    .unwrap();
    let mut db = s.dashboard();
    assert!(
        db.capacity() < 500,
        "table of {} pins already fits the hub",
        db.capacity()
    );
    let mut out = Vec::new();
    s.sample_with(&mut db, &mut r, &mut out).unwrap();
    assert_eq!(out.len(), 400);
    assert!(
        db.grows() >= 1,
        "the hub never entered the frontier: corner case not exercised"
    );
    assert!(db.capacity() >= 500);
    let hub_visits = out.iter().filter(|&&v| v == hub).count();
    assert!(hub_visits > 30, "hub visited {hub_visits} times");
}

#[test]
fn pin_cap_makes_selection_proportional_to_capped_degree() {
    let (o, i) = skewed_graph(100);
    let g = Csr::new(&o, &i).unwrap();
    let cap = 4usize;
    let frontier: Vec<u32> = (0..30).collect();
    let mut db = Dashboard::new(1000, frontier.len());
    for (slot, &v) in frontier.iter().enumerate() {
        db.put(slot, v, g.degree(v).min(cap));
    }
    let mut r = rng(4);
    let draws = 150_000;
    let mut counts = vec![0u64; frontier.len()];
    for _ in 0..draws {
        counts[db.select(&mut r).unwrap()] += 1;
    }
    let total: usize = frontier.iter().map(|&v| g.degree(v).min(cap)).sum();
    let expected: Vec<f64> = frontier
        .iter()
        .map(|&v| g.degree(v).min(cap) as f64 / total as f64 * draws as f64)
        .collect();
    assert!(chi_square(&counts, &expected) < chi_square_critical(frontier.len() - 1));
}

#[test]
fn frontier_sampler_pop_matches_the_naive_scan_in_distribution() {
    // The naive O(m) pop and the Dashboard select are the same distribution: both ∝ degree.
    let (o, i) = skewed_graph(120);
    let g = Csr::new(&o, &i).unwrap();
    let frontier: Vec<u32> = (0..25).map(|k| k * 4 + 1).collect();
    let mut r = rng(5);
    let draws = 100_000;
    let mut naive = vec![0u64; frontier.len()];
    for _ in 0..draws {
        naive[NaiveFrontier::pop(g, &frontier, &mut r)] += 1;
    }
    let total: usize = frontier.iter().map(|&v| g.degree(v)).sum();
    let expected: Vec<f64> = frontier
        .iter()
        .map(|&v| g.degree(v) as f64 / total as f64 * draws as f64)
        .collect();
    assert!(chi_square(&naive, &expected) < chi_square_critical(frontier.len() - 1));
}

#[test]
fn frontier_visits_converge_to_degree_proportions() {
    // Frontier sampling's long-run visit distribution on a connected graph is ∝ degree.
    let (o, i) = skewed_graph(60);
    let g = Csr::new(&o, &i).unwrap();
    let s = FrontierSampler::new(
        g,
        FrontierParams {
            frontier: 10,
            budget: 2010,
            ..Default::default()
        },
    )
    .unwrap();
    let mut counts = vec![0u64; 60];
    let mut r = rng(6);
    for _ in 0..100 {
        let mut out = Vec::new();
        s.sample_nodes(&mut r, &mut out).unwrap();
        for &v in &out[10 + 500..] {
            counts[v as usize] += 1; // after burn-in
        }
    }
    let total: u64 = counts.iter().sum();
    let deg_total: usize = (0..60).map(|v| g.degree(v)).sum();
    for v in 0..60u32 {
        let want = g.degree(v) as f64 / deg_total as f64;
        let got = counts[v as usize] as f64 / total as f64;
        assert!(
            (got - want).abs() < 0.2 * want + 0.002,
            "node {v}: {got} vs {want}"
        );
    }
}

/// The skewed graph on nodes 0..30, then 12 nodes without neighbours (a training graph's
/// held-out nodes), a self-loop on every fifth node (degrees count it, as a store's CSR
/// does).
fn skewed_with_isolated_and_loops() -> (Vec<u64>, Vec<u32>) {
    let (o, i) = skewed_graph(30);
    let (mut offsets, mut indices) = (vec![0u64], Vec::new());
    for u in 0..42u32 {
        if u < 30 {
            let mut row: Vec<u32> = i[o[u as usize] as usize..o[u as usize + 1] as usize].to_vec();
            if u % 5 == 0 {
                row.push(u);
                row.sort_unstable();
            }
            indices.extend(row);
        }
        offsets.push(indices.len() as u64);
    }
    (offsets, indices)
}

/// GraphSAINT's edge distribution, P({u, v}) ∝ 1/deg u + 1/deg v over the edges between two
/// nodes, by a χ² test over 400,000 draws: on a plain graph, and on one with isolated nodes
/// and self-loops (which the sampler's uniform node then uniform neighbour must neither
/// draw nor let skew the other edges).
#[test]
fn edge_sampler_frequencies_match_inverse_degrees() {
    for (o, i) in [skewed_graph(30), skewed_with_isolated_and_loops()] {
        let g = Csr::new(&o, &i).unwrap();
        let s = EdgeSampler::new(g, 1).unwrap();
        let mut edges = Vec::new();
        for u in 0..g.n_nodes() as u32 {
            for &v in g.neighbors(u) {
                if v > u {
                    edges.push((u, v));
                }
            }
        }
        let w: Vec<f64> = edges
            .iter()
            .map(|&(u, v)| 1.0 / g.degree(u) as f64 + 1.0 / g.degree(v) as f64)
            .collect();
        let wsum: f64 = w.iter().sum();
        let draws = 400_000;
        let mut counts = vec![0u64; edges.len()];
        let mut r = rng(7);
        for _ in 0..draws {
            let e = s.sample_edge(&mut r).unwrap();
            counts[edges.binary_search(&e).expect("drawn edge exists")] += 1;
        }
        let expected: Vec<f64> = w.iter().map(|x| x / wsum * draws as f64).collect();
        let stat = chi_square(&counts, &expected);
        assert!(
            stat < chi_square_critical(edges.len() - 1),
            "chi2 = {stat} over {} edges",
            edges.len()
        );
    }
}

#[test]
fn edge_sampler_on_self_loops_alone_is_an_error() {
    let (offsets, indices) = (vec![0u64, 1, 2, 2], vec![0u32, 1]);
    let g = Csr::new(&offsets, &indices).unwrap();
    let s = EdgeSampler::new(g, 3).unwrap();
    let err = s.sample_edge(&mut rng(1)).unwrap_err().to_string();
    assert!(err.contains("self-loops"), "{err}");
    // No node with a neighbour at all: refused when built.
    let (offsets, indices) = (vec![0u64, 0, 0], vec![]);
    let g = Csr::new(&offsets, &indices).unwrap();
    assert!(matches!(EdgeSampler::new(g, 3), Err(SampleError::NoEdges)));
}

#[test]
fn node_sampler_by_degree_and_uniform() {
    let (o, i) = skewed_graph(40);
    let g = Csr::new(&o, &i).unwrap();
    let draws = 200_000;
    for by_degree in [true, false] {
        let s = NodeSampler::new(g, 1, by_degree).unwrap();
        let mut counts = vec![0u64; 40];
        let mut r = rng(8);
        for _ in 0..draws {
            counts[s.sample_node(&mut r) as usize] += 1;
        }
        let total: usize = (0..40).map(|v| g.degree(v)).sum();
        let expected: Vec<f64> = (0..40u32)
            .map(|v| if by_degree { g.degree(v) as f64 / total as f64 } else { 1.0 / 40.0 } * draws as f64)
            .collect();
        assert!(
            chi_square(&counts, &expected) < chi_square_critical(39),
            "by_degree={by_degree}"
        );
    }
}

#[test]
fn random_walks_follow_edges() {
    let (o, i) = skewed_graph(80);
    let g = Csr::new(&o, &i).unwrap();
    let (roots, depth) = (30, 6);
    let s = RandomWalkSampler::new(g, roots, depth).unwrap();
    let mut out = Vec::new();
    s.sample_nodes(&mut rng(9), &mut out).unwrap();
    assert_eq!(out.len(), roots * (depth + 1));
    for walk in out.chunks(depth + 1) {
        for w in walk.windows(2) {
            assert!(
                g.neighbors(w[0]).contains(&w[1]),
                "step {} → {} is not an edge",
                w[0],
                w[1]
            );
        }
    }
}

#[test]
fn subgraphs_are_deterministic_whatever_the_threads() {
    let tmp = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::small_store(tmp.path(), "g", 11, 4)).unwrap();
    let g = store.train();
    let f = FrontierSampler::new(
        g,
        FrontierParams {
            frontier: 50,
            budget: 400,
            ..Default::default()
        },
    )
    .unwrap();
    let pool = |threads: usize, seed: u64| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| sample_pool(&f, seed, 0, 8, 16).unwrap())
    };
    let a = pool(1, 42);
    let b = pool(2, 42);
    assert_eq!(a, b);
    assert_ne!(a, pool(2, 43));
    // Subgraph 5 alone equals the pool's 6th.
    assert_eq!(sample_subgraph(&f, 42, 5, 16).unwrap(), a[5]);
    for s in &a {
        assert_eq!(s.n_nodes() % 16, 0, "clipped to a multiple of 16");
        assert!(
            s.nodes.iter().all(|&v| store.role(v) == Role::Train),
            "inductive sampling left the training graph"
        );
        assert!(s.n_nodes() <= 400);
    }
}

#[test]
fn a_draw_does_not_depend_on_earlier_draws_on_the_same_thread() {
    // Regression (found by CI): the per-thread Dashboard kept a table grown by an earlier
    // draw, which changed later draws. On the ring-and-hub graph the hub grows the table.
    let (_, (o, i)) = ring_with_hub();
    let g = Csr::new(&o, &i).unwrap();
    let f = FrontierSampler::new(
        g,
        FrontierParams {
            frontier: 2,
            budget: 400,
            ..Default::default()
        },
    )
    .unwrap();
    let fresh = |k: u64| {
        std::thread::scope(|s| {
            s.spawn(|| sample_subgraph(&f, 11, k, 1).unwrap())
                .join()
                .unwrap()
        })
    };
    let on_one_thread: Vec<Subgraph> = (0..12)
        .map(|k| sample_subgraph(&f, 11, k, 1).unwrap())
        .collect();
    for k in [0u64, 5, 11] {
        assert_eq!(
            fresh(k),
            on_one_thread[k as usize],
            "subgraph {k} depends on the thread's history"
        );
    }
}

#[test]
fn normalisation_counts_round_trip_and_full_sampler_is_neutral() {
    let (o, i) = skewed_graph(50);
    let g = Csr::new(&o, &i).unwrap();
    let full = FullSampler::new(g);
    let c = NormCounts::estimate(&full, 7, 1, 1).unwrap();
    assert!((0..50).all(|v| c.node_count(v) == 7));
    assert!((0..i.len() as u64).all(|k| c.edge_count(k) == 7));
    assert_eq!((c.node.distinct(), c.edge.distinct()), (50, i.len()));
    let s = sample_subgraph(&full, 1, 0, 1).unwrap();
    assert!(c.aggregator_weights(&s).iter().all(|&w| w == 1.0));
    assert!(c
        .loss_weights(&s, 50)
        .iter()
        .all(|&w| (w - 1.0 / 50.0).abs() < 1e-7));

    let f = FrontierSampler::new(
        g,
        FrontierParams {
            frontier: 5,
            budget: 30,
            ..Default::default()
        },
    )
    .unwrap();
    let c = NormCounts::estimate(&f, 200, 3, 1).unwrap();
    let sizes: u64 = (0..200)
        .map(|k| sample_subgraph(&f, 3, k, 1).unwrap().n_nodes() as u64)
        .sum();
    assert_eq!(c.nodes_drawn(), sizes, "C_v sums to Σ|V_s|");
    // C_{u,v} = C_{v,u}: induced subgraphs hold both directions.
    let perm = transpose_permutation(&o.iter().map(|&x| x as u32).collect::<Vec<_>>(), &i).unwrap();
    for (k, &p) in perm.iter().enumerate() {
        assert_eq!(c.edge_count(k as u64), c.edge_count(u64::from(p)));
    }
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("norm.bin");
    c.save(&path).unwrap();
    assert_eq!(NormCounts::load(&path).unwrap(), c);
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let msg = NormCounts::load(&path).unwrap_err().to_string();
    assert!(
        msg.contains("norm.bin") && msg.contains("checksum mismatch"),
        "{msg}"
    );
}

#[test]
fn corrupt_store_is_an_error_not_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let path = common::small_store(tmp.path(), "g", 9, 5);
    let n = GraphStore::open(&path).unwrap().n_nodes() as u32;
    let f = path.join("full.indices.u32");
    let len = std::fs::metadata(&f).unwrap().len() as usize;
    let junk: Vec<u8> = (0..len / 4).flat_map(|_| (n + 3).to_le_bytes()).collect();
    std::fs::write(&f, junk).unwrap();
    let store = GraphStore::open(&path).unwrap(); // cheap checks do not read indices
    let g = store.full();
    let msg = |e: SampleError| e.to_string();
    let fr = FrontierSampler::new(
        g,
        FrontierParams {
            frontier: 10,
            budget: 100,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(msg(sample_subgraph(&fr, 1, 0, 1).unwrap_err()).contains("out of range"));
    let rw = RandomWalkSampler::new(g, 5, 3).unwrap();
    assert!(msg(sample_subgraph(&rw, 1, 0, 1).unwrap_err()).contains("out of range"));
    let nd = NodeSampler::new(g, 50, true).unwrap();
    assert!(msg(sample_subgraph(&nd, 1, 0, 1).unwrap_err()).contains("out of range"));
    // The edge sampler builds without reading the rows (O(1) memory per edge); its first
    // draw reads one and stops there.
    let ed = EdgeSampler::new(g, 10).unwrap();
    assert!(msg(sample_subgraph(&ed, 1, 0, 1).unwrap_err()).contains("out of range"));
}

#[test]
fn sampling_a_cold_store_reads_through_mmap() {
    let tmp = tempfile::tempdir().unwrap();
    let path = common::small_store(tmp.path(), "g", 12, 6);
    let params = FrontierParams {
        frontier: 100,
        budget: 800,
        ..Default::default()
    };
    let before = {
        let store = GraphStore::open(&path).unwrap();
        let f = FrontierSampler::new(store.full(), params).unwrap();
        sample_pool(&f, 9, 0, 4, 16).unwrap()
    };
    // Drop the page cache (root only; elsewhere this test still samples, warm).
    let _ = std::process::Command::new("sync").status();
    let dropped = std::fs::write("/proc/sys/vm/drop_caches", "1").is_ok();
    if !dropped {
        eprintln!("could not drop the page cache (not root?): sampling a warm store");
    }
    let store = GraphStore::open(&path).unwrap();
    let f = FrontierSampler::new(store.full(), params).unwrap();
    assert_eq!(sample_pool(&f, 9, 0, 4, 16).unwrap(), before);
}

/// Normalisation counts in both layouts (and the automatic choice) against counting the same
/// subgraphs by hand (the definition), the weights against the formulas on those counts;
/// round trips of both layouts; a damaged file is refused.
#[test]
fn normalisation_counts_in_both_layouts_equal_counting_by_hand() {
    let (o, i) = skewed_graph(300);
    let g = Csr::new(&o, &i).unwrap();
    let f = FrontierSampler::new(
        g,
        FrontierParams {
            frontier: 6,
            budget: 40,
            ..Default::default()
        },
    )
    .unwrap();
    let (n_pre, seed) = (37, 11);
    let mut node = vec![0u32; 300];
    let mut edge = vec![0u32; i.len()];
    let subs: Vec<Subgraph> = (0..n_pre)
        .map(|k| sample_subgraph(&f, seed, k, 1).unwrap())
        .collect();
    for s in &subs {
        s.nodes.iter().for_each(|&v| node[v as usize] += 1);
        s.parent_entries.iter().for_each(|&p| edge[p as usize] += 1);
    }
    assert!(
        node.contains(&0),
        "some nodes never drawn: absent keys exercised"
    );
    for layout in [Layout::Sparse, Layout::Dense, Layout::Auto] {
        let c = NormCounts::estimate_with(&f, n_pre, seed, 1, layout).unwrap();
        for (v, &want) in node.iter().enumerate() {
            assert_eq!(c.node_count(v as u32), want, "{layout:?} node {v}");
        }
        for (k, &want) in edge.iter().enumerate() {
            assert_eq!(c.edge_count(k as u64), want, "{layout:?} entry {k}");
        }
        assert_eq!(c.node.distinct(), node.iter().filter(|&&x| x > 0).count());
        // Weights of fresh subgraphs (other seed: unseen nodes and edges appear).
        for k in 0..5 {
            let s = sample_subgraph(&f, seed + 1, k, 1).unwrap();
            let mut want = Vec::new();
            for r in 0..s.n_nodes() {
                let cv = f64::from(node[s.nodes[r] as usize].max(1));
                for e in s.offsets[r]..s.offsets[r + 1] {
                    let cuv = f64::from(edge[s.parent_entries[e as usize] as usize].max(1));
                    want.push((cv / cuv) as f32);
                }
            }
            assert_eq!(c.aggregator_weights(&s), want);
            let lw: Vec<f32> = s
                .nodes
                .iter()
                .map(|&v| {
                    let cv = match node[v as usize] {
                        0 => 0.1,
                        x => f64::from(x),
                    };
                    (n_pre as f64 / (cv * 120.0)) as f32
                })
                .collect();
            assert_eq!(c.loss_weights(&s, 120), lw);
            // Lookups out of order (descending) agree too.
            let mut rev = s.clone();
            rev.nodes.reverse();
            let lw_rev: Vec<f32> = c.loss_weights(&rev, 120).into_iter().rev().collect();
            assert_eq!(lw_rev, lw);
        }
    }
    // Auto: dense here (37 subgraphs cover the 300-node graph), sparse with 2 subgraphs.
    let c = NormCounts::estimate(&f, n_pre, seed, 1).unwrap();
    assert!(matches!(
        (&c.node, &c.edge),
        (Counts::Dense(_), Counts::Dense(_))
    ));
    let two = NormCounts::estimate(&f, 2, seed, 1).unwrap();
    assert!(matches!(
        (&two.node, &two.edge),
        (Counts::Sparse(_), Counts::Sparse(_))
    ));
    let want: u64 = subs[..2].iter().map(|s| s.n_nodes() as u64).sum();
    assert_eq!(two.nodes_drawn(), want);

    // Round trips, then damage that keeps the checksum valid: sparse keys out of order.
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("n.bin");
    for layout in [Layout::Dense, Layout::Sparse] {
        let c = NormCounts::estimate_with(&f, n_pre, seed, 1, layout).unwrap();
        c.save(&path).unwrap();
        assert_eq!(NormCounts::load(&path).unwrap(), c);
    }
    let mut bytes = std::fs::read(&path).unwrap();
    let meta_len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let at = 16 + meta_len + 1 + 8; // layout byte, K, then the first node key
    bytes[at..at + 4].copy_from_slice(&299u32.to_le_bytes());
    let body = bytes.len() - 8;
    let sum = xxhash_rust::xxh3::xxh3_64(&bytes[..body]);
    bytes[body..].copy_from_slice(&sum.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let msg = NormCounts::load(&path).unwrap_err().to_string();
    assert!(
        msg.contains("n.bin") && msg.contains("not strictly ascending"),
        "{msg}"
    );
}

/// `EdgeNodes` (bitmap + block ranks) is the list `nodes_with_edges` gives, entry for entry,
/// on graphs with isolated nodes in every position (word and block boundaries included), dense
/// and sparse (70 001 nodes at 0.5 %: the select hints then span many blocks).
#[test]
fn edge_nodes_select_equals_the_listed_nodes() {
    let mut rng = rng(5);
    for n in [1usize, 63, 64, 65, 511, 512, 513, 1500, 4099, 70_001] {
        for p in [0.005, 0.05, 0.5, 0.97] {
            let edges: Vec<(u32, u32)> = (0..n as u32)
                .filter(|_| rand::Rng::random_bool(&mut rng, p))
                .map(|v| (v, (v + 1) % n as u32))
                .filter(|(a, b)| a != b)
                .collect();
            let (o, i) = symmetric_csr(n, &edges);
            let g = Csr::new(&o, &i).unwrap();
            let list = nodes_with_edges(g);
            let sel = EdgeNodes::new(g);
            assert_eq!(sel.len(), list.len(), "n {n} p {p}");
            for (k, &v) in list.iter().enumerate() {
                assert_eq!(sel.get(k), v, "n {n} p {p} index {k}");
            }
            assert_eq!(sel.iter().collect::<Vec<_>>(), list);
        }
    }
}

/// Every kind's `expected_nodes` (what the trainer and `explain` plan for) against what
/// its sampler, built by `SamplerConfig::build` with the kind's defaults, draws on a
/// generated skewed graph of 200 000 nodes (mean degree ≈ 9), written to a store (the
/// typed kinds take a homogeneous store as its one type and relation): the draws before
/// dedup match
/// within 1 % (they are exact for every sampler here: no walk meets a dead end), and the
/// unique nodes of 5 subgraphs average between 75 % and 100 % of it (at ≤ 9 000 draws on
/// 200 000 nodes a uniform draw repeats ≈ 2 %; walks and frontiers step back to a node
/// they came from with probability 1/degree, ≈ 10 %, hence the margin).
#[test]
fn every_kind_expected_nodes_match_the_draws() {
    use saintflow::store::import::{import_arrays, ArrayGraph, Edges};
    let n = 200_000;
    let (o, i) = skewed_graph(n);
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("skewed.sf");
    let (indptr, indices): (Vec<i64>, Vec<i64>) = (
        o.iter().map(|&x| x as i64).collect(),
        i.iter().map(|&x| i64::from(x)).collect(),
    );
    let arrays = ArrayGraph {
        n_nodes: None,
        edges: Edges::Csr {
            indptr: &indptr,
            indices: &indices,
        },
        symmetrize: false,
        features: None,
        labels: None,
        roles: None,
        source: "skewed",
        edge_time: None,
    };
    import_arrays(
        &arrays,
        &path,
        false,
        &saintflow::progress::Progress::hidden(),
    )
    .unwrap();
    let store = GraphStore::open(&path).unwrap();
    let g = store.full();
    assert_eq!((g.offsets(), g.indices()), (&o[..], &i[..]));
    for row in KINDS {
        let kind = (row.default)();
        let sampler = kind.build(&store, g).unwrap();
        let expected = kind.expected_nodes().unwrap_or(n) as f64;
        let runs = 5u64;
        let (mut draws, mut unique) = (0usize, 0usize);
        for s in 0..runs {
            let mut out = Vec::new();
            sampler
                .sample_nodes(&mut subgraph_rng(7, s), &mut out)
                .unwrap();
            draws += out.len();
            unique += sample_subgraph(sampler.as_ref(), 7, s, 1)
                .unwrap()
                .n_nodes();
        }
        let (draws, unique) = (draws as f64 / runs as f64, unique as f64 / runs as f64);
        assert!(
            (draws - expected).abs() <= 0.01 * expected,
            "{}: {draws} draws, expected {expected}",
            row.name
        );
        assert!(
            (0.75 * expected..=expected).contains(&unique),
            "{}: {unique} unique nodes, expected {expected}",
            row.name
        );
    }
}

/// A relation's adjacency and its transpose (the reverse relation's pattern): the
/// permutation puts each transposed entry's value where a dense transpose has it, and
/// patterns that are not each other's transpose are errors.
#[test]
fn transpose_between_two_patterns_matches_a_dense_transpose() {
    // 5 nodes; r: 0 → {3, 4}, 1 → {3}, 2 → {4} (rows 3, 4 empty); its reverse: 3 → {0, 1},
    // 4 → {0, 2}.
    let (offsets, indices) = (vec![0u32, 2, 3, 4, 4, 4], vec![3u32, 4, 3, 4]);
    let (t_offsets, t_indices) = (vec![0u32, 0, 0, 0, 2, 4], vec![0u32, 1, 0, 2]);
    let perm = transpose_between(&offsets, &indices, &t_offsets, &t_indices).unwrap();
    let values = [1.0f32, 2.0, 3.0, 4.0];
    let n = 5;
    let mut dense = vec![0f32; n * n];
    for u in 0..n {
        for k in offsets[u] as usize..offsets[u + 1] as usize {
            dense[u * n + indices[k] as usize] = values[k];
        }
    }
    for v in 0..n {
        for k in t_offsets[v] as usize..t_offsets[v + 1] as usize {
            let u = t_indices[k] as usize;
            assert_eq!(
                values[perm[k] as usize],
                dense[u * n + v],
                "entry ({v}, {u})"
            );
        }
    }
    // A symmetric pattern against itself: the permutation of `transpose_permutation`.
    let (so, si) = (vec![0u32, 1, 3, 4], vec![1u32, 0, 2, 1]);
    assert_eq!(
        transpose_between(&so, &si, &so, &si).unwrap(),
        transpose_permutation(&so, &si).unwrap()
    );
    // The transposed pattern misses the reverse of (2, 4): named.
    let short = (vec![0u32, 0, 0, 0, 2, 3], vec![0u32, 1, 0]);
    assert_eq!(
        transpose_between(&offsets, &indices, &short.0, &short.1),
        Err((2, 4))
    );
    // It holds one entry more than the reverses (4 → 3): an error, not a slot left 0.
    let long = (vec![0u32, 0, 0, 0, 2, 5], vec![0u32, 1, 0, 2, 3]);
    assert_eq!(
        transpose_between(&offsets, &indices, &long.0, &long.1),
        Err((5, 0))
    );
    // Different row counts.
    assert!(transpose_between(&offsets, &indices, &[0, 0], &[]).is_err());
}

/// Issue 15 (fuzzing, `store_step`): a damaged store whose graph is not symmetric gave an
/// asymmetric subgraph, and the transpose permutation (Algorithm 6) debug-asserted, or in
/// release computed a wrong permutation. Now each entry's reverse is checked.
#[test]
fn issue15_asymmetric_pattern_is_an_error_not_a_wrong_transpose() {
    // 0 → 1, 1 → 0, 1 → 2 (no 2 → 1), 2 → 0 (no 0 → 2).
    let (offsets, indices) = (vec![0u32, 1, 3, 4], vec![1u32, 0, 2, 0]);
    match transpose_permutation(&offsets, &indices) {
        Err((1, 2)) => {}
        other => panic!("expected the entry (1, 2) without reverse, got {other:?}"),
    }
    // A reverse present but claimed twice: row 1 holds 0 once, rows 0 and 2 both need it.
    let (offsets, indices) = (vec![0u32, 1, 2, 3], vec![1u32, 0, 1]);
    assert!(matches!(
        transpose_permutation(&offsets, &indices),
        Err((2, 1))
    ));
    // The subgraph's method names the original ids.
    let sub = Subgraph {
        nodes: vec![10, 20, 30],
        offsets: vec![0, 1, 3, 4],
        indices: vec![1, 0, 2, 0],
        parent_entries: vec![0; 4],
        link: None,
        typed: None,
    };
    let msg = sub.transpose_permutation().unwrap_err().to_string();
    assert!(msg.contains("entry (20, 30) has no reverse"), "{msg}");
}
