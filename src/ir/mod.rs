//! The dataflow IR of a training step: facts (kinds and symbolic shapes), values, the DAG
//! on petgraph, the `Op` trait its nodes hold (with the [`GraphSource`] their forward
//! reads), parameters and the canonical text dump that `explain` and the golden tests use.
//! Autodiff, which appends the backward DAG through each op's `backward`, is
//! [`crate::autodiff`]; the ops themselves are [`crate::op`].

mod ctx;
pub mod dump;
pub mod fact;
pub mod graph;
pub mod ndarray;
mod neighbour;
pub mod op;
pub mod op_error;
pub mod params;
mod parts;
mod passes;
pub mod recycle;
pub mod source;
pub mod value;

pub use fact::{Bindings, Dim, Fact, Kind};
pub use graph::{Graph, Node, NodeId};
pub use op::{Op, OpError};
pub use params::{Init, ParamDecl, Params};
pub use value::{SparseMat, Structure, TargetLabels, Targets, Tensor, Value};

pub use source::GraphSource;

/// Errors of the IR layer: building, checking and differentiating a graph.
#[derive(Debug, thiserror::Error)]
pub enum IrError {
    /// An op refused its arguments, or failed while running.
    #[error("{op} in `{label}`: {source}")]
    Op {
        /// The op.
        op: String,
        /// The node's label (its plan expression).
        label: String,
        /// What the op said.
        source: OpError,
    },
    /// A node id that is not in the graph.
    #[error("node %{0} is not in the graph")]
    MissingNode(usize),
    /// The graph has a cycle.
    #[error("the graph has a cycle through `{at}`")]
    Cycle {
        /// A node on it.
        at: String,
    },
    /// A broken invariant (a bug in a pass or an op, reported instead of a panic).
    #[error("IR invariant broken: {0}")]
    Invariant(String),
    /// Differentiation is impossible (a loss that is not a scalar, an unreachable
    /// parameter).
    #[error("autodiff: {0}")]
    Autodiff(String),
    /// Something this machine cannot run (bf16 products on a CPU without AVX512_BF16).
    #[error("{0}")]
    Unsupported(String),
}
