//! The two capabilities through which an op's forward runs in pieces — [`Partitioned`]
//! (parts of one output run at once by the executor) and [`RowBlocks`] (a block of rows at
//! a time inside a fused chain) — with what each computes once for all its pieces typed by
//! the op ([`Partitioned::Prepared`], [`RowBlocks::Prepared`]). The engine holds many ops'
//! pieces side by side, so it sees them through [`PartitionedDyn`] and [`RowBlocksDyn`],
//! which every implementation gets from a blanket impl: the one place where the prepared
//! data is type-erased and recovered, so no op downcasts. Re-exported by [`super::op`] and
//! `saintflow::op`; the protocol is in [`super::op`]'s header.

use std::any::Any;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use saintflow_ops::view::{MatMut, MatRef};

use super::ctx::Ctx;
use super::op_error::OpError;
use super::{Fact, Value};

/// Capability: a forward that splits into parts run at once (see "Partitioned forward" in
/// [`super::op`]'s protocol). Returned, through [`PartitionedDyn`], by
/// [`Op::as_partitioned`](super::op::Op::as_partitioned).
pub trait Partitioned {
    /// What [`Partitioned::split`] computes once for all parts (`gemm`'s packed B, `spmm`'s
    /// permuted values), read by every part; `()` when nothing.
    type Prepared: Send + Sync + 'static;

    /// How to split this forward into parts for `threads` workers, from the actual inputs.
    /// `output` is the node's fact; `ctx.bindings` resolves it. `None`: this time one task
    /// runs `forward` (small inputs, one worker).
    fn split(
        &self,
        inputs: &[&Value],
        output: &Fact,
        ctx: &Ctx<'_>,
        threads: usize,
    ) -> Result<Option<Split<Self::Prepared>>, OpError>;

    /// Computes part `part` of `split` (the value [`Partitioned::split`] returned) into
    /// `out`, the view of the output's rows or columns `split.ranges[part]`.
    fn forward_part(
        &self,
        inputs: &[&Value],
        ctx: &Ctx<'_>,
        split: &Split<Self::Prepared>,
        part: usize,
        out: MatMut<'_>,
    ) -> Result<(), OpError>;

    /// Completes the output once every part has run, on the worker that ran the last one;
    /// `out` is the whole output. Default: nothing (the parts wrote it). `gemm` adds here
    /// the second halves of k it computed as parts of their own.
    fn finish(&self, split: &Split<Self::Prepared>, out: MatMut<'_>) -> Result<(), OpError> {
        let _ = (split, out);
        Ok(())
    }
}

/// The axis of a dense output that a [`Split`] cuts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    /// Parts are blocks of rows.
    Rows,
    /// Parts are blocks of columns.
    Cols,
}

/// How an op's forward splits into parts (see [`Partitioned::split`]), with `P`, what the
/// op computed once for all parts.
pub struct Split<P = ()> {
    /// The output axis cut.
    pub axis: Axis,
    /// One range per part, ascending and disjoint, within the output's extent on `axis`.
    /// A range may be empty: that part writes nothing of the output (`gemm`'s second
    /// halves of k write buffers of their own, which [`Partitioned::finish`] adds).
    pub ranges: Vec<Range<usize>>,
    /// Data the op computes once for all parts (e.g. permuted values), read by every part.
    pub prepared: P,
    /// Every part writes every element of its view (no accumulation into it, no element
    /// skipped). When the ranges also cover the whole axis the executor hands out the
    /// output without zero-filling it first (a recycled buffer keeps its stale values until
    /// the parts overwrite them): at 2 threads that fill was a serial pass over an n×1024
    /// matrix before the parts could start (issue 33). False unless the op says so.
    pub writes_all: bool,
}

impl<P> fmt::Debug for Split<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Split")
            .field("axis", &self.axis)
            .field("ranges", &self.ranges)
            .field("writes_all", &self.writes_all)
            .finish()
    }
}

impl Split {
    /// `parts` near-equal blocks of `0..len` along `axis` (fewer if `len` is smaller),
    /// nothing prepared ([`Split::with_prepared`] adds it).
    pub fn even(axis: Axis, len: usize, parts: usize) -> Split {
        let parts = parts.clamp(1, len.max(1));
        Split {
            axis,
            ranges: (0..parts)
                .map(|i| i * len / parts..(i + 1) * len / parts)
                .collect(),
            prepared: (),
            writes_all: false,
        }
    }

