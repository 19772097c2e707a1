//! The `Op` trait — the public custom-op API, re-exported as `saintflow::op` — and what ops see: argument checks, costs,
//! the forward context, and the [`GradBuilder`] through which a backward adds gradient
//! nodes to the IR (so the planner optimises backward chains like forward ones).
//!
//! Protocol, in prose:
//! * `infer` is pure and total on facts: it is called when a node is added and again by
//!   `Graph::validate` after every pass; it must give the same fact each time.
//! * `forward` may assume its inputs match the facts `infer` accepted (the interpreter
//!   checks every output against its fact) and must not spawn threads: it runs on the
//!   caller's rayon pool.
//! * `backward` runs once, when the plan is loaded (autodiff), never during a step. It gets
//!   the node's gradient node and returns one optional gradient node per input, in order,
//!   for the inputs whose gradient is asked for ([`GradBuilder::needs_grad`]); returning
//!   `None` for such an input is an error. The default says "backward not supported", so a
//!   plan that differentiates through the op fails at load, not at step 10,000.
//! * `pure` ops with equal name, identity ([`Op::identity`], by default the op's `Debug`
//!   text: every field) and inputs compute the same value: common-subexpression
//!   elimination merges them.
//! * Partitioned forward (optional, for the work-stealing executor). An op whose output is
//!   dense may say, from its actual inputs, how its forward splits into parts that run at
//!   once: [`Op::as_partitioned`] gives a [`Partitioned`] (through its erased form
//!   [`PartitionedDyn`], which every `Partitioned` is) whose `split` returns a [`Split`] —
//!   an axis of the output (rows or columns), the parts' ranges along it (ascending,
//!   disjoint, within the output) and data of the op's own type
//!   ([`Partitioned::Prepared`]) prepared once for all parts. The executor then allocates the output (zeros, the shape
//!   of the node's fact under the step's bindings; not zeroed when the op declares
//!   [`Split::writes_all`] and the ranges cover the axis), hands each part a [`MatMut`] view of
//!   exactly its range (so no two parts can write the same element) and calls
//!   [`Partitioned::forward_part`] for every part, on any worker, in any order, possibly at once.
//!   Elements outside every range stay 0. The parts together must compute what `forward`
//!   computes; when they do not change the order of any summation the executor's result is
//!   bit-identical to the interpreter's. The executor dispatches parts in range order: the
//!   worker that split keeps the last part, thieves take the first ones, so neighbouring
//!   parts (which share cache lines at their boundary) rarely run at the same time.
//!   Default: no such capability (one task runs `forward`).
//! * Row locality (optional, for out-of-core full-graph inference). [`RowLocal`] says
//!   that, in evaluation mode (`ctx.training` false), row i of the output depends only on
//!   row i of each input whose rows are the nodes (`n`) and on the whole of inputs whose
//!   shape does not involve `n` (parameters). Such an op can run on a block of rows at a
//!   time, which is how inference covers graphs larger than memory
//!   (`infer`). An input that is the subgraph stands for the rows' nodes: on a block it
//!   is the subgraph of the block's nodes (ids r0..r1, ascending) without entries, so a
//!   row-local op may read a node's own data through it (the sparse feature product reads
//!   its rows' features) but never its edges. Default: no such capability, and a plan
//!   using the op is evaluated in memory.
//! * Node statistics (optional, for out-of-core full-graph inference). [`NodeStats`] says
//!   that row i of the output depends on row i of input 0 (per-node) and on statistics
//!   folded over all of input 0's rows (column sums, the mean squared norm): blocked
//!   inference folds them over the kept input block by block, then computes the rows
//!   block by block. Default: none (a plan using an op that is neither this nor row-local
//!   is evaluated in memory).
//! * Neighbour ops (optional, for out-of-core full-graph inference). An op that aggregates
//!   over the rows of an adjacency — row i of its output needs row i of a sparse input
//!   and, of a dense per-node input X, the rows j of i's neighbours — says which inputs
//!   those are ([`NeighbourOp::neighbour`]; every other input must be static: parameters) and
//!   computes a block of rows r0..r1 at a time in [`NeighbourOp::forward_block`]: the adjacency's
//!   rows r0..r1 with the full graph's node ids as columns, and X whole (N rows, read in
//!   place by global id, never gathered). Its output is the block's rows: dense
//!   `(r1 − r0) × cols`, or sparse with the block's rows and global column ids (an
//!   attention matrix, then read as the adjacency of a neighbour op of the same level).
//!   On the whole graph (`forward` with the full graph as the subgraph, ids in order)
//!   the blocks together must equal `forward`; summing in CSR order as `forward` does
//!   makes them bit-identical. Default: no such capability, and the op is not a neighbour
//!   op. A neighbour op whose rows are folds over their entries one at a time (sums,
//!   maxima) can also say so ([`NeighbourOp::fold`] → [`NeighbourFold`]): out-of-core
//!   inference then streams a large X past a block's accumulators in parts of rows
//!   instead of reading it at random. [`crate::testing::check_blocked_equals_in_memory`]
//!   checks the blocks, and the folds over parts.
//! * Chain roles (optional, for the matrix-chain pass). [`Op::as_chain`] says that a node is
//!   an unordered product chain to order, or a binary product op(A)·op(B), or a row-major
//!   transpose copy; the pass orders the chains and reuses the products and transposes it
//!   finds. Default: `None` (neither).
//! * Feature partitions (optional, for the partition pass). An op whose kernel walks its
//!   output in Q_f feature blocks returns itself with that count from
//!   [`FeaturePartitioned::with_partitions`]; the pass chooses Q_f from the output's shape.
//!   Default: no such capability (the op takes no count).
//! * Source kinds. [`Op::as_source`] names the ops that read the data source rather than
//!   other nodes (the sampled subgraph, its features, targets and adjacency) and the seed
//!   gradient; blocked inference replaces them by the full graph's blocks. Default: none.
//! * Column views and precision (optional, for the fusion and precision passes): a column
//!   slice says which columns it passes on ([`Op::as_column_slice`]), an op that reads
//!   strided operands makes itself read a block in place ([`Op::as_column_views`]), an op
//!   with a choice of precision makes itself compute at another
//!   ([`Op::as_precision`]). Default: none. `dyn Op` has shorthands for the passes
//!   (`chain()`, `source_kind()`, `column_slice()`, `with_column_view()`,
//!   `with_precision()`).

