//! The work-stealing executor against the reference interpreter: every shipped plan's loss
//! and gradients, bit for bit, on 1–4 workers; partitioned GEMM and SpMM against their
//! whole forward; failing and panicking ops give errors, not hangs; the prefetching source
//! hands out the subgraphs direct sampling gives; many steps leave nothing behind.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use saintflow::exec::StepInput;
use saintflow::exec::{run, Executor, Prefetch, StepRunner, StepValues};
use saintflow::ir::{Bindings, Fact, Graph, Kind, NodeId, Params, Tensor, Value};
use saintflow::op::builtin::{Gemm, Spmm};
use saintflow::op::fused::Fused;
use saintflow::op::{
    Arity, Attrs, Ctx, GraphSource, MatMut, MemorySource, Op, OpError, Registry, StoreSource,
    WithSampler,
};
use saintflow::plan::{LowerEnv, Plan};
use saintflow::planner::{plan, PlanOptions, Precision};
use saintflow::sample::{FrontierParams, FrontierSampler};
use saintflow::store::{GraphStore, Role};

fn shipped() -> Vec<PathBuf> {
    common::gnn_plan_files()
}

/// The interpreter on a one-thread rayon pool: the reference every executor run must equal.
fn reference(
    g: &Graph,
    wanted: &[NodeId],
    src: &dyn GraphSource,
    params: &Params,
    step: u64,
    seed: u64,
) -> StepValues {
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    one.install(|| run(g, wanted, Some(src), params, step, seed, true).unwrap())
}

fn bits(v: &Value) -> Vec<u32> {
    match v {
        Value::Dense(t) => t.data.iter().map(|x| x.to_bits()).collect(),
        Value::Scalar(s) => vec![(s.to_bits() >> 32) as u32, s.to_bits() as u32],
        other => panic!("unexpected wanted value {other:?}"),
    }
}

/// A shipped plan lowered for `src` with `hidden`, planned for its size on `threads`.
fn planned(
    path: &Path,
    hidden: usize,
    src: &MemorySource,
    reg: &Registry,
) -> (Graph, Vec<NodeId>, Params) {
    planned_at(path, hidden, src, reg, Precision::F32)
}

/// [`planned`] with the dense products at `precision`.
fn planned_at(
    path: &Path,
    hidden: usize,
    src: &MemorySource,
    reg: &Registry,
    precision: Precision,
) -> (Graph, Vec<NodeId>, Params) {
    let text = std::fs::read_to_string(path).unwrap();
    let has_hidden = Plan::load(path).unwrap().dims.contains_key("hidden");
    let over = format!("dims.hidden={hidden}");
    let overrides: Vec<&str> = if has_hidden { vec![&over] } else { vec![] };
    let p = Plan::parse_with_overrides(&text, &path.display().to_string(), &overrides)
        .unwrap_or_else(|e| panic!("{}", e.render()));
    let lowered = p
        .lower(&LowerEnv::of(src, reg))
        .unwrap_or_else(|e| panic!("{}", e.render()));
    let params = Params::init(&lowered.params, 1);
    let mut g = lowered.graph.clone();
    let n = src.sample(0).unwrap();
    plan(
        &mut g,
        &PlanOptions {
            bindings: Bindings {
                nodes: n.n_nodes(),
                entries: n.n_entries(),
                pairs: n.link.as_ref().map_or(0, |l| l.len()),
            },
            threads: 4,
            cache_bytes: 1 << 20,
            precision,
            feature_density: None,
            type_feature_density: None,
        },
    )
    .unwrap();
    let mut wanted = vec![g.output("loss").unwrap()];
    for (name, _) in &lowered.grads {
        wanted.push(g.output(&format!("grad/{name}")).unwrap());
    }
    (g, wanted, params)
}

