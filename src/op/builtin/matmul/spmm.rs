//! `spmm`: a sparse·dense product, feature-partitioned, multi-head; a neighbour op for
//! blocked inference (a block's rows of S times X read in place) and a fold over parts of
//! X (out-of-core).

use super::*;

/// out = op(S) · X: sparse times dense, feature-partitioned (JPDC Algorithm 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spmm {
    /// S used transposed (its values permuted by Algorithm 6).
    pub transpose: bool,
    /// Feature blocks Q_f chosen by the planner (None: the kernel's own rule).
    pub partitions: Option<usize>,
    /// A column block of X read in place instead of the whole input (set by the fusion
    /// pass where X is a `slice`, as the backward of `concat` makes: planned graphs only,
    /// never differentiated).
    pub view: Option<ColumnView>,
}

impl Spmm {
    /// op(S)·X with the kernel's feature blocks, reading all of X.
    pub fn new(transpose: bool) -> Spmm {
        Spmm {
            transpose,
            partitions: None,
            view: None,
        }
    }

    /// The fact X has as the product reads it (its column view's block).
    fn x_fact(&self, f: &Fact) -> Result<Fact, OpError> {
        ColumnView::fact(self.view, f, "spmm", 1)
    }

    /// X as the product reads it: `x`, or its column view.
    fn x<'v>(&self, x: &'v Tensor) -> Result<MatRef<'v>, OpError> {
        ColumnView::read(self.view, x)
    }

    /// [`Spmm::x`] of a neighbour block's rows of X.
    fn x_rows<'v>(&self, x: &NodeRows<'v>) -> Result<MatRef<'v>, OpError> {
        ColumnView::apply(
            self.view,
            MatRef::row_major(x.data(), x.n_rows(), x.cols())?,
        )
    }
}

impl Op for Spmm {
    fn stage(&self) -> Stage {
        Stage::Aggregation
    }

    fn name(&self) -> &str {
        "spmm"
    }
    fn as_chain(&self) -> Option<&dyn ChainLink> {
        Some(self)
    }
    fn attrs(&self) -> String {
        let mut a = Vec::new();
        if self.transpose {
            a.push("T".to_string());
        }
        if let Some(q) = self.partitions {
            a.push(format!("Q_f={q}"));
        }
        a.join(", ") + &ColumnView::attr(self.view, "X")
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Sparse, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let s = Factor::of(inputs[0], self.transpose).expect("sparse");
        let xf = self.x_fact(inputs[1])?;
        let x = Factor::of(&xf, false).expect("dense");
        if s.cols != x.rows {
            return Err(shape_error(0, &s, &x));
        }
        if s.heads > 1 && x.cols.as_known().is_none_or(|c| c % s.heads != 0) {
            return Err(OpError::args(format!(
                "spmm: {}-head adjacency times a matrix of width {}, expected a multiple of {}",
                s.heads, x.cols, s.heads
            )));
        }
        Ok(Fact::dense(s.rows, x.cols))
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        let s = Factor::of(inputs[0], self.transpose).expect("sparse");
        let xf = self.x_fact(inputs[1]).unwrap_or_else(|_| inputs[1].clone());
        let x = Factor::of(&xf, false).expect("dense");
        let q = self.partitions.unwrap_or(1) as f64;
        let nnz = s.nnz.map_or(0.0, |d| d.resolve(b) as f64);
        Cost {
            flops: product_flops(&s, &x, b).unwrap_or(0.0),
            // Indices and values are re-read once per feature block; a column view reads
            // its block only.
            bytes_read: q * nnz * (4.0 + 4.0 * s.heads as f64) + xf.bytes(b) as f64,
            bytes_written: output.bytes(b) as f64,
        }
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let s = inputs[0]
            .as_sparse()
            .ok_or_else(|| OpError::args("spmm: argument 1 is not sparse"))?;
        let x = self.x(super::super::dense(inputs, 1, "spmm")?)?;
        let width = self
            .partitions
            .map(|q| x.n_cols().div_ceil(q.max(1)).max(1));
        Ok(Value::dense(sparse_product(s, self.transpose, x, width)?))
    }
    /// out = op(S)·X: ∂X = op(S)ᵀ·∇out; ∂S_uv = ⟨∇out_u, X_v⟩ (⟨X_u, ∇out_v⟩ when
    /// transposed) on S's pattern.
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        if self.view.is_some() {
            return Err(OpError::args(
                "spmm: a product reading a column view is planned, not differentiated",
            ));
        }
        let (s, x) = (g.input(0), g.input(1));
        let ds = if g.needs_grad(0) {
            let (a, b) = if self.transpose { (x, grad) } else { (grad, x) };
            Some(g.add(Sddmm, &[s, a, b])?)
        } else {
            None
        };
        let dx = if g.needs_grad(1) {
            Some(g.add(
                Spmm {
                    transpose: !self.transpose,
                    ..*self
                },
                &[s, grad],
            )?)
        } else {
            None
        };
        Ok(vec![ds, dx])
    }
    fn as_feature_partitioned(&self) -> Option<&dyn FeaturePartitioned> {
        Some(self)
    }
    /// S·X aggregates X over S's rows; a transposed S does not (its rows are S's
    /// columns).
    fn as_neighbour(&self) -> Option<&dyn NeighbourOp> {
        (!self.transpose).then_some(self)
    }
    fn as_partitioned(&self) -> Option<&dyn PartitionedDyn> {
        Some(self)
    }
    fn as_column_views(&self) -> Option<&dyn ColumnViews> {
        Some(self)
    }
}

