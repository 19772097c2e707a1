//! The typed samplers as sampler kinds (issue 57 item 4): a plan's `[sampler]` (and
//! `saintflow sample`'s flags) with `kind = "typed_node"`, `"typed_edge"` or `"typed_rw"`
//! builds the sampler of src/sample/typed.rs that its names say — the same subgraphs as
//! the constructor given the ids — each type's and relation's budget holds draw for draw,
//! a name the store lacks is an error at the plan's value with the nearest name, and each
//! kind trains R-GCN on a typed planted graph.

mod common;

use std::path::Path;

use saintflow::compile::lower_for;
use saintflow::op::Registry;
use saintflow::plan::Plan;
use saintflow::sample::*;
use saintflow::store::GraphStore;
use saintflow::train::TrainOptions;

/// A plan whose `[sampler]` holds `keys` (with an `[input]`, as a typed store needs).
fn plan_text(keys: &str) -> String {
    format!(
        "[sampler]\n{keys}\n\n[input]\ndim = 4\n\n[output]\nparams = {{ W = [\"in\", \"classes\"] }}\nout = \"x @ W\"\n"
    )
}

fn sampler_of(keys: &str) -> SamplerConfig {
    Plan::parse(&plan_text(keys), "t.toml")
        .unwrap_or_else(|e| panic!("{}", e.render()))
        .sampler
        .kind
}

fn same_subgraphs(s: &GraphStore, a: &dyn Sampler, b: &dyn Sampler) {
    for i in 0..6 {
        assert_eq!(
            sample_typed_subgraph(a, s, 5, i, 1).unwrap(),
            sample_typed_subgraph(b, s, 5, i, 1).unwrap(),
            "{} against {}, subgraph {i}",
            a.name(),
            b.name()
        );
    }
}

/// The draws (before dedup) of subgraph `i`.
fn draws(sm: &dyn Sampler, i: u64) -> Vec<u32> {
    let mut out = Vec::new();
    sm.sample_nodes(&mut subgraph_rng(5, i), &mut out).unwrap();
    out
}

fn rel(s: &GraphStore, name: &str) -> usize {
    (0..s.n_relations())
        .find(|&r| s.relation(r).name == name)
        .unwrap()
}

