//! The canonical text dump of a graph: one line per node in topological order,
//! `%id = op[attrs](%inputs) : fact  # label`, then the named outputs. `explain` prints it
//! and the golden tests diff it, so it must be deterministic.

use std::fmt::Write;

use super::{Graph, IrError};

/// The dump of `graph`.
pub fn dump(graph: &Graph) -> Result<String, IrError> {
    let mut s = String::new();
    let order = graph.topo_order()?;
    let number: std::collections::HashMap<_, _> =
        order.iter().enumerate().map(|(k, &v)| (v, k)).collect();
    for &v in &order {
        let n = graph.node(v);
        let args: Vec<String> = n.inputs.iter().map(|i| format!("%{}", number[i])).collect();
        let attrs = n.op.attrs();
        let attrs = if attrs.is_empty() {
            String::new()
        } else {
            format!("[{attrs}]")
        };
        let _ = write!(
            s,
            "%{} = {}{}({}) : {}",
            number[&v],
            n.op.name(),
            attrs,
            args.join(", "),
            n.fact
        );
        if !n.label.is_empty() {
            let _ = write!(s, "  # {}", n.label);
        }
        if !n.note.is_empty() {
            let _ = write!(s, " [{}]", n.note);
        }
        s.push('\n');
    }
    for (name, id) in graph.outputs() {
        let _ = writeln!(s, "output {name} = %{}", number[id]);
    }
    Ok(s)
}
