//! Inverted dropout without a stored mask. Element i of node k's output in step t is kept
//! iff `hash(seed, t, k, i) ≥ p·2⁶⁴` (the kernel's test on one uniform u64) — a pure
//! function of (run seed, step, the forward node's id, element index) — so the backward op recomputes the same mask from the same
//! key instead of keeping n·f mask bytes alive from forward to backward.
//!
//! Invariant: the key is the forward node's id ([`Ctx::node`] when it runs); the backward op
//! carries it as its `key` attribute. A pass that rebuilds a dropout node must keep that
//! id (petgraph's stable ids survive removals of other nodes) or the masks would differ —
//! the whole-step gradient check catches that.

use rayon::prelude::*;

use crate::ir::{NodeId, Tensor};
use crate::op::util::{block, block_mut};
use crate::op::{Ctx, GradBuilder, MatMut, MatRef, OpError, RowWise};
use crate::seed::{hash3, stream};

/// Elements per parallel task: 64 KiB of f32.
const CHUNK: usize = 1 << 14;

/// A checked dropout probability: in [0, 1).
pub(super) fn probability(p: f64) -> Result<f64, OpError> {
    if (0.0..1.0).contains(&p) {
        Ok(p)
    } else {
        Err(OpError::Attr {
            name: "p".into(),
            what: format!("expected a probability in [0, 1), got {p}"),
        })
    }
}

/// The mask stream of node `key` in the step of `ctx`.
fn mask_base(ctx: &Ctx<'_>, key: u32) -> u64 {
    hash3(
        hash3(ctx.seed, stream::DROPOUT, ctx.step),
        u64::from(key),
        0,
    )
}

/// The mask of node `key` in `ctx`'s step as a test per element, for an op that applies it
/// to a few elements of the dropout's output alone (the sparse features' products): element
/// e is kept iff [`DropoutMask::keeps`], and a kept one scaled by [`DropoutMask::scale`], the
/// same test and the same f32 factor as the kernel's. `None` when nothing is dropped (not
/// training, or p = 0).
#[derive(Clone, Copy, Debug)]
pub struct DropoutMask {
    base: u64,
    threshold: u64,
    /// 1/(1 − p) in f32.
    pub scale: f32,
}

impl DropoutMask {
    /// The mask of dropout node `key` with probability `p` in `ctx`'s step.
    pub fn of(ctx: &Ctx<'_>, key: u32, p: f64) -> Option<DropoutMask> {
        (ctx.training && p > 0.0).then(|| DropoutMask {
            base: mask_base(ctx, key),
            threshold: (p * (u64::MAX as f64)) as u64,
            scale: (1.0 / (1.0 - p)) as f32,
        })
    }

    /// Whether element `e` (row-major index in the dropout's output) is kept.
    pub fn keeps(&self, e: u64) -> bool {
        hash3(self.base, stream::DROPOUT, e) >= self.threshold
    }
}

/// y = x ⊙ mask / (1 − p) for a run of elements whose first is element `first` of the
/// whole matrix: element e keeps its value iff hash(base, e) ≥ p·2⁶⁴, whatever the run.
fn mask_into(x: &[f32], p: f64, base: u64, first: u64, y: &mut [f32]) -> Result<(), OpError> {
    let mut i = first;
    let mut mask = vec![0u8; x.len()];
    saintflow_ops::elementwise::dropout(
        x,
        p,
        || {
            let h = hash3(base, stream::DROPOUT, i);
            i += 1;
            h
        },
        y,
        &mut mask,
    )?;
    Ok(())
}

/// y = x ⊙ mask / (1 − p) with the mask of `base`, one chunk per task (so the mask does
/// not depend on the chunking or the thread count).
fn apply_mask(x: &Tensor, p: f64, base: u64) -> Result<Tensor, OpError> {
    let mut y = Tensor::zeros(x.rows, x.cols);
    y.data
        .par_chunks_mut(CHUNK)
        .zip(x.data.par_chunks(CHUNK))
        .enumerate()
        .try_for_each(|(c, (y, x))| mask_into(x, p, base, (c * CHUNK) as u64, y))?;
    Ok(y)
}

/// `x` with the dropout mask of node `key` in `ctx`'s step (what the `dropout` op's
/// forward gives for that node; its backward, [`DropoutBackward`] with the same key, is the
/// gradient): GAT's attention dropout over α's values.
pub(super) fn masked(x: &Tensor, p: f64, ctx: &Ctx<'_>, key: u32) -> Result<Tensor, OpError> {
    apply_mask(x, p, mask_base(ctx, key))
}