/// The fusion pass (issue 33) changes no bit: every shipped plan's step — loss and every
/// gradient, dropout active — planned with the default passes equals the same plan planned
/// without `fuse`, on the interpreter and on 3 workers; at n = 1200 the fused chains run in
/// several row blocks and split across workers. The fused plans do fuse (GraphSAGE's two
/// backward chains of three ops, GCN's one of two, each plan's classifier ∇H = ∇Y·W_outᵀ
/// into the chain after it) and GraphSAGE's products read the concat gradient's slices in
/// place.
#[test]
fn fused_steps_equal_unfused_steps_bit_for_bit_on_every_shipped_plan() {
    use saintflow::planner::{default_passes, plan_with, Pass};
    let reg = Registry::with_builtins();
    let ex = Executor::new(std::num::NonZeroUsize::new(3).unwrap());
    for (n, degree, hidden) in [(21, 4, 16), (1200, 8, 64)] {
        let base = MemorySource::random(n, degree, 6, 3, false, 5);
        for path in shipped() {
            let src = common::source_for_plan(&path, &base);
            let (fused, wanted, params) = planned(&path, hidden, &src, &reg);
            let chains = fused
                .ids()
                .into_iter()
                .filter(|&id| fused.node(id).op.name() == "fused")
                .count();
            if path.ends_with("graphsage.toml") || path.ends_with("gcn.toml") {
                assert!(chains >= 1, "{}: nothing fused", path.display());
                // The classifier's ∇H = ∇Y·W_outᵀ (k = 3 classes) runs inside the chain.
                let with_product = fused.ids().into_iter().any(|id| {
                    fused
                        .node(id)
                        .op
                        .downcast_ref::<Fused>()
                        .is_some_and(|f| f.stages[0].op.name() == "gemm")
                });
                assert!(with_product, "{}: no product fused", path.display());
            }
            // GraphSAGE's concat backward: the products read its gradient's slices in place.
            let views = fused
                .ids()
                .into_iter()
                .filter_map(|id| fused.node(id).op.downcast_ref::<Gemm>().copied())
                .filter(|g| g.views != [None, None])
                .count();
            if path.ends_with("graphsage.toml") {
                assert!(
                    views >= 3,
                    "{}: {views} products read views",
                    path.display()
                );
            }
            // The same lowering planned without the fusion pass.
            let text = std::fs::read_to_string(&path).unwrap();
            let has_hidden = Plan::load(&path).unwrap().dims.contains_key("hidden");
            let over = format!("dims.hidden={hidden}");
            let overrides: Vec<&str> = if has_hidden { vec![&over] } else { vec![] };
            let p =
                Plan::parse_with_overrides(&text, &path.display().to_string(), &overrides).unwrap();
            let lowered = p.lower(&LowerEnv::of(&src, &reg)).unwrap();
            let mut plain = lowered.graph.clone();
            let passes: Vec<Box<dyn Pass>> = default_passes()
                .into_iter()
                .filter(|p| p.name() != "fuse")
                .collect();
            let sub = src.sample(0).unwrap();
            let opts = PlanOptions {
                bindings: Bindings {
                    nodes: sub.n_nodes(),
                    entries: sub.n_entries(),
                    pairs: sub.link.as_ref().map_or(0, |l| l.len()),
                },
                threads: 4,
                cache_bytes: 1 << 20,
                precision: Precision::F32,
                feature_density: None,
                type_feature_density: None,
            };
            plan_with(&mut plain, &passes, &opts).unwrap();
            let mut plain_wanted = vec![plain.output("loss").unwrap()];
            for (name, _) in &lowered.grads {
                plain_wanted.push(plain.output(&format!("grad/{name}")).unwrap());
            }
            let want = reference(&plain, &plain_wanted, &src, &params, 2, 7);
            let got_ref = reference(&fused, &wanted, &src, &params, 2, 7);
            let got_ex = ex
                .run_step(
                    StepInput::new(&fused, &wanted, &params)
                        .source(&src)
                        .step(2, 7)
                        .training(true),
                )
                .unwrap();
            for (k, (&w, &pw)) in wanted.iter().zip(&plain_wanted).enumerate() {
                let want = bits(want.get(pw).unwrap());
                for (how, got) in [("interpreter", &got_ref), ("executor", &got_ex)] {
                    assert!(
                        bits(got.get(w).unwrap()) == want,
                        "{} n={n}: output {k} fused ({how}) differs from unfused",
                        path.display()
                    );
                }
            }
        }
    }
}

#[test]
fn executor_equals_the_interpreter_bit_for_bit_on_every_shipped_plan() {
    let reg = Registry::with_builtins();
    let executors: Vec<Executor> = (1..=4)
        .map(|t: usize| Executor::new(t.try_into().unwrap()))
        .collect();
    // (nodes, degree, hidden): the shipped-plans test's size, and one large enough that
    // GEMMs split into row blocks and SpMMs into column blocks.
    for (n, degree, hidden) in [(21, 4, 16), (300, 8, 64)] {
        for (multilabel, seed) in [(false, 3), (true, 4)] {
            let base = MemorySource::random(n, degree, 6, 3, multilabel, seed);
            for path in shipped() {
                let src = common::source_for_plan(&path, &base);
                let (g, wanted, params) = planned(&path, hidden, &src, &reg);
                let want = reference(&g, &wanted, &src, &params, 2, 7);
                for ex in &executors {
                    let got = ex
                        .run_step(
                            StepInput::new(&g, &wanted, &params)
                                .source(&src)
                                .step(2, 7)
                                .training(true),
                        )
                        .unwrap();
                    assert_eq!(got.bindings, want.bindings);
                    for &w in &wanted {
                        assert!(
                            bits(got.get(w).unwrap()) == bits(want.get(w).unwrap()),
                            "{} n={n} hidden={hidden} multilabel={multilabel} on {} workers: \
                             %{} differs from the interpreter",
                            path.display(),
                            ex.threads(),
                            w.index()
                        );
                    }
                    let t = got.times;
                    assert!(
                        t.sampling > Duration::ZERO && t.aggregation > Duration::ZERO
                            || path.ends_with("mlp.toml")
                    );
                }
            }
        }
    }
}

