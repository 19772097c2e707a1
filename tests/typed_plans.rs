//! Issue 57 item 3: plans over a typed store. Relation adjacencies (`A_mean[r]` and the
//! other flavours) against brute force over the store's relation CSRs; `[input]` (each
//! type's features through its own projection, featureless types' tables);
//! plans/rgcn.toml's whole training step against finite differences on a tiny typed
//! store, planned and unplanned; blocked inference equal to the in-memory pass there; the
//! plan errors (unknown relation with its nearest names, FILE:LINE:COL, `r` outside a sum
//! over relations, a flavour with self loops, `basis` misuse).

mod common;

use std::path::{Path, PathBuf};

use common::{gz, ogb_relations, op_ctx};
use saintflow::compile::lower_for;
use saintflow::exec::{run, Interpreter};
use saintflow::infer::{FullGraph, InferOptions, Output};
use saintflow::ir::{Bindings, GraphSource, Params};
use saintflow::op::builtin::{AdjKind, RelAdjacency};
use saintflow::op::{Op, Registry, StoreSource};
use saintflow::plan::Plan;
use saintflow::planner::PlanOptions;
use saintflow::sample::FullSampler;
use saintflow::store::{check, GraphStore, Role};

/// A tiny typed graph in ogbn-mag's layout, imported (types in name order: author 0..4,
/// field 5..7, paper 8..13): papers with 3 features and 2 classes, authors and fields
/// without features; `author writes paper`, `paper cites paper` (made symmetric), `paper
/// has_topic field`, the reverses `rev_writes`, `rev_has_topic`.
fn tiny(dir: &Path) -> PathBuf {
    let raw = dir.join("raw");
    gz(
        &raw.join("num-node-dict.csv.gz"),
        ["paper,author,field", "6,5,3"],
    );
    let rels: [common::OgbRelation<'_>; 3] = [
        (
            "author",
            "writes",
            "paper",
            &[
                (0, 0),
                (0, 1),
                (1, 1),
                (1, 2),
                (2, 3),
                (0, 3),
                (3, 4),
                (4, 5),
                (3, 5),
            ],
        ),
        (
            "paper",
            "cites",
            "paper",
            &[(0, 1), (1, 2), (2, 0), (2, 3), (4, 5), (3, 4)],
        ),
        (
            "paper",
            "has_topic",
            "field",
            &[(0, 0), (1, 0), (2, 1), (3, 1), (4, 2), (5, 2), (5, 0)],
        ),
    ];
    ogb_relations(&raw, &rels);
    common::ogb_papers_and_import(
        dir,
        "paper,author,field",
        &[
            "1.0,0.5,-0.2",
            "0.3,-1.0,0.8",
            "-0.6,0.2,0.9",
            "0.7,0.7,-0.4",
            "-0.1,0.4,0.3",
            "0.9,-0.3,-0.8",
        ],
        &["0", "1", "0", "1", "1", "0"],
        [&["0", "1", "2", "4"], &["3"], &["5"]],
    )
}

fn open_tiny(dir: &Path) -> GraphStore {
    let s = GraphStore::open(tiny(dir)).unwrap();
    check(&s).unwrap();
    assert_eq!((s.n_node_types(), s.n_relations()), (3, 5));
    s
}

/// The store sampled whole, every step (what full-batch training and the in-memory
/// evaluation read), the loss over the training papers.
fn full_source(store: &GraphStore) -> StoreSource<'_> {
    StoreSource::new(
        store,
        Box::new(FullSampler::new(store.full())),
        0,
        1,
        None,
        Role::Train,
    )
}

fn rgcn(overrides: &[&str]) -> Plan {
    shipped("rgcn", overrides)
}

fn shipped(name: &str, overrides: &[&str]) -> Plan {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("plans/{name}.toml"));
    let text = std::fs::read_to_string(&path).unwrap();
    Plan::parse_with_overrides(&text, &path.display().to_string(), overrides)
        .unwrap_or_else(|e| panic!("{}", e.render()))
}

/// A declared parameter's (rows, cols).
fn param_shape(lowered: &saintflow::plan::Lowered, name: &str) -> (usize, usize) {
    let d = lowered.params.iter().find(|p| p.name == name).unwrap();
    (d.rows, d.cols)
}

