//! Arithmetic: `a + b` (same shape, or b a 1×c row broadcast over rows — a bias), the n-ary
//! sum autodiff uses to accumulate gradients, the column sums that are a broadcast's
//! backward, and the elementwise `a - b`, `a * b`, `c * x` (a plan's unary minus is
//! `scale(x, c=-1)`). All but the column sums and their adjoint are row-wise ops on the
//! adapters users get ([`RowWise`], [`Binary`]).

use crate::ir::{Dim, Fact, Kind, NodeId, Tensor, Value};
use crate::op::elementwise::zip_rows;
use crate::op::util::{block, block_mut};
use crate::op::{Arity, Binary, Ctx, GradBuilder, MatMut, MatRef, Op, OpError, RowWise};

use super::dense;

/// a + b; b may be a 1×c row added to every row (a row-wise op whose bias row the adapter
/// passes whole).
#[derive(Clone, Copy, Debug)]
pub struct Add;

impl RowWise for Add {
    fn name(&self) -> &str {
        "add"
    }
    fn arity(&self) -> usize {
        2
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let (a, b) = (inputs[0], inputs[1]);
        let ((ar, ac), (br, bc)) = (a.matrix().expect("dense"), b.matrix().expect("dense"));
        if ac != bc || (ar != br && br != Dim::known(1)) {
            return Err(OpError::args(format!(
                "add: {a} + {b}, expected equal shapes or a [1, {ac}] row on the right"
            )));
        }
        Ok(a.clone())
    }
    /// No arithmetic counted (the streaming estimate).
    fn flops_per_element(&self) -> f64 {
        0.0
    }
    /// Equal shapes: a + b; a bias row (the second input whole, one row): added to every row.
    fn rows(&self, x: &[MatRef<'_>], mut y: MatMut<'_>) -> Result<(), OpError> {
        if x[1].n_rows() == x[0].n_rows() {
            return zip_rows(x, y, "add", |a, b| a + b);
        }
        let (a, bias) = (block(&x[0], "add")?, block(&x[1], "add")?);
        let y = block_mut(&mut y, "add")?;
        y.copy_from_slice(a);
        Ok(saintflow_ops::elementwise::bias_add(y, bias)?)
    }
    /// y = a + b: ∂a = ∇y; ∂b = ∇y, or its column sums when b was broadcast.
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let broadcast = g.fact(g.input(0)) != g.fact(g.input(1));
        let db = match (g.needs_grad(1), broadcast) {
            (false, _) => None,
            (true, false) => Some(grad),
            (true, true) => Some(g.add(SumRows, &[grad])?),
        };
        Ok(vec![g.needs_grad(0).then_some(grad), db])
    }
}

/// a₁ + … + a_k, all of one shape.
#[derive(Clone, Copy, Debug)]
pub struct AddN;

impl RowWise for AddN {
    fn name(&self) -> &str {
        "add_n"
    }
    fn args(&self) -> Arity {
        Arity::Variadic {
            kind: Kind::Dense,
            min: 1,
        }
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        if let Some(f) = inputs.iter().find(|f| **f != inputs[0]) {
            return Err(OpError::args(format!(
                "add_n: {} + {f}, expected equal shapes",
                inputs[0]
            )));
        }
        Ok(inputs[0].clone())
    }
    /// No arithmetic counted (the streaming estimate).
    fn flops_per_element(&self) -> f64 {
        0.0
    }
    /// a₁ + a₂, then each further term added in place, left to right.
    fn rows(&self, x: &[MatRef<'_>], mut y: MatMut<'_>) -> Result<(), OpError> {
        if x.len() == 1 {
            let y = block_mut(&mut y, "add_n")?;
            y.copy_from_slice(block(&x[0], "add_n")?);
            return Ok(());
        }
        zip_rows(&x[..2], y.rb_mut(), "add_n", |a, b| a + b)?;
        let y = block_mut(&mut y, "add_n")?;
        for b in &x[2..] {
            y.iter_mut()
                .zip(block(b, "add_n")?)
                .for_each(|(y, b)| *y += b);
        }
        Ok(())
    }
    /// ∂a_i = ∇y for every i.
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        Ok((0..g.arity())
            .map(|i| g.needs_grad(i).then_some(grad))
            .collect())
    }
}

/// Column sums: n×c → 1×c (the backward of a broadcast row).
#[derive(Clone, Copy, Debug)]
pub struct SumRows;

impl Op for SumRows {
    fn name(&self) -> &str {
        "sum_rows"
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let (_, c) = inputs[0].matrix().expect("dense");
        Ok(Fact::dense(Dim::known(1), c))
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let x = dense(inputs, 0, "sum_rows")?;
        let mut y = Tensor::zeros(1, x.cols);
        saintflow_ops::elementwise::bias_add_backward(&x.data, &mut y.data)?;
        Ok(Value::dense(y))
    }
    /// y = Σ_i x_i: ∂x_i = ∇y for every row i.
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let x = g.input(0);
        Ok(vec![Some(g.add(BroadcastRows, &[grad, x])?)])
    }
}

/// Repeats a 1×c row to the shape of its second argument (whose values are unused).
#[derive(Clone, Copy, Debug)]
pub struct BroadcastRows;

