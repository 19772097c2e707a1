//! The built-in ops of the IR: every forward op's backward through the whole-graph gradient
//! check (on graphs with an isolated node and on a single node), forward values against
//! direct loops, dropout's masks and statistics, a mutation check (a wrong backward must be
//! reported), and registration under the names plan files use.

use std::sync::Arc;

use saintflow::autodiff::differentiate;
use saintflow::exec::{check_gradients, run, Discrepancy, GradCheck};
use saintflow::ir::{
    Bindings, Dim, Fact, Graph, Init, NodeId, ParamDecl, Params, SparseMat, Structure, Tensor,
    Value,
};
use saintflow::op::builtin::{
    Add, AdjKind, Adjacency, Concat, DropoutBackward, Features, Gat, Loss, LossKind, MatMul,
    MeanHeads, Param, Sample, Scale, SliceBackward, TargetsOp,
};
use saintflow::op::{
    Arity, Attr, Attrs, Ctx, GradBuilder, GraphSource, MemorySource, Op, OpError, Registry,
};
use saintflow::testing::{
    check_blocked_equals_in_memory, check_op_gradients, check_op_gradients_with, Arg,
};

// ---------------------------------------------------------------------------------------
// Building small graphs by hand.

/// An op made through the registry, as a plan file would name it.
fn make(name: &str, attrs: &[(&str, f64)]) -> Arc<dyn Op> {
    let a = attrs
        .iter()
        .fold(Attrs::new(), |a, (k, v)| a.with(k, Attr::Num(*v)));
    Registry::with_builtins().make(name, &a).unwrap()
}

/// A graph under construction on `src`: the step's subgraph, features, targets, and the
/// parameters declared so far.
struct Net<'s> {
    g: Graph,
    src: &'s MemorySource,
    sample: NodeId,
    x: NodeId,
    decls: Vec<ParamDecl>,
    params: Vec<NodeId>,
}

