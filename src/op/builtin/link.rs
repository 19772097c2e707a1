//! Link prediction's ops (issue 52): the step's scored pairs read off node representations,
//! and the losses over them. Pairs come from the step's subgraph
//! ([`crate::sample::LinkBatch`]: P targets, then K negatives each); their count is the
//! per-step symbol `e` ([`Dim::PAIRS`]).
//!
//! * `pair_dot(z, sample)` → `[e, 1]`: s_q = z_{src q} · z_{dst q} (GAE's inner-product
//!   decoder).
//! * `pair_mul(z, sample)` → `[e, d]`: z_{src q} ⊙ z_{dst q}, what DistMult (`pair_mul · r`)
//!   and the MLP decoder read.
//! * `link_bce(s, sample)`: Σ_q w_q · BCE(σ(s_q), y_q), y = 1 for targets, 0 for negatives.
//! * `link_softmax(s, sample)`: Σ_i w_i · −log softmax over (s_i, its K negatives)[0]: the
//!   1-positive-vs-K-negatives cross-entropy.
//!
//! Each backward is exact (a finite-difference check covers them, `tests/link_train.rs`);
//! the subgraph gets no gradient.

use crate::ir::{Dim, Fact, Kind, NodeId, Tensor, Value};
use crate::op::{Arity, Cost, Ctx, GradBuilder, Op, OpError};
use crate::sample::LinkBatch;

use super::dense;

fn batch<'v>(inputs: &[&'v Value], slot: usize, op: &str) -> Result<&'v LinkBatch, OpError> {
    let sub = inputs[slot]
        .as_subgraph()
        .ok_or_else(|| OpError::args(format!("{op}: argument {} is not a subgraph", slot + 1)))?;
    sub.link.as_deref().ok_or_else(|| {
        OpError::Source(format!(
            "{op}: the step's subgraph carries no link targets (a link plan's ops on a \
             node-classification source)"
        ))
    })
}

/// Which pair read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairKind {
    /// z_u · z_v, one column.
    Dot,
    /// z_u ⊙ z_v, d columns.
    Mul,
}

impl PairKind {
    fn name(self) -> &'static str {
        match self {
            PairKind::Dot => "pair_dot",
            PairKind::Mul => "pair_mul",
        }
    }
}

/// The step's pairs read off node representations `z` (`[n, d]`).
#[derive(Clone, Copy, Debug)]
pub struct Pairs {
    /// Which read.
    pub kind: PairKind,
}

fn node_width(kind: &str, f: &Fact) -> Result<Dim, OpError> {
    match f.matrix() {
        Some((r, c)) if r == Dim::NODES && c.as_known().is_some() => Ok(c),
        _ => Err(OpError::args(format!(
            "{kind}: node representations {f}, expected [n, d]"
        ))),
    }
}

fn pair_cost(d: Dim, b: &crate::ir::Bindings) -> Cost {
    let (e, d) = (Dim::PAIRS.resolve(b) as f64, d.resolve(b) as f64);
    Cost {
        flops: 2.0 * e * d,
        bytes_read: 8.0 * e * d,
        bytes_written: 4.0 * e * d,
    }
}

impl Op for Pairs {
    fn name(&self) -> &str {
        self.kind.name()
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Subgraph])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let d = node_width(self.kind.name(), inputs[0])?;
        Ok(match self.kind {
            PairKind::Dot => Fact::dense(Dim::PAIRS, Dim::known(1)),
            PairKind::Mul => Fact::dense(Dim::PAIRS, d),
        })
    }
    fn cost(&self, inputs: &[&Fact], _: &Fact, b: &crate::ir::Bindings) -> Cost {
        pair_cost(inputs[0].matrix().map_or(Dim::known(0), |m| m.1), b)
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let z = dense(inputs, 0, self.kind.name())?;
        let b = batch(inputs, 1, self.kind.name())?;
        let d = z.cols;
        let row = |v: u32| -> Result<&[f32], OpError> {
            let v = v as usize;
            z.data.get(v * d..(v + 1) * d).ok_or_else(|| {
                OpError::Source(format!(
                    "{}: pair node {v} outside the subgraph's {} nodes",
                    self.kind.name(),
                    z.rows
                ))
            })
        };
        let out = match self.kind {
            PairKind::Dot => {
                let mut s = Vec::with_capacity(b.len());
                for q in 0..b.len() {
                    let (u, v) = (row(b.src[q])?, row(b.dst[q])?);
                    s.push(u.iter().zip(v).map(|(a, c)| a * c).sum::<f32>());
                }
                Tensor::from_vec(b.len(), 1, s)
            }
            PairKind::Mul => {
                let mut s = Vec::with_capacity(b.len() * d);
                for q in 0..b.len() {
                    let (u, v) = (row(b.src[q])?, row(b.dst[q])?);
                    s.extend(u.iter().zip(v).map(|(a, c)| a * c));
                }
                Tensor::from_vec(b.len(), d, s)
            }
        };
        Ok(Value::dense(
            out.ok_or_else(|| OpError::args("pairs: sizes"))?,
        ))
    }
    /// ∂z_u += g_q ∘ z_v and ∂z_v += g_q ∘ z_u for every pair q = (u, v) (g_q a scalar for
    /// `pair_dot`, a row for `pair_mul`).
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let (z, s) = (g.input(0), g.input(1));
        Ok(vec![
            Some(g.add(PairsBackward { kind: self.kind }, &[z, s, grad])?),
            None,
        ])
    }
}

