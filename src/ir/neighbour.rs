//! The neighbour-op capability (see "Neighbour ops" in [`super::op`]'s protocol): which
//! inputs an aggregation reads ([`Neighbour`]), its blocked forward over a [`RowBlock`] of
//! adjacency rows with X read in place as [`NodeRows`], and the fold that streams X in
//! parts ([`NeighbourFold`]). Re-exported by [`super::op`] and `saintflow::op`.

use super::ctx::Ctx;
use super::op_error::OpError;
use super::{Fact, SparseMat, Tensor, Value};

/// Capability: a neighbour op (see "Neighbour ops" in [`super::op`]'s protocol). Returned by
/// [`Op::as_neighbour`](super::op::Op::as_neighbour).
pub trait NeighbourOp {
    /// The inputs this op aggregates over, from the inputs' facts.
    fn neighbour(&self, inputs: &[&Fact]) -> Neighbour;

    /// The output's rows `block.r0..block.r0 + block.rows()`, with `ctx.training` false.
    fn forward_block(&self, block: &RowBlock<'_>, ctx: &Ctx<'_>) -> Result<Value, OpError>;

    /// The same rows as a fold that X can be streamed into in parts of rows (see
    /// [`NeighbourFold`]). Default: none, and out-of-core inference reads X in place by
    /// the neighbours' ids.
    fn fold(&self) -> Option<&dyn NeighbourFold> {
        None
    }

    /// Whether [`forward_block`](Self::forward_block) takes blocks of any rows: it reads
    /// a row's own id only through [`RowBlock::row_ids`] (or not at all), never as
    /// `r0 + i`. An evaluation that scores some nodes only (validation) then computes its
    /// last layer at those rows alone. Default: false (every row is computed).
    fn any_rows(&self) -> bool {
        false
    }
}

/// Capability of a neighbour op whose output row is a fold over the row's adjacency
/// entries, one entry at a time in CSR order (a weighted sum, a maximum): out-of-core
/// inference then reads X in parts of consecutive rows, each part once per block of
/// output rows and sequentially, through a bounded buffer, instead of row by row at the
/// neighbours' ids (random reads of a file larger than memory). Returned by
/// [`NeighbourOp::fold`].
///
/// A block's accumulators are [`start`](Self::start)ed, every part of X is folded in
/// ascending order ([`fold_part`](Self::fold_part)), then [`finish`](Self::finish)ed.
/// The store's rows are sorted, so the parts' entries in turn are each row's entries in
/// CSR order, and the result must be [`NeighbourOp::forward_block`]'s bit for bit.
pub trait NeighbourFold {
    /// The accumulators of a block of `rows` rows over X's `cols` columns.
    fn start(&self, rows: usize, cols: usize) -> Tensor;

    /// Folds into `acc` the block's entries whose neighbours are in one part of X: in
    /// `part`, the adjacency's columns and `x`'s rows are numbered from the part's first
    /// node, `part.x0`; every row continues from where the previous part left it.
    fn fold_part(
        &self,
        part: &RowBlock<'_>,
        acc: &mut Tensor,
        ctx: &Ctx<'_>,
    ) -> Result<(), OpError>;

    /// The block's output from its accumulators once every part is folded; `degree[i]`
    /// is row i's number of entries over all parts.
    fn finish(&self, acc: Tensor, degree: &[u32]) -> Result<Value, OpError>;
}

/// Which inputs a neighbour op aggregates over (see [`NeighbourOp::neighbour`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Neighbour {
    /// The sparse n × n input whose rows are aggregated over.
    pub adjacency: usize,
    /// The dense per-node input read at the neighbours' rows.
    pub x: usize,
}

/// The rows of a per-node matrix over the whole graph, read in place by global node id
/// (the store's mapped features, or a value kept between levels).
#[derive(Clone, Copy, Debug)]
pub struct NodeRows<'a> {
    data: &'a [f32],
    cols: usize,
}

impl<'a> NodeRows<'a> {
    /// `data` as a row-major matrix of `cols` columns (its length a multiple of `cols`).
    pub fn new(data: &'a [f32], cols: usize) -> NodeRows<'a> {
        NodeRows { data, cols }
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Rows (N, the graph's nodes).
    pub fn n_rows(&self) -> usize {
        self.data.len().checked_div(self.cols).unwrap_or(0)
    }

    /// Row `v` (a global node id).
    pub fn row(&self, v: usize) -> &'a [f32] {
        &self.data[v * self.cols..(v + 1) * self.cols]
    }

    /// The whole row-major matrix.
    pub fn data(&self) -> &'a [f32] {
        self.data
    }

    /// A copy of rows `ids`, in that order.
    pub fn gather(&self, ids: &[u32]) -> Tensor {
        let mut t = Tensor::zeros(ids.len(), self.cols);
        if self.cols > 0 {
            for (dst, &v) in t.data.chunks_exact_mut(self.cols).zip(ids) {
                dst.copy_from_slice(self.row(v as usize));
            }
        }
        t
    }
}

/// A block of rows of a neighbour op's output (see [`NeighbourOp::forward_block`]).
pub struct RowBlock<'a> {
    /// The global id of the block's first row (with `ids`, the first of them).
    pub r0: usize,
    /// The block's rows' global ids when they are not `r0..r0 + rows` (an evaluation of
    /// chosen rows, [`NeighbourOp::any_rows`]); `None`: consecutive from `r0`.
    pub ids: Option<&'a [u32]>,
    /// The adjacency's columns: N, the graph's nodes (in a [`NeighbourFold`]'s part, the
    /// part's).
    pub n_nodes: usize,
    /// The node id of `x`'s row 0 and of the adjacency's column 0: 0, except in a
    /// [`NeighbourFold`]'s part, where it is the part's first node.
    pub x0: usize,
    /// The adjacency input's rows r0..r0 + rows: CSR with global node ids as columns,
    /// values as the whole-graph adjacency has them.
    pub adjacency: &'a SparseMat,
    /// The whole of the `x` input (a [`NeighbourFold`]'s part: the part's rows).
    pub x: NodeRows<'a>,
    /// Every input by position: `None` at the adjacency's and x's, the value (static:
    /// computed once) elsewhere.
    pub inputs: &'a [Option<&'a Value>],
}

impl RowBlock<'_> {
    /// Rows in the block.
    pub fn rows(&self) -> usize {
        self.adjacency.structure.n_rows()
    }

    /// The global ids of the block's rows, in order.
    pub fn row_ids(&self) -> Vec<u32> {
        match self.ids {
            Some(ids) => ids.to_vec(),
            None => (self.r0 as u32..(self.r0 + self.rows()) as u32).collect(),
        }
    }
}