/// Every parameter moved off its initial value by a small deterministic offset (as
/// tests/shipped_plans.rs does: no ReLU input sits on its kink by construction).
fn params_for(lowered: &saintflow::plan::Lowered, seed: u64) -> Params {
    let mut params = Params::init(&lowered.params, seed);
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ seed;
    for d in &lowered.params {
        for v in &mut params.get_mut(&d.name).unwrap().data {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            *v += ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.2;
        }
    }
    params
}

/// A typed plan's whole training step on the full tiny store against finite differences,
/// unplanned and planned; every parameter's gradient not zero (the check would pass a
/// graph that ignores one).
fn whole_step_gradient_check(
    store: &GraphStore,
    lowered: &saintflow::plan::Lowered,
    params: &Params,
    what: &str,
) {
    let src = full_source(store);
    let check = |g: &saintflow::ir::Graph, loss, grads: &[(String, saintflow::ir::NodeId)]| {
        common::check_off_kinks(g, loss, grads, &src, params)
    };
    let bad = check(&lowered.graph, lowered.loss, &lowered.grads);
    assert!(bad.is_empty(), "{what} unplanned: {bad:#?}");
    let out = run(
        &lowered.graph,
        &lowered.grads.iter().map(|g| g.1).collect::<Vec<_>>(),
        Some(&src),
        params,
        0,
        0,
        true,
    )
    .unwrap();
    for (name, id) in &lowered.grads {
        let g = out.get(*id).unwrap().as_dense().unwrap();
        assert!(g.data.iter().any(|&x| x != 0.0), "{what}: ∇{name} is zero");
    }
    let mut planned = lowered.graph.clone();
    saintflow::planner::plan(
        &mut planned,
        &PlanOptions::new(
            Bindings {
                nodes: store.n_nodes(),
                entries: store.full().n_entries(),
                pairs: 0,
            },
            std::num::NonZeroUsize::new(2).unwrap(),
        ),
    )
    .unwrap();
    let loss = planned.output("loss").unwrap();
    let grads: Vec<(String, _)> = lowered
        .grads
        .iter()
        .map(|(n, _)| (n.clone(), planned.output(&format!("grad/{n}")).unwrap()))
        .collect();
    let bad = check(&planned, loss, &grads);
    assert!(bad.is_empty(), "{what} planned: {bad:#?}");
}

#[test]
fn relation_adjacencies_match_brute_force_over_the_relation_csrs() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open_tiny(tmp.path());
    let src = full_source(&store);
    let sub = src.sample(0).unwrap();
    let n = store.n_nodes();
    assert_eq!(sub.nodes, (0..n as u32).collect::<Vec<_>>());
    // The source's fixed subgraph, as the `sample` op hands it to every step.
    let sample = saintflow::ir::Value::Subgraph(src.fixed_sample().unwrap().unwrap());
    let params = Params::default();
    for r in 0..store.n_relations() {
        let rel = store.relation(r);
        let rev = store.relation(rel.reverse);
        for kind in [
            AdjKind::Raw,
            AdjKind::Mean,
            AdjKind::SymNoLoops,
            AdjKind::Col,
            // GraphSAINT's, on the whole graph without counts: `A_mean`'s values.
            AdjKind::Saint,
        ] {
            let op = RelAdjacency::new(kind, r, rel.reverse, rel.name.to_string());
            let v = op
                .forward(&[&sample], &op_ctx(&params, Some(&src)))
                .unwrap();
            let a = v.as_sparse().unwrap();
            // The relation's entries alone, in the rows of its source type.
            let row_of = |u: usize| &a.structure.indices[a.structure.row(u)];
            for u in 0..n {
                assert_eq!(
                    row_of(u),
                    rel.csr.row(u as u32),
                    "relation {} row {u}",
                    rel.name
                );
            }
            let mut dense = vec![0f32; n * n];
            for u in 0..n {
                for k in a.structure.row(u) {
                    dense[u * n + a.structure.indices[k] as usize] = a.values.data[k];
                }
            }
            let mut want = vec![0f32; n * n];
            for u in rel.csr.rows() {
                let du = rel.csr.degree(u) as f32;
                for &w in rel.csr.row(u) {
                    let dv = rev.csr.degree(w) as f32;
                    want[u as usize * n + w as usize] = match kind {
                        AdjKind::Raw => 1.0,
                        AdjKind::Mean | AdjKind::Saint => 1.0 / du,
                        AdjKind::Col => 1.0 / dv,
                        _ => (1.0 / du.sqrt()) * (1.0 / dv.sqrt()),
                    };
                }
            }
            assert_eq!(dense, want, "relation {} {kind:?}", rel.name);
            // The transpose's pattern is the reverse relation's, and the values permuted
            // into it are the transposed matrix's (what the backward SpMM multiplies by).
            let (t_offsets, t_indices) = a.structure.transposed_pattern();
            let t = a.transposed_values();
            assert_eq!(t.data.len(), t_indices.len());
            for v in 0..n {
                let row = &t_indices[t_offsets[v] as usize..t_offsets[v + 1] as usize];
                assert_eq!(
                    row,
                    rev.csr.row(v as u32),
                    "reverse of {} row {v}",
                    rel.name
                );
                for (k, &u) in (t_offsets[v] as usize..).zip(row) {
                    assert_eq!(t.data[k], want[u as usize * n + v]);
                }
            }
            // The fixed subgraph again: the matrix built once, shared.
            let again = op
                .forward(&[&sample], &op_ctx(&params, Some(&src)))
                .unwrap();
            let again = again.as_sparse().unwrap();
            assert!(std::sync::Arc::ptr_eq(&again.structure, &a.structure));
            // Any other subgraph (a sampled one; here an equal copy): built each time,
            // never kept, equal.
            let copy = saintflow::ir::Value::Subgraph(std::sync::Arc::new(sub.clone()));
            let fresh = op.forward(&[&copy], &op_ctx(&params, Some(&src))).unwrap();
            let fresh = fresh.as_sparse().unwrap();
            assert!(!std::sync::Arc::ptr_eq(&fresh.structure, &a.structure));
            let twice = op.forward(&[&copy], &op_ctx(&params, Some(&src))).unwrap();
            assert!(!std::sync::Arc::ptr_eq(
                &twice.as_sparse().unwrap().structure,
                &fresh.structure
            ));
            assert_eq!(fresh.structure, a.structure);
            assert_eq!(fresh.values.data, a.values.data);
        }
    }
}

