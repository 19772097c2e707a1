//! [`GraphSource`]: where source ops (sample, features, targets, adjacency normalisation)
//! get their data, as a trait the IR's ops see through their [`Ctx`](super::op::Ctx); and
//! [`WithSampler`], a wrapper that only changes where subgraphs come from. The store-backed
//! implementation is `op::StoreSource`.

use crate::sample::Subgraph;

use super::op::OpError;
use super::Targets;

/// The graph a plan trains on, as the source ops see it.
pub trait GraphSource: Sync {
    /// Subgraph of step `step` (deterministic for the source's seed).
    fn sample(&self, step: u64) -> Result<Subgraph, OpError>;
    /// Feature width F.
    fn n_features(&self) -> usize;
    /// Classes C.
    fn n_classes(&self) -> usize;
    /// Whether labels are multi-label (sigmoid loss) rather than single-label (softmax).
    fn multilabel(&self) -> bool;
    /// Writes the feature rows of `nodes` (original ids) into `out` (|nodes| × F).
    fn features(&self, nodes: &[u32], out: &mut [f32]) -> Result<(), OpError>;
    /// Targets of a subgraph's nodes, with loss weights (0 for nodes outside the loss).
    fn targets(&self, sub: &Subgraph) -> Result<Targets, OpError>;
    /// Degree of an original node in the graph sampled from (GraphSAINT's normalisation
    /// divides by it).
    fn degree(&self, node: u32) -> usize;
    /// GraphSAINT aggregator weights C_v / C_uv per subgraph entry, when estimated.
    fn aggregator_weights(&self, sub: &Subgraph) -> Option<Vec<f32>>;
}

/// The [`GraphSource`] methods other than `sample`, forwarded to `self.inner` (a
/// `&dyn GraphSource`): for wrappers that only change where subgraphs come from.
macro_rules! forward_to_inner {
    () => {
        fn n_features(&self) -> usize {
            self.inner.n_features()
        }
        fn n_classes(&self) -> usize {
            self.inner.n_classes()
        }
        fn multilabel(&self) -> bool {
            self.inner.multilabel()
        }
        fn features(&self, nodes: &[u32], out: &mut [f32]) -> Result<(), OpError> {
            self.inner.features(nodes, out)
        }
        fn targets(&self, sub: &Subgraph) -> Result<Targets, OpError> {
            self.inner.targets(sub)
        }
        fn degree(&self, node: u32) -> usize {
            self.inner.degree(node)
        }
        fn aggregator_weights(&self, sub: &Subgraph) -> Option<Vec<f32>> {
            self.inner.aggregator_weights(sub)
        }
    };
}
pub(crate) use forward_to_inner;

/// `inner`'s graph with its subgraphs taken from `sample` instead: a source that only
/// changes where subgraphs come from (pre-sampled ones, counted or logged ones) and
/// forwards everything else.
pub struct WithSampler<'a, F> {
    inner: &'a dyn GraphSource,
    sample: F,
}

impl<'a, F> WithSampler<'a, F>
where
    F: Fn(u64) -> Result<Subgraph, OpError> + Sync,
{
    /// Serves `inner`'s data with subgraph `step` from `sample(step)`.
    pub fn new(inner: &'a dyn GraphSource, sample: F) -> WithSampler<'a, F> {
        WithSampler { inner, sample }
    }
}

impl<F> GraphSource for WithSampler<'_, F>
where
    F: Fn(u64) -> Result<Subgraph, OpError> + Sync,
{
    fn sample(&self, step: u64) -> Result<Subgraph, OpError> {
        (self.sample)(step)
    }
    forward_to_inner!();
}
