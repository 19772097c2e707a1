//! `gemm`: a dense product on our GEMM — row blocks for fusion (op(B) packed once), row
//! parts sharing one packed op(B), the two halves of a long k as tasks, column views of
//! its stored operands read in place, f32 or bf16.

use super::*;

/// Below this many multiply-adds a GEMM is one task (as `saintflow_ops::gemm` runs such a
/// product on one thread: splitting costs more than it saves).
pub(super) const GEMM_SPLIT_MIN_MACS: usize = 1 << 18;
/// Rows per GEMM part at least: a part packs op(A) in 6-row panels and sweeps all of op(B)
/// per panel, so a thinner part pays op(B)'s sweep for little work.
pub(super) const GEMM_MIN_ROWS: usize = 64;
/// Columns per GEMM part at least, when C has too few rows to split by rows: one panel of
/// the widest tile.
pub(super) const GEMM_MIN_COLS: usize = 64;

/// C = op(A) · op(B), dense, through the GEMM library.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gemm {
    /// A used transposed.
    pub ta: bool,
    /// B used transposed.
    pub tb: bool,
    /// The product's arithmetic: f32, or bf16 operands with f32 accumulation (set by the
    /// planner's precision pass from the plan's `[compute] precision`).
    pub precision: Precision,
    /// Per operand (A, B): a column block of the stored input read in place instead of
    /// the whole input (set by the fusion pass; planned graphs only, never differentiated).
    pub views: [Option<ColumnView>; 2],
}

impl Gemm {
    /// op(A)·op(B) in f32.
    pub fn new(ta: bool, tb: bool) -> Gemm {
        Gemm {
            ta,
            tb,
            precision: Precision::F32,
            views: [None; 2],
        }
    }

    /// The fact operand `i` has as the product reads it (its column view's block).
    fn operand_fact(&self, i: usize, f: &Fact) -> Result<Fact, OpError> {
        ColumnView::fact(self.views[i], f, "gemm", i)
    }

    /// Operand `i` as the product reads it: the stored input, or its column view.
    fn operand<'v>(&self, inputs: &[&'v Value], i: usize) -> Result<MatRef<'v>, OpError> {
        ColumnView::read(self.views[i], super::super::dense(inputs, i, "gemm")?)
    }

    /// A product of the same precision with other transpose flags (the gradients').
    fn with(self, ta: bool, tb: bool) -> Gemm {
        Gemm { ta, tb, ..self }
    }
}

impl Op for Gemm {
    fn stage(&self) -> Stage {
        Stage::Transformation
    }

    fn name(&self) -> &str {
        "gemm"
    }
    fn as_chain(&self) -> Option<&dyn ChainLink> {
        Some(self)
    }
    fn attrs(&self) -> String {
        let view = |i: usize| ColumnView::attr(self.views[i], ["A", "B"][i]);
        format!(
            "{}{}{}{}{}",
            if self.ta { "T" } else { "N" },
            if self.tb { "T" } else { "N" },
            match self.precision {
                Precision::F32 => "",
                Precision::Bf16 => " bf16",
            },
            view(0),
            view(1)
        )
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let (fa, fb) = (
            self.operand_fact(0, inputs[0])?,
            self.operand_fact(1, inputs[1])?,
        );
        let a = Factor::of(&fa, self.ta).expect("dense");
        let b = Factor::of(&fb, self.tb).expect("dense");
        if a.cols != b.rows {
            return Err(shape_error(0, &a, &b));
        }
        Ok(Fact::dense(a.rows, b.cols))
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        let viewed = |i: usize| {
            self.operand_fact(i, inputs[i])
                .unwrap_or_else(|_| inputs[i].clone())
        };
        let (va, vb) = (viewed(0), viewed(1));
        let fa = Factor::of(&va, self.ta).expect("dense");
        let fb = Factor::of(&vb, self.tb).expect("dense");
        Cost {
            flops: product_flops(&fa, &fb, b).unwrap_or(0.0),
            // A column view reads its block only.
            ..Cost::streaming(&[&va, &vb], output, b)
        }
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let (a, b) = (self.operand(inputs, 0)?, self.operand(inputs, 1)?);
        Ok(Value::dense(dense_product(
            a,
            self.ta,
            b,
            self.tb,
            self.precision,
        )?))
    }
    /// C = op(A)·op(B): ∂op(A) = ∇C·op(B)ᵀ, ∂op(B) = op(A)ᵀ·∇C, transposed back when the
    /// operand is used transposed.
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        if self.views != [None, None] {
            return Err(OpError::args(
                "gemm: a product reading column views is planned, not differentiated",
            ));
        }
        let (a, b) = (g.input(0), g.input(1));
        let da = if !g.needs_grad(0) {
            None
        } else if self.ta {
            // ∂A = op(B)·∇Cᵀ.
            Some(g.add(self.with(self.tb, true), &[b, grad])?)
        } else {
            Some(g.add(self.with(false, !self.tb), &[grad, b])?)
        };
        let db = if !g.needs_grad(1) {
            None
        } else if self.tb {
            // ∂B = ∇Cᵀ·op(A).
            Some(g.add(self.with(true, self.ta), &[grad, a])?)
        } else {
            Some(g.add(self.with(!self.ta, false), &[a, grad])?)
        };
        Ok(vec![da, db])
    }
    fn as_row_local(&self) -> Option<&dyn RowLocal> {
        Some(self)
    }
    fn as_row_blocks(&self) -> Option<&dyn RowBlocksDyn> {
        Some(self)
    }
    fn as_partitioned(&self) -> Option<&dyn PartitionedDyn> {
        Some(self)
    }
    fn as_column_views(&self) -> Option<&dyn ColumnViews> {
        Some(self)
    }
    fn as_precision(&self) -> Option<&dyn PrecisionChoice> {
        Some(self)
    }
}

