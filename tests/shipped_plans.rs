//! Every shipped plan, whole: it parses, lowers, plans, and its whole training step —
//! forward, loss and every parameter's gradient — matches finite differences, planned and
//! unplanned (the autodiff test); and its `explain` output is pinned by a golden file.
//!
//! Re-bless the golden files after an intended change with
//! `SAINTFLOW_BLESS=1 cargo test --test shipped_plans`, and review the diff.

mod common;

use std::path::{Path, PathBuf};

use saintflow::exec::run;
use saintflow::ir::{Bindings, GraphSource, Params};
use saintflow::op::{MemorySource, Registry};
use saintflow::plan::{LowerEnv, Plan};
use saintflow::planner::{explain_text, plan, PlanOptions};

fn shipped() -> Vec<PathBuf> {
    common::gnn_plan_files()
}

#[test]
fn the_expected_plans_are_shipped() {
    let names: Vec<String> = shipped()
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    for want in [
        "gcn",
        "graphsage",
        "graphsage_max",
        "sage_pna",
        "tagcn",
        "mixhop",
        "gat",
        "gin",
        "mlp",
        "sgc",
        "appnp",
        "jknet",
        "gcnii",
        "gcn_batchnorm",
        "gcnii_pairnorm",
        "rgcn",
        "rgat",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} missing from {names:?}"
        );
    }
}

#[test]
fn every_shipped_plan_passes_the_whole_step_gradient_check_planned_and_unplanned() {
    let reg = Registry::with_builtins();
    for path in shipped() {
        // Small dims keep the check fast; the plan's structure is unchanged. (With ReLU, a
        // pre-activation within ε of its kink makes the finite difference one-sided: at
        // hidden = 8 MixHop has one, on this graph, at every ε from 1e-2 to 1e-4, while the
        // same plan with tanh, ELU or a LeakyReLU of slope 0.5 passes — so 16, a multiple of GAT's 8 heads.)
        let text = std::fs::read_to_string(&path).unwrap();
        let shipped = Plan::load(&path).unwrap();
        let mut overrides: Vec<String> = shipped
            .dims
            .keys()
            .filter(|k| *k == "hidden")
            .map(|k| format!("dims.{k}=16"))
            .collect();
        // A deep stack (GCNII's 64 copies) is checked at 4 copies, the same structure: its
        // first copies' gradients fall below what f32 finite differences resolve (about
        // 6e-6 at ε = 1e-2 on a loss of order 1), and among 64 × 21 × 16 ReLU inputs some
        // lie within ε of the kink (measured: `W.26` 5.7 % off at 64 copies).
        for (i, l) in shipped.layers.iter().enumerate() {
            if l.repeat > 8 {
                overrides.push(format!("layer.{i}.repeat=4"));
            }
        }
        let overrides: Vec<&str> = overrides.iter().map(String::as_str).collect();
        let file = path.display().to_string();
        let plan = Plan::parse_with_overrides(&text, &file, &overrides)
            .unwrap_or_else(|e| panic!("{}", e.render()));
        for (multilabel, seed) in [(false, 3), (true, 4)] {
            let mut src = MemorySource::random(21, 4, 6, 3, multilabel, seed);
            if let Some(task) = plan.task.link() {
                src = src.with_link(task.sampling);
            }
            let pairs = src.sample(0).unwrap().link.map_or(0, |l| l.len());
            let lowered = plan
                .lower(&LowerEnv::of(&src, &reg))
                .unwrap_or_else(|e| panic!("{}", e.render()));
            let mut params = Params::init(&lowered.params, 1);
            // Biases start at zero, so a row whose inputs dropout zeroes entirely (one in
            // 2^F rows) has a pre-activation exactly on ReLU's kink, where the finite
            // difference is the half-slope whatever ε: every parameter is moved off its
            // initial value by a small deterministic offset.
            let mut state = 0x9e37_79b9_7f4a_7c15u64;
            for d in &lowered.params {
                for v in &mut params.get_mut(&d.name).unwrap().data {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    *v += ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.2;
                }
            }
            let unplanned = common::check_off_kinks(
                &lowered.graph,
                lowered.loss,
                &lowered.grads,
                &src,
                &params,
            );
            assert!(unplanned.is_empty(), "{file} unplanned: {unplanned:#?}");

            let mut planned = lowered.graph.clone();
            let b = Bindings {
                nodes: 21,
                entries: src.graph.indices.len(),
                pairs,
            };
            plan_graph(
                &mut planned,
                &PlanOptions {
                    bindings: b,
                    threads: 2,
                    cache_bytes: 1 << 20,
                    precision: saintflow::planner::Precision::F32,
                    feature_density: None,
                    type_feature_density: None,
                },
            );
            // The planner renames nothing that matters: outputs are re-read by name.
            let loss = planned.output("loss").unwrap();
            let grads: Vec<(String, _)> = lowered
                .grads
                .iter()
                .map(|(name, _)| {
                    (
                        name.clone(),
                        planned.output(&format!("grad/{name}")).unwrap(),
                    )
                })
                .collect();
            let before = run(
                &lowered.graph,
                &[lowered.loss],
                Some(&src),
                &params,
                0,
                0,
                true,
            )
            .unwrap();
            let after = run(&planned, &[loss], Some(&src), &params, 0, 0, true).unwrap();
            let (l0, l1) = (
                before.get(lowered.loss).unwrap().as_scalar().unwrap(),
                after.get(loss).unwrap().as_scalar().unwrap(),
            );
            assert!(
                (l0 - l1).abs() <= 1e-5 * l0.abs().max(1.0),
                "{file}: loss {l0} unplanned, {l1} planned"
            );
            let bad = common::check_off_kinks(&planned, loss, &grads, &src, &params);
            assert!(bad.is_empty(), "{file} planned: {bad:#?}");
        }
    }
}

