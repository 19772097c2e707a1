//! The user neighbour op `user.max_agg` through the public API: its gradient against
//! finite differences, a plan using it trains (loss falls on a planted graph), the planner
//! orders the product after it, and out-of-core inference in row blocks equals the
//! in-memory pass bit for bit.

use std::path::Path;
use std::sync::Arc;

use saintflow::autodiff::differentiate;
use saintflow::compile::lower_for;
use saintflow::exec::StepInput;
use saintflow::exec::{check_gradients, run, GradCheck, Interpreter, StepRunner};
use saintflow::infer::{FullGraph, InferOptions, Output};
use saintflow::ir::{Bindings, Graph, Init, ParamDecl, Params};
use saintflow::op::builtin::{
    AdjKind, Adjacency, Features, Loss, LossKind, MatMul, Param, Sample, TargetsOp,
};
use saintflow::op::fused::{Fused, Src};
use saintflow::op::{neighbour_reduce, AdjKind as Adj, MemorySource, StoreSource};
use saintflow::plan::{Lowered, Plan};
use saintflow::planner::{explain_text, plan, PlanOptions};
use saintflow::sample::FullSampler;
use saintflow::store::gen::Planted;
use saintflow::store::Role;
use saintflow::testing::{check_blocked_equals_in_memory, check_op_gradients_with, Arg};
use saintflow::GraphStore;
use saintflow_example_custom_op::{registry, MaxAgg};

mod common;

/// The planted graph of the tests: homophily 0.9, centroids 0.3 noise deviations apart.
fn planted(dir: &Path, scale: u32) -> GraphStore {
    let p = Planted {
        homophily: 0.9,
        separation: 0.3,
    };
    GraphStore::open(common::planted(dir, scale, 7, p)).unwrap()
}

fn max_sage() -> Plan {
    Plan::load(Path::new(env!("CARGO_MANIFEST_DIR")).join("max_sage.toml")).unwrap()
}

fn lowered(store: &GraphStore) -> Lowered {
    lower_for(&max_sage(), store, &registry()).unwrap()
}

fn param(g: &mut Graph, name: &str, rows: usize, cols: usize) -> saintflow::ir::NodeId {
    g.add(
        Arc::new(Param {
            name: name.into(),
            rows,
            cols,
        }),
        &[],
        name,
    )
    .unwrap()
}

/// Forward = the brute-force definition (0 for the isolated node 0), and ∂W through the
/// op's backward (the recomputed argmax) matches central differences.
#[test]
fn max_agg_forward_is_the_definition_and_its_gradient_matches_finite_differences() {
    let src = MemorySource::random(19, 4, 5, 3, false, 4);
    let mut g = Graph::new();
    let s = g.add(Arc::new(Sample), &[], "sample").unwrap();
    let x = g.add(Arc::new(Features { width: 5 }), &[s], "x").unwrap();
    let a = g
        .add(Arc::new(Adjacency { kind: AdjKind::Raw }), &[s], "A")
        .unwrap();
    let t = g
        .add(Arc::new(TargetsOp { classes: 3 }), &[s], "y")
        .unwrap();
    let w = param(&mut g, "W", 5, 4);
    let wo = param(&mut g, "W_out", 4, 3);
    let z = g.add(Arc::new(MatMul::plain(2)), &[x, w], "x @ W").unwrap();
    let h = g
        .add(neighbour_reduce(MaxAgg), &[a, z], "user.max_agg(A, z)")
        .unwrap();
    let o = g
        .add(Arc::new(MatMul::plain(2)), &[h, wo], "h @ W_out")
        .unwrap();
    let loss = g
        .add(
            Arc::new(Loss {
                kind: LossKind::SoftmaxCe,
            }),
            &[o, t],
            "loss",
        )
        .unwrap();
    let grads = differentiate(&mut g, loss, &[w, wo]).unwrap();
    let decls: Vec<ParamDecl> = [("W", 5, 4), ("W_out", 4, 3)]
        .iter()
        .map(|&(name, rows, cols)| ParamDecl {
            name: name.into(),
            rows,
            cols,
            init: Init::Glorot,
        })
        .collect();
    let params = Params::init(&decls, 1);

    let v = run(&g, &[a, z, h], Some(&src), &params, 0, 0, true).unwrap();
    let (av, zv, hv) = (
        v.get(a).unwrap().as_sparse().unwrap(),
        v.get(z).unwrap().as_dense().unwrap(),
        v.get(h).unwrap().as_dense().unwrap(),
    );
    let st = &av.structure;
    let mut empty = 0;
    for i in 0..st.n_rows() {
        let nbrs: Vec<usize> = st.row(i).map(|k| st.indices[k] as usize).collect();
        empty += usize::from(nbrs.is_empty());
        for c in 0..zv.cols {
            let want = nbrs
                .iter()
                .map(|&j| zv.row(j)[c])
                .fold(None, |m: Option<f32>, v| Some(m.map_or(v, |m| m.max(v))))
                .unwrap_or(0.0);
            assert_eq!(hv.row(i)[c], want, "row {i} column {c}");
        }
    }
    assert!(empty > 0, "an empty row is exercised");

    let named = vec![
        ("W".to_string(), grads.grads[0].1),
        ("W_out".to_string(), grads.grads[1].1),
    ];
    // A small step: a maximum is piecewise linear, and the step must not move an argmax.
    let check = GradCheck {
        eps: 1e-3,
        ..GradCheck::default()
    };
    let bad = check_gradients(&g, loss, &named, &src, &params, check).unwrap();
    assert!(bad.is_empty(), "{bad:#?}");
}

