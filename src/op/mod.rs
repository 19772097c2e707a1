//! Ops: the [`Op`] trait and what ops see (defined in the IR layer, [`crate::ir::op`], and
//! re-exported here, the one path custom ops use), the built-in ops under their plan
//! names, the [`Registry`] that makes ops by name, and the store-backed [`GraphSource`].

pub mod builtin;
pub mod registry;
pub mod source;

pub use crate::ir::op::{
    check_args, AdjKind, Arity, Axis, ChainRole, Cost, Ctx, GradBuilder, Neighbour, NodeRows, Op,
    OpError, RowBlock, SourceKind, Split, Stage,
};
pub use crate::ir::source::{GraphSource, WithSampler};
pub use registry::{Attr, Attrs, Registry};
pub use saintflow_ops::view::{MatMut, MatRef};
pub use source::{MemorySource, StoreSource};
