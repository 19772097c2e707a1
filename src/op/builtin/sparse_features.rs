//! The products by the input features with their zeros left out: X·W (a first layer) and
//! Xᵀ·∇Y (its ∇W), where X is the step's feature rows. Bag-of-words features are mostly
//! zeros (Cora's 1,433 columns: 1.3 % nonzero), and as dense GEMMs these two products were
//! most of a full-batch step's time. The planner puts them in place of `features` and the
//! two `gemm`s that read it ([`crate::planner::SparseFeatures`]); nothing in a plan names
//! them.
//!
//! Both run on the SpMM kernel (`saintflow_ops::spmm`): X·W as the CSR of the subgraph's
//! feature rows (n × F) times W (F × d), Xᵀ·∇Y as its transpose (F × n, by a counting sort
//! of the entries by column) times ∇Y (n × d). The rows come from
//! [`GraphSource::sparse_features`](crate::ir::GraphSource::sparse_features): a small store
//! keeps its whole feature matrix compressed, so a step copies only its rows' nonzeros.
//! The result equals the dense product up to the order of the sums' terms (the zeros are
//! skipped, the rest summed in column order, one rounding per term).

use saintflow_ops::spmm::{block_width, spmm_view_blocked, CsrRef};
use saintflow_ops::view::{MatMut, MatRef};

use super::dropout::DropoutMask;
use crate::ir::source::{FeatureCsr, FeatureRows};
use crate::ir::{Bindings, Dim, Fact, Kind, Tensor, Value};
use crate::op::{
    Arity, Cost, Ctx, Op, OpError, Partitioned, PartitionedDyn, RowLocal, Split, Stage,
};
use crate::sample::Subgraph;

/// X·W (`transpose` false: inputs the subgraph and W, F × d; output n × d) or Xᵀ·∇Y
/// (`transpose` true: inputs the subgraph and ∇Y, n × d; output F × d), X the subgraph's
/// feature rows read sparse.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FeatureProduct {
    /// F, the feature width.
    pub width: usize,
    /// Xᵀ·∇Y rather than X·W.
    pub transpose: bool,
    /// The fraction of nonzero features the planner measured (for the cost only).
    pub density: f64,
    /// X is the features after inverted dropout: (p, the dropout node's id, whose mask
    /// this applies to the nonzeros: the same elements kept, scaled alike).
    pub dropout: Option<(f64, u32)>,
    /// X is one node type's features over the subgraph's rows (a typed plan's `[input]`,
    /// `x[t]`): rows of other types are zero, the type's rows read with
    /// [`GraphSource::sparse_type_features`](crate::ir::GraphSource::sparse_type_features).
    pub ty: Option<TypeRange>,
}

/// A node type of a typed store: its index and its global ids `start..end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeRange {
    /// The type's index.
    pub ty: u32,
    /// Its first global id.
    pub start: u32,
    /// One past its last.
    pub end: u32,
}

/// A CSR matrix of the step's feature rows (n × F) or of their transpose (F × n).
pub struct FeatureMatrix {
    offsets: Vec<u32>,
    indices: Vec<u32>,
    values: Vec<f32>,
    n_cols: usize,
}

impl FeatureMatrix {
    fn csr(&self) -> CsrRef<'_> {
        CsrRef {
            offsets: &self.offsets,
            indices: &self.indices,
            values: Some(&self.values),
            n_cols: self.n_cols,
        }
    }
}