impl<'s> Net<'s> {
    fn new(src: &'s MemorySource) -> Net<'s> {
        let mut g = Graph::new();
        let sample = g.add(Arc::new(Sample), &[], "sample").unwrap();
        let x = g
            .add(
                Arc::new(Features {
                    width: src.n_features,
                }),
                &[sample],
                "x",
            )
            .unwrap();
        Net {
            g,
            src,
            sample,
            x,
            decls: Vec::new(),
            params: Vec::new(),
        }
    }

    fn f(&self) -> usize {
        self.src.n_features
    }

    fn adj(&mut self, kind: AdjKind) -> NodeId {
        self.g
            .add(
                Arc::new(Adjacency { kind }),
                &[self.sample],
                kind.plan_name(),
            )
            .unwrap()
    }

    fn param(&mut self, name: &str, rows: usize, cols: usize, init: Init) -> NodeId {
        let id = self
            .g
            .add(
                Arc::new(Param {
                    name: name.into(),
                    rows,
                    cols,
                }),
                &[],
                name,
            )
            .unwrap();
        self.decls.push(ParamDecl {
            name: name.into(),
            rows,
            cols,
            init,
        });
        self.params.push(id);
        id
    }

    fn op(&mut self, op: Arc<dyn Op>, inputs: &[NodeId]) -> NodeId {
        let label = format!("{}[{}]", op.name(), op.attrs());
        self.g.add(op, inputs, label).unwrap()
    }

    fn mm(&mut self, inputs: &[NodeId]) -> NodeId {
        self.op(Arc::new(MatMul::plain(inputs.len())), inputs)
    }

    /// `A_sym @ x @ W1`: a first layer whose output depends on a parameter.
    fn layer(&mut self, width: usize) -> NodeId {
        let a = self.adj(AdjKind::Sym);
        let w = self.param("W1", self.f(), width, Init::Glorot);
        self.mm(&[a, self.x, w])
    }

    /// Adds the classifier `h @ W_out + b` and the loss, differentiates with respect to
    /// every parameter, and runs the gradient check. Returns the failures and each
    /// parameter's gradient norm.
    fn check(self, h: NodeId) -> (Vec<Discrepancy>, Vec<(String, f64)>) {
        self.check_with(h, GradCheck::default())
    }

    /// [`Net::check`] with the check's settings.
    fn check_with(
        mut self,
        h: NodeId,
        settings: GradCheck,
    ) -> (Vec<Discrepancy>, Vec<(String, f64)>) {
        let Some((_, width)) = self.g.fact(h).matrix() else {
            panic!("h is not a matrix")
        };
        let width = width.as_known().unwrap();
        let c = self.src.targets.classes;
        let w = self.param("W_out", width, c, Init::Glorot);
        let b = self.param("b", 1, c, Init::Const(0.1));
        let z = self.mm(&[h, w]);
        let z = self.op(Arc::new(Add), &[z, b]);
        let t = self
            .g
            .add(Arc::new(TargetsOp { classes: c }), &[self.sample], "y")
            .unwrap();
        let kind = if self.src.multilabel() {
            LossKind::SigmoidBce
        } else {
            LossKind::SoftmaxCe
        };
        let loss = self
            .g
            .add(Arc::new(Loss { kind }), &[z, t], "loss")
            .unwrap();
        let d = differentiate(&mut self.g, loss, &self.params).unwrap();
        self.g.validate().unwrap();
        let grads: Vec<(String, NodeId)> = self
            .decls
            .iter()
            .map(|d| d.name.clone())
            .zip(d.grads.iter().map(|x| x.1))
            .collect();
        let params = Params::init(&self.decls, 3);
        let bad = check_gradients(&self.g, loss, &grads, self.src, &params, settings).unwrap();
        let ids: Vec<NodeId> = grads.iter().map(|g| g.1).collect();
        let mut v = run(&self.g, &ids, Some(self.src), &params, 0, 0, true).unwrap();
        let norms = grads
            .iter()
            .map(|(name, id)| {
                let t = v.take(*id).unwrap();
                let t = t.as_dense().unwrap();
                let n2: f64 = t.data.iter().map(|&x| f64::from(x).powi(2)).sum();
                (name.clone(), n2.sqrt())
            })
            .collect();
        (bad, norms)
    }
}

/// The graphs every op is checked on: several nodes with the isolated node 0 (an empty
/// row) single- and multi-label, and a single node without edges.
fn sources() -> Vec<(&'static str, MemorySource)> {
    vec![
        ("23 nodes", MemorySource::random(23, 4, 6, 3, false, 11)),
        (
            "15 nodes, multi-label",
            MemorySource::random(15, 3, 5, 4, true, 7),
        ),
        ("a single node", MemorySource::random(1, 0, 3, 2, false, 5)),
    ]
}

/// Checks the graph `build` makes on every source; returns the gradient norms on the first.
fn grads_check(what: &str, build: impl Fn(&mut Net) -> NodeId) -> Vec<(String, f64)> {
    grads_check_with(what, GradCheck::default(), build)
}

/// [`grads_check`] with the check's settings.
fn grads_check_with(
    what: &str,
    settings: GradCheck,
    build: impl Fn(&mut Net) -> NodeId,
) -> Vec<(String, f64)> {
    let mut first = None;
    for (label, src) in sources() {
        assert_eq!(src.graph.neighbors(0).len(), 0, "node 0 is isolated");
        let mut net = Net::new(&src);
        let h = build(&mut net);
        let (bad, norms) = net.check_with(h, settings);
        assert!(bad.is_empty(), "{what} on {label}: {bad:#?}");
        first.get_or_insert(norms);
    }
    first.unwrap()
}

/// The gradient norm of parameter `name`.
fn norm_of(norms: &[(String, f64)], name: &str) -> f64 {
    norms.iter().find(|(n, _)| n == name).unwrap().1
}

// ---------------------------------------------------------------------------------------
// Gradient checks, one per forward op.

/// `op` through the library's one-call check (`saintflow::testing`), which panics with the
/// failing comparisons.
fn op_grads(op: Arc<dyn Op>, args: &[Arg]) {
    let name = format!("{}[{}]", op.name(), op.attrs());
    if let Err(e) = check_op_gradients(op, args) {
        panic!("{name}: {e}");
    }
}

#[test]
fn leaky_relu_gradient() {
    for slope in [0.2, 0.05] {
        op_grads(make("leaky_relu", &[("slope", slope)]), &[Arg::Nodes(5)]);
    }
}

#[test]
fn sigmoid_gradient() {
    op_grads(make("sigmoid", &[]), &[Arg::Nodes(5)]);
}

#[test]
fn tanh_gradient() {
    op_grads(make("tanh", &[]), &[Arg::Nodes(5)]);
}

/// √max(x, ε): its gradient on every test graph (a small step: the clamp at ε is a kink,
/// and `features @ W` puts values on both sides of it), the value by hand, and the clamp's
/// zero gradient.
#[test]
fn sqrt_gradient_and_values() {
    let small = GradCheck {
        eps: 1e-3,
        ..GradCheck::default()
    };
    check_op_gradients_with(make("sqrt", &[("eps", 1e-2)]), &[Arg::Nodes(5)], small)
        .unwrap_or_else(|e| panic!("{e}"));
    let p = Params::default();
    let op = make("sqrt", &[]);
    let x = Tensor::from_vec(1, 4, vec![4.0, 0.0, -3.0, 2.25]).unwrap();
    let y = op.forward(&[&Value::dense(x)], &ctx(&p, None, 0)).unwrap();
    let want = [2.0, 1e-5f32.sqrt(), 1e-5f32.sqrt(), 1.5];
    assert_eq!(y.as_dense().unwrap().data, want);
}

#[test]
fn elu_gradient() {
    for alpha in [1.0, 0.5] {
        op_grads(make("elu", &[("alpha", alpha)]), &[Arg::Nodes(5)]);
    }
}

#[test]
fn relu_gradient() {
    op_grads(make("relu", &[]), &[Arg::Nodes(5)]);
}

#[test]
fn l2norm_gradient() {
    op_grads(make("l2norm", &[]), &[Arg::Nodes(5)]);
}

#[test]
fn concat_gradient_with_an_argument_that_needs_none() {
    // Two differentiated blocks around the raw features (no gradient).
    op_grads(
        make("concat", &[]),
        &[Arg::Nodes(3), Arg::Features, Arg::Nodes(4)],
    );
}

#[test]
fn slice_gradient() {
    op_grads(
        make("slice", &[("start", 1.0), ("len", 3.0)]),
        &[Arg::Nodes(6)],
    );
}

#[test]
fn sub_gradient() {
    op_grads(make("sub", &[]), &[Arg::Nodes(4), Arg::Nodes(4)]);
}

#[test]
fn mul_gradient_also_of_a_square() {
    op_grads(make("mul", &[]), &[Arg::Nodes(4), Arg::Nodes(4)]);
    // mul(p, p): both arguments are one node, autodiff sums the two gradients.
    op_grads(make("mul", &[]), &[Arg::Nodes(4), Arg::Same(0)]);
}

#[test]
fn scale_gradient() {
    op_grads(make("scale", &[("c", -1.5)]), &[Arg::Nodes(4)]);
}

#[test]
fn mean_heads_gradient() {
    op_grads(make("mean_heads", &[("heads", 3.0)]), &[Arg::Nodes(6)]);
}

#[test]
fn add_gradient_with_a_bias_row_and_of_two_matrices() {
    op_grads(Arc::new(Add), &[Arg::Nodes(4), Arg::Param(1, 4)]);
    op_grads(Arc::new(Add), &[Arg::Nodes(4), Arg::Nodes(4)]);
}

#[test]
fn matmul_gradient_dense_and_through_every_adjacency() {
    op_grads(
        Arc::new(MatMul::plain(2)),
        &[Arg::Nodes(4), Arg::Param(4, 3)],
    );
    for kind in AdjKind::ALL {
        op_grads(
            Arc::new(MatMul::plain(3)),
            &[Arg::Adjacency(kind), Arg::Nodes(4), Arg::Param(4, 3)],
        );
    }
}

#[test]
fn dropout_gradient() {
    for p in [0.3, 0.5] {
        op_grads(make("dropout", &[("p", p)]), &[Arg::Nodes(5)]);
    }
}

#[test]
fn dropout_outside_training_is_its_input_itself_and_masks_in_training() {
    let params = Params::default();
    let x = Value::dense(matrix(300, 7, 3));
    let mut c = ctx(&params, None, 2);
    for p in [0.0, 0.5] {
        let op = make("dropout", &[("p", p)]);
        c.training = false;
        let y = op.forward(&[&x], &c).unwrap();
        let (xd, yd) = (x.as_dense().unwrap(), y.as_dense().unwrap());
        assert!(std::ptr::eq(xd, yd), "p {p}: evaluation shares x, no copy");
        assert!(op
            .as_partitioned()
            .unwrap()
            .split_any(&[&x], &Fact::dense(Dim::known(300), Dim::known(7)), &c, 4)
            .unwrap()
            .is_none());
        c.training = true;
        let y = op.forward(&[&x], &c).unwrap();
        let yd = y.as_dense().unwrap();
        let zeroed = yd
            .data
            .iter()
            .zip(&xd.data)
            .filter(|(y, x)| **y == 0.0 && **x != 0.0)
            .count();
        if p == 0.0 {
            assert!(std::ptr::eq(xd, yd), "p 0 in training shares x too");
        } else {
            assert!(
                !std::ptr::eq(xd, yd) && zeroed > 300,
                "p {p}: {zeroed} dropped"
            );
        }
    }
}

#[test]
fn max_agg_and_min_agg_gradients_and_blocked_forward() {
    // A small step: an extremum is piecewise linear, and the step must not move an argmax.
    let small = GradCheck {
        eps: 1e-3,
        ..GradCheck::default()
    };
    for name in ["max_agg", "min_agg"] {
        for kind in [AdjKind::Raw, AdjKind::Mean] {
            let args = [Arg::Adjacency(kind), Arg::Nodes(4)];
            check_op_gradients_with(make(name, &[]), &args, small)
                .unwrap_or_else(|e| panic!("{e}"));
            check_blocked_equals_in_memory(make(name, &[]), &args)
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

#[test]
fn gat_op_gradient_one_and_several_heads() {
    // ε = 10⁻³: see the whole-layer GAT test below.
    let small = GradCheck {
        eps: 1e-3,
        ..GradCheck::default()
    };
    // With attention dropout (GAT's 0.6 on Cora) the mask is drawn in the forward and
    // recomputed in the backward, whose softmax term takes α recomputed undropped.
    for (kind, heads, dropout) in [
        (AdjKind::Sym, 1, 0.0),
        (AdjKind::Raw, 3, 0.0),
        (AdjKind::Sym, 1, 0.5),
        (AdjKind::Raw, 3, 0.6),
    ] {
        let w = 3 * heads;
        let args = [
            Arg::Adjacency(kind),
            Arg::Nodes(w),
            Arg::Param(1, w),
            Arg::Param(1, w),
        ];
        let op = make(
            "gat",
            &[
                ("heads", heads as f64),
                ("slope", 0.2),
                ("dropout", dropout),
            ],
        );
        check_op_gradients_with(op.clone(), &args, small).unwrap_or_else(|e| panic!("{e}"));
        check_blocked_equals_in_memory(op, &args).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn row_local_builtins_compute_blocks_as_the_whole() {
    for (op, args) in [
        (make("relu", &[]), vec![Arg::Nodes(5)]),
        (make("elu", &[]), vec![Arg::Nodes(5)]),
        (make("sqrt", &[]), vec![Arg::Nodes(5)]),
        (make("l2norm", &[]), vec![Arg::Nodes(5)]),
        (make("mul", &[]), vec![Arg::Nodes(3), Arg::Nodes(3)]),
        (Arc::new(Add), vec![Arg::Nodes(3), Arg::Param(1, 3)]),
    ] {
        check_blocked_equals_in_memory(op, &args).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn dropout_gradient_in_training_mode_with_two_masks_of_one_input() {
    // Two dropouts of one value draw different masks; each backward must recompute its own.
    grads_check("dropout", |n| {
        let z = n.layer(5);
        let d1 = n.op(make("dropout", &[("p", 0.3)]), &[z]);
        let d2 = n.op(make("dropout", &[("p", 0.5)]), &[z]);
        n.op(make("concat", &[]), &[d1, d2])
    });
}

/// GAT on `adj`: z = x @ W, α = gat(adj, z, a_l, a_r), h = elu(α @ z), then the heads'
/// mean when there are several.
fn gat_layer(n: &mut Net, adj: AdjKind, heads: usize) -> NodeId {
    let f = 3;
    let a = n.adj(adj);
    let w = n.param("W", n.f(), heads * f, Init::Glorot);
    let a_l = n.param("a_l", 1, heads * f, Init::Glorot);
    let a_r = n.param("a_r", 1, heads * f, Init::Glorot);
    let z = n.mm(&[n.x, w]);
    let alpha = n.op(
        make("gat", &[("heads", heads as f64), ("slope", 0.2)]),
        &[a, z, a_l, a_r],
    );
    let h = n.mm(&[alpha, z]);
    let h = n.op(make("elu", &[]), &[h]);
    if heads > 1 {
        n.op(make("mean_heads", &[("heads", heads as f64)]), &[h])
    } else {
        h
    }
}

#[test]
fn gat_gradient_one_and_several_heads_with_and_without_self_loops() {
    for (adj, heads) in [
        (AdjKind::Sym, 1),
        (AdjKind::Sym, 2),
        (AdjKind::Raw, 3),
        (AdjKind::Mean, 2),
    ] {
        // ∂a_l flows only through rows whose scores straddle LeakyReLU's kink (a shift of
        // s_l[u] shared by a whole row of one sign leaves its softmax unchanged), so it is
        // small, and central differences that step across a kink err by O(ε): measured at
        // ε = 10⁻² up to 100 % on a_l, at ε = 10⁻³ below 3 %, the f32 rounding term
        // (∝ 1/ε) then still small (see exec::gradcheck). Every other op keeps ε = 10⁻².
        let settings = GradCheck {
            eps: 1e-3,
            ..GradCheck::default()
        };
        let norms = grads_check_with(&format!("gat {adj:?} heads={heads}"), settings, |n| {
            gat_layer(n, adj, heads)
        });
        // The attention vectors get a gradient (else the check would pass trivially).
        for p in ["a_l", "a_r"] {
            assert!(
                norm_of(&norms, p) > 1e-4,
                "{adj:?} heads={heads}: ∂{p} = {norms:?}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Forward values against direct loops.

/// A context for calling an op's forward directly.
fn ctx<'a>(params: &'a Params, source: Option<&'a dyn GraphSource>, node: usize) -> Ctx<'a> {
    Ctx {
        source,
        params,
        step: 4,
        seed: 9,
        training: true,
        node: NodeId::new(node),
        bindings: Bindings {
            nodes: 0,
            entries: 0,
            pairs: 0,
        },
    }
}

/// A deterministic n × c matrix with both signs, exact zeros and a zero row (row 1).
fn matrix(n: usize, c: usize, seed: u32) -> Tensor {
    let mut s = seed.wrapping_mul(2_654_435_761).max(1);
    let data = (0..n * c)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            if i / c.max(1) == 1 || i % 7 == 3 {
                0.0
            } else {
                (s % 2001) as f32 / 500.0 - 2.0
            }
        })
        .collect();
    Tensor::from_vec(n, c, data).unwrap()
}

fn forward(op: &Arc<dyn Op>, inputs: &[Value]) -> Value {
    let p = Params::default();
    let refs: Vec<&Value> = inputs.iter().collect();
    op.forward(&refs, &ctx(&p, None, 0)).unwrap()
}

fn forward1(op: &Arc<dyn Op>, x: &Tensor) -> Tensor {
    forward(op, &[Value::dense(x.clone())])
        .as_dense()
        .unwrap()
        .clone()
}

fn assert_close(got: &[f32], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (f64::from(g) - w).abs() <= tol * (1.0 + w.abs()),
            "{what}[{i}]: got {g}, expected {w}"
        );
    }
}

#[test]
fn activations_forward_match_direct_loops() {
    let x = matrix(9, 7, 1);
    let xs: Vec<f64> = x.data.iter().map(|&v| f64::from(v)).collect();
    type Reference = Box<dyn Fn(f64) -> f64>;
    let cases: Vec<(Arc<dyn Op>, Reference)> = vec![
        (
            make("leaky_relu", &[]),
            Box::new(|v| if v > 0.0 { v } else { 0.2 * v }),
        ),
        (
            make("leaky_relu", &[("slope", 0.01)]),
            Box::new(|v| if v > 0.0 { v } else { 0.01 * v }),
        ),
        (
            make("elu", &[]),
            Box::new(|v| if v > 0.0 { v } else { v.exp() - 1.0 }),
        ),
        (
            make("elu", &[("alpha", 0.5)]),
            Box::new(|v| if v > 0.0 { v } else { 0.5 * (v.exp() - 1.0) }),
        ),
        (make("sigmoid", &[]), Box::new(|v| 1.0 / (1.0 + (-v).exp()))),
        (make("tanh", &[]), Box::new(f64::tanh)),
        (make("scale", &[("c", -2.5)]), Box::new(|v| -2.5 * v)),
    ];
    for (op, f) in cases {
        let want: Vec<f64> = xs.iter().map(|&v| f(v)).collect();
        assert_close(&forward1(&op, &x).data, &want, 1e-6, op.name());
    }
    // Binary elementwise ops.
    let y = matrix(9, 7, 2);
    let sub = forward(
        &make("sub", &[]),
        &[Value::dense(x.clone()), Value::dense(y.clone())],
    );
    let mul = forward(
        &make("mul", &[]),
        &[Value::dense(x.clone()), Value::dense(y.clone())],
    );
    let want_sub: Vec<f64> = x
        .data
        .iter()
        .zip(&y.data)
        .map(|(&a, &b)| f64::from(a - b))
        .collect();
    let want_mul: Vec<f64> = x
        .data
        .iter()
        .zip(&y.data)
        .map(|(&a, &b)| f64::from(a) * f64::from(b))
        .collect();
    assert_close(&sub.as_dense().unwrap().data, &want_sub, 1e-6, "sub");
    assert_close(&mul.as_dense().unwrap().data, &want_mul, 1e-6, "mul");
}

#[test]
fn l2norm_forward_gives_unit_rows_and_keeps_a_zero_row() {
    let x = matrix(8, 5, 3);
    let y = forward1(&make("l2norm", &[]), &x);
    for i in 0..x.rows {
        let norm: f64 = x
            .row(i)
            .iter()
            .map(|&v| f64::from(v).powi(2))
            .sum::<f64>()
            .sqrt();
        let want: Vec<f64> = x
            .row(i)
            .iter()
            .map(|&v| if norm > 0.0 { f64::from(v) / norm } else { 0.0 })
            .collect();
        assert_close(y.row(i), &want, 1e-6, &format!("l2norm row {i}"));
    }
    assert!(y.row(1).iter().all(|&v| v == 0.0), "row 1 is zero");
    // No columns at all: nothing to normalise, no error.
    assert_eq!(
        forward1(&make("l2norm", &[]), &Tensor::zeros(3, 0))
            .data
            .len(),
        0
    );
}

#[test]
fn concat_and_slice_forward_place_blocks_and_slice_back() {
    let parts = [
        matrix(5, 2, 4),
        Tensor::zeros(5, 0),
        matrix(5, 3, 5),
        matrix(5, 1, 6),
    ];
    let values: Vec<Value> = parts.iter().map(|t| Value::dense(t.clone())).collect();
    let y = forward(&make("concat", &[]), &values);
    let y = y.as_dense().unwrap().clone();
    assert_eq!((y.rows, y.cols), (5, 6));
    for i in 0..5 {
        let want: Vec<f32> = parts.iter().flat_map(|p| p.row(i).to_vec()).collect();
        assert_eq!(y.row(i), &want[..], "row {i}");
    }
    let mut start = 0;
    for p in &parts {
        let s: Arc<dyn Op> = make("slice", &[("start", start as f64), ("len", p.cols as f64)]);
        assert_eq!(&forward1(&s, &y), p, "slice at {start}");
        // The backward of slice places the block back among zero columns.
        let pad: Arc<dyn Op> = Arc::new(SliceBackward { start, cols: 6 });
        let back = forward1(&pad, p);
        for i in 0..5 {
            for j in 0..6 {
                let want = if (start..start + p.cols).contains(&j) {
                    p.row(i)[j - start]
                } else {
                    0.0
                };
                assert_eq!(back.row(i)[j], want, "slice_backward ({i}, {j})");
            }
        }
        start += p.cols;
    }
}

/// `psum(x, q)` (MixHop's output layer): its gradients with respect to x and q on every
/// test graph, S = 1, 2, 3 blocks; blocked = in-memory.
#[test]
fn psum_gradient_and_blocked_forward() {
    for (s, c) in [(1, 4), (2, 3), (3, 2)] {
        let args = [Arg::Nodes(s * c), Arg::Param(1, s)];
        check_op_gradients(make("psum", &[]), &args).unwrap_or_else(|e| panic!("{e}"));
        check_blocked_equals_in_memory(make("psum", &[]), &args).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// `psum` by hand: the blocks weighed by softmax(q) in f64; q = 0 is `mean_heads`; a q
/// that is not a [1, S] row dividing x's width is refused.
#[test]
fn psum_forward_weighs_the_blocks_by_softmax_q() {
    let x = matrix(5, 12, 3);
    for q in [vec![0.5f32, -1.0, 2.0], vec![0.0, 0.0, 0.0], vec![3.0, 1.0]] {
        let s = q.len();
        let c = 12 / s;
        let qt = Tensor::from_vec(1, s, q.clone()).unwrap();
        let y = forward(
            &make("psum", &[]),
            &[Value::dense(x.clone()), Value::dense(qt)],
        );
        let y = y.as_dense().unwrap();
        let e: Vec<f64> = q.iter().map(|&v| f64::from(v).exp()).collect();
        let z: f64 = e.iter().sum();
        let want: Vec<f64> = (0..5)
            .flat_map(|i| {
                let (x, e) = (&x, &e);
                (0..c).map(move |j| {
                    (0..s)
                        .map(|b| e[b] / z * f64::from(x.row(i)[b * c + j]))
                        .sum::<f64>()
                })
            })
            .collect();
        assert_close(&y.data, &want, 1e-6, &format!("psum q={q:?}"));
        if q.iter().all(|&v| v == 0.0) {
            let mean = forward1(&make("mean_heads", &[("heads", s as f64)]), &x);
            let got: Vec<f64> = y.data.iter().map(|&v| f64::from(v)).collect();
            assert_close(&mean.data, &got, 1e-6, "psum with q = 0 against mean_heads");
        }
    }
    let p = Params::default();
    let bad = Tensor::from_vec(1, 5, vec![0.0; 5]).unwrap();
    let e = make("psum", &[])
        .forward(
            &[&Value::dense(x.clone()), &Value::dense(bad)],
            &ctx(&p, None, 0),
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("not 5 equal blocks"), "{e}");
}

#[test]
fn mean_heads_forward_averages_the_column_blocks() {
    let x = matrix(6, 12, 7);
    for heads in [1, 2, 3, 4] {
        let f = 12 / heads;
        let y = forward1(&make("mean_heads", &[("heads", heads as f64)]), &x);
        assert_eq!((y.rows, y.cols), (6, f));
        let want: Vec<f64> = (0..6)
            .flat_map(|i| {
                let x = &x;
                (0..f).map(move |j| {
                    (0..heads)
                        .map(|h| f64::from(x.row(i)[h * f + j]))
                        .sum::<f64>()
                        / heads as f64
                })
            })
            .collect();
        assert_close(&y.data, &want, 1e-6, &format!("mean_heads heads={heads}"));
    }
}

/// Naive GAT attention in f64: per row u and head h, the softmax over u's entries of
/// LeakyReLU(⟨z_u,h, a_l,h⟩ + ⟨z_v,h, a_r,h⟩); entries whose `values` is 0 are no
/// neighbours (α 0, out of the softmax).
fn naive_gat(
    st: &Structure,
    values: &[f32],
    z: &Tensor,
    a_l: &Tensor,
    a_r: &Tensor,
    heads: usize,
    slope: f64,
) -> Vec<f64> {
    let f = z.cols / heads;
    let dot = |u: usize, a: &Tensor, h: usize| -> f64 {
        (0..f)
            .map(|j| f64::from(z.row(u)[h * f + j]) * f64::from(a.data[h * f + j]))
            .sum()
    };
    let mut alpha = vec![0.0; st.nnz() * heads];
    for u in 0..st.n_rows() {
        for h in 0..heads {
            let scores: Vec<f64> = st
                .row(u)
                .filter(|&k| values[k] != 0.0)
                .map(|k| {
                    let e = dot(u, a_l, h) + dot(st.indices[k] as usize, a_r, h);
                    if e > 0.0 {
                        e
                    } else {
                        slope * e
                    }
                })
                .collect();
            let sum: f64 = scores.iter().map(|e| e.exp()).sum();
            for (k, e) in st.row(u).filter(|&k| values[k] != 0.0).zip(&scores) {
                alpha[k * heads + h] = e.exp() / sum;
            }
        }
    }
    alpha
}

#[test]
fn gat_forward_is_a_row_softmax_of_leaky_scores_per_head() {
    let src = MemorySource::random(14, 4, 5, 2, false, 3);
    let p = Params::default();
    let sub = Value::Subgraph(Arc::new(src.sample(0).unwrap()));
    // The last case: a third of A_sym's entries and all of row 1's given the value 0, as
    // a relation's adjacency gives the other relations' entries (RGAT's within-relation
    // attention): those are no neighbours.
    for (kind, heads, holes) in [
        (AdjKind::Sym, 1, false),
        (AdjKind::Sym, 3, false),
        (AdjKind::Raw, 2, false),
        (AdjKind::Sym, 2, true),
    ] {
        let mut adj = Adjacency { kind }
            .forward(&[&sub], &ctx(&p, Some(&src), 0))
            .unwrap();
        let st = adj.as_sparse().unwrap().structure.clone();
        if holes {
            let mut values = (*adj.as_sparse().unwrap().values).clone();
            for k in 0..st.nnz() {
                if k % 3 == 1 || st.row(1).contains(&k) {
                    values.data[k] = 0.0;
                }
            }
            assert!(!st.row(1).is_empty() && values.data.iter().any(|&v| v != 0.0));
            adj = Value::Sparse(SparseMat {
                structure: st.clone(),
                values: Arc::new(values),
            });
        }
        let values = adj.as_sparse().unwrap().values.data.clone();
        let width = heads * 4;
        let z = matrix(14, width, 8);
        let a_l = matrix(1, width, 9);
        let a_r = matrix(1, width, 10);
        let op = make("gat", &[("heads", heads as f64), ("slope", 0.2)]);
        let out = forward(
            &op,
            &[
                adj.clone(),
                Value::dense(z.clone()),
                Value::dense(a_l.clone()),
                Value::dense(a_r.clone()),
            ],
        );
        let s: &SparseMat = out.as_sparse().unwrap();
        assert_eq!(*s.structure, *st, "gat keeps adj's pattern");
        assert_eq!(s.heads(), heads);
        let want = naive_gat(&st, &values, &z, &a_l, &a_r, heads, 0.2);
        assert_close(
            &s.values.data,
            &want,
            1e-5,
            &format!("gat {kind:?} heads={heads} holes={holes}"),
        );
        for (k, &v) in values.iter().enumerate() {
            if v == 0.0 {
                let a = &s.values.data[k * heads..(k + 1) * heads];
                assert!(a.iter().all(|&x| x == 0.0), "entry {k} of value 0: α {a:?}");
            }
        }
        for u in 0..st.n_rows() {
            for h in 0..heads {
                let sum: f64 = st
                    .row(u)
                    .map(|k| f64::from(s.values.data[k * heads + h]))
                    .sum();
                if st.row(u).all(|k| values[k] == 0.0) {
                    assert_eq!(sum, 0.0, "row {u}: no neighbour, no attention");
                } else {
                    assert!((sum - 1.0).abs() < 1e-5, "row {u} head {h}: Σα = {sum}");
                }
            }
        }
        if kind == AdjKind::Raw {
            assert!(st.row(0).is_empty(), "node 0 is isolated: an empty row");
        }
        // The fact says the same.
        let fact = op
            .infer(&[
                &Fact::Sparse {
                    rows: Dim::NODES,
                    nnz: Dim::ENTRIES,
                    heads: 1,
                },
                &Fact::dense(Dim::NODES, Dim::known(width)),
                &Fact::dense(Dim::known(1), Dim::known(width)),
                &Fact::dense(Dim::known(1), Dim::known(width)),
            ])
            .unwrap();
        assert_eq!(
            fact,
            Fact::Sparse {
                rows: Dim::NODES,
                nnz: Dim::ENTRIES,
                heads
            }
        );
    }
}

// ---------------------------------------------------------------------------------------
// Dropout.

#[test]
fn dropout_evaluation_is_the_identity_training_drops_about_p_and_rescales() {
    let (n, c) = (100, 100);
    let x = Tensor::from_vec(n, c, vec![1.0; n * c]).unwrap();
    let p = 0.3;
    let op: Arc<dyn Op> = make("dropout", &[("p", p)]);
    assert!(!op.pure(), "two dropouts of one x differ: not pure");
    let params = Params::default();
    let xv = Value::dense(x.clone());
    let at = |training: bool, node: usize, step: u64| -> Tensor {
        let mut c = ctx(&params, None, node);
        c.training = training;
        c.step = step;
        op.forward(&[&xv], &c).unwrap().as_dense().unwrap().clone()
    };
    assert_eq!(at(false, 5, 0), x, "evaluation: identity");
    let y = at(true, 5, 0);
    let total = (n * c) as f64;
    let zeros = y.data.iter().filter(|&&v| v == 0.0).count() as f64;
    // Binomial(N, p): 5 standard deviations (a false alarm once in ~3.5 million runs).
    let sd = (total * p * (1.0 - p)).sqrt();
    assert!(
        (zeros - p * total).abs() < 5.0 * sd,
        "{zeros} zeros of {total}, expected {} ± {}",
        p * total,
        5.0 * sd
    );
    let scale = (1.0 / (1.0 - p)) as f32;
    assert!(
        y.data.iter().all(|&v| v == 0.0 || (v - scale).abs() < 1e-6),
        "kept entries are scaled by 1/(1 − p)"
    );
    // Deterministic for (seed, step, node); another node or step draws another mask.
    assert_eq!(at(true, 5, 0), y);
    let differ = |a: &Tensor| a.data.iter().zip(&y.data).filter(|(a, b)| a != b).count();
    assert!(differ(&at(true, 6, 0)) > 1000, "another node's mask");
    assert!(differ(&at(true, 5, 1)) > 1000, "another step's mask");
    // The backward op given the forward's key applies the same mask, whichever node runs it.
    let back: Arc<dyn Op> = Arc::new(DropoutBackward { p, key: 5 });
    let mut c2 = ctx(&params, None, 77);
    c2.step = 0;
    let dx = back.forward(&[&xv], &c2).unwrap();
    assert_eq!(dx.as_dense().unwrap(), &y, "backward mask = forward mask");
    // p = 0 keeps everything, even in training.
    let keep_all: Arc<dyn Op> = make("dropout", &[("p", 0.0)]);
    let c3 = ctx(&params, None, 5);
    assert_eq!(
        keep_all.forward(&[&xv], &c3).unwrap().as_dense().unwrap(),
        &x
    );
}

// ---------------------------------------------------------------------------------------
// Mutation: the gradient check must notice a wrong backward.

/// `inner` with its backward's gradients multiplied by `factor` (−1: the sign flipped).
#[derive(Debug)]
struct Mutated {
    inner: Arc<dyn Op>,
    factor: f32,
}

impl Op for Mutated {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn attrs(&self) -> String {
        format!("{}, mutated={}", self.inner.attrs(), self.factor)
    }
    fn args(&self) -> Arity {
        self.inner.args()
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        self.inner.infer(inputs)
    }
    fn forward(&self, inputs: &[&Value], ctx: &Ctx<'_>) -> Result<Value, OpError> {
        self.inner.forward(inputs, ctx)
    }
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let grads = self.inner.backward(g, grad)?;
        grads
            .into_iter()
            .map(|d| match d {
                Some(d) if self.factor != 1.0 => g.add(Scale { c: self.factor }, &[d]).map(Some),
                d => Ok(d),
            })
            .collect()
    }
    fn pure(&self) -> bool {
        self.inner.pure()
    }
}

/// The library's one-call check notices a backward with its sign flipped or its scale
/// off by 10 %, for a row-wise op, an elementwise one and a neighbour reduce.
#[test]
fn check_op_gradients_reports_a_wrong_backward() {
    for (name, args) in [
        ("tanh", vec![Arg::Nodes(5)]),
        ("l2norm", vec![Arg::Nodes(5)]),
        ("max_agg", vec![Arg::Adjacency(AdjKind::Raw), Arg::Nodes(4)]),
    ] {
        for factor in [-1.0, 1.1] {
            let op = Arc::new(Mutated {
                inner: make(name, &[]),
                factor,
            });
            let small = GradCheck {
                eps: 1e-3,
                ..GradCheck::default()
            };
            assert!(
                check_op_gradients_with(op, &args, small).is_err(),
                "{name} × {factor} went unnoticed"
            );
        }
        let op = Arc::new(Mutated {
            inner: make(name, &[]),
            factor: 1.0,
        });
        let small = GradCheck {
            eps: 1e-3,
            ..GradCheck::default()
        };
        check_op_gradients_with(op, &args, small).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn the_gradient_check_reports_a_backward_with_its_sign_flipped() {
    type Build = Box<dyn Fn(&mut Net, Arc<dyn Op>) -> NodeId>;
    let unary =
        |name: &'static str, attrs: &'static [(&'static str, f64)]| -> (Arc<dyn Op>, Build) {
            (
                make(name, attrs),
                Box::new(|n: &mut Net, op| {
                    let z = n.layer(5);
                    n.op(op, &[z])
                }),
            )
        };
    let cases: Vec<(Arc<dyn Op>, Build)> = vec![
        unary("tanh", &[]),
        unary("elu", &[]),
        unary("l2norm", &[]),
        unary("dropout", &[("p", 0.4)]),
        (
            make("gat", &[("heads", 2.0)]),
            Box::new(|n: &mut Net, op| {
                let a = n.adj(AdjKind::Sym);
                let w = n.param("W", n.f(), 6, Init::Glorot);
                let a_l = n.param("a_l", 1, 6, Init::Glorot);
                let a_r = n.param("a_r", 1, 6, Init::Glorot);
                let z = n.mm(&[n.x, w]);
                let alpha = n.op(op, &[a, z, a_l, a_r]);
                n.mm(&[alpha, z])
            }),
        ),
    ];
    let src = MemorySource::random(23, 4, 6, 3, false, 11);
    for (op, build) in cases {
        let name = op.name().to_string();
        for factor in [1.0, -1.0] {
            let mut n = Net::new(&src);
            let h = build(
                &mut n,
                Arc::new(Mutated {
                    inner: op.clone(),
                    factor,
                }),
            );
            let (bad, _) = n.check(h);
            if factor == 1.0 {
                assert!(bad.is_empty(), "{name} unmutated: {bad:#?}");
            } else {
                // Parameters before the op get wrong gradients; those after it do not.
                assert!(!bad.is_empty(), "{name}: a flipped backward went unnoticed");
                assert!(
                    bad.iter()
                        .all(|d| !matches!(d.param.as_str(), "W_out" | "b")),
                    "{name}: {bad:#?}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Registration, attributes, shape errors.

#[test]
fn every_builtin_is_registered_with_canonical_attributes() {
    let r = Registry::with_builtins();
    let defaults = [
        ("relu", ""),
        ("leaky_relu", "slope=0.2"),
        ("sigmoid", ""),
        ("tanh", ""),
        ("elu", "alpha=1"),
        ("sqrt", "eps=0.00001"),
        ("dropout", "p=0.5"),
        ("l2norm", ""),
        ("concat", ""),
        ("sub", ""),
        ("mul", ""),
        ("scale", "c=1"),
        ("gat", "heads=1, slope=0.2"),
    ];
    for (name, attrs) in defaults {
        assert!(r.contains(name), "{name} registered");
        let op = r.make(name, &Attrs::new()).unwrap();
        assert_eq!(op.name(), name);
        assert_eq!(op.attrs(), attrs, "{name}'s canonical attributes");
    }
    // Ops whose attributes are required.
    for (name, attrs, canonical) in [
        (
            "slice",
            vec![("start", 2.0), ("len", 3.0)],
            "start=2, len=3",
        ),
        ("mean_heads", vec![("heads", 4.0)], "heads=4"),
    ] {
        assert!(r.contains(name));
        let err = r.make(name, &Attrs::new()).unwrap_err().to_string();
        assert!(err.contains("needs"), "{name} without attributes: {err}");
        assert_eq!(make(name, &attrs).attrs(), canonical);
    }
    // Attributes given are kept, canonically: equal ops print equal keys.
    assert_eq!(
        make("gat", &[("slope", 0.1), ("heads", 4.0)]).attrs(),
        "heads=4, slope=0.1"
    );
    assert_eq!(make("dropout", &[("p", 0.25)]).attrs(), "p=0.25");
}

#[test]
fn unknown_names_and_attributes_are_rejected_with_a_suggestion() {
    let r = Registry::with_builtins();
    let attr = |k: &str, v: f64| Attrs::new().with(k, Attr::Num(v));
    let err = r
        .make("leaky_relu", &attr("slop", 0.1))
        .unwrap_err()
        .to_string();
    assert!(err.contains("did you mean `slope`"), "{err}");
    let err = r.make("gat", &attr("head", 2.0)).unwrap_err().to_string();
    assert!(err.contains("did you mean `heads`"), "{err}");
    let err = r.make("tanh", &attr("alpha", 1.0)).unwrap_err().to_string();
    assert!(err.contains("takes none"), "{err}");
    let err = r.make("leaky_rel", &Attrs::new()).unwrap_err().to_string();
    assert!(err.contains("leaky_relu"), "{err}");
    // Values out of range.
    for (name, k, v, says) in [
        ("dropout", "p", 1.0, "[0, 1)"),
        ("dropout", "p", -0.1, "[0, 1)"),
        ("dropout", "p", f64::NAN, "[0, 1)"),
        ("elu", "alpha", -1.0, "≥ 0"),
        ("sqrt", "eps", 0.0, "> 0"),
        ("gat", "heads", 0.0, "≥ 1"),
        ("gat", "heads", 1.5, "whole number"),
        ("mean_heads", "heads", 0.0, "≥ 1"),
        ("slice", "start", -1.0, "whole number"),
        ("leaky_relu", "slope", f64::INFINITY, "finite"),
        ("scale", "c", f64::NAN, "finite"),
    ] {
        let mut a = attr(k, v);
        if name == "slice" {
            a = a.with("len", Attr::Num(1.0));
        }
        let err = r.make(name, &a).unwrap_err().to_string();
        assert!(
            err.contains(k) && err.contains(says),
            "{name}({k}={v}): {err}"
        );
    }
    let err = r
        .make("dropout", &Attrs::new().with("p", Attr::Str("half".into())))
        .unwrap_err()
        .to_string();
    assert!(err.contains("expected a number"), "{err}");
}

#[test]
fn shape_errors_say_what_was_expected_and_what_came() {
    let mut g = Graph::new();
    let mut param = |name: &str, rows: usize, cols: usize| {
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
    };
    let p23 = param("P", 2, 3);
    let q43 = param("Q", 4, 3);
    let r24 = param("R", 2, 4);
    let r25 = param("S", 2, 5);
    let mut err =
        |op: Arc<dyn Op>, inputs: &[NodeId]| g.add(op, inputs, "e").unwrap_err().to_string();
    let cases = [
        (
            err(Arc::new(Concat), &[p23, q43]),
            "expected 2 rows",
            "got [4, 3]",
        ),
        (
            err(make("mul", &[]), &[p23, r24]),
            "expected [2, 3]",
            "got [2, 4]",
        ),
        (
            err(make("sub", &[]), &[p23, q43]),
            "expected [2, 3]",
            "got [4, 3]",
        ),
        (
            err(make("slice", &[("start", 2.0), ("len", 3.0)]), &[r24]),
            "expected a known width ≥ 5",
            "got 4",
        ),
        (
            err(make("mean_heads", &[("heads", 2.0)]), &[r25]),
            "multiple of 2",
            "got 5",
        ),
        (err(make("concat", &[]), &[]), "at least 1", "got 0"),
    ];
    for (e, expected, got) in cases {
        assert!(e.contains(expected) && e.contains(got), "{e}");
    }
    // gat: z's width must split into heads; a_l and a_r must be [1, width].
    let src = MemorySource::random(5, 2, 4, 2, false, 1);
    let mut n = Net::new(&src);
    let a = n.adj(AdjKind::Sym);
    let w = n.param("W", 4, 5, Init::Glorot);
    let z = n.mm(&[n.x, w]);
    let w6 = n.param("W6", 4, 6, Init::Glorot);
    let z6 = n.mm(&[n.x, w6]);
    let a5 = n.param("a5", 1, 5, Init::Glorot);
    let a6 = n.param("a6", 1, 6, Init::Glorot);
    let a4 = n.param("a4", 1, 4, Init::Glorot);
    let gat2: Arc<dyn Op> = Arc::new(Gat::new(2, 0.2, 0.0).unwrap());
    let e =
        n.g.add(gat2.clone(), &[a, z, a5, a5], "gat")
            .unwrap_err()
            .to_string();
    assert!(e.contains("multiple of 2") && e.contains("got 5"), "{e}");
    let e =
        n.g.add(gat2.clone(), &[a, z6, a4, a6], "gat")
            .unwrap_err()
            .to_string();
    assert!(e.contains("a_l, expected [1, 6], got [1, 4]"), "{e}");
    let row = n.param("row", 1, 6, Init::Glorot);
    let e =
        n.g.add(gat2, &[a, row, a6, a6], "gat")
            .unwrap_err()
            .to_string();
    assert!(e.contains("expected [n, 6], got [1, 6]"), "{e}");
    let e =
        n.g.add(Arc::new(MeanHeads { heads: 4 }), &[z6], "m")
            .unwrap_err()
            .to_string();
    assert!(e.contains("multiple of 4") && e.contains("got 6"), "{e}");
}

/// Every fused chain against its ops run one after another (the naive oracle), on hostile
/// shapes: no rows, one row of one column, odd widths, and enough rows for several row
/// blocks and a split into parts. A chain with a bias row (not per-node), a value read by
/// two stages, and a dropout (training: the mask keyed by the stage's original node).
#[test]
fn fused_chains_equal_their_ops_run_in_turn_on_hostile_shapes() {
    use saintflow::ir::Dim;
    use saintflow::op::fused::{Fused, Src, Stage};
    let stage = |op: Arc<dyn Op>, node: usize, inputs: Vec<Src>, per_node: Vec<bool>, c: usize| {
        let facts = per_node
            .iter()
            .map(|&pn| Fact::dense(if pn { Dim::NODES } else { Dim::known(1) }, Dim::known(c)))
            .collect();
        Stage {
            op,
            node: NodeId::new(node),
            inputs,
            per_node,
            cols: c,
            facts,
            fact: Fact::dense(Dim::NODES, Dim::known(c)),
        }
    };
    for (r, c) in [(0, 5), (1, 1), (7, 3), (3000, 130)] {
        let a = matrix(r, c, 11);
        let bias = matrix(1, c, 12);
        let other = matrix(r, c, 13);
        // y = l2norm(mul(relu(a + bias), other)) then dropout, and (a + bias) read again
        // by a sub at the end: add → relu → mul → l2norm → dropout → sub(·, add's value).
        let ops: Vec<Arc<dyn Op>> = vec![
            Arc::new(Add),
            make("relu", &[]),
            make("mul", &[]),
            make("l2norm", &[]),
            make("dropout", &[("p", 0.3)]),
            make("sub", &[]),
        ];
        let stages = vec![
            stage(
                ops[0].clone(),
                40,
                vec![Src::Input(0), Src::Input(1)],
                vec![true, false],
                c,
            ),
            stage(ops[1].clone(), 41, vec![Src::Stage(0)], vec![true], c),
            stage(
                ops[2].clone(),
                42,
                vec![Src::Stage(1), Src::Input(2)],
                vec![true, true],
                c,
            ),
            stage(ops[3].clone(), 43, vec![Src::Stage(2)], vec![true], c),
            stage(ops[4].clone(), 44, vec![Src::Stage(3)], vec![true], c),
            stage(
                ops[5].clone(),
                45,
                vec![Src::Stage(4), Src::Stage(0)],
                vec![true, true],
                c,
            ),
        ];
        let fused = Fused {
            stages,
            fact: Fact::dense(Dim::NODES, Dim::known(c)),
        };
        let params = Params::default();
        let mut cx = ctx(&params, None, 99);
        cx.bindings = Bindings {
            nodes: r,
            entries: 0,
            pairs: 0,
        };
        let run = |op: &Arc<dyn Op>, node: usize, ins: &[&Value]| {
            let mut c2 = ctx(&params, None, node);
            c2.bindings = cx.bindings;
            op.forward(ins, &c2).unwrap()
        };
        let (av, bv, ov) = (
            Value::dense(a.clone()),
            Value::dense(bias.clone()),
            Value::dense(other.clone()),
        );
        let s0 = run(&ops[0], 40, &[&av, &bv]);
        let s1 = run(&ops[1], 41, &[&s0]);
        let s2 = run(&ops[2], 42, &[&s1, &ov]);
        let s3 = run(&ops[3], 43, &[&s2]);
        let s4 = run(&ops[4], 44, &[&s3]);
        let want = run(&ops[5], 45, &[&s4, &s0]);
        let got = fused.forward(&[&av, &bv, &ov], &cx).unwrap();
        let bits = |v: &Value| -> Vec<u32> {
            v.as_dense()
                .unwrap()
                .data
                .iter()
                .map(|x| x.to_bits())
                .collect()
        };
        assert_eq!(bits(&got), bits(&want), "{r} × {c}: fused forward");
        // The parts of a split, in reverse order, into one output.
        let p = fused.as_partitioned().unwrap();
        if let Some(split) = p.split_any(&[&av, &bv, &ov], &fused.fact, &cx, 3).unwrap() {
            assert!(split.ranges().len() >= 2 && split.writes_all());
            let mut out = Tensor::from_vec(r, c, vec![f32::NAN; r * c]).unwrap();
            for k in (0..split.ranges().len()).rev() {
                let full = saintflow::op::MatMut::row_major(&mut out.data, r, c).unwrap();
                let view = full.rows_mut(split.ranges()[k].clone()).unwrap();
                p.forward_part_any(&[&av, &bv, &ov], &cx, &*split, k, view)
                    .unwrap();
            }
            assert_eq!(bits(&Value::dense(out)), bits(&want), "{r} × {c}: parts");
        } else {
            assert!(r * c < 65536, "{r} × {c} should split");
        }
    }
}

/// A product in a fused chain (issue 33: the classifier's ∇H = ∇Y·W_outᵀ, k = classes,
/// computed block by block inside the backward's row-wise chain, and a layer's products of
/// long k, op(B) packed once for every block) against the product and the next op run in
/// turn, bit for bit, on hostile shapes: no rows, one row of one column, widths off every
/// tile, k from 1 to past the packing limit, op(B) transposed or not, each operand a column
/// view of a wider matrix, in f32 and (where the CPU has it) bf16; and a split into parts.
/// `fusible` admits exactly the row-local products; `prepare` packs op(B) from
/// `PREPACK_K_MIN` on, never for a transposed op(A) or a C of one column.
#[test]
fn a_fused_products_row_blocks_equal_the_product_on_hostile_shapes() {
    use saintflow::ir::Dim;
    use saintflow::op::builtin::{ColumnView, Gemm, PREPACK_K_MIN};
    use saintflow::op::fused::{Fused, Src, Stage};
    use saintflow::planner::Precision;
    let bits = |v: &Value| -> Vec<u32> {
        let t = v.as_dense().unwrap();
        t.data.iter().map(|x| x.to_bits()).collect()
    };
    // Columns `start..start + c` of `t` are `t` itself; the rest is noise.
    let widen = |t: &Tensor, start: usize, extra: usize, seed: u32| {
        let w = t.cols + extra;
        let noise = matrix(t.rows, w, seed);
        let mut data = noise.data.clone();
        for i in 0..t.rows {
            data[i * w + start..i * w + start + t.cols]
                .copy_from_slice(&t.data[i * t.cols..(i + 1) * t.cols]);
        }
        Tensor::from_vec(t.rows, w, data).unwrap()
    };
    let mut precisions = vec![Precision::F32];
    if Precision::Bf16.check().is_ok() {
        precisions.push(Precision::Bf16);
    }
    let params = Params::default();
    for (r, k, n) in [
        (0, 3, 5),
        (1, 1, 1),
        (7, 2, 3),
        (13, 16, 17),
        (3000, 2, 130),
        (1001, 7, 1024),
        (13, PREPACK_K_MIN, 17),
        (601, 300, 515),
        // A weight past half of any L2 this project meets (1.2 MiB): blocks of 288 rows,
        // the last one short.
        (700, 600, 515),
    ] {
        for &precision in &precisions {
            for tb in [false, true] {
                for viewed in [false, true] {
                    let a = matrix(r, k, 21);
                    let b = if tb {
                        matrix(n, k, 22)
                    } else {
                        matrix(k, n, 22)
                    };
                    let mut g = Gemm {
                        ta: false,
                        tb,
                        precision,
                        views: [None, None],
                    };
                    let (av, bv) = if viewed {
                        g.views = [
                            Some(ColumnView { start: 3, len: k }),
                            Some(ColumnView {
                                start: 1,
                                len: b.cols,
                            }),
                        ];
                        (widen(&a, 3, 5, 23), widen(&b, 1, 2, 24))
                    } else {
                        (a.clone(), b.clone())
                    };
                    let (av, bv) = (Value::dense(av), Value::dense(bv));
                    let gemm: Arc<dyn Op> = Arc::new(g);
                    let relu = make("relu", &[]);
                    let mut cx = ctx(&params, None, 99);
                    cx.bindings = Bindings {
                        nodes: r,
                        entries: 0,
                        pairs: 0,
                    };
                    let y = gemm.forward(&[&av, &bv], &cx).unwrap();
                    let want = relu.forward(&[&y], &cx).unwrap();
                    let facts = [
                        Fact::dense(Dim::NODES, Dim::known(av.as_dense().unwrap().cols)),
                        Fact::dense(
                            Dim::known(bv.as_dense().unwrap().rows),
                            Dim::known(bv.as_dense().unwrap().cols),
                        ),
                    ];
                    let out = Fact::dense(Dim::NODES, Dim::known(n));
                    let blocks = gemm.as_row_blocks().unwrap();
                    assert!(blocks.fusible_any(&[&facts[0], &facts[1]]), "k = {k}");
                    let fused = Fused {
                        stages: vec![
                            Stage {
                                op: gemm.clone(),
                                node: NodeId::new(50),
                                inputs: vec![Src::Input(0), Src::Input(1)],
                                per_node: vec![true, false],
                                cols: n,
                                facts: facts.to_vec(),
                                fact: out.clone(),
                            },
                            Stage {
                                op: relu.clone(),
                                node: NodeId::new(51),
                                inputs: vec![Src::Stage(0)],
                                per_node: vec![true],
                                cols: n,
                                facts: vec![out.clone()],
                                fact: out.clone(),
                            },
                        ],
                        fact: out.clone(),
                    };
                    let what = format!("{r}×{k}·{k}×{n}, tb {tb}, views {viewed}, {precision:?}");
                    let got = fused.forward(&[&av, &bv], &cx).unwrap();
                    assert_eq!(bits(&got), bits(&want), "{what}: fused forward");
                    let p = fused.as_partitioned().unwrap();
                    if let Some(split) = p.split_any(&[&av, &bv], &fused.fact, &cx, 3).unwrap() {
                        let mut o = Tensor::from_vec(r, n, vec![f32::NAN; r * n]).unwrap();
                        for part in (0..split.ranges().len()).rev() {
                            let full = saintflow::op::MatMut::row_major(&mut o.data, r, n).unwrap();
                            let view = full.rows_mut(split.ranges()[part].clone()).unwrap();
                            p.forward_part_any(&[&av, &bv], &cx, &*split, part, view)
                                .unwrap();
                        }
                        assert_eq!(bits(&Value::dense(o)), bits(&want), "{what}: parts");
                    }
                }
            }
        }
    }
    // What the fusion pass may take: row-local (op(A) not transposed, op(B) a
    // parameter), whatever k.
    let nodes = |c: usize| Fact::dense(Dim::NODES, Dim::known(c));
    let param = |r: usize, c: usize| Fact::dense(Dim::known(r), Dim::known(c));
    let g = |ta: bool| Gemm {
        ta,
        tb: true,
        precision: Precision::F32,
        views: [None, None],
    };
    let fusible = |g: Gemm, a: &Fact, b: &Fact| g.as_row_blocks().unwrap().fusible_any(&[a, b]);
    for k in [1, PREPACK_K_MIN - 1, PREPACK_K_MIN, 64, 1024] {
        assert!(fusible(g(false), &nodes(k), &param(64, k)), "k {k}");
    }
    assert!(
        !fusible(g(true), &param(2, 64), &nodes(2)),
        "op(A) transposed"
    );
    // What it packs once: op(B) of k from the limit on, read whole, for a C wider than
    // the narrow path's; a shorter k, a per-block op(B), a transposed op(A) or a C of one
    // column pack nothing.
    let prepared = |g: Gemm, (r, k, n): (usize, usize, usize), b_whole: bool| {
        let a = matrix(r, k, 31);
        let b = matrix(n, k, 32);
        let av = saintflow::op::MatRef::row_major(&a.data, r, k).unwrap();
        let bv = saintflow::op::MatRef::row_major(&b.data, n, k).unwrap();
        let blocks = g.as_row_blocks().unwrap();
        blocks
            .prepare_any(&[Some(av), b_whole.then_some(bv)])
            .unwrap()
            .is_some()
    };
    assert!(prepared(g(false), (50, PREPACK_K_MIN, 64), true));
    assert!(prepared(g(false), (50, 512, 256), true));
    assert!(!prepared(g(false), (50, PREPACK_K_MIN - 1, 64), true));
    assert!(
        !prepared(g(false), (50, 512, 256), false),
        "op(B) from a stage"
    );
    assert!(
        !prepared(g(false), (50, 512, 1), true),
        "one column: the narrow path"
    );
    assert!(!prepared(g(true), (50, 512, 256), true), "op(A) transposed");
    let per_node_b = Fact::dense(Dim::NODES, Dim::known(2));
    assert!(!fusible(g(false), &nodes(2), &per_node_b), "op(B) per node");
}

/// Issue 55 item 7: a NaN reaching an activation or an extreme aggregation comes out NaN,
/// as in PyTorch (`torch.relu`, `torch.max`): `relu` written as `max(x, 0)` with
/// `f32::max` gave 0 and hid it, and `max_agg`/`min_agg` skipped a NaN neighbour. Every
/// activation by its plan name, at every position of a row of 37 (vector body and tail),
/// and every node's row of a sampled graph for the aggregations.
#[test]
fn issue55_activations_and_extreme_aggregations_propagate_nan() {
    let p = Params::default();
    let cx = ctx(&p, None, 0);
    for (name, attrs) in [
        ("relu", vec![]),
        ("leaky_relu", vec![("slope", 0.2)]),
        ("sigmoid", vec![]),
        ("tanh", vec![]),
        ("elu", vec![("alpha", 1.0)]),
    ] {
        let op = make(name, &attrs);
        for at in 0..37 {
            let mut x = matrix(1, 37, 3);
            x.data[at] = f32::NAN;
            let y = op.forward(&[&Value::dense(x)], &cx).unwrap();
            let y = y.as_dense().unwrap();
            assert!(
                y.data[at].is_nan(),
                "{name}: NaN at {at} gave {}",
                y.data[at]
            );
            let finite = y
                .data
                .iter()
                .enumerate()
                .all(|(i, v)| i == at || v.is_finite());
            assert!(finite, "{name}: the other values");
        }
    }
    let relu = make("relu", &[]);
    let x = Tensor::from_vec(1, 3, vec![f32::INFINITY, f32::NEG_INFINITY, -0.5]).unwrap();
    let y = relu.forward(&[&Value::dense(x)], &cx).unwrap();
    assert_eq!(y.as_dense().unwrap().data, vec![f32::INFINITY, 0.0, 0.0]);

    let src = MemorySource::random(14, 4, 5, 2, false, 3);
    let sub = Value::Subgraph(Arc::new(src.sample(0).unwrap()));
    let cs = ctx(&p, Some(&src), 0);
    let adj = Adjacency { kind: AdjKind::Raw }
        .forward(&[&sub], &cs)
        .unwrap();
    let st = adj.as_sparse().unwrap().structure.clone();
    for name in ["max_agg", "min_agg"] {
        let op = make(name, &[]);
        for v in 0..14 {
            let mut x = matrix(14, 4, 5);
            x.data[v * 4 + 2] = f32::NAN;
            let y = op.forward(&[&adj, &Value::dense(x)], &cs).unwrap();
            let y = y.as_dense().unwrap();
            for u in 0..14 {
                let neighbours = &st.indices[st.row(u)];
                let has = neighbours.contains(&(v as u32));
                assert_eq!(
                    y.data[u * 4 + 2].is_nan(),
                    has,
                    "{name}: node {u}, NaN at neighbour {v}: {:?}",
                    neighbours
                );
            }
        }
    }
}
