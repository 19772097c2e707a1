//! GraphSAINT normalisation (ICLR 2020 §3.2): pre-sample subgraphs and count how often
//! each node (C_v) and each edge (C_{u,v}) appears, then
//!
//! * aggregator coefficients α_{u,v} = C_{u,v} / C_v: in a subgraph, the entry of row v
//!   and column u is weighted by 1/α_{u,v} = C_v / C_{u,v};
//! * loss coefficients λ_v = |V_train| · C_v / N_pre: the loss of node v is weighted by
//!   1/λ_v = N_pre / (C_v · |V_train|).
//!
//! As in GraphSAINT, a node never sampled gets C_v = 0.1 for its loss weight, and an
//! edge never sampled counts as 1 (it can still appear in a later subgraph).
//!
//! Counts are accumulated with relaxed atomic adds from parallel samplers: sums do not
//! depend on the order, so the result is deterministic for a seed.
//!
//! File format (atomic write): magic `SFNORM01`, u32 version, u32 meta length, JSON meta
//! (sampler, graph, counts), u32 × N node counts, u32 × nnz edge counts, then the xxh3-64
//! of everything before it.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::sample::{sample_subgraph, SampleError, Sampler, Subgraph};

const MAGIC: &[u8; 8] = b"SFNORM01";
const VERSION: u32 = 1;

/// Descriptive fields of a normalisation file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormMeta {
    /// The sampler's name with its parameters.
    pub sampler: String,
    /// Pre-sampled subgraphs N_pre.
    pub subgraphs: u64,
    /// Seed of the pre-sampling.
    pub seed: u64,
    /// Nodes of the sampled graph.
    pub n_nodes: u64,
    /// Entries of the sampled graph.
    pub n_entries: u64,
}

/// Node and edge appearance counts over N_pre pre-sampled subgraphs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormCounts {
    /// What was counted.
    pub meta: NormMeta,
    /// C_v per node of the sampled graph.
    pub node: Vec<u32>,
    /// C_{u,v} per entry of the sampled graph's CSR.
    pub edge: Vec<u32>,
}

impl NormCounts {
    /// Pre-samples `subgraphs` subgraphs (indices 0.., in parallel) and counts.
    pub fn estimate(
        sampler: &(impl Sampler + ?Sized),
        subgraphs: u64,
        seed: u64,
        clip_to: usize,
    ) -> Result<Self, SampleError> {
        let g = sampler.graph();
        let node: Vec<AtomicU32> = (0..g.n_nodes()).map(|_| AtomicU32::new(0)).collect();
        let edge: Vec<AtomicU32> = (0..g.n_entries()).map(|_| AtomicU32::new(0)).collect();
        (0..subgraphs)
            .into_par_iter()
            .try_for_each(|i| -> Result<(), SampleError> {
                let s = sample_subgraph(sampler, seed, i, clip_to)?;
                for &v in &s.nodes {
                    node[v as usize].fetch_add(1, Ordering::Relaxed);
                }
                for &p in &s.parent_entries {
                    edge[p as usize].fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            })?;
        Ok(NormCounts {
            meta: NormMeta {
                sampler: sampler.name(),
                subgraphs,
                seed,
                n_nodes: g.n_nodes() as u64,
                n_entries: g.n_entries() as u64,
            },
            node: node.into_iter().map(AtomicU32::into_inner).collect(),
            edge: edge.into_iter().map(AtomicU32::into_inner).collect(),
        })
    }

    /// Per-entry aggregator weights 1/α of a subgraph drawn from the same graph: entry
    /// (row v, column u) gets C_v / C_{u,v}.
    pub fn aggregator_weights(&self, s: &Subgraph) -> Vec<f32> {
        let mut w = Vec::with_capacity(s.n_entries());
        for i in 0..s.n_nodes() {
            let cv = f64::from(self.node[s.nodes[i] as usize].max(1));
            for k in s.offsets[i]..s.offsets[i + 1] {
                let cuv = f64::from(self.edge[s.parent_entries[k as usize] as usize].max(1));
                w.push((cv / cuv) as f32);
            }
        }
        w
    }

    /// Loss weight 1/λ_v = N_pre / (C_v · n_train) of each subgraph node.
    pub fn loss_weights(&self, s: &Subgraph, n_train: usize) -> Vec<f32> {
        let n_pre = self.meta.subgraphs as f64;
        s.nodes
            .iter()
            .map(|&v| {
                let c = match self.node[v as usize] {
                    0 => 0.1,
                    c => f64::from(c),
                };
                (n_pre / (c * n_train.max(1) as f64)) as f32
            })
            .collect()
    }

    /// Writes the counts to `path` atomically (temp file, fsync, rename).
    pub fn save(&self, path: &Path) -> Result<(), StoreError> {
        let meta = serde_json::to_vec(&self.meta).expect("meta serialises");
        let mut bytes =
            Vec::with_capacity(16 + meta.len() + 4 * (self.node.len() + self.edge.len()) + 8);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&VERSION.to_le_bytes());
        bytes.extend_from_slice(&(meta.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&meta);
        bytes.extend_from_slice(bytemuck::cast_slice(&self.node));
        bytes.extend_from_slice(bytemuck::cast_slice(&self.edge));
        let sum = xxhash_rust::xxh3::xxh3_64(&bytes);
        bytes.extend_from_slice(&sum.to_le_bytes());
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            StoreError::io(path, "write", e)
        })
    }

    /// Reads counts written by [`NormCounts::save`], verifying magic, version, lengths and
    /// checksum.
    pub fn load(path: &Path) -> Result<Self, StoreError> {
        let bytes = std::fs::read(path).map_err(|e| StoreError::io(path, "read", e))?;
        let bad = |what: String| StoreError::corrupt(path, "normalisation", what);
        if bytes.len() < 24 || &bytes[..8] != MAGIC {
            return Err(bad(
                "not a saintflow normalisation file (wrong magic or too short)".into(),
            ));
        }
        let (body, sum) = bytes.split_at(bytes.len() - 8);
        let want = u64::from_le_bytes(sum.try_into().unwrap());
        let got = xxhash_rust::xxh3::xxh3_64(body);
        if want != got {
            return Err(bad(format!(
                "checksum mismatch, expected {want:016x}, got {got:016x}"
            )));
        }
        let version = u32::from_le_bytes(body[8..12].try_into().unwrap());
        if version != VERSION {
            return Err(bad(format!(
                "unsupported version, expected {VERSION}, got {version}"
            )));
        }
        let meta_len = u32::from_le_bytes(body[12..16].try_into().unwrap()) as usize;
        let meta_end = 16usize
            .checked_add(meta_len)
            .filter(|&e| e <= body.len())
            .ok_or_else(|| bad("meta length past the end".into()))?;
        let meta: NormMeta =
            serde_json::from_slice(&body[16..meta_end]).map_err(|e| bad(format!("meta: {e}")))?;
        let arrays = &body[meta_end..];
        let want_len = (meta.n_nodes + meta.n_entries).checked_mul(4);
        if want_len != Some(arrays.len() as u64) {
            return Err(bad(format!(
                "expected {} + {} counts, got {} bytes",
                meta.n_nodes,
                meta.n_entries,
                arrays.len()
            )));
        }
        let counts: Vec<u32> = bytemuck::pod_collect_to_vec(arrays);
        let (node, edge) = counts.split_at(meta.n_nodes as usize);
        Ok(NormCounts {
            node: node.to_vec(),
            edge: edge.to_vec(),
            meta,
        })
    }
}
