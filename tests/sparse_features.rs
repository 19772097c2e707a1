//! The products by sparse features (`planner::SparseFeatures`, `op::builtin::FeatureProduct`):
//! every shipped plan's step with them equals its step with the dense products (the sums'
//! order differs, so to a relative 1e-5), on the interpreter and on 3 workers; the pass
//! rewrites exactly the features read only by products (or through one dropout, whose mask
//! the products apply: the same step, dropout on), and nothing above its density
//! bound or without a density; a store's compressed rows equal its dense rows on both of
//! `StoreSource`'s paths; a store's measured density is its count of nonzeros.

mod common;

use std::path::Path;

use saintflow::exec::StepInput;
use saintflow::exec::{run, Executor, StepRunner, StepValues};
use saintflow::ir::{Bindings, Graph, NodeId, Params, Value};
use saintflow::op::builtin::FeatureProduct;
use saintflow::op::{GraphSource, MemorySource, Registry, StoreSource};
use saintflow::plan::{LowerEnv, Plan};
use saintflow::planner::{plan, PlanOptions, SPARSE_FEATURES_MAX_DENSITY};
use saintflow::sample::{FrontierParams, FrontierSampler};
use saintflow::store::{GraphStore, Role};

/// `base` with all but about one feature in `keep` set to zero (deterministic).
fn sparsified(mut base: MemorySource, keep: usize) -> MemorySource {
    for (i, x) in base.features.iter_mut().enumerate() {
        if i % keep != 3 {
            *x = 0.0;
        }
    }
    base
}

fn density(src: &MemorySource) -> f64 {
    src.features.iter().filter(|&&x| x != 0.0).count() as f64 / src.features.len() as f64
}

/// GCN without its dropouts (which read the features: `gcn.toml` keeps its dense gather).
const GCN_NO_DROPOUT: &str = common::FULL_GCN;

/// The plan at `path` lowered for `src` and planned with `feature_density`.
fn planned(
    path: &Path,
    src: &MemorySource,
    reg: &Registry,
    feature_density: Option<f64>,
) -> (Graph, Vec<NodeId>, Params) {
    let text = std::fs::read_to_string(path).unwrap();
    planned_text(&text, path, src, reg, feature_density)
}

/// [`planned`] of a plan's text.
fn planned_text(
    text: &str,
    path: &Path,
    src: &MemorySource,
    reg: &Registry,
    feature_density: Option<f64>,
) -> (Graph, Vec<NodeId>, Params) {
    let has_hidden = Plan::parse(text, &path.display().to_string())
        .unwrap()
        .dims
        .contains_key("hidden");
    let overrides: Vec<&str> = if has_hidden {
        vec!["dims.hidden=24"]
    } else {
        vec![]
    };
    let p = Plan::parse_with_overrides(text, &path.display().to_string(), &overrides)
        .unwrap_or_else(|e| panic!("{}", e.render()));
    let lowered = p
        .lower(&LowerEnv::of(src, reg))
        .unwrap_or_else(|e| panic!("{}", e.render()));
    let params = Params::init(&lowered.params, 1);
    let mut g = lowered.graph.clone();
    let sub = src.sample(0).unwrap();
    let mut opts = PlanOptions::new(
        Bindings {
            nodes: sub.n_nodes(),
            entries: sub.n_entries(),
            pairs: sub.link.as_ref().map_or(0, |l| l.len()),
        },
        std::num::NonZeroUsize::new(3).unwrap(),
    );
    opts.cache_bytes = 1 << 20;
    if let Some(d) = feature_density {
        opts = opts.with_feature_density(d);
    }
    plan(&mut g, &opts).unwrap();
    let mut wanted = vec![g.output("loss").unwrap()];
    for (name, _) in &lowered.grads {
        wanted.push(g.output(&format!("grad/{name}")).unwrap());
    }
    (g, wanted, params)
}

fn sparse_products(g: &Graph) -> Vec<FeatureProduct> {
    g.ids()
        .into_iter()
        .filter_map(|id| g.node(id).op.downcast_ref::<FeatureProduct>().copied())
        .collect()
}

fn values(v: &Value) -> Vec<f64> {
    match v {
        Value::Dense(t) => t.data.iter().map(|&x| f64::from(x)).collect(),
        Value::Scalar(s) => vec![*s],
        other => panic!("unexpected wanted value {other:?}"),
    }
}