impl FeatureProduct {
    fn label(&self) -> &'static str {
        if self.transpose {
            "features_spmm[T]"
        } else {
            "features_spmm"
        }
    }

    /// The subgraph's feature rows as this product reads them.
    fn matrix(&self, sub: &Subgraph, ctx: &Ctx<'_>) -> Result<FeatureMatrix, OpError> {
        let source = ctx.source(self.label())?;
        if let Some(t) = self.ty {
            // The type's rows (contiguous in the ascending subgraph), the others empty.
            let (lo, hi) = super::typed::type_span(&sub.nodes, t.start, t.end);
            let own = source.sparse_type_features(t.ty as usize, &sub.nodes[lo..hi], self.width)?;
            let n = sub.nodes.len();
            let mut all = FeatureCsr {
                offsets: Vec::with_capacity(n + 1),
                ..FeatureCsr::default()
            };
            all.offsets.extend(std::iter::repeat_n(0, lo + 1));
            all.cols = own.cols;
            all.vals = own.vals;
            all.offsets.extend_from_slice(&own.offsets[1..]);
            let last = *all.offsets.last().expect("one offset at least");
            all.offsets.extend(std::iter::repeat_n(last, n - hi));
            return self.compressed(sub, FeatureRows::Local(all), ctx);
        }
        if source.n_features() != self.width {
            return Err(OpError::Source(format!(
                "{}: the graph has {} features, the plan was lowered for {}",
                self.label(),
                source.n_features(),
                self.width
            )));
        }
        let rows = source.sparse_features(&sub.nodes)?;
        self.compressed(sub, rows, ctx)
    }

    /// [`matrix`](Self::matrix) from the subgraph's feature rows, nonzeros only.
    fn compressed(
        &self,
        sub: &Subgraph,
        rows: FeatureRows,
        ctx: &Ctx<'_>,
    ) -> Result<FeatureMatrix, OpError> {
        let n = sub.nodes.len();
        if let Some(&bad) = (0..n)
            .flat_map(|i| rows.row(i, sub.nodes[i]).0)
            .find(|&&j| j as usize >= self.width)
        {
            return Err(OpError::Source(format!(
                "{}: a feature column {bad} out of range, expected < {}",
                self.label(),
                self.width
            )));
        }
        // After dropout: the kept nonzeros, scaled (element (i, j) of the n × F output).
        let mask = self
            .dropout
            .and_then(|(p, key)| DropoutMask::of(ctx, key, p));
        let rows = match mask {
            None => rows,
            Some(m) => {
                let mut kept = FeatureCsr {
                    offsets: Vec::with_capacity(n + 1),
                    ..FeatureCsr::default()
                };
                kept.offsets.push(0);
                for i in 0..n {
                    let (c, v) = rows.row(i, sub.nodes[i]);
                    for (&j, &x) in c.iter().zip(v) {
                        if m.keeps((i * self.width + j as usize) as u64) {
                            kept.cols.push(j);
                            kept.vals.push(x * m.scale);
                        }
                    }
                    kept.offsets.push(kept.cols.len() as u64);
                }
                FeatureRows::Local(kept)
            }
        };
        let row = |i: usize| rows.row(i, sub.nodes[i]);
        let nnz: usize = (0..n).map(|i| row(i).0.len()).sum();
        if u32::try_from(nnz).is_err() {
            return Err(OpError::args(format!(
                "{}: the subgraph's {n} feature rows hold {nnz} nonzeros, more than a CSR of u32 offsets indexes (2^32 - 1)",
                self.label()
            )));
        }
        let (mut indices, mut values) = (Vec::with_capacity(nnz), Vec::with_capacity(nnz));
        if !self.transpose {
            let mut offsets = Vec::with_capacity(n + 1);
            offsets.push(0u32);
            for i in 0..n {
                let (c, v) = row(i);
                indices.extend_from_slice(c);
                values.extend_from_slice(v);
                offsets.push(indices.len() as u32);
            }
            return Ok(FeatureMatrix {
                offsets,
                indices,
                values,
                n_cols: self.width,
            });
        }
        // Xᵀ: entries counted by column, then placed row by row, so each column's rows
        // come out ascending.
        let mut offsets = vec![0u32; self.width + 1];
        for i in 0..n {
            for &j in row(i).0 {
                offsets[j as usize + 1] += 1;
            }
        }
        for j in 0..self.width {
            offsets[j + 1] += offsets[j];
        }
        let mut next = offsets.clone();
        indices.resize(nnz, 0);
        values.resize(nnz, 0.0);
        for i in 0..n {
            let (c, v) = row(i);
            for (&j, &x) in c.iter().zip(v) {
                let at = &mut next[j as usize];
                indices[*at as usize] = i as u32;
                values[*at as usize] = x;
                *at += 1;
            }
        }
        Ok(FeatureMatrix {
            offsets,
            indices,
            values,
            n_cols: n,
        })
    }

    fn operands<'v>(
        &self,
        inputs: &[&'v Value],
    ) -> Result<(&'v std::sync::Arc<Subgraph>, &'v Tensor), OpError> {
        let sub = inputs[0].as_subgraph().ok_or_else(|| {
            OpError::args(format!("{}: argument 1 is not a subgraph", self.label()))
        })?;
        let y = super::dense(inputs, 1, self.label())?;
        Ok((sub, y))
    }

    /// Rows of the output.
    fn out_rows(&self, sub: &Subgraph) -> usize {
        if self.transpose {
            self.width
        } else {
            sub.nodes.len()
        }
    }
}

