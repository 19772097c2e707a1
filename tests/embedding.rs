//! Node embedding (issue 16): the partition grid never lets two workers touch the same row
//! in a round (recorded on the real training path); the samplers follow their
//! distributions (chi-square at p = 0.001: departure ∝ degree, node2vec's p/q transitions,
//! negatives ∝ deg^0.75 within a part); a planted-partition graph's embedding classifies
//! far above chance; plan errors name FILE:LINE:COL; the commands end to end.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use saintflow::embedding::eval::{classify, ClassifyOptions, Embedding};
use saintflow::embedding::grid::Touch;
use saintflow::embedding::partition::Parts;
use saintflow::embedding::walk::{emit_pairs, Walker};
use saintflow::embedding::{train, train_touching, EmbedOptions};
use saintflow::plan::embedding::{EmbeddingPlan, WindowWeights};
use saintflow::store::{Csr, GraphStore};

fn plan(text: &str) -> EmbeddingPlan {
    EmbeddingPlan::parse_with_overrides(text, "test.toml", "test", &[]).unwrap()
}

const DEEPWALK: &str =
    "[embedding]\nmodel = \"deepwalk\"\ndim = 16\nepochs = 20\nwalk_length = 10\nwindow = 3\n";

/// A small graph with varied degrees: a hub (0), a triangle, a path and a pendant.
fn small_graph() -> (Vec<u64>, Vec<u32>) {
    let edges = [
        (0, 1),
        (0, 2),
        (0, 3),
        (0, 4),
        (0, 5),
        (1, 2),
        (2, 3),
        (3, 4),
        (5, 6),
        (6, 7),
        (1, 7),
        (4, 5),
    ];
    common::symmetric_csr(8, &edges)
}

/// (round, i, j, context matrix) → rows touched.
type Touched = HashMap<(usize, usize, usize, bool), HashSet<u32>>;

#[derive(Default)]
struct Recorder {
    rows: Mutex<Touched>,
}

impl Touch for Recorder {
    fn touch(&self, round: usize, i: usize, j: usize, context: bool, row: u32) {
        self.rows
            .lock()
            .unwrap()
            .entry((round, i, j, context))
            .or_default()
            .insert(row);
    }
}

#[test]
fn blocks_of_a_round_touch_disjoint_rows() {
    let dir = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(dir.path(), 9)).unwrap();
    // (workers, grid parts): one part per worker, and more parts than workers (a round's
    // blocks then share the workers).
    for (threads, n) in [(2, 2), (3, 3), (2, 5)] {
        let rec = Recorder::default();
        let opts = EmbedOptions {
            threads,
            scratch_dir: dir.path().to_path_buf(),
            memory_bytes: 1 << 20,
            epochs: Some(100.0),
            ..EmbedOptions::default()
        };
        let text = format!("{DEEPWALK}grid_parts = {n}\n");
        let out = train_touching(&plan(&text), &store, &opts, &rec).unwrap();
        assert_eq!((out.workers, out.parts), (threads, n));
        assert!(out.episodes > 1, "several pools: {}", out.episodes);
        let parts = Parts::new(store.full(), n, 0.75);
        let rows = rec.rows.into_inner().unwrap();
        for r in 0..n {
            let blocks: Vec<(usize, usize)> = (0..n).map(|i| (i, (i + r) % n)).collect();
            for ctx in [false, true] {
                let mut seen: HashMap<u32, (usize, usize)> = HashMap::new();
                for &(i, j) in &blocks {
                    let set = rows
                        .get(&(r, i, j, ctx))
                        .unwrap_or_else(|| panic!("round {r}: block ({i}, {j}) trained nothing"));
                    for &row in set {
                        assert_eq!(
                            parts.part(row),
                            if ctx { j } else { i },
                            "round {r}: block ({i}, {j}) touched row {row} of another part"
                        );
                        if let Some(other) = seen.insert(row, (i, j)) {
                            panic!("round {r}: row {row} (context {ctx}) touched by blocks {other:?} and ({i}, {j})");
                        }
                    }
                }
            }
        }
        // Only the round's own blocks ran in it.
        for &(r, i, j, _) in rows.keys() {
            assert_eq!(j, (i + r) % n, "block ({i}, {j}) ran in round {r}");
        }
    }
}

