//! saintflow: training Graph Neural Networks by graph sampling (the GraphSAINT line of
//! work) on one machine's cores, over memory-mapped on-disk graphs.
//!
//! Today the crate holds the foundation: the [`store`] (format, mmap access, `check`,
//! importers, the Kronecker generator). See ARCHITECTURE.md for the module map.
#![warn(missing_docs)]

pub mod atomic;
pub mod autodiff;
pub mod bench;
#[cfg(feature = "cli")]
pub mod cli;
pub mod error;
pub mod exec;
pub mod ir;
pub mod op;
pub mod plan;
pub mod planner;
pub mod plot;
pub mod progress;
pub mod sample;
pub mod seed;
pub mod store;
pub mod suggest;
pub mod train;

pub use error::{Error, Result, StoreError};
pub use store::GraphStore;

/// The most used names.
pub mod prelude {
    pub use crate::error::{Error, Result, StoreError};
    pub use crate::store::{GraphStore, Labels, Role};
}
