//! The custom op through the public API: registered by name, made from attributes,
//! differentiated by saintflow's autodiff and checked against finite differences.

use std::sync::Arc;

use saintflow::autodiff::differentiate;
use saintflow::exec::{check_gradients, run, GradCheck};
use saintflow::ir::{Graph, Init, ParamDecl, Params};
use saintflow::op::builtin::{
    AdjKind, Adjacency, Features, Loss, LossKind, MatMul, Param, Sample, TargetsOp,
};
use saintflow::op::{Attr, Attrs, MemorySource, Registry};

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

    let src = MemorySource::random(19, 4, 5, 3, false, 4);
    let mut g = Graph::new();
    let s = g.add(Arc::new(Sample), &[], "sample").unwrap();
    let x = g.add(Arc::new(Features { width: 5 }), &[s], "x").unwrap();
    let a = g
        .add(Arc::new(Adjacency { kind: AdjKind::Sym }), &[s], "A_sym")
        .unwrap();
    let t = g
        .add(Arc::new(TargetsOp { classes: 3 }), &[s], "y")
        .unwrap();
    let decls = [
        ParamDecl {
            name: "W".into(),
            rows: 5,
            cols: 4,
            init: Init::Glorot,
        },
        ParamDecl {
            name: "W_out".into(),
            rows: 4,
            cols: 3,
            init: Init::Glorot,
        },
    ];
    let w = g
        .add(
            Arc::new(Param {
                name: "W".into(),
                rows: 5,
                cols: 4,
            }),
            &[],
            "W",
        )
        .unwrap();
    let wo = g
        .add(
            Arc::new(Param {
                name: "W_out".into(),
                rows: 4,
                cols: 3,
            }),
            &[],
            "W_out",
        )
        .unwrap();
    let z = g
        .add(Arc::new(MatMul::plain(3)), &[a, x, w], "A_sym @ x @ W")
        .unwrap();
    let h = g.add(swish, &[z], "user.swish(A_sym @ x @ W)").unwrap();
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
    let params = Params::init(&decls, 1);

    // The forward is x·σ(1.5x) elementwise.
    let v = run(&g, &[z, h], Some(&src), &params, 0, 0, true).unwrap();
    let (zv, hv) = (
        v.get(z).unwrap().as_dense().unwrap(),
        v.get(h).unwrap().as_dense().unwrap(),
    );
    for (&zi, &hi) in zv.data.iter().zip(&hv.data) {
        let want = zi / (1.0 + (-1.5 * zi).exp());
        assert!(
            (hi - want).abs() <= 1e-6 * (1.0 + want.abs()),
            "{hi} vs {want}"
        );
    }

    let named = vec![
        ("W".to_string(), grads.grads[0].1),
        ("W_out".to_string(), grads.grads[1].1),
    ];
    let bad = check_gradients(&g, loss, &named, &src, &params, GradCheck::default()).unwrap();
    assert!(bad.is_empty(), "{bad:#?}");
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
