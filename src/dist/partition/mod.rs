//! Graph partitioning for distributed training (issue 17, the GAD line: Zhao et al., "GAD:
//! partition, augmentation, variance-weighted consensus"): a first level, either the
//! multilevel k-way partitioner of our own ([`multilevel`], the graph loaded into RAM:
//! memory ∝ N + nnz) or the streaming one ([`streaming`]: Fennel and streaming refinement
//! over the store's mapped CSR, O(N) anonymous memory; issue 56 item 5), chosen by
//! [`method`]; then GAD augmentation of each part by random walks from its boundary
//! ([`gad`]) and the writer of one saintflow store per part plus `partition.json`
//! ([`mod@write`]), both reading the mapped CSR through [`graph::Adjacency`] in O(N)
//! anonymous memory.

pub mod gad;
pub mod graph;
pub mod method;
pub mod multilevel;
pub mod streaming;
pub mod write;

use std::path::PathBuf;

use crate::store::StoreError;

pub use gad::{augment, walk_count, AugmentOptions, Augmentation, PartAugmentation};
pub use graph::{Adjacency, StoreGraph};
pub use method::{choose, Choice, Method};
pub use multilevel::{edge_cut, partition, Partition, PartitionOptions, WGraph};
pub use streaming::{partition_streaming, Streamed};
pub use write::{
    assign_parts, check_rank_store, check_source, identity_text, partition_store, read_assignment,
    read_part_map, read_report, PartMap, PartReport, PartitionReport, PartitionSpec, RankReport,
    ASSIGNMENT_FILE, PARTITION_FORMAT, PARTITION_JSON, PART_MAP_FILE,
};

/// What partitioning can fail on.
#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    /// Reading the input store or writing a part store.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A parameter out of range.
    #[error("partition: {what}")]
    Argument {
        /// What is wrong.
        what: String,
    },
    /// A file or directory of the partition output.
    #[error("{}: {what}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The operation.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The output exists (and `--force` was not given) or is not a partition directory.
    #[error("{}: {what}", path.display())]
    Output {
        /// The output directory.
        path: PathBuf,
        /// Why it is refused.
        what: String,
    },
}

impl From<crate::atomic::IoAt> for PartitionError {
    fn from(e: crate::atomic::IoAt) -> Self {
        PartitionError::io(e.path, e.op, e.source)
    }
}

impl PartitionError {
    pub(crate) fn argument(what: impl Into<String>) -> Self {
        PartitionError::Argument { what: what.into() }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, what: &str, source: std::io::Error) -> Self {
        PartitionError::Io {
            path: path.into(),
            what: what.into(),
            source,
        }
    }
}