impl ChainLink for Spmm {
    fn role(&self) -> ChainRole {
        ChainRole::Product(self.transpose, false)
    }
}

impl Spmm {
    /// This product reading columns `cols` of X (slot 1) in place (see [`ColumnViews`]).
    pub fn with_column_view(
        &self,
        slot: usize,
        cols: std::ops::Range<usize>,
    ) -> Option<Arc<dyn Op>> {
        if slot != 1 || self.view.is_some() {
            return None;
        }
        Some(Arc::new(Spmm {
            view: Some(ColumnView {
                start: cols.start,
                len: cols.len(),
            }),
            ..*self
        }))
    }
}

impl ColumnViews for Spmm {
    fn with_column_view(&self, slot: usize, cols: std::ops::Range<usize>) -> Option<Arc<dyn Op>> {
        Spmm::with_column_view(self, slot, cols)
    }
}

impl FeaturePartitioned for Spmm {
    fn with_partitions(&self, q: usize) -> Arc<dyn Op> {
        Arc::new(Spmm {
            partitions: Some(q),
            ..*self
        })
    }
}

impl NeighbourOp for Spmm {
    fn neighbour(&self, _: &[&Fact]) -> Neighbour {
        Neighbour { adjacency: 0, x: 1 }
    }
    /// The block's rows of S (global column ids) times the whole of X read in place, head
    /// by head on column views: every output element the same CSR-order sum as `forward`.
    fn any_rows(&self) -> bool {
        true
    }

    fn forward_block(&self, block: &RowBlock<'_>, _: &Ctx<'_>) -> Result<Value, OpError> {
        let s = block.adjacency;
        let st = &s.structure;
        let x = self.x_rows(&block.x)?;
        let (rows, f) = (block.rows(), x.n_cols());
        let heads = s.heads();
        let mut out = Tensor::zeros(rows, f);
        if rows == 0 || f == 0 {
            return Ok(Value::dense(out));
        }
        let threads = rayon::current_num_threads();
        if heads == 1 {
            let a = CsrRef {
                offsets: &st.offsets,
                indices: &st.indices,
                values: Some(&s.values.data),
                n_cols: block.n_nodes,
            };
            let o = MatMut::row_major(&mut out.data, rows, f)?;
            spmm_view_blocked(a, x, o, block_width(0, f, threads))?;
            return Ok(Value::dense(out));
        }
        if f % heads != 0 {
            return Err(OpError::args(format!(
                "spmm: {heads}-head matrix times a matrix of width {f}"
            )));
        }
        let fh = f / heads;
        let mut vh = vec![0.0f32; st.nnz()];
        for h in 0..heads {
            for (k, v) in vh.iter_mut().enumerate() {
                *v = s.values.data[k * heads + h];
            }
            let a = CsrRef {
                offsets: &st.offsets,
                indices: &st.indices,
                values: Some(&vh),
                n_cols: block.n_nodes,
            };
            let cols = h * fh..(h + 1) * fh;
            let o = MatMut::row_major(&mut out.data, rows, f)?.cols_mut(cols.clone())?;
            spmm_view_blocked(a, x.cols(cols)?, o, block_width(0, fh, threads))?;
        }
        Ok(Value::dense(out))
    }

    fn fold(&self) -> Option<&dyn NeighbourFold> {
        Some(self)
    }
}

/// A single-head S·X is a sum over each row's entries in CSR order, one fused
/// multiply-add per entry: the kernel's accumulate mode continues it part after part.
impl NeighbourFold for Spmm {
    fn start(&self, rows: usize, cols: usize) -> Tensor {
        Tensor::zeros(rows, cols)
    }

