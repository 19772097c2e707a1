//! `transpose`: a copy, where a kernel needs a row-major operand that only exists
//! transposed.

use super::*;

/// A row-major copy of a dense matrix's transpose (only where a kernel needs one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transpose;

impl Op for Transpose {
    fn name(&self) -> &str {
        "transpose"
    }
    fn as_chain(&self) -> Option<&dyn ChainLink> {
        Some(self)
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let (r, c) = inputs[0].matrix().expect("dense");
        Ok(Fact::dense(c, r))
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        Ok(Value::dense(transpose(super::super::dense(
            inputs,
            0,
            "transpose",
        )?)))
    }
    /// Y = Xᵀ: ∂X = ∇Yᵀ.
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        Ok(vec![Some(g.add(Transpose, &[grad])?)])
    }
}

impl ChainLink for Transpose {
    fn role(&self) -> ChainRole {
        ChainRole::Transpose
    }
}
