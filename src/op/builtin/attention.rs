//! GAT attention (JPDC Eqs. 6–7) as an op producing a sparse matrix: `gat(adj, z, a_l, a_r)`
//! gives α on adj's pattern, H values per entry, and the aggregation is the ordinary product
//! `gat(..) @ z`, whose backward yields ∂α through `sddmm`. This file's backward turns ∂α
//! into ∂z, ∂a_l, ∂a_r:
//!
//! ```text
//! s_l[u,h] = ⟨z_u,h, a_l,h⟩   s_r[v,h] = ⟨z_v,h, a_r,h⟩        (head h: columns h·f..(h+1)·f)
//! e_uv,h  = LeakyReLU(ê_uv,h),  ê_uv,h = s_l[u,h] + s_r[v,h]
//! α_uv,h  = exp(e_uv,h) / Σ_w∈N(u) exp(e_uw,h)
//!
//! ∂e   = edge_softmax_backward(α, ∂α)         ∂e_uv = α_uv (∂α_uv − Σ_w α_uw ∂α_uw)
//! ∂s_l = Σ_v ∂ê_uv,  ∂s_r = Σ_u ∂ê_uv          ∂ê = ∂e · (1 if ê > 0 else slope)
//! ∂z_u,h = ∂s_l[u,h]·a_l,h + ∂s_r[u,h]·a_r,h   ∂a_l,h = Σ_u ∂s_l[u,h]·z_u,h  (a_r alike)
//! ```
//!
//! Backward nodes: `gat_scores_backward` (α, z, a_l, a_r, ∂α → [∂s_l | ∂s_r], n × 2H),
//! then `gat_z_backward` and `gat_a_backward` (side l or r) from it. What is saved: α (the
//! forward's own output, alive anyway for the product) and the inputs; ê is recomputed
//! from the projections (O(n·F + nnz·H), less than one more pass over z) rather than kept
//! as a second nnz × H array.

use std::borrow::Cow;
use std::sync::Arc;

use rayon::prelude::*;
use saintflow_ops::attention::{
    edge_softmax, edge_softmax_backward, gat_scores, gat_scores_backward,
};

use crate::ir::{Bindings, Dim, Fact, Kind, NodeId, SparseMat, Tensor, Value};
use crate::op::NeighbourOp;
use crate::op::{Arity, Cost, Ctx, GradBuilder, Neighbour, Op, OpError, RowBlock, Stage};

use super::dense;
use super::structure::head_width;

/// The sparse input `i`.
fn sparse<'v>(inputs: &[&'v Value], i: usize, op: &str) -> Result<&'v SparseMat, OpError> {
    inputs[i]
        .as_sparse()
        .ok_or_else(|| OpError::args(format!("{op}: argument {} is not sparse", i + 1)))
}

/// Checks that `fact` is a [1, width] row (an attention vector).
fn check_row(op: &str, what: &str, fact: &Fact, width: Dim) -> Result<(), OpError> {
    if fact.matrix() != Some((Dim::known(1), width)) {
        return Err(OpError::args(format!(
            "{op}: {what}, expected [1, {width}], got {fact}"
        )));
    }
    Ok(())
}

/// Checks the (z, a_l, a_r) facts against `rows` and `heads`; returns z's width F.
fn check_operands(
    op: &str,
    rows: Dim,
    heads: usize,
    z: &Fact,
    a_l: &Fact,
    a_r: &Fact,
) -> Result<Dim, OpError> {
    let (zr, zc) = z.matrix().expect("dense");
    if zr != rows {
        return Err(OpError::args(format!(
            "{op}: z for a [{rows}, {rows}] pattern, expected [{rows}, {zc}], got {z}"
        )));
    }
    head_width(op, "z", z, heads)?;
    check_row(op, "a_l", a_l, zc)?;
    check_row(op, "a_r", a_r, zc)?;
    Ok(zc)
}