impl Op for BroadcastRows {
    fn name(&self) -> &str {
        "broadcast_rows"
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let (r, c) = inputs[0].matrix().expect("dense");
        let (_, c2) = inputs[1].matrix().expect("dense");
        if r != Dim::known(1) || c != c2 {
            return Err(OpError::args(format!(
                "broadcast_rows: {} to {}, expected a [1, {c2}] row",
                inputs[0], inputs[1]
            )));
        }
        Ok(inputs[1].clone())
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let (row, like) = (
            dense(inputs, 0, "broadcast_rows")?,
            dense(inputs, 1, "broadcast_rows")?,
        );
        let mut y = Tensor::zeros(like.rows, like.cols);
        saintflow_ops::elementwise::bias_add(&mut y.data, &row.data)?;
        Ok(Value::dense(y))
    }
    /// y_i = r: ∂r = Σ_i ∇y_i; the shape argument gets no gradient.
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let dr = if g.needs_grad(0) {
            Some(g.add(SumRows, &[grad])?)
        } else {
            None
        };
        if g.needs_grad(1) {
            return Err(OpError::args(
                "broadcast_rows: its shape argument has no gradient",
            ));
        }
        Ok(vec![dr, None])
    }
}

/// a − b, equal shapes.
#[derive(Clone, Copy, Debug)]
pub struct Sub;

impl Binary for Sub {
    fn name(&self) -> &str {
        "sub"
    }
    fn f(&self, a: f32, b: f32) -> f32 {
        a - b
    }
    /// y = a − b: ∂a = ∇y, ∂b = −∇y.
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let db = if g.needs_grad(1) {
            Some(g.add(Scale { c: -1.0 }, &[grad])?)
        } else {
            None
        };
        Ok(vec![g.needs_grad(0).then_some(grad), db])
    }
}

/// a ⊙ b (elementwise product), equal shapes.
#[derive(Clone, Copy, Debug)]
pub struct Mul;

impl Binary for Mul {
    fn name(&self) -> &str {
        "mul"
    }
    fn f(&self, a: f32, b: f32) -> f32 {
        a * b
    }
    /// y = a ⊙ b: ∂a = ∇y ⊙ b, ∂b = ∇y ⊙ a; saves both operands (each only if the other's
    /// gradient is asked for).
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let (a, b) = (g.input(0), g.input(1));
        let da = if g.needs_grad(0) {
            Some(g.add(Mul, &[grad, b])?)
        } else {
            None
        };
        let db = if g.needs_grad(1) {
            Some(g.add(Mul, &[grad, a])?)
        } else {
            None
        };
        Ok(vec![da, db])
    }
}

/// c · x for a constant c.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scale {
    /// The factor.
    pub c: f32,
}

impl Scale {
    /// The op; `c` must be finite.
    pub fn new(c: f64) -> Result<Scale, OpError> {
        Ok(Scale {
            c: super::activation::finite("c", c)?,
        })
    }
}

impl RowWise for Scale {
    fn name(&self) -> &str {
        "scale"
    }
    fn attrs(&self) -> String {
        format!("c={}", self.c)
    }
    fn rows(&self, x: &[MatRef<'_>], mut y: MatMut<'_>) -> Result<(), OpError> {
        let c = self.c;
        let x = block(&x[0], "scale")?;
        let y = block_mut(&mut y, "scale")?;
        y.iter_mut().zip(x).for_each(|(y, &x)| *y = c * x);
        Ok(())
    }
    /// y = c·x: ∂x = c·∇y; saves nothing.
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        Ok(vec![Some(g.add(*self, &[grad])?)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Bindings, Params};

    fn forward(op: &dyn Op, xs: &[Tensor]) -> Tensor {
        let params = Params::default();
        let ctx = Ctx {
            source: None,
            params: &params,
            step: 0,
            seed: 0,
            training: false,
            node: NodeId::new(0),
            bindings: Bindings {
                nodes: 0,
                entries: 0,
                pairs: 0,
            },
        };
        let vals: Vec<Value> = xs.iter().map(|t| Value::dense(t.clone())).collect();
        let refs: Vec<&Value> = vals.iter().collect();
        op.forward(&refs, &ctx).unwrap().as_dense().unwrap().clone()
    }

    fn matrix(rows: usize, cols: usize, k: f32) -> Tensor {
        let data = (0..rows * cols).map(|i| (i as f32 * k).sin()).collect();
        Tensor::from_vec(rows, cols, data).unwrap()
    }

    /// Large enough for recycled buffers (stale contents must be overwritten).
    #[test]
    fn add_and_add_n_equal_a_left_to_right_loop() {
        let (r, c) = (300, 301);
        let xs: Vec<Tensor> = (1..=4).map(|k| matrix(r, c, k as f32 * 0.37)).collect();
        crate::ir::recycle::give(vec![f32::NAN; r * c]);
        for k in 1..=4 {
            let mut want = xs[0].data.clone();
            for x in &xs[1..k] {
                want.iter_mut().zip(&x.data).for_each(|(w, x)| *w += x);
            }
            let got = forward(&AddN, &xs[..k]);
            assert_eq!((got.rows, got.cols), (r, c));
            assert!(got
                .data
                .iter()
                .zip(&want)
                .all(|(g, w)| g.to_bits() == w.to_bits()));
        }
        let got = forward(&Add, &xs[..2]);
        let want: Vec<f32> = xs[0]
            .data
            .iter()
            .zip(&xs[1].data)
            .map(|(a, b)| a + b)
            .collect();
        assert!(got
            .data
            .iter()
            .zip(&want)
            .all(|(g, w)| g.to_bits() == w.to_bits()));
    }
}
