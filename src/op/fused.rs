//! `fused`: a chain of row-wise ops run as one pass over the rows, what the fusion pass
//! (`planner::fuse`) makes of ops with the [`RowBlocks`](super::RowBlocks) capability. Each block of rows
//! goes through every stage in order, the stages' intermediate values living in
//! block-sized buffers (about 128 KiB each: in the L2 cache) instead of n × f matrices
//! that are written and read back. Every stage computes its rows exactly as its own op
//! does, so the fused chain gives the unfused chain's bits; the output is split into row
//! blocks for the executor's workers like any row-wise op.

use std::sync::Arc;

use rayon::prelude::*;

use crate::ir::{recycle, Bindings, Fact, Kind, NodeId, Tensor, Value};

use super::util::{dense, row_split};
use super::{
    AnyPrepared, Arity, Axis, Cost, Ctx, MatMut, MatRef, Op, OpError, Partitioned, PartitionedDyn,
    RowLocal, Split,
};

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

impl Stage {
    /// The fused node's inputs this stage reads whole (a weight, a bias row), by index.
    fn whole_inputs(&self) -> impl Iterator<Item = usize> + '_ {
        self.inputs
            .iter()
            .zip(&self.per_node)
            .filter_map(|(src, &pn)| match *src {
                Src::Input(i) if !pn => Some(i),
                _ => None,
            })
    }
}

/// Multiply-adds per row block that [`Fused::parts`] aims at: about a millisecond of a
/// core's GEMM, so the last block of a chain leaves little time with a worker idle.
const PART_WORK: usize = 1 << 26;

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

/// Rows per block are a multiple of this: of 6 and 4, the row counts of the GEMM tiles
/// (AVX-512 and AVX2: 6; portable: 4), so that a `gemm` stage's blocks fill whole tiles
/// (32 rows of a 1024-wide chain computed 36).
const BLOCK_ROWS_MULTIPLE: usize = 12;

/// Rows per block of a chain with a stage whose whole input (a weight: a product's B) is
/// larger than half the L2 cache. Each block streams that input through the cache once
/// more, so a block of a few dozen rows paid for it in bandwidth: a SAGE layer's ∇H chain
/// (`gemm → gemm → add_n → relu_backward`, two 512×1024 weights, 4 MiB) ran its products at
/// 97 GF/s in blocks of 24 rows against 145 alone, and at 130–135 in blocks of 144–384
/// (executor timeline, 1 thread, an AMX Xeon). 288 rows give each streamed float 576 flops
/// and are whole tiles of every GEMM path (6, 4, and AMX's 32); their stage buffers (about
/// 1 MiB at 1024 columns) live in L3, which the unfused chain's n-row values did not.
const STREAMED_BLOCK_ROWS: usize = 288;

/// The fused node's inputs, each a dense matrix.
fn dense_inputs<'a>(inputs: &[&'a Value]) -> Result<Vec<&'a Tensor>, OpError> {
    (0..inputs.len())
        .map(|i| dense(inputs, i, "fused"))
        .collect()
}