#[test]
fn grid_parts_fit_blocks_in_l2_as_a_multiple_of_the_workers() {
    use saintflow::embedding::{grid_parts, BLOCK_CACHE_BYTES};
    // Brute force: the smallest multiple of the workers, up to 8 per worker, whose blocks'
    // rows (2·N·d·4/n bytes) fit; else 8 per worker; one per worker when the matrices
    // take more than half the memory.
    for workers in 1..=4 {
        for nodes in [1, 1000, 10_312, 100_000, 4 << 20] {
            for dim in [1, 32, 128] {
                let bytes = 2 * nodes * dim * 4;
                let want = (1..=8)
                    .map(|m| m * workers)
                    .find(|&n| bytes <= n * BLOCK_CACHE_BYTES)
                    .unwrap_or(8 * workers);
                for memory in [None, Some(1u64 << 40), Some(2 * bytes as u64)] {
                    assert_eq!(
                        grid_parts(workers, nodes, dim, memory),
                        want,
                        "{workers} {nodes} {dim} {memory:?}"
                    );
                }
                let tight = Some(2 * bytes as u64 - 2);
                assert_eq!(
                    grid_parts(workers, nodes, dim, tight),
                    workers,
                    "{workers} {nodes} {dim} out of core"
                );
            }
        }
    }
}

#[test]
fn departures_follow_the_degree() {
    let (off, idx) = small_graph();
    let g = Csr::new(&off, &idx).unwrap();
    let w = Walker::with_pq(g, false, 1.0, 1.0);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    let draws = 200_000u64;
    let mut count = vec![0u64; 8];
    for _ in 0..draws {
        count[w.departure(&mut rng).unwrap() as usize] += 1;
    }
    let total: usize = (0..8).map(|v| g.degree(v)).sum();
    let expected: Vec<f64> = (0..8)
        .map(|v| draws as f64 * g.degree(v) as f64 / total as f64)
        .collect();
    common::assert_chi_square(&count, &expected, 7, "departures");
}

/// Pairs of walks whose nodes are their positions, so v − u is the pair's distance k:
/// uniform weights emit every pair once, linear ones each k-apart pair with probability
/// (s − k + 1)/s (chi-square over k), and both keep the pseudo-shuffled order (k
/// outermost, then position, then walk).
#[test]
fn window_pairs_follow_their_distance_weights() {
    let (len, s, walks_n) = (41usize, 6usize, 64usize);
    let walks: Vec<Vec<u32>> = (0..walks_n).map(|_| (0..len as u32).collect()).collect();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    for weights in [WindowWeights::Uniform, WindowWeights::Linear] {
        let mut count = vec![0u64; s + 1];
        let mut last = (0usize, 0u32);
        for _ in 0..200 {
            emit_pairs(&walks, s, weights, &mut rng, |u, v| {
                let k = (v - u) as usize;
                assert!((1..=s).contains(&k), "{weights:?}: pair ({u}, {v})");
                assert!((k, u) >= last, "{weights:?}: ({k}, {u}) after {last:?}");
                last = (k, u);
                count[k] += 1;
                true
            });
            last = (0, 0);
        }
        let expected: Vec<f64> = (0..=s)
            .map(|k| match (k, weights) {
                (0, _) => 0.0,
                (k, WindowWeights::Uniform) => (200 * walks_n * (len - k)) as f64,
                (k, WindowWeights::Linear) => {
                    (200 * walks_n * (len - k)) as f64 * (s - k + 1) as f64 / s as f64
                }
            })
            .collect();
        if weights == WindowWeights::Uniform {
            let exact: Vec<u64> = expected.iter().map(|&e| e as u64).collect();
            assert_eq!(count, exact, "uniform: every pair once");
        } else {
            common::assert_chi_square(&count, &expected, s - 1, "linear window");
            assert_eq!(count[1] as f64, expected[1], "pairs 1 apart are all kept");
        }
    }
}

