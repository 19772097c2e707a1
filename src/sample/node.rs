//! Node sampler (n draws ∝ degree, or uniform over the nodes that have neighbours) and the
//! full "sampler" (the whole graph as one subgraph: full-batch baselines, small graphs).
//!
//! Drawing ∝ degree needs no table: a uniform entry position k ∈ [0, nnz) belongs to row u
//! with probability deg(u)/nnz, and its row is found by binary search on the offsets.

use crate::sample::params::SamplerParams;
use crate::sample::{below, nodes_with_edges, SampleError, SampleRng, Sampler};
use crate::store::{Csr, GraphStore};

sampler_params! {
    /// Parameters of the node sampler (plan `kind = "node"`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct NodeParams {
        /// Nodes drawn.
        pub budget: usize = 8000,
        /// Uniform node sampling instead of ∝ degree.
        pub uniform: bool = false,
    }
}

impl SamplerParams for NodeParams {
    const KIND: &'static str = "node";
    const DOC: &'static str = "Nodes ∝ degree (or uniform with `uniform`)";
    type Sampler<'g> = NodeSampler<'g>;

    fn build<'g>(&self, _: &'g GraphStore, graph: Csr<'g>) -> Result<NodeSampler<'g>, SampleError> {
        NodeSampler::new(graph, self.budget, !self.uniform)
    }

    fn expected_nodes(&self) -> Option<usize> {
        Some(self.budget)
    }
}

sampler_params! {
    /// Parameters of the full "sampler" (plan `kind = "full"`): none.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct FullParams {}
}

impl SamplerParams for FullParams {
    const KIND: &'static str = "full";
    const DOC: &'static str = "The whole graph";
    const WHOLE_GRAPH: bool = true;
    type Sampler<'g> = FullSampler<'g>;

    fn build<'g>(&self, _: &'g GraphStore, graph: Csr<'g>) -> Result<FullSampler<'g>, SampleError> {
        Ok(FullSampler::new(graph))
    }

    fn expected_nodes(&self) -> Option<usize> {
        None
    }
}

/// Node sampler over one graph.
pub struct NodeSampler<'g> {
    graph: Csr<'g>,
    budget: usize,
    by_degree: bool,
    candidates: Vec<u32>,
}

impl<'g> NodeSampler<'g> {
    /// `budget` draws per subgraph, ∝ degree if `by_degree`, else uniform.
    pub fn new(graph: Csr<'g>, budget: usize, by_degree: bool) -> Result<Self, SampleError> {
        if budget == 0 {
            return Err(SampleError::Param(
                "node: --budget expected ≥ 1, got 0".into(),
            ));
        }
        if graph.n_entries() == 0 {
            return Err(SampleError::NoEdges);
        }
        let candidates = if by_degree {
            Vec::new()
        } else {
            nodes_with_edges(graph)
        };
        Ok(NodeSampler {
            graph,
            budget,
            by_degree,
            candidates,
        })
    }

    /// One node draw.
    pub fn sample_node(&self, rng: &mut SampleRng) -> u32 {
        if self.by_degree {
            let k = below(rng, self.graph.n_entries() as u64);
            (self.graph.offsets().partition_point(|&o| o <= k) - 1) as u32
        } else {
            self.candidates[below(rng, self.candidates.len() as u64) as usize]
        }
    }
}

impl Sampler for NodeSampler<'_> {
    fn name(&self) -> String {
        format!(
            "node(budget={}, {})",
            self.budget,
            if self.by_degree { "degree" } else { "uniform" }
        )
    }

    fn graph(&self) -> Csr<'_> {
        self.graph
    }

    fn sample_nodes(&self, rng: &mut SampleRng, out: &mut Vec<u32>) -> Result<(), SampleError> {
        out.extend((0..self.budget).map(|_| self.sample_node(rng)));
        Ok(())
    }
}

/// The whole graph as one subgraph.
pub struct FullSampler<'g> {
    graph: Csr<'g>,
}

impl<'g> FullSampler<'g> {
    /// The full sampler over `graph`.
    pub fn new(graph: Csr<'g>) -> Self {
        FullSampler { graph }
    }
}

impl Sampler for FullSampler<'_> {
    fn name(&self) -> String {
        "full".into()
    }

    fn graph(&self) -> Csr<'_> {
        self.graph
    }

    fn sample_nodes(&self, _rng: &mut SampleRng, out: &mut Vec<u32>) -> Result<(), SampleError> {
        out.extend(0..self.graph.n_nodes() as u32);
        Ok(())
    }

    fn whole_graph(&self) -> bool {
        true
    }
}
