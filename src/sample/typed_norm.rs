//! GraphSAINT normalisation per node type and relation (issue 57 item 4; the derivation
//! is docs/SAMPLING.md's "Typed graphs"): pre-sample N_pre subgraphs with their relations
//! and count C_v per node and C_{u,v,r} per entry of each relation r, then
//!
//! * aggregator coefficients per relation entry α_{u,v,r} = C_{u,v,r} / C_v: in a
//!   subgraph, the entry of relation r in row v and column u is weighted by
//!   1/α = C_v / C_{u,v,r} (row v receives, as for the homogeneous [`super::NormCounts`]);
//! * loss coefficients λ_v = |V_train| · C_v / N_pre on the target types' training nodes
//!   (the nodes the loss sits on; |V_train| counts them over the labelled types).
//!
//! For an induced subgraph C_{u,v,r} equals C_{u,v} of the union graph's entry (u, v): the
//! entry is in the subgraph exactly when both ends are. Counted per relation all the same,
//! so a relation's coefficients are read by its own entry positions (an R-GCN layer
//! streams one relation's CSR), and a sampler that kept only some relations' entries would
//! still be normalised right. A count of 0 reads as in the homogeneous case (1 for an
//! entry, 0.1 for a node's loss weight).
//!
//! Counts are dense (one u32 per node and per relation entry, accumulated with relaxed
//! atomic adds; the sums do not depend on the order, so they are deterministic for a seed).

use std::sync::atomic::{AtomicU32, Ordering};

use rayon::prelude::*;

use crate::sample::typed::sample_typed_subgraph;
use crate::sample::{SampleError, Sampler, Subgraph};
use crate::store::GraphStore;

/// Node and relation-entry appearance counts over N_pre pre-sampled subgraphs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedNormCounts {
    /// The sampler's name.
    pub sampler: String,
    /// Pre-sampled subgraphs N_pre.
    pub subgraphs: u64,
    /// Seed of the pre-sampling.
    pub seed: u64,
    /// C_v per node (global id).
    pub node: Vec<u32>,
    /// C_{u,v,r}: per relation, per entry of its CSR.
    pub relation: Vec<Vec<u32>>,
}

impl TypedNormCounts {
    /// Pre-samples subgraphs `0..subgraphs` (in parallel) and counts.
    pub fn estimate(
        sampler: &(impl Sampler + ?Sized),
        store: &GraphStore,
        subgraphs: u64,
        seed: u64,
        clip_to: usize,
    ) -> Result<Self, SampleError> {
        let zeros = |n: usize| -> Vec<AtomicU32> { (0..n).map(|_| AtomicU32::new(0)).collect() };
        let node = zeros(store.n_nodes());
        let relation: Vec<Vec<AtomicU32>> = (0..store.n_relations())
            .map(|r| zeros(store.relation(r).csr.n_entries()))
            .collect();
        (0..subgraphs)
            .into_par_iter()
            .try_for_each(|i| -> Result<(), SampleError> {
                let s = sample_typed_subgraph(sampler, store, seed, i, clip_to)?;
                for &v in &s.nodes {
                    node[v as usize].fetch_add(1, Ordering::Relaxed);
                }
                let t = s.typed.as_ref().expect("attached");
                for rel in &t.relations {
                    let acc = &relation[rel.relation];
                    for &p in &rel.parent_entries {
                        acc[p as usize].fetch_add(1, Ordering::Relaxed);
                    }
                }
                Ok(())
            })?;
        let finish = |v: Vec<AtomicU32>| v.into_iter().map(AtomicU32::into_inner).collect();
        Ok(TypedNormCounts {
            sampler: sampler.name(),
            subgraphs,
            seed,
            node: finish(node),
            relation: relation.into_iter().map(finish).collect(),
        })
    }

    /// C_v of node `v`.
    pub fn node_count(&self, v: u32) -> u32 {
        self.node[v as usize]
    }

    /// C_{u,v,r} of the entry at position `entry` of relation `r`'s CSR.
    pub fn entry_count(&self, r: usize, entry: u64) -> u32 {
        self.relation[r][entry as usize]
    }

    /// Per relation of `s` (drawn with its relations from the same store), the weights
    /// 1/α of its entries: entry (row v, column u) of relation r gets C_v / C_{u,v,r}
    /// (each count read as at least 1).
    pub fn aggregator_weights(&self, s: &Subgraph) -> Vec<Vec<f32>> {
        let t = s
            .typed
            .as_ref()
            .expect("a subgraph with its relations (attach_relations)");
        t.relations
            .iter()
            .map(|rel| {
                let start = t.type_starts[rel.src] as usize;
                let mut w = Vec::with_capacity(rel.n_entries());
                for k in 0..rel.offsets.len() - 1 {
                    let cv = f64::from(self.node_count(s.nodes[start + k]).max(1));
                    for e in rel.offsets[k]..rel.offsets[k + 1] {
                        let c = self.entry_count(rel.relation, rel.parent_entries[e as usize]);
                        w.push((cv / f64::from(c.max(1))) as f32);
                    }
                }
                w
            })
            .collect()
    }

    /// Loss weight 1/λ_v = N_pre / (C_v · n_train) of each subgraph node, `n_train` the
    /// training nodes of the target types (C_v = 0 read as 0.1); the loss reads it on its
    /// training nodes only, as for the homogeneous [`super::NormCounts::loss_weights`].
    pub fn loss_weights(&self, s: &Subgraph, n_train: usize) -> Vec<f32> {
        let n_pre = self.subgraphs as f64;
        s.nodes
            .iter()
            .map(|&v| {
                let c = match self.node_count(v) {
                    0 => 0.1,
                    c => f64::from(c),
                };
                (n_pre / (c * n_train.max(1) as f64)) as f32
            })
            .collect()
    }
}