#[test]
fn node2vec_steps_follow_p_and_q() {
    let (off, idx) = small_graph();
    let g = Csr::new(&off, &idx).unwrap();
    // From t = 1 to v = 0: neighbours of 0 are 1 (= t: 1/p), 2 (edge to t: 1), 3, 4, 5 (1/q).
    for (p, q) in [(0.25, 4.0), (4.0, 0.25), (1.0, 1.0)] {
        let w = Walker::with_pq(g, true, p, q);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
        let draws = 100_000u64;
        let mut count = vec![0u64; 8];
        for _ in 0..draws {
            count[w.step(Some(1), 0, &mut rng).unwrap().unwrap() as usize] += 1;
        }
        let alpha = |x: u32| {
            if x == 1 {
                1.0 / p
            } else if x == 2 {
                1.0
            } else {
                1.0 / q
            }
        };
        let z: f64 = g.neighbors(0).iter().map(|&x| alpha(x)).sum();
        let mut expected = vec![0.0; 8];
        for &x in g.neighbors(0) {
            expected[x as usize] = draws as f64 * alpha(x) / z;
        }
        assert_eq!(count[6] + count[7] + count[0], 0, "only neighbours of 0");
        common::assert_chi_square(&count, &expected, 4, &format!("p {p} q {q}"));
    }
}

#[test]
fn negatives_follow_degree_to_the_three_quarters_within_their_part() {
    let (off, idx) = small_graph();
    let g = Csr::new(&off, &idx).unwrap();
    for n in [1, 2, 3] {
        let parts = Parts::new(g, n, 0.75);
        for j in 0..n {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(j as u64 + 1);
            let draws = 100_000u64;
            let mut count = vec![0u64; 8];
            for _ in 0..draws {
                count[parts.negative(j, &mut rng).unwrap() as usize] += 1;
            }
            let members = &parts.members[j];
            let z: f64 = members
                .iter()
                .map(|&v| (g.degree(v) as f64).powf(0.75))
                .sum();
            let mut expected = vec![0.0; 8];
            for &v in members {
                expected[v as usize] = draws as f64 * (g.degree(v) as f64).powf(0.75) / z;
            }
            assert!(
                count
                    .iter()
                    .enumerate()
                    .all(|(v, &c)| c == 0 || parts.part(v as u32) == j),
                "part {j} of {n}: {count:?}"
            );
            if members.len() > 1 {
                let what = format!("part {j} of {n}");
                common::assert_chi_square(&count, &expected, members.len() - 1, &what);
            }
        }
    }
}

#[test]
fn zigzag_parts_are_balanced_by_degree() {
    let dir = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(dir.path(), 10)).unwrap();
    let g = store.full();
    let parts = Parts::new(g, 4, 0.75);
    let sums: Vec<usize> = parts
        .members
        .iter()
        .map(|m| m.iter().map(|&v| g.degree(v)).sum())
        .collect();
    let (lo, hi) = (*sums.iter().min().unwrap(), *sums.iter().max().unwrap());
    // Dealt in zig-zag, each part's degree sum is within the largest degree of the others.
    let dmax = (0..g.n_nodes() as u32).map(|v| g.degree(v)).max().unwrap();
    assert!(
        hi - lo <= dmax,
        "degree sums {sums:?}, largest degree {dmax}"
    );
    let sizes: Vec<usize> = parts.members.iter().map(Vec::len).collect();
    assert!(
        sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1,
        "{sizes:?}"
    );
}