/// bf16 (issue 33, item 4) on every shipped plan: every dense product of the step is
/// planned in bf16, the executor on 1–4 workers equals the interpreter bit for bit (the
/// row parts share one bf16-packed B), and the loss and gradients are the f32 step's to
/// bf16's precision — close, and not equal (bf16 did run). Close: the loss within 0.5 %
/// relative (measured ≤ 0.11 %, GIN), each gradient's error under 20 % of its norm. Measured on this test's graph:
/// gradients 0.01–10 % (first-step gradients are small sums of terms that cancel, and a
/// max aggregation's argmax flips on near-ties), where a packing or layout bug is O(1);
/// the kernels' own oracle tests (`ops/tests/bf16.rs`) bound each product tightly. On
/// a CPU without AVX512_BF16 a bf16 plan is refused at its `precision` value.
#[test]
fn bf16_steps_are_planned_in_bf16_equal_on_every_worker_count_and_close_to_f32() {
    let reg = Registry::with_builtins();
    let src = MemorySource::random(300, 8, 6, 3, false, 3);
    if let Err(why) = Precision::Bf16.check() {
        let text = "[dims]\nhidden = 8\n[[layer]]\nparams = { W = [\"in\", \"hidden\"] }\nout = \"relu(x @ W)\"\n[output]\nparams = { W_out = [\"in\", \"classes\"] }\nout = \"x @ W_out\"\n[compute]\nprecision = \"bf16\"\n";
        let p = Plan::parse(text, "bf16.toml").unwrap();
        let e = p.lower(&LowerEnv::of(&src, &reg)).unwrap_err().render();
        assert!(
            e.contains("bf16.toml:10:13:") && e.contains("AVX512_BF16"),
            "{e}"
        );
        eprintln!("bf16 steps not run here: {why}");
        return;
    }
    let executors: Vec<Executor> = (1..=4)
        .map(|t: usize| Executor::new(t.try_into().unwrap()))
        .collect();
    for path in shipped() {
        let src = common::source_for_plan(&path, &src);
        let (g32, wanted32, params) = planned(&path, 64, &src, &reg);
        let (g, wanted, _) = planned_at(&path, 64, &src, &reg, Precision::Bf16);
        let gemms: Vec<Gemm> = g
            .ids()
            .into_iter()
            .filter_map(|id| g.node(id).op.downcast_ref::<Gemm>().copied())
            .collect();
        assert!(
            !gemms.is_empty() && gemms.iter().all(|m| m.precision == Precision::Bf16),
            "{}: {gemms:?}",
            path.display()
        );
        let want = reference(&g, &wanted, &src, &params, 2, 7);
        for ex in &executors {
            let got = ex
                .run_step(
                    StepInput::new(&g, &wanted, &params)
                        .source(&src)
                        .step(2, 7)
                        .training(true),
                )
                .unwrap();
            for &w in &wanted {
                assert!(
                    bits(got.get(w).unwrap()) == bits(want.get(w).unwrap()),
                    "{} bf16 on {} workers: %{} differs from the interpreter",
                    path.display(),
                    ex.threads(),
                    w.index()
                );
            }
        }
        let f32_step = reference(&g32, &wanted32, &src, &params, 2, 7);
        let mut differs = false;
        for (k, (&w, &w32)) in wanted.iter().zip(&wanted32).enumerate() {
            // wanted[0] is the loss.
            let tol = if k == 0 { 5e-3 } else { 0.2 };
            let vals = |v: &Value| -> Vec<f64> {
                match v {
                    Value::Dense(t) => t.data.iter().map(|&x| f64::from(x)).collect(),
                    Value::Scalar(s) => vec![*s],
                    other => panic!("unexpected {other:?}"),
                }
            };
            let (a, b) = (vals(want.get(w).unwrap()), vals(f32_step.get(w32).unwrap()));
            let diff = a
                .iter()
                .zip(&b)
                .map(|(x, y)| (x - y).powi(2))
                .sum::<f64>()
                .sqrt();
            let norm = b.iter().map(|y| y * y).sum::<f64>().sqrt();
            assert!(
                diff <= tol * norm + 1e-12,
                "{} output %{}: bf16 is {diff:e} from f32 (norm {norm:e})",
                path.display(),
                w.index()
            );
            differs |= diff > 0.0;
        }
        assert!(differs, "{}: bf16 gave the f32 step's bits", path.display());
    }
}

fn dense(rows: usize, cols: usize, seed: u32) -> Tensor {
    let mut s = seed.wrapping_mul(2654435761).max(1);
    let data = (0..rows * cols)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s % 2001) as f32 / 1000.0 - 1.0
        })
        .collect();
    Tensor::from_vec(rows, cols, data).unwrap()
}

