//! Node embedding (issue 16): the partition grid never lets two workers touch the same row
//! in a round (recorded on the real training path); the samplers follow their
//! distributions (chi-square at p = 0.001: departure ∝ degree, node2vec's p/q transitions,
//! negatives ∝ deg^0.75 within a part); a planted-partition graph's embedding classifies
//! far above chance; plan errors name FILE:LINE:COL; the commands end to end.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use rand_core::{RngCore, SeedableRng};
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
            threads: std::num::NonZeroUsize::new(threads),
            scratch_dir: dir.path().to_path_buf(),
            memory_bytes: 1 << 20,
            epochs: Some(100.0),
            ..EmbedOptions::default()
        };
        let text = format!("{DEEPWALK}grid_parts = {n}\n");
        let out = train_touching(&plan(&text), &store, &opts, &rec).unwrap();
        assert_eq!((out.workers, out.parts), (threads, n));
        assert!(out.episodes > 1, "several pools: {}", out.episodes);
        assert_rounds_disjoint(&Parts::new(store.full(), n, 0.75), rec);
    }
}

/// Every round's blocks touched rows of their own parts only (vertex part i, context part
/// j), no row was touched by two blocks of a round, every block trained, and only the
/// round's own blocks ran in it.
fn assert_rounds_disjoint(parts: &Parts, rec: Recorder) {
    let n = parts.n();
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
    for &(r, i, j, _) in rows.keys() {
        assert_eq!(j, (i + r) % n, "block ({i}, {j}) ran in round {r}");
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

/// Embeds the 1024-node planted-partition graph with a small DeepWalk on `device` and
/// scores the rows (Micro-F1 at half the nodes labelled, 2 repeats); also the outcome and
/// the normalised rows.
fn embed_planted(
    device: Device,
) -> (
    f64,
    saintflow::embedding::EmbedOutcome,
    Embedding,
    GraphStore,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(dir.path(), 10)).unwrap();
    let out = dir.path().join("emb.npy");
    let p = plan(
        "[embedding]\nmodel = \"deepwalk\"\ndim = 32\nepochs = 100\nwalk_length = 20\nwindow = 5\n",
    );
    let opts = EmbedOptions {
        threads: std::num::NonZeroUsize::new(2),
        output: Some(out.clone()),
        scratch_dir: dir.path().to_path_buf(),
        device,
        ..EmbedOptions::default()
    };
    let outcome = train(&p, &store, &opts).unwrap();
    let emb = Embedding::load(&out).unwrap().normalized();
    let rows = classify(&emb, &store.labels(), store.n_classes(), &planted_split()).unwrap();
    (rows[0].micro_f1, outcome, emb, store, dir)
}

/// Half the nodes labelled, 2 repeats.
fn planted_split() -> ClassifyOptions {
    ClassifyOptions {
        ratios: vec![0.5],
        repeats: 2,
        ..ClassifyOptions::default()
    }
}

#[test]
fn a_planted_partition_embeds_into_classes_far_above_chance() {
    let (f1, _, emb, store, _dir) = embed_planted(Device::Cpu);
    // 4 balanced classes: chance is 0.25. Homophily 0.9 puts 90 % of a node's edges in its class.
    assert!(f1 > 0.6, "{f1}");
    // The same classifier on random rows stays near chance: the signal is the embedding's.
    let noise = Embedding {
        data: (0..emb.data.len())
            .map(|k| ((k * 2654435761) % 1000) as f32 / 1000.0 - 0.5)
            .collect(),
        rows: emb.rows,
        dim: emb.dim,
    };
    let chance = classify(&noise, &store.labels(), store.n_classes(), &planted_split()).unwrap();
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
        assert!(matches!(
            saintflow::plan::AnyPlan::load(&path, &[] as &[&str]),
            Ok(saintflow::plan::AnyPlan::Embedding(_))
        ));
        let p = EmbeddingPlan::load_with_overrides(&path, &[]).unwrap();
        assert_eq!(p.model.name(), name);
    }
    assert!(!matches!(
        saintflow::plan::AnyPlan::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/gcn.toml"),
            &[] as &[&str]
        ),
        Ok(saintflow::plan::AnyPlan::Embedding(_))
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

// ---- The GPU path's shared pieces (issue 30), tested without a GPU -------------------------

use saintflow::embedding::device::{reference_pool, DeviceTables};
use saintflow::embedding::grid::Sgd;
use saintflow::embedding::pool::{Pool, Sampler};
use saintflow::embedding::Device;

#[test]
fn device_negatives_follow_degree_to_the_three_quarters_within_their_part() {
    // The counter-based draws the GPU makes (hash of block seed, term, sample) against the
    // part's noise distribution, and as part-local rows.
    let (off, idx) = small_graph();
    let g = Csr::new(&off, &idx).unwrap();
    for n in [1, 2, 3] {
        let parts = Parts::new(g, n, 0.75);
        let tables = DeviceTables::new(&parts);
        for j in 0..n {
            let members = tables.part(&tables.members, j);
            assert_eq!(members, &parts.members[j][..]);
            for (k, &v) in members.iter().enumerate() {
                assert_eq!(tables.local_of[v as usize] as usize, k);
            }
            let draws = 100_000u64;
            let mut count = vec![0u64; members.len()];
            for t in 0..draws {
                let local = tables
                    .negative(j, 7 + j as u64, (t % 3) as u32, t / 3)
                    .unwrap();
                count[local as usize] += 1;
            }
            let z: f64 = members
                .iter()
                .map(|&v| (g.degree(v) as f64).powf(0.75))
                .sum();
            let expected: Vec<f64> = members
                .iter()
                .map(|&v| draws as f64 * (g.degree(v) as f64).powf(0.75) / z)
                .collect();
            if members.len() > 1 {
                let what = format!("device draws, part {j} of {n}");
                common::assert_chi_square(&count, &expected, members.len() - 1, &what);
            }
        }
    }
}

/// A DeepWalk run's pieces on `store` for the GPU tests and the CPU twin: the plan, the
/// parts, the tables and pools of samples.
struct Twin {
    plan: EmbeddingPlan,
    parts: Parts,
    pools: Vec<Pool>,
    sgd: Sgd,
}

impl Twin {
    fn new(store: &GraphStore, dim: usize, n: usize, pools: usize) -> Twin {
        let plan = plan(&format!(
            "[embedding]\nmodel = \"deepwalk\"\ndim = {dim}\nepochs = 10\nwalk_length = 20\nwindow = 5\nnegatives = 2\n"
        ));
        let g = store.full();
        let parts = Parts::new(g, n, plan.noise_power);
        let walker = Walker::new(g, &plan);
        let sampler = Sampler::new(&walker, &plan, &parts, 5);
        let cap = 1 << 16;
        let pools = (0..pools)
            .map(|k| {
                let mut p = Pool::default();
                p.fill(&sampler, (k * cap) as u64, cap).unwrap();
                p
            })
            .collect::<Vec<_>>();
        let sgd = Sgd {
            lr: plan.lr,
            negatives: plan.negatives,
            negative_weight: plan.negative_weight,
            total: (pools.len() * cap) as f64,
        };
        Twin {
            plan,
            parts,
            pools,
            sgd,
        }
    }

    /// word2vec's start (vertex rows small and varied, context rows zero).
    fn start(&self, nodes: usize) -> (Vec<f32>, Vec<f32>) {
        let dim = self.plan.dim;
        let v = (0..nodes * dim)
            .map(|k| ((k * 2654435761) % 1000) as f32 / 1000.0 / dim as f32 - 0.5 / dim as f32)
            .collect();
        (v, vec![0.0; nodes * dim])
    }

    /// The CPU kernel over every pool in the GPU's serial order; the mean loss per pool.
    fn reference(&self, (v, c): (&mut [f32], &mut [f32])) -> Vec<f64> {
        let tables = DeviceTables::new(&self.parts);
        let mut done = 0;
        let mut losses = Vec::new();
        for (k, pool) in self.pools.iter().enumerate() {
            let s = reference_pool(
                pool,
                &self.parts,
                &tables,
                (&mut *v, &mut *c),
                self.plan.dim,
                &self.sgd,
                5,
                (k as u64, done),
            );
            assert_eq!(s.samples, pool.len() as u64);
            done += pool.len() as u64;
            losses.push(s.loss_sum / s.loss_count as f64);
        }
        losses
    }
}

#[test]
fn the_cpu_twin_of_the_gpu_trains_a_planted_partition_far_above_chance() {
    // The oracle the GPU is compared with must itself train: its loss falls pool by pool
    // and its rows classify the planted classes.
    let dir = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(dir.path(), 10)).unwrap();
    let twin = Twin::new(&store, 32, 2, 6);
    let (mut v, mut c) = twin.start(store.n_nodes());
    let losses = twin.reference((&mut v, &mut c));
    assert!(
        losses.last().unwrap() < &(0.8 * losses[0]),
        "loss per pool {losses:?}"
    );
    let emb = Embedding {
        data: v,
        rows: store.n_nodes(),
        dim: 32,
    }
    .normalized();
    let copts = ClassifyOptions {
        ratios: vec![0.5],
        repeats: 2,
        ..ClassifyOptions::default()
    };
    let rows = classify(&emb, &store.labels(), store.n_classes(), &copts).unwrap();
    assert!(rows[0].micro_f1 > 0.6, "{rows:?}");
}

#[cfg(not(feature = "cuda"))]
#[test]
fn device_cuda_without_the_feature_says_how_to_build_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(dir.path(), 8)).unwrap();
    let opts = EmbedOptions {
        device: Device::Cuda(0),
        scratch_dir: dir.path().to_path_buf(),
        ..EmbedOptions::default()
    };
    let e = common::err_text(train(&plan(DEEPWALK), &store, &opts));
    assert!(e.contains("--features cuda") && e.contains("cuda:0"), "{e}");
}

