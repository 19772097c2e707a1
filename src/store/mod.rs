//! The graph store: on-disk format, memory-mapped access, verification, importers and the
//! synthetic generator. See docs/FORMAT.md.

pub mod build;
pub mod check;
mod check_pass;
pub mod csr_build;
pub mod error;
pub mod format;
pub mod gen;
pub mod import;
pub mod info;
pub mod link;
pub mod mmap;
mod ndarray;
mod not_a_store;
mod open;
pub mod scan;
mod section;
pub mod time;
pub mod typed;
mod typed_maps;
pub mod writer;

pub use check::{check, check_with_progress};
pub use error::StoreError;
pub use format::{Header, LabelKind, Role, SectionId, TrainGraph, TypesMeta};
pub use info::{info, Info};
pub use link::{LinkEdges, LinkSet, LinkSplit};
pub use mmap::{Access, Csr, GraphStore, Labels, PrivateSection};
pub use typed::{RelCsr, Relation, TypeFeatures};