/// Runs every part of `op`'s split into one output, in reverse order (parts may run in
/// any order), and compares with `forward`.
fn split_extent(split: &dyn saintflow::op::AnySplit, out: &Tensor) -> usize {
    match split.axis() {
        saintflow::op::Axis::Rows => out.rows,
        saintflow::op::Axis::Cols => out.cols,
    }
}

fn parts_equal_forward(op: &dyn Op, inputs: &[&Value], ctx: &Ctx<'_>, threads: usize) {
    parts_equal(op, inputs, ctx, threads, true)
}

/// [`parts_equal_forward`] for an op whose parts accumulate into a zeroed output
/// (`writes_all` false: a scatter such as a reduce's backward).
fn parts_equal(op: &dyn Op, inputs: &[&Value], ctx: &Ctx<'_>, threads: usize, writes_all: bool) {
    let want = op.forward(inputs, ctx).unwrap();
    let want = want.as_dense().unwrap();
    let p = op
        .as_partitioned()
        .unwrap_or_else(|| panic!("{} is not partitioned", op.name()));
    let split = p
        .split_any(
            inputs,
            &Fact::dense(saintflow::ir::Dim::known(0), saintflow::ir::Dim::known(0)),
            ctx,
            threads,
        )
        .unwrap()
        .unwrap_or_else(|| panic!("{} did not split", op.name()));
    assert!(split.ranges().len() >= 2);
    // Every builtin split declares that its parts write their whole views (the executor
    // then skips the zero-fill); the output starts as NaN, so an element a part leaves
    // unwritten shows in the comparison below.
    assert_eq!(
        split.writes_all() && split.covers(split_extent(&*split, want)),
        writes_all,
        "{}: split writes its whole output?",
        op.name()
    );
    let start = if writes_all { f32::NAN } else { 0.0 };
    let mut out = Tensor::from_vec(want.rows, want.cols, vec![start; want.data.len()]).unwrap();
    for k in (0..split.ranges().len()).rev() {
        let r = split.ranges()[k].clone();
        let full = MatMut::row_major(&mut out.data, want.rows, want.cols).unwrap();
        let view = match split.axis() {
            saintflow::op::Axis::Rows => full.rows_mut(r).unwrap(),
            saintflow::op::Axis::Cols => full.cols_mut(r).unwrap(),
        };
        p.forward_part_any(inputs, ctx, &*split, k, view).unwrap();
    }
    let full = MatMut::row_major(&mut out.data, want.rows, want.cols).unwrap();
    p.finish_any(&*split, full).unwrap();
    assert!(
        out.data
            .iter()
            .zip(&want.data)
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "{} {}: parts differ from forward",
        op.name(),
        op.attrs()
    );
}

