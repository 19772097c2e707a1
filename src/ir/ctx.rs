//! What an op's forward sees besides its inputs ([`Ctx`]): a leaf of `ir/`, so that the
//! op protocol ([`super::op`]) and its capabilities ([`super::neighbour`]) both read it
//! without importing each other. Re-exported by [`super::op`].

use super::op_error::OpError;
use super::source::GraphSource;
use super::{Bindings, NodeId, Params};

/// What a forward sees besides its inputs.
pub struct Ctx<'a> {
    /// The graph being trained on, for source ops (sample, features, targets).
    pub source: Option<&'a dyn GraphSource>,
    /// The parameters' current values.
    pub params: &'a Params,
    /// The step number (subgraph index).
    pub step: u64,
    /// The run's seed.
    pub seed: u64,
    /// Training (dropout active) or evaluation.
    pub training: bool,
    /// The node running, as a stable key for per-node randomness (dropout masks).
    pub node: NodeId,
    /// The step's symbol values.
    pub bindings: Bindings,
}

impl Ctx<'_> {
    /// The data source, or a clear error for ops that need one.
    pub fn source(&self, op: &str) -> Result<&dyn GraphSource, OpError> {
        self.source.ok_or_else(|| {
            OpError::Missing(format!(
                "{op}: no graph to read (run without a data source)"
            ))
        })
    }
}
