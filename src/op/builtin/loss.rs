//! Losses: softmax cross-entropy (single-label) and sigmoid binary cross-entropy
//! (multi-label), weighted per node by the targets' weights (GraphSAINT's loss
//! normalisation; weight 0 masks a node out). Output: the scalar L = Σ_i w_i ℓ_i.

use crate::ir::{Dim, Fact, Kind, NodeId, TargetLabels, Targets, Tensor, Value};
use crate::op::{Arity, Ctx, GradBuilder, Op, OpError};

use super::dense;

/// Which loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossKind {
    /// Softmax cross-entropy over single labels.
    SoftmaxCe,
    /// Sigmoid binary cross-entropy over 0/1 multi-labels.
    SigmoidBce,
}

impl LossKind {
    /// The name plan files use.
    pub fn plan_name(self) -> &'static str {
        match self {
            LossKind::SoftmaxCe => "softmax_ce",
            LossKind::SigmoidBce => "sigmoid_bce",
        }
    }
}

/// The loss of logits (n × C) against targets.
#[derive(Clone, Copy, Debug)]
pub struct Loss {
    /// Which loss.
    pub kind: LossKind,
}

fn check(kind: LossKind, inputs: &[&Fact]) -> Result<(), OpError> {
    let (r, c) = inputs[0].matrix().expect("dense");
    let Fact::Targets { classes } = *inputs[1] else {
        unreachable!("arity checked")
    };
    if r != Dim::NODES || c != Dim::known(classes) {
        return Err(OpError::args(format!(
            "{}: logits {} for {classes} classes, expected [n, {classes}]",
            kind.plan_name(),
            inputs[0]
        )));
    }
    Ok(())
}

/// L and ∂L/∂z of `logits` against `t`.
fn evaluate(kind: LossKind, z: &Tensor, t: &Targets) -> Result<(f64, Tensor), OpError> {
    let mut dz = Tensor::zeros(z.rows, z.cols);
    let loss =
        match (kind, &t.labels) {
            (LossKind::SoftmaxCe, TargetLabels::Single(l)) => {
                saintflow_ops::loss::softmax_cross_entropy(
                    &z.data,
                    z.cols,
                    l,
                    &t.weights,
                    &mut dz.data,
                )?
            }
            (LossKind::SigmoidBce, TargetLabels::Multi(m)) => {
                saintflow_ops::loss::sigmoid_bce(&z.data, z.cols, m, &t.weights, &mut dz.data)?
            }
            (LossKind::SoftmaxCe, TargetLabels::Multi(_)) => return Err(OpError::Source(
                "softmax_ce needs single-label targets, the graph is multi-label: use sigmoid_bce"
                    .into(),
            )),
            (LossKind::SigmoidBce, TargetLabels::Single(_)) => return Err(OpError::Source(
                "sigmoid_bce needs multi-label targets, the graph is single-label: use softmax_ce"
                    .into(),
            )),
        };
    Ok((f64::from(loss), dz))
}

impl Op for Loss {
    fn name(&self) -> &str {
        self.kind.plan_name()
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Targets])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        check(self.kind, inputs)?;
        Ok(Fact::Scalar)
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let z = dense(inputs, 0, self.kind.plan_name())?;
        let t = inputs[1]
            .as_targets()
            .ok_or_else(|| OpError::args("loss: argument 2 is not targets"))?;
        Ok(Value::Scalar(evaluate(self.kind, z, t)?.0))
    }
    /// ∂L/∂z_i = g · w_i (softmax(z_i) − e_{y_i}) or g · w_i (σ(z_i) − t_i); the targets get
    /// no gradient.
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let (z, t) = (g.input(0), g.input(1));
        Ok(vec![
            Some(g.add(LossBackward { kind: self.kind }, &[z, t, grad])?),
            None,
        ])
    }
}

/// ∂L/∂logits, scaled by the upstream scalar gradient.
#[derive(Clone, Copy, Debug)]
pub struct LossBackward {
    /// Which loss.
    pub kind: LossKind,
}

impl Op for LossBackward {
    fn name(&self) -> &str {
        match self.kind {
            LossKind::SoftmaxCe => "softmax_ce_backward",
            LossKind::SigmoidBce => "sigmoid_bce_backward",
        }
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Targets, Kind::Scalar])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        check(self.kind, inputs)?;
        Ok(inputs[0].clone())
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let z = dense(inputs, 0, self.name())?;
        let t = inputs[1]
            .as_targets()
            .ok_or_else(|| OpError::args("loss: argument 2 is not targets"))?;
        let g = inputs[2]
            .as_scalar()
            .ok_or_else(|| OpError::args("loss: argument 3 is not a scalar"))?;
        let (_, mut dz) = evaluate(self.kind, z, t)?;
        if g != 1.0 {
            let g = g as f32;
            dz.data.iter_mut().for_each(|v| *v *= g);
        }
        Ok(Value::dense(dz))
    }
}
