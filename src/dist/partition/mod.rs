//! Graph partitioning for distributed training (issue 17, the GAD line: Zhao et al., "GAD:
//! partition, augmentation, variance-weighted consensus"): a multilevel k-way partitioner of
//! our own ([`multilevel`]), GAD augmentation of each part by random walks from its boundary
//! ([`gad`]), and the writer of one saintflow store per part plus `partition.json`
//! ([`mod@write`]). Part of the distributed wing ([`crate::dist`]); it loads the full CSR into
//! RAM (partitioning is not out of core: memory ∝ N + nnz).

pub mod gad;
pub mod multilevel;
pub mod write;

use std::path::PathBuf;

use crate::store::StoreError;

pub use gad::{augment, walk_count, AugmentOptions, Augmentation, PartAugmentation};
pub use multilevel::{edge_cut, partition, Partition, PartitionOptions, WGraph};
pub use write::{
    assign_parts, check_rank_store, check_source, identity_text, partition_store, read_part_map,
    read_report, PartMap, PartReport, PartitionReport, PartitionSpec, RankReport, PARTITION_FORMAT,
    PARTITION_JSON, PART_MAP_FILE,
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
