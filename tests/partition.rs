//! Issue 17, first part: the k-way partitioner (balance within ε, every edge inside a part
//! or in the cut, refinement never worse than its start, a planted partition found), GAD
//! augmentation (replicas connected to their part within L hops, the budget formula, the
//! walk-count formula) and the part stores (open, check, no role on replicas, one training
//! step through the normal engine), plus the output directory's atomic publication.

use std::collections::VecDeque;
use std::path::Path;

use saintflow::dist::partition::gad::budget;
use saintflow::dist::partition::{
    augment, edge_cut, partition, partition_store, partition_streaming, read_assignment,
    read_part_map, walk_count, AugmentOptions, Method, PartitionOptions, PartitionReport,
    PartitionSpec, WGraph, PARTITION_JSON,
};
use saintflow::plan::Plan;
use saintflow::prelude::*;
use saintflow::progress::Progress;
use saintflow::seed::{hash3, unit_f64};
use saintflow::store::check;
use saintflow::store::gen::{generate_kronecker, KroneckerSpec, Planted};
use saintflow::train::TrainOptions;

/// A symmetric CSR from undirected edges (duplicates and self loops dropped).
fn graph(n: usize, edges: &[(u32, u32)]) -> WGraph {
    let mut rows = vec![Vec::new(); n];
    for &(u, v) in edges {
        if u != v {
            rows[u as usize].push(v);
            rows[v as usize].push(u);
        }
    }
    let mut off = vec![0u64];
    let mut idx = Vec::new();
    for r in &mut rows {
        r.sort_unstable();
        r.dedup();
        idx.extend_from_slice(r);
        off.push(idx.len() as u64);
    }
    WGraph::from_csr(&off, &idx).unwrap()
}

/// `blocks` planted blocks of `size` nodes: ~`d_in` edges per node inside its block and
/// ~`d_out` to other blocks. Node v is in block v % blocks (interleaved ids, so id order
/// gives the partitioner no hint).
fn planted(blocks: usize, size: usize, d_in: usize, d_out: usize, seed: u64) -> (WGraph, Vec<u32>) {
    let n = blocks * size;
    let mut edges = Vec::new();
    let mut h = 0u64;
    let mut draw = |m: usize| {
        h += 1;
        (unit_f64(hash3(seed, 77, h)) * m as f64) as usize
    };
    for u in 0..n {
        let b = u % blocks;
        for _ in 0..d_in / 2 {
            edges.push((u as u32, (draw(size) * blocks + b) as u32));
        }
        if draw(2 * d_out.max(1)) < d_out {
            edges.push((u as u32, draw(n) as u32));
        }
    }
    let truth = (0..n).map(|v| (v % blocks) as u32).collect();
    (graph(n, &edges), truth)
}

fn grid(w: usize, h: usize) -> WGraph {
    let mut e = Vec::new();
    for y in 0..h {
        for x in 0..w {
            let v = (y * w + x) as u32;
            if x + 1 < w {
                e.push((v, v + 1));
            }
            if y + 1 < h {
                e.push((v, v + w as u32));
            }
        }
    }
    graph(w * h, &e)
}

/// The cut counted from the assignment alone: undirected edges u < v in different parts.
fn cut_of(g: &WGraph, part: &[u32]) -> (u64, u64) {
    let (mut inside, mut cut) = (0, 0);
    for u in 0..g.n() {
        for (v, _) in g.edges(u) {
            if u < v {
                if part[u] == part[v] {
                    inside += 1;
                } else {
                    cut += 1;
                }
            }
        }
    }
    (inside, cut)
}

#[test]
fn balance_cut_and_refinement_on_generated_graphs() {
    let graphs = [
        ("grid 40x50", grid(40, 50)),
        ("planted 4x300", planted(4, 300, 10, 2, 1).0),
        ("sparse random", planted(1, 3000, 2, 0, 5).0),
        (
            "with isolated nodes",
            graph(1000, &[(0, 1), (1, 2), (5, 6), (7, 999)]),
        ),
    ];
    let (mut runs, mut feasible_starts) = (0, 0);
    for (name, g) in &graphs {
        let n_edges = g.adj.len() as u64 / 2;
        for k in [2, 3, 4, 8] {
            for epsilon in [0.0, 0.03, 0.1] {
                let o = PartitionOptions {
                    k,
                    epsilon,
                    seed: 3,
                };
                let p = partition(g, &o).unwrap();
                let n = g.n() as u64;
                let bound = (((1.0 + epsilon) * n as f64 / k as f64).floor() as u64)
                    .max(n.div_ceil(k as u64));
                let mut sizes = vec![0u64; k];
                for &x in &p.part {
                    sizes[x as usize] += 1;
                }
                assert!(
                    sizes.iter().all(|&s| s <= bound),
                    "{name} k={k} ε={epsilon}: sizes {sizes:?} > {bound}"
                );
                let (inside, cut) = cut_of(g, &p.part);
                assert_eq!(inside + cut, n_edges, "{name}: every edge inside or cut");
                assert_eq!(cut, p.cut, "{name} k={k}: reported cut");
                assert_eq!(edge_cut(g, &p.part), cut);
                if p.initial_balanced {
                    feasible_starts += 1;
                    assert!(
                        p.cut <= p.initial_cut,
                        "{name} k={k}: refined {} > initial {}",
                        p.cut,
                        p.initial_cut
                    );
                }
                runs += 1;
                assert_eq!(p.part, partition(g, &o).unwrap().part, "deterministic");
            }
        }
    }
    // The no-worse check must have applied to a fair share of the runs.
    assert!(2 * feasible_starts >= runs, "{feasible_starts} of {runs}");
}

