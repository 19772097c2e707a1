//! `fused`: a chain of row-wise ops run as one pass over the rows, what the fusion pass
//! (`planner::fuse`) makes of ops with the [`RowBlocks`](super::RowBlocks) capability. Each block of rows
//! goes through every stage in order, the stages' intermediate values living in
//! block-sized buffers (about 128 KiB each: in the L2 cache) instead of n × f matrices
//! that are written and read back. Every stage computes its rows exactly as its own op
//! does, so the fused chain gives the unfused chain's bits; the output is split into row
//! blocks for the executor's workers like any row-wise op.

use std::sync::Arc;

use rayon::prelude::*;

use crate::ir::{Bindings, Fact, Kind, NodeId, Tensor, Value};

use super::util::{dense, row_split};
use super::{Arity, Cost, Ctx, MatMut, MatRef, Op, OpError, Partitioned, RowLocal, Split};

/// Where a stage's input comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Src {
    /// Input `i` of the fused node.
    Input(usize),
    /// The output of stage `k` (an earlier one).
    Stage(usize),
}

/// One op of the chain.
#[derive(Clone, Debug)]
pub struct Stage {
    /// The op (it has the [`RowBlocks`](super::RowBlocks) capability).
    pub op: Arc<dyn Op>,
    /// The id its node had (what `ctx.node` is while it runs: dropout keys its mask by it).
    pub node: NodeId,
    /// Its inputs, in order.
    pub inputs: Vec<Src>,
    /// Per input: whether it has one row per node (else it is passed whole: a bias row).
    pub per_node: Vec<bool>,
    /// Its output's columns.
    pub cols: usize,
    /// Its inputs' facts and its output's (for the cost).
    pub facts: Vec<Fact>,
    /// Its output's fact.
    pub fact: Fact,
}

/// The fused chain: stages in order, the last one's output the node's.
#[derive(Clone, Debug)]
pub struct Fused {
    /// The stages.
    pub stages: Vec<Stage>,
    /// The output's fact (the last stage's).
    pub fact: Fact,
}

/// Elements of one stage's block buffer: 128 KiB of f32.
const BLOCK_ELEMENTS: usize = 1 << 15;

impl Fused {
    /// Rows `rows` of the output into `out` (those rows, contiguous), block by block.
    fn run(
        &self,
        inputs: &[&Value],
        ctx: &Ctx<'_>,
        rows: std::ops::Range<usize>,
        mut out: MatMut<'_>,
    ) -> Result<(), OpError> {
        let xs: Vec<&Tensor> = (0..inputs.len())
            .map(|i| dense(inputs, i, "fused"))
            .collect::<Result<_, _>>()?;
        let step = self.block_rows();
        let last = self.stages.len() - 1;
        let mut bufs: Vec<Vec<f32>> = self.stages[..last]
            .iter()
            .map(|s| vec![0.0; step.min(rows.len()) * s.cols])
            .collect();
        let mut r = rows.start;
        while r < rows.end {
            let h = step.min(rows.end - r);
            for (k, st) in self.stages.iter().enumerate() {
                let (done, rest) = bufs.split_at_mut(k.min(last));
                let mut views = Vec::with_capacity(st.inputs.len());
                for (src, &pn) in st.inputs.iter().zip(&st.per_node) {
                    views.push(match *src {
                        Src::Input(i) => {
                            let x = xs[i];
                            if pn {
                                let data =
                                    x.data.get(r * x.cols..(r + h) * x.cols).ok_or_else(|| {
                                        OpError::args(format!(
                                            "fused: input {} has {} rows",
                                            i + 1,
                                            x.rows
                                        ))
                                    })?;
                                MatRef::row_major(data, h, x.cols)?
                            } else {
                                MatRef::row_major(&x.data, x.rows, x.cols)?
                            }
                        }
                        Src::Stage(j) => {
                            let c = self.stages[j].cols;
                            MatRef::row_major(&done[j][..h * c], h, c)?
                        }
                    });
                }
                let y = if k == last {
                    out.rb_mut().rows_mut(r - rows.start..r - rows.start + h)?
                } else {
                    MatMut::row_major(&mut rest[0][..h * st.cols], h, st.cols)?
                };
                let sctx = Ctx {
                    node: st.node,
                    bindings: ctx.bindings,
                    ..*ctx
                };
                let op = st.op.as_row_blocks().ok_or_else(|| {
                    OpError::args(format!("fused: {} computes no row blocks", st.op.name()))
                })?;
                op.rows_at(r, &views, y, &sctx)?;
            }
            r += h;
        }
        Ok(())
    }

