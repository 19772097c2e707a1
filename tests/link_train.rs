//! Issue 52: link plans train. The scored targets leave their own step's message passing
//! (on a store, through the training source), the decoder outside the IR scores as the
//! step does, target exclusion measurably changes what a model learns about an edge that
//! is the only path between two communities, a link plan on a store without a split is
//! refused, and GAE on Cora reaches the paper's figures.

mod common;

use std::path::{Path, PathBuf};

use saintflow::exec::{run, Interpreter};
use saintflow::infer::link::{representations_within, PairScorer, Representations};
use saintflow::infer::FullGraph;
use saintflow::ir::{GraphSource, Params};
use saintflow::op::{MemorySource, Registry};
use saintflow::plan::{LowerEnv, Plan};
use saintflow::progress::Progress;
use saintflow::store::import::arrays::{import_arrays_with, ArrayGraph, Edges};
use saintflow::store::import::TrainGraphMode;
use saintflow::store::link::split::{split_edges, SplitEdgesSpec};
use saintflow::store::GraphStore;
use saintflow::train::TrainOptions;

fn plan_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("plans")
        .join(format!("{name}.toml"))
}

/// The step's loss equals the BCE / softmax of [`PairScorer`]'s scores of the step's pairs
/// on the step's node representations: the evaluation's decoder is the training one.
#[test]
fn the_evaluation_decoder_scores_as_the_training_step_does() {
    let reg = Registry::with_builtins();
    for name in ["gae", "graphsage_link", "rgcn_link"] {
        let text = std::fs::read_to_string(plan_file(name)).unwrap();
        let over: Vec<&str> = vec!["dims.hidden=8", "task.decoder_hidden=8"];
        let over = if name == "graphsage_link" {
            over
        } else if name == "gae" {
            vec!["dims.hidden=8"]
        } else {
            vec![over[0]]
        };
        let plan = Plan::parse_with_overrides(&text, name, &over).unwrap();
        let task = plan.task.link().unwrap().clone();
        let src = MemorySource::random(30, 4, 5, 3, false, 9).with_link(task.sampling);
        let lowered = plan.lower(&LowerEnv::of(&src, &reg)).unwrap();
        let mut params = Params::init(&lowered.params, 4);
        if let Some(r) = params.get_mut("decoder.r") {
            r.data
                .iter_mut()
                .enumerate()
                .for_each(|(i, v)| *v = 0.5 + i as f32 * 0.1);
        }
        let vals = run(
            &lowered.graph,
            &[lowered.loss, lowered.logits],
            Some(&src),
            &params,
            3,
            0,
            false,
        )
        .unwrap();
        let loss = vals.get(lowered.loss).unwrap().as_scalar().unwrap();
        let z = vals
            .get(lowered.logits)
            .unwrap()
            .as_dense()
            .unwrap()
            .clone();
        let sub = src.sample(3).unwrap();
        let b = sub.link.as_ref().unwrap();
        assert!(b.positives > 0);
        let scorer = PairScorer::new(&z, task.decoder, &params).unwrap();
        let s: Vec<f64> = (0..b.len())
            .map(|q| scorer.score(b.src[q], b.dst[q]).unwrap())
            .collect();
        let want: f64 = match task.loss {
            saintflow::op::builtin::LinkLossKind::Bce => (0..b.len())
                .map(|q| {
                    let y = if b.is_positive(q) { 1.0 } else { 0.0 };
                    let sp = s[q].max(0.0) + (-s[q].abs()).exp().ln_1p();
                    f64::from(b.weights[q]) * (sp - y * s[q])
                })
                .sum(),
            saintflow::op::builtin::LinkLossKind::Softmax => (0..b.positives)
                .map(|i| {
                    let all: Vec<f64> = std::iter::once(s[i])
                        .chain((0..b.k).map(|j| s[b.positives + i * b.k + j]))
                        .collect();
                    let m = all.iter().cloned().fold(f64::MIN, f64::max);
                    let lse = m + all.iter().map(|x| (x - m).exp()).sum::<f64>().ln();
                    f64::from(b.weights[i]) * (lse - s[i])
                })
                .sum(),
        };
        assert!(
            (loss - want).abs() <= 1e-4 * want.abs().max(1.0),
            "{name}: step loss {loss}, decoder outside the IR {want}"
        );
    }
}