fn assert_close(got: &StepValues, want: &StepValues, ids: (&[NodeId], &[NodeId]), what: &str) {
    for (k, (&g, &w)) in ids.0.iter().zip(ids.1).enumerate() {
        let (a, b) = (values(got.get(g).unwrap()), values(want.get(w).unwrap()));
        assert_eq!(a.len(), b.len(), "{what}: output {k} sizes");
        let scale = b.iter().fold(0.0f64, |m, x| m.max(x.abs())).max(1e-12);
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert!(
                (x - y).abs() <= 1e-5 * scale,
                "{what}: output {k} element {i}: sparse {x} against dense {y} (scale {scale})"
            );
        }
    }
}

#[test]
fn every_shipped_plan_steps_alike_with_sparse_features_on_the_interpreter_and_the_executor() {
    let reg = Registry::with_builtins();
    let ex = Executor::new(std::num::NonZeroUsize::new(3).unwrap());
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let base = sparsified(MemorySource::random(300, 8, 40, 3, false, 9), 12);
    let rho = density(&base);
    assert!(rho > 0.07 && rho < 0.1, "test features' density {rho}");
    let mut rewritten = Vec::new();
    for path in common::gnn_plan_files() {
        let src = common::source_for_plan(&path, &base);
        let (dense, dense_wanted, params) = planned(&path, &src, &reg, None);
        let (sparse, wanted, _) = planned(&path, &src, &reg, Some(rho));
        assert!(sparse_products(&dense).is_empty());
        let products = sparse_products(&sparse);
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !products.is_empty() {
            // The first layer's X·W and its ∇W, never one without the other.
            assert!(
                products.iter().any(|p| p.transpose) && products.iter().any(|p| !p.transpose),
                "{name}: {products:?}"
            );
            assert!(
                !sparse
                    .ids()
                    .into_iter()
                    .any(|id| sparse.node(id).op.name() == "features"),
                "{name}: the dense gather is still planned"
            );
            rewritten.push(name.clone());
        }
        let want =
            one.install(|| run(&dense, &dense_wanted, Some(&src), &params, 2, 7, true).unwrap());
        let got = one.install(|| run(&sparse, &wanted, Some(&src), &params, 2, 7, true).unwrap());
        assert_close(
            &got,
            &want,
            (&wanted, &dense_wanted),
            &format!("{name} interpreter"),
        );
        let got = ex
            .run_step(
                StepInput::new(&sparse, &wanted, &params)
                    .source(&src)
                    .step(2, 7)
                    .training(true),
            )
            .unwrap();
        assert_close(
            &got,
            &want,
            (&wanted, &dense_wanted),
            &format!("{name} executor"),
        );
    }
    // GAE's first layer reads the features through products only, GCN's through its input
    // dropout (whose mask the products then apply: the step above ran with dropout on).
    for must in ["gae.toml", "rgcn_link.toml", "gcn.toml"] {
        assert!(
            rewritten.iter().any(|r| r == must),
            "{must} not rewritten; rewritten: {rewritten:?}"
        );
    }
}

