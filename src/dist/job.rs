//! One rank's share of a distributed job (issue 24): [`DistJob::from_partitions`] reads a
//! partition directory (`saintflow partition`'s `partition.json` and rank stores) for this
//! rank of the job, checks that the stores are the partition's own (issue 28, item 8), and
//! hands training its [`Dist`]: the transport, who evaluates on what, and the replicas'
//! bytes for the log.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::store::{GraphStore, Labels};

use super::partition::{check_rank_store, check_source, read_report};
use super::{Collective, DistError};

/// How a training run takes part in a distributed job
/// (`TrainOptions::distributed` in `train`).
#[derive(Clone)]
pub struct Dist<'a> {
    /// The transport.
    pub comm: Arc<dyn Collective>,
    /// Who evaluates, on what; every rank must be given the same variant.
    pub eval: DistEval<'a>,
    /// Bytes of this rank's replicas (features and labels of the nodes its part copies from
    /// other parts), summed over ranks into the log's `run` record.
    pub replica_bytes: u64,
}

impl std::fmt::Debug for Dist<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dist")
            .field("comm", &self.comm.name())
            .field("rank", &self.comm.rank())
            .field("size", &self.comm.size())
            .field(
                "eval",
                &match self.eval {
                    DistEval::Rank0(g) => format!("rank 0 on {:?}", g.map(|s| s.path())),
                    DistEval::Parts => "parts".into(),
                },
            )
            .field("replica_bytes", &self.replica_bytes)
            .finish()
    }
}

/// Where a distributed run's validation and test metrics come from.
#[derive(Clone, Copy)]
pub enum DistEval<'a> {
    /// Rank 0 evaluates on this graph (the full graph the parts were cut from; None on the
    /// other ranks, which never evaluate, and on rank 0 its own part store).
    Rank0(Option<&'a crate::store::GraphStore>),
    /// Every rank evaluates its own part's validation and test nodes on its part store
    /// (each sees its part and replicas only, GAD's setting); the per-class counts are
    /// summed over ranks.
    Parts,
}

/// Who evaluates a distributed run (the CLI's flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobEval {
    /// Rank 0 on the full graph the parts were cut from (`--graph`, or the source
    /// `partition.json` names).
    Full,
    /// Every rank on its own part (`--eval-parts`).
    Parts,
    /// Nobody (`--no-eval`).
    None,
}

/// This rank's share of a job cut by `saintflow partition`.
pub struct DistJob {
    /// This rank and the job's ranks.
    pub rank: usize,
    /// The job's ranks.
    pub size: usize,
    /// This rank's store, as `partition.json` lists it.
    pub store_path: PathBuf,
    /// This rank's store, opened and checked to be the one listed.
    pub store: GraphStore,
    /// The graph rank 0 evaluates on (the partitioned store unless given).
    pub full_path: PathBuf,
    /// That graph, opened and checked to be the partitioned store, on rank 0 with
    /// [`JobEval::Full`]; None elsewhere.
    pub full: Option<GraphStore>,
    /// Bytes of this rank's replicas: features and labels of the nodes its parts copy.
    pub replica_bytes: u64,
    eval: JobEval,
}

impl DistJob {
    /// Rank `comm.rank()` of a job of `comm.size()` ranks on the partition in `dir`;
    /// `graph` is the evaluation graph when given (`--graph`).
    pub fn from_partitions(
        dir: &Path,
        comm: &dyn Collective,
        graph: Option<&Path>,
        eval: JobEval,
    ) -> Result<DistJob, DistError> {
        let (rank, size) = (comm.rank(), comm.size());
        let report = read_report(dir)?;
        if report.ranks.len() != size {
            return Err(DistError::Run(format!(
                "{}: stores for {} ranks, but the job has {size} ranks: start {} ranks, or \
                 partition with --ranks {size} (k ≥ {size} parts assigned to {size} ranks)",
                dir.display(),
                report.ranks.len(),
                report.ranks.len()
            )));
        }
        let part = &report.ranks[rank];
        let store_path = dir.join(&part.store);
        let store = GraphStore::open(&store_path)?;
        // Issue 28, item 8: this rank's own store, and the graph the parts were cut from.
        check_rank_store(&report, dir, rank, &store)?;
        let full_path = graph.map_or_else(|| PathBuf::from(&report.source), Path::to_path_buf);
        let full = if rank == 0 && eval == JobEval::Full {
            let full = GraphStore::open(&full_path).map_err(|e| {
                DistError::Run(format!(
                    "rank 0 evaluates on the full graph the parts were cut from: {e} (pass --graph FULL.sf)"
                ))
            })?;
            check_source(&report, dir, &full)?;
            Some(full)
        } else {
            None
        };
        let label_bytes = match store.labels() {
            Labels::Single(_) => 4,
            Labels::Multi { row_bytes, .. } => row_bytes as u64,
        };
        let replica_bytes = part.replicas as u64 * (store.n_features() as u64 * 4 + label_bytes);
        Ok(DistJob {
            rank,
            size,
            store_path,
            store,
            full_path,
            full,
            replica_bytes,
            eval,
        })
    }

    /// What training takes: `comm`, who evaluates on what, the replicas' bytes.
    pub fn dist(&self, comm: Arc<dyn Collective>) -> Dist<'_> {
        Dist {
            comm,
            eval: match self.eval {
                JobEval::Parts => DistEval::Parts,
                JobEval::Full | JobEval::None => DistEval::Rank0(self.full.as_ref()),
            },
            replica_bytes: self.replica_bytes,
        }
    }

    /// Worker threads per rank when none are asked for: the machine's cores shared by the
    /// ranks (assumed to share one machine, as `mpirun -np P` on one host does).
    pub fn default_threads(&self) -> std::num::NonZeroUsize {
        let cores = crate::machine::cores().get();
        std::num::NonZeroUsize::new(cores / self.size.max(1)).unwrap_or(std::num::NonZeroUsize::MIN)
    }
}