/// Two communities of `half` nodes (random edges inside each) joined by the one edge
/// (0, half); random features that say nothing of the community.
fn two_communities(dir: &Path, half: usize, seed: u64) -> PathBuf {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut src, mut dst) = (Vec::new(), Vec::new());
    for c in 0..2 {
        let base = (c * half) as i64;
        for u in 0..half as i64 {
            // A ring keeps each community connected, plus random chords.
            src.push(base + u);
            dst.push(base + (u + 1) % half as i64);
            for _ in 0..2 {
                let v = (next() % half as u64) as i64;
                if v != u {
                    src.push(base + u);
                    dst.push(base + v);
                }
            }
        }
    }
    src.push(0);
    dst.push(half as i64);
    let f = 16;
    let feats: Vec<f32> = (0..2 * half * f)
        .map(|_| (next() % 2001) as f32 / 1000.0 - 1.0)
        .collect();
    let out = dir.join(format!("two-{seed}.sf"));
    import_arrays_with(
        &ArrayGraph {
            n_nodes: Some(2 * half as u64),
            edges: Edges::Coo {
                src: &src,
                dst: &dst,
            },
            symmetrize: true,
            features: Some((&feats, f)),
            labels: None,
            roles: None,
            source: "two communities",
            edge_time: None,
        },
        TrainGraphMode::Full,
        &out,
        false,
        &Progress::hidden(),
        None,
    )
    .unwrap();
    out
}

const LEAK_PLAN: &str = r#"
[dims]
hidden = 32
[sampler]
kind = "full"
graph = "full"
[[layer]]
params = { W0 = ["in", "hidden"] }
out = "relu(A_sym @ x @ W0)"
[output]
params = { W1 = ["in", "hidden"] }
out = "A_sym @ x @ W1"
[task]
kind = "link"
decoder = "dot"
targets = 0.5
negatives = 1
metric = "auc"
[optimizer]
kind = "adam"
lr = 0.01
[[phase]]
epochs = 150
[eval]
every = 50
"#;

/// σ(score) of the bridge (0, half) under the trained model, on the whole stored graph
/// (where the bridge is an edge, as it is for evaluation).
fn bridge_probability(store: &GraphStore, exclude: bool, seed: u64, half: u32) -> f64 {
    let over = format!("task.exclude_targets={exclude}");
    let plan = Plan::parse_with_overrides(LEAK_PLAN, "leak.toml", &[over.as_str()]).unwrap();
    let out = TrainOptions::new(&plan, store)
        .runner(&Interpreter)
        .seed(seed)
        .progress(Progress::hidden())
        .train()
        .unwrap();
    let reg = Registry::with_builtins();
    let lowered = saintflow::compile::lower_for(&plan, store, &reg).unwrap();
    let graph = FullGraph::new(store, &lowered, std::num::NonZeroUsize::new(1).unwrap()).unwrap();
    let z = graph.logits(&Interpreter, &out.params).unwrap();
    // The out-of-core path (z written to a scratch file and mapped) holds the same values.
    let mapped = representations_within(&graph, &Interpreter, &out.params, 0).unwrap();
    assert!(matches!(mapped, Representations::Mapped(_)));
    assert_eq!(mapped.values(), &z.data[..]);
    assert_eq!(mapped.cols(), z.cols);
    let scorer = PairScorer::new(&z, plan.task.link().unwrap().decoder, &out.params).unwrap();
    let s = scorer.score(0, half).unwrap();
    1.0 / (1.0 + (-s).exp())
}