#[test]
fn planted_partition_is_found() {
    for (k, seed) in [(2, 1), (4, 2), (8, 3)] {
        let (g, truth) = planted(k, 250, 12, 1, seed);
        let (_, planted_cut) = cut_of(&g, &truth);
        let p = partition(
            &g,
            &PartitionOptions {
                k,
                epsilon: 0.03,
                seed: 0,
            },
        )
        .unwrap();
        // A random balanced assignment cuts ~(1 − 1/k) of all edges: far above the planted cut.
        let random: Vec<u32> = (0..g.n() as u64)
            .map(|v| (hash3(9, 1, v) % k as u64) as u32)
            .collect();
        let (_, random_cut) = cut_of(&g, &random);
        assert!(
            random_cut > 3 * planted_cut,
            "the check must reject a random assignment"
        );
        assert!(
            p.cut as f64 <= 1.1 * planted_cut as f64,
            "k={k}: cut {} vs planted {planted_cut}",
            p.cut
        );
    }
}

#[test]
fn walk_count_follows_the_monte_carlo_bound() {
    // A pilot with x̄ = 4 and σ = 2 exactly (population 2,6 alternating, sample sd adjusted):
    let pilot: Vec<f64> = (0..100)
        .map(|j| if j % 2 == 0 { 2.0 } else { 6.0 })
        .collect();
    let sd = (pilot.iter().map(|x| (x - 4.0) * (x - 4.0)).sum::<f64>() / 99.0).sqrt();
    let n = ((1.96 * sd / (4.0 * 0.05)) * (1.96 * sd / (4.0 * 0.05))).ceil() as usize;
    assert_eq!(walk_count(&pilot, 1 << 20), n);
    assert!((380..=390).contains(&n), "(1.96·2/(4·0.05))² ≈ 384: {n}");
    assert_eq!(walk_count(&pilot, 150), 150, "capped");
    assert_eq!(walk_count(&pilot[..2], 1), 2, "never below the pilot");
}

/// Nodes of `g` within `hops` of `sources`.
fn within(g: &WGraph, sources: &[u32], hops: usize) -> Vec<bool> {
    let mut dist = vec![usize::MAX; g.n()];
    let mut q = VecDeque::new();
    for &s in sources {
        dist[s as usize] = 0;
        q.push_back(s as usize);
    }
    while let Some(u) = q.pop_front() {
        if dist[u] == hops {
            continue;
        }
        for (v, _) in g.edges(u) {
            if dist[v] == usize::MAX {
                dist[v] = dist[u] + 1;
                q.push_back(v);
            }
        }
    }
    dist.iter().map(|&d| d <= hops).collect()
}

#[test]
fn augmentation_budget_and_connectivity() {
    let (g, _) = planted(4, 400, 8, 3, 11);
    let k = 4;
    let p = partition(
        &g,
        &PartitionOptions {
            k,
            epsilon: 0.03,
            seed: 1,
        },
    )
    .unwrap();
    for (layers, alpha) in [(1, 0.05), (2, 0.01), (2, 0.1), (3, 0.2), (2, 5.0)] {
        let a = augment(
            &g,
            &p.part,
            k,
            &AugmentOptions {
                layers,
                alpha,
                seed: 4,
                ..Default::default()
            },
        )
        .unwrap();
        for (i, pa) in a.parts.iter().enumerate() {
            let own: Vec<u32> = (0..g.n() as u32)
                .filter(|&v| p.part[v as usize] as usize == i)
                .collect();
            assert_eq!(pa.own, own.len());
            let b = budget(alpha, pa.density, pa.own);
            assert_eq!(pa.budget, b);
            assert_eq!(
                b,
                (alpha * (1.0 + pa.density) * own.len() as f64).floor() as usize
            );
            assert!(
                pa.replicas.len() <= b,
                "part {i}: {} > budget {b}",
                pa.replicas.len()
            );
            match pa.stopped_by {
                // Stopped by a walk that did not fit: one whole walk short (< L new nodes).
                Some(new) => {
                    assert!(
                        pa.replicas.len() + new > b && new <= layers,
                        "part {i}: {pa:?}"
                    );
                }
                // The walks ran out: every walk's outside nodes are in.
                None => assert!(pa.replicas.len() <= b),
            }
            if alpha <= 0.1 {
                assert!(
                    pa.stopped_by.is_some(),
                    "enough walks for α = {alpha}: {pa:?}"
                );
            }
            // Replicas: of other parts, within L hops of the part's own nodes... through
            // the part's own nodes and replicas only (the augmented part is connected).
            let mut keep: Vec<(u32, u32)> = Vec::new();
            let mut member = vec![false; g.n()];
            for &v in own.iter().chain(&pa.replicas) {
                member[v as usize] = true;
            }
            for u in 0..g.n() {
                for (v, _) in g.edges(u) {
                    if member[u] && member[v] {
                        keep.push((u as u32, v as u32));
                    }
                }
            }
            let aug = graph(g.n(), &keep);
            let near = within(&aug, &own, layers);
            for &r in &pa.replicas {
                assert_ne!(p.part[r as usize] as usize, i);
                assert!(
                    near[r as usize],
                    "part {i}: replica {r} not within {layers} hops"
                );
            }
            // Walks: the Monte-Carlo count from the pilot, clamped.
            assert!(
                pa.walks >= 100 && pa.walks <= (16 * pa.boundary).max(100),
                "{pa:?}"
            );
        }
    }
}