impl Op for FeatureProduct {
    fn stage(&self) -> Stage {
        Stage::Transformation
    }
    fn name(&self) -> &str {
        "features_spmm"
    }
    fn attrs(&self) -> String {
        let t = if self.transpose { "T, " } else { "" };
        let d = self.dropout.map_or(String::new(), |(p, key)| {
            format!(", dropout p={p} key={key}")
        });
        format!("{t}width={}, density={:.4}{d}", self.width, self.density)
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Subgraph, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let Fact::Dense { rows, cols } = inputs[1] else {
            return Err(OpError::args(format!(
                "{}: argument 2 is not dense",
                self.label()
            )));
        };
        let (want, out_rows) = if self.transpose {
            (Dim::NODES, Dim::known(self.width))
        } else {
            (Dim::known(self.width), Dim::NODES)
        };
        if *rows != want {
            return Err(OpError::args(format!(
                "{}: argument 2 has {rows} rows, expected {want}",
                self.label()
            )));
        }
        Ok(Fact::dense(out_rows, *cols))
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        let d = match inputs[1] {
            Fact::Dense { cols, .. } => cols.resolve(b) as f64,
            _ => 0.0,
        };
        let nnz = self.density * (b.nodes * self.width) as f64;
        Cost {
            flops: 2.0 * nnz * d,
            bytes_read: 8.0 * nnz + inputs[1].bytes(b) as f64,
            bytes_written: output.bytes(b) as f64,
        }
    }
    fn forward(&self, inputs: &[&Value], ctx: &Ctx<'_>) -> Result<Value, OpError> {
        let (sub, y) = self.operands(inputs)?;
        let m = self.matrix(sub, ctx)?;
        let d = y.cols;
        let mut out = Tensor::zeros(self.out_rows(sub), d);
        if d > 0 && out.rows > 0 {
            let w = block_width(m.n_cols.max(out.rows), d, 1);
            spmm_view_blocked(
                m.csr(),
                MatRef::row_major(&y.data, y.rows, d)?,
                MatMut::row_major(&mut out.data, out.rows, d)?,
                w,
            )?;
        }
        Ok(Value::dense(out))
    }
    fn as_partitioned(&self) -> Option<&dyn PartitionedDyn> {
        Some(self)
    }
    fn as_row_local(&self) -> Option<&dyn RowLocal> {
        // Row i of X·W is node i's features times W (the subgraph names the rows' nodes);
        // Xᵀ·∇Y sums over every row.
        (!self.transpose).then_some(self as &dyn RowLocal)
    }
}

/// X·W is row-local: blocked inference runs it on a block's nodes (issue 53 item 7: the
/// evaluation reads the features sparse, as the step does).
impl RowLocal for FeatureProduct {}

impl Partitioned for FeatureProduct {
    /// The CSR of the features and the feature block width.
    type Prepared = (FeatureMatrix, usize);

    /// Column blocks of the output (the kernel's feature blocks, about two runs per
    /// worker), the CSR made once for all of them in `prepared`.
    fn split(
        &self,
        inputs: &[&Value],
        _: &Fact,
        ctx: &Ctx<'_>,
        threads: usize,
    ) -> Result<Option<Split<(FeatureMatrix, usize)>>, OpError> {
        let (sub, y) = self.operands(inputs)?;
        let d = y.cols;
        let rows = self.out_rows(sub);
        if threads < 2 || d == 0 || rows == 0 {
            return Ok(None);
        }
        let m = self.matrix(sub, ctx)?;
        let w = block_width(m.n_cols.max(rows), d, threads);
        Ok(super::matmul::spmm_column_split(d, w, threads, (m, w)))
    }
    fn forward_part(
        &self,
        inputs: &[&Value],
        _: &Ctx<'_>,
        split: &Split<(FeatureMatrix, usize)>,
        part: usize,
        out: MatMut<'_>,
    ) -> Result<(), OpError> {
        let (_, y) = self.operands(inputs)?;
        let (m, w) = &split.prepared;
        let cols = split.ranges[part].clone();
        let yv = MatRef::row_major(&y.data, y.rows, y.cols)?.cols(cols)?;
        spmm_view_blocked(m.csr(), yv, out, *w)?;
        Ok(())
    }
}