/// s[u·H + h] = ⟨z[u, h·f..(h+1)·f], a[h·f..(h+1)·f]⟩.
fn head_dot(z: &Tensor, a: &[f32], heads: usize) -> Vec<f32> {
    let f = z.cols / heads;
    let mut s = vec![0.0f32; z.rows * heads];
    if f == 0 {
        return s;
    }
    s.par_chunks_mut(heads).enumerate().for_each(|(u, out)| {
        for ((o, zb), ab) in out
            .iter_mut()
            .zip(z.row(u).chunks_exact(f))
            .zip(a.chunks_exact(f))
        {
            *o = zb.iter().zip(ab).map(|(x, y)| x * y).sum();
        }
    });
    s
}

/// The projections s_l, s_r of one attention (node-major, `heads` per node) and what turns
/// them into scores and α.
struct Scores {
    heads: usize,
    slope: f32,
    s_l: Vec<f32>,
    s_r: Vec<f32>,
}

impl Scores {
    /// s_l from `z_l`'s rows (the pattern's rows), s_r from `z_r`'s (the nodes its
    /// indices name): z twice for a whole pattern, a block's gathered rows otherwise.
    fn new(
        z_l: &Tensor,
        z_r: &Tensor,
        a_l: &Tensor,
        a_r: &Tensor,
        heads: usize,
        slope: f32,
    ) -> Scores {
        Scores {
            heads,
            slope,
            s_l: head_dot(z_l, &a_l.data, heads),
            s_r: head_dot(z_r, &a_r.data, heads),
        }
    }

    /// ê and e = LeakyReLU(ê) of every entry and head.
    fn raw(&self, offsets: &[u32], indices: &[u32]) -> Result<(Vec<f32>, Vec<f32>), OpError> {
        let n_e = indices.len() * self.heads;
        let (mut e_raw, mut e) = (vec![0.0f32; n_e], vec![0.0f32; n_e]);
        gat_scores(
            offsets, indices, self.heads, &self.s_l, &self.s_r, self.slope, &mut e_raw, &mut e,
        )?;
        Ok((e_raw, e))
    }

    /// α on a pattern (`indices` index s_r's nodes), `heads` values per entry: LeakyReLU of
    /// the scores, each row's softmax. An entry whose adjacency value is exactly 0 is not a
    /// neighbour: α is 0 there and it is out of its row's softmax (an adjacency built with
    /// explicit zeros attends only where it is nonzero); the entries left are scored on a
    /// compact copy of the pattern and their α put back in place. A relation's adjacency
    /// holds r's entries alone, so `gat(A[r], …)` attends within relation r (RGAT's
    /// WIRGAT) without the mask.
    fn alpha(&self, offsets: &[u32], indices: &[u32], values: &[f32]) -> Result<Tensor, OpError> {
        let h = self.heads;
        let masked = values.len() == indices.len() && values.contains(&0.0);
        let (offsets, indices, at): (Cow<[u32]>, Cow<[u32]>, _) = if masked {
            let mut kept_offsets = Vec::with_capacity(offsets.len());
            kept_offsets.push(0u32);
            let (mut kept, mut at) = (Vec::new(), Vec::new());
            for w in offsets.windows(2) {
                for k in w[0] as usize..w[1] as usize {
                    if values[k] != 0.0 {
                        kept.push(indices[k]);
                        at.push(k);
                    }
                }
                kept_offsets.push(kept.len() as u32);
            }
            (kept_offsets.into(), kept.into(), Some(at))
        } else {
            (offsets.into(), indices.into(), None)
        };
        let (_, e) = self.raw(&offsets, &indices)?;
        let mut alpha = Tensor::zeros(indices.len(), h);
        edge_softmax(&offsets, h, &e, &mut alpha.data)?;
        let Some(at) = at else { return Ok(alpha) };
        let mut full = Tensor::zeros(values.len(), h);
        for (i, &k) in at.iter().enumerate() {
            full.data[k * h..(k + 1) * h].copy_from_slice(alpha.row(i));
        }
        Ok(full)
    }
}