use std::any::Any;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use saintflow_ops::gemm::Precision;
pub use saintflow_ops::view::{MatMut, MatRef};

pub use super::ctx::Ctx;
pub use super::neighbour::{Neighbour, NeighbourFold, NeighbourOp, NodeRows, RowBlock};
pub use super::op_error::OpError;
pub use super::parts::{
    AnyPrepared, AnySplit, Axis, Partitioned, PartitionedDyn, RowBlocks, RowBlocksDyn, Split,
};
pub use super::passes::{
    AdjKind, AdjNorm, ChainLink, ChainRole, ColumnSlice, SourceKind, SourceOp,
};
use super::{Bindings, Fact, Graph, IrError, Kind, NodeId, Value};

/// The arguments an op takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arity {
    /// Exactly these, in order.
    Exact(Vec<Kind>),
    /// At least `min` arguments, all of one kind.
    Variadic {
        /// Their kind.
        kind: Kind,
        /// The fewest accepted.
        min: usize,
    },
}

/// Checks the number and kinds of arguments against [`Op::args`].
pub fn check_args(op: &dyn Op, inputs: &[&Fact]) -> Result<(), OpError> {
    match op.args() {
        Arity::Exact(kinds) => {
            if kinds.len() != inputs.len() {
                return Err(OpError::args(format!(
                    "{} takes {} argument{}, got {}",
                    op.name(),
                    kinds.len(),
                    if kinds.len() == 1 { "" } else { "s" },
                    inputs.len()
                )));
            }
            for (i, (k, f)) in kinds.iter().zip(inputs).enumerate() {
                if !k.accepts(f.kind()) {
                    return Err(OpError::args(format!(
                        "{} argument {}: expected {k}, got {} {f}",
                        op.name(),
                        i + 1,
                        f.kind()
                    )));
                }
            }
        }
        Arity::Variadic { kind, min } => {
            if inputs.len() < min {
                return Err(OpError::args(format!(
                    "{} takes at least {min} arguments, got {}",
                    op.name(),
                    inputs.len()
                )));
            }
            if let Some((i, f)) = inputs
                .iter()
                .enumerate()
                .find(|(_, f)| !kind.accepts(f.kind()))
            {
                return Err(OpError::args(format!(
                    "{} argument {}: expected {kind}, got {} {f}",
                    op.name(),
                    i + 1,
                    f.kind()
                )));
            }
        }
    }
    Ok(())
}