impl Fused {
    /// Rows `rows` of the output into `out` (those rows, contiguous), block by block. The
    /// stage buffers come from the free-list ([`recycle::scratch`], stale values: a stage
    /// writes every element of its block, [`RowBlocks::rows_at`](super::RowBlocks::rows_at)'s
    /// contract, before the next reads it) and go back to it: zeroing fresh 1.2 MB buffers
    /// on every call was 2 % of a GraphSAGE step.
    fn run(
        &self,
        inputs: &[&Value],
        ctx: &Ctx<'_>,
        prepared: &[Option<AnyPrepared>],
        rows: std::ops::Range<usize>,
        mut out: MatMut<'_>,
    ) -> Result<(), OpError> {
        let xs = dense_inputs(inputs)?;
        let step = self.block_rows(&xs, saintflow_ops::cache::l2_bytes());
        let last = self.stages.len() - 1;
        let h_max = step.min(rows.len());
        let mut bufs: Vec<Vec<f32>> = self.stages[..last]
            .iter()
            .map(|s| recycle::scratch(h_max * s.cols))
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
                match prepared.get(k) {
                    Some(Some(p)) => op.rows_at_prepared_any(r, &views, y, &sctx, p)?,
                    _ => op.rows_at_any(r, &views, y, &sctx)?,
                }
            }
            r += h;
        }
        bufs.into_iter().for_each(recycle::give);
        Ok(())
    }

    /// Rows per block: a block of the widest stage is about [`BLOCK_ELEMENTS`], in whole
    /// [`BLOCK_ROWS_MULTIPLE`]s; at least [`STREAMED_BLOCK_ROWS`] when a stage reads a
    /// whole input larger than half of `l2` bytes. `xs`: the fused node's inputs.
    fn block_rows(&self, xs: &[&Tensor], l2: usize) -> usize {
        let widest = self.stages.iter().map(|s| s.cols).max().unwrap_or(1).max(1);
        let rows = BLOCK_ELEMENTS / widest;
        let rows = (rows / BLOCK_ROWS_MULTIPLE).max(1) * BLOCK_ROWS_MULTIPLE;
        let streamed = self.stages.iter().flat_map(Stage::whole_inputs).any(|i| {
            xs.get(i)
                .is_some_and(|x| x.data.len() * size_of::<f32>() > l2 / 2)
        });
        if streamed {
            rows.max(STREAMED_BLOCK_ROWS)
        } else {
            rows
        }
    }

    /// Each stage's [`RowBlocks::prepare`] on the fused node's whole inputs, once for all
    /// the blocks of an evaluation.
    fn prepare(&self, inputs: &[&Value]) -> Result<Vec<Option<AnyPrepared>>, OpError> {
        self.stages
            .iter()
            .map(|st| {
                let op = st.op.as_row_blocks().ok_or_else(|| {
                    OpError::args(format!("fused: {} computes no row blocks", st.op.name()))
                })?;
                let whole = st
                    .inputs
                    .iter()
                    .map(|src| match *src {
                        Src::Input(i) => {
                            let x = dense(inputs, i, "fused")?;
                            Ok(Some(MatRef::row_major(&x.data, x.rows, x.cols)?))
                        }
                        Src::Stage(_) => Ok(None),
                    })
                    .collect::<Result<Vec<_>, OpError>>()?;
                op.prepare_any(&whole)
            })
            .collect()
    }

    /// How many row blocks the executor runs the chain in on `threads` workers: two per
    /// worker, or as many as make blocks of about [`PART_WORK`] multiply-adds (each stage's
    /// columns times the rows of its whole inputs: a product's k), up to sixteen per worker.
    /// Four blocks of a SAGE layer's ∇H chain (`gemm → gemm → add_n → relu_backward`, 118
    /// CPU-ms a step on an AMX Xeon) left one worker alone with the last for 30 ms of a
    /// 200 ms step at 2 threads (the executor's timeline).
    fn parts(&self, inputs: &[&Value], rows: usize, threads: usize) -> Result<usize, OpError> {
        let mut per_row = 0usize;
        for st in &self.stages {
            let mut k = 0usize;
            for i in st.whole_inputs() {
                k += dense(inputs, i, "fused")?.rows;
            }
            per_row += st.cols * k.max(1);
        }
        let by_work = (rows * per_row).div_ceil(PART_WORK);
        Ok(by_work.clamp(2 * threads, 16 * threads))
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
        let step = self.block_rows(&dense_inputs(inputs)?, saintflow_ops::cache::l2_bytes());
        let prepared = self.prepare(inputs)?;
        y.data
            .par_chunks_mut(step * cols)
            .enumerate()
            .try_for_each(|(k, out)| {
                let (r0, h) = (k * step, out.len() / cols);
                let out = MatMut::row_major(out, h, cols)?;
                self.run(inputs, ctx, &prepared, r0..r0 + h, out)
            })?;
        Ok(Value::dense(y))
    }
    /// A chain with a product by a weight over a long k (a transformation-stage op whose
    /// first operand has at least [`PREPACK_K_MIN`](super::builtin::PREPACK_K_MIN)
    /// columns: a layer's products) reports there: its blocks interleave the product with
    /// the row-wise ops after it, whose time cannot be told apart and is what fusion hides
    /// in cache. Others, the classifier's ∇H (k = classes) among them: other.
    fn stage(&self) -> super::Stage {
        let long_product = |s: &Stage| {
            s.op.stage() == super::Stage::Transformation
                && s.facts
                    .first()
                    .and_then(Fact::matrix)
                    .is_some_and(|(_, k)| {
                        k.as_known()
                            .is_some_and(|k| k >= super::builtin::PREPACK_K_MIN)
                    })
        };
        if self.stages.iter().any(long_product) {
            super::Stage::Transformation
        } else {
            super::Stage::Other
        }
    }
    /// Pure unless a stage is not (a dropout draws its own mask).
    fn pure(&self) -> bool {
        self.stages.iter().all(|s| s.op.pure())
    }
    fn as_partitioned(&self) -> Option<&dyn PartitionedDyn> {
        Some(self)
    }
    fn as_row_local(&self) -> Option<&dyn RowLocal> {
        Some(self)
    }
}