#[test]
fn plan_kinds_build_the_samplers_their_names_say_and_the_budgets_hold() {
    let tmp = tempfile::tempdir().unwrap();
    let s = GraphStore::open(common::typed_kronecker(tmp.path(), 10)).unwrap();
    let g = s.full();
    let count_types = |d: &[u32]| {
        let mut c = [0usize; 3];
        for &v in d {
            c[s.node_type(v)] += 1;
        }
        c
    };

    // Node budgets by type name; a type not named draws none.
    let kind = sampler_of("kind = \"typed_node\"\nbudgets = { t2 = 15, t0 = 40 }");
    assert_eq!(kind.expected_nodes(), Some(55));
    let built = kind.build(&s, g).unwrap();
    same_subgraphs(
        &s,
        built.as_ref(),
        &TypedNodeSampler::new(&s, g, &[40, 0, 15], true).unwrap(),
    );
    for i in 0..20 {
        assert_eq!(count_types(&draws(built.as_ref(), i)), [40, 0, 15]);
    }
    // A total split over the types as the node sampler's expected draws: ∝ the entries of
    // each type's rows (∝ degree), or its nodes with a neighbour (uniform).
    for (uniform, weight) in [
        (
            false,
            Box::new(|v: u32| g.degree(v)) as Box<dyn Fn(u32) -> usize>,
        ),
        (true, Box::new(|v: u32| usize::from(g.degree(v) > 0))),
    ] {
        let kind = sampler_of(&format!(
            "kind = \"typed_node\"\nbudget = 301\nuniform = {uniform}"
        ));
        let sm = kind.build(&s, g).unwrap();
        let w: Vec<f64> = (0..3)
            .map(|t| s.type_range(t).map(&weight).sum::<usize>() as f64)
            .collect();
        let c = count_types(&draws(sm.as_ref(), 0));
        assert_eq!(c.iter().sum::<usize>(), 301);
        for t in 0..3 {
            let want = 301.0 * w[t] / w.iter().sum::<f64>();
            assert!((c[t] as f64 - want).abs() < 1.0, "uniform {uniform}: {c:?}");
        }
    }

    // Edge budgets by relation name: a relation stands for itself and its reverse; the
    // groups are drawn in relation order whatever the order written.
    let (r00, rev12) = (rel(&s, "r0_0"), rel(&s, "rev_r1_2"));
    let kind = sampler_of("kind = \"typed_edge\"\nbudgets = { rev_r1_2 = 10, r0_0 = 20 }");
    assert_eq!(kind.expected_nodes(), Some(60));
    let built = kind.build(&s, g).unwrap();
    let direct = TypedEdgeSampler::new(&s, &[(r00, 20), (rev12, 10)]).unwrap();
    same_subgraphs(&s, built.as_ref(), &direct);
    let d = draws(built.as_ref(), 3);
    assert_eq!(d.len(), 60);
    for (k, pair) in d.chunks(2).enumerate() {
        let types = (s.node_type(pair[0]), s.node_type(pair[1]));
        let want = if k < 20 { (0, 0) } else { (1, 2) };
        assert_eq!(types, want, "pair {k}");
        assert!(g.neighbors(pair[0]).contains(&pair[1]));
    }
    // The OGB spelling names the same group.
    assert_eq!(
        sampler_of("kind = \"typed_edge\"\nbudgets = { \"t2___rev_r1_2___t1\" = 10, r0_0 = 20 }")
            .build(&s, g)
            .unwrap()
            .name(),
        direct.name()
    );
    // A total split over the groups ∝ their rows with a neighbour (the homogeneous edge
    // sampler's first draw).
    let sm = sampler_of("kind = \"typed_edge\"\nedges = 200")
        .build(&s, g)
        .unwrap();
    let mut per_group = std::collections::BTreeMap::new();
    for pair in draws(sm.as_ref(), 0).chunks(2) {
        let mut t = [s.node_type(pair[0]), s.node_type(pair[1])];
        t.sort();
        *per_group.entry(t).or_insert(0usize) += 1;
    }
    let rows = |r: usize| {
        let csr = s.relation(r).csr;
        csr.rows().filter(|&u| csr.degree(u) > 0).count() as f64
    };
    let group_rows = |a: usize, b: usize| {
        let name = format!("r{a}_{b}");
        let rev = format!("rev_r{a}_{b}");
        let reverse = if a == b { 0.0 } else { rows(rel(&s, &rev)) };
        rows(rel(&s, &name)) + reverse
    };
    let all: f64 = (0..3)
        .flat_map(|a| (a..3).map(move |b| (a, b)))
        .map(|(a, b)| group_rows(a, b))
        .sum();
    assert_eq!(per_group.values().sum::<usize>(), 200);
    for (t, n) in &per_group {
        let want = 200.0 * group_rows(t[0], t[1]) / all;
        assert!((*n as f64 - want).abs() < 1.0, "{t:?}: {n} against {want}");
    }

    // Walk roots by type name, or the labelled types' training nodes.
    let kind = sampler_of("kind = \"typed_rw\"\nroots = 30\ndepth = 2\nroot_types = [\"t1\"]");
    let roots = WalkRoots {
        types: vec![1],
        train_only: false,
    };
    same_subgraphs(
        &s,
        kind.build(&s, g).unwrap().as_ref(),
        &typed_walk_sampler(&s, g, &roots, 30, 2).unwrap(),
    );
    let kind = sampler_of("kind = \"typed_rw\"\nroots = 30\ntrain_roots = true");
    let roots = WalkRoots {
        types: vec![],
        train_only: true,
    };
    same_subgraphs(
        &s,
        kind.build(&s, g).unwrap().as_ref(),
        &typed_walk_sampler(&s, g, &roots, 30, 2).unwrap(),
    );
}