/// An op's estimated cost for one step: what the planner minimises and `explain` prints.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cost {
    /// Floating-point operations (a multiply-add counts 2).
    pub flops: f64,
    /// Bytes read from inputs.
    pub bytes_read: f64,
    /// Bytes written.
    pub bytes_written: f64,
}

impl Cost {
    /// The default estimate: read every input once, write the output once, no arithmetic.
    pub fn streaming(inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        Cost {
            flops: 0.0,
            bytes_read: inputs.iter().map(|f| f.bytes(b) as f64).sum(),
            bytes_written: output.bytes(b) as f64,
        }
    }

    /// Sum of two costs.
    pub fn plus(self, o: Cost) -> Cost {
        Cost {
            flops: self.flops + o.flops,
            bytes_read: self.bytes_read + o.bytes_read,
            bytes_written: self.bytes_written + o.bytes_written,
        }
    }
}

/// An operator of the IR. Implement it (plus registration in a [`Registry`](crate::op::Registry)) to add an op
/// of your own — or, for the common shapes, implement one of the adapters' small traits
/// instead ([`Elementwise`](crate::op::Elementwise), [`Binary`](crate::op::Binary),
/// [`RowWise`](crate::op::RowWise), [`NeighbourReduce`](crate::op::NeighbourReduce)), which
/// write this trait for you (the built-in row-wise ops are written so too). See the
/// protocol at the top of this file and `examples/custom_op`.
///
/// Four methods are required (name, arguments, shape inference, forward); the rest have
/// defaults. What an op can do beyond a plain forward is found through queries that return
/// a capability object (`as_partitioned`, `as_row_local`, `as_neighbour`,
/// `as_feature_partitioned`, and the planner's `as_chain`, `as_source`, `as_column_slice`,
/// `as_column_views`, `as_precision`): each capability is a small trait of its own, so the methods
/// that belong together (a split and its parts, a neighbour declaration and its blocked
/// forward) are implemented together or not at all.
pub trait Op: Any + Send + Sync + fmt::Debug {
    /// The name plan files use (`relu`, `user.gelu`).
    fn name(&self) -> &str;

    /// The arguments taken.
    fn args(&self) -> Arity;

    /// The output's fact from the inputs' facts (arity and kinds already checked).
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError>;

    /// Computes the output.
    fn forward(&self, inputs: &[&Value], ctx: &Ctx<'_>) -> Result<Value, OpError>;

    /// What distinguishes this instance from another op of the same name: common-
    /// subexpression elimination merges two pure nodes only when their names, identities,
    /// inputs and facts are equal. Default: the op's `Debug` text, which for a derived
    /// `Debug` names every field — so `user.foo(x, k=1)` and `user.foo(x, k=2)` stay two
    /// nodes without the author doing anything. Override it only with something at least
    /// as fine (a hand-written `Debug` that hides a field must not be the identity).
    fn identity(&self) -> String {
        format!("{self:?}")
    }

    /// Attributes as `explain` and the IR dump print them, canonical (`p=0.5`); display
    /// only (CSE keys on [`Op::identity`]). Default: none shown.
    fn attrs(&self) -> String {
        String::new()
    }

    /// Estimated cost for one step.
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        Cost::streaming(inputs, output, b)
    }

