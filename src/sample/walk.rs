//! Random-walk sampler (GraphSAINT): r roots drawn uniformly from the nodes that have
//! neighbours, a walk of h steps from each; the sample is every node visited.

use crate::sample::params::SamplerParams;
use std::cell::RefCell;

use rand_core::RngCore;

use crate::sample::{
    below, neighbor_at, scale, EdgeNodes, NodeList, SampleError, SampleRng, Sampler,
};
use crate::store::{Csr, GraphStore};

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

    fn build<'g>(
        &self,
        _: &'g GraphStore,
        graph: Csr<'g>,
    ) -> Result<RandomWalkSampler<'g>, SampleError> {
        RandomWalkSampler::new(graph, self.roots, self.depth)
    }

    /// Each walk visits its root and h more nodes (no dead ends: roots have neighbours
    /// and the graph is symmetric).
    fn expected_nodes(&self) -> Option<usize> {
        Some(self.roots.saturating_mul(self.depth.saturating_add(1)))
    }
}

/// Random-walk sampler over one graph. Roots are drawn uniformly from `R`: every node
/// with a neighbour ([`EdgeNodes`], the homogeneous sampler) or a list (the typed
/// sampler's roots of the target types, [`crate::sample::typed`]); generic, so the
/// homogeneous draw compiles as before.
pub struct RandomWalkSampler<'g, R: NodeList = EdgeNodes> {
    graph: Csr<'g>,
    roots: usize,
    depth: usize,
    candidates: R,
}

impl<'g> RandomWalkSampler<'g> {
    /// `roots` walks of `depth` steps.
    pub fn new(graph: Csr<'g>, roots: usize, depth: usize) -> Result<Self, SampleError> {
        if roots == 0 {
            return Err(SampleError::Param("rw: --roots expected ≥ 1, got 0".into()));
        }
        Self::with_roots(graph, EdgeNodes::new(graph), roots, depth)
    }
}

impl<'g, R: NodeList> RandomWalkSampler<'g, R> {
    /// `roots` walks of `depth` steps from roots drawn uniformly from `candidates`, each of
    /// which must have a neighbour in `graph` (an empty list is [`SampleError::NoEdges`]).
    pub fn with_roots(
        graph: Csr<'g>,
        candidates: R,
        roots: usize,
        depth: usize,
    ) -> Result<Self, SampleError> {
        if roots == 0 {
            return Err(SampleError::Param("rw: --roots expected ≥ 1, got 0".into()));
        }
        if candidates.count() == 0 {
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

impl<R: NodeList> Sampler for RandomWalkSampler<'_, R> {
    fn name(&self) -> String {
        format!("rw(roots={}, depth={})", self.roots, self.depth)
    }

    fn graph(&self) -> Csr<'_> {
        self.graph
    }

    /// The walks advance in lockstep, a step of every walk before the next step of any,
    /// so the independent memory reads of 3000 walks overlap, where walk by walk each step
    /// waits for the last (two dependent cache misses per step: 3.3× faster on a Kronecker
    /// scale-17 graph, BENCHMARKS.md). The output is the sequential walk's, draw for draw:
    /// walk i's step s takes the random number the sequential order gives it,
    /// i·(h + 1) + s, and its node goes to the same place in `out`. That holds while no walk
    /// ends early; a node without neighbours (a directed or corrupt store) sends the whole
    /// sample down the sequential path from the same generator state.
    fn sample_nodes(&self, rng: &mut SampleRng, out: &mut Vec<u32>) -> Result<(), SampleError> {
        let per = self.depth.saturating_add(1);
        let total = self.roots.saturating_mul(per);
        let start = out.len();
        let saved = rng.clone();
        DRAWS
            .with(|cell| {
                let mut draws = cell.borrow_mut();
                draws.clear();
                draws.extend((0..total).map(|_| rng.next_u64()));
                out.resize(start + total, 0);
                let walks = &mut out[start..];
                let n = self.candidates.count() as u64;
                for (i, w) in walks.chunks_exact_mut(per).enumerate() {
                    w[0] = self.candidates.at(scale(draws[i * per], n) as usize);
                }
                for s in 1..per {
                    for (i, w) in walks.chunks_exact_mut(per).enumerate() {
                        match neighbor_at(self.graph, w[s - 1], draws[i * per + s])? {
                            Some(v) => w[s] = v,
                            None => return Ok(false),
                        }
                    }
                }
                Ok(true)
            })
            .and_then(|whole| match whole {
                true => Ok(()),
                false => {
                    *rng = saved;
                    out.truncate(start);
                    self.walk_by_walk(rng, out)
                }
            })
    }
}

impl<R: NodeList> RandomWalkSampler<'_, R> {
    /// Walk after walk, each ending at a node without neighbours.
    fn walk_by_walk(&self, rng: &mut SampleRng, out: &mut Vec<u32>) -> Result<(), SampleError> {
        out.reserve(self.roots.saturating_mul(self.depth.saturating_add(1)));
        for _ in 0..self.roots {
            let mut v = self
                .candidates
                .at(below(rng, self.candidates.count() as u64) as usize);
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

thread_local! {
    /// The random numbers of one sample, reused.
    static DRAWS: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}
