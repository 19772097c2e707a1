//! The partition grid's rows: nodes split into n parts by a degree-guided zig-zag (nodes in
//! decreasing degree dealt 0, 1, …, n−1, n−1, …, 0, 0, 1, …), so every part gets a like
//! share of the samples (a node's samples grow with its degree), and per part the noise
//! table that draws negatives ∝ deg^power from that part alone. Vertex and context rows
//! use the same split. O(N) memory: a part id and a noise weight per node.

use rand_core::RngCore;

use crate::sample::alias::AliasTable;
use crate::store::Csr;

/// The split of 0..N into `n` parts, and each part's noise table.
#[derive(Debug)]
pub struct Parts {
    /// Part of each node.
    pub part_of: Vec<u32>,
    /// Nodes of each part, ascending.
    pub members: Vec<Vec<u32>>,
    /// Per part: the noise table over `members` (None: no node of the part has an edge).
    noise: Vec<Option<AliasTable>>,
}

impl Parts {
    /// Splits `graph`'s nodes into `n ≥ 1` parts; the noise of node v ∝ deg(v)^power.
    pub fn new(graph: Csr<'_>, n: usize, power: f64) -> Parts {
        let n = n.max(1);
        let nodes = graph.n_nodes();
        let mut order: Vec<u32> = (0..nodes as u32).collect();
        // Decreasing degree, ties by id: deterministic.
        order.sort_unstable_by_key(|&v| (std::cmp::Reverse(graph.degree(v)), v));
        let mut part_of = vec![0u32; nodes];
        for (k, &v) in order.iter().enumerate() {
            let (round, pos) = (k / n, k % n);
            part_of[v as usize] = if round % 2 == 0 { pos } else { n - 1 - pos } as u32;
        }
        let mut members = vec![Vec::new(); n];
        for v in 0..nodes as u32 {
            members[part_of[v as usize] as usize].push(v);
        }
        let noise = members
            .iter()
            .map(|m| {
                let w: Vec<f64> = m
                    .iter()
                    .map(|&v| noise_weight(graph.degree(v), power))
                    .collect();
                AliasTable::new(&w)
            })
            .collect();
        Parts {
            part_of,
            members,
            noise,
        }
    }

    /// Number of parts.
    pub fn n(&self) -> usize {
        self.members.len()
    }

    /// Part of node v.
    #[inline]
    pub fn part(&self, v: u32) -> usize {
        self.part_of[v as usize] as usize
    }

    /// Part j's noise table over its members (None: no node of the part has an edge).
    pub fn noise(&self, j: usize) -> Option<&AliasTable> {
        self.noise[j].as_ref()
    }

    /// A negative from part `j`, ∝ deg^power within it (None if the part has no edges).
    #[inline]
    pub fn negative(&self, j: usize, rng: &mut impl RngCore) -> Option<u32> {
        self.noise[j]
            .as_ref()
            .map(|t| self.members[j][t.sample(rng)])
    }
}

/// deg^power, 0 for an isolated node (it is in no sample, so it is no negative either).
pub fn noise_weight(degree: usize, power: f64) -> f64 {
    if degree == 0 {
        0.0
    } else {
        (degree as f64).powf(power)
    }
}