#[test]
fn explain_output_of_every_shipped_plan_matches_its_golden_file() {
    let reg = Registry::with_builtins();
    let bless = std::env::var_os("SAINTFLOW_BLESS").is_some();
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut stale = Vec::new();
    for path in shipped() {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        // The JPDC Table-3 shapes: F = 50, C = 2 (multi-label), n = 8000, nnz = 16·n;
        // fixed threads and cache so the file does not depend on the machine.
        let plan = Plan::load(&path).unwrap();
        let env = LowerEnv {
            n_features: 50,
            n_classes: 2,
            multilabel: true,
            registry: &reg,
            types: None,
        };
        let mut lowered = plan
            .lower(&env)
            .unwrap_or_else(|e| panic!("{}", e.render()));
        let options = PlanOptions {
            bindings: Bindings {
                nodes: 8000,
                entries: 128_000,
                pairs: plan
                    .task
                    .link()
                    .map_or(0, |t| t.sampling.expected_pairs(128_000)),
            },
            threads: 2,
            cache_bytes: 1 << 20,
            precision: saintflow::planner::Precision::F32,
            feature_density: None,
            type_feature_density: None,
        };
        let report = plan_graph(&mut lowered.graph, &options);
        let text = explain_text(&lowered.graph, &report);
        let file = golden.join(format!("{name}.txt"));
        if bless {
            std::fs::write(&file, &text).unwrap();
        } else {
            let want = std::fs::read_to_string(&file).unwrap_or_default();
            if want != text {
                stale.push(format!(
                    "{}: differs (first differing line: {:?})",
                    file.display(),
                    first_diff(&want, &text)
                ));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "re-bless with SAINTFLOW_BLESS=1 after reviewing:\n{}",
        stale.join("\n")
    );
}

fn plan_graph(g: &mut saintflow::ir::Graph, o: &PlanOptions) -> saintflow::planner::PlanReport {
    plan(g, o).unwrap()
}

fn first_diff(a: &str, b: &str) -> String {
    a.lines()
        .zip(b.lines())
        .find(|(x, y)| x != y)
        .map(|(x, y)| format!("{x} ≠ {y}"))
        .unwrap_or_else(|| format!("lengths {} vs {}", a.lines().count(), b.lines().count()))
}

/// The fusion pass takes a layer's products into the chain that reads them (issue 33:
/// concat and add_n in block buffers), but not a product narrower than its op(A) whose
/// op(A) nothing reads afterwards: GraphSAGE's second layer reads h (n × 2h) into
/// h·W_self (n × h), and fused into the concat's chain after the neighbour op that product
/// would keep h, twice as wide, alive until that chain — what blocked inference holds
/// across the neighbour op. In the training step the backward's ∇W = hᵀ·∇Y reads h later
/// anyway, so there it is fused; in the forward alone it stays whole.
#[test]
fn a_product_is_fused_unless_that_keeps_its_wider_operand_alive_longer() {
    use saintflow::op::fused::Fused;
    let reg = Registry::with_builtins();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/graphsage.toml");
    let plan_text = std::fs::read_to_string(&path).unwrap();
    let sage =
        Plan::parse_with_overrides(&plan_text, "graphsage.toml", &["dims.hidden=64"]).unwrap();
    let env = LowerEnv {
        n_features: 50,
        n_classes: 3,
        multilabel: false,
        registry: &reg,
        types: None,
    };
    let options = PlanOptions::new(
        Bindings {
            nodes: 2000,
            entries: 32_000,
            pairs: 0,
        },
        saintflow::machine::cores(),
    );
    // Fused gemm stages reading a value of 2h = 128 columns whole (h·W_self of layer 2,
    // k = 128 > its 64 columns), and those of any width.
    let gemm_stages = |forward_only: bool| {
        let mut g = sage.lower(&env).unwrap().graph;
        if forward_only {
            g.retain_outputs(|name| name == "logits");
        }
        plan(&mut g, &options).unwrap();
        let (mut wide, mut all) = (0, 0);
        for id in g.ids() {
            let node = g.node(id);
            let Some(f) = node.op.downcast_ref::<Fused>() else {
                continue;
            };
            for s in f.stages.iter().filter(|s| s.op.name() == "gemm") {
                all += 1;
                let k = s.facts[0].matrix().unwrap().1.as_known();
                let n = s.facts[1].matrix().unwrap().1.as_known();
                if (k, n, s.op.attrs().as_str()) == (Some(128), Some(64), "NN") {
                    wide += 1;
                }
            }
        }
        (wide, all)
    };
    // Where their time is reported: a chain with a layer's product under transformation,
    // the classifier's ∇H (k = 3) chain under other.
    let mut g = sage.lower(&env).unwrap().graph;
    plan(&mut g, &options).unwrap();
    let mut stages = Vec::new();
    for id in g.ids() {
        let op = &g.node(id).op;
        if op.downcast_ref::<Fused>().is_some() {
            stages.push((op.attrs(), op.stage()));
        }
    }
    use saintflow::op::Stage;
    for (attrs, stage) in &stages {
        let want = if attrs.starts_with("gemm[NT] → l2norm_backward") || !attrs.contains("gemm") {
            Stage::Other
        } else {
            Stage::Transformation
        };
        assert_eq!(*stage, want, "{attrs}");
    }
    assert!(stages.iter().any(|(_, s)| *s == Stage::Transformation));
    assert!(stages.iter().any(|(_, s)| *s == Stage::Other));
    let (wide, all) = gemm_stages(false);
    assert_eq!(wide, 1, "the training step fuses layer 2's h·W_self");
    // Layer 1's two products, layer 2's h·W_self, the logits (into the bias's add), the
    // backward's two ∇H·Wᵀ and the classifier's ∇H.
    assert_eq!(all, 7);
    let (wide, all) = gemm_stages(true);
    assert_eq!(wide, 0, "the forward alone keeps layer 2's h·W_self whole");
    // Layer 1's products (k = 50 over 64 columns) read a narrower value and are still
    // fused; the logits (k = 128 over 3 columns) take the l2norm before them into their
    // chain (l2norm's input is no wider than its output) but are not taken into the bias's
    // add, which would keep h alive in their place.
    assert_eq!(all, 3);
}
