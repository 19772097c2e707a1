//! Edge sampler (GraphSAINT): draws E undirected edges with P(u, v) ∝ 1/deg(u) + 1/deg(v);
//! the sample is the edges' endpoints, and the subgraph is induced on them.
//!
//! How, in O(1) memory per edge: a draw takes a uniformly random node x among the N′ nodes
//! that have a neighbour, then a uniformly random neighbour y of x, and returns the edge
//! {x, y}. Edge {u, v} comes out when x = u and y = v, or x = v and y = u:
//!
//!   P({u, v}) = (1/N′)·(1/deg u) + (1/N′)·(1/deg v) = (1/deg u + 1/deg v) / N′,
//!
//! which is the paper's distribution exactly (its normaliser Σ_{u<v} (1/deg u + 1/deg v)
//! is Σ_u deg u / deg u = N′). A self-loop drawn is drawn again (the paper's edges join two
//! nodes; redrawing keeps the other edges' proportions). The alias table over the edges
//! this replaced held 16 bytes per undirected edge (25 GB at ogbn-papers100M's 1.6 B) and
//! took a pass over all of them to build; the draw itself was O(1) and still is (two
//! random numbers, a select among the nodes with neighbours, one row's offsets).

use crate::sample::params::SamplerParams;
use crate::sample::{below, random_neighbor, EdgeNodes, SampleError, SampleRng, Sampler};
use crate::store::{Csr, GraphStore};

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

    fn build<'g>(&self, _: &'g GraphStore, graph: Csr<'g>) -> Result<EdgeSampler<'g>, SampleError> {
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
    /// The nodes with a neighbour (x of a draw).
    nodes: EdgeNodes,
}

/// Draws of a self-loop in a row before the row is taken for loops alone (an error): a
/// row with one other neighbour among d entries redraws with probability (d − 1)/d.
const LOOP_REDRAWS: usize = 1 << 16;

impl<'g> EdgeSampler<'g> {
    /// Draws `edges` edges per subgraph.
    pub fn new(graph: Csr<'g>, edges: usize) -> Result<Self, SampleError> {
        if edges == 0 {
            return Err(SampleError::Param(
                "edge: --edges expected ≥ 1, got 0".into(),
            ));
        }
        let nodes = EdgeNodes::new(graph);
        if nodes.is_empty() {
            return Err(SampleError::NoEdges);
        }
        Ok(EdgeSampler {
            graph,
            edges,
            nodes,
        })
    }

    /// One edge draw, as (u, v) with u < v; an error for a neighbour id ≥ N (a corrupt
    /// store) or a graph whose only edges are self-loops.
    pub fn sample_edge(&self, rng: &mut SampleRng) -> Result<(u32, u32), SampleError> {
        for _ in 0..LOOP_REDRAWS {
            let x = self.nodes.get(below(rng, self.nodes.len() as u64) as usize);
            let y = random_neighbor(self.graph, x, rng)?;
            if y != x {
                return Ok((x.min(y), x.max(y)));
            }
        }
        Err(SampleError::Param(format!(
            "edge: {LOOP_REDRAWS} draws in a row were self-loops; the edge sampler needs edges \
             between two nodes"
        )))
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
            let (u, v) = self.sample_edge(rng)?;
            out.push(u);
            out.push(v);
        }
        Ok(())
    }
}
