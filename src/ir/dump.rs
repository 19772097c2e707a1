//! The canonical text dump of a graph: one line per node in topological order,
//! `%id = op[attrs](%inputs) : fact  # label`, then the named outputs. `explain` prints it
//! (in schedule order, with each node's cost) and the golden tests diff it, so it must be
//! deterministic.

use std::fmt::Write;

use super::{Graph, IrError, NodeId};

/// The dump of `graph`.
pub fn dump(graph: &Graph) -> Result<String, IrError> {
    Ok(dump_with(graph, &graph.topo_order()?, &|_| String::new()))
}

/// The dump of `graph` with nodes numbered and listed in `order` (a topological order of
/// all its nodes) and `annotate(node)`, when not empty, written after the fact.
pub fn dump_with(graph: &Graph, order: &[NodeId], annotate: &dyn Fn(NodeId) -> String) -> String {
    let mut s = String::new();
    let number: std::collections::HashMap<_, _> =
        order.iter().enumerate().map(|(k, &v)| (v, k)).collect();
    let num = |i: &NodeId| number.get(i).map_or("?".to_string(), |k| k.to_string());
    for &v in order {
        let n = graph.node(v);
        let args: Vec<String> = n.inputs.iter().map(|i| format!("%{}", num(i))).collect();
        let attrs = n.op.attrs();
        let attrs = if attrs.is_empty() {
            String::new()
        } else {
            format!("[{attrs}]")
        };
        let _ = write!(
            s,
            "%{} = {}{}({}) : {}",
            num(&v),
            n.op.name(),
            attrs,
            args.join(", "),
            n.fact
        );
        let extra = annotate(v);
        if !extra.is_empty() {
            let _ = write!(s, "  {extra}");
        }
        if !n.label.is_empty() {
            let _ = write!(s, "  # {}", n.label);
        }
        if !n.note.is_empty() {
            let _ = write!(s, " [{}]", n.note);
        }
        s.push('\n');
    }
    for (name, id) in graph.outputs() {
        let _ = writeln!(s, "output {name} = %{}", num(id));
    }
    s
}