impl ColumnViews for Gemm {
    /// op(A) (slot 0) or op(B) (slot 1) read as a column block in place.
    fn with_column_view(&self, slot: usize, cols: std::ops::Range<usize>) -> Option<Arc<dyn Op>> {
        if slot >= 2 || self.views[slot].is_some() {
            return None;
        }
        let mut g = *self;
        g.views[slot] = Some(ColumnView {
            start: cols.start,
            len: cols.len(),
        });
        Some(Arc::new(g))
    }
}

impl PrecisionChoice for Gemm {
    fn with_precision(&self, precision: Precision) -> Option<Arc<dyn Op>> {
        (precision != self.precision).then(|| Arc::new(Gemm { precision, ..*self }) as Arc<dyn Op>)
    }
}

impl ChainLink for Gemm {
    fn role(&self) -> ChainRole {
        ChainRole::Product(self.ta, self.tb)
    }
}

impl RowLocal for Gemm {
    /// op(A)·B with A not transposed and B of a static shape (a parameter): row i of the
    /// output is row i of A times B.
    fn row_local(&self, inputs: &[&Fact]) -> bool {
        !self.ta && inputs[1].is_static()
    }
}

/// The shortest k at which a `gemm` inside a fused chain packs op(B) once for all its
/// blocks ([`RowBlocks::prepare`]). A shorter one (∇H = ∇Y·W_outᵀ of a classifier of a few
/// classes, k = classes) packs its few rows of op(B) per block, which costs about what
/// reading a shared packing would.
pub const PREPACK_K_MIN: usize = 17;

impl RowBlocks for Gemm {
    type Prepared = PackedB;