#[test]
fn embed_takes_a_device_and_refuses_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let g = common::planted(dir.path(), 8);
    let plans = concat!(env!("CARGO_MANIFEST_DIR"), "/plans/deepwalk.toml");
    let g = g.to_str().unwrap();
    let out = common::saintflow(
        &[
            "embed", plans, "--graph", g, "-o", "e.npy", "--device", "gpu",
        ],
        dir.path(),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("`gpu` is not a device") && err.contains("cuda:K"),
        "{err}"
    );
    if !cfg!(feature = "cuda") {
        let out = common::saintflow(
            &[
                "embed", plans, "--graph", g, "-o", "e.npy", "--device", "cuda",
            ],
            dir.path(),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("--features cuda"), "{err}");
        assert!(!dir.path().join("e.npy").exists());
    }
    // A GNN plan's embedding runs on the CPU: the flag is refused, not ignored.
    let gcn = concat!(env!("CARGO_MANIFEST_DIR"), "/plans/gcn.toml");
    let out = common::saintflow(
        &[
            "embed",
            gcn,
            "--graph",
            g,
            "--checkpoint",
            "ck",
            "-o",
            "e.npy",
            "--device",
            "cuda",
        ],
        dir.path(),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("applies to [embedding] plans"), "{err}");
}

// ---- On a GPU (the `cuda` feature and an NVIDIA GPU) -----------------------------------------