#[test]
fn rgcn_passes_the_whole_step_gradient_check_on_a_typed_store_planned_and_unplanned() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open_tiny(tmp.path());
    let reg = Registry::with_builtins();
    let plan = rgcn(&["dims.hidden=6"]);
    let lowered = lower_for(&plan, &store, &reg).unwrap();
    // One projection for the papers' features, a table per featureless type, sparse.
    let names: Vec<&str> = lowered.params.iter().map(|p| p.name.as_str()).collect();
    for p in [
        "input.W.paper",
        "input.E.author",
        "input.E.field",
        "a",
        "V",
        "W0",
    ] {
        assert!(names.contains(&p), "{p} in {names:?}");
    }
    assert_eq!(
        lowered
            .sparse_rows
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        ["input.E.author", "input.E.field"]
    );
    let shape = |n: &str| param_shape(&lowered, n);
    assert_eq!(shape("input.W.paper"), (3, 6));
    assert_eq!(shape("input.E.author"), (5, 6));
    assert_eq!(shape("a"), (5, 2), "one row per relation, B = 2");
    assert_eq!(shape("V"), (12, 6), "B blocks of `in` rows");
    let src = full_source(&store);
    let params = params_for(&lowered, 1);
    let check = |g: &saintflow::ir::Graph, loss, grads: &[(String, saintflow::ir::NodeId)]| {
        common::check_off_kinks(g, loss, grads, &src, &params)
    };
    whole_step_gradient_check(&store, &lowered, &params, "rgcn");

    // Planned with the paper type's features read sparse (a store's density at most 10 %:
    // Cora's bag of words): `x[paper] @ input.W.paper` and its ∇W become feature
    // products over the type's nonzeros, rows of other types empty.
    let mut sparse = lowered.graph.clone();
    let opts = PlanOptions {
        type_feature_density: Some(0.05),
        ..PlanOptions::new(
            Bindings {
                nodes: store.n_nodes(),
                entries: store.full().n_entries(),
                pairs: 0,
            },
            std::num::NonZeroUsize::new(2).unwrap(),
        )
    };
    saintflow::planner::plan(&mut sparse, &opts).unwrap();
    let products = sparse
        .ids()
        .into_iter()
        .filter(|&id| sparse.node(id).op.name() == "features_spmm")
        .count();
    assert_eq!(
        products, 2,
        "x[paper]·W and its ∇W read the features sparse"
    );
    let loss = sparse.output("loss").unwrap();
    let grads: Vec<(String, _)> = lowered
        .grads
        .iter()
        .map(|(n, _)| (n.clone(), sparse.output(&format!("grad/{n}")).unwrap()))
        .collect();
    let bad = check(&sparse, loss, &grads);
    assert!(bad.is_empty(), "planned, type features sparse: {bad:#?}");
    // The same gradients as the dense products, to rounding.
    let values = |g: &saintflow::ir::Graph, ids: &[saintflow::ir::NodeId]| {
        let out = run(g, ids, Some(&src), &params, 0, 0, true).unwrap();
        ids.iter()
            .map(|&id| out.get(id).unwrap().as_dense().unwrap().data.clone())
            .collect::<Vec<_>>()
    };
    let dense_ids: Vec<_> = lowered.grads.iter().map(|g| g.1).collect();
    let sparse_ids: Vec<_> = grads.iter().map(|g| g.1).collect();
    let (d, s) = (
        values(&lowered.graph, &dense_ids),
        values(&sparse, &sparse_ids),
    );
    for ((name, _), (d, s)) in lowered.grads.iter().zip(d.iter().zip(&s)) {
        for (a, b) in d.iter().zip(s) {
            assert!(
                (a - b).abs() <= 1e-5 * (1.0 + a.abs()),
                "∇{name}: {a} dense, {b} sparse"
            );
        }
    }
}