impl Partitioned for Fused {
    /// Each stage's [`RowBlocks::prepare`](super::RowBlocks::prepare), once for all parts.
    type Prepared = Vec<Option<AnyPrepared>>;

    /// Row blocks: two per worker as a row-wise op, more where the chain's products make
    /// a block long (`Fused::parts`).
    fn split(
        &self,
        inputs: &[&Value],
        _: &Fact,
        _: &Ctx<'_>,
        threads: usize,
    ) -> Result<Option<Split<Vec<Option<AnyPrepared>>>>, OpError> {
        let rows = self.rows(inputs)?;
        let widest = self.stages.iter().map(|s| s.cols).max().unwrap_or(0);
        if row_split(rows, widest, threads).is_none() {
            return Ok(None);
        }
        let parts = self.parts(inputs, rows, threads)?;
        let split = Split::even(Axis::Rows, rows, parts).writing_all();
        Ok(Some(split.with_prepared(self.prepare(inputs)?)))
    }
    fn forward_part(
        &self,
        inputs: &[&Value],
        ctx: &Ctx<'_>,
        split: &Split<Vec<Option<AnyPrepared>>>,
        part: usize,
        out: MatMut<'_>,
    ) -> Result<(), OpError> {
        self.run(
            inputs,
            ctx,
            &split.prepared,
            split.ranges[part].clone(),
            out,
        )
    }
}

/// Row-local when every stage is (each one is row-wise by its capability; the stages that
/// are not row-local in evaluation are not fused).
impl RowLocal for Fused {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Dim;
    use crate::op::builtin::Gemm;
    use crate::op::Attrs;
    use crate::op::Registry;
    use saintflow_ops::gemm::Precision;

    /// A chain `gemm → relu` of `rows` × `k` by `k` × `n`, with its inputs.
    fn chain(rows: usize, k: usize, n: usize) -> (Fused, Vec<Value>) {
        let gemm: Arc<dyn Op> = Arc::new(Gemm {
            ta: false,
            tb: false,
            precision: Precision::F32,
            views: [None, None],
        });
        let relu = Registry::with_builtins()
            .make("relu", &Attrs::new())
            .unwrap();
        let out = Fact::dense(Dim::NODES, Dim::known(n));
        let facts = vec![
            Fact::dense(Dim::NODES, Dim::known(k)),
            Fact::dense(Dim::known(k), Dim::known(n)),
        ];
        let stage = |op: Arc<dyn Op>, node, inputs, per_node, facts| Stage {
            op,
            node: NodeId::new(node),
            inputs,
            per_node,
            cols: n,
            facts,
            fact: out.clone(),
        };
        let fused = Fused {
            stages: vec![
                stage(
                    gemm,
                    1,
                    vec![Src::Input(0), Src::Input(1)],
                    vec![true, false],
                    facts,
                ),
                stage(relu, 2, vec![Src::Stage(0)], vec![true], vec![out.clone()]),
            ],
            fact: out.clone(),
        };
        let signed = |r: usize, c: usize, seed: usize| {
            let data = (0..r * c)
                .map(|i| (((i * 7919 + seed) % 1013) as f32 - 506.0) / 97.0)
                .collect();
            Value::dense(Tensor::from_vec(r, c, data).unwrap())
        };
        (fused, vec![signed(rows, k, 1), signed(k, n, 2)])
    }