    fn fold_part(&self, part: &RowBlock<'_>, acc: &mut Tensor, _: &Ctx<'_>) -> Result<(), OpError> {
        let s = part.adjacency;
        if s.heads() != 1 {
            return Err(OpError::args(format!(
                "spmm: streaming X in parts takes one value per entry, not {}",
                s.heads()
            )));
        }
        let a = CsrRef {
            offsets: &s.structure.offsets,
            indices: &s.structure.indices,
            values: Some(&s.values.data),
            n_cols: part.x.n_rows(),
        };
        let x = self.x_rows(&part.x)?;
        let (rows, cols) = (acc.rows, acc.cols);
        spmm_accumulate(a, x, MatMut::row_major(&mut acc.data, rows, cols)?)?;
        Ok(())
    }

    fn finish(&self, acc: Tensor, _: &[u32]) -> Result<Value, OpError> {
        Ok(Value::dense(acc))
    }
}

impl Partitioned for Spmm {
    type Prepared = SpmmPrepared;

    /// Column blocks of the output (JPDC §6.2): the Q_f feature blocks of width w (the
    /// planner's Q_f, else the kernel's rule) grouped into about two runs of contiguous
    /// blocks per worker; each run is one call of the kernel, which computes its blocks one
    /// after the other. Run boundaries are block boundaries, so every block is the one the
    /// interpreter computes: bit-identical. Dispatch in order, owner from the end, thieves
    /// from the start, keeps the runs computed at once far apart. Single-head only; the
    /// transposed values (Algorithm 6) are permuted once, in `prepared`.
    fn split(
        &self,
        inputs: &[&Value],
        _: &Fact,
        _: &Ctx<'_>,
        threads: usize,
    ) -> Result<Option<Split<SpmmPrepared>>, OpError> {
        let (Some(s), Some(x)) = (inputs[0].as_sparse(), inputs[1].as_dense()) else {
            return Ok(None);
        };
        let n = s.structure.n_rows();
        let f = self.x(x)?.n_cols();
        if threads < 2 || s.heads() != 1 || n == 0 || f == 0 || x.rows != n {
            return Ok(None);
        }
        let w = match self.partitions {
            Some(q) => f.div_ceil(q.max(1)).max(1),
            None => block_width(n, f, threads),
        };
        if f.div_ceil(w) < 2 {
            return Ok(None);
        }
        let prepared = if self.transpose {
            s.transposed_values()
        } else {
            Tensor::zeros(0, 0)
        };
        Ok(spmm_column_split(
            f,
            w,
            threads,
            SpmmPrepared {
                values: prepared,
                width: w,
            },
        ))
    }
    fn forward_part(
        &self,
        inputs: &[&Value],
        _: &Ctx<'_>,
        split: &Split<SpmmPrepared>,
        part: usize,
        out: MatMut<'_>,
    ) -> Result<(), OpError> {
        let s = inputs[0]
            .as_sparse()
            .ok_or_else(|| OpError::args("spmm: argument 1 is not sparse"))?;
        let x = super::super::dense(inputs, 1, "spmm")?;
        let prep = &split.prepared;
        let values = if self.transpose {
            &prep.values.data
        } else {
            &s.values.data
        };
        let st = &s.structure;
        let (offsets, indices) = st.pattern(self.transpose);
        let a = CsrRef {
            offsets,
            indices,
            values: Some(values),
            n_cols: st.n_rows(),
        };
        let cols = split.ranges[part].clone();
        let xv = self.x(x)?.cols(cols)?;
        spmm_view_blocked(a, xv, out, prep.width)?;
        Ok(())
    }
}

/// The split of an SpMM's output of `cols` columns into feature blocks of `width`: the
/// blocks grouped into about two runs of contiguous blocks per worker (each run one call of
/// the kernel, run boundaries block boundaries, so every block is the one a whole call
/// computes); `None` under two blocks. The kernel writes every row of its block, empty
/// rows as zeros: the parts write all of the output.
pub(in crate::op::builtin) fn spmm_column_split<P>(
    cols: usize,
    width: usize,
    threads: usize,
    prepared: P,
) -> Option<Split<P>> {
    let q = cols.div_ceil(width.max(1));
    if q < 2 {
        return None;
    }
    let runs = (2 * threads).min(q);
    let ranges = (0..runs)
        .map(|r| (r * q / runs * width).min(cols)..((r + 1) * q / runs * width).min(cols))
        .collect();
    Some(Split {
        axis: Axis::Cols,
        ranges,
        prepared,
        writes_all: true,
    })
}

/// What [`Spmm::split`] computes once for its parts.
pub struct SpmmPrepared {
    /// The transposed values (Algorithm 6), when the product is transposed.
    values: Tensor,
    /// Feature block width w.
    width: usize,
}