/// ∂z of [`Pairs`].
#[derive(Clone, Copy, Debug)]
pub struct PairsBackward {
    /// Which read.
    pub kind: PairKind,
}

impl Op for PairsBackward {
    fn name(&self) -> &str {
        match self.kind {
            PairKind::Dot => "pair_dot_backward",
            PairKind::Mul => "pair_mul_backward",
        }
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Subgraph, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let d = node_width(self.name(), inputs[0])?;
        let want = match self.kind {
            PairKind::Dot => Dim::known(1),
            PairKind::Mul => d,
        };
        if inputs[2].matrix() != Some((Dim::PAIRS, want)) {
            return Err(OpError::args(format!(
                "{}: gradient {}, expected [e, {want}]",
                self.name(),
                inputs[2]
            )));
        }
        Ok(inputs[0].clone())
    }
    fn cost(&self, inputs: &[&Fact], _: &Fact, b: &crate::ir::Bindings) -> Cost {
        let c = pair_cost(inputs[0].matrix().map_or(Dim::known(0), |m| m.1), b);
        Cost {
            flops: 2.0 * c.flops,
            ..c
        }
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let z = dense(inputs, 0, self.name())?;
        let b = batch(inputs, 1, self.name())?;
        let gs = dense(inputs, 2, self.name())?;
        let d = z.cols;
        let mut dz = Tensor::zeros(z.rows, d);
        let n = z.rows;
        for q in 0..b.len() {
            let (u, v) = (b.src[q] as usize, b.dst[q] as usize);
            if u >= n || v >= n {
                return Err(OpError::Source(format!(
                    "{}: pair ({u}, {v}) outside the subgraph's {n} nodes",
                    self.name()
                )));
            }
            for c in 0..d {
                let gq = match self.kind {
                    PairKind::Dot => gs.data[q],
                    PairKind::Mul => gs.data[q * d + c],
                };
                let (zu, zv) = (z.data[u * d + c], z.data[v * d + c]);
                dz.data[u * d + c] += gq * zv;
                dz.data[v * d + c] += gq * zu;
            }
        }
        Ok(Value::dense(dz))
    }
}

/// Which link loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkLossKind {
    /// Binary cross-entropy over targets (1) and negatives (0).
    Bce,
    /// Each target against its K negatives: softmax cross-entropy with the target first.
    Softmax,
}

impl LinkLossKind {
    /// Every loss by its plan name.
    pub const ALL: [(&'static str, LinkLossKind); 2] = [
        ("bce", LinkLossKind::Bce),
        ("softmax", LinkLossKind::Softmax),
    ];

    /// The plan name.
    pub fn plan_name(self) -> &'static str {
        match self {
            LinkLossKind::Bce => "bce",
            LinkLossKind::Softmax => "softmax",
        }
    }

    fn op_name(self) -> &'static str {
        match self {
            LinkLossKind::Bce => "link_bce",
            LinkLossKind::Softmax => "link_softmax",
        }
    }
}

/// The loss of the pairs' scores (`[e, 1]`).
#[derive(Clone, Copy, Debug)]
pub struct LinkLoss {
    /// Which loss.
    pub kind: LinkLossKind,
}

fn check_scores(op: &str, f: &Fact) -> Result<(), OpError> {
    if f.matrix() != Some((Dim::PAIRS, Dim::known(1))) {
        return Err(OpError::args(format!(
            "{op}: scores {f}, expected one per pair [e, 1] (the decoder's output)"
        )));
    }
    Ok(())
}