    /// The same parts with `prepared` for all of them.
    pub fn with_prepared<P>(self, prepared: P) -> Split<P> {
        Split {
            axis: self.axis,
            ranges: self.ranges,
            prepared,
            writes_all: self.writes_all,
        }
    }
}

impl<P> Split<P> {
    /// Declares that every part writes every element of its view ([`Split::writes_all`]).
    pub fn writing_all(mut self) -> Split<P> {
        self.writes_all = true;
        self
    }

    /// Whether the ranges tile `0..extent` with no gap (what lets the executor skip the
    /// zero-fill, with [`Split::writes_all`]).
    pub fn covers(&self, extent: usize) -> bool {
        let mut at = 0;
        for r in &self.ranges {
            if r.start != at {
                return false;
            }
            at = r.end;
        }
        at == extent
    }
}

/// A [`Split`] whatever its op's prepared type: what the executor holds between an op's
/// split and its parts. Only the op's own [`PartitionedDyn`] reads the prepared data back.
pub trait AnySplit: Any + Send + Sync + fmt::Debug {
    /// [`Split::axis`].
    fn axis(&self) -> Axis;
    /// [`Split::ranges`].
    fn ranges(&self) -> &[Range<usize>];
    /// [`Split::writes_all`].
    fn writes_all(&self) -> bool;
    /// [`Split::covers`].
    fn covers(&self, extent: usize) -> bool;
    /// Itself, for its op's [`PartitionedDyn`] to recover the typed split.
    fn as_any(&self) -> &dyn Any;
}