fn kron(dir: &Path) -> std::path::PathBuf {
    kron_split(dir, "k.sf", KroneckerSpec::default().split)
}

/// `kron`'s graph with the train/val/test fractions `split`, at `dir/name`.
fn kron_split(dir: &Path, name: &str, split: [f64; 3]) -> std::path::PathBuf {
    let path = dir.join(name);
    let spec = KroneckerSpec {
        scale: 10,
        degree: 8.0,
        n_features: 8,
        n_classes: 4,
        planted: Some(Planted::default()),
        split,
        ..KroneckerSpec::default()
    };
    generate_kronecker(&spec, &path, false, &Progress::hidden()).unwrap();
    path
}

#[test]
fn part_stores_open_check_and_train() {
    part_stores_open_check_and_train_by(Method::Multilevel);
}

/// Issue 56 item 5: the streaming first level's part stores pass the same checks and train.
#[test]
fn streaming_part_stores_open_check_and_train() {
    part_stores_open_check_and_train_by(Method::Streaming);
}

fn part_stores_open_check_and_train_by(method: Method) {
    let dir = tempfile::tempdir().unwrap();
    let input = kron(dir.path());
    let out = dir.path().join("parts");
    let spec = PartitionSpec {
        method,
        ranks: None,
        partition: PartitionOptions {
            k: 3,
            epsilon: 0.03,
            seed: 2,
        },
        augment: AugmentOptions {
            layers: 2,
            alpha: 0.05,
            ..Default::default()
        },
        ..PartitionSpec::default()
    };
    let r = partition_store(&input, &out, &spec, false, &Progress::hidden()).unwrap();
    assert_eq!(r.method, method.name());
    let whole = GraphStore::open(&input).unwrap();
    let json: PartitionReport =
        serde_json::from_slice(&std::fs::read(out.join(PARTITION_JSON)).unwrap()).unwrap();
    assert_eq!(json, r);
    // assignment.txt: every node's home part, as the part stores' maps say.
    let assignment = read_assignment(&out).unwrap();
    assert_eq!(assignment.len(), whole.n_nodes());
    let g = saintflow::dist::partition::StoreGraph::new(&whole).unwrap();
    assert_eq!(
        saintflow::dist::partition::graph::cut(&g, &assignment),
        r.edge_cut
    );
    assert_eq!(
        r.parts.iter().map(|p| p.own).sum::<usize>(),
        whole.n_nodes()
    );
    let mut owner = vec![None; whole.n_nodes()];
    let plan = Plan::load(concat!(env!("CARGO_MANIFEST_DIR"), "/plans/gcn.toml")).unwrap();
    for pr in &r.parts {
        let path = out.join(&pr.store);
        let s = GraphStore::open(&path).unwrap();
        check(&s).unwrap();
        let m = read_part_map(&path).unwrap();
        assert_eq!(m.global.len(), s.n_nodes());
        assert_eq!(m.replica.iter().filter(|&&x| x).count(), pr.replicas);
        assert!(pr.replicas > 0 && pr.replicas <= pr.budget);
        for (l, &gid) in m.global.iter().enumerate() {
            let l = l as u32;
            assert_eq!(s.feature_row(l).unwrap(), whole.feature_row(gid).unwrap());
            assert_eq!(s.labels().is_labelled(l), whole.labels().is_labelled(gid));
            if m.replica[l as usize] {
                assert_eq!(
                    s.role(l),
                    Role::None,
                    "a replica has no role: never in the loss"
                );
                assert_ne!(m.home[l as usize] as usize, pr.part);
            } else {
                assert_eq!(s.role(l), whole.role(gid));
                assert_eq!(m.home[l as usize] as usize, pr.part);
                assert_eq!(assignment[gid as usize] as usize, pr.part);
                assert!(owner[gid as usize].replace(pr.part).is_none(), "owned once");
            }
        }
        // The part's edges are the whole graph's among its nodes.
        for l in 0..s.n_nodes() as u32 {
            let mine: Vec<u32> = s
                .full()
                .neighbors(l)
                .iter()
                .map(|&x| m.global[x as usize])
                .collect();
            let theirs: Vec<u32> = whole
                .full()
                .neighbors(m.global[l as usize])
                .iter()
                .copied()
                .filter(|v| m.global.binary_search(v).is_ok())
                .collect();
            assert_eq!(mine, theirs);
        }
        // Loss only on own training nodes: the engine's loss counts role Train.
        assert_eq!(s.role_count(Role::Train) as u64, pr.train);
        let outcome = TrainOptions::new(&plan, &s)
            .seed(1)
            .threads(1)
            .max_steps(1)
            .no_eval(true)
            .train()
            .unwrap();
        assert_eq!(outcome.steps, 1);
        assert!(outcome.losses()[0].is_finite());
    }
    assert!(owner.iter().all(|o| o.is_some()));
}