#[cfg(feature = "cuda")]
mod gpu {
    use super::*;
    use saintflow::embedding::cuda::{Gpu, Trainer};
    use saintflow::embedding::grid::NoTouch;

    #[test]
    #[ignore = "needs libnvrtc (no GPU): LD_LIBRARY_PATH=<dir of libnvrtc.so.13> cargo test --features cuda --test embedding -- --ignored gpu::the_kernel"]
    fn the_kernel_compiles_for_every_width() {
        for dim in [1, 16, 32, 100, 128, 512] {
            let ptx = saintflow::embedding::cuda::compile_kernel(dim, (9, 0))
                .unwrap_or_else(|e| panic!("d = {dim}: {e}"));
            assert!(ptx.to_src().contains("sgns_block"), "d = {dim}");
        }
    }

    /// Runs the twin's pools on the GPU, serially (one half-warp) or in parallel; the
    /// trained matrices and the mean loss per pool.
    fn on_gpu(twin: &Twin, nodes: usize, serial: bool) -> (Vec<f32>, Vec<f32>, Vec<f64>) {
        on_gpu_with(twin, nodes, serial, None)
    }

    /// [`on_gpu`] with `blocks` CUDA blocks per launch.
    fn on_gpu_with(
        twin: &Twin,
        nodes: usize,
        serial: bool,
        blocks: Option<u64>,
    ) -> (Vec<f32>, Vec<f32>, Vec<f64>) {
        let gpu = Gpu::open(0).unwrap();
        let tables = DeviceTables::new(&twin.parts);
        let (mut v, mut c) = twin.start(nodes);
        let cap = twin.pools[0].len();
        let mut t = Trainer::new(&gpu, &tables, (twin.plan.dim, cap), twin.sgd, 5, false)
            .unwrap()
            .serial(serial)
            .blocks(blocks);
        let mut done = 0;
        let mut losses = Vec::new();
        for (k, pool) in twin.pools.iter().enumerate() {
            let s = t
                .train_pool(pool, (k as u64, done), (&mut v, &mut c), &NoTouch)
                .unwrap();
            done += pool.len() as u64;
            losses.push(s.loss_sum / s.loss_count as f64);
        }
        t.finish((&mut v, &mut c)).unwrap();
        (v, c, losses)
    }

