//! [`GraphSource`]: where source ops (sample, features, targets, adjacency normalisation)
//! get their data, as a trait the IR's ops see through their [`Ctx`](super::op::Ctx); and
//! [`WithSampler`], a wrapper that only changes where subgraphs come from. The store-backed
//! implementation is `op::StoreSource`.

use crate::sample::Subgraph;
use crate::store::TypesMeta;

use super::op_error::OpError;
use super::Targets;

/// The graph a plan trains on, as the source ops see it.
pub trait GraphSource: Sync {
    /// Subgraph of step `step` (deterministic for the source's seed).
    fn sample(&self, step: u64) -> Result<Subgraph, OpError>;
    /// The subgraph of every step, shared, when the source hands out one and the same
    /// (a whole-graph sampler's, built once); `None` when steps differ. The `sample` op
    /// reads it first, so no step copies it (a sixth of a full-batch R-GCN step did).
    fn fixed_sample(&self) -> Result<Option<std::sync::Arc<Subgraph>>, OpError> {
        Ok(None)
    }
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
    /// Each subgraph node's weight in statistics over the subgraph's nodes, in proportion
    /// to 1 / P(v sampled) — GraphSAINT's node normalisation 1/C_v (C_v the node's count
    /// in the pre-sampled subgraphs; `batchnorm` weighs its batch statistics by it) — when
    /// the sampler's counts are estimated. Default: none (every node alike).
    fn node_weights(&self, sub: &Subgraph) -> Option<Vec<f32>> {
        let _ = sub;
        None
    }
    /// Node `node`'s degree through relation `r` in the graph sampled from, when the
    /// source has relations and the graph sampled from is the one they are of (a typed
    /// store's full graph): what `A_saint[r]` divides by. Default: none.
    fn relation_degree(&self, r: usize, node: u32) -> Option<usize> {
        let _ = (r, node);
        None
    }
    /// The node types and relations of a typed store (issue 57); `None` for a homogeneous
    /// graph (one type, one relation: the whole graph). A typed source's subgraphs carry
    /// their relations ([`Subgraph::typed`]).
    fn types(&self) -> Option<&TypesMeta> {
        None
    }
    /// Writes node type `t`'s feature rows of `nodes` (original ids, all of type `t`) into
    /// `out` (|nodes| × F_t). Default: the features of a one-type graph (`t` = 0).
    fn type_features(&self, t: usize, nodes: &[u32], out: &mut [f32]) -> Result<(), OpError> {
        if t != 0 || self.types().is_some() {
            return Err(OpError::Source(format!(
                "the graph has no features of node type {t}"
            )));
        }
        self.features(nodes, out)
    }
    /// Node type `t`'s feature rows of `nodes` (all of that type) with their zeros left
    /// out, by position, `width` wide: a typed product the planner makes sparse. Default:
    /// gathered dense with [`GraphSource::type_features`], then compressed.
    fn sparse_type_features(
        &self,
        t: usize,
        nodes: &[u32],
        width: usize,
    ) -> Result<FeatureCsr, OpError> {
        let mut dense = vec![0.0f32; nodes.len() * width];
        self.type_features(t, nodes, &mut dense)?;
        Ok(FeatureCsr::from_rows(
            dense.chunks_exact(width.max(1)).take(nodes.len()),
        ))
    }
    /// The feature rows of `nodes` with their zeros left out, for the products the planner
    /// makes sparse ([`crate::planner::SparseFeatures`]). Default: gathered dense with
    /// [`GraphSource::features`], then compressed.
    fn sparse_features(&self, nodes: &[u32]) -> Result<FeatureRows, OpError> {
        let f = self.n_features();
        let mut dense = vec![0.0f32; nodes.len() * f];
        self.features(nodes, &mut dense)?;
        Ok(FeatureRows::Local(FeatureCsr::from_rows(
            (0..nodes.len()).map(|i| &dense[i * f..(i + 1) * f]),
        )))
    }
}

/// Feature rows with their zeros left out: row r's nonzero columns (ascending) and values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FeatureCsr {
    /// Row r's entries are `offsets[r]..offsets[r + 1]`.
    pub offsets: Vec<u64>,
    /// Column ids.
    pub cols: Vec<u32>,
    /// Values (never 0).
    pub vals: Vec<f32>,
}

impl FeatureCsr {
    /// The nonzeros of dense rows, in order.
    pub fn from_rows<'r>(rows: impl Iterator<Item = &'r [f32]>) -> FeatureCsr {
        let mut m = FeatureCsr {
            offsets: vec![0],
            ..FeatureCsr::default()
        };
        for row in rows {
            m.push_row(row);
        }
        m
    }

    /// Appends a dense row's nonzeros as the next row.
    pub fn push_row(&mut self, row: &[f32]) {
        for (j, &x) in row.iter().enumerate() {
            if x != 0.0 {
                self.cols.push(j as u32);
                self.vals.push(x);
            }
        }
        self.offsets.push(self.cols.len() as u64);
    }

    /// Rows.
    pub fn n_rows(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Row `r`'s columns and values.
    pub fn row(&self, r: usize) -> (&[u32], &[f32]) {
        let (lo, hi) = (self.offsets[r] as usize, self.offsets[r + 1] as usize);
        (&self.cols[lo..hi], &self.vals[lo..hi])
    }
}

/// What [`GraphSource::sparse_features`] gives: rows indexed by original node id (a source
/// that compressed its whole feature matrix once) or by position in the node list asked
/// for (compressed for this call).
#[derive(Clone, Debug)]
pub enum FeatureRows {
    /// The whole graph's rows, by original node id.
    Whole(std::sync::Arc<FeatureCsr>),
    /// The asked nodes' rows, by position.
    Local(FeatureCsr),
}

impl FeatureRows {
    /// The row of the node at position `i` of the list asked for, whose original id is `v`.
    pub fn row(&self, i: usize, v: u32) -> (&[u32], &[f32]) {
        match self {
            FeatureRows::Whole(m) => m.row(v as usize),
            FeatureRows::Local(m) => m.row(i),
        }
    }
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
        fn relation_degree(&self, r: usize, node: u32) -> Option<usize> {
            self.inner.relation_degree(r, node)
        }
        fn node_weights(&self, sub: &Subgraph) -> Option<Vec<f32>> {
            self.inner.node_weights(sub)
        }
        fn types(&self) -> Option<&$crate::store::TypesMeta> {
            self.inner.types()
        }
        fn type_features(&self, t: usize, nodes: &[u32], out: &mut [f32]) -> Result<(), OpError> {
            self.inner.type_features(t, nodes, out)
        }
        fn sparse_features(
            &self,
            nodes: &[u32],
        ) -> Result<$crate::ir::source::FeatureRows, OpError> {
            self.inner.sparse_features(nodes)
        }
        fn sparse_type_features(
            &self,
            t: usize,
            nodes: &[u32],
            width: usize,
        ) -> Result<$crate::ir::source::FeatureCsr, OpError> {
            self.inner.sparse_type_features(t, nodes, width)
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
