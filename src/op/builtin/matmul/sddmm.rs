//! `sddmm`: the gradient of a sparse operand's values, on its pattern.

use super::*;

/// Sampled dense-dense product on a sparse pattern: out[k, h] = ⟨L_u, R_v⟩ over head h's
/// column block, for each entry k = (u, v) of S. The gradient of a sparse operand's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sddmm;

impl Op for Sddmm {
    fn stage(&self) -> Stage {
        Stage::Aggregation
    }

    fn name(&self) -> &str {
        "sddmm"
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Sparse, Kind::Dense, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let Fact::Sparse { rows, nnz, heads } = *inputs[0] else {
            unreachable!("arity checked")
        };
        let (lr, lc) = inputs[1].matrix().expect("dense");
        let (rr, rc) = inputs[2].matrix().expect("dense");
        if lr != rows || rr != rows || lc != rc {
            return Err(OpError::args(format!(
                "sddmm: pattern [{rows}, {rows}] with L [{lr}, {lc}] and R [{rr}, {rc}], expected both [{rows}, f]"
            )));
        }
        if lc.as_known().is_none_or(|c| c % heads != 0) {
            return Err(OpError::args(format!(
                "sddmm: width {lc} is not a multiple of {heads} heads"
            )));
        }
        Ok(Fact::dense(nnz, Dim::known(heads)))
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        let nnz = output.matrix().map_or(0, |(r, _)| r.resolve(b)) as f64;
        let f = inputs[1].matrix().map_or(0, |(_, c)| c.resolve(b)) as f64;
        Cost {
            flops: 2.0 * nnz * f,
            ..Cost::streaming(inputs, output, b)
        }
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let s = inputs[0]
            .as_sparse()
            .ok_or_else(|| OpError::args("sddmm: argument 1 is not sparse"))?;
        let l = super::super::dense(inputs, 1, "sddmm")?;
        let r = super::super::dense(inputs, 2, "sddmm")?;
        let st = &s.structure;
        let heads = s.heads();
        let f = l.cols / heads;
        let mut out = Tensor::zeros(st.nnz(), heads);
        for u in 0..st.n_rows() {
            let lu = l.row(u);
            for k in st.row(u) {
                let rv = r.row(st.indices[k] as usize);
                for h in 0..heads {
                    let block = h * f..(h + 1) * f;
                    out.data[k * heads + h] = lu[block.clone()]
                        .iter()
                        .zip(&rv[block])
                        .map(|(a, b)| a * b)
                        .sum();
                }
            }
        }
        Ok(Value::dense(out))
    }
}