    /// Rows of op(A)·op(B), op(A) not transposed: the product of A's rows, through the same
    /// kernel as `forward` (its k-sums do not depend on the rows around them, so the block
    /// has the whole product's bits).
    fn rows_at(
        &self,
        _: usize,
        x: &[MatRef<'_>],
        y: MatMut<'_>,
        _: &Ctx<'_>,
    ) -> Result<(), OpError> {
        let a = self.block_rows_of_a(x)?;
        let b = ColumnView::apply(self.views[1], x[1])?;
        gemm_view_with(self.precision, a, Trans::N, b, trans(self.tb), y, false)?;
        Ok(())
    }

    /// Row-local ([`RowLocal::row_local`]: op(A) not transposed, op(B) a parameter),
    /// whatever k. A long k packs op(B) once ([`RowBlocks::prepare`]), and the blocks then
    /// run the kernel on the shared packing as the row parts of a whole product do, while
    /// the chain's next ops find their rows in cache: the JPDC GraphSAGE step went from
    /// 71.6 to 69.9 ms per 1000 nodes at one thread (docs/bench/kernels-gemm.md, thirteenth
    /// session). The fusion pass itself keeps a product whole where fusing it would keep its
    /// wider op(A) alive longer.
    fn fusible(&self, inputs: &[&Fact]) -> bool {
        self.row_local(inputs)
    }

    /// op(B) packed once for every block ([`PackedB`], for the tile path `forward` would
    /// take), when k is at least [`PREPACK_K_MIN`], op(B) is an input of the fused node, and
    /// C is wide enough to pack for (not the narrow path of one or two columns).
    fn prepare(&self, x: &[Option<MatRef<'_>>]) -> Result<Option<PackedB>, OpError> {
        let (false, Some(Some(b))) = (self.ta, x.get(1)) else {
            return Ok(None);
        };
        let b = ColumnView::apply(self.views[1], *b)?;
        let (k, n) = if self.tb {
            (b.n_cols(), b.n_rows())
        } else {
            (b.n_rows(), b.n_cols())
        };
        // C's rows (op(A)'s, when the fused node holds it whole; else a stand-in: the tile
        // path depends on m only through padding to MR, the same on every path).
        let m = match x.first() {
            Some(Some(a)) => a.n_rows(),
            _ => 1 << 16,
        };
        if k < PREPACK_K_MIN {
            return Ok(None);
        }
        self.shared_packing(m, n, b)
    }

    /// The block's rows of op(A) times the packed op(B) ([`gemm_packed`]: the same bits as
    /// [`gemm_view_with`]).
    fn rows_at_prepared(
        &self,
        _: usize,
        x: &[MatRef<'_>],
        y: MatMut<'_>,
        _: &Ctx<'_>,
        packed: &PackedB,
    ) -> Result<(), OpError> {
        let a = self.block_rows_of_a(x)?;
        gemm_packed(a, Trans::N, packed, y, false)?;
        Ok(())
    }
}

impl Gemm {
    /// op(B) packed for the tile path the kernel takes for an m × n C, to be shared by
    /// row blocks ([`gemm_packed`]); none where the kernel packs nothing shareable: a C
    /// of one or two columns (the narrow path: each block streams its rows of op(A) once;
    /// `gemm::narrow_path`) or one it computes transposed.
    fn shared_packing(
        &self,
        m: usize,
        n: usize,
        b: MatRef<'_>,
    ) -> Result<Option<PackedB>, OpError> {
        if narrow_path(self.precision, m, n) {
            return Ok(None);
        }
        let (isa, transposed) = plan(Isa::current(), m, n, trans(self.ta));
        if transposed {
            return Ok(None);
        }
        Ok(Some(PackedB::new_with(
            self.precision,
            isa,
            b,
            trans(self.tb),
        )?))
    }

    /// op(A)'s rows of a block (its view applied), refusing a transposed op(A).
    fn block_rows_of_a<'a>(&self, x: &[MatRef<'a>]) -> Result<MatRef<'a>, OpError> {
        if self.ta || x.len() != 2 {
            return Err(OpError::args(
                "gemm: rows of a product need op(A) not transposed and two operands",
            ));
        }
        ColumnView::apply(self.views[0], x[0])
    }
}

impl Partitioned for Gemm {
    /// op(B) packed once and each block's buffer for its second half of k, where they
    /// apply.
    type Prepared = Option<GemmParts>;