/// Rows of [`apply_mask`]: the block `x` whose first row is row `r0` of the whole matrix
/// (its first element element r0·cols). The identity when not training or p = 0, as the
/// ops' forwards.
fn mask_rows(
    op: &str,
    p: f64,
    ctx: &Ctx<'_>,
    key: u32,
    r0: usize,
    x: &MatRef<'_>,
    mut y: MatMut<'_>,
) -> Result<(), OpError> {
    if !ctx.training || p == 0.0 {
        return copy_rows(op, x, y);
    }
    let first = (r0 * x.n_cols()) as u64;
    let x = block(x, op)?;
    let y = block_mut(&mut y, op)?;
    mask_into(x, p, mask_base(ctx, key), first, y)
}

/// y = x (evaluation, or p = 0).
fn copy_rows(op: &str, x: &MatRef<'_>, mut y: MatMut<'_>) -> Result<(), OpError> {
    block_mut(&mut y, op)?.copy_from_slice(block(x, op)?);
    Ok(())
}

/// Inverted dropout: in training, each element is zeroed with probability p and the kept
/// ones scaled by 1/(1 − p); in evaluation, the identity. Not pure: two dropouts of the
/// same x draw different masks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dropout {
    /// The probability of dropping an element, in [0, 1).
    pub p: f64,
}

impl Dropout {
    /// The op; p outside [0, 1) is an attribute error.
    pub fn new(p: f64) -> Result<Dropout, OpError> {
        Ok(Dropout { p: probability(p)? })
    }
}

impl RowWise for Dropout {
    fn name(&self) -> &str {
        "dropout"
    }
    fn attrs(&self) -> String {
        format!("p={}", self.p)
    }
    /// Two 64-bit mixes (≈ 10 integer operations) and a multiply per element.
    fn flops_per_element(&self) -> f64 {
        11.0
    }
    /// Outside a step: evaluation, the identity.
    fn rows(&self, x: &[MatRef<'_>], y: MatMut<'_>) -> Result<(), OpError> {
        copy_rows("dropout", &x[0], y)
    }
    /// Evaluation, or p = 0: x itself (a full-graph pass gathered a part of the features
    /// and then copied it here, for every part of every chunk).
    fn passes_through(&self, ctx: &Ctx<'_>) -> bool {
        !ctx.training || self.p == 0.0
    }
    /// The mask of this node (`ctx.node`: its id before fusion) at the block's elements.
    fn rows_at(
        &self,
        r0: usize,
        x: &[MatRef<'_>],
        y: MatMut<'_>,
        ctx: &Ctx<'_>,
    ) -> Result<(), OpError> {
        mask_rows(
            "dropout",
            self.p,
            ctx,
            ctx.node.index() as u32,
            r0,
            &x[0],
            y,
        )
    }
    /// ∂x = ∇y ⊙ mask / (1 − p), the mask recomputed from this node's key: saves nothing.
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let key = g.node().index() as u32;
        Ok(vec![Some(
            g.add(DropoutBackward { p: self.p, key }, &[grad])?,
        )])
    }
    fn pure(&self) -> bool {
        false
    }
    fn dropout(&self) -> Option<f64> {
        Some(self.p)
    }
}

/// ∂x = ∇y ⊙ mask / (1 − p) with the mask of the forward node `key` (the identity in
/// evaluation, as the forward).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DropoutBackward {
    /// The forward's p.
    pub p: f64,
    /// The forward node's id, whose mask this applies.
    pub key: u32,
}

impl RowWise for DropoutBackward {
    fn name(&self) -> &str {
        "dropout_backward"
    }
    fn attrs(&self) -> String {
        format!("p={}, key={}", self.p, self.key)
    }
    fn flops_per_element(&self) -> f64 {
        11.0
    }
    /// Outside a step: evaluation, the identity.
    fn rows(&self, x: &[MatRef<'_>], y: MatMut<'_>) -> Result<(), OpError> {
        copy_rows("dropout_backward", &x[0], y)
    }
    /// The forward node's mask (`key`) at the block's elements.
    fn rows_at(
        &self,
        r0: usize,
        x: &[MatRef<'_>],
        y: MatMut<'_>,
        ctx: &Ctx<'_>,
    ) -> Result<(), OpError> {
        mask_rows("dropout_backward", self.p, ctx, self.key, r0, &x[0], y)
    }
    /// dx = mask ⊙ ∇y / (1 − p) is self-adjoint: ∂∇y = the same op on the incoming gradient.
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        Ok(vec![Some(g.add(*self, &[grad])?)])
    }
}