/// The one-call checks of `saintflow::testing`: gradients against finite differences on
/// every adjacency flavour (a small step: a maximum is piecewise linear, and the step must
/// not move an argmax), and the blocked forward against the in-memory one.
#[test]
fn max_agg_passes_the_library_op_checks() {
    let small = GradCheck {
        eps: 1e-3,
        ..GradCheck::default()
    };
    for kind in [Adj::Raw, Adj::Sym] {
        let args = [Arg::Adjacency(kind), Arg::Nodes(4)];
        check_op_gradients_with(neighbour_reduce(MaxAgg), &args, small).unwrap();
        check_blocked_equals_in_memory(neighbour_reduce(MaxAgg), &args).unwrap();
    }
}

/// The plan file's whole step through lowering and autodiff also checks against finite
/// differences (the backward op is in the lowered graph).
#[test]
fn the_max_sage_plan_lowers_with_the_user_backward_and_its_step_gradient_checks() {
    let src = MemorySource::random(21, 4, 6, 3, false, 9);
    let registry = registry();
    let lowered = max_sage()
        .lower(&saintflow::plan::LowerEnv::of(&src, &registry))
        .unwrap_or_else(|e| panic!("{}", e.render()));
    let dump = saintflow::ir::dump::dump(&lowered.graph).unwrap();
    assert!(
        dump.contains("user.max_agg(") && dump.contains("user.max_agg_backward"),
        "{dump}"
    );
    let params = Params::init(&lowered.params, 2);
    let check = GradCheck {
        eps: 1e-3,
        ..GradCheck::default()
    };
    let bad = check_gradients(
        &lowered.graph,
        lowered.loss,
        &lowered.grads,
        &src,
        &params,
        check,
    )
    .unwrap();
    assert!(bad.is_empty(), "{bad:#?}");
}

/// The planner keeps the user op and orders the product after it like any chain: `@ W_neigh`
/// becomes a `gemm` reading the op's output, with the chain pass's order note (or, of a
/// k small enough, a stage of the fused chain after it).
#[test]
fn the_planner_plans_the_user_neighbour_op() {
    let tmp = tempfile::tempdir().unwrap();
    let store = planted(tmp.path(), 7);
    let lowered = lowered(&store);
    let mut graph = lowered.graph.clone();
    let report = plan(
        &mut graph,
        &PlanOptions::new(
            Bindings {
                nodes: store.n_nodes(),
                entries: store.full().n_entries(),
                pairs: 0,
            },
            saintflow::machine::cores(),
        ),
    )
    .unwrap();
    let text = explain_text(&graph, &report);
    assert!(text.contains("user.max_agg"), "{text}");
    let ids = graph.ids();
    let aggs: Vec<_> = ids
        .iter()
        .copied()
        .filter(|&i| graph.node(i).op.name() == "user.max_agg")
        .collect();
    assert_eq!(aggs.len(), 2, "one per layer:\n{text}");
    for &m in &aggs {
        let users: Vec<_> = ids
            .iter()
            .copied()
            .filter(|&i| {
                let n = graph.node(i);
                n.op.name() == "gemm" && n.inputs[0] == m && !n.label.starts_with('∇')
            })
            .collect();
        // A product by a parameter (the first layer's, over the 8 features) runs
        // inside the fused chain that reads it: a stage `gemm` whose op(A) is the op's
        // output.
        let fused: Vec<_> = ids
            .iter()
            .copied()
            .filter(|&i| {
                let n = graph.node(i);
                let slot = n.inputs.iter().position(|&i| i == m);
                n.op.downcast_ref::<Fused>().is_some_and(|f| {
                    f.stages
                        .iter()
                        .any(|s| s.op.name() == "gemm" && slot.map(Src::Input) == Some(s.inputs[0]))
                })
            })
            .collect();
        assert_eq!(
            users.len() + fused.len(),
            1,
            "one forward product by W_neigh:\n{text}"
        );
        if let [u] = users[..] {
            assert!(
                graph.node(u).note.starts_with("order:"),
                "{}",
                graph.node(u).note
            );
        }
    }
    assert!(
        text.contains("fused[gemm[NN] → gemm[NN] → concat → relu]"),
        "the first layer's products (k = 8) fused:\n{text}"
    );
    assert!(
        ids.iter().all(|&i| graph.node(i).op.name() != "matmul"),
        "every chain ordered:\n{text}"
    );
    assert!(report.passes.iter().any(|p| p.count("chains") > 0));
}