/// GAT attention: α on adj's pattern (an entry of value 0 is no neighbour; other values ignored), `heads` values per entry.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gat {
    /// Attention heads H (z is n × H·f).
    pub heads: usize,
    /// LeakyReLU's slope on the scores (0.2 in GAT).
    pub slope: f32,
    /// Dropout on α while training (GAT's attention dropout, 0.6 on Cora), in [0, 1): the
    /// mask of inverted dropout, keyed as the `dropout` op's by this node, over α's
    /// nnz × H values. The backward recomputes α undropped from the inputs.
    pub dropout: f64,
}

impl Gat {
    /// The op; `heads` ≥ 1, a finite `slope` and `dropout` in [0, 1).
    pub fn new(heads: usize, slope: f64, dropout: f64) -> Result<Gat, OpError> {
        if heads == 0 {
            return Err(OpError::Attr {
                name: "heads".into(),
                what: "expected a whole number ≥ 1, got 0".into(),
            });
        }
        Ok(Gat {
            heads,
            slope: super::activation::finite("slope", slope)?,
            dropout: super::dropout::probability(dropout)?,
        })
    }
}

impl Op for Gat {
    fn stage(&self) -> Stage {
        Stage::Aggregation
    }

    fn name(&self) -> &str {
        "gat"
    }
    fn attrs(&self) -> String {
        match self.dropout {
            0.0 => format!("heads={}, slope={}", self.heads, self.slope),
            p => format!("heads={}, slope={}, dropout={p}", self.heads, self.slope),
        }
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Sparse, Kind::Dense, Kind::Dense, Kind::Dense])
    }
    fn pure(&self) -> bool {
        self.dropout == 0.0
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let Fact::Sparse { rows, nnz, .. } = *inputs[0] else {
            unreachable!("arity checked")
        };
        check_operands("gat", rows, self.heads, inputs[1], inputs[2], inputs[3])?;
        Ok(Fact::Sparse {
            rows,
            nnz,
            heads: self.heads,
        })
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        let Fact::Sparse { rows, nnz, .. } = *inputs[0] else {
            return Cost::streaming(inputs, output, b);
        };
        let (n, nnz) = (rows.resolve(b) as f64, nnz.resolve(b) as f64);
        let h = self.heads as f64;
        let dense_bytes: f64 = inputs[1..].iter().map(|f| f.bytes(b) as f64).sum();
        let width = inputs[1].matrix().map_or(0, |(_, c)| c.resolve(b)) as f64;
        Cost {
            // Two projections (2·n·F each), then per entry and head: add and LeakyReLU,
            // then softmax's subtract, exp, add and divide.
            flops: 4.0 * n * width + 6.0 * nnz * h,
            // The pattern (offsets and indices; adj's values are not read), z, a_l, a_r.
            bytes_read: 4.0 * (n + 1.0 + nnz) + dense_bytes,
            bytes_written: output.bytes(b) as f64,
        }
    }
    fn forward(&self, inputs: &[&Value], ctx: &Ctx<'_>) -> Result<Value, OpError> {
        let adj = sparse(inputs, 0, "gat")?;
        let (z, a_l, a_r) = (
            dense(inputs, 1, "gat")?,
            dense(inputs, 2, "gat")?,
            dense(inputs, 3, "gat")?,
        );
        let st = &adj.structure;
        let scores = Scores::new(z, z, a_l, a_r, self.heads, self.slope);
        let mut alpha = scores.alpha(&st.offsets, &st.indices, &adj.values.data)?;
        if ctx.training && self.dropout > 0.0 {
            alpha = super::dropout::masked(&alpha, self.dropout, ctx, ctx.node.index() as u32)?;
        }
        Ok(Value::Sparse(SparseMat {
            structure: Arc::clone(&adj.structure),
            values: Arc::new(alpha),
        }))
    }
    /// See the file's header for the formulas. adj's values are ignored, so no gradient
    /// flows to them (asking for one is an error).
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        if g.needs_grad(0) {
            return Err(OpError::args(
                "gat: the adjacency's values are ignored, expected no gradient to be asked for them, got a request",
            ));
        }
        let (z, a_l, a_r) = (g.input(1), g.input(2), g.input(3));
        // With attention dropout the output is M ⊙ α / (1 − p): the softmax's backward
        // takes α itself, recomputed undropped, and ∂α = M ⊙ ∂out / (1 − p), the mask of
        // this node's key (the `dropout` op's backward).
        let (alpha, grad) = match self.dropout {
            0.0 => (g.node(), grad),
            p => {
                let key = g.node().index() as u32;
                let clean = g.add(
                    Gat {
                        dropout: 0.0,
                        ..*self
                    },
                    &[g.input(0), z, a_l, a_r],
                )?;
                let masked = g.add(super::dropout::DropoutBackward { p, key }, &[grad])?;
                (clean, masked)
            }
        };
        let ds = g.add(
            GatScoresBackward {
                heads: self.heads,
                slope: self.slope,
            },
            &[alpha, z, a_l, a_r, grad],
        )?;
        let dz = if g.needs_grad(1) {
            Some(g.add(GatZBackward { heads: self.heads }, &[ds, a_l, a_r])?)
        } else {
            None
        };
        let mut da = [None, None];
        for (slot, side) in [(2, Side::Left), (3, Side::Right)] {
            if g.needs_grad(slot) {
                da[slot - 2] = Some(g.add(
                    GatVecBackward {
                        heads: self.heads,
                        side,
                    },
                    &[ds, z],
                )?);
            }
        }
        Ok(vec![None, dz, da[0], da[1]])
    }
    fn as_neighbour(&self) -> Option<&dyn NeighbourOp> {
        Some(self)
    }
}