#[test]
fn gemm_row_blocks_spmm_column_blocks_and_row_wise_op_blocks_equal_the_whole_forward_bit_for_bit() {
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    one.install(|| {
        let params = Params::default();
        let src = MemorySource::random(500, 12, 4, 2, false, 9);
        let sub = src.sample(0).unwrap();
        let ctx = Ctx {
            source: None,
            params: &params,
            step: 0,
            seed: 0,
            training: false,
            node: NodeId::new(0),
            bindings: Bindings {
                nodes: sub.n_nodes(),
                entries: sub.n_entries(),
                pairs: 0,
            },
        };
        // Gemm, every transpose combination that splits, odd shapes.
        // The last: too few rows of C to split by rows, so it splits by columns.
        // (130, 4100, 192): k long enough for the kernel's two halves, which the split
        // makes parts of their own, added in `finish` (C not so narrow that it runs as Cᵀ);
        // (50, 4100, 300) the same on column blocks; (300, 4100, 2) a C of two columns (the
        // narrow path: row blocks, or for Xᵀ·∇Y the two halves alone).
        for (m, k, n) in [
            (333, 70, 41),
            (1000, 64, 64),
            (129, 300, 17),
            (50, 600, 300),
            (130, 4100, 192),
            (50, 4100, 300),
            (300, 4100, 2),
        ] {
            for (ta, tb) in [(false, false), (false, true), (true, false)] {
                let a = if ta { dense(k, m, 1) } else { dense(m, k, 1) };
                let b = if tb { dense(n, k, 2) } else { dense(k, n, 2) };
                let (a, b) = (Value::dense(a), Value::dense(b));
                for threads in [2, 3, 4] {
                    parts_equal_forward(&Gemm::new(ta, tb), &[&a, &b], &ctx, threads);
                }
            }
        }
        // ∇W = Xᵀ·∇Y of long k: each row block's second half of k is a part of its own (an
        // empty range of the output), added by `finish`.
        let (x, dy) = (
            Value::dense(dense(4100, 130, 1)),
            Value::dense(dense(4100, 192, 2)),
        );
        let gemm = Gemm::new(true, false);
        let split = gemm
            .as_partitioned()
            .unwrap()
            .split_any(
                &[&x, &dy],
                &Fact::dense(
                    saintflow::ir::Dim::known(130),
                    saintflow::ir::Dim::known(192),
                ),
                &ctx,
                2,
            )
            .unwrap()
            .unwrap();
        let blocks = split.ranges().len() / 2;
        assert_eq!(split.ranges().len(), 2 * blocks, "{split:?}");
        assert!(
            blocks >= 2 && split.ranges()[blocks..].iter().all(|r| r == &(130..130)),
            "{split:?}"
        );
        assert!(split.covers(130));
        // ∇W of a classifier (C of two columns, the narrow path): the two halves of a long
        // k as the only parts, whole rows of X each; a short k unsplit.
        let splits = |rows: usize| {
            let (x, dy) = (
                Value::dense(dense(rows, 300, 1)),
                Value::dense(dense(rows, 2, 2)),
            );
            let out = Fact::dense(saintflow::ir::Dim::known(300), saintflow::ir::Dim::known(2));
            gemm.as_partitioned()
                .unwrap()
                .split_any(&[&x, &dy], &out, &ctx, 2)
                .unwrap()
        };
        if saintflow_ops::gemm::narrow_path(saintflow_ops::gemm::Precision::F32, 300, 2) {
            let halves = splits(4100).expect("a long k splits");
            assert_eq!(halves.ranges(), [0..300, 300..300], "{halves:?}");
            assert!(splits(600).is_none(), "a short k of a narrow ∇W runs whole");
        }
        // Activations and their backwards: row blocks of an elementwise op.
        use saintflow::op::builtin::Activation;
        use saintflow::op::elementwise::{Map, MapGrad};
        use saintflow::op::{Elementwise, NeighbourReduce};
        let x = Value::dense(dense(700, 130, 5));
        let dy = Value::dense(dense(700, 130, 6));
        for act in [
            Activation::Relu,
            Activation::LeakyRelu { slope: 0.2 },
            Activation::Sigmoid,
            Activation::Tanh,
            Activation::Elu { alpha: 1.0 },
        ] {
            for threads in [2, 3] {
                let back = MapGrad {
                    f: act,
                    name: format!("{}_backward", act.name()),
                };
                parts_equal_forward(&Map(act), &[&x], &ctx, threads);
                parts_equal_forward(&back, &[&x, &dy], &ctx, threads);
            }
        }
        use saintflow::op::builtin::{L2Norm, L2NormBackward};
        // Concat and slice: row blocks of copies.
        use saintflow::op::builtin::{Concat, Slice};
        for threads in [2, 3] {
            parts_equal_forward(&Concat, &[&x, &dy, &x], &ctx, threads);
            parts_equal_forward(&Slice { start: 7, len: 100 }, &[&x], &ctx, threads);
        }
        for threads in [2, 3] {
            parts_equal_forward(&L2Norm, &[&x], &ctx, threads);
            parts_equal_forward(&L2NormBackward, &[&x, &dy], &ctx, threads);
        }
        // Spmm on a sampled adjacency, plain and transposed, planner's Q_f or the rule's.
        let adj = saintflow::op::builtin::Adjacency {
            kind: saintflow::op::builtin::AdjKind::Mean,
        };
        let s = adj
            .forward(&[&Value::Subgraph(Arc::new(sub.clone()))], &ctx)
            .unwrap();
        for f in [40, 200, 515] {
            let x = Value::dense(dense(sub.n_nodes(), f, 3));
            for transpose in [false, true] {
                for partitions in [Some(2), Some(5), Some(37), None] {
                    let op = Spmm {
                        transpose,
                        partitions,
                        view: None,
                    };
                    if partitions.is_none() && f <= 64 {
                        continue; // one panel: the kernel's rule does not split
                    }
                    parts_equal_forward(&op, &[&s, &x], &ctx, 2);
                }
            }
        }
        // A column view of X (the fusion pass's rewrite of `spmm(S, slice(G))`, as the
        // backward of `concat` makes): the same bits as the product on the sliced copy,
        // whole and in parts.
        let wide = dense(sub.n_nodes(), 300, 7);
        let cut: Vec<f32> = wide
            .data
            .chunks(300)
            .flat_map(|r| r[40..240].to_vec())
            .collect();
        let cut = Value::dense(Tensor::from_vec(sub.n_nodes(), 200, cut).unwrap());
        let wide = Value::dense(wide);
        for transpose in [false, true] {
            for partitions in [Some(5), None] {
                let plain = Spmm {
                    transpose,
                    partitions,
                    view: None,
                };
                let viewed = plain
                    .with_column_view(1, 40..240)
                    .expect("spmm reads views");
                assert!(
                    viewed.attrs().contains("X[:, 40..240]"),
                    "{}",
                    viewed.attrs()
                );
                let want = plain.forward(&[&s, &cut], &ctx).unwrap();
                let got = viewed.forward(&[&s, &wide], &ctx).unwrap();
                let bits = |v: &Value| {
                    let t = v.as_dense().unwrap();
                    (
                        t.rows,
                        t.cols,
                        t.data.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    )
                };
                assert!(
                    bits(&got) == bits(&want),
                    "viewed spmm, transpose {transpose}"
                );
                parts_equal_forward(viewed.as_ref(), &[&s, &wide], &ctx, 2);
            }
        }
        // The neighbour-reduce adapter: forward in row blocks, backward (a scatter) in
        // column blocks accumulating into zeros.
        use saintflow::op::builtin::Extreme;
        use saintflow::op::reduce::{Reduce, ReduceGrad};
        for f in [130, 515] {
            let x = Value::dense(dense(sub.n_nodes(), f, 3));
            let dy = Value::dense(dense(sub.n_nodes(), f, 4));
            for e in [Extreme::Max, Extreme::Min] {
                let back = ReduceGrad {
                    r: e,
                    name: format!("{}_backward", e.name()),
                };
                for threads in [2, 3] {
                    parts_equal_forward(&Reduce(e), &[&s, &x], &ctx, threads);
                    parts_equal(&back, &[&s, &x, &dy], &ctx, threads, false);
                }
            }
        }
    });
}

