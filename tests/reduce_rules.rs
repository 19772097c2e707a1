//! Issue 58 item 5: the neighbour-reduce adapter differentiates three classes of folds
//! (`Routing::{Weighted, Selected, Mapped}`) and refuses a fold outside the class it
//! declares, naming the rule, before anything runs; a non-linear aggregation written as a
//! mapped fold gets a correct gradient; the built-in `powermean_agg` on that class.

mod common;

use std::sync::Arc;

use saintflow::exec::GradCheck;
use saintflow::ir::{Params, SparseMat, Tensor, Value};
use saintflow::op::MemorySource;
use saintflow::op::{
    check_rule, neighbour_reduce, AdjKind, Attr, Attrs, NeighbourReduce, Op, Registry, Routing,
};
use saintflow::testing::{
    check_blocked_equals_in_memory, check_op_gradients, check_op_gradients_with, Arg,
};

/// The mean of squares Σ a·x² (with `A_mean`), declared with a routing of the test's
/// choosing and a map whose derivative is `slope`·x (2 is right).
#[derive(Clone, Debug)]
struct SumSquares {
    routing: Routing,
    slope: f32,
    root: bool,
}

impl NeighbourReduce for SumSquares {
    fn name(&self) -> &str {
        "user.sum_squares"
    }
    fn neutral(&self) -> f32 {
        0.0
    }
    fn fold(&self, acc: f32, a: f32, x: f32) -> f32 {
        acc + a * x * x
    }
    fn routing(&self) -> Routing {
        self.routing
    }
    fn map(&self, x: f32) -> (f32, f32) {
        (x * x, self.slope * x)
    }
    fn finish(&self, acc: f32) -> (f32, f32) {
        if self.root {
            let r = acc.max(0.0).sqrt();
            (r, if r > 0.0 { 0.5 / r } else { 0.0 })
        } else {
            (acc, 1.0)
        }
    }
}

fn sum_squares(routing: Routing, slope: f32, root: bool) -> SumSquares {
    SumSquares {
        routing,
        slope,
        root,
    }
}

/// What a user wrote wrongly before this check: a mean of squares declared `Weighted`
/// (whose backward routes a·∇Y, the derivative of acc + a·x) compiled and trained with a
/// wrong gradient. Now it is refused when its types are inferred, naming the rule, and the
/// library's gradient check reports that refusal instead of running.
#[test]
fn a_non_linear_fold_declared_weighted_is_refused_naming_the_rule() {
    let wrong = sum_squares(Routing::Weighted, 2.0, false);
    let e = check_rule(&wrong).unwrap_err().to_string();
    assert!(
        e.contains("user.sum_squares") && e.contains("acc + a·x") && e.contains("Mapped"),
        "{e}"
    );
    let e = check_op_gradients(
        neighbour_reduce(wrong),
        &[Arg::Adjacency(AdjKind::Mean), Arg::Nodes(3)],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("acc + a·x"), "{e}");
    // A fold that neither keeps acc nor x, declared Selected: refused too.
    #[derive(Clone, Debug)]
    struct Average;
    impl NeighbourReduce for Average {
        fn name(&self) -> &str {
            "user.average"
        }
        fn neutral(&self) -> f32 {
            0.0
        }
        fn fold(&self, acc: f32, _: f32, x: f32) -> f32 {
            0.5 * (acc + x)
        }
        fn routing(&self) -> Routing {
            Routing::Selected
        }
    }
    let e = check_rule(&Average).unwrap_err().to_string();
    assert!(e.contains("acc or x"), "{e}");
    // The built-ins keep their rules.
    for name in ["max_agg", "min_agg", "powermean_agg"] {
        let op = Registry::with_builtins().make(name, &Attrs::new()).unwrap();
        let f = saintflow::ir::Fact::dense(saintflow::ir::Dim::NODES, saintflow::ir::Dim::known(3));
        let a = saintflow::ir::Fact::Sparse {
            rows: saintflow::ir::Dim::NODES,
            nnz: saintflow::ir::Dim::ENTRIES,
            heads: 1,
        };
        op.infer(&[&a, &f]).unwrap();
    }
}

/// The same fold declared `Mapped` (g = x², g′ = 2x) checks against finite differences on
/// every adjacency flavour, and so does its root (h = √s, h′ = 1/(2√s)); blocked inference
/// equals the in-memory pass. A map that misstates its derivative is refused by name.
#[test]
fn a_non_linear_fold_declared_mapped_gets_a_correct_gradient() {
    for root in [false, true] {
        for kind in [AdjKind::Mean, AdjKind::Sym, AdjKind::Raw] {
            let args = [Arg::Adjacency(kind), Arg::Nodes(3)];
            let op = || neighbour_reduce(sum_squares(Routing::Mapped, 2.0, root));
            check_op_gradients(op(), &args).unwrap();
            check_blocked_equals_in_memory(op(), &args).unwrap();
        }
    }
    let e = check_rule(&sum_squares(Routing::Mapped, 1.0, false))
        .unwrap_err()
        .to_string();
    assert!(e.contains("map's derivative"), "{e}");
}

