//! Edge sampler (GraphSAINT): draws E undirected edges with P(u, v) ∝ 1/deg(u) + 1/deg(v)
//! from an alias table built once (O(m) build, O(1) per draw); the sample is the edges'
//! endpoints, and the subgraph is induced on them.

use rayon::prelude::*;

use crate::sample::alias::AliasTable;
use crate::sample::spec::{Key, KeyType, SamplerSpec, Value};
use crate::sample::{SampleError, SampleRng, Sampler};
use crate::store::Csr;

/// The edge sampler's row of the sampler table.
pub const SPEC: SamplerSpec = SamplerSpec {
    name: "edge",
    doc: "Edges ∝ 1/deg(u) + 1/deg(v)",
    keys: &[Key {
        name: "edges",
        ty: KeyType::Count,
        default: Some(Value::Count(4000)),
        doc: "Edges per subgraph",
    }],
    whole_graph: false,
    build: |g, k| Ok(Box::new(EdgeSampler::new(g, k.count("edges"))?)),
    // Two endpoints per edge drawn.
    expected_nodes: |k| Some(2 * k.count("edges")),
};

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
        out.reserve(2 * self.edges);
        for _ in 0..self.edges {
            let (u, v) = self.sample_edge(rng);
            out.push(u);
            out.push(v);
        }
        Ok(())
    }
}
