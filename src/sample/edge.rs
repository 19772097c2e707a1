//! Edge sampler (GraphSAINT): draws E undirected edges with P(u, v) ∝ 1/deg(u) + 1/deg(v)
//! from an alias table built once (O(m) build, O(1) per draw); the sample is the edges'
//! endpoints, and the subgraph is induced on them.

use rayon::prelude::*;

use crate::sample::alias::AliasTable;
use crate::sample::params::SamplerParams;
use crate::sample::{SampleError, SampleRng, Sampler};
use crate::store::Csr;

sampler_params! {
    /// Parameters of the edge sampler (plan `kind = "edge"`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct EdgeParams {
        /// Edges per subgraph.
        pub edges: usize = 4000,
    }
}

impl SamplerParams for EdgeParams {
    const KIND: &'static str = "edge";
    const DOC: &'static str = "Edges ∝ 1/deg(u) + 1/deg(v)";
    type Sampler<'g> = EdgeSampler<'g>;

    fn build<'g>(&self, graph: Csr<'g>) -> Result<EdgeSampler<'g>, SampleError> {
        EdgeSampler::new(graph, self.edges)
    }

    /// Two endpoints per edge drawn.
    fn expected_nodes(&self) -> Option<usize> {
        Some(self.edges.saturating_mul(2))
    }
}

/// Edge sampler over one graph.
pub struct EdgeSampler<'g> {
    graph: Csr<'g>,
    edges: usize,
    /// Source of each undirected edge (u < v).
    src: Vec<u32>,
    /// Destination of each undirected edge.
    dst: Vec<u32>,
    table: AliasTable,
}

impl<'g> EdgeSampler<'g> {
    /// Draws `edges` edges per subgraph. Builds the alias table over the undirected edges.
    pub fn new(graph: Csr<'g>, edges: usize) -> Result<Self, SampleError> {
        if edges == 0 {
            return Err(SampleError::Param(
                "edge: --edges expected ≥ 1, got 0".into(),
            ));
        }
        let n = graph.n_nodes() as u32;
        let pairs: Vec<(u32, u32)> = (0..n)
            .into_par_iter()
            .flat_map_iter(|u| {
                graph
                    .neighbors(u)
                    .iter()
                    .filter(move |&&v| v > u)
                    .map(move |&v| (u, v))
            })
            .collect();
        if let Some(&(u, v)) = pairs.iter().find(|&&(_, v)| v >= n) {
            return Err(crate::store::StoreError::neighbor_out_of_range(u, v, u64::from(n)).into());
        }
        let weights: Vec<f64> = pairs
            .par_iter()
            .map(|&(u, v)| 1.0 / graph.degree(u) as f64 + 1.0 / graph.degree(v) as f64)
            .collect();
        let table = AliasTable::new(&weights).ok_or(SampleError::NoEdges)?;
        let (src, dst) = pairs.into_iter().unzip();
        Ok(EdgeSampler {
            graph,
            edges,
            src,
            dst,
            table,
        })
    }

    /// One edge draw.
    pub fn sample_edge(&self, rng: &mut SampleRng) -> (u32, u32) {
        let e = self.table.sample(rng);
        (self.src[e], self.dst[e])
    }
}

impl Sampler for EdgeSampler<'_> {
    fn name(&self) -> String {
        format!("edge(edges={})", self.edges)
    }

    fn graph(&self) -> Csr<'_> {
        self.graph
    }

    fn sample_nodes(&self, rng: &mut SampleRng, out: &mut Vec<u32>) -> Result<(), SampleError> {
        out.reserve(self.edges.saturating_mul(2));
        for _ in 0..self.edges {
            let (u, v) = self.sample_edge(rng);
            out.push(u);
            out.push(v);
        }
        Ok(())
    }
}