/// `powermean_agg` by hand: (mean of clamp(x, 0, 100)^p)^(1/p) per column, 0 for a node
/// without neighbours; p = 1 is the mean of the clamped values.
#[test]
fn powermean_agg_by_hand() {
    // Rows: 0 → {1, 2}, 1 → {}, 2 → {0}; A_mean's values 1/deg.
    let a = SparseMat::csr(vec![0, 2, 2, 3], vec![1, 2, 0], vec![0.5, 0.5, 1.0], 1);
    let x = Tensor::from_vec(3, 2, vec![4.0, -1.0, 1.0, 3.0, 3.0, 200.0]).unwrap();
    let p = Params::default();
    let make = |p: f64| {
        Registry::with_builtins()
            .make("powermean_agg", &Attrs::new().with("p", Attr::Num(p)))
            .unwrap()
    };
    let run = |op: Arc<dyn Op>| -> Vec<f32> {
        let y = op
            .forward(
                &[&Value::Sparse(a.clone()), &Value::dense(x.clone())],
                &common::op_ctx(&p, None),
            )
            .unwrap();
        y.as_dense().unwrap().data.clone()
    };
    let y = run(make(2.0));
    // Row 0: neighbours 1 (1, 3) and 2 (3, 200 → 100): √((1 + 9)/2), and √ of (9 + 10⁴)/2
    // clamped to 100 first, as PyG clamps the mean: 10.
    let want = [
        ((1.0f32 + 9.0) / 2.0).sqrt(),
        10.0,
        0.0,
        0.0,
        4.0,
        0.0, // neighbour 0's −1 clamps to 0
    ];
    for (g, w) in y.iter().zip(want) {
        assert!((g - w).abs() <= 1e-4 * w.max(1.0), "{y:?} vs {want:?}");
    }
    let y = run(make(1.0));
    assert!(
        (y[0] - 2.0).abs() < 1e-6 && (y[1] - 51.5).abs() < 1e-4,
        "{y:?}"
    );
    let e = Registry::with_builtins()
        .make("powermean_agg", &Attrs::new().with("p", Attr::Num(0.0)))
        .unwrap_err()
        .to_string();
    assert!(e.contains("p > 0"), "{e}");
}

/// `powermean_agg`'s gradient (p = 3, a small step: the clamp at 0 is a kink) and its
/// blocked inference.
#[test]
fn powermean_agg_passes_the_library_op_checks() {
    let op = || {
        Registry::with_builtins()
            .make("powermean_agg", &Attrs::new().with("p", Attr::Num(3.0)))
            .unwrap()
    };
    let small = GradCheck {
        eps: 1e-3,
        ..GradCheck::default()
    };
    for kind in [AdjKind::Mean, AdjKind::Raw] {
        let args = [Arg::Adjacency(kind), Arg::Nodes(3)];
        check_op_gradients_with(op(), &args, small).unwrap();
        check_blocked_equals_in_memory(op(), &args).unwrap();
    }
}