#[test]
fn the_pass_keeps_dense_products_above_its_bound_and_where_features_are_read_otherwise() {
    let reg = Registry::with_builtins();
    let base = MemorySource::random(120, 6, 40, 3, false, 2);
    let here = Path::new("gcn_no_dropout.toml");
    let above = SPARSE_FEATURES_MAX_DENSITY * 1.01;
    let (g, _, _) = planned_text(GCN_NO_DROPOUT, here, &base, &reg, Some(above));
    assert!(
        sparse_products(&g).is_empty(),
        "rewritten at density {above}"
    );
    let (g, wanted, params) = planned_text(
        GCN_NO_DROPOUT,
        here,
        &base,
        &reg,
        Some(SPARSE_FEATURES_MAX_DENSITY),
    );
    assert_eq!(sparse_products(&g).len(), 2);
    // Dense features (this source's are N(0, 1)) through the sparse products: the same step.
    let (dense, dense_wanted, _) = planned_text(GCN_NO_DROPOUT, here, &base, &reg, None);
    let want = run(&dense, &dense_wanted, Some(&base), &params, 0, 3, true).unwrap();
    let got = run(&g, &wanted, Some(&base), &params, 0, 3, true).unwrap();
    assert_close(
        &got,
        &want,
        (&wanted, &dense_wanted),
        "gcn_no_dropout, dense features",
    );
    // GCN reads the features through its input dropout: the products take its mask, and
    // the dropout goes with the gather.
    let gcn = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/gcn.toml");
    let (g, _, _) = planned(&gcn, &base, &reg, Some(0.01));
    let products = sparse_products(&g);
    assert_eq!(products.len(), 2, "{products:?}");
    assert!(products
        .iter()
        .all(|p| p.dropout.is_some_and(|(p, _)| p == 0.5)));
    assert!(
        !g.ids()
            .into_iter()
            .any(|id| matches!(g.node(id).op.name(), "features" | "dropout")
                && g.node(id).label == "x"),
        "the input dropout or the gather is still planned"
    );
    // Features concatenated as they are (read by a concat, not a product): the gather stays.
    let concat = GCN_NO_DROPOUT
        .replace(
            r#"out = "relu(A_sym @ x @ W0)""#,
            r#"out = "relu(concat(x, A_sym @ x) @ W0)""#,
        )
        .replace(r#"W0 = ["in", "hidden"]"#, r#"W0 = ["2 * in", "hidden"]"#);
    let (g, _, _) = planned_text(&concat, here, &base, &reg, Some(0.01));
    assert!(sparse_products(&g).is_empty(), "a concatenated x rewritten");
    assert!(
        g.ids()
            .into_iter()
            .any(|id| g.node(id).op.name() == "features"),
        "the gather of a concatenated x went"
    );
}

/// A store of 200 nodes × 30 features of which one in eleven is nonzero.
fn sparse_store(dir: &Path) -> std::path::PathBuf {
    let src = common::graphsaint_dir(&dir.join("raw"), 200);
    let feats: Vec<f32> = (0..200 * 30)
        .map(|i| {
            if i % 11 == 4 {
                (i % 17) as f32 - 8.5
            } else {
                0.0
            }
        })
        .collect();
    common::write_npy_f32(&src.join("feats.npy"), 200, 30, &feats);
    let out = dir.join("s.sf");
    let out_s = out.to_string_lossy().to_string();
    common::saintflow_ok(
        &[
            "import",
            "graphsaint",
            &src.to_string_lossy(),
            "-o",
            &out_s,
            "--quiet",
        ],
        dir,
    );
    out
}

#[test]
fn a_stores_compressed_rows_equal_its_dense_rows_on_both_paths_and_its_density_is_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let store = GraphStore::open(sparse_store(tmp.path())).unwrap();
    let nonzero = store.features().iter().filter(|&&x| x != 0.0).count();
    assert!(nonzero > 0);
    assert_eq!(
        store.feature_density(),
        nonzero as f64 / (200.0 * 30.0),
        "every row of a small store is counted"
    );
    let sampler = || {
        Box::new(
            FrontierSampler::new(
                store.full(),
                FrontierParams {
                    frontier: 10,
                    budget: 60,
                    ..Default::default()
                },
            )
            .unwrap(),
        )
    };
    for whole in [usize::MAX, 0] {
        let src = StoreSource::new(&store, sampler(), 5, 1, None, Role::Train)
            .whole_sparse_features(whole);
        let sub = src.sample(3).unwrap();
        let rows = src.sparse_features(&sub.nodes).unwrap();
        let f = store.n_features();
        let mut dense = vec![0.0f32; sub.nodes.len() * f];
        src.features(&sub.nodes, &mut dense).unwrap();
        for (i, &v) in sub.nodes.iter().enumerate() {
            let (cols, vals) = rows.row(i, v);
            let mut back = vec![0.0f32; f];
            for (&c, &x) in cols.iter().zip(vals) {
                assert_ne!(x, 0.0, "a stored zero");
                back[c as usize] = x;
            }
            assert!(
                cols.windows(2).all(|w| w[0] < w[1]),
                "columns not ascending"
            );
            assert_eq!(
                back,
                dense[i * f..(i + 1) * f],
                "node {v}, whole limit {whole}"
            );
        }
        // An id past the store is an error naming the store, on both paths.
        let err = src.sparse_features(&[0, 200]).unwrap_err().to_string();
        assert!(
            err.contains("out of range") && err.contains("s.sf"),
            "{err}"
        );
    }
}

#[test]
fn a_sparse_store_is_planned_with_the_sparse_products_and_trains() {
    // The command line's path: `explain` and `train` measure the store's density and plan
    // the products by the features sparse; training runs them through the store source.
    let tmp = tempfile::tempdir().unwrap();
    let path = sparse_store(tmp.path());
    let store = GraphStore::open(&path).unwrap();
    assert!(store.feature_density() <= SPARSE_FEATURES_MAX_DENSITY);
    let gcn = tmp.path().join("gcn_no_dropout.toml");
    std::fs::write(&gcn, GCN_NO_DROPOUT).unwrap();
    let gcn = gcn.to_string_lossy().to_string();
    let graph = path.to_string_lossy().to_string();
    let out = common::saintflow_ok(&["explain", &gcn, "--graph", &graph], tmp.path());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("features_spmm[width=30") && text.contains("features_spmm[T, width=30"),
        "{text}"
    );
    assert!(text.contains("sparse features: products 2"), "{text}");
    let out = common::saintflow_ok(
        &[
            "train",
            &gcn,
            "--graph",
            &graph,
            "--epochs",
            "3",
            "--threads",
            "2",
            "--json",
            "--quiet",
        ],
        tmp.path(),
    );
    let log = String::from_utf8_lossy(&out.stdout);
    let losses: Vec<f64> = log
        .lines()
        .filter(|l| l.contains("\"kind\":\"step\""))
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["loss"].as_f64().unwrap()
        })
        .collect();
    assert!(
        !losses.is_empty() && losses.iter().all(|l| l.is_finite()),
        "{log}"
    );
}