#[test]
fn output_directory_is_replaced_only_when_forced_and_a_partition() {
    let dir = tempfile::tempdir().unwrap();
    let input = kron(dir.path());
    let out = dir.path().join("parts");
    let spec = PartitionSpec {
        ranks: None,
        partition: PartitionOptions {
            k: 2,
            ..Default::default()
        },
        augment: AugmentOptions::default(),
        ..PartitionSpec::default()
    };
    let p = Progress::hidden();
    partition_store(&input, &out, &spec, false, &p).unwrap();
    let again = partition_store(&input, &out, &spec, false, &p).unwrap_err();
    assert!(again.to_string().contains("--force"), "{again}");
    let spec4 = PartitionSpec {
        ranks: None,
        partition: PartitionOptions {
            k: 4,
            ..spec.partition
        },
        ..spec
    };
    let r = partition_store(&input, &out, &spec4, true, &p).unwrap();
    assert_eq!(r.k, 4);
    assert!(out.join("part-3.sf").is_dir());
    // A directory of the user's is never replaced, even with force.
    let mine = dir.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::fs::write(mine.join("notes.txt"), "keep").unwrap();
    let refused = partition_store(&input, &mine, &spec, true, &p).unwrap_err();
    assert!(
        refused.to_string().contains("not a partition directory"),
        "{refused}"
    );
    assert!(mine.join("notes.txt").exists());
    // Nothing temporary is left beside the outputs.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// GAD's walk length from a plan (`partition --plan`): the receptive-field radius, hops of
/// neighbour ops from the features to the logits, with a power A^k counting k.
#[test]
fn walk_length_from_plans_is_the_receptive_field() {
    let dir = tempfile::tempdir().unwrap();
    let store = GraphStore::open(kron(dir.path())).unwrap();
    let reg = saintflow::op::Registry::with_builtins();
    let hops = |p: &Plan| saintflow::infer::plan_hops(p, &store, &reg).unwrap();
    let shipped = [
        ("gcn", 2),             // Â·ReLU(Â·X·W0)·W1
        ("graphsage", 2),       // repeat = 2 layers of A_mean, a dense classifier
        ("graphsage_max", 2),   // repeat = 2 layers of max over A's neighbours
        ("sage_pna", 2),        // repeat = 2 layers of mean, max, min and std over A's neighbours
        ("gat", 2), // attention layer + attention classifier (α is not a hop of its own)
        ("gin", 2), // repeat = 2 of x + A·x
        ("mixhop", 4), // repeat = 2 of max power A² each
        ("mlp", 0), // no adjacency: no walks
        ("sgc", 2), // repeat = 2 of Â·x, no parameter
        ("tagcn", 6), // two layers of up to Â³·x each (a power counts its k)
        ("appnp", 10), // an MLP, then K = 10 steps of Â (the teleport term reads H)
        ("jknet", 3), // 3 GCN layers; the readout concatenates, adds no hop
        ("gcnii", 64), // 64 layers of Â·x (the initial residual h1 adds none)
        ("gcn_batchnorm", 2), // GCN's two hops; batchnorm is row-wise in evaluation
        ("gcnii_pairnorm", 16), // 16 layers of Â·x; PairNorm's statistics are no hop
        ("rgcn", 2), // two R-GCN layers: Σ_r A_mean[r] (on this store the one relation)
        ("rgat", 2), // two RGAT layers: Σ_r gat(A[r], …) @ z (α is not a hop of its own)
        ("gae", 2), // link: Â·ReLU(Â·X·W0)·W1, the decoder reads z only
        ("graphsage_link", 3), // link: 2 SAGE layers and a SAGE [output]
        ("rgcn_link", 2), // link: an R-GCN layer and an R-GCN [output]
    ];
    let dir_plans = concat!(env!("CARGO_MANIFEST_DIR"), "/plans");
    let mut names: Vec<String> = std::fs::read_dir(dir_plans)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter_map(|f| f.strip_suffix(".toml").map(str::to_string))
        // The `[embedding]` family is no GNN: tests/embedding.rs covers it.
        .filter(|n| {
            !matches!(
                saintflow::plan::AnyPlan::load(
                    std::path::Path::new(&format!("{dir_plans}/{n}.toml")),
                    &[] as &[&str]
                ),
                Ok(saintflow::plan::AnyPlan::Embedding(_))
            )
        })
        .collect();
    names.sort();
    let mut listed: Vec<&str> = shipped.iter().map(|s| s.0).collect();
    listed.sort();
    assert_eq!(names, listed, "every shipped plan has its L here");
    for (name, l) in shipped {
        let p = Plan::load(format!("{dir_plans}/{name}.toml")).unwrap();
        assert_eq!(hops(&p), l, "{name}");
    }
    // `repeat` counts each copy; the output layer's adjacency counts too.
    let text = |repeat: usize, out: &str| {
        format!(
            "name = \"t\"\n[dims]\nhidden = 8\n[sampler]\nkind = \"full\"\n\
             [[layer]]\nrepeat = {repeat}\nparams = {{ W = [\"in\", \"hidden\"] }}\n\
             out = \"relu(A_sym @ x @ W)\"\n\
             [output]\nparams = {{ W_out = [\"in\", \"classes\"] }}\nout = \"{out}\"\n\
             [optimizer]\nkind = \"adam\"\nlr = 0.01\n[[phase]]\nepochs = 1\n"
        )
    };
    for repeat in 1..=3 {
        let p = Plan::parse(&text(repeat, "x @ W_out"), "t.toml").unwrap();
        assert_eq!(hops(&p), repeat);
        let p = Plan::parse(&text(repeat, "A_mean @ A_mean @ x @ W_out"), "t.toml").unwrap();
        assert_eq!(hops(&p), repeat + 2);
    }
}

/// The command: `--plan` sets L (0 for an MLP, said on stderr) and conflicts with `--layers`.
#[test]
fn partition_command_takes_l_from_a_plan() {
    let dir = tempfile::tempdir().unwrap();
    let input = kron(dir.path());
    let plans = concat!(env!("CARGO_MANIFEST_DIR"), "/plans");
    let run = |plan: &str, extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_saintflow"))
            .arg("partition")
            .arg(&input)
            .args(["-k", "2", "--json", "--force", "-o"])
            .arg(dir.path().join("parts"))
            .arg("--plan")
            .arg(format!("{plans}/{plan}.toml"))
            .args(extra)
            .output()
            .unwrap()
    };
    for (plan, l) in [("gcn", 2), ("mixhop", 4), ("mlp", 0)] {
        let o = run(plan, &[]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r: PartitionReport = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r.layers, l, "{plan}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.contains("augmentation off"), l == 0, "{err}");
        if l == 0 {
            assert!(r.parts.iter().all(|p| p.replicas == 0 && p.walks == 0));
        }
    }
    let o = run("gcn", &["--layers", "3"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot be used with"));
}

/// The best makespan of `load` on `ranks` ranks, by trying every assignment.
fn best_makespan(load: &[u64], ranks: usize) -> u64 {
    let mut best = u64::MAX;
    let mut a = vec![0usize; load.len()];
    loop {
        let mut t = vec![0u64; ranks];
        for (p, &r) in a.iter().enumerate() {
            t[r] += load[p];
        }
        best = best.min(*t.iter().max().unwrap());
        // The next assignment in base `ranks`.
        let mut i = 0;
        while i < a.len() && a[i] + 1 == ranks {
            a[i] = 0;
            i += 1;
        }
        if i == a.len() {
            return best;
        }
        a[i] += 1;
    }
}

#[test]
fn issue_17_greedy_assignment_is_within_grahams_bound_of_the_best() {
    for case in 0..300u64 {
        let k = 2 + (hash3(case, 1, 0) % 7) as usize;
        let ranks = 1 + (hash3(case, 2, 0) % k as u64) as usize;
        let load: Vec<u64> = (0..k)
            .map(|p| 1 + (unit_f64(hash3(case, 3, p as u64)) * 100.0) as u64)
            .collect();
        let a = saintflow::dist::partition::assign_parts(&load, ranks);
        // Every part to exactly one rank, every rank at least one part.
        let mut seen: Vec<usize> = a.iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..k).collect::<Vec<_>>(), "{load:?} on {ranks}");
        assert!(a.iter().all(|parts| !parts.is_empty()), "{a:?}");
        let makespan = a
            .iter()
            .map(|parts| parts.iter().map(|&p| load[p]).sum::<u64>())
            .max()
            .unwrap();
        let opt = best_makespan(&load, ranks);
        // Longest-processing-time first is within (4/3 − 1/(3P)) of the optimum (Graham).
        let bound = opt as f64 * (4.0 / 3.0 - 1.0 / (3.0 * ranks as f64));
        assert!(
            makespan as f64 <= bound + 1e-9,
            "{load:?} on {ranks}: {makespan} vs best {opt}"
        );
        if ranks == k {
            assert!(a.iter().enumerate().all(|(r, parts)| parts == &[r]));
        }
    }
}

#[test]
fn issue_17_fewer_ranks_than_parts_get_the_union_of_their_parts() {
    let dir = tempfile::tempdir().unwrap();
    let input = kron(dir.path());
    let out = dir.path().join("ranks");
    let spec = PartitionSpec {
        ranks: Some(2),
        partition: PartitionOptions {
            k: 5,
            epsilon: 0.03,
            seed: 4,
        },
        augment: AugmentOptions {
            layers: 2,
            alpha: 0.05,
            ..Default::default()
        },
        ..PartitionSpec::default()
    };
    let r = partition_store(&input, &out, &spec, false, &Progress::hidden()).unwrap();
    assert_eq!((r.k, r.ranks.len()), (5, 2));
    let back = saintflow::dist::partition::read_report(&out).unwrap();
    assert_eq!(back, r);
    let full = GraphStore::open(&input).unwrap();
    // Each part's home part, from the part reports' stores and the global map of each rank.
    for rk in &r.ranks {
        assert_eq!(rk.store, format!("rank-{}.sf", rk.rank));
        let path = out.join(&rk.store);
        let store = GraphStore::open(&path).unwrap();
        check(&store).unwrap();
        let map = read_part_map(&path).unwrap();
        let mut own = 0;
        let mut reps = 0;
        for l in 0..map.global.len() {
            let home = map.home[l] as usize;
            assert_eq!(map.replica[l], !rk.parts.contains(&home));
            if map.replica[l] {
                reps += 1;
                assert_eq!(store.role(l as u32), Role::None);
            } else {
                own += 1;
                assert_eq!(store.role(l as u32), full.role(map.global[l]));
            }
        }
        // All own nodes of its parts, and the replicas its parts chose that are not its own.
        let want_own: usize = rk.parts.iter().map(|&p| r.parts[p].own).sum();
        assert_eq!((own, reps), (want_own, rk.replicas));
        assert_eq!(own, rk.own);
        assert!(rk.replicas <= rk.parts.iter().map(|&p| r.parts[p].replicas).sum());
        for &p in &rk.parts {
            assert_eq!(r.parts[p].store, rk.store);
        }
    }
    let loads: Vec<u64> = r.ranks.iter().map(|rk| rk.load).collect();
    let want = saintflow::dist::partition::assign_parts(
        &r.parts
            .iter()
            .map(|p| (p.own + p.replicas) as u64)
            .collect::<Vec<_>>(),
        2,
    );
    assert_eq!(
        r.ranks
            .iter()
            .map(|rk| rk.parts.clone())
            .collect::<Vec<_>>(),
        want
    );
    assert_eq!(
        loads.iter().sum::<u64>(),
        r.parts
            .iter()
            .map(|p| (p.own + p.replicas) as u64)
            .sum::<u64>()
    );
    // More ranks than parts is refused.
    let spec6 = PartitionSpec {
        ranks: Some(6),
        ..spec
    };
    let e = common_err(partition_store(
        &input,
        &dir.path().join("six"),
        &spec6,
        false,
        &Progress::hidden(),
    ));
    assert!(e.contains("6 ranks for 5 parts"), "{e}");
}

fn common_err<T>(r: Result<T, saintflow::dist::partition::PartitionError>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

/// Issue 28's messages: `partition` takes `--output` (as every command spells it) and
/// `--parts`, and still the old `--out` and `--k`; all four give the same partition.
#[test]
fn partition_takes_output_and_parts_as_every_command_spells_them() {
    let dir = tempfile::tempdir().unwrap();
    let input = kron(dir.path());
    let run = |args: &[&str], out: &str| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_saintflow"))
            .arg("partition")
            .arg(&input)
            .args(args)
            .arg(dir.path().join(out))
            .args(["--json", "--layers", "1"])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let r: PartitionReport = serde_json::from_slice(&o.stdout).unwrap();
        r.parts
            .iter()
            .map(|p| (p.own, p.replicas))
            .collect::<Vec<_>>()
    };
    let a = run(&["--parts", "2", "--output"], "a");
    let b = run(&["--k", "2", "--out"], "b");
    let c = run(&["-k", "2", "-o"], "c");
    assert_eq!(a.len(), 2);
    assert_eq!(a, b);
    assert_eq!(a, c);
}

/// Issue 28, item 8: `partition.json` records each rank store's identity and the source's;
/// a distributed run refuses a rank store of another partition, and an evaluation graph
/// that is not the partitioned store (here: the same graph with another split).
#[test]
fn rank_stores_and_the_evaluation_graph_are_the_partitions_own() {
    use saintflow::dist::partition::{check_rank_store, check_source, identity_text};
    let dir = tempfile::tempdir().unwrap();
    let input = kron(dir.path());
    let spec = |k| PartitionSpec {
        ranks: Some(2),
        partition: PartitionOptions {
            k,
            ..Default::default()
        },
        augment: AugmentOptions::default(),
        ..PartitionSpec::default()
    };
    let p = Progress::hidden();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let ra = partition_store(&input, &a, &spec(2), false, &p).unwrap();
    let rb = partition_store(&input, &b, &spec(4), false, &p).unwrap();
    let source = GraphStore::open(&input).unwrap();
    assert_eq!(ra.source_identity, Some(identity_text(&source)));
    let a0 = GraphStore::open(a.join(&ra.ranks[0].store)).unwrap();
    let a1 = GraphStore::open(a.join(&ra.ranks[1].store)).unwrap();
    let b0 = GraphStore::open(b.join(&rb.ranks[0].store)).unwrap();
    check_rank_store(&ra, &a, 0, &a0).unwrap();
    check_rank_store(&ra, &a, 1, &a1).unwrap();
    let e = check_rank_store(&ra, &a, 0, &a1).unwrap_err().to_string();
    assert!(e.contains("rank 0's store is not the one"), "{e}");
    let e = check_rank_store(&ra, &a, 0, &b0).unwrap_err().to_string();
    assert!(e.contains("another partition"), "{e}");
    check_source(&ra, &a, &source).unwrap();
    // The same graph with another split.
    let other = kron_split(dir.path(), "other.sf", [0.3, 0.3, 0.4]);
    let other = GraphStore::open(&other).unwrap();
    let e = check_source(&ra, &a, &other).unwrap_err().to_string();
    assert!(
        e.contains("not the store the parts") && e.contains("split"),
        "{e}"
    );
    // A partition.json from before identities: nothing to compare, accepted.
    let mut old = ra.clone();
    old.source_identity = None;
    old.ranks.iter_mut().for_each(|r| r.identity = None);
    check_rank_store(&old, &a, 0, &b0).unwrap();
    check_source(&old, &a, &other).unwrap();
}

/// Found by the `partition` fuzz target: with a huge ε refinement emptied parts, and the
/// greedy assignment gave a rank only empty parts, so `partition.json` listed a rank with
/// no part and could not be read back. Now every part keeps a node and every rank a part;
/// an absurd walk length is refused before any walk.
#[test]
fn huge_epsilon_keeps_every_part_and_rank_nonempty_and_absurd_walks_are_refused() {
    use saintflow::dist::partition::read_report;
    let tmp = tempfile::tempdir().unwrap();
    let src = kron(tmp.path());
    let n = GraphStore::open(&src).unwrap().n_nodes();
    let spec = |k: usize, ranks: usize, epsilon: f64, layers: usize| PartitionSpec {
        partition: PartitionOptions {
            k,
            epsilon,
            seed: 3,
        },
        augment: AugmentOptions {
            layers,
            ..AugmentOptions::default()
        },
        ranks: Some(ranks),
        ..PartitionSpec::default()
    };
    let out = tmp.path().join("p");
    let r = partition_store(
        &src,
        &out,
        &spec(64, 30, 1e300, 2),
        false,
        &Progress::hidden(),
    )
    .unwrap();
    assert!(r.parts.iter().all(|p| p.own > 0), "an empty part");
    let read = read_report(&out).unwrap();
    assert_eq!(read.ranks.len(), 30);
    assert!(read.ranks.iter().all(|r| !r.parts.is_empty() && r.own > 0));
    assert_eq!(read.ranks.iter().map(|r| r.own).sum::<usize>(), n);
    let err = partition_store(
        &src,
        &tmp.path().join("q"),
        &spec(4, 4, 0.03, 48_573),
        false,
        &Progress::hidden(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("L = 48573 (--layers)"), "{err}");
    assert!(!tmp.path().join("q").exists());
}

/// Issue 56 item 5: the streaming first level's balance rule holds exactly (every part
/// non-empty and at most max(⌊(1+ε)N/k⌋, ⌈N/k⌉) nodes) and its tracked cut is the cut, on
/// random and structured graphs.
#[test]
fn streaming_balance_rule_holds_exactly() {
    let graphs = [
        ("grid 40x50", grid(40, 50)),
        ("planted 4x300", planted(4, 300, 10, 2, 1).0),
        ("sparse random", planted(1, 3000, 2, 0, 5).0),
        ("dense random", planted(1, 500, 40, 0, 6).0),
        (
            "with isolated nodes",
            graph(1000, &[(0, 1), (1, 2), (5, 6), (7, 999)]),
        ),
    ];
    for (name, g) in &graphs {
        let n_edges = g.adj.len() as u64 / 2;
        for k in [1, 2, 3, 4, 8, 13] {
            for epsilon in [0.0, 0.03, 0.1, 1.0] {
                let o = PartitionOptions {
                    k,
                    epsilon,
                    seed: 7,
                };
                let s = partition_streaming(g, &o, 4, &Progress::hidden()).unwrap();
                let p = &s.partition;
                let n = g.n() as u64;
                let bound = (((1.0 + epsilon) * n as f64 / k as f64).floor() as u64)
                    .max(n.div_ceil(k as u64));
                assert_eq!(p.max_weight, bound);
                let mut sizes = vec![0u64; k];
                for &x in &p.part {
                    sizes[x as usize] += 1;
                }
                assert!(
                    sizes.iter().all(|&s| s >= 1 && s <= bound),
                    "{name} k={k} ε={epsilon}: sizes {sizes:?}, bound {bound}"
                );
                let (inside, cut) = cut_of(g, &p.part);
                assert_eq!(inside + cut, n_edges);
                assert_eq!(cut, p.cut, "{name} k={k} ε={epsilon}: tracked cut");
                assert_eq!(s.pass_cuts.last(), Some(&p.cut));
            }
        }
    }
}

/// Issue 56 item 5: on a graph of k planted communities (ids interleaved, so id order
/// gives no hint) the streaming partitioner finds most of them, and its cut is far below a
/// random assignment's.
#[test]
fn streaming_finds_planted_communities() {
    for (k, seed) in [(2, 1), (4, 2), (8, 3)] {
        let (g, truth) = planted(k, 500, 12, 1, seed);
        let (_, planted_cut) = cut_of(&g, &truth);
        let random: Vec<u32> = (0..g.n() as u64)
            .map(|v| (hash3(9, 1, v) % k as u64) as u32)
            .collect();
        let (_, random_cut) = cut_of(&g, &random);
        let o = PartitionOptions {
            k,
            epsilon: 0.03,
            seed: 0,
        };
        let s = partition_streaming(&g, &o, 4, &Progress::hidden()).unwrap();
        let p = &s.partition;
        assert!(
            3 * p.cut < random_cut,
            "k={k}: cut {} vs random {random_cut} (planted {planted_cut})",
            p.cut
        );
        // A community is found when one part holds ≥ 80% of it, that part the majority
        // of no other found community.
        let mut found = 0;
        let mut taken = vec![false; k];
        for b in 0..k as u32 {
            let mut in_part = vec![0usize; k];
            for v in (0..g.n()).filter(|&v| truth[v] == b) {
                in_part[p.part[v] as usize] += 1;
            }
            let (best, &most) = in_part.iter().enumerate().max_by_key(|x| x.1).unwrap();
            if 5 * most >= 4 * 500 && !std::mem::replace(&mut taken[best], true) {
                found += 1;
            }
        }
        assert!(
            found + 1 >= k && found >= 2,
            "k={k}: {found} communities found (cut {}, planted {planted_cut}, passes {:?})",
            p.cut,
            s.pass_cuts
        );
    }
}

/// Issue 56 item 5: the streaming partition, its augmentation and its part stores are the
/// same whatever the thread count.
#[test]
fn streaming_partition_is_the_same_for_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let input = kron(dir.path());
    let spec = PartitionSpec {
        partition: PartitionOptions {
            k: 4,
            epsilon: 0.03,
            seed: 5,
        },
        method: Method::Streaming,
        ..PartitionSpec::default()
    };
    let run = |threads: usize| {
        let out = dir.path().join(format!("t{threads}"));
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let r = pool
            .install(|| partition_store(&input, &out, &spec, false, &Progress::hidden()))
            .unwrap();
        let maps: Vec<_> = r
            .parts
            .iter()
            .map(|p| read_part_map(&out.join(&p.store)).unwrap())
            .collect();
        (read_assignment(&out).unwrap(), r, maps)
    };
    let (a1, r1, m1) = run(1);
    for threads in [2, 5] {
        let (a, r, m) = run(threads);
        assert_eq!(a, a1, "{threads} threads: assignment");
        assert_eq!(m, m1, "{threads} threads: part maps");
        assert_eq!((r.edge_cut, &r.pass_cuts), (r1.edge_cut, &r1.pass_cuts));
        let ids = |r: &PartitionReport| {
            r.ranks
                .iter()
                .map(|x| x.identity.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&r), ids(&r1), "{threads} threads: store identities");
    }
    assert_eq!(r1.method, "streaming");
    assert_eq!(r1.levels, 0);
    assert_eq!(r1.pass_cuts[0], r1.initial_cut);
}

/// Issue 56 item 5 on the command line: `--method` names a typo's nearest method,
/// `--method auto` says what it chose and why, and `--assignment-only` writes
/// `partition.json` and `assignment.txt` but no part store (a directory training refuses).
#[test]
fn partition_command_method_and_assignment_only() {
    let dir = tempfile::tempdir().unwrap();
    let input = kron(dir.path());
    let cmd = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_saintflow"))
            .arg("partition")
            .arg(&input)
            .args(["-k", "3", "--layers", "1"])
            .args(args)
            .output()
            .unwrap()
    };
    let typo = cmd(&["--method", "streamin", "-o"]);
    let err = String::from_utf8_lossy(&typo.stderr);
    assert!(!typo.status.success());
    assert!(
        err.contains("`streamin`") && err.contains("did you mean `streaming`"),
        "{err}"
    );
    let out = dir.path().join("a");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_saintflow"))
        .arg("partition")
        .arg(&input)
        .args(["-k", "3", "--assignment-only", "-o"])
        .arg(&out)
        .env("SAINTFLOW_MEMORY_LIMIT", "1K")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        text.contains("first level: streaming (auto:") && text.contains("exceeds"),
        "{text}"
    );
    assert!(text.contains("no part stores"), "{text}");
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["assignment.txt", "partition.json"]);
    let r: PartitionReport =
        serde_json::from_slice(&std::fs::read(out.join(PARTITION_JSON)).unwrap()).unwrap();
    assert!(r.assignment_only && r.ranks.is_empty());
    let a = read_assignment(&out).unwrap();
    for p in &r.parts {
        assert_eq!(a.iter().filter(|&&x| x as usize == p.part).count(), p.own);
    }
    let e = saintflow::dist::partition::read_report(&out)
        .unwrap_err()
        .to_string();
    assert!(e.contains("--assignment-only"), "{e}");
}