    /// Rows per block: a block of the widest stage is about [`BLOCK_ELEMENTS`].
    fn block_rows(&self) -> usize {
        let widest = self.stages.iter().map(|s| s.cols).max().unwrap_or(1).max(1);
        (BLOCK_ELEMENTS / widest).max(1)
    }

    /// The node's rows: those of a per-node input.
    fn rows(&self, inputs: &[&Value]) -> Result<usize, OpError> {
        for st in &self.stages {
            for (src, &pn) in st.inputs.iter().zip(&st.per_node) {
                if let (Src::Input(i), true) = (src, pn) {
                    return Ok(dense(inputs, *i, "fused")?.rows);
                }
            }
        }
        Err(OpError::args("fused: no per-node input"))
    }

    /// The inputs the fused node takes.
    pub fn arity(&self) -> usize {
        self.stages
            .iter()
            .flat_map(|s| &s.inputs)
            .filter_map(|s| match s {
                Src::Input(i) => Some(i + 1),
                Src::Stage(_) => None,
            })
            .max()
            .unwrap_or(0)
    }
}

impl Op for Fused {
    fn name(&self) -> &str {
        "fused"
    }
    /// The stages' names in order (`l2norm_backward → dropout_backward → relu_backward`).
    fn attrs(&self) -> String {
        let names: Vec<String> = self
            .stages
            .iter()
            .map(|s| {
                let a = s.op.attrs();
                if a.is_empty() {
                    s.op.name().to_string()
                } else {
                    format!("{}[{a}]", s.op.name())
                }
            })
            .collect();
        names.join(" → ")
    }
    /// The stages' identities and wiring (the default `Debug` text has both).
    fn identity(&self) -> String {
        let stages: Vec<String> = self
            .stages
            .iter()
            .map(|s| format!("{}#{}{:?}", s.op.identity(), s.node.index(), s.inputs))
            .collect();
        stages.join(";")
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense; self.arity()])
    }
    fn infer(&self, _: &[&Fact]) -> Result<Fact, OpError> {
        Ok(self.fact.clone())
    }
    /// The stages' arithmetic; the bytes of the fused node's own inputs and output only
    /// (what fusion saves is the intermediates' traffic).
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        let flops = self
            .stages
            .iter()
            .map(|s| {
                let f: Vec<&Fact> = s.facts.iter().collect();
                s.op.cost(&f, &s.fact, b).flops
            })
            .sum();
        Cost {
            flops,
            ..Cost::streaming(inputs, output, b)
        }
    }
    /// The blocks in parallel on the caller's rayon pool (what the unfused ops' kernels
    /// did: the interpreter runs them so).
    fn forward(&self, inputs: &[&Value], ctx: &Ctx<'_>) -> Result<Value, OpError> {
        let rows = self.rows(inputs)?;
        let cols = self.stages.last().map_or(0, |s| s.cols);
        let mut y = Tensor::scratch(rows, cols);
        if cols == 0 || rows == 0 {
            return Ok(Value::dense(y));
        }
        let step = self.block_rows();
        y.data
            .par_chunks_mut(step * cols)
            .enumerate()
            .try_for_each(|(k, out)| {
                let (r0, h) = (k * step, out.len() / cols);
                self.run(inputs, ctx, r0..r0 + h, MatMut::row_major(out, h, cols)?)
            })?;
        Ok(Value::dense(y))
    }
    /// Pure unless a stage is not (a dropout draws its own mask).
    fn pure(&self) -> bool {
        self.stages.iter().all(|s| s.op.pure())
    }
    fn as_partitioned(&self) -> Option<&dyn Partitioned> {
        Some(self)
    }
    fn as_row_local(&self) -> Option<&dyn RowLocal> {
        Some(self)
    }
}

impl Partitioned for Fused {
    /// Row blocks, about two per worker, as a row-wise op.
    fn split(
        &self,
        inputs: &[&Value],
        _: &Fact,
        _: &Ctx<'_>,
        threads: usize,
    ) -> Result<Option<Split>, OpError> {
        let widest = self.stages.iter().map(|s| s.cols).max().unwrap_or(0);
        Ok(row_split(self.rows(inputs)?, widest, threads))
    }
    fn forward_part(
        &self,
        inputs: &[&Value],
        ctx: &Ctx<'_>,
        split: &Split,
        part: usize,
        out: MatMut<'_>,
    ) -> Result<(), OpError> {
        self.run(inputs, ctx, split.ranges[part].clone(), out)
    }
}

/// Row-local when every stage is (each one is row-wise by its capability; the stages that
/// are not row-local in evaluation are not fused).
impl RowLocal for Fused {}