impl NeighbourOp for Gat {
    /// α's row u needs z at u and at u's neighbours (s_r): a neighbour op over adj and z.
    fn neighbour(&self, _: &[&Fact]) -> Neighbour {
        Neighbour { adjacency: 0, x: 1 }
    }
    /// α on the block's rows: s_l from z at the block's rows, s_r from z at U, the block's
    /// neighbours (ascending, gathered from z in place); the scores index U by local ids,
    /// entries stay in adj's order (global ids), so every row's softmax is the one
    /// `forward` computes. The result keeps adj's pattern: global column ids, read by the
    /// product `α @ z` of the same level.
    fn any_rows(&self) -> bool {
        true
    }

    fn forward_block(&self, block: &RowBlock<'_>, _: &Ctx<'_>) -> Result<Value, OpError> {
        let adj = block.adjacency;
        let st = &adj.structure;
        let vector = |i: usize| {
            block
                .inputs
                .get(i)
                .copied()
                .flatten()
                .and_then(Value::as_dense)
                .ok_or_else(|| OpError::args(format!("gat: argument {} is not dense", i + 1)))
        };
        let (a_l, a_r) = (vector(2)?, vector(3)?);
        let own = block.row_ids();
        let mut u: Vec<u32> = st.indices.clone();
        u.sort_unstable();
        u.dedup();
        let local: Vec<u32> = st
            .indices
            .iter()
            .map(|v| u.binary_search(v).expect("collected above") as u32)
            .collect();
        let (z_l, z_r) = (block.x.gather(&own), block.x.gather(&u));
        let scores = Scores::new(&z_l, &z_r, a_l, a_r, self.heads, self.slope);
        let alpha = scores.alpha(&st.offsets, &local, &adj.values.data)?;
        Ok(Value::Sparse(SparseMat {
            structure: Arc::clone(&adj.structure),
            values: Arc::new(alpha),
        }))
    }
}

/// [∂s_l | ∂s_r] (n × 2H) from α, z, a_l, a_r and ∂α (nnz × H).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GatScoresBackward {
    /// H.
    pub heads: usize,
    /// The forward's slope.
    pub slope: f32,
}

impl Op for GatScoresBackward {
    fn stage(&self) -> Stage {
        Stage::Aggregation
    }

