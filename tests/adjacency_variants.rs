//! Issue 58 item 2: adjacency flavours by name — with or without self-loops, normalised by
//! rows, columns or symmetrically — and integer powers `A^k @ x` in plans.

mod common;

use std::sync::Arc;

use saintflow::ir::{Params, Value};
use saintflow::op::builtin::{AdjKind, Adjacency};
use saintflow::op::{GraphSource, MemorySource, Op};

/// The flavour's matrix, dense, from the adjacency op on a sampled subgraph.
fn dense_of(kind: AdjKind, src: &MemorySource) -> (usize, Vec<f32>) {
    let p = Params::default();
    let sub = Value::Subgraph(Arc::new(src.sample(0).unwrap()));
    let a = Adjacency { kind }
        .forward(&[&sub], &common::op_ctx(&p, Some(src)))
        .unwrap();
    let a = a.as_sparse().unwrap();
    let n = a.structure.n_rows();
    let mut m = vec![0f32; n * n];
    for u in 0..n {
        for k in a.structure.row(u) {
            m[u * n + a.structure.indices[k] as usize] = a.values.data[k];
        }
    }
    (n, m)
}

/// Each flavour against its definition, from the plain A (ones) built the same way: the
/// self-loops added or not, d the row sums of what is normalised, and every entry
/// 1/d(u), 1/d(v) or 1/√(d(u)d(v)).
#[test]
fn every_flavour_is_its_definition() {
    let src = MemorySource::random(31, 4, 3, 2, false, 5);
    let (n, a) = dense_of(AdjKind::Raw, &src);
    for kind in AdjKind::ALL {
        if kind == AdjKind::Saint {
            continue; // its own weights and the graph's degrees (tests/ir.rs, ops_ir.rs)
        }
        let (_, got) = dense_of(kind, &src);
        let mut b = a.clone();
        if kind.self_loops() {
            for u in 0..n {
                b[u * n + u] = 1.0;
            }
        }
        let d: Vec<f32> = (0..n).map(|u| b[u * n..(u + 1) * n].iter().sum()).collect();
        for u in 0..n {
            for v in 0..n {
                let want = if b[u * n + v] == 0.0 {
                    0.0
                } else {
                    match kind {
                        AdjKind::Raw => 1.0,
                        AdjKind::Mean | AdjKind::MeanLoops => 1.0 / d[u],
                        AdjKind::Col | AdjKind::ColLoops => 1.0 / d[v],
                        _ => 1.0 / (d[u] * d[v]).sqrt(),
                    }
                };
                let g = got[u * n + v];
                assert!(
                    (g - want).abs() <= 1e-6 * want.abs().max(1e-3),
                    "{}: ({u}, {v}) = {g}, expected {want}",
                    kind.plan_name()
                );
            }
        }
    }
    // What the flavours are for: rows of A_mean_loop sum to 1, columns of A_col and
    // A_col_loop sum to 1 (where there is an entry), A_sym_noloop has no diagonal and is
    // symmetric, A_col is A_mean's transpose.
    let (_, ml) = dense_of(AdjKind::MeanLoops, &src);
    let (_, col) = dense_of(AdjKind::Col, &src);
    let (_, mean) = dense_of(AdjKind::Mean, &src);
    let (_, sym0) = dense_of(AdjKind::SymNoLoops, &src);
    for u in 0..n {
        let row: f32 = ml[u * n..(u + 1) * n].iter().sum();
        assert!((row - 1.0).abs() < 1e-5, "A_mean_loop row {u}: {row}");
        let column: f32 = (0..n).map(|v| col[v * n + u]).sum();
        let has = (0..n).any(|v| a[v * n + u] != 0.0);
        assert!(
            !has || (column - 1.0).abs() < 1e-5,
            "A_col column {u}: {column}"
        );
        assert_eq!(sym0[u * n + u], 0.0);
        for v in 0..n {
            assert_eq!(
                col[u * n + v],
                mean[v * n + u],
                "A_col = A_meanᵀ at ({u}, {v})"
            );
            assert_eq!(sym0[u * n + v], sym0[v * n + u]);
        }
    }
}

/// `A_sym^3 @ x @ W` is `A_sym @ A_sym @ A_sym @ x @ W`, bit for bit (one chain either way,
/// ordered by the planner), for a flavour with and one without self-loops; `^ 1` is the
/// operand itself.
#[test]
fn a_power_is_the_chain_of_its_copies() {
    let src = MemorySource::random(40, 4, 5, 2, false, 9);
    for a in ["A_sym", "A_sym_noloop", "A_col_loop"] {
        let power = common::one_layer_logits(&format!("{a}^3 @ x @ W"), &src);
        let chain = common::one_layer_logits(&format!("{a} @ {a} @ {a} @ x @ W"), &src);
        assert_eq!(power, chain, "{a}");
        assert_eq!(
            common::one_layer_logits(&format!("{a}^1 @ x @ W"), &src),
            common::one_layer_logits(&format!("{a} @ x @ W"), &src)
        );
    }
}

#[test]
fn a_power_takes_a_whole_number_from_1_to_64() {
    for bad in [
        "A_sym^0 @ x @ W",
        "A_sym^1.5 @ x @ W",
        "A_sym^k @ x @ W",
        "A_sym^65 @ x @ W",
    ] {
        let e = common::lowering_error(&common::one_layer_plan(bad));
        assert!(e.contains("whole number from 1 to 64"), "{bad}: {e}");
    }
    // The names are known to the plan language (a typo suggests them).
    let e = common::lowering_error(&common::one_layer_plan("A_sym_noloops @ x @ W"));
    assert!(e.contains("A_sym_noloop"), "{e}");
}