/// A test op: identity, except that it fails (`mode` 1) or panics (`mode` 2) at step 3.
#[derive(Debug)]
struct Faulty {
    mode: u8,
}

impl Op for Faulty {
    fn name(&self) -> &str {
        if self.mode == 1 {
            "test.fail"
        } else {
            "test.panic"
        }
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        Ok(inputs[0].clone())
    }
    fn forward(&self, inputs: &[&Value], ctx: &Ctx<'_>) -> Result<Value, OpError> {
        if ctx.step == 3 {
            if self.mode == 1 {
                return Err(OpError::Source("the disk is on fire".into()));
            }
            panic!("deliberate panic in a test op");
        }
        Ok(inputs[0].clone())
    }
    /// Identity: ∂x = ∇y.
    fn backward(
        &self,
        _: &mut saintflow::op::GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        Ok(vec![Some(grad)])
    }
}

fn with_timeout<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the executor hung (no result within 60 s)")
}

#[test]
fn a_failing_or_panicking_op_fails_the_step_without_hanging() {
    let mut reg = Registry::with_builtins();
    for mode in [1u8, 2] {
        let name = if mode == 1 { "test.fail" } else { "test.panic" };
        reg.register(name, &[], "test op", move |_: &Attrs| {
            Ok(Arc::new(Faulty { mode }) as Arc<dyn Op>)
        })
        .unwrap();
    }
    let reg = Arc::new(reg);
    for name in ["test.fail", "test.panic"] {
        for threads in 1..=4 {
            let reg = reg.clone();
            with_timeout(move || {
                let src = MemorySource::random(300, 8, 6, 3, false, 5);
                // GCN with the faulty op on the first layer's output: many tasks are in
                // flight (other branches, split products) when it fails.
                let text = format!(
                    "name = \"faulty\"\n[dims]\nhidden = 64\n[[layer]]\nparams = {{ W = [\"in\", \"hidden\"], V = [\"in\", \"hidden\"] }}\nout = \"relu(concat({name}(A_sym @ x @ W), A_sym @ x @ V))\"\n[output]\nparams = {{ W_out = [\"in\", \"classes\"] }}\nout = \"x @ W_out\"\n[loss]\nkind = \"auto\"\n"
                );
                let p =
                    Plan::parse(&text, "faulty.toml").unwrap_or_else(|e| panic!("{}", e.render()));
                let lowered = p
                    .lower(&LowerEnv::of(&src, &reg))
                    .unwrap_or_else(|e| panic!("{}", e.render()));
                let params = Params::init(&lowered.params, 1);
                let mut wanted = vec![lowered.loss];
                wanted.extend(lowered.grads.iter().map(|g| g.1));
                let ex = Executor::new(threads.try_into().unwrap());
                for step in 0..6 {
                    let r = ex.run_step(
                        StepInput::new(&lowered.graph, &wanted, &params)
                            .source(&src)
                            .step(step, 1)
                            .training(true),
                    );
                    if step == 3 {
                        let e = r.expect_err("step 3 must fail").to_string();
                        assert!(e.contains(name), "{e}");
                        if name == "test.fail" {
                            assert!(e.contains("the disk is on fire"), "{e}");
                        } else {
                            assert!(e.contains("panicked") && e.contains("deliberate"), "{e}");
                        }
                    } else {
                        // The steps around the failure run normally, on the same pool.
                        let want = reference(&lowered.graph, &wanted, &src, &params, step, 1);
                        let got = r.unwrap();
                        let _ = want.get(lowered.loss).unwrap();
                        assert_eq!(
                            bits(got.get(lowered.loss).unwrap()),
                            bits(want.get(lowered.loss).unwrap())
                        );
                    }
                }
            });
        }
    }
}