/// Full-batch Adam steps on a planted graph: the loss falls clearly.
#[test]
fn a_plan_with_the_user_neighbour_op_trains() {
    let tmp = tempfile::tempdir().unwrap();
    let store = planted(tmp.path(), 8);
    let lowered = lowered(&store);
    let mut graph = lowered.graph.clone();
    plan(
        &mut graph,
        &PlanOptions::new(
            Bindings {
                nodes: store.n_nodes(),
                entries: store.full().n_entries(),
                pairs: 0,
            },
            saintflow::machine::cores(),
        ),
    )
    .unwrap();
    let loss = graph.output("loss").unwrap();
    let grads: Vec<(String, saintflow::ir::NodeId)> = lowered
        .grads
        .iter()
        .map(|(name, _)| (name.clone(), graph.output(&format!("grad/{name}")).unwrap()))
        .collect();
    let mut wanted = vec![loss];
    wanted.extend(grads.iter().map(|g| g.1));
    let source = StoreSource::new(
        &store,
        Box::new(FullSampler::new(store.full())),
        5,
        1,
        None,
        Role::Train,
    );
    let mut params = Params::init(&lowered.params, 3);
    // Adam (lr 0.01, β = 0.9 / 0.999), by hand: the optimiser is not the point here.
    let (lr, b1, b2, eps) = (0.01f32, 0.9f32, 0.999f32, 1e-8f32);
    let mut moments: std::collections::HashMap<String, (Vec<f32>, Vec<f32>)> = Default::default();
    let mut losses = Vec::new();
    for step in 0..60u64 {
        let vals = Interpreter
            .run_step(
                StepInput::new(&graph, &wanted, &params)
                    .source(&source)
                    .step(step, 11)
                    .training(true),
            )
            .unwrap();
        losses.push(vals.get(loss).unwrap().as_scalar().unwrap());
        let t = (step + 1) as i32;
        for (name, gid) in &grads {
            let g = vals.get(*gid).unwrap().as_dense().unwrap();
            let p = params.get_mut(name).unwrap();
            let (m, v) = moments
                .entry(name.clone())
                .or_insert_with(|| (vec![0.0; g.data.len()], vec![0.0; g.data.len()]));
            for (((p, &g), m), v) in p.data.iter_mut().zip(&g.data).zip(m).zip(v) {
                *m = b1 * *m + (1.0 - b1) * g;
                *v = b2 * *v + (1.0 - b2) * g * g;
                let mh = *m / (1.0 - b1.powi(t));
                let vh = *v / (1.0 - b2.powi(t));
                *p -= lr * mh / (vh.sqrt() + eps);
            }
        }
    }
    let (first, last) = (losses[0], *losses.last().unwrap());
    assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
    assert!(last < 0.75 * first, "loss {first} → {last}: {losses:?}");
}

/// Logits and embedding computed row-blocked and layer by layer — odd block sizes, kept
/// values in memory or in scratch files, X read in place or streamed in parts of rows —
/// equal the in-memory pass bit for bit: the user op takes maxima, which do not round.
#[test]
fn blocked_inference_with_the_user_neighbour_op_equals_the_in_memory_pass_bit_for_bit() {
    let tmp = tempfile::tempdir().unwrap();
    let store = planted(tmp.path(), 9);
    let scratch = tmp.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let lowered = lowered(&store);
    let params = Params::init(&lowered.params, 3);
    // The last two stream X in parts of 7 and 1 rows (the fold `neighbour_reduce` gives).
    for (rows, memory, parts) in [
        (Some(37), usize::MAX, None),
        (Some(100), 0, None),
        (Some(1), 0, None),
        (None, 0, None),
        (Some(37), 0, Some(7)),
        (None, usize::MAX, Some(1)),
    ] {
        let full = FullGraph::new(&store, &lowered, saintflow::machine::cores())
            .unwrap()
            .with_options(InferOptions {
                block_rows: rows,
                memory_bytes: memory,
                scratch_dir: scratch.clone(),
                part_rows: parts,
                chunk_rows: parts.map(|p| 50 * p),
                ..InferOptions::default()
            });
        for which in [Output::Logits, Output::Embedding] {
            assert_eq!(full.in_memory_reason(which), None, "{which:?}");
            let want = full.in_memory(&Interpreter, &params, which).unwrap();
            let mut got = Vec::new();
            let mut next = 0;
            full.for_each_block(&Interpreter, &params, which, &mut |r0, t| {
                assert_eq!((r0, t.cols), (next, want.cols));
                if let Some(b) = rows {
                    assert!(t.rows <= b);
                }
                next += t.rows;
                got.extend_from_slice(&t.data);
                Ok(())
            })
            .unwrap();
            assert_eq!(next, store.n_nodes());
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert!(
                bits(&want.data) == bits(&got),
                "{which:?} rows {rows:?} memory {memory} parts {parts:?}: blocked differs from in-memory"
            );
        }
    }
    assert_eq!(
        std::fs::read_dir(&scratch).unwrap().count(),
        0,
        "scratch files unlinked"
    );
}