    fn name(&self) -> &str {
        "gat_scores_backward"
    }
    fn attrs(&self) -> String {
        format!("heads={}, slope={}", self.heads, self.slope)
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![
            Kind::Sparse,
            Kind::Dense,
            Kind::Dense,
            Kind::Dense,
            Kind::Dense,
        ])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let Fact::Sparse { rows, nnz, heads } = *inputs[0] else {
            unreachable!("arity checked")
        };
        if heads != self.heads {
            return Err(OpError::args(format!(
                "gat_scores_backward: α {}, expected {} heads, got {heads}",
                inputs[0], self.heads
            )));
        }
        check_operands(self.name(), rows, heads, inputs[1], inputs[2], inputs[3])?;
        let want = Fact::dense(nnz, Dim::known(heads));
        if *inputs[4] != want {
            return Err(OpError::args(format!(
                "gat_scores_backward: ∂α, expected {want}, got {}",
                inputs[4]
            )));
        }
        Ok(Fact::dense(rows, Dim::known(2 * heads)))
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        let Fact::Sparse { rows, nnz, heads } = *inputs[0] else {
            return Cost::streaming(inputs, output, b);
        };
        let (n, nnz, h) = (rows.resolve(b) as f64, nnz.resolve(b) as f64, heads as f64);
        let width = inputs[1].matrix().map_or(0, |(_, c)| c.resolve(b)) as f64;
        Cost {
            // Recomputed projections (4·n·F) and scores (2 per entry and head), softmax's
            // backward (4), the slope and two scatter-adds (3).
            flops: 4.0 * n * width + 9.0 * nnz * h,
            // Streaming plus the pattern's indices, read twice (softmax and scores).
            bytes_read: Cost::streaming(inputs, output, b).bytes_read + 8.0 * (nnz + n + 1.0),
            bytes_written: output.bytes(b) as f64,
        }
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let name = self.name();
        let alpha = sparse(inputs, 0, name)?;
        let (z, a_l, a_r, dalpha) = (
            dense(inputs, 1, name)?,
            dense(inputs, 2, name)?,
            dense(inputs, 3, name)?,
            dense(inputs, 4, name)?,
        );
        let (h, st) = (self.heads, &alpha.structure);
        let mut de = vec![0.0f32; st.nnz() * h];
        edge_softmax_backward(&st.offsets, h, &alpha.values.data, &dalpha.data, &mut de)?;
        let (e_raw, _) =
            Scores::new(z, z, a_l, a_r, h, self.slope).raw(&st.offsets, &st.indices)?;
        let n = st.n_rows();
        let (mut ds_l, mut ds_r) = (vec![0.0f32; n * h], vec![0.0f32; n * h]);
        gat_scores_backward(
            &st.offsets,
            &st.indices,
            h,
            self.slope,
            &e_raw,
            &de,
            &mut ds_l,
            &mut ds_r,
        )?;
        let mut out = Tensor::zeros(n, 2 * h);
        for u in 0..n {
            out.data[u * 2 * h..u * 2 * h + h].copy_from_slice(&ds_l[u * h..(u + 1) * h]);
            out.data[u * 2 * h + h..(u + 1) * 2 * h].copy_from_slice(&ds_r[u * h..(u + 1) * h]);
        }
        Ok(Value::dense(out))
    }
}

/// Checks a [∂s_l | ∂s_r] fact: [rows, 2H]; returns rows.
fn check_ds(op: &str, ds: &Fact, heads: usize) -> Result<Dim, OpError> {
    let (rows, cols) = ds.matrix().expect("dense");
    if cols != Dim::known(2 * heads) {
        return Err(OpError::args(format!(
            "{op}: [∂s_l | ∂s_r], expected [{rows}, {}], got {ds}",
            2 * heads
        )));
    }
    Ok(rows)
}

/// ∂z_u,h = ∂s_l\[u,h\]·a_l,h + ∂s_r\[u,h\]·a_r,h, from [∂s_l | ∂s_r], a_l and a_r.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GatZBackward {
    /// H.
    pub heads: usize,
}

