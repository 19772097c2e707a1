//! The custom op through the public API: registered by name, made from attributes,
//! differentiated by saintflow's autodiff and checked against finite differences.

use std::sync::Arc;

use saintflow::exec::{check_gradients, GradCheck};
use saintflow::ir::{Graph, Params};
use saintflow::op::builtin::{Concat, Features, Sample};
use saintflow::op::{
    elementwise, Attr, Attrs, Bindings, Ctx, Elementwise, MemorySource, NodeId, Registry, Tensor,
    Value,
};
use saintflow::planner::{run_passes, Cse, PlanOptions};
use saintflow::testing::{check_blocked_equals_in_memory, check_op_gradients, Arg, CheckError};
use saintflow_example_custom_op::Swish;

#[test]
fn swish_registers_and_its_gradient_matches_finite_differences() {
    let mut registry = Registry::with_builtins();
    saintflow_example_custom_op::register(&mut registry).unwrap();
    // Registering twice is refused: no silent shadowing.
    assert!(saintflow_example_custom_op::register(&mut registry).is_err());
    let err = registry
        .make("user.swish", &Attrs::new().with("betta", Attr::Num(2.0)))
        .unwrap_err()
        .to_string();
    assert!(err.contains("did you mean `beta`"), "{err}");
    let swish = registry
        .make("user.swish", &Attrs::new().with("beta", Attr::Num(1.5)))
        .unwrap();
    assert_eq!(swish.attrs(), "beta=1.5");
    // What the adapter gives: a partitioned, row-local op.
    assert!(swish.as_partitioned().is_some() && swish.as_row_local().is_some());

    // The forward is x·σ(1.5x) elementwise, on both signs and a zero.
    let x = Tensor::from_vec(3, 4, (0..12).map(|i| i as f32 * 0.7 - 4.0).collect()).unwrap();
    let params = Params::default();
    let ctx = Ctx {
        source: None,
        params: &params,
        step: 0,
        seed: 0,
        training: true,
        node: NodeId::new(0),
        bindings: Bindings {
            nodes: 3,
            entries: 0,
            pairs: 0,
        },
    };
    let y = swish.forward(&[&Value::dense(x.clone())], &ctx).unwrap();
    for (&xi, &yi) in x.data.iter().zip(&y.as_dense().unwrap().data) {
        let want = f64::from(xi) / (1.0 + (-1.5 * f64::from(xi)).exp());
        assert!(
            (f64::from(yi) - want).abs() <= 1e-6 * (1.0 + want.abs()),
            "{yi} vs {want}"
        );
    }

    check_op_gradients(swish.clone(), &[Arg::Nodes(4)]).unwrap();
    check_blocked_equals_in_memory(swish, &[Arg::Nodes(4)]).unwrap();
}

/// A derivative that is off is reported by the one-call check (the check can fail).
#[test]
fn the_gradient_check_catches_a_wrong_derivative_of_a_user_op() {
    #[derive(Clone, Debug)]
    struct Off(Swish);
    impl Elementwise for Off {
        fn name(&self) -> &str {
            "user.swish_off"
        }
        fn f(&self, x: f32) -> f32 {
            self.0.f(x)
        }
        fn df(&self, x: f32) -> f32 {
            1.1 * self.0.df(x)
        }
    }
    let off = elementwise(Off(Swish { beta: 1.0 }));
    let err = check_op_gradients(off, &[Arg::Nodes(4)]).unwrap_err();
    assert!(matches!(err, CheckError::Gradients { .. }), "{err}");
}

/// Common-subexpression elimination keys on the op's identity, by default its `Debug`
/// text: `user.swish(x, beta=1)` and `user.swish(x, beta=2)` on one input stay two nodes,
/// while two `beta=1` are merged. (Before the identity, CSE keyed on `attrs()`, and an op
/// that did not write `attrs` was merged with its differently-parameterised twin.)
#[test]
fn cse_keeps_a_user_op_with_other_parameters_on_the_same_input() {
    /// Swish without `attrs`: the hazard the identity closes.
    #[derive(Clone, Debug)]
    struct Bare(f32);
    impl Elementwise for Bare {
        fn name(&self) -> &str {
            "user.bare"
        }
        fn f(&self, x: f32) -> f32 {
            Swish { beta: self.0 }.f(x)
        }
        fn df(&self, x: f32) -> f32 {
            Swish { beta: self.0 }.df(x)
        }
    }
    let mut g = Graph::new();
    let s = g.add(Arc::new(Sample), &[], "sample").unwrap();
    let x = g.add(Arc::new(Features { width: 5 }), &[s], "x").unwrap();
    let h1 = g.add(elementwise(Bare(1.0)), &[x], "k=1").unwrap();
    let h2 = g.add(elementwise(Bare(2.0)), &[x], "k=2").unwrap();
    let h3 = g.add(elementwise(Bare(1.0)), &[x], "k=1 again").unwrap();
    let out = g.add(Arc::new(Concat), &[h1, h2, h3], "concat").unwrap();
    g.set_output("out", out);
    run_passes(
        &mut g,
        &[Box::new(Cse)],
        &PlanOptions::new(
            Bindings {
                nodes: 10,
                entries: 40,
                pairs: 0,
            },
            saintflow::machine::cores(),
        ),
    )
    .unwrap();
    let bare: Vec<String> = g
        .ids()
        .into_iter()
        .filter(|&id| g.node(id).op.name() == "user.bare")
        .map(|id| g.node(id).op.identity())
        .collect();
    assert_eq!(bare.len(), 2, "{bare:?}");
    assert_ne!(bare[0], bare[1]);
}

#[test]
fn a_plan_file_uses_the_custom_op_and_its_whole_step_gradient_checks() {
    use saintflow::plan::{LowerEnv, Plan};
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("swish_gcn.toml");
    let plan = Plan::load(&path).unwrap();
    let src = MemorySource::random(21, 4, 6, 3, false, 9);
    // Without registration the plan names the unknown op, with its position.
    let bare = Registry::with_builtins();
    let err = plan
        .lower(&LowerEnv::of(&src, &bare))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("swish_gcn.toml:15:") && err.contains("user.swish"),
        "{err}"
    );
    let mut registry = Registry::with_builtins();
    saintflow_example_custom_op::register(&mut registry).unwrap();
    let lowered = plan
        .lower(&LowerEnv::of(&src, &registry))
        .unwrap_or_else(|e| panic!("{}", e.render()));
    let dump = saintflow::ir::dump::dump(&lowered.graph).unwrap();
    assert!(
        dump.contains("user.swish[beta=1.5]") && dump.contains("user.swish_backward"),
        "{dump}"
    );
    let params = Params::init(&lowered.params, 2);
    let bad = check_gradients(
        &lowered.graph,
        lowered.loss,
        &lowered.grads,
        &src,
        &params,
        GradCheck::default(),
    )
    .unwrap();
    assert!(bad.is_empty(), "{bad:#?}");
}