/// log(1 + e^x), stable.
fn softplus(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// L and ∂L/∂s.
fn link_loss(kind: LinkLossKind, s: &[f32], b: &LinkBatch) -> Result<(f64, Vec<f32>), OpError> {
    if s.len() != b.len() || b.weights.len() != b.len() {
        return Err(OpError::args(format!(
            "{}: {} scores for {} pairs",
            kind.op_name(),
            s.len(),
            b.len()
        )));
    }
    let mut ds = vec![0f32; s.len()];
    let mut loss = 0f64;
    match kind {
        LinkLossKind::Bce => {
            for q in 0..s.len() {
                let (x, w) = (f64::from(s[q]), f64::from(b.weights[q]));
                let y = if b.is_positive(q) { 1.0 } else { 0.0 };
                // −y log σ(x) − (1 − y) log(1 − σ(x)) = softplus(x) − y·x.
                loss += w * (softplus(x) - y * x);
                ds[q] = (w * (sigmoid(x) - y)) as f32;
            }
        }
        LinkLossKind::Softmax => {
            let (p, k) = (b.positives, b.k);
            for i in 0..p {
                let w = f64::from(b.weights[i]);
                let idx = |j: usize| if j == 0 { i } else { p + i * k + j - 1 };
                let m = (0..=k)
                    .map(|j| f64::from(s[idx(j)]))
                    .fold(f64::MIN, f64::max);
                let z: f64 = (0..=k).map(|j| (f64::from(s[idx(j)]) - m).exp()).sum();
                loss += w * (m + z.ln() - f64::from(s[i]));
                for j in 0..=k {
                    let pj = (f64::from(s[idx(j)]) - m).exp() / z;
                    ds[idx(j)] = (w * (pj - if j == 0 { 1.0 } else { 0.0 })) as f32;
                }
            }
        }
    }
    Ok((loss, ds))
}

impl Op for LinkLoss {
    fn name(&self) -> &str {
        self.kind.op_name()
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Subgraph])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        check_scores(self.name(), inputs[0])?;
        Ok(Fact::Scalar)
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let s = dense(inputs, 0, self.name())?;
        let b = batch(inputs, 1, self.name())?;
        Ok(Value::Scalar(link_loss(self.kind, &s.data, b)?.0))
    }
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let (s, sub) = (g.input(0), g.input(1));
        Ok(vec![
            Some(g.add(LinkLossBackward { kind: self.kind }, &[s, sub, grad])?),
            None,
        ])
    }
}

/// ∂L/∂s of [`LinkLoss`], scaled by the upstream scalar.
#[derive(Clone, Copy, Debug)]
pub struct LinkLossBackward {
    /// Which loss.
    pub kind: LinkLossKind,
}

impl Op for LinkLossBackward {
    fn name(&self) -> &str {
        match self.kind {
            LinkLossKind::Bce => "link_bce_backward",
            LinkLossKind::Softmax => "link_softmax_backward",
        }
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Subgraph, Kind::Scalar])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        check_scores(self.name(), inputs[0])?;
        Ok(inputs[0].clone())
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let s = dense(inputs, 0, self.name())?;
        let b = batch(inputs, 1, self.name())?;
        let g = inputs[2]
            .as_scalar()
            .ok_or_else(|| OpError::args(format!("{}: argument 3 is not a scalar", self.name())))?
            as f32;
        let (_, mut ds) = link_loss(self.kind, &s.data, b)?;
        if g != 1.0 {
            ds.iter_mut().for_each(|v| *v *= g);
        }
        Ok(Value::dense(
            Tensor::from_vec(s.rows, 1, ds).ok_or_else(|| OpError::args("link loss: sizes"))?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(p: usize, k: usize) -> LinkBatch {
        let mut b = LinkBatch {
            positives: p,
            k,
            ..LinkBatch::default()
        };
        for q in 0..p * (1 + k) {
            b.src.push(0);
            b.dst.push(1);
            b.weights.push(0.5 + q as f32 * 0.1);
        }
        b
    }

    /// Central differences of each loss against its gradient, in f64 on f32 scores.
    #[test]
    fn link_losses_match_finite_differences() {
        for kind in [LinkLossKind::Bce, LinkLossKind::Softmax] {
            let b = batch(3, 2);
            let s: Vec<f32> = (0..9).map(|i| (i as f32 * 0.37).sin() * 2.0).collect();
            let (_, ds) = link_loss(kind, &s, &b).unwrap();
            for q in 0..s.len() {
                let h = 1e-2f32;
                let (mut a, mut c) = (s.clone(), s.clone());
                a[q] += h;
                c[q] -= h;
                let fd = (link_loss(kind, &a, &b).unwrap().0 - link_loss(kind, &c, &b).unwrap().0)
                    / (2.0 * f64::from(h));
                assert!(
                    (fd - f64::from(ds[q])).abs() < 2e-3,
                    "{kind:?} q={q}: fd {fd} vs {}",
                    ds[q]
                );
            }
        }
    }

    #[test]
    fn bce_at_zero_is_log_two_per_unit_weight_and_softmax_is_log_k_plus_one() {
        let b = batch(2, 3);
        let s = vec![0f32; 8];
        let w: f64 = b.weights.iter().map(|&w| f64::from(w)).sum();
        let (l, _) = link_loss(LinkLossKind::Bce, &s, &b).unwrap();
        assert!((l - w * std::f64::consts::LN_2).abs() < 1e-9);
        let (l, _) = link_loss(LinkLossKind::Softmax, &s, &b).unwrap();
        let wp = f64::from(b.weights[0] + b.weights[1]);
        assert!((l - wp * 4f64.ln()).abs() < 1e-6);
    }
}