/// plans/rgat.toml: per relation r, attention on r's entries alone (`gat(A[r], …)`: the
/// union's other entries have the value 0) with r's query and key rows `q[r]`, `k[r]`;
/// its whole step against finite differences, and the attention against a softmax over
/// relation r's own CSR.
#[test]
fn rgat_passes_the_whole_step_gradient_check_and_attends_within_each_relation() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open_tiny(tmp.path());
    let reg = Registry::with_builtins();
    let lowered = lower_for(&shipped("rgat", &["dims.hidden=8"]), &store, &reg).unwrap();
    let shape = |n: &str| param_shape(&lowered, n);
    assert_eq!(shape("q"), (5, 8), "a query row per relation");
    assert_eq!(
        shape("k_out"),
        (5, 2),
        "a key row per relation, classes wide"
    );
    assert_eq!(shape("V"), (16, 8), "B = 2 blocks of `in` rows");
    let params = params_for(&lowered, 3);
    whole_step_gradient_check(&store, &lowered, &params, "rgat");

    // Each relation's α (the first layer's gat nodes, in relation order) sums to 1 over
    // the relation's own entries of a row and is 0 on the other entries.
    let src = full_source(&store);
    let gats: Vec<_> = lowered
        .graph
        .ids()
        .into_iter()
        .filter(|&id| lowered.graph.node(id).op.name() == "gat")
        .collect();
    assert_eq!(
        gats.len(),
        2 * store.n_relations(),
        "one per relation and layer"
    );
    let out = run(&lowered.graph, &gats, Some(&src), &params, 0, 0, false).unwrap();
    for (r, &id) in gats[..store.n_relations()].iter().enumerate() {
        let alpha = out.get(id).unwrap().as_sparse().unwrap();
        let (st, heads) = (&alpha.structure, alpha.heads());
        let rel = store.relation(r);
        for u in 0..st.n_rows() {
            let own = rel.csr.row(u as u32);
            for h in 0..heads {
                let (mut inside, mut outside) = (0.0f64, 0.0f64);
                for k in st.row(u) {
                    let a = f64::from(alpha.values.data[k * heads + h]);
                    match own.binary_search(&st.indices[k]).is_ok() {
                        true => inside += a,
                        false => outside += a,
                    }
                }
                let want = if own.is_empty() { 0.0 } else { 1.0 };
                assert!(
                    (inside - want).abs() < 1e-5 && outside == 0.0,
                    "relation {r} row {u} head {h}: Σα {inside} inside, {outside} outside"
                );
            }
        }
    }
}

#[test]
fn blocked_inference_of_rgcn_and_rgat_on_a_typed_store_equals_the_in_memory_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open_tiny(tmp.path());
    let reg = Registry::with_builtins();
    for name in ["rgcn", "rgat"] {
        blocked_equals_in_memory(
            &store,
            &lower_for(&shipped(name, &[]), &store, &reg).unwrap(),
            tmp.path(),
        );
    }
}