/// Issue 53 item 7: full-graph evaluation reads a sparse store's features sparse, as the
/// step does (its planned graph holds `features_spmm`, no dense gather), and runs it per
/// block of nodes: every node-classification plan's logits and embedding, row-blocked in
/// odd blocks, equal its in-memory pass, and equal the unplanned graph's forward with
/// the dense features to the sums' order (1e-5 of the largest value).
#[test]
fn evaluation_reads_a_sparse_stores_features_sparse_and_gives_the_dense_forward() {
    use saintflow::exec::Interpreter;
    use saintflow::infer::{FullGraph, InferOptions, Output};
    use saintflow::sample::FullSampler;

    let tmp = tempfile::tempdir().unwrap();
    let store = GraphStore::open(sparse_store(tmp.path())).unwrap();
    assert!(store.feature_density() <= SPARSE_FEATURES_MAX_DENSITY);
    let reg = Registry::with_builtins();
    let close = |got: &[f32], want: &[f32], what: &str| {
        assert_eq!(got.len(), want.len(), "{what}: sizes");
        let scale = want.iter().fold(0.0f32, |m, x| m.max(x.abs())).max(1e-12);
        for (i, (x, y)) in got.iter().zip(want).enumerate() {
            assert!(
                (x - y).abs() <= 1e-5 * scale,
                "{what}: element {i}: {x} against {y} (scale {scale})"
            );
        }
    };
    let mut sparse_plans = 0;
    for path in common::gnn_plan_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.display().to_string();
        let plan = Plan::parse(&text, &name).unwrap();
        if plan.task.link().is_some() {
            continue; // scored on a link split, which this store has not
        }
        let set: Vec<&str> = if plan.dims.contains_key("hidden") {
            vec!["dims.hidden=24"]
        } else {
            vec![]
        };
        let plan = Plan::parse_with_overrides(&text, &name, &set).unwrap();
        let lowered = saintflow::compile::lower_for(&plan, &store, &reg).unwrap();
        let params = Params::init(&lowered.params, 2);
        let full = FullGraph::new(&store, &lowered, saintflow::machine::cores())
            .unwrap()
            .with_options(InferOptions {
                block_rows: Some(37),
                ..InferOptions::default()
            });
        let g = full.graph();
        let ops: Vec<&str> = g.ids().into_iter().map(|id| g.node(id).op.name()).collect();
        if ops.contains(&"features_spmm") {
            sparse_plans += 1;
            assert!(!ops.contains(&"features"), "{name}: a dense gather is left");
        }
        // The reference: the lowered graph, unplanned, with the dense features.
        let source = StoreSource::new(
            &store,
            Box::new(FullSampler::new(store.full())),
            0,
            1,
            None,
            Role::Val,
        );
        for (which, id) in [
            (Output::Logits, lowered.logits),
            (Output::Embedding, lowered.embedding),
        ] {
            assert_eq!(full.in_memory_reason(which), None, "{name} {which:?}");
            let mut dense = Interpreter
                .run_step(
                    StepInput::new(&lowered.graph, &[id], &params)
                        .source(&source)
                        .step(0, 0),
                )
                .unwrap();
            let dense = dense.take(id).unwrap();
            let dense = dense.as_dense().unwrap();
            let mut blocked = Vec::new();
            full.for_each_block(&Interpreter, &params, which, &mut |_, t| {
                blocked.extend_from_slice(&t.data);
                Ok(())
            })
            .unwrap();
            let in_memory = full.in_memory(&Interpreter, &params, which).unwrap();
            let what = format!("{name} {which:?}");
            close(
                &blocked,
                &in_memory.data,
                &format!("{what}: blocked / in memory"),
            );
            close(&blocked, &dense.data, &format!("{what}: sparse / dense"));
        }
    }
    // GCN, GraphSAGE, GIN, MLP, APPNP, GCNII, JK-Net, ... read X only by X·W.
    assert!(
        sparse_plans >= 5,
        "{sparse_plans} plans read the features sparse"
    );
}