    /// Stage buffers come from the free-list with another value's numbers in them, and no
    /// chain reads one before writing it: with the free-list holding NaN buffers of the
    /// stage's length, a chain's rows equal its ops run in turn, bit for bit, for a weight
    /// streamed or not (blocks of 288 rows and of 24, a short last block).
    #[test]
    fn stale_stage_buffers_change_no_bit() {
        use crate::ir::{Bindings, NodeId, Params};
        let params = Params::default();
        for (rows, k, n) in [(700, 512, 1024), (61, 64, 1024), (5, 3, 7)] {
            let (fused, inputs) = chain(rows, k, n);
            let refs: Vec<&Value> = inputs.iter().collect();
            let xs = dense_inputs(&refs).unwrap();
            let step = fused.block_rows(&xs, saintflow_ops::cache::l2_bytes());
            for _ in 0..4 {
                recycle::give(vec![f32::NAN; step.min(rows) * n]);
            }
            let cx = Ctx {
                source: None,
                params: &params,
                step: 0,
                seed: 1,
                training: false,
                node: NodeId::new(0),
                bindings: Bindings {
                    nodes: rows,
                    entries: 0,
                    pairs: 0,
                },
            };
            let y = fused.stages[0].op.forward(&refs, &cx).unwrap();
            let want = fused.stages[1].op.forward(&[&y], &cx).unwrap();
            let mut got = vec![f32::NAN; rows * n];
            let prepared = fused.prepare(&refs).unwrap();
            let out = MatMut::row_major(&mut got, rows, n).unwrap();
            fused.run(&refs, &cx, &prepared, 0..rows, out).unwrap();
            let want = &want.as_dense().unwrap().data;
            assert!(
                got.iter()
                    .zip(want)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{rows} × {k} × {n}"
            );
        }
    }

    /// A chain whose product streams a weight larger than half the L2 cache runs in blocks
    /// of `STREAMED_BLOCK_ROWS`; a weight that stays in L2 keeps blocks of about
    /// `BLOCK_ELEMENTS` (24 rows at 1024 columns), whatever the cache says.
    #[test]
    fn a_streamed_weight_gets_long_blocks() {
        let (fused, inputs) = chain(5, 512, 1024);
        let refs: Vec<&Value> = inputs.iter().collect();
        let refs = dense_inputs(&refs).unwrap();
        // The weight is 2 MiB.
        assert_eq!(fused.block_rows(&refs, 2 << 20), STREAMED_BLOCK_ROWS);
        assert_eq!(fused.block_rows(&refs, (4 << 20) - 8), STREAMED_BLOCK_ROWS);
        assert_eq!(fused.block_rows(&refs, 4 << 20), 24);
        assert_eq!(fused.block_rows(&refs, 64 << 20), 24);
        let (narrow, inputs) = chain(5, 512, 64);
        let refs: Vec<&Value> = inputs.iter().collect();
        let refs = dense_inputs(&refs).unwrap();
        // 128 KiB of weight; blocks of 32 K elements are 512 rows of 64 columns, already
        // longer than a streamed block: never shortened.
        assert_eq!(narrow.block_rows(&refs, 1 << 20), 504);
        assert_eq!(narrow.block_rows(&refs, 1 << 17), 504);
        assert_eq!(
            STREAMED_BLOCK_ROWS % 96,
            0,
            "whole tiles of 6, 4 and 32 rows"
        );
    }
}