fn blocked_equals_in_memory(
    store: &GraphStore,
    lowered: &saintflow::plan::Lowered,
    scratch: &Path,
) {
    let params = params_for(lowered, 2);
    for rows in [Some(1), Some(4), None] {
        let opts = InferOptions {
            block_rows: rows,
            scratch_dir: scratch.to_path_buf(),
            ..InferOptions::default()
        };
        let full = FullGraph::new(store, lowered, std::num::NonZeroUsize::new(1).unwrap())
            .unwrap()
            .with_options(opts.clone());
        for which in [Output::Logits, Output::Embedding] {
            assert_eq!(full.in_memory_reason(which), None, "{which:?}");
            let want = full.in_memory(&Interpreter, &params, which).unwrap();
            let mut got = Vec::new();
            full.for_each_block(&Interpreter, &params, which, &mut |_, t| {
                got.extend_from_slice(&t.data);
                Ok(())
            })
            .unwrap();
            assert_eq!(want.data, got, "{which:?} rows {rows:?}: bit for bit");
            // Keeping the passes' blocks and relation adjacencies (a training run's
            // evaluations): the same bits at every pass, under other parameters too.
            let keeping = FullGraph::new(store, lowered, std::num::NonZeroUsize::new(1).unwrap())
                .unwrap()
                .with_options(opts.clone())
                .keep_constants(true);
            let other = params_for(lowered, 3);
            let other_want = full.in_memory(&Interpreter, &other, which).unwrap();
            for (pass, (p, w)) in [(&params, &want), (&params, &want), (&other, &other_want)]
                .into_iter()
                .enumerate()
            {
                let mut got = Vec::new();
                keeping
                    .for_each_block(&Interpreter, p, which, &mut |_, t| {
                        got.extend_from_slice(&t.data);
                        Ok(())
                    })
                    .unwrap();
                assert_eq!(
                    w.data, got,
                    "{which:?} rows {rows:?}: kept blocks, pass {pass}"
                );
                // Logits read the relations' adjacency rows, so their blocks are kept; a
                // block is copied only for an op that reads it (R-GCN's embedding reads none).
                if which == Output::Logits {
                    assert!(keeping.kept_blocks() > 0, "{which:?}: blocks kept");
                }
            }
            // At chosen rows (an evaluation's scored nodes, of both types), the last
            // layer's relation blocks built at those rows: the same bits.
            let n = store.n_nodes();
            let ids: Vec<u32> = (0..n as u32).filter(|v| v % 2 == 1).collect();
            let cols = want.cols;
            let mut at = Vec::new();
            full.for_each_block_at(&Interpreter, &params, which, &ids, &mut |_, t| {
                at.extend_from_slice(&t.data);
                Ok(())
            })
            .unwrap();
            let those: Vec<f32> = ids
                .iter()
                .flat_map(|&v| want.data[v as usize * cols..(v as usize + 1) * cols].to_vec())
                .collect();
            assert_eq!(
                those, at,
                "{which:?} rows {rows:?}: chosen rows bit for bit"
            );
        }
    }
}