impl<P: Send + Sync + 'static> AnySplit for Split<P> {
    fn axis(&self) -> Axis {
        self.axis
    }
    fn ranges(&self) -> &[Range<usize>] {
        &self.ranges
    }
    fn writes_all(&self) -> bool {
        self.writes_all
    }
    fn covers(&self, extent: usize) -> bool {
        Split::covers(self, extent)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// [`Partitioned`] as the executor calls it, over [`AnySplit`]s. Implemented for every
/// [`Partitioned`]; an op returns `Some(self)` from
/// [`Op::as_partitioned`](super::op::Op::as_partitioned).
pub trait PartitionedDyn {
    /// [`Partitioned::split`].
    fn split_any(
        &self,
        inputs: &[&Value],
        output: &Fact,
        ctx: &Ctx<'_>,
        threads: usize,
    ) -> Result<Option<Box<dyn AnySplit>>, OpError>;

    /// [`Partitioned::forward_part`] on a split this op made.
    fn forward_part_any(
        &self,
        inputs: &[&Value],
        ctx: &Ctx<'_>,
        split: &dyn AnySplit,
        part: usize,
        out: MatMut<'_>,
    ) -> Result<(), OpError>;

    /// [`Partitioned::finish`] on a split this op made.
    fn finish_any(&self, split: &dyn AnySplit, out: MatMut<'_>) -> Result<(), OpError>;
}

/// The typed split behind `split`, which must be one `T` made.
fn own_split<T: Partitioned>(split: &dyn AnySplit) -> Result<&Split<T::Prepared>, OpError> {
    split
        .as_any()
        .downcast_ref::<Split<T::Prepared>>()
        .ok_or_else(|| {
            OpError::Missing(format!(
                "a part of a split made by another op (expected one of {})",
                std::any::type_name::<T>()
            ))
        })
}

impl<T: Partitioned> PartitionedDyn for T {
    fn split_any(
        &self,
        inputs: &[&Value],
        output: &Fact,
        ctx: &Ctx<'_>,
        threads: usize,
    ) -> Result<Option<Box<dyn AnySplit>>, OpError> {
        let split = Partitioned::split(self, inputs, output, ctx, threads)?;
        Ok(split.map(|s| Box::new(s) as Box<dyn AnySplit>))
    }
    fn forward_part_any(
        &self,
        inputs: &[&Value],
        ctx: &Ctx<'_>,
        split: &dyn AnySplit,
        part: usize,
        out: MatMut<'_>,
    ) -> Result<(), OpError> {
        Partitioned::forward_part(self, inputs, ctx, own_split::<T>(split)?, part, out)
    }
    fn finish_any(&self, split: &dyn AnySplit, out: MatMut<'_>) -> Result<(), OpError> {
        Partitioned::finish(self, own_split::<T>(split)?, out)
    }
}

/// Capability: a dense per-node output computed a block of rows at a time from the same
/// rows of the per-node inputs — what the fusion pass (`planner::fuse`) chains into one
/// pass over the rows, so that the intermediate values of a chain of row-wise ops live in
/// a cache-sized block instead of n × f matrices. Returned, through [`RowBlocksDyn`], by
/// [`Op::as_row_blocks`](super::op::Op::as_row_blocks).
///
/// The block must be computed exactly as `forward` computes those rows (the same
/// operations in the same order), so that a fused chain gives the unfused chain's bits.
pub trait RowBlocks {
    /// What [`RowBlocks::prepare`] computes once for all blocks (`gemm`'s packed B); `()`
    /// when nothing.
    type Prepared: Send + Sync + 'static;

    /// Rows `r0..r0 + y.n_rows()` of the output into `y` (every element written). `x[k]`
    /// is input k's same rows when input k is per-node (n rows), else the whole input (a
    /// bias row, a parameter). `ctx` is the step's, with `ctx.node` the id this op's node
    /// had before fusion (dropout keys its mask by it).
    fn rows_at(
        &self,
        r0: usize,
        x: &[MatRef<'_>],
        y: MatMut<'_>,
        ctx: &Ctx<'_>,
    ) -> Result<(), OpError>;

    /// Whether the fusion pass may compute this node a block of rows at a time, given its
    /// inputs' facts: an op whose rows are row-local for some operands only (`gemm`: op(A)
    /// not transposed, op(B) a parameter), or that would lose speed in blocks, says no.
    /// Default: always.
    fn fusible(&self, inputs: &[&Fact]) -> bool {
        let _ = inputs;
        true
    }

    /// Work done once per evaluation for all its blocks, from the inputs the fused node
    /// holds whole: `x[k]` is input k whole (n rows when per-node) where it is an input of
    /// the fused node, `None` where an earlier stage computes it block by block. `gemm`
    /// packs op(B) here, so that its blocks do not each pack it again. The result goes to
    /// [`RowBlocks::rows_at_prepared`] for every block. Default: nothing to do.
    fn prepare(&self, x: &[Option<MatRef<'_>>]) -> Result<Option<Self::Prepared>, OpError> {
        let _ = x;
        Ok(None)
    }

    /// [`RowBlocks::rows_at`] with what [`RowBlocks::prepare`] returned; the same bits.
    /// Default: `rows_at`.
    fn rows_at_prepared(
        &self,
        r0: usize,
        x: &[MatRef<'_>],
        y: MatMut<'_>,
        ctx: &Ctx<'_>,
        prepared: &Self::Prepared,
    ) -> Result<(), OpError> {
        let _ = prepared;
        self.rows_at(r0, x, y, ctx)
    }
}

/// What a [`RowBlocks::prepare`] returned, whatever its type: what a fused node holds for
/// its stages. Only the stage's own [`RowBlocksDyn`] reads it back.
pub type AnyPrepared = Arc<dyn Any + Send + Sync>;

/// [`RowBlocks`] as the fused node calls it, over [`AnyPrepared`]. Implemented for every
/// [`RowBlocks`]; an op returns `Some(self)` from
/// [`Op::as_row_blocks`](super::op::Op::as_row_blocks).
pub trait RowBlocksDyn {
    /// [`RowBlocks::rows_at`].
    fn rows_at_any(
        &self,
        r0: usize,
        x: &[MatRef<'_>],
        y: MatMut<'_>,
        ctx: &Ctx<'_>,
    ) -> Result<(), OpError>;

    /// [`RowBlocks::fusible`].
    fn fusible_any(&self, inputs: &[&Fact]) -> bool;

    /// [`RowBlocks::prepare`].
    fn prepare_any(&self, x: &[Option<MatRef<'_>>]) -> Result<Option<AnyPrepared>, OpError>;

    /// [`RowBlocks::rows_at_prepared`] with what this op's `prepare` returned.
    fn rows_at_prepared_any(
        &self,
        r0: usize,
        x: &[MatRef<'_>],
        y: MatMut<'_>,
        ctx: &Ctx<'_>,
        prepared: &AnyPrepared,
    ) -> Result<(), OpError>;
}

impl<T: RowBlocks> RowBlocksDyn for T {
    fn rows_at_any(
        &self,
        r0: usize,
        x: &[MatRef<'_>],
        y: MatMut<'_>,
        ctx: &Ctx<'_>,
    ) -> Result<(), OpError> {
        RowBlocks::rows_at(self, r0, x, y, ctx)
    }
    fn fusible_any(&self, inputs: &[&Fact]) -> bool {
        RowBlocks::fusible(self, inputs)
    }
    fn prepare_any(&self, x: &[Option<MatRef<'_>>]) -> Result<Option<AnyPrepared>, OpError> {
        let prepared = RowBlocks::prepare(self, x)?;
        Ok(prepared.map(|p| Arc::new(p) as AnyPrepared))
    }
    fn rows_at_prepared_any(
        &self,
        r0: usize,
        x: &[MatRef<'_>],
        y: MatMut<'_>,
        ctx: &Ctx<'_>,
        prepared: &AnyPrepared,
    ) -> Result<(), OpError> {
        let Some(prepared) = prepared.downcast_ref::<T::Prepared>() else {
            return Err(OpError::Missing(format!(
                "rows prepared by another op (expected {}'s)",
                std::any::type_name::<T>()
            )));
        };
        RowBlocks::rows_at_prepared(self, r0, x, y, ctx, prepared)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An op whose parts share a `P`; its methods are never called here.
    struct Parts<P>(std::marker::PhantomData<P>);

    impl<P: Send + Sync + 'static> Partitioned for Parts<P> {
        type Prepared = P;
        fn split(
            &self,
            _: &[&Value],
            _: &Fact,
            _: &Ctx<'_>,
            _: usize,
        ) -> Result<Option<Split<P>>, OpError> {
            Ok(None)
        }
        fn forward_part(
            &self,
            _: &[&Value],
            _: &Ctx<'_>,
            _: &Split<P>,
            _: usize,
            _: MatMut<'_>,
        ) -> Result<(), OpError> {
            Ok(())
        }
    }

    #[test]
    fn a_split_comes_back_typed_to_its_op_and_is_refused_by_another() {
        let split: Box<dyn AnySplit> = Box::new(
            Split::even(Axis::Cols, 10, 3)
                .writing_all()
                .with_prepared(7u8),
        );
        assert_eq!(split.ranges(), [0..3, 3..6, 6..10]);
        assert!(split.writes_all() && split.covers(10) && !split.covers(11));
        assert_eq!(split.axis(), Axis::Cols);
        let own = own_split::<Parts<u8>>(&*split).unwrap();
        assert_eq!((own.prepared, own.ranges.len()), (7, 3));
        let err = own_split::<Parts<u16>>(&*split).unwrap_err().to_string();
        assert!(
            err.contains("another op") && err.contains("Parts<u16>"),
            "{err}"
        );
    }

    #[test]
    fn rows_prepared_by_another_op_are_refused() {
        struct Packs;
        impl RowBlocks for Packs {
            type Prepared = Vec<f32>;
            fn rows_at(
                &self,
                _: usize,
                _: &[MatRef<'_>],
                _: MatMut<'_>,
                _: &Ctx<'_>,
            ) -> Result<(), OpError> {
                Err(OpError::Missing("rows_at without the packing".into()))
            }
            fn prepare(&self, _: &[Option<MatRef<'_>>]) -> Result<Option<Vec<f32>>, OpError> {
                Ok(Some(vec![1.0, 2.0]))
            }
            fn rows_at_prepared(
                &self,
                _: usize,
                _: &[MatRef<'_>],
                mut y: MatMut<'_>,
                _: &Ctx<'_>,
                p: &Vec<f32>,
            ) -> Result<(), OpError> {
                y.row_mut(0).copy_from_slice(p);
                Ok(())
            }
        }
        let params = super::super::Params::default();
        let ctx = Ctx {
            source: None,
            params: &params,
            step: 0,
            seed: 0,
            training: false,
            node: super::super::NodeId::new(0),
            bindings: super::super::Bindings::new(1, 0),
        };
        let mut y = [0.0f32; 2];
        let prepared = Packs.prepare_any(&[]).unwrap().unwrap();
        let view = MatMut::row_major(&mut y, 1, 2).unwrap();
        Packs
            .rows_at_prepared_any(0, &[], view, &ctx, &prepared)
            .unwrap();
        assert_eq!(y, [1.0, 2.0]);
        let other: AnyPrepared = Arc::new(3u32);
        let view = MatMut::row_major(&mut y, 1, 2).unwrap();
        let err = Packs
            .rows_at_prepared_any(0, &[], view, &ctx, &other)
            .unwrap_err()
            .to_string();
        assert!(err.contains("another op") && err.contains("Packs"), "{err}");
    }
}