    /// Row blocks of C (rows of op(A)), about two per worker so a slow block can be
    /// balanced; op(B) packed once for all of them ([`PackedB`]), each block one sequential
    /// call of the kernel on it. A C of too few rows for that (∇W of a first layer, F × h)
    /// splits into column blocks instead (columns of op(B)), so the workers share it
    /// rather than one computing it while the others wait. The k-sum of every
    /// element is the kernel's, whatever the blocks (measured bit-identical in
    /// tests/executor.rs). Xᵀ·Yᵀ (computed as (Y·X)ᵀ by `forward`) is not split.
    ///
    /// A product of long k (∇W = Xᵀ·∇Y over a subgraph's thousands of nodes, which the
    /// kernel runs as two halves of k, [`PackedB::splits_k`]) also splits by k: each row
    /// block's second half is a part of its own (an empty range of the output), computed
    /// into a buffer that [`Partitioned::finish`] adds to the block, as the kernel adds its
    /// halves: the same bits. Each part then reads half of the packed B, and the last part
    /// of a step (a ∇W, whose only reader is the optimiser, ran alone on one worker for
    /// 4–16 ms at the end of a 2-thread GraphSAGE step; BENCHMARKS.md) is half as long.
    fn split(
        &self,
        inputs: &[&Value],
        _: &Fact,
        _: &Ctx<'_>,
        threads: usize,
    ) -> Result<Option<Split<Option<GemmParts>>>, OpError> {
        if inputs[0].as_dense().is_none() || inputs[1].as_dense().is_none() {
            return Ok(None);
        }
        if threads < 2 || (self.ta && self.tb) {
            return Ok(None);
        }
        let (a, b) = (self.operand(inputs, 0)?, self.operand(inputs, 1)?);
        let (m, k) = if self.ta {
            (a.n_cols(), a.n_rows())
        } else {
            (a.n_rows(), a.n_cols())
        };
        let n = if self.tb { b.n_rows() } else { b.n_cols() };
        if m * n * k < GEMM_SPLIT_MIN_MACS {
            return Ok(None);
        }
        let halves = k_splits(self.precision, (m, n), k);
        if m < 2 * GEMM_MIN_ROWS {
            if n < 2 * GEMM_MIN_COLS {
                return Ok(None);
            }
            // Column blocks, each a whole product on its columns of op(B). A long k (∇W of
            // a first layer, 50×512 over the subgraph's nodes) splits by its halves instead,
            // on half as many column blocks: each block packs all of op(A) (Xᵀ, a gather),
            // and 4 blocks of 128 columns ran at 40 GF/s on two threads against 62 for the
            // whole on one (BENCHMARKS.md).
            let blocks = if halves {
                threads.div_ceil(2)
            } else {
                2 * threads
            };
            let blocks = blocks.min(n / GEMM_MIN_COLS);
            let split = Split::even(Axis::Cols, n, blocks).writing_all();
            return Ok(Some(if halves {
                by_halves(split, n, |cols| (m, cols))
            } else {
                split.with_prepared(None)
            }));
        }
        let narrow = narrow_path(self.precision, m, n);
        if narrow && self.ta {
            // ∇W of a classifier (Hᵀ·∇Y, C of one or two columns): the narrow path reads
            // whole rows of H, and row blocks of C would read a short run of each (a third
            // of the speed: `gemm::narrow`). A long k runs as its two halves; a short one
            // whole.
            if !halves {
                return Ok(None);
            }
            let split = Split::even(Axis::Rows, m, 1).writing_all();
            return Ok(Some(by_halves(split, m, |rows| (rows, n))));
        }
        // Four row blocks per thread, not two: the step's last node is a ∇W (1024×512 over
        // the subgraph's 6 thousand nodes, ~65 CPU-ms), and at two per thread its last part
        // ran alone for 8 ms at the step's end; a gemm running alone went from 7.9–9.0 ms
        // of a 2-thread step to 3.1–6.3 (BENCHMARKS.md). A part costs its own rows of op(A)
        // only.
        let parts = (4 * threads).min(m / GEMM_MIN_ROWS);
        // op(B) packed once here for every part (each used to pack all of it: for
        // ∇W = Xᵀ·∇Y that was all of ∇Y, per part; issue 33). The parts then compute the
        // same bits as `forward` (same packing, same tile routine).
        // (A C with few columns runs transposed, and each part packs its own rows of
        // op(A) then: nothing to share.)
        let mut split = Split::even(Axis::Rows, m, parts).writing_all();
        let Some(packed) = self.shared_packing(m, n, b)? else {
            return Ok(Some(split.with_prepared(None)));
        };
        let halves = packed
            .splits_k()
            .then(|| split_halves(&mut split, m, |rows| (rows, n)));
        // gemm_packed and gemm_view without accumulation write all of C.
        Ok(Some(
            split.with_prepared(Some(GemmParts::Packed { packed, halves })),
        ))
    }
    fn forward_part(
        &self,
        inputs: &[&Value],
        _: &Ctx<'_>,
        split: &Split<Option<GemmParts>>,
        part: usize,
        out: MatMut<'_>,
    ) -> Result<(), OpError> {
        let (ta, tb) = (trans(self.ta), trans(self.tb));
        let prepared = split.prepared.as_ref();
        // A second half of k (parts past the blocks) computes its block's rows or columns.
        let blocks = prepared.and_then(GemmParts::halves).map(Vec::len);
        let block = match blocks {
            Some(b) if part >= b => part - b,
            _ => part,
        };
        let range = split.ranges[block].clone();
        let (mut av, mut bv) = (self.operand(inputs, 0)?, self.operand(inputs, 1)?);
        // A part is rows of op(A) (rows of C) or columns of op(B) (columns of C); a
        // transposed operand's rows are its stored columns.
        match (split.axis, self.ta, self.tb) {
            (Axis::Rows, false, _) => av = av.rows(range)?,
            (Axis::Rows, true, _) => av = av.cols(range)?,
            (Axis::Cols, _, false) => bv = bv.cols(range)?,
            (Axis::Cols, _, true) => bv = bv.rows(range)?,
        }
        let Some(parts) = prepared else {
            gemm_view_with(self.precision, av, ta, bv, tb, out, false)?;
            return Ok(());
        };
        // One half of k, on the packed B or on op(B) as it is.
        let half = |half: KHalf, c: MatMut<'_>| match parts {
            GemmParts::Packed { packed, .. } => gemm_packed_half(av, ta, packed, half, c),
            GemmParts::Halves(_) => gemm_view_half(self.precision, av, ta, bv, tb, half, c),
        };
        match parts {
            GemmParts::Packed {
                packed,
                halves: None,
            } => gemm_packed(av, ta, packed, out, false)?,
            _ if block == part => half(KHalf::First, out)?,
            GemmParts::Packed {
                halves: Some(halves),
                ..
            }
            | GemmParts::Halves(halves) => {
                let mut buf = halves[block]
                    .lock()
                    .map_err(|_| OpError::Missing("gemm: a half's buffer".into()))?;
                let (r, c) = (buf.rows, buf.cols);
                half(KHalf::Second, MatMut::row_major(&mut buf.data, r, c)?)?;
            }
        }
        Ok(())
    }

    /// Adds each row block's second half of k to the block (split by k only).
    fn finish(&self, split: &Split<Option<GemmParts>>, mut out: MatMut<'_>) -> Result<(), OpError> {
        let Some(halves) = split.prepared.as_ref().and_then(GemmParts::halves) else {
            return Ok(());
        };
        for (block, half) in halves.iter().enumerate() {
            let rows = split.ranges[block].clone();
            let mut half = half
                .lock()
                .map_err(|_| OpError::Missing("gemm: a half's buffer".into()))?;
            let h = MatRef::row_major(&half.data, half.rows, half.cols)?;
            let block = match split.axis {
                Axis::Rows => out.rb_mut().rows_mut(rows)?,
                Axis::Cols => out.rb_mut().cols_mut(rows)?,
            };
            add_half(block, h)?;
            // Back to the free-list for the next step's halves (`Tensor::scratch`).
            crate::ir::recycle::give(std::mem::take(&mut half.data));
        }
        Ok(())
    }
}