fn frontier_source(store: &GraphStore) -> StoreSource<'_> {
    let sampler = FrontierSampler::new(
        store.full(),
        FrontierParams {
            frontier: 20,
            budget: 150,
            ..Default::default()
        },
    )
    .unwrap();
    StoreSource::new(store, Box::new(sampler), 11, 1, None, Role::Train)
}

#[test]
fn prefetched_subgraphs_equal_direct_sampling_and_steps_on_them_equal_the_interpreter() {
    let tmp = tempfile::tempdir().unwrap();
    let path = common::small_store(tmp.path(), "g", 10, 3);
    let store = GraphStore::open(&path).unwrap();
    let src = frontier_source(&store);
    let direct: Vec<_> = (0..12).map(|i| src.sample(i).unwrap()).collect();
    let reg = Registry::with_builtins();
    let gcn = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/gcn.toml");
    let p = Plan::parse_with_overrides(
        &std::fs::read_to_string(&gcn).unwrap(),
        "gcn.toml",
        &["dims.hidden=32"],
    )
    .unwrap();
    let lowered = p.lower(&LowerEnv::of(&src, &reg)).unwrap();
    let params = Params::init(&lowered.params, 1);
    for threads in [1, 2, 3] {
        let ex = Executor::new(threads.try_into().unwrap());
        for ahead in [0, 1, 4] {
            // Asked directly, in order, with a gap (steps 5..7 skipped).
            Prefetch::scope(ex.pool(), &src, ahead, |pre| {
                for i in (0..5).chain(8..12) {
                    assert_eq!(pre.sample(i).unwrap(), direct[i as usize], "step {i}");
                }
            });
            // Asked by the steps' sample ops, on the workers, while steps compute.
            Prefetch::scope(ex.pool(), &src, ahead, |pre| {
                for step in 0..6 {
                    let got = ex
                        .run_step(
                            StepInput::new(&lowered.graph, &[lowered.loss], &params)
                                .source(pre)
                                .step(step, 1)
                                .training(true),
                        )
                        .unwrap();
                    let want = reference(&lowered.graph, &[lowered.loss], &src, &params, step, 1);
                    assert_eq!(got.bindings, want.bindings);
                    assert_eq!(
                        bits(got.get(lowered.loss).unwrap()),
                        bits(want.get(lowered.loss).unwrap()),
                        "step {step}, {threads} workers, {ahead} ahead"
                    );
                }
            });
        }
    }
}

/// Identity that remembers every value it makes, to see whether they are freed.
#[derive(Debug)]
struct Probe {
    made: Arc<Mutex<Vec<Weak<Tensor>>>>,
    calls: Arc<AtomicUsize>,
    /// (thread, rayon width) of every call.
    seen: Arc<Mutex<Vec<(std::thread::ThreadId, usize)>>>,
}

impl Op for Probe {
    fn name(&self) -> &str {
        "test.probe"
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        Ok(inputs[0].clone())
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.seen
            .lock()
            .unwrap()
            .push((std::thread::current().id(), rayon::current_num_threads()));
        let t = Arc::new(inputs[0].as_dense().unwrap().clone());
        self.made.lock().unwrap().push(Arc::downgrade(&t));
        Ok(Value::Dense(t))
    }
    /// Identity: ∂x = ∇y.
    fn backward(
        &self,
        _: &mut saintflow::op::GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        Ok(vec![Some(grad)])
    }
}

#[test]
fn many_steps_in_a_row_free_every_intermediate_on_p_one_thread_rayon_workers() {
    let made = Arc::new(Mutex::new(Vec::new()));
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut reg = Registry::with_builtins();
    {
        let (made, calls, seen) = (made.clone(), calls.clone(), seen.clone());
        reg.register(
            "test.probe",
            &[],
            "identity that tracks its outputs",
            move |_: &Attrs| {
                Ok(Arc::new(Probe {
                    made: made.clone(),
                    calls: calls.clone(),
                    seen: seen.clone(),
                }) as Arc<dyn Op>)
            },
        )
        .unwrap();
    }
    let src = MemorySource::random(200, 6, 6, 3, false, 8);
    let text = "name = \"probe\"\n[dims]\nhidden = 32\n[[layer]]\nrepeat = 2\nparams = { W = [\"in\", \"hidden\"] }\nout = \"relu(test.probe(A_sym @ x @ W))\"\n[output]\nparams = { W_out = [\"in\", \"classes\"] }\nout = \"x @ W_out\"\n[loss]\nkind = \"auto\"\n";
    let p = Plan::parse(text, "probe.toml").unwrap_or_else(|e| panic!("{}", e.render()));
    let lowered = p.lower(&LowerEnv::of(&src, &reg)).unwrap();
    let params = Params::init(&lowered.params, 1);
    let mut wanted = vec![lowered.loss];
    wanted.extend(lowered.grads.iter().map(|g| g.1));
    let ex = Executor::new(std::num::NonZeroUsize::new(3).unwrap());
    for step in 0..200 {
        let v = ex
            .run_step(
                StepInput::new(&lowered.graph, &wanted, &params)
                    .source(&src)
                    .step(step, 1)
                    .training(true),
            )
            .unwrap();
        // Every probe output was an intermediate: none may survive the step.
        assert!(
            made.lock().unwrap().iter().all(|w| w.strong_count() == 0),
            "step {step}: a value outlived its step"
        );
        made.lock().unwrap().clear();
        drop(v);
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        200 * 2,
        "each probe node runs once per step"
    );
    // No oversubscription: ops ran on the 3 workers only, each a one-thread rayon pool.
    let seen = seen.lock().unwrap();
    let threads: std::collections::HashSet<_> = seen.iter().map(|s| s.0).collect();
    assert!(threads.len() <= 3, "{} threads ran ops", threads.len());
    assert!(!threads.contains(&std::thread::current().id()));
    assert!(
        seen.iter().all(|s| s.1 == 1),
        "an op saw a rayon pool wider than 1"
    );
}

