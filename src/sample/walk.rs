//! Random-walk sampler (GraphSAINT): r roots drawn uniformly from the nodes that have
//! neighbours, a walk of h steps from each; the sample is every node visited.

use crate::sample::params::SamplerParams;
use crate::sample::{below, EdgeNodes, SampleError, SampleRng, Sampler};
use crate::store::Csr;

sampler_params! {
    /// Parameters of the random-walk sampler (plan `kind = "rw"`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct WalkParams {
        /// Walk roots r.
        pub roots: usize = 3000,
        /// Walk length h.
        pub depth: usize = 2,
    }
}

impl SamplerParams for WalkParams {
    const KIND: &'static str = "rw";
    const DOC: &'static str = "Random walks";
    type Sampler<'g> = RandomWalkSampler<'g>;

    fn build<'g>(&self, graph: Csr<'g>) -> Result<RandomWalkSampler<'g>, SampleError> {
        RandomWalkSampler::new(graph, self.roots, self.depth)
    }

    /// Each walk visits its root and h more nodes (no dead ends: roots have neighbours
    /// and the graph is symmetric).
    fn expected_nodes(&self) -> Option<usize> {
        Some(self.roots.saturating_mul(self.depth.saturating_add(1)))
    }
}

/// Random-walk sampler over one graph.
pub struct RandomWalkSampler<'g> {
    graph: Csr<'g>,
    roots: usize,
    depth: usize,
    candidates: EdgeNodes,
}

impl<'g> RandomWalkSampler<'g> {
    /// `roots` walks of `depth` steps.
    pub fn new(graph: Csr<'g>, roots: usize, depth: usize) -> Result<Self, SampleError> {
        if roots == 0 {
            return Err(SampleError::Param("rw: --roots expected ≥ 1, got 0".into()));
        }
        let candidates = EdgeNodes::new(graph);
        if candidates.is_empty() {
            return Err(SampleError::NoEdges);
        }
        Ok(RandomWalkSampler {
            graph,
            roots,
            depth,
            candidates,
        })
    }
}

impl Sampler for RandomWalkSampler<'_> {
    fn name(&self) -> String {
        format!("rw(roots={}, depth={})", self.roots, self.depth)
    }

    fn graph(&self) -> Csr<'_> {
        self.graph
    }

    fn sample_nodes(&self, rng: &mut SampleRng, out: &mut Vec<u32>) -> Result<(), SampleError> {
        out.reserve(self.roots.saturating_mul(self.depth.saturating_add(1)));
        for _ in 0..self.roots {
            let mut v = self
                .candidates
                .get(below(rng, self.candidates.len() as u64) as usize);
            out.push(v);
            for _ in 0..self.depth {
                if self.graph.degree(v) == 0 {
                    break;
                }
                v = crate::sample::random_neighbor(self.graph, v, rng)?;
                out.push(v);
            }
        }
        Ok(())
    }
}