    /// Largest |a − b| and how many entries differ at all.
    fn diff(a: &[f32], b: &[f32]) -> (f32, usize) {
        let d = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        (
            d,
            a.iter()
                .zip(b)
                .filter(|(x, y)| x.to_bits() != y.to_bits())
                .count(),
        )
    }

    /// The tolerance of the serial GPU run against the CPU kernel: the kernel's products,
    /// sums and dot-product tree are the CPU's (16 lanes, --fmad=false), so only σ's
    /// exponential may round differently (double exp rounded once against libm's expf).
    const TOLERANCE: f32 = 1e-5;

    #[test]
    #[ignore = "needs an NVIDIA GPU, its driver and libnvrtc: cargo test --features cuda --test embedding -- --ignored gpu::"]
    fn one_pool_on_the_gpu_equals_the_cpu_kernel_for_the_same_samples() {
        let dir = tempfile::tempdir().unwrap();
        let store = GraphStore::open(common::planted(dir.path(), 9)).unwrap();
        let nodes = store.n_nodes();
        // d = 32 (two elements per lane), d = 100 (a ragged last lane); one part (rows
        // uploaded once) and three (parts swapped through the host per block).
        let mut failures = Vec::new();
        for (dim, n) in [(32, 1), (100, 1), (32, 3)] {
            let twin = Twin::new(&store, dim, n, 2);
            let (mut v, mut c) = twin.start(nodes);
            let cpu_loss = twin.reference((&mut v, &mut c));
            let (gv, gc, gpu_loss) = on_gpu(&twin, nodes, true);
            let (dv, nv) = diff(&v, &gv);
            let (dc, nc) = diff(&c, &gc);
            eprintln!(
                "d = {dim}, n = {n}: vertex max |Δ| {dv:e} ({nv} of {} entries differ), context {dc:e} ({nc}); loss CPU {cpu_loss:?} GPU {gpu_loss:?}",
                v.len()
            );
            if dv > TOLERANCE || dc > TOLERANCE {
                failures.push(format!("d = {dim}, n = {n}: max |Δ| {dv} {dc}"));
            }
            if cpu_loss
                .iter()
                .zip(&gpu_loss)
                .any(|(a, b)| (a - b).abs() > 1e-6 * a.abs().max(1.0))
            {
                failures.push(format!(
                    "d = {dim}, n = {n}: loss {cpu_loss:?} {gpu_loss:?}"
                ));
            }
            // Many half-warps at once (Hogwild): not the same bits, the same training. (On
            // this small graph the samples in flight share rows often, so some updates are
            // lost; the default keeps them to a quarter of the rows.)
            let (_, _, par_loss) = on_gpu(&twin, nodes, false);
            let (_, _, one_sm) = on_gpu_with(&twin, nodes, false, Some(1));
            let (_, _, many) = on_gpu_with(&twin, nodes, false, Some(64));
            eprintln!(
                "  parallel: loss {par_loss:?}; 16 in flight on one SM {one_sm:?}; 1024 in flight {many:?}"
            );
            let (a, b) = (cpu_loss.last().unwrap(), par_loss.last().unwrap());
            if (a - b).abs() > 0.25 * a {
                failures.push(format!(
                    "d = {dim}, n = {n}: parallel loss {par_loss:?} against {cpu_loss:?}"
                ));
            }
        }
        assert!(failures.is_empty(), "{failures:#?}");
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU, its driver and libnvrtc: cargo test --features cuda --test embedding -- --ignored gpu::"]
    fn gpu_blocks_of_a_round_touch_disjoint_rows() {
        let dir = tempfile::tempdir().unwrap();
        let store = GraphStore::open(common::planted(dir.path(), 9)).unwrap();
        for n in [2, 3, 5] {
            let rec = Recorder::default();
            let opts = EmbedOptions {
                threads: std::num::NonZeroUsize::new(2),
                scratch_dir: dir.path().to_path_buf(),
                memory_bytes: 1 << 20,
                epochs: Some(100.0),
                device: Device::Cuda(0),
                ..EmbedOptions::default()
            };
            let text = format!("{DEEPWALK}grid_parts = {n}\n");
            let out = train_touching(&plan(&text), &store, &opts, &rec).unwrap();
            assert_eq!(out.parts, n);
            assert!(out.episodes > 1, "several pools: {}", out.episodes);
            assert!(out.device.starts_with("cuda:0"), "{}", out.device);
            assert_rounds_disjoint(&Parts::new(store.full(), n, 0.75), rec);
        }
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU, its driver and libnvrtc: cargo test --features cuda --test embedding -- --ignored gpu::"]
    fn a_planted_partition_embeds_on_the_gpu_into_classes_far_above_chance() {
        let (f1, outcome, ..) = embed_planted(Device::Cuda(0));
        assert!(outcome.gpu_wait_seconds.is_some());
        // 4 classes: chance 0.25. The CPU path's grid has no concurrent writers and passes
        // 0.6 here; on the GPU 256 samples in flight share this graph's 1024 rows and some
        // updates are lost (an H200 measured 0.53), so the bar is twice chance.
        assert!(f1 > 0.45, "{f1}");
    }
}

/// `train_interruptible`: a set flag stops the run after the pool under way, with
/// `Interrupted` and no output published; unset, the run is `train`'s bit for bit.
#[test]
fn an_interrupted_embedding_publishes_nothing() {
    use std::sync::atomic::AtomicBool;
    let dir = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(dir.path(), 9)).unwrap();
    let out = dir.path().join("emb.npy");
    let opts = EmbedOptions {
        threads: std::num::NonZeroUsize::new(1),
        scratch_dir: dir.path().to_path_buf(),
        memory_bytes: 1 << 20,
        epochs: Some(100.0),
        output: Some(out.clone()),
        ..EmbedOptions::default()
    };
    let p = plan(DEEPWALK);
    let e = saintflow::embedding::train_interruptible(&p, &store, &opts, &AtomicBool::new(true))
        .unwrap_err();
    assert!(
        matches!(
            e,
            saintflow::embedding::EmbedError::Interrupted { episode: 1, episodes } if episodes > 1
        ),
        "{e}"
    );
    assert!(!out.exists());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().contains("emb"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    saintflow::embedding::train_interruptible(&p, &store, &opts, &AtomicBool::new(false)).unwrap();
    let a = std::fs::read(&out).unwrap();
    train(&p, &store, &opts).unwrap();
    assert_eq!(a, std::fs::read(&out).unwrap());
}

/// Issue 25, item 5: `--split store` fits on the store's labelled training nodes and scores
/// on its labelled test nodes. A one-hot embedding of the true class scores 1; noise scores
/// near chance; the node counts are the store's.
#[test]
fn eval_on_the_stores_split() {
    use saintflow::embedding::eval::{score, Scores, Scoring};
    use saintflow::store::Role;
    let dir = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(dir.path(), 9)).unwrap();
    let (n, c) = (store.n_nodes(), store.n_classes());
    let labels = store.labels();
    let mut onehot = vec![0f32; n * c];
    for v in 0..n {
        for k in 0..c {
            if labels.has_class(v as u32, k as u32) {
                onehot[v * c + k] = 1.0;
            }
        }
    }
    let split = Scoring::Split {
        opts: ClassifyOptions::default(),
        normalize: true,
    };
    let Scores::Split(s) = score(
        Embedding {
            data: onehot,
            rows: n,
            dim: c,
        },
        "onehot",
        &store,
        &split,
    )
    .unwrap() else {
        panic!("a split score")
    };
    let labelled = |r| {
        store
            .nodes_with_role(r)
            .into_iter()
            .filter(|&v| labels.is_labelled(v))
            .count()
    };
    assert_eq!(
        (s.train_nodes, s.test_nodes),
        (labelled(Role::Train), labelled(Role::Test))
    );
    assert_eq!(s.accuracy, 1.0);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let noise: Vec<f32> = (0..n * 8)
        .map(|_| (rand_core::RngCore::next_u32(&mut rng) as f32 / u32::MAX as f32) - 0.5)
        .collect();
    let Scores::Split(s) = score(
        Embedding {
            data: noise,
            rows: n,
            dim: 8,
        },
        "noise",
        &store,
        &split,
    )
    .unwrap() else {
        panic!("a split score")
    };
    assert!(s.accuracy < 0.5, "noise scored {}", s.accuracy);
}

/// A random undirected graph of `n` nodes with a hub (node 0, joined to a third of the
/// others) and sorted rows, as a store holds them.
fn random_graph(n: u32, seed: u64) -> (Vec<u64>, Vec<u32>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut rows: Vec<Vec<u32>> = vec![Vec::new(); n as usize];
    let add = |a: u32, b: u32, rows: &mut Vec<Vec<u32>>| {
        if a != b && !rows[a as usize].contains(&b) {
            rows[a as usize].push(b);
            rows[b as usize].push(a);
        }
    };
    for v in 1..n {
        add(v, (rng.next_u64() % u64::from(v)) as u32, &mut rows);
        if v % 3 == 0 {
            add(0, v, &mut rows);
        }
        for _ in 0..rng.next_u64() % 4 {
            add(v, (rng.next_u64() % u64::from(n)) as u32, &mut rows);
        }
    }
    let mut off = vec![0u64];
    let mut idx = Vec::new();
    for mut r in rows {
        r.sort_unstable();
        idx.extend(r);
        off.push(idx.len() as u64);
    }
    (off, idx)
}

/// `Walker::walks` (DeepWalk's walks side by side from random numbers drawn ahead) gives
/// the walks of `Walker::walk` one at a time and leaves the generator where they leave it;
/// node2vec and held-out edges (one walk at a time inside `walks`) likewise.
#[test]
fn walks_side_by_side_are_the_walks_one_at_a_time() {
    use saintflow::embedding::walk::WalkScratch;
    let (off, idx) = random_graph(300, 5);
    let g = Csr::new(&off, &idx).unwrap();
    let walkers = [
        ("uniform", Walker::with_pq(g, false, 1.0, 1.0)),
        ("node2vec", Walker::with_pq(g, true, 0.25, 4.0)),
        (
            "held out",
            Walker::with_pq(g, false, 1.0, 1.0).hold_out(0.3, 7),
        ),
    ];
    let mut scratch = WalkScratch::default();
    for (name, w) in &walkers {
        for batch in [1, 3, 64] {
            for steps in [0, 1, 2, 80] {
                for seed in [1, 2] {
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
                    let mut want = vec![Vec::new(); batch];
                    for walk in &mut want {
                        w.walk(steps, &mut rng, walk).unwrap();
                    }
                    let after = rng.next_u64();
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
                    let mut got = vec![vec![9u32; 5]; batch];
                    w.walks(steps, &mut rng, &mut got, &mut scratch).unwrap();
                    let at = format!("{name}: {batch} walks of {steps} steps, seed {seed}");
                    assert_eq!(got, want, "{at}");
                    assert_eq!(rng.next_u64(), after, "{at}: the generator's state");
                    assert!(got
                        .iter()
                        .all(|walk| walk.len() == steps + 1 || *name == "held out"));
                }
            }
        }
    }
}