/// `multi_agg`, `std_agg` and `var_agg` are the expressions they stand for, bit for bit
/// (plans/README.md "Aggregations"): the same logits as the written-out plan.
#[test]
fn named_aggregations_are_their_expressions() {
    let src = MemorySource::random(37, 4, 5, 2, false, 4);
    let var = "(A_mean @ (x * x) - (A_mean @ x) * (A_mean @ x))";
    let cases = [
        (
            "multi_agg(A_mean, x) @ W".to_string(),
            format!("concat(A_mean @ x, max_agg(A_mean, x), min_agg(A_mean, x), sqrt({var})) @ W"),
            "4 * in",
        ),
        (
            "multi_agg(A_sym, x, aggrs=\\\"max, var\\\") @ W".to_string(),
            "concat(max_agg(A_sym, x), A_sym @ (x * x) - (A_sym @ x) * (A_sym @ x)) @ W"
                .to_string(),
            "2 * in",
        ),
        (
            "var_agg(A_mean, x) @ W".to_string(),
            format!("{var} @ W"),
            "in",
        ),
        (
            "std_agg(A_mean, x, eps=0.01) @ W".to_string(),
            format!("sqrt({var}, eps=0.01) @ W"),
            "in",
        ),
    ];
    for (named, written, rows) in cases {
        let plan = |out: &str| {
            common::one_layer_plan(out)
                .replace(r#"["in", "hidden"]"#, &format!(r#"["{rows}", "hidden"]"#))
        };
        let a = common::one_layer_logits_with(&plan(&named), &src);
        let b = common::one_layer_logits_with(&plan(&written), &src);
        assert_eq!(a, b, "{named}");
        assert!(a.iter().all(|v| v.is_finite()), "{named}");
    }
}

#[test]
fn named_aggregations_say_what_is_wrong() {
    for (out, says) in [
        (
            "multi_agg(A_mean, x, aggrs=\\\"mean,median\\\") @ W",
            "unknown aggregation `median`",
        ),
        ("multi_agg(A_mean) @ W", "takes 2 arguments"),
        ("var_agg(A_mean, x, eps=0.1) @ W", "no attribute `eps`"),
        ("multi_agg(A_mean, x, aggrs=3) @ W", "string of names"),
    ] {
        let e = common::lowering_error(&common::one_layer_plan(out));
        assert!(e.contains(says), "{out}: {e}");
    }
}

/// `softmax_agg` by hand: row 0 over neighbours with values 1 and 2 at t = 1 is
/// (e·1 + e²·2)/(e + e²); t = 0 is the mean; a per-column t; a node without neighbours 0.
#[test]
fn softmax_agg_by_hand() {
    let a = SparseMat::csr(vec![0, 2, 2, 3], vec![1, 2, 0], vec![9.0, 9.0, 9.0], 1);
    let x = Tensor::from_vec(3, 2, vec![5.0, -1.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
    let p = Params::default();
    let op = Registry::with_builtins()
        .make("softmax_agg", &Attrs::new())
        .unwrap();
    let run = |t: Tensor| -> Vec<f32> {
        let y = op
            .forward(
                &[
                    &Value::Sparse(a.clone()),
                    &Value::dense(x.clone()),
                    &Value::dense(t),
                ],
                &common::op_ctx(&p, None),
            )
            .unwrap();
        y.as_dense().unwrap().data.clone()
    };
    let e = std::f32::consts::E;
    let y = run(Tensor::from_vec(1, 1, vec![1.0]).unwrap());
    let want0 = (e + e * e * 2.0) / (e + e * e);
    let want1 = (e.powi(3) * 3.0 + e.powi(4) * 4.0) / (e.powi(3) + e.powi(4));
    assert!(
        (y[0] - want0).abs() < 1e-6 && (y[1] - want1).abs() < 1e-5,
        "{y:?}"
    );
    assert_eq!(&y[2..4], &[0.0, 0.0]);
    assert_eq!(&y[4..6], &[5.0, -1.0]); // one neighbour: its value, A's 9 unread
    let mean = run(Tensor::from_vec(1, 1, vec![0.0]).unwrap());
    assert!((mean[0] - 1.5).abs() < 1e-6 && (mean[1] - 3.5).abs() < 1e-6);
    let per = run(Tensor::from_vec(1, 2, vec![0.0, 1.0]).unwrap());
    assert!((per[0] - 1.5).abs() < 1e-6 && (per[1] - want1).abs() < 1e-5);
    // A large t stays finite (the row's maximum is subtracted) and tends to the maximum.
    let big = run(Tensor::from_vec(1, 1, vec![200.0]).unwrap());
    assert!(
        (big[0] - 2.0).abs() < 1e-4 && (big[1] - 4.0).abs() < 1e-4,
        "{big:?}"
    );
}

/// `softmax_agg`'s gradient in x and in a learnable t, one for all columns or one per
/// column, on every test graph; blocked inference equals the in-memory pass.
#[test]
fn softmax_agg_passes_the_library_op_checks() {
    let op = || {
        Registry::with_builtins()
            .make("softmax_agg", &Attrs::new())
            .unwrap()
    };
    // A tolerance of 1 % (the default 5 % let through a backward that dropped the
    // t·(x − y) term of ∂x, worth a few percent of ∂W at the harness's t).
    let tight = GradCheck {
        tolerance: 1e-2,
        ..GradCheck::default()
    };
    for kind in [AdjKind::Raw, AdjKind::Sym] {
        for t in [Arg::Param(1, 1), Arg::Param(1, 3)] {
            let args = [Arg::Adjacency(kind), Arg::Nodes(3), t];
            check_op_gradients_with(op(), &args, tight).unwrap_or_else(|e| panic!("{e}"));
            check_blocked_equals_in_memory(op(), &args).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

/// `softmax_agg` in a plan, its temperature a parameter of the layer (one for all columns,
/// or one per column, initialised to PyG's 1): the plan lowers and its forward is finite
/// (the op's gradients are checked above).
#[test]
fn softmax_agg_in_a_plan() {
    let src = MemorySource::random(29, 4, 5, 2, false, 6);
    for t in [r#"[1, 1]"#, r#"[1, "in"]"#] {
        let text = common::one_layer_plan("softmax_agg(A, x, t) @ W").replace(
            r#"params = { W = ["in", "hidden"] }"#,
            &format!(
                r#"params = {{ W = ["in", "hidden"], t = {{ shape = {t}, init = "ones" }} }}"#
            ),
        );
        let logits = common::one_layer_logits_with(&text, &src);
        assert!(logits.iter().all(|v| v.is_finite()), "{t}: {logits:?}");
    }
}
