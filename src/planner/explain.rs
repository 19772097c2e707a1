//! What `saintflow explain` prints: the planned graph in its schedule, each node with its
//! cost under the planning bindings, the passes' changes and the totals — as canonical text
//! (the IR dump's format, numbered in schedule order) and as Graphviz DOT. Both are
//! deterministic: the same graph and options give the same bytes.

use std::collections::HashMap;
use std::fmt::Write;

use crate::ir::dump::dump_with;
use crate::ir::{Graph, NodeId};
use crate::op::Cost;

use super::PlanReport;

/// `x` with an SI prefix and `unit`, three significant digits (`1.23 GFLOP`).
pub fn human(x: f64, unit: &str) -> String {
    let (v, p) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .iter()
        .find(|(s, _)| x.abs() >= *s)
        .map_or((x, ""), |&(s, p)| (x / s, p));
    if p.is_empty() {
        format!("{v:.0} {unit}")
    } else {
        format!("{v:.3} {p}{unit}")
    }
}

fn cost_text(c: &Cost) -> String {
    let mut s = String::new();
    if c.flops > 0.0 {
        s.push_str(&human(c.flops, "FLOP"));
        s.push_str(", ");
    }
    s.push_str(&human(c.bytes_read + c.bytes_written, "B"));
    format!("{{{s}}}")
}

/// The text rendering: header, passes, the graph in schedule order with costs, totals.
pub fn explain_text(graph: &Graph, report: &PlanReport) -> String {
    let o = &report.options;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# planned for n = {}, nnz = {}, p = {} threads, S_cache = {} B",
        o.bindings.nodes, o.bindings.entries, o.threads, o.cache_bytes
    );
    s.push_str("# passes\n");
    for p in &report.passes {
        let changes: Vec<String> = p.changes.iter().map(|(w, c)| format!("{w} {c}")).collect();
        let _ = writeln!(s, "{}: {}", p.pass, changes.join(", "));
    }
    s.push_str("# graph (schedule order; {FLOPs, bytes moved} per node)\n");
    let costs: HashMap<NodeId, Cost> = report.costs.iter().copied().collect();
    s.push_str(&dump_with(graph, &report.memory.order, &|v| {
        costs.get(&v).map(cost_text).unwrap_or_default()
    }));
    s.push_str("# totals\n");
    let (b, a) = (&report.before, &report.total);
    let ratio = if a.flops > 0.0 {
        b.flops / a.flops
    } else {
        1.0
    };
    let _ = writeln!(
        s,
        "flops: {} planned, {} unplanned (right to left), {ratio:.2}× fewer",
        human(a.flops, "FLOP"),
        human(b.flops, "FLOP")
    );
    let _ = writeln!(
        s,
        "bytes moved: {} planned, {} unplanned",
        human(a.bytes_read + a.bytes_written, "B"),
        human(b.bytes_read + b.bytes_written, "B")
    );
    let m = &report.memory;
    let _ = writeln!(
        s,
        "peak live: {} ({} order; index order {}), all values {}",
        human(m.peak as f64, "B"),
        if m.greedy { "memory-aware" } else { "index" },
        human(report.index_order_peak as f64, "B"),
        human(m.total as f64, "B")
    );
    s
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The Graphviz DOT rendering: nodes numbered as in [`explain_text`], labelled with op,
/// attributes, fact and cost; products (gemm, spmm) filled; edges labelled by slot when an
/// op takes several inputs.
pub fn explain_dot(graph: &Graph, report: &PlanReport) -> String {
    let order = &report.memory.order;
    let number: HashMap<NodeId, usize> = order.iter().enumerate().map(|(k, &v)| (v, k)).collect();
    let costs: HashMap<NodeId, Cost> = report.costs.iter().copied().collect();
    let mut s = String::from(
        "digraph plan {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n",
    );
    for &v in order {
        let n = graph.node(v);
        let attrs = n.op.attrs();
        let head = if attrs.is_empty() {
            n.op.name().to_string()
        } else {
            format!("{}[{attrs}]", n.op.name())
        };
        let mut label = format!(
            "%{} {head}\\n{}",
            number[&v],
            dot_escape(&n.fact.to_string())
        );
        if let Some(c) = costs.get(&v) {
            label.push_str("\\n");
            label.push_str(&dot_escape(&cost_text(c)));
        }
        if !n.note.is_empty() {
            label.push_str("\\n");
            label.push_str(&dot_escape(&n.note));
        }
        let style = match n.op.name() {
            "gemm" => ", style=filled, fillcolor=\"#cfe2f3\"",
            "spmm" => ", style=filled, fillcolor=\"#d9ead3\"",
            "transpose" => ", style=filled, fillcolor=\"#fce5cd\"",
            _ => "",
        };
        let _ = writeln!(
            s,
            "  n{} [label=\"{label}\", tooltip=\"{}\"{style}];",
            number[&v],
            dot_escape(&n.label)
        );
    }
    for &v in order {
        let n = graph.node(v);
        for (slot, i) in n.inputs.iter().enumerate() {
            if n.inputs.len() > 1 {
                let _ = writeln!(s, "  n{} -> n{} [label=\"{slot}\"];", number[i], number[&v]);
            } else {
                let _ = writeln!(s, "  n{} -> n{};", number[i], number[&v]);
            }
        }
    }
    for (name, id) in graph.outputs() {
        let _ = writeln!(
            s,
            "  \"{}\" [shape=plaintext];\n  n{} -> \"{}\" [style=dashed];",
            dot_escape(name),
            number[id],
            dot_escape(name)
        );
    }
    s.push_str("}\n");
    s
}