/// The acceptance's leakage test: with exclusion off the model learns that an edge's own
/// presence in message passing makes it likely (its endpoints mix each other's features),
/// and scores the bridge between two communities — the only path between them — higher
/// than the model trained with its targets taken out of their steps' message passing. One
/// edge among ~120 is a noisy probe: measured over 5 seeds, the gap is 0.15 on average
/// (one seed −0.01); the test asks 4 of 5 seeds and a mean above 0.05 (identical runs,
/// which a no-op exclusion gives, have a gap of exactly 0).
#[test]
fn target_exclusion_changes_what_the_model_learns_about_a_bridge() {
    let tmp = tempfile::tempdir().unwrap();
    let half = 20u32;
    let mut gaps = Vec::new();
    for seed in [1u64, 2, 3, 4, 5] {
        let input = two_communities(tmp.path(), half as usize, seed);
        let inp = GraphStore::open(&input).unwrap();
        // The bridge must stay in the graph: the first split seed that keeps it.
        let store = (0..20u64)
            .find_map(|k| {
                let out = tmp.path().join(format!("split-{seed}-{k}.sf"));
                let spec = SplitEdgesSpec {
                    val: 0.05,
                    test: 0.05,
                    negatives: 5,
                    seed: seed * 1000 + k,
                    allow_isolated: false,
                    by_time: false,
                };
                split_edges(&inp, &out, &spec, false, saintflow::store::check).unwrap();
                let store = GraphStore::open(&out).unwrap();
                store.full().neighbors(0).contains(&half).then_some(store)
            })
            .expect("a split that keeps the bridge");
        let off = bridge_probability(&store, false, seed, half);
        let on = bridge_probability(&store, true, seed, half);
        gaps.push((off, on));
    }
    let mean_gap = gaps.iter().map(|(a, b)| a - b).sum::<f64>() / gaps.len() as f64;
    eprintln!("σ(bridge) with exclusion off vs on, per seed: {gaps:?}");
    assert!(
        gaps.iter().filter(|(off, on)| off > on).count() >= 4 && mean_gap > 0.05,
        "σ(bridge) with exclusion off vs on: {gaps:?}"
    );
}

#[test]
fn a_link_plan_on_a_store_without_a_split_is_refused_naming_split_edges() {
    let tmp = tempfile::tempdir().unwrap();
    let store = common::small_store(tmp.path(), "plain.sf", 7, 1);
    let store = GraphStore::open(store).unwrap();
    let plan = Plan::load(plan_file("gae")).unwrap();
    let e = TrainOptions::new(&plan, &store)
        .runner(&Interpreter)
        .epochs(1)
        .progress(Progress::hidden())
        .train()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("plain.sf") && e.contains("link split") && e.contains("saintflow split-edges"),
        "{e}"
    );
}

#[test]
fn link_task_keys_are_checked_where_they_are_written() {
    let base = std::fs::read_to_string(plan_file("gae")).unwrap();
    for (set, want) in [
        ("task.decoder=\"dott\"", "unknown decoder `dott`"),
        ("task.targets=1.5", "expected a number in (0, 1]"),
        (
            "task.exclude_targets=true",
            "exclude_targets with targets = 1",
        ),
        (
            "task.decoder_hidden=8",
            "decoder_hidden sizes the mlp decoder",
        ),
        ("task.metric=\"hits@x\"", "expected hits@K"),
        (
            "task.negative_sampler=\"unifrom\"",
            "did you mean `uniform`",
        ),
        ("task.loss=\"nll\"", "unknown link loss `nll`"),
        ("task.negative_ends=\"bth\"", "did you mean `both`"),
    ] {
        let e = Plan::parse_with_overrides(&base, "gae.toml", &[set])
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{set}: {e}");
    }
    let gcn = std::fs::read_to_string(plan_file("gcn")).unwrap();
    let node = format!("{gcn}\n[task]\nkind = \"node\"\nnegatives = 3\n");
    let e = Plan::parse(&node, "n.toml").unwrap_err().to_string();
    assert!(e.contains("negatives belongs to link prediction"), "{e}");
    let node = format!("{gcn}\n[task]\nkind = \"node\"\nnegative_ends = \"both\"\n");
    let e = Plan::parse(&node, "n.toml").unwrap_err().to_string();
    assert!(
        e.contains("negative_ends belongs to link prediction"),
        "{e}"
    );
    let both =
        Plan::parse_with_overrides(&base, "gae.toml", &["task.negative_ends=\"both\""]).unwrap();
    assert_eq!(
        both.task.link().unwrap().sampling.ends,
        saintflow::sample::NegativeEnds::Both
    );
    let with_loss = format!("{base}\n[loss]\nkind = \"auto\"\n");
    let reg = Registry::with_builtins();
    let src = MemorySource::random(10, 3, 4, 2, false, 1);
    let e = Plan::parse(&with_loss, "gae.toml")
        .unwrap()
        .lower(&LowerEnv::of(&src, &reg))
        .unwrap_err()
        .to_string();
    assert!(e.contains("a link plan's loss is [task] loss"), "{e}");
}