/// `scope_until` never samples a step at or past its end (an epoch's last step does not
/// start the next epoch's subgraphs), and every step asked for is sampled exactly once.
#[test]
fn prefetching_stops_at_the_end_of_the_range() {
    let tmp = tempfile::tempdir().unwrap();
    let path = common::small_store(tmp.path(), "g", 10, 3);
    let store = GraphStore::open(&path).unwrap();
    let src = frontier_source(&store);
    for threads in [1, 2, 3] {
        let ex = Executor::new(threads.try_into().unwrap());
        // A source that records which steps were sampled.
        let sampled = Mutex::new(Vec::new());
        let counting = WithSampler::new(&src, |step| {
            sampled.lock().unwrap().push(step);
            src.sample(step)
        });
        Prefetch::scope_until(ex.pool(), &counting, 4, 15, |pre| {
            for i in 10..15 {
                assert_eq!(pre.sample(i).unwrap(), src.sample(i).unwrap(), "step {i}");
            }
        });
        let mut got = sampled.into_inner().unwrap();
        got.sort_unstable();
        assert_eq!(got, (10..15).collect::<Vec<_>>(), "{threads} workers");
    }
}

/// The per-worker timeline (issue 33): every node the step ran has a span, every span is on
/// a worker of the pool, spans on one worker never overlap, a split node has its
/// preparation and one span per part, and a step without the option records none.
#[test]
fn the_timeline_records_every_task_and_part_on_its_worker() {
    use saintflow::exec::SpanKind;
    let reg = Registry::with_builtins();
    let src = MemorySource::random(1200, 8, 6, 3, false, 5);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/graphsage.toml");
    let (g, wanted, params) = planned(&path, 64, &src, &reg);
    let ex = Executor::new(std::num::NonZeroUsize::new(2).unwrap()).with_timeline(true);
    let got = ex
        .run_step(
            StepInput::new(&g, &wanted, &params)
                .source(&src)
                .step(2, 7)
                .training(true),
        )
        .unwrap();
    let t = got.timeline.expect("a timeline");
    assert_eq!(t.workers, 2);
    let ran: std::collections::HashSet<NodeId> = t.spans.iter().map(|s| s.node).collect();
    let needed = g.ancestors(&wanted);
    assert_eq!(ran.len(), needed.len(), "a span per node run");
    for w in 0..2 {
        let mut mine: Vec<_> = t.spans.iter().filter(|s| s.worker == w).collect();
        mine.sort_by_key(|s| s.start);
        for pair in mine.windows(2) {
            assert!(
                pair[0].end <= pair[1].start,
                "{:?} overlaps {:?}",
                pair[0],
                pair[1]
            );
        }
    }
    assert!(t.spans.iter().all(|s| s.worker < 2 && s.start <= s.end));
    let prepared: Vec<NodeId> = t
        .spans
        .iter()
        .filter(|s| s.kind == SpanKind::Prepare)
        .map(|s| s.node)
        .collect();
    assert!(!prepared.is_empty(), "GEMMs split at n = 1200");
    for id in prepared {
        assert!(t
            .spans
            .iter()
            .any(|s| s.node == id && matches!(s.kind, SpanKind::Part(_))));
    }
    let busy: std::time::Duration = t.busy().iter().sum();
    let by_k: std::time::Duration = t
        .concurrency()
        .iter()
        .enumerate()
        .map(|(k, d)| *d * k as u32)
        .sum();
    assert!(
        busy.abs_diff(by_k) < std::time::Duration::from_micros(50),
        "{busy:?} vs {by_k:?}"
    );
    let plain = Executor::new(std::num::NonZeroUsize::new(2).unwrap())
        .run_step(
            StepInput::new(&g, &wanted, &params)
                .source(&src)
                .step(2, 7)
                .training(true),
        )
        .unwrap();
    assert!(plain.timeline.is_none());
}