/// The lowering error of a plan with `keys` on `s`.
fn lowering_error(s: &GraphStore, keys: &str) -> String {
    let plan = Plan::parse(&plan_text(keys), "t.toml").unwrap_or_else(|e| panic!("{}", e.render()));
    match lower_for(&plan, s, &Registry::with_builtins()) {
        Ok(_) => panic!("{keys}: lowered"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn names_the_store_lacks_are_errors_at_the_plans_value() {
    let tmp = tempfile::tempdir().unwrap();
    let s = GraphStore::open(common::typed_kronecker(tmp.path(), 8)).unwrap();
    let cases: [(&str, &[&str]); 5] = [
        (
            "kind = \"typed_node\"\nbudgets = { t0 = 5, tt2 = 3 }",
            &[
                "t.toml:3:11: sampler `budgets`",
                "no node type `tt2`",
                "did you mean `t2`?",
                "its node types: t0, t1, t2",
            ],
        ),
        (
            "kind = \"typed_edge\"\nbudgets = { r0_00 = 3 }",
            &[
                "t.toml:3:11:",
                "no relation `r0_00`",
                "did you mean `r0_0`?",
                "t0___r0_1___t1",
            ],
        ),
        (
            "kind = \"typed_rw\"\nroot_types = [\"t1\", \"paper\"]",
            &["t.toml:3:14: sampler `root_types`", "no node type `paper`"],
        ),
        (
            "kind = \"typed_node\"\nbudget = 10\nbudgets = { t0 = 5 }",
            &["t.toml:4:11: sampler `budgets`", "`budget` is given too"],
        ),
        (
            "kind = \"typed_edge\"\nbudgets = { r0_1 = 3, rev_r0_1 = 2 }",
            &["named twice"],
        ),
    ];
    for (keys, want) in cases {
        let e = match keys.contains("rev_r0_1") {
            // A relation and its reverse are one group: the sampler's constructor says so.
            true => sampler_of(keys)
                .build(&s, s.full())
                .err()
                .unwrap()
                .to_string(),
            false => lowering_error(&s, keys),
        };
        for w in want {
            assert!(e.contains(w), "{keys}: `{w}` not in: {e}");
        }
    }
    // The same names refused by `saintflow sample`, the edge sampler on a training graph
    // that is a part of the full graph too; nothing is written.
    for (args, want) in [
        (
            &[
                "--sampler",
                "typed_node",
                "--budgets",
                "t0=5,t3=1",
                "--graph",
                "full",
            ][..],
            "typed_node `budgets`: the graph has no node type `t3`",
        ),
        (
            &[
                "--sampler",
                "typed_edge",
                "--budgets",
                "r0_0=5",
                "--graph",
                "train",
            ][..],
            "sample graph = \"full\"",
        ),
        (
            &["--sampler", "typed_node", "--budgets", "t0=-1"][..],
            "expected a table of names to whole numbers ≥ 0",
        ),
    ] {
        let mut argv = vec!["sample"];
        argv.extend(args);
        argv.push(s.path().to_str().unwrap());
        let o = common::saintflow(&argv, tmp.path());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_ne!(o.status.code(), Some(0), "{args:?}");
        assert!(err.contains(want), "{args:?}: `{want}` not in: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// `saintflow sample --sampler typed_node --budgets …` draws the library's subgraphs.
#[test]
fn the_command_line_flags_name_the_same_budgets() {
    let tmp = tempfile::tempdir().unwrap();
    let s = GraphStore::open(common::typed_kronecker(tmp.path(), 8)).unwrap();
    let path = s.path().to_str().unwrap().to_string();
    let out = common::saintflow_ok(
        &[
            "sample",
            "--sampler",
            "typed_node",
            "--budgets",
            "t0=30,t2=10",
            "--graph",
            "full",
            "--count",
            "3",
            "--json",
            "-q",
            &path,
        ],
        Path::new("."),
    );
    let recs: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &serde_json::Value| v.get("index").is_some())
        .collect();
    assert_eq!(recs.len(), 3);
    let sm = TypedNodeSampler::new(&s, s.full(), &[30, 0, 10], true).unwrap();
    for (i, rec) in recs.iter().enumerate() {
        // The CLI's defaults: seed 1, clip 16.
        let sub = sample_typed_subgraph(&sm, &s, 1, i as u64, 16).unwrap();
        assert_eq!(rec["nodes"].as_u64().unwrap() as usize, sub.nodes.len());
        let t1 = &rec["types"][1]["nodes"];
        assert_eq!(t1.as_u64(), Some(0), "t1 draws none: {rec}");
    }
}

/// Each typed kind trains the shipped R-GCN on a typed planted graph (3 classes on t0,
/// chance 1/3) past 0.7 in 150 epochs (docs/bench/accuracy.md: 0.92–0.93 at 200 epochs on
/// a graph of this shape made from the command line).
#[test]
fn each_typed_kind_trains_rgcn_on_a_typed_planted_graph() {
    let tmp = tempfile::tempdir().unwrap();
    let s = GraphStore::open(common::typed_kronecker(tmp.path(), 10)).unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/rgcn.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    for set in [
        &[
            "sampler.kind=typed_node",
            "sampler.budgets.t0=150",
            "sampler.budgets.t1=75",
            "sampler.budgets.t2=75",
        ][..],
        &[
            "sampler.kind=typed_node",
            "sampler.budget=300",
            "sampler.uniform=true",
        ][..],
        &["sampler.kind=typed_edge", "sampler.edges=150"][..],
        &[
            "sampler.kind=typed_rw",
            "sampler.roots=60",
            "sampler.train_roots=true",
        ][..],
    ] {
        let mut all = vec!["dims.hidden=16"];
        all.extend(set);
        let plan = Plan::parse_with_overrides(&text, &path.display().to_string(), &all).unwrap();
        let out = TrainOptions::new(&plan, &s)
            .threads(2)
            .seed(1)
            .epochs(150)
            .train()
            .unwrap();
        let acc = out.test.unwrap().accuracy;
        assert!(acc > 0.7, "{set:?}: test accuracy {acc:.3}");
    }
}

/// `A_saint[r]` is GraphSAINT's normalisation per relation (docs/SAMPLING.md): on a
/// sampled subgraph, entry (u, v) of relation r is (C_u / C_{u,v,r}) / deg_r(u), C the
/// pre-sampled counts and deg_r the full graph's relation degree — the values against the
/// per-relation counts of `TypedNormCounts` (an independent count of the same pre-samples:
/// the op reads the union graph's), and refused with the way out when the graph sampled is
/// a training graph whose relation degrees the store does not hold.
#[test]
fn a_saint_of_a_relation_weighs_its_entries_by_the_per_relation_counts() {
    use saintflow::ir::{GraphSource, Params, Value};
    use saintflow::op::builtin::{AdjKind, RelAdjacency};
    use saintflow::op::{Op, StoreSource};
    use saintflow::store::Role;
    use std::sync::Arc;

    let tmp = tempfile::tempdir().unwrap();
    let s = GraphStore::open(common::typed_kronecker(tmp.path(), 9)).unwrap();
    let kind = sampler_of("kind = \"typed_node\"\nbudgets = { t0 = 60, t1 = 40, t2 = 40 }");
    let n_pre = 40;
    let norm =
        NormCounts::estimate(kind.build(&s, s.full()).unwrap().as_ref(), n_pre, 9, 1).unwrap();
    let typed =
        TypedNormCounts::estimate(kind.build(&s, s.full()).unwrap().as_ref(), &s, n_pre, 9, 1)
            .unwrap();
    let src = StoreSource::new(
        &s,
        kind.build(&s, s.full()).unwrap(),
        3,
        1,
        Some(norm),
        Role::Train,
    );
    let params = Params::default();
    let mut some_weight_not_one = false;
    for step in 0..3 {
        let sub = src.sample(step).unwrap();
        let want = typed.aggregator_weights(&sub);
        let t = sub.typed.clone().unwrap();
        let value = Value::Subgraph(Arc::new(sub.clone()));
        for (r, want) in want.iter().enumerate() {
            let rel = s.relation(r);
            let op = RelAdjacency::new(AdjKind::Saint, r, rel.reverse, rel.name.to_string());
            let a = op
                .forward(&[&value], &common::op_ctx(&params, Some(&src)))
                .unwrap();
            let a = a.as_sparse().unwrap();
            let sr = &t.relations[r];
            let start = t.type_starts[rel.src] as usize;
            let mut got = Vec::new();
            for k in 0..sr.offsets.len() - 1 {
                let u = start + k;
                let d = rel.csr.degree(sub.nodes[u]) as f32;
                let row = a.structure.row(u);
                assert_eq!(
                    &a.structure.indices[row.clone()],
                    &sr.indices[sr.offsets[k] as usize..sr.offsets[k + 1] as usize]
                );
                got.extend(a.values.data[row].iter().map(|&x| x * d));
            }
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(want) {
                assert!(
                    (g - w).abs() <= 1e-5 * w,
                    "relation {}: {g} against {w}",
                    rel.name
                );
                some_weight_not_one |= (w - 1.0).abs() > 0.1;
            }
        }
    }
    assert!(some_weight_not_one, "the counts weigh the entries");
    // A training graph that is a part of the full graph: its relation degrees are not the
    // store's.
    let train = StoreSource::new(
        &s,
        Box::new(RandomWalkSampler::new(s.train(), 20, 2).unwrap()),
        3,
        1,
        None,
        Role::Train,
    );
    let sub = Value::Subgraph(Arc::new(train.sample(0).unwrap()));
    let r = rel(&s, "r0_0");
    let op = RelAdjacency::new(AdjKind::Saint, r, r, "t0 r0_0 t0".into());
    let e = op
        .forward(&[&sub], &common::op_ctx(&params, Some(&train)))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("sample graph = \"full\""), "{e}");
}

/// R-GCN with `A_saint[r]`: full batch it is `A_mean[r]`'s run bit for bit (no counts,
/// the whole graph's degrees); sampled by a typed kind it trains as `A_mean[r]` does.
#[test]
fn rgcn_with_a_saint_of_each_relation_trains() {
    let tmp = tempfile::tempdir().unwrap();
    let s = GraphStore::open(common::typed_kronecker(tmp.path(), 10)).unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/rgcn.toml");
    let mean = std::fs::read_to_string(&path).unwrap();
    let saint = mean.replace("A_mean[r]", "A_saint[r]");
    assert_ne!(saint, mean);
    let train = |text: &str, set: &[&str], epochs: usize| {
        let plan = Plan::parse_with_overrides(text, "rgcn.toml", set).unwrap();
        TrainOptions::new(&plan, &s)
            .threads(2)
            .seed(1)
            .epochs(epochs)
            .train()
            .unwrap()
    };
    let (a, b) = (train(&mean, &[], 3), train(&saint, &[], 3));
    assert_eq!(
        common::step_losses(&a.records),
        common::step_losses(&b.records)
    );
    let set = [
        "dims.hidden=16",
        "sampler.kind=typed_node",
        "sampler.budgets.t0=150",
        "sampler.budgets.t1=75",
        "sampler.budgets.t2=75",
    ];
    let acc = train(&saint, &set, 150).test.unwrap().accuracy;
    assert!(acc > 0.7, "test accuracy {acc:.3}");
}