/// What a split [`Gemm`] computes once for its parts.
pub enum GemmParts {
    /// Row blocks of a C of many columns: op(B) packed once for all of them, and for a
    /// long k each block's buffer for its second half.
    Packed {
        packed: PackedB,
        halves: Option<Vec<Mutex<Tensor>>>,
    },
    /// A product split by halves of k on op(B) as it is (a C of few rows or columns): each
    /// block's buffer for its second half.
    Halves(Vec<Mutex<Tensor>>),
}

impl GemmParts {
    /// Each block's buffer for its second half of k, where k splits.
    fn halves(&self) -> Option<&Vec<Mutex<Tensor>>> {
        match self {
            GemmParts::Packed { halves, .. } => halves.as_ref(),
            GemmParts::Halves(halves) => Some(halves),
        }
    }
}

/// `split` (blocks of an axis of `len`) with a part per block for its second half of k, on
/// op(B) as it is ([`GemmParts::Halves`]).
fn by_halves(
    mut split: Split,
    len: usize,
    shape: impl Fn(usize) -> (usize, usize),
) -> Split<Option<GemmParts>> {
    let halves = split_halves(&mut split, len, shape);
    split.with_prepared(Some(GemmParts::Halves(halves)))
}

/// Adds to `split` (blocks of an axis of `len`) a part per block for its second half of k
/// (an empty range past the axis's end) and returns each block's buffer for that half, of
/// `shape(block length)`.
fn split_halves(
    split: &mut Split,
    len: usize,
    shape: impl Fn(usize) -> (usize, usize),
) -> Vec<Mutex<Tensor>> {
    let blocks = split.ranges.clone();
    split.ranges.extend(blocks.iter().map(|_| len..len));
    blocks
        .into_iter()
        .map(|r| {
            let (rows, cols) = shape(r.len());
            Mutex::new(Tensor::scratch(rows, cols))
        })
        .collect()
}