/// On a store, the training source draws targets out of each step's structure: no step's
/// message passing holds its own target edges (either direction), and every target is an
/// edge of the stored graph.
#[test]
fn no_step_passes_messages_over_its_own_targets_on_a_store() {
    let tmp = tempfile::tempdir().unwrap();
    let input = common::small_store(tmp.path(), "in.sf", 8, 2);
    let inp = GraphStore::open(&input).unwrap();
    let out = tmp.path().join("split.sf");
    split_edges(
        &inp,
        &out,
        &SplitEdgesSpec {
            negatives: 5,
            ..SplitEdgesSpec::default()
        },
        false,
        saintflow::store::check,
    )
    .unwrap();
    let store = GraphStore::open(&out).unwrap();
    let plan = Plan::load(plan_file("graphsage_link")).unwrap();
    let task = plan.task.link().unwrap();
    let sampler = saintflow::compile::build_sampler(&store, &plan.sampler).unwrap();
    let src = saintflow::op::StoreSource::new(
        &store,
        sampler,
        5,
        16,
        None,
        saintflow::store::Role::Train,
    )
    .link(Some(task.sampling));
    let full = store.full();
    let mut targets = 0;
    for step in 0..10 {
        let sub = src.sample(step).unwrap();
        let b = sub.link.as_ref().unwrap();
        for t in 0..b.positives {
            let (i, j) = (b.src[t] as usize, b.dst[t] as usize);
            assert!(!sub.neighbors(i).contains(&(j as u32)), "step {step}");
            assert!(!sub.neighbors(j).contains(&(i as u32)), "step {step}");
            assert!(full.neighbors(sub.nodes[i]).contains(&sub.nodes[j]));
            targets += 1;
        }
    }
    assert!(targets > 100, "{targets} targets in 10 steps");
}

/// The acceptance's Cora figure (medians of seeds 1–5; BENCHMARKS.md has the release
/// build's runs with every epoch evaluated): GAE's plan on GAE's 85/5/10 split reaches the paper's test AUC 0.91 and AP
/// 0.92, and reports MRR against 1,000 stored negatives beside them.
#[test]
#[ignore = "reads ../shared/data/cora (CI runs it: -- --ignored shared_data_)"]
fn shared_data_cora_gae_reaches_the_papers_auc_and_ap() {
    let cora = common::require_shared_dataset("cora");
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    common::saintflow_ok(
        &[
            "import",
            "graphsaint",
            cora.to_str().unwrap(),
            "-o",
            "cora.sf",
        ],
        d,
    );
    common::saintflow_ok(
        &[
            "split-edges",
            "cora.sf",
            "-o",
            "link.sf",
            "--val",
            "0.05",
            "--test",
            "0.1",
            "--negatives",
            "1000",
            "--seed",
            "1",
        ],
        d,
    );
    let store = GraphStore::open(d.join("link.sf")).unwrap();
    let plan = Plan::load_with_overrides(plan_file("gae"), &["eval.every=20"]).unwrap();
    let mut runs: Vec<saintflow::metrics::LinkMetrics> = (1..=5)
        .map(|seed| {
            let out = TrainOptions::new(&plan, &store)
                .seed(seed)
                .progress(Progress::hidden())
                .train()
                .unwrap();
            out.test.unwrap().link.unwrap()
        })
        .collect();
    let median = |f: &dyn Fn(&saintflow::metrics::LinkMetrics) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[2]
    };
    let (auc, ap, mrr) = (
        median(&|m| m.auc.unwrap()),
        median(&|m| m.ap.unwrap()),
        median(&|m| m.mrr.unwrap()),
    );
    assert!(
        auc >= 0.91 && ap >= 0.92,
        "GAE on Cora, medians of 5 seeds: test AUC {auc:.4}, AP {ap:.4} (the paper: 0.910, 0.920)"
    );
    runs.retain(|m| (m.negatives, m.positives) == (1000, 527));
    assert_eq!(
        runs.len(),
        5,
        "every figure against 1,000 negatives of 527 positives"
    );
    assert!(mrr > 0.05 && mrr < 1.0, "MRR {mrr}");
}