#[test]
fn a_planted_partition_embeds_into_classes_far_above_chance() {
    let dir = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(dir.path(), 10)).unwrap();
    let out = dir.path().join("emb.npy");
    let p = plan(
        "[embedding]\nmodel = \"deepwalk\"\ndim = 32\nepochs = 100\nwalk_length = 20\nwindow = 5\n",
    );
    let opts = EmbedOptions {
        threads: 2,
        output: Some(out.clone()),
        scratch_dir: dir.path().to_path_buf(),
        ..EmbedOptions::default()
    };
    train(&p, &store, &opts).unwrap();
    let emb = Embedding::load(&out).unwrap().normalized();
    let copts = ClassifyOptions {
        ratios: vec![0.5],
        repeats: 2,
        ..ClassifyOptions::default()
    };
    let rows = classify(&emb, &store.labels(), store.n_classes(), &copts).unwrap();
    // 4 balanced classes: chance is 0.25. Homophily 0.9 puts 90 % of a node's edges in its class.
    assert!(rows[0].micro_f1 > 0.6, "{rows:?}");
    // The same classifier on random rows stays near chance: the signal is the embedding's.
    let noise = Embedding {
        data: (0..emb.data.len())
            .map(|k| ((k * 2654435761) % 1000) as f32 / 1000.0 - 0.5)
            .collect(),
        rows: emb.rows,
        dim: emb.dim,
    };
    let chance = classify(&noise, &store.labels(), store.n_classes(), &copts).unwrap();
    assert!(chance[0].micro_f1 < 0.4, "{chance:?}");
}

#[test]
fn plan_errors_name_file_line_and_column() {
    let cases = [
        (
            "[embedding]\nmodel = \"deepwalc\"\ndim = 8\nepochs = 1\n",
            "test.toml:2:9: unknown embedding model `deepwalc`, did you mean `deepwalk`?",
        ),
        (
            "[embedding]\nmodel = \"deepwalk\"\ndim = 8\nepochs = 1\np = 0.5\n",
            "test.toml:5:5: embedding.p is node2vec's",
        ),
        (
            "[embedding]\nmodel = \"line\"\ndim = 0\nepochs = 1\n",
            "test.toml:3:7: embedding.dim = 0",
        ),
        (
            "[embedding]\nmodel = \"deepwalk\"\ndim = 8\nepochs = 1\nwindow = 50\n",
            "test.toml:5:10: embedding.window = 50 is longer",
        ),
        (
            "[embedding]\nmodel = \"deepwalk\"\ndim = 8\nepochs = 1\nwalk_lenght = 5\n",
            "test.toml:5:1: unknown key `walk_lenght`, did you mean `walk_length`?",
        ),
        (
            "[embedding]\nmodel = \"deepwalk\"\ndim = 8\nepochs = 1\nwindow_weights = \"linaer\"\n",
            "test.toml:5:18: unknown embedding.window_weights `linaer`, did you mean `linear`?",
        ),
    ];
    for (text, want) in cases {
        let got = EmbeddingPlan::parse_with_overrides(text, "test.toml", "t", &[])
            .unwrap_err()
            .to_string();
        assert!(
            got.starts_with(want),
            "{got:?} does not start with {want:?}"
        );
    }
    let got =
        EmbeddingPlan::parse_with_overrides(DEEPWALK, "test.toml", "t", &["embedding.dim=-3"])
            .unwrap_err()
            .to_string();
    assert!(got.starts_with("override `embedding.dim=-3`:1:"), "{got}");
    let p = EmbeddingPlan::parse_with_overrides(DEEPWALK, "test.toml", "t", &["embedding.dim=24"])
        .unwrap();
    assert_eq!(p.dim, 24);
}