impl Op for GatZBackward {
    fn stage(&self) -> Stage {
        Stage::Aggregation
    }

    fn name(&self) -> &str {
        "gat_z_backward"
    }
    fn attrs(&self) -> String {
        format!("heads={}", self.heads)
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Dense, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let rows = check_ds(self.name(), inputs[0], self.heads)?;
        let (_, width) = inputs[1].matrix().expect("dense");
        check_row(self.name(), "a_l", inputs[1], width)?;
        check_row(self.name(), "a_r", inputs[2], width)?;
        head_width(self.name(), "a_l", inputs[1], self.heads)?;
        Ok(Fact::dense(rows, width))
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        Cost {
            flops: output.bytes(b) as f64, // 2 multiply-adds per element: 4 flops / 4 bytes.
            ..Cost::streaming(inputs, output, b)
        }
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let name = self.name();
        let (ds, a_l, a_r) = (
            dense(inputs, 0, name)?,
            dense(inputs, 1, name)?,
            dense(inputs, 2, name)?,
        );
        let h = self.heads;
        let width = a_l.cols;
        let f = width / h;
        let mut dz = Tensor::zeros(ds.rows, width);
        if f > 0 {
            dz.data
                .par_chunks_mut(width)
                .enumerate()
                .for_each(|(u, out)| {
                    let d = ds.row(u);
                    for (hh, block) in out.chunks_exact_mut(f).enumerate() {
                        let (gl, gr) = (d[hh], d[h + hh]);
                        let cols = hh * f..(hh + 1) * f;
                        for ((o, &l), &r) in block
                            .iter_mut()
                            .zip(&a_l.data[cols.clone()])
                            .zip(&a_r.data[cols])
                        {
                            *o = gl * l + gr * r;
                        }
                    }
                });
        }
        Ok(Value::dense(dz))
    }
}

/// Which attention vector a [`GatVecBackward`] differentiates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// a_l (the row node's projection).
    Left,
    /// a_r (the neighbour's projection).
    Right,
}

/// ∂a_h = Σ_u ∂s\[u,h\]·z_u,h for a = a_l (∂s_l) or a_r (∂s_r), from [∂s_l | ∂s_r] and z.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GatVecBackward {
    /// H.
    pub heads: usize,
    /// a_l or a_r.
    pub side: Side,
}

impl Op for GatVecBackward {
    fn stage(&self) -> Stage {
        Stage::Aggregation
    }

    fn name(&self) -> &str {
        "gat_a_backward"
    }
    fn attrs(&self) -> String {
        let side = match self.side {
            Side::Left => "l",
            Side::Right => "r",
        };
        format!("heads={}, side={side}", self.heads)
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let rows = check_ds(self.name(), inputs[0], self.heads)?;
        let (zr, width) = inputs[1].matrix().expect("dense");
        if zr != rows {
            return Err(OpError::args(format!(
                "gat_a_backward: z, expected [{rows}, {width}], got {}",
                inputs[1]
            )));
        }
        head_width(self.name(), "z", inputs[1], self.heads)?;
        Ok(Fact::dense(Dim::known(1), width))
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        Cost {
            flops: inputs[1].bytes(b) as f64 / 2.0, // a multiply-add per element of z.
            ..Cost::streaming(inputs, output, b)
        }
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let (ds, z) = (
            dense(inputs, 0, self.name())?,
            dense(inputs, 1, self.name())?,
        );
        let h = self.heads;
        let off = match self.side {
            Side::Left => 0,
            Side::Right => h,
        };
        let f = z.cols / h;
        let mut da = Tensor::zeros(1, z.cols);
        if f > 0 {
            for u in 0..z.rows {
                let d = &ds.row(u)[off..off + h];
                for ((o, zb), &gu) in da
                    .data
                    .chunks_exact_mut(f)
                    .zip(z.row(u).chunks_exact(f))
                    .zip(d)
                {
                    o.iter_mut().zip(zb).for_each(|(o, &x)| *o += gu * x);
                }
            }
        }
        Ok(Value::dense(da))
    }
}