    /// Adds the nodes computing the inputs' gradients from `grad`, the gradient of this
    /// node's output; one entry per input.
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let _ = (g, grad);
        Err(OpError::NoBackward {
            op: self.name().to_string(),
        })
    }

    /// Same name, identity and inputs ⇒ same value (CSE may merge). False for ops with
    /// randomness of their own.
    fn pure(&self) -> bool {
        true
    }

    /// Which stage of a step its time is reported under (the training log splits step time
    /// into sampling / aggregation / weight transformation / other, as JPDC Fig. 2 does).
    fn stage(&self) -> Stage {
        Stage::Other
    }

    /// The partitioned forward, when the op has one (see "Partitioned forward" at the top
    /// of this file). Default: `None` (one task runs `forward`).
    fn as_partitioned(&self) -> Option<&dyn PartitionedDyn> {
        None
    }

    /// Row locality, when the op has it (see "Row locality" at the top of this file).
    /// Default: `None` (a plan using the op is evaluated in memory).
    fn as_row_local(&self) -> Option<&dyn RowLocal> {
        None
    }

    /// The neighbour-op capability (see "Neighbour ops" at the top of this file). Default:
    /// `None`.
    fn as_neighbour(&self) -> Option<&dyn NeighbourOp> {
        None
    }

    /// Row blocks for fusion, when the op computes any block of rows alone (see
    /// [`RowBlocks`]). Default: `None` (the fusion pass leaves the op alone).
    fn as_row_blocks(&self) -> Option<&dyn RowBlocksDyn> {
        None
    }

    /// Node statistics, when the op has them (see "Node statistics" at the top of this
    /// file). Default: `None`.
    fn as_node_stats(&self) -> Option<&dyn NodeStats> {
        None
    }

    /// How a plan's call becomes this op, when the call has several forms or the op keeps
    /// running state ([`PlanCall`]). Default: `None` (the call's arguments are the op's).
    fn as_plan_call(&self) -> Option<&dyn PlanCall> {
        None
    }

    /// Feature partitions, when the op's kernel takes a count (see "Feature partitions"
    /// at the top of this file). Default: `None`.
    fn as_feature_partitioned(&self) -> Option<&dyn FeaturePartitioned> {
        None
    }

    /// The op's role for the matrix-chain pass, when it has one (see "Chain roles" at the
    /// top of this file). Default: `None`.
    fn as_chain(&self) -> Option<&dyn ChainLink> {
        None
    }

    /// What this op reads, when it is a source op (see "Source kinds" at the top of this
    /// file). Default: `None`.
    fn as_source(&self) -> Option<&dyn SourceOp> {
        None
    }

    /// The column slice, when this op passes on columns of its one input whole and
    /// unchanged (`slice`): the fusion pass lets a consumer that reads column views
    /// ([`Op::as_column_views`]) read them in place. Default: `None`.
    fn as_column_slice(&self) -> Option<&dyn ColumnSlice> {
        None
    }

    /// Column views of its operands, for an op that takes strided operands (`gemm`,
    /// `spmm`). Default: `None` (it cannot).
    fn as_column_views(&self) -> Option<&dyn ColumnViews> {
        None
    }

    /// A choice of precision, for an op that has one (`gemm`; the planner's precision
    /// pass, from a plan's `[compute] precision`). Default: `None`.
    fn as_precision(&self) -> Option<&dyn PrecisionChoice> {
        None
    }

    /// The probability p, when this op is inverted dropout of its one input with the mask
    /// of this node's id (`dropout`): the sparse-features pass moves such a mask into the
    /// products that read the dropped-out features. Default: `None`.
    fn dropout(&self) -> Option<f64> {
        None
    }
}