#[test]
fn shipped_embedding_plans_parse() {
    for name in ["deepwalk", "line", "node2vec"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("plans")
            .join(format!("{name}.toml"));
        assert!(saintflow::plan::embedding::is_embedding_plan(&path));
        let p = EmbeddingPlan::load_with_overrides(&path, &[]).unwrap();
        assert_eq!(p.model.name(), name);
    }
    assert!(!saintflow::plan::embedding::is_embedding_plan(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/gcn.toml")
    ));
}

#[test]
fn commands_train_embed_and_evaluate() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::planted(dir.path(), 8);
    let plan_path = dir.path().join("dw.toml");
    std::fs::write(&plan_path, DEEPWALK).unwrap();
    let (p, s) = (plan_path.to_str().unwrap(), store.to_str().unwrap());
    let out = common::saintflow_ok(
        &["train", p, "--graph", s, "--threads", "2", "--json", "-q"],
        dir.path(),
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["samples"].as_u64().unwrap() > 0);
    let out = common::saintflow(
        &["train", p, "--graph", s, "--checkpoint", "ck/"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`--checkpoint` applies to GNN plans"));
    common::saintflow_ok(
        &[
            "embed",
            p,
            "--graph",
            s,
            "-o",
            "out/emb.npy",
            "--holdout",
            "0.1",
            "--epochs",
            "200",
            "--threads",
            "2",
            "-q",
        ],
        dir.path(),
    );
    let emb = Embedding::load(&dir.path().join("out/emb.npy")).unwrap();
    assert_eq!((emb.rows, emb.dim), (256, 16));
    let out = common::saintflow_ok(
        &[
            "eval-embedding",
            "out/emb.npy",
            "--graph",
            s,
            "--ratios",
            "0.5",
            "--repeats",
            "2",
            "--json",
            "--plot",
            "f1.svg",
        ],
        dir.path(),
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["classification"][0]["ratio"], 0.5);
    assert!(dir.path().join("f1.svg").is_file());
    let out = common::saintflow_ok(
        &[
            "eval-embedding",
            "out/emb.npy",
            "--graph",
            s,
            "--holdout",
            "0.1",
            "--json",
        ],
        dir.path(),
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let auc = v["link_prediction"]["auc"].as_f64().unwrap();
    // Held out of the walks (the same hash in both commands, seed 1 by default), yet
    // scored well above non-edges: the embedding generalises to unseen edges.
    assert!(
        auc > 0.65,
        "held-out edges score above non-edges: AUC {auc}"
    );
    // Another seed picks other edges, mostly trained ones: a higher AUC, so the two
    // commands really agree on which edges were held out.
    let out = common::saintflow(
        &[
            "eval-embedding",
            "out/emb.npy",
            "--graph",
            s,
            "--holdout",
            "0.1",
            "--seed",
            "2",
            "--json",
        ],
        dir.path(),
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let seen = v["link_prediction"]["auc"].as_f64().unwrap();
    assert!(seen > auc, "trained edges {seen} vs held-out {auc}");
    eprintln!("link prediction AUC: held out {auc:.3}, trained {seen:.3}");
    // A wrong embedding file: named, exit 1, no panic.
    std::fs::write(dir.path().join("bad.npy"), b"not npy").unwrap();
    let out = common::saintflow(&["eval-embedding", "bad.npy", "--graph", s], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.npy"));
    // A truncated `.npy` (the header promises more rows than follow): named, exit 1.
    let whole = std::fs::read(dir.path().join("out/emb.npy")).unwrap();
    std::fs::write(dir.path().join("short.npy"), &whole[..whole.len() - 64]).unwrap();
    let out = common::saintflow(&["eval-embedding", "short.npy", "--graph", s], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("short.npy"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A plan error stops `embed` before any output exists.
    std::fs::write(
        &plan_path,
        "[embedding]\nmodel = \"deepwalk\"\ndim = 8\nepochs = -1\n",
    )
    .unwrap();
    let out = common::saintflow(&["embed", p, "--graph", s, "-o", "none.npy"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("dw.toml:4:10"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!dir.path().join("none.npy").exists());
}