/// The error of lowering `out` as a one-layer plan's `[output]` on the tiny store.
fn lowering_error(store: &GraphStore, out: &str, params: &str) -> String {
    let text = format!("[input]\ndim = 4\n\n[output]\nparams = {{ {params} }}\nout = \"{out}\"\n");
    let plan = Plan::parse(&text, "t.toml").unwrap_or_else(|e| panic!("{}", e.render()));
    match lower_for(&plan, store, &Registry::with_builtins()) {
        Ok(_) => panic!("{out}: lowered"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn typed_plan_errors_name_what_is_wrong_and_where() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open_tiny(tmp.path());
    let w = "W = [\"in\", \"classes\"]";
    let e = lowering_error(&store, "A_mean[cite] @ x @ W", w);
    assert!(e.starts_with("t.toml:6:15: "), "{e}");
    assert!(e.contains("no relation `cite`"), "{e}");
    assert!(e.contains("did you mean `cites`"), "{e}");
    assert!(e.contains("[\"author\", \"writes\", \"paper\"]"), "{e}");
    let e = lowering_error(&store, "A_mean['paper', 'writes', 'paper'] @ x @ W", w);
    assert!(e.contains("no such relation"), "{e}");
    assert!(
        e.contains("(`writes` is `A_mean[\"author\", \"writes\", \"paper\"]`)"),
        "{e}"
    );
    let e = lowering_error(&store, "A_mean['paper', 'cite', 'paper'] @ x @ W", w);
    assert!(e.contains("did you mean `paper cites paper`"), "{e}");
    let e = lowering_error(&store, "A_mean[r] @ x @ W", w);
    assert!(e.contains("only inside `sum_relations"), "{e}");
    let e = lowering_error(&store, "A_sym[cites] @ x @ W", w);
    assert!(e.contains("without self loops"), "{e}");
    let e = lowering_error(&store, "x @ W[cites]", w);
    assert!(e.starts_with("t.toml:6:12: "), "{e}");
    assert!(
        e.contains("W is [4, 2]: a relation takes its block of rows from a value with one block per relation (5)"),
        "{e}"
    );
    let e = lowering_error(
        &store,
        "x @ W[cite]",
        "W = [\"relations * in\", \"classes\"]",
    );
    assert!(
        e.contains("no relation `cite`") && e.contains("did you mean `cites`"),
        "{e}"
    );
    let e = lowering_error(&store, "x @ W + r", w);
    assert!(e.contains("`r` is each relation inside"), "{e}");
    let e = lowering_error(&store, "sum_relations(sum_relations(A[r] @ x @ W))", w);
    assert!(e.contains("inside another sum over relations"), "{e}");
    let e = lowering_error(
        &store,
        "sum_relations(A_mean[r] @ x @ basis(a, V, r))",
        "a = [3, 2], V = [\"2 * in\", \"classes\"]",
    );
    assert!(e.contains("expected one row per relation (5)"), "{e}");
    let e = lowering_error(
        &store,
        "sum_relations(A_mean[r] @ x @ basis(a, V))",
        "a = [\"relations\", 2], V = [\"2 * in\", \"classes\"]",
    );
    assert!(e.contains("takes the coefficients"), "{e}");
    // A relation by name, or by its types, lowers.
    let ok = |out: &str| {
        let text = format!("[input]\ndim = 4\n\n[output]\nparams = {{ {w} }}\nout = \"{out}\"\n");
        let plan = Plan::parse(&text, "t.toml").unwrap();
        lower_for(&plan, &store, &Registry::with_builtins()).unwrap();
    };
    ok("A_mean[writes] @ x @ W");
    ok("A_mean['author', 'writes', 'paper'] @ x @ W + A[\\\"paper\\\", cites, paper] @ x @ W");
    ok("mean_relations(A_col[r] @ x @ W)");
    // A value with a block of rows per relation, indexed by one: a matrix each, a row each.
    let ok_with = |out: &str, params: &str| {
        let text =
            format!("[input]\ndim = 4\n\n[output]\nparams = {{ {params} }}\nout = \"{out}\"\n");
        let plan = Plan::parse(&text, "t.toml").unwrap_or_else(|e| panic!("{}", e.render()));
        lower_for(&plan, &store, &Registry::with_builtins()).unwrap();
    };
    ok_with(
        "sum_relations(A_mean[r] @ x @ W[r]) + x @ W[cites] + b[writes]",
        "W = [\"relations * in\", \"classes\"], b = [\"relations\", \"classes\"]",
    );
    // A typed store without [input] is refused with the way forward.
    let plan = Plan::parse(
        "[output]\nparams = { W = [\"in\", \"classes\"] }\nout = \"x @ W\"\n",
        "t.toml",
    )
    .unwrap();
    let e = lower_for(&plan, &store, &Registry::with_builtins())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("give it an [input] table"), "{e}");
}

/// A whole-graph sampler's source builds its subgraph (with the typed relations) once and
/// hands out copies: every step's equals the first and a fresh source's draw.
#[test]
fn a_whole_graph_source_hands_out_the_same_subgraph_at_every_step() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open_tiny(tmp.path());
    let src = full_source(&store);
    let first = src.sample(0).unwrap();
    assert_eq!(first.nodes.len(), store.n_nodes());
    assert!(first.typed.is_some(), "the relations are attached");
    // One subgraph shared by every step's `sample` op, equal to the copies.
    let shared = src
        .fixed_sample()
        .unwrap()
        .expect("a whole-graph source's is fixed");
    assert_eq!(*shared, first);
    assert!(std::sync::Arc::ptr_eq(
        &shared,
        &src.fixed_sample().unwrap().unwrap()
    ));
    // A source whose subgraphs come from elsewhere has none fixed.
    let other = saintflow::ir::source::WithSampler::new(&src, |_| Ok(first.clone()));
    assert!(other.fixed_sample().unwrap().is_none());
    for step in [1, 7, 1000] {
        assert_eq!(src.sample(step).unwrap(), first, "step {step}");
        assert_eq!(
            full_source(&store).sample(step).unwrap(),
            first,
            "fresh, step {step}"
        );
    }
}