/// The acceptance's OGB layouts, written by `scripts/ogbl_fixture.py` with torch: each
/// imports with its own split and negatives and a link plan trains on it, the best epoch
/// picked by the figure the dataset's split can give (collab: pool Hits@50 against its
/// negative pairs, no tails; citation2: MRR against its tails); a metric the split cannot
/// give is refused before training.
#[test]
fn ogb_link_layouts_import_and_train() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ogbl");
    for (name, metric, refused) in [
        ("collab", "pool_hits@50", "mrr"),
        ("citation2", "mrr", "auc"),
    ] {
        let out = format!("{name}.sf");
        common::saintflow_ok(
            &[
                "import",
                "ogb-link",
                data.join(name).to_str().unwrap(),
                "-o",
                &out,
            ],
            d,
        );
        let store = GraphStore::open(d.join(&out)).unwrap();
        let set = format!("task.metric=\"{metric}\"");
        let plan = Plan::load_with_overrides(
            plan_file("gae"),
            &["dims.hidden=8", "dims.embed=4", set.as_str()],
        )
        .unwrap();
        let run = TrainOptions::new(&plan, &store)
            .epochs(3)
            .progress(Progress::hidden())
            .train()
            .unwrap();
        let val = run.val.unwrap().link.unwrap();
        let got = plan.task.link().unwrap().metric.value(&val);
        assert!(
            got.is_some_and(|v| (0.0..=1.0).contains(&v)),
            "{name}: {val:?}"
        );
        let test = run.test.unwrap().link.unwrap();
        assert!(test.positives > 0, "{name}: {test:?}");
        let bad = format!("task.metric=\"{refused}\"");
        let plan = Plan::load_with_overrides(plan_file("gae"), &[bad.as_str()]).unwrap();
        let e = TrainOptions::new(&plan, &store)
            .epochs(1)
            .progress(Progress::hidden())
            .train()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!(
                "metric = \"{refused}\" needs the validation set's"
            )),
            "{name}: {e}"
        );
    }
}

/// The MLP decoder scores a source against its tails in one product; the figures equal
/// the per-pair form's up to f32 rounding (another summation order), for every decoder.
#[test]
fn batched_tail_scores_equal_the_pair_by_pair_scores() {
    use saintflow::link::ScorePairs;
    let reg = Registry::with_builtins();
    for name in ["gae", "graphsage_link", "rgcn_link"] {
        let text = std::fs::read_to_string(plan_file(name)).unwrap();
        let plan = Plan::parse_with_overrides(&text, name, &["dims.hidden=24"]).unwrap();
        let task = plan.task.link().unwrap().clone();
        let src = MemorySource::random(40, 4, 5, 3, false, 2).with_link(task.sampling);
        let lowered = plan.lower(&LowerEnv::of(&src, &reg)).unwrap();
        let params = Params::init(&lowered.params, 8);
        let vals = run(
            &lowered.graph,
            &[lowered.logits],
            Some(&src),
            &params,
            0,
            0,
            false,
        )
        .unwrap();
        let z = vals
            .get(lowered.logits)
            .unwrap()
            .as_dense()
            .unwrap()
            .clone();
        let scorer = PairScorer::new(&z, task.decoder, &params).unwrap();
        let tails: Vec<u32> = (0..40).rev().collect();
        for u in [0u32, 7, 39] {
            let batch = ScorePairs::score_tails(&scorer, u, &tails).unwrap();
            for (&t, &b) in tails.iter().zip(&batch) {
                let one = scorer.score(u, t).unwrap();
                assert!(
                    (one - b).abs() <= 1e-4 * one.abs().max(1.0),
                    "{name}: ({u}, {t}) pair {one}, batched {b}"
                );
            }
        }
        assert!(
            scorer.score(0, 40).is_err(),
            "{name}: an id past z is an error"
        );
    }
}

/// A link plan's step records carry its scored pairs: with `targets = 1` and K = 1 (GAE),
/// every undirected edge of the stored graph once, with its one negative.
#[test]
fn a_link_steps_log_record_counts_its_scored_pairs() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ogbl/citation2");
    common::saintflow_ok(
        &["import", "ogb-link", data.to_str().unwrap(), "-o", "c.sf"],
        d,
    );
    let info = common::saintflow_ok(&["info", "c.sf", "--json"], d);
    let info: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    let undirected = info["edges"]["undirected"].as_u64().unwrap();
    assert!(undirected > 0);
    let gae = plan_file("gae");
    let out = common::saintflow_ok(
        &[
            "train",
            gae.to_str().unwrap(),
            "--graph",
            "c.sf",
            "--epochs",
            "2",
            "--json",
            "--set",
            "dims.hidden=8",
            "--set",
            "dims.embed=4",
            "--set",
            "task.metric=\"mrr\"",
        ],
        d,
    );
    let steps: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["kind"] == "step")
        .collect();
    assert_eq!(steps.len(), 2);
    for s in &steps {
        assert_eq!(s["pairs"].as_u64(), Some(2 * undirected), "{s}");
    }
}
