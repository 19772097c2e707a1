//! Ops: the one import path for everything an op author touches. The [`Op`] trait, its
//! capabilities and what ops see (defined in the IR layer, [`crate::ir::op`], re-exported
//! here with the IR's value and fact types); the adapters that write an op from a small
//! trait ([`Elementwise`]: f and f′; [`RowWise`]: one function over a block of rows;
//! [`NeighbourReduce`]: neutral start, fold and gradient routing); the helpers ops use
//! ([`util`]); the built-in ops under their plan names; the [`Registry`] that makes ops by
//! name; and the store-backed [`GraphSource`]. Gradient and blocked-inference checks for a
//! new op are in [`crate::testing`].

pub mod builtin;
pub mod elementwise;
pub mod fused;
pub mod reduce;
pub mod registry;
pub mod rowwise;
pub mod source;
pub mod util;

pub use crate::ir::op::{
    check_args, AdjKind, AnyPrepared, AnySplit, Arity, Axis, ChainLink, ChainRole, ColumnSlice,
    ColumnViews, Cost, Ctx, FeaturePartitioned, GradBuilder, Neighbour, NeighbourFold, NeighbourOp,
    NodeRows, NodeStats, Op, OpError, Partitioned, PartitionedDyn, PlanCall, PrecisionChoice,
    RowBlock, RowBlocks, RowBlocksDyn, RowLocal, Running, SourceKind, SourceOp, Split, Stage,
};
pub use crate::ir::source::{GraphSource, WithSampler};
pub use crate::ir::{Bindings, Dim, Fact, Kind, NodeId, SparseMat, Structure, Tensor, Value};
pub use elementwise::{elementwise, Binary, Elementwise};
pub use reduce::{check_rule, neighbour_reduce, NeighbourReduce, Routing, ROUTING_RULES};
pub use registry::{Attr, Attrs, Registry};
pub use rowwise::{row_wise, RowWise};
pub use saintflow_ops::view::{MatMut, MatRef};
pub use source::{MemorySource, StoreSource};