/// Capability: the kernel walks its output in Q_f feature blocks (see "Feature partitions"
/// in this file's protocol). Returned by [`Op::as_feature_partitioned`].
pub trait FeaturePartitioned {
    /// This op with `q` feature partitions.
    fn with_partitions(&self, q: usize) -> Arc<dyn Op>;
}

/// Capability: an op that can read a column block of an input in place. Returned by
/// [`Op::as_column_views`].
pub trait ColumnViews {
    /// This op reading only columns `cols` of its input `slot`, in place, instead of that
    /// whole input (what it computes on the block is what it computed on a slice of it);
    /// `None` when it cannot for this slot (or already reads a view there).
    fn with_column_view(&self, slot: usize, cols: Range<usize>) -> Option<Arc<dyn Op>>;
}

/// Capability: an op computing at a choice of precision. Returned by
/// [`Op::as_precision`].
pub trait PrecisionChoice {
    /// This op computing at `precision`; `None` when it already does.
    fn with_precision(&self, precision: Precision) -> Option<Arc<dyn Op>>;
}

/// Capability: row i of the output depends only on row i of the per-node inputs (see "Row
/// locality" at the top of this file). Returned by [`Op::as_row_local`].
pub trait RowLocal {
    /// Whether the forward is row-local in evaluation mode given the inputs' facts.
    /// Default: always.
    fn row_local(&self, inputs: &[&Fact]) -> bool {
        let _ = inputs;
        true
    }
}

/// Capability: an op whose output row i depends on row i of its input 0 (x, per-node),
/// on statistics of all of x's rows folded in row order, and on inputs whose shape does
/// not involve n (parameters): a reduction over the nodes (PairNorm, GraphNorm). Out-of-core
/// inference folds the statistics over x's rows block by block (x kept by a lower level),
/// then computes the op's rows block by block like a row-local op's. Returned by
/// [`Op::as_node_stats`].
///
/// The op's `forward` must be [`start`](Self::start), one [`fold`](Self::fold) of all of
/// x's rows, then [`rows`](Self::rows) on all of them: folds add each row's terms in row
/// order, so folding x in blocks of consecutive rows gives the same bits.
pub trait NodeStats {
    /// The statistics' accumulators for an x of `cols` columns.
    fn start(&self, cols: usize) -> Vec<f64>;

    /// Adds the terms of x's rows `x` (row-major, `cols` columns), in order.
    fn fold(&self, acc: &mut [f64], x: &[f32], cols: usize);

    /// The output's rows for `inputs` — x's rows (a block), the other inputs whole — from
    /// the statistics `acc` of all of x's `n` rows.
    fn rows(
        &self,
        acc: &[f64],
        n: usize,
        inputs: &[&Value],
        ctx: &Ctx<'_>,
    ) -> Result<Value, OpError>;
}

/// Capability asked by lowering (issue 58): an op a plan calls in several forms
/// (`layernorm(x)` or `layernorm(x, gamma, beta)`), or that keeps running state across
/// training steps (`batchnorm`'s running statistics). Returned by [`Op::as_plan_call`].
pub trait PlanCall {
    /// The op for a call written with `written` arguments — with `state`, the name of its
    /// running state, when it keeps some ([`PlanCall::running`]) — or what the call takes.
    fn for_call(&self, written: usize, state: &str) -> Result<Arc<dyn Op>, String>;

    /// The running state, if the op keeps some: lowering then names it (the call's
    /// `name=`, else `NAME.K`), appends the subgraph as the op's last input, and adds
    /// [`Running::stats`] on (input 0, the subgraph) as the graph output `state/NAME`, which
    /// the trainer folds into the state after every step. Default: none.
    fn running(&self) -> Option<Running> {
        None
    }
}

