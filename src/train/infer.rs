//! Full-graph inference: the plan's forward pass (dropout off) over the whole stored
//! graph — not a sample — for validation and test metrics and for node embeddings.
//!
//! Evaluation follows GraphSAINT: whatever graph training sampled from (the training graph
//! in the inductive setting), inference runs on the full graph, with the adjacency
//! flavours normalised by full-graph degrees and no sampling coefficients (`A_saint`
//! becomes D⁻¹A). The whole graph is one [`Subgraph`](crate::sample::Subgraph) of a
//! [`FullSampler`], nodes in id order, so row i of the logits is node i.
//!
//! Today the pass holds one layer's activations for all N nodes in memory at once
//! (N × width f32 per live value); the row-blocked, out-of-core variant that DESIGN.md
//! describes is not written yet. Embeddings are written to disk through a memory map in
//! row blocks ([`write_npy_atomic`]).

use std::path::Path;

use crate::error::{Error, Result};
use crate::exec::StepRunner;
use crate::ir::{Bindings, Graph, NodeId, Params, Tensor};
use crate::op::StoreSource;
use crate::plan::Lowered;
use crate::planner::{plan, PlanOptions};
use crate::sample::FullSampler;
use crate::store::{GraphStore, Role};

use super::metrics::{evaluate, Metrics};
use super::TrainError;

/// The forward pass of a lowered plan over a store's full graph.
pub struct FullGraph<'g> {
    store: &'g GraphStore,
    source: StoreSource<'g>,
    graph: Graph,
    logits: NodeId,
    embedding: NodeId,
}

impl<'g> FullGraph<'g> {
    /// Plans `lowered`'s graph for the full graph's size (N nodes, its entries).
    pub fn new(store: &'g GraphStore, lowered: &Lowered) -> Result<FullGraph<'g>> {
        let full = store.full();
        let source = StoreSource::new(
            store,
            Box::new(FullSampler::new(full)),
            0,
            1,
            None,
            Role::Val,
        );
        let mut graph = lowered.graph.clone();
        graph.set_output("embedding", lowered.embedding);
        plan(
            &mut graph,
            &PlanOptions::new(Bindings {
                nodes: full.n_nodes(),
                entries: full.n_entries(),
            }),
        )?;
        let find = |name: &str| {
            graph.output(name).ok_or_else(|| {
                Error::from(TrainError::Run(format!(
                    "the planned graph lost its `{name}` output"
                )))
            })
        };
        let (logits, embedding) = (find("logits")?, find("embedding")?);
        Ok(FullGraph {
            store,
            source,
            graph,
            logits,
            embedding,
        })
    }

    fn forward(&self, runner: &dyn StepRunner, params: &Params, node: NodeId) -> Result<Tensor> {
        let mut v = runner.run_step(
            &self.graph,
            &[node],
            Some(&self.source),
            params,
            0,
            0,
            false,
        )?;
        let t = v
            .take(node)
            .and_then(|x| x.as_dense().cloned())
            .ok_or_else(|| TrainError::Run("full-graph pass gave no dense output".into()))?;
        Ok(t)
    }

    /// The logits of every node, `[N, C]`.
    pub fn logits(&self, runner: &dyn StepRunner, params: &Params) -> Result<Tensor> {
        self.forward(runner, params, self.logits)
    }

    /// The embedding of every node (the `[output]` layer's input), `[N, width]`.
    pub fn embedding(&self, runner: &dyn StepRunner, params: &Params) -> Result<Tensor> {
        self.forward(runner, params, self.embedding)
    }

    /// Metrics of the nodes of `role` from full-graph logits.
    pub fn metrics(&self, logits: &Tensor, role: Role) -> Metrics {
        let nodes = self.store.nodes_with_role(role);
        evaluate(
            &logits.data,
            logits.cols,
            &self.store.labels(),
            &nodes,
            |v| v as usize,
        )
    }
}

/// Rows copied per block when writing through the map: 4 MiB of f32 at most per block
/// (bounded so the dirty pages of one block stay small whatever N is).
const BLOCK_BYTES: usize = 4 << 20;

/// Writes a `[rows, cols]` f32 matrix as a NumPy `.npy` file (format 1.0, little-endian,
/// C order) atomically: a temporary file beside `path` sized up front and memory-mapped,
/// filled in row blocks, flushed and fsynced, then renamed over `path` and the directory
/// fsynced. `row(i, out)` fills row i.
pub fn write_npy_atomic(
    path: &Path,
    rows: usize,
    cols: usize,
    mut row: impl FnMut(usize, &mut [f32]),
) -> std::result::Result<(), TrainError> {
    let header = npy_header(rows, cols);
    let data_bytes = rows * cols * 4;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out.npy".into());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let mut write = || -> std::io::Result<()> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.set_len((header.len() + data_bytes) as u64)?;
        if header.len() + data_bytes > 0 {
            // SAFETY: the file was just created by this process under a private temporary
            // name; nothing else maps or resizes it while the map lives.
            let mut map = unsafe { memmap2::MmapMut::map_mut(&f)? };
            map[..header.len()].copy_from_slice(&header);
            let block_rows = (BLOCK_BYTES / (4 * cols.max(1))).max(1);
            let mut buf = vec![0f32; block_rows * cols];
            let mut r0 = 0;
            while r0 < rows {
                let n = block_rows.min(rows - r0);
                for i in 0..n {
                    row(r0 + i, &mut buf[i * cols..(i + 1) * cols]);
                }
                let at = header.len() + r0 * cols * 4;
                let bytes: &[u8] = bytemuck::cast_slice(&buf[..n * cols]);
                map[at..at + bytes.len()].copy_from_slice(bytes);
                r0 += n;
            }
            map.flush()?;
        }
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(&dir)?.sync_all()
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        TrainError::io(path, "write", e)
    })
}

/// The `.npy` 1.0 header of a little-endian f32 `[rows, cols]` array, padded with spaces
/// and a newline so the data starts at a multiple of 64 bytes.
fn npy_header(rows: usize, cols: usize) -> Vec<u8> {
    let dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    let unpadded = 10 + dict.len() + 1;
    let total = unpadded.div_ceil(64) * 64;
    let mut h = Vec::with_capacity(total);
    h.extend_from_slice(b"\x93NUMPY\x01\x00");
    h.extend_from_slice(&((total - 10) as u16).to_le_bytes());
    h.extend_from_slice(dict.as_bytes());
    h.resize(total - 1, b' ');
    h.push(b'\n');
    h
}