/// An op's running state (see [`PlanCall::running`]): the statistics op of one step and
/// the update's momentum.
#[derive(Clone, Debug)]
pub struct Running {
    /// running ← (1 − m)·running + m·step's.
    pub momentum: f64,
    /// The op computing a step's statistics from (input 0, the subgraph).
    pub stats: Arc<dyn Op>,
}

/// The stages a step's time is split into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Drawing the subgraph and reading its features, targets and adjacency.
    Sampling,
    /// Sparse products over the subgraph's edges (SpMM, SDDMM, attention).
    Aggregation,
    /// Dense products with the weights (GEMM).
    Transformation,
    /// Everything else (activations, losses, concatenation, ...).
    Other,
}

impl dyn Op {
    /// The concrete op, if it is a `T` (for users and ops' own code; the engine's passes
    /// ask the trait's queries instead).
    pub fn downcast_ref<T: Op>(&self) -> Option<&T> {
        (self as &dyn Any).downcast_ref::<T>()
    }

    /// The op's chain role ([`Op::as_chain`]), if any.
    pub fn chain(&self) -> Option<ChainRole> {
        self.as_chain().map(ChainLink::role)
    }

    /// What the op reads ([`Op::as_source`]), if it is a source op.
    pub fn source_kind(&self) -> Option<SourceKind> {
        self.as_source().map(SourceOp::kind)
    }

    /// The columns a column slice passes on ([`Op::as_column_slice`]), if it is one.
    pub fn column_slice(&self) -> Option<Range<usize>> {
        self.as_column_slice().map(ColumnSlice::columns)
    }

    /// The op reading columns `cols` of input `slot` in place ([`Op::as_column_views`]),
    /// if it can.
    pub fn with_column_view(&self, slot: usize, cols: Range<usize>) -> Option<Arc<dyn Op>> {
        self.as_column_views()?.with_column_view(slot, cols)
    }

    /// The op at `precision` ([`Op::as_precision`]), if it has a choice and is not at it.
    pub fn with_precision(&self, precision: Precision) -> Option<Arc<dyn Op>> {
        self.as_precision()?.with_precision(precision)
    }
}

/// Adds gradient nodes for one node during autodiff.
pub struct GradBuilder<'g> {
    pub(crate) graph: &'g mut Graph,
    pub(crate) node: NodeId,
    pub(crate) needs: &'g std::collections::HashSet<NodeId>,
}

impl GradBuilder<'_> {
    /// The node being differentiated.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// Its number of inputs.
    pub fn arity(&self) -> usize {
        self.graph.node(self.node).inputs.len()
    }

    /// Its `i`-th input.
    pub fn input(&self, i: usize) -> NodeId {
        self.graph.node(self.node).inputs[i]
    }

    /// Whether input `i`'s gradient is asked for.
    pub fn needs_grad(&self, i: usize) -> bool {
        self.needs.contains(&self.input(i))
    }

    /// A node's fact.
    pub fn fact(&self, id: NodeId) -> &Fact {
        self.graph.fact(id)
    }

    /// The label of the node being differentiated.
    pub fn label(&self) -> String {
        self.graph.node(self.node).label.clone()
    }

    /// Adds a gradient node, labelled after the node being differentiated.
    pub fn add(&mut self, op: impl Op, inputs: &[NodeId]) -> Result<NodeId, OpError> {
        self.add_arc(Arc::new(op), inputs)
    }

    /// [`GradBuilder::add`] for a shared op.
    pub fn add_arc(&mut self, op: Arc<dyn Op>, inputs: &[NodeId]) -> Result<NodeId, OpError> {
        let label = format!("∇ {}", self.graph.node(self.node).label);
        self.graph.add(op, inputs, label).map_err(|e| match e {
            IrError::Op { source, .. } => source,
            other => OpError::args(other.to_string()),
        })
    }
}
