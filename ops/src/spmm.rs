//! CSR × dense SpMM, feature-partitioned (JPDC Algorithm 7, §6.2).
//!
//! out (n×f) = A (n×n_x, CSR, optional edge values) · X (n_x×f), X and out row-major with
//! any row stride ([`spmm_view`]: either may be a column block of a wider matrix).
//!
//! The f feature columns are cut into Q_f blocks of w columns. A task computes one block
//! for every row, so the X rows it gathers at random are only w wide: the block of X (and of
//! out) stays in cache while the index array streams. JPDC takes Q_f = max(p, ⌈8·n·f/S⌉),
//! X's block and out's in cache; here out's rows are written once from registers, so
//! [`feature_partitions`] fits X's block alone (4·n·w ≤ S_L2) with w a whole number of
//! 16-float units ([`BLOCK_UNIT`]: a cache line, so blocks of a contiguous out never share
//! a line, and a packed panel carries no padding).
//! Tasks: p lanes, each taking a contiguous run of blocks, so the blocks that run at the
//! same time are Q_f/p apart (never adjacent when Q_f ≥ 2p). Cost: 2·nnz·f flops; bytes
//! ≈ nnz·(4 + 4)·Q_f (indices and values once per block) + n_x·f·4 + n·f·4.
//!
//! Inside a block, columns go in panels of up to 64 ([`PANEL`]): for each row, the panel's
//! accumulators stay in registers while the row's entries are gathered, one fused
//! multiply-add per vector and entry, in CSR order. That order is the kernel's definition
//! (`panel_plain`), so every vector width, partition, stride and [`Gather`] choice gives
//! the same result bit for bit.
//!
//! Row layout: X rows a multiple of 512 B apart (any f = 128·k, contiguous) put the same
//! panel of every row in the same few L1 sets; rows that do not start on a cache line
//! split every vector load; thousands of rows each a TLB miss. When X has few enough rows,
//! each panel is therefore first copied into a contiguous, aligned buffer ([`Gather`]:
//! 2.4× at f = 512 and 2.8× at f = 1024 on one thread against reading in place).
//!
//! The backward of out = A·X is ∇X = Aᵀ·∇out: call this with the transposed data array of
//! a symmetric pattern (the samplers' Algorithm-6 permutation); no general transpose.
//!
//! The tests (every variant against the naive oracle) are in spmm/tests.rs.

use rayon::prelude::*;

use crate::isa::Isa;
use crate::view::{MatMut, MatRef};
use crate::{cache, check_len, AlignedVec, KernelError, CACHE_LINE_F32};

/// A CSR matrix view: `offsets` (n+1, monotone, ending at nnz), `indices` (< n_cols), and
/// optional `values` (absent: all 1).
#[derive(Clone, Copy, Debug)]
pub struct CsrRef<'a> {
    /// Row offsets.
    pub offsets: &'a [u32],
    /// Column indices.
    pub indices: &'a [u32],
    /// Edge values, one per entry.
    pub values: Option<&'a [f32]>,
    /// Number of columns (rows of X).
    pub n_cols: usize,
}

impl CsrRef<'_> {
    /// Rows.
    pub fn n_rows(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Checks the structure: O(n + nnz), cheap beside the O(nnz·f) product.
    pub fn validate(&self, kernel: &'static str) -> Result<(), KernelError> {
        validate_offsets(kernel, self.offsets, self.indices.len())?;
        let bad = |what: String| Err(KernelError::Sparse { kernel, what });
        if let Some(k) = self.indices.iter().position(|&j| j as usize >= self.n_cols) {
            return bad(format!(
                "indices[{k}] = {} out of range, expected < {}",
                self.indices[k], self.n_cols
            ));
        }
        if let Some(v) = self.values {
            check_len(kernel, "values", self.indices.len(), v.len())?;
        }
        Ok(())
    }
}

/// Columns of one register panel: 4 AVX-512 vectors (8 AVX2 ones), whose accumulators
/// stay in registers for a whole row. Measured (BENCHMARKS.md): 32- and 48-column panels
/// are slower (more passes over the index stream), and so are 128-column ones (twice the
/// panel a pass keeps in L2).
pub const PANEL: usize = 4 * CACHE_LINE_F32;

/// Checks CSR row offsets: n+1 ≥ 1 entries, monotone, from 0 to `nnz`.
pub fn validate_offsets(
    kernel: &'static str,
    offsets: &[u32],
    nnz: usize,
) -> Result<(), KernelError> {
    let bad = |what: String| Err(KernelError::Sparse { kernel, what });
    if offsets.is_empty() {
        return bad("offsets are empty, expected n+1 entries".into());
    }
    if offsets[0] != 0 || offsets[offsets.len() - 1] as usize != nnz {
        return bad(format!("offsets expected to run from 0 to nnz = {nnz}"));
    }
    if let Some(i) = offsets.windows(2).position(|w| w[1] < w[0]) {
        return bad(format!("offsets decrease at row {i}"));
    }
    Ok(())
}

/// Floats in a block's width unit: an AVX-512 vector, two AVX2 vectors, a cache line.
/// A packed panel is padded to whole vectors, so a block of 22 columns costs what one of
/// 32 does: the step's Q_f = 24 over f = 512 (JPDC's rule) ran 14.8 ms where 16 blocks of
/// 32 ran 8.1 (`spmm_width`, one thread; BENCHMARKS.md).
pub const BLOCK_UNIT: usize = 16;

/// Q_f, the feature blocks of an SpMM that gathers from `n` rows of X, over `f` columns, on
/// `threads` threads with `cache_bytes` of cache per core: JPDC Algorithm 7's
/// max(p, cache term), with the cache term for this kernel. JPDC keeps the X block and the
/// output block in cache (8·n·f/Q_f ≤ S: 4 + 4 bytes an element); here an output row's
/// block is summed in registers and written once, so only the n × w block of X must stay:
/// w is the widest whole number of [`BLOCK_UNIT`]s with 4·n·w ≤ S (one unit at least), and
/// Q_f = max(p, ⌈f/w⌉), at most f. At n = 6448 on a 1 MiB L2 that is w = 32, Q_f = 16 for
/// f = 512 (JPDC: 24 blocks of 22 columns, padded to 32 when packed; 64-column blocks
/// overflow the L2: 11.0 ms against 8.1).
pub fn feature_partitions(n: usize, f: usize, threads: usize, cache_bytes: usize) -> usize {
    threads
        .max(f.div_ceil(cache_width(n, cache_bytes)))
        .min(f)
        .max(1)
}

/// The widest whole number of [`BLOCK_UNIT`]s of columns whose `n` rows (4 bytes an
/// element) fit `cache_bytes`; one unit at least.
pub fn cache_width(n: usize, cache_bytes: usize) -> usize {
    (cache_bytes / (4 * n.max(1)) / BLOCK_UNIT * BLOCK_UNIT).max(BLOCK_UNIT)
}

/// Block width in columns for `n` rows of `f` features on `threads` threads: f/Q_f with
/// [`feature_partitions`] on the L2, rounded up to whole [`BLOCK_UNIT`]s; one block when f
/// fits a panel.
pub fn block_width(n: usize, f: usize, threads: usize) -> usize {
    if f <= PANEL {
        return f.max(1);
    }
    let q = feature_partitions(n, f, threads, cache::l2_bytes());
    (f.div_ceil(q).div_ceil(BLOCK_UNIT) * BLOCK_UNIT).min(f)
}

/// out = A·X with the default partition (see [`block_width`]) on the current rayon pool;
/// X (n_x×f) and out (n×f) contiguous row-major slices. A wrapper over [`spmm_view`].
pub fn spmm(a: CsrRef<'_>, x: &[f32], f: usize, out: &mut [f32]) -> Result<(), KernelError> {
    let w = block_width(a.n_cols.max(a.n_rows()), f, rayon::current_num_threads());
    spmm_blocked(a, x, f, out, w)
}

/// out = A·X with feature blocks of `width` columns (`width ≥ f`: unpartitioned), on
/// contiguous slices. A wrapper over [`spmm_view_blocked`].
pub fn spmm_blocked(
    a: CsrRef<'_>,
    x: &[f32],
    f: usize,
    out: &mut [f32],
    width: usize,
) -> Result<(), KernelError> {
    a.validate("spmm")?;
    check_len("spmm", "X", a.n_cols * f, x.len())?;
    check_len("spmm", "out", a.n_rows() * f, out.len())?;
    let x = MatRef::row_major(x, a.n_cols, f)?;
    let out = MatMut::row_major(out, a.n_rows(), f)?;
    run("spmm", a, x, out, width, Gather::Auto, false)
}

/// out = A·X with the default partition, X and out strided views (either may be a column
/// block of a wider matrix: out a block of a concatenation written in place, X a block of
/// a concatenation's gradient). Only out's own elements are written.
pub fn spmm_view(a: CsrRef<'_>, x: MatRef<'_>, out: MatMut<'_>) -> Result<(), KernelError> {
    let f = out.n_cols();
    let w = block_width(a.n_cols.max(a.n_rows()), f, rayon::current_num_threads());
    spmm_view_blocked(a, x, out, w)
}

/// [`spmm_view`] with feature blocks of `width` columns.
pub fn spmm_view_blocked(
    a: CsrRef<'_>,
    x: MatRef<'_>,
    out: MatMut<'_>,
    width: usize,
) -> Result<(), KernelError> {
    spmm_view_with(a, x, out, width, Gather::Auto)
}

/// [`spmm_view_blocked`] with the way X's panels are read chosen by the caller (see
/// [`Gather`]; every choice gives the same result, bit for bit).
pub fn spmm_view_with(
    a: CsrRef<'_>,
    x: MatRef<'_>,
    out: MatMut<'_>,
    width: usize,
    gather: Gather,
) -> Result<(), KernelError> {
    a.validate("spmm_view")?;
    run("spmm_view", a, x, out, width, gather, false)
}

/// out = A·X continuing out's values instead of starting from zero: out\[i\]\[c\] =
/// fma(v_k, x\[j_k\]\[c\], … fma(v_0, x\[j_0\]\[c\], out\[i\]\[c\])), one rounding per entry in CSR
/// order. Calling it on a zeroed out with the entries of A whose columns fall in rows
/// 0..p₁ of X, then again with those in p₁..p₂ (X's rows renumbered from 0), and so on,
/// gives [`spmm_view`]'s result bit for bit when A's rows are sorted: how out-of-core
/// inference streams X in parts of rows through a bounded buffer.
pub fn spmm_accumulate(a: CsrRef<'_>, x: MatRef<'_>, out: MatMut<'_>) -> Result<(), KernelError> {
    a.validate("spmm_accumulate")?;
    let f = out.n_cols();
    let w = block_width(a.n_cols.max(a.n_rows()), f, rayon::current_num_threads());
    run("spmm_accumulate", a, x, out, w, Gather::Auto, true)
}

/// The one code path: shapes checked against the validated CSR, then lanes of blocks;
/// `accumulate`: each row's fold starts from out's value instead of zero.
fn run(
    kernel: &'static str,
    a: CsrRef<'_>,
    x: MatRef<'_>,
    mut out: MatMut<'_>,
    width: usize,
    gather: Gather,
    accumulate: bool,
) -> Result<(), KernelError> {
    check_len(kernel, "rows of X (columns of A)", a.n_cols, x.n_rows())?;
    check_len(kernel, "rows of out (rows of A)", a.n_rows(), out.n_rows())?;
    check_len(
        kernel,
        "columns of out (columns of X)",
        x.n_cols(),
        out.n_cols(),
    )?;
    let f = out.n_cols();
    if f == 0 || a.n_rows() == 0 {
        return Ok(());
    }
    let w = width.clamp(1, f);
    let q = f.div_ceil(w);
    let threads = rayon::current_num_threads();
    let lanes = threads.clamp(1, q);
    let out = Out {
        ptr: out.as_mut_ptr(),
        row_stride: out.row_stride(),
    };
    let how = How::choose(gather, a, x, accumulate);
    let all = Rows::of(a);
    let splits = row_splits(&how, all.offsets, threads / lanes);
    let whole = &out;
    (0..lanes * (splits.len() - 1))
        .into_par_iter()
        .for_each(|task| {
            let (lane, part) = (task / (splits.len() - 1), task % (splits.len() - 1));
            let (r0, r1) = (splits[part], splits[part + 1]);
            let rows = Rows {
                offsets: &all.offsets[r0..=r1],
                ..all
            };
            let out = &Out {
                ptr: whole.ptr.wrapping_add(r0 * whole.row_stride),
                row_stride: whole.row_stride,
            };
            let mut pack = PackBuffer::take(how.packed);
            for b in lane * q / lanes..(lane + 1) * q / lanes {
                let c1 = ((b + 1) * w).min(f);
                let mut c = b * w;
                while c < c1 {
                    let cols = (c1 - c).min(PANEL);
                    // SAFETY: columns c..c + cols of rows r0..r1 of out belong to block b and
                    // row range `part`, which only this task computes (blocks and ranges are
                    // disjoint), and out (a unique borrow) outlives the parallel loop. Shapes were checked above against the
                    // validated CSR, so every X row named by an index exists.
                    unsafe { panel(rows, x, c, cols, out, how, &mut pack) };
                    c += cols;
                }
            }
            pack.give_back();
        });
    Ok(())
}

/// Row ranges that split the rows as well as the column blocks, `ways` of them, cut at
/// equal shares of the entries: a narrow output (GraphSAGE's 16 columns in a streamed
/// evaluation) has fewer column blocks than threads, and one lane did all its rows. Rows
/// are independent, so the bits do not change. One range when X is packed (each range
/// would pack the same panel again) or there are too few rows to share.
fn row_splits(how: &How, offsets: &[u32], ways: usize) -> Vec<usize> {
    let n = offsets.len() - 1;
    let ways = if how.packed {
        1
    } else {
        ways.min(n / SPLIT_ROWS).max(1)
    };
    let nnz = u64::from(offsets[n]);
    let mut splits: Vec<usize> = (0..ways)
        .map(|p| offsets.partition_point(|&o| u64::from(o) * (ways as u64) < nnz * p as u64))
        .map(|r| r.min(n))
        .collect();
    splits[0] = 0;
    splits.push(n);
    splits.dedup();
    splits
}

/// The fewest rows a row range of [`row_splits`] takes.
const SPLIT_ROWS: usize = 4096;

/// The output shared by the lanes (disjoint column blocks): element (i, j) at
/// `ptr + i·row_stride + j`.
struct Out {
    ptr: *mut f32,
    row_stride: usize,
}
// SAFETY: lanes write disjoint column blocks (see `run`).
unsafe impl Sync for Out {}

/// How the panels of X are read.
///
/// Every gathered X row contributes one panel, 64 floats = 4 cache lines. Read in place,
/// a matrix whose rows are a multiple of 512 B apart (any f = 128·k, contiguous) puts the
/// panels of all rows in a few L1 sets, where they evict each other; a row start that is
/// not 64-byte aligned splits each vector load over two lines; and thousands of rows
/// 2–4 KiB apart make each gather a TLB miss as well. Copying the panel first into a
/// contiguous, aligned buffer (n_x × 64 floats, one sequential pass) removes all three.
/// Measured on the frontier subgraph of the kernel bench (docs/bench/kernels.md, "SpMM: fused
/// multiply-adds and packed X panels"): 2.4× faster than in place at f = 512 and 2.8× at
/// f = 1024 on one thread for contiguous X, and still 1.09× / 1.37× faster for X already
/// padded to a stride of f + 16 and aligned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Gather {
    /// Packed when packing is cheap: X has at most as many rows as A has entries (each
    /// copied row is gathered once or more on average), and a packed panel takes at most
    /// [`PACK_MAX_BYTES`]. In place otherwise, e.g. in full-graph inference, whose X is
    /// the whole graph and whose block of A touches few of its rows.
    #[default]
    Auto,
    /// Always straight from X.
    InPlace,
    /// Through the thread's packing buffer however few entries A has, as long as a
    /// packed panel takes at most [`PACK_MAX_BYTES`] and the CPU has AVX2 or AVX-512 (in
    /// place otherwise).
    Packed,
}

/// The largest packed panel, in bytes (16 MiB: X of up to 65 536 rows). Each thread that
/// has packed keeps its buffer, so this is also the most a thread holds between calls.
pub const PACK_MAX_BYTES: usize = 16 << 20;

/// What one call does for every panel: the vector unit, packing, prefetching.
#[derive(Clone, Copy, Debug)]
struct How {
    isa: Isa,
    packed: bool,
    /// Prefetch X panels ahead (in place from a layout whose gathers miss, see [`Gather`]).
    prefetch: bool,
    /// Each row's accumulators start from out's values ([`spmm_accumulate`]).
    accumulate: bool,
}

impl How {
    fn choose(gather: Gather, a: CsrRef<'_>, x: MatRef<'_>, accumulate: bool) -> How {
        let isa = Isa::current();
        let stride_bytes = x.row_stride() * 4;
        let good_layout = x.n_rows() <= 1
            || (x.as_ptr() as usize).is_multiple_of(64)
                && stride_bytes.is_multiple_of(64)
                && !stride_bytes.is_multiple_of(512);
        let fits = a.n_cols.saturating_mul(PANEL * 4) <= PACK_MAX_BYTES;
        let packed = isa != Isa::Generic
            && fits
            && match gather {
                Gather::Auto => a.n_cols <= a.indices.len(),
                Gather::InPlace => false,
                Gather::Packed => true,
            };
        How {
            isa,
            packed,
            prefetch: !packed && !good_layout,
            accumulate,
        }
    }
}

/// A lane's packing buffer: the thread's kept buffer while the lane runs.
struct PackBuffer {
    buf: AlignedVec,
}

thread_local! {
    static PACK: std::cell::Cell<AlignedVec> = const { std::cell::Cell::new(AlignedVec::new()) };
}

impl PackBuffer {
    fn take(packed: bool) -> PackBuffer {
        PackBuffer {
            buf: if packed {
                PACK.take()
            } else {
                AlignedVec::new()
            },
        }
    }

    /// A 64-byte aligned region of at least `len` floats (replaced by a larger one when
    /// needed, never shrunk).
    fn region(&mut self, len: usize) -> *mut f32 {
        if self.buf.len() < len {
            self.buf = AlignedVec::zeroed(len);
        }
        self.buf.as_mut_slice().as_mut_ptr()
    }

    fn give_back(self) {
        if !self.buf.is_empty() {
            PACK.set(self.buf);
        }
    }
}

/// Columns c..c + cols (cols ≤ [`PANEL`]) of every row of out. Unsafe: out must hold
/// n_rows rows of X's width that no one else touches in those columns, and the shapes
/// must have been checked against the validated CSR.
unsafe fn panel(
    rows: Rows<'_>,
    x: MatRef<'_>,
    c: usize,
    cols: usize,
    out: &Out,
    how: How,
    pack: &mut PackBuffer,
) {
    let dst = Strided {
        ptr: out.ptr.wrapping_add(c),
        stride: out.row_stride,
    };
    let mut src = |lanes: usize| {
        if how.packed {
            let width = cols.div_ceil(lanes) * lanes;
            let buf = pack.region(x.n_rows() * width);
            for j in 0..x.n_rows() {
                // SAFETY: j < rows of X and c + cols ≤ its width (caller's contract); the
                // region holds n_cols rows of `width ≥ cols` floats.
                unsafe {
                    let from = x.row_unchecked(j).as_ptr().add(c);
                    let to = buf.add(j * width);
                    std::ptr::copy_nonoverlapping(from, to, cols);
                    std::ptr::write_bytes(to.add(cols), 0, width - cols);
                }
            }
            Strided {
                ptr: buf,
                stride: width,
            }
        } else {
            Strided {
                ptr: x.as_ptr().wrapping_add(c).cast_mut(),
                stride: x.row_stride(),
            }
        }
    };
    // SAFETY (all arms): the CPU has the feature each arm's function is compiled for
    // (`Isa::current`, capped to the CPU); every source row j < n_cols has `stride`-spaced floats from
    // `src.ptr`, of which the first `cols` (all of the packed, zero-padded width) may be
    // read; every out row i < n_rows has `cols` floats from `dst.ptr` that only we write.
    match how.isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { x86::panel_avx512(rows, src(16), dst, cols, how) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { x86::panel_avx2(rows, src(8), dst, cols, how) },
        _ => unsafe { panel_plain(rows, src(1), dst, cols, how.accumulate) },
    }
}

/// The CSR as raw parts for the inner loops (validated by the caller).
#[derive(Clone, Copy)]
struct Rows<'a> {
    offsets: &'a [u32],
    indices: &'a [u32],
    /// The edge values, or one 1.0 read for every entry (`value_step` 0).
    values: &'a [f32],
    value_step: usize,
}

static ONE: f32 = 1.0;

impl Rows<'_> {
    fn of(a: CsrRef<'_>) -> Rows<'_> {
        match a.values {
            Some(v) => Rows {
                offsets: a.offsets,
                indices: a.indices,
                values: v,
                value_step: 1,
            },
            None => Rows {
                offsets: a.offsets,
                indices: a.indices,
                values: std::slice::from_ref(&ONE),
                value_step: 0,
            },
        }
    }
}

/// Row i of a panel starts at `ptr + i·stride`.
#[derive(Clone, Copy)]
struct Strided {
    ptr: *mut f32,
    stride: usize,
}

/// Entries ahead whose X panel is prefetched when reading in place from a slow layout:
/// about an L3 latency (≈ 50 ns) of work at a few ns per entry.
const PREFETCH: usize = 12;

/// The order every path computes in, and what the vector paths must equal bit for bit:
/// out[i][c] = fma(v_k, x[j_k][c], … fma(v_0, x[j_0][c], 0)), over row i's entries in
/// CSR order, one rounding per entry. No vector unit (or a CPU without AVX2): one column
/// at a time (`mul_add` is exact on every target, in hardware where it has FMA).
/// `accumulate`: the fold starts from out's value instead of 0.
unsafe fn panel_plain(rows: Rows<'_>, src: Strided, dst: Strided, cols: usize, accumulate: bool) {
    let mut acc = [0f32; PANEL];
    let acc = &mut acc[..cols];
    for i in 0..rows.offsets.len() - 1 {
        if accumulate {
            // SAFETY: row i of out has `cols` floats only we touch (caller's contract).
            acc.copy_from_slice(unsafe {
                std::slice::from_raw_parts(dst.ptr.add(i * dst.stride), cols)
            });
        } else {
            acc.fill(0.0);
        }
        for k in rows.offsets[i] as usize..rows.offsets[i + 1] as usize {
            let j = rows.indices[k] as usize;
            let v = rows.values[k * rows.value_step];
            // SAFETY: row j of the source has `cols` readable floats (caller's contract).
            let xr = unsafe { std::slice::from_raw_parts(src.ptr.add(j * src.stride), cols) };
            for (o, &xv) in acc.iter_mut().zip(xr) {
                *o = v.mul_add(xv, *o);
            }
        }
        // SAFETY: row i of out has `cols` floats only we write (caller's contract).
        unsafe { std::slice::from_raw_parts_mut(dst.ptr.add(i * dst.stride), cols) }
            .copy_from_slice(acc);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The vector paths: a panel's accumulators live in registers for a whole row (up to
    //! 4 AVX-512 or 8 AVX2 vectors), each entry one fused multiply-add per vector.
    //! Generic over [`Vector`]; each entry point is compiled for its feature and
    //! everything below it is inlined into it.

    use std::arch::x86_64::*;

    use super::{How, Rows, Strided, PANEL, PREFETCH};

    /// One register of floats and what the row loop does with it.
    pub(super) trait Vector: Copy {
        const LANES: usize;
        type Mask: Copy;
        /// The first `n` lanes (1 ≤ n ≤ LANES).
        unsafe fn mask(n: usize) -> Self::Mask;
        unsafe fn zero() -> Self;
        unsafe fn splat(v: f32) -> Self;
        unsafe fn load(p: *const f32) -> Self;
        /// Reads only the masked lanes (no access to the others); zeros elsewhere.
        unsafe fn load_masked(p: *const f32, m: Self::Mask) -> Self;
        unsafe fn store(self, p: *mut f32);
        unsafe fn store_masked(self, p: *mut f32, m: Self::Mask);
        /// v·x + self, rounded once.
        unsafe fn fma(self, v: Self, x: Self) -> Self;
    }

    impl Vector for __m512 {
        const LANES: usize = 16;
        type Mask = __mmask16;
        #[inline(always)]
        unsafe fn mask(n: usize) -> __mmask16 {
            (((1u32 << n) - 1) & 0xffff) as __mmask16
        }
        #[inline(always)]
        unsafe fn zero() -> Self {
            _mm512_setzero_ps()
        }
        #[inline(always)]
        unsafe fn splat(v: f32) -> Self {
            _mm512_set1_ps(v)
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            unsafe { _mm512_loadu_ps(p) }
        }
        #[inline(always)]
        unsafe fn load_masked(p: *const f32, m: __mmask16) -> Self {
            unsafe { _mm512_maskz_loadu_ps(m, p) }
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f32) {
            unsafe { _mm512_storeu_ps(p, self) }
        }
        #[inline(always)]
        unsafe fn store_masked(self, p: *mut f32, m: __mmask16) {
            unsafe { _mm512_mask_storeu_ps(p, m, self) }
        }
        #[inline(always)]
        unsafe fn fma(self, v: Self, x: Self) -> Self {
            _mm512_fmadd_ps(v, x, self)
        }
    }

    impl Vector for __m256 {
        const LANES: usize = 8;
        type Mask = __m256i;
        #[inline(always)]
        unsafe fn mask(n: usize) -> __m256i {
            let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            _mm256_cmpgt_epi32(_mm256_set1_epi32(n as i32), lane)
        }
        #[inline(always)]
        unsafe fn zero() -> Self {
            _mm256_setzero_ps()
        }
        #[inline(always)]
        unsafe fn splat(v: f32) -> Self {
            _mm256_set1_ps(v)
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            unsafe { _mm256_loadu_ps(p) }
        }
        #[inline(always)]
        unsafe fn load_masked(p: *const f32, m: __m256i) -> Self {
            unsafe { _mm256_maskload_ps(p, m) }
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f32) {
            unsafe { _mm256_storeu_ps(p, self) }
        }
        #[inline(always)]
        unsafe fn store_masked(self, p: *mut f32, m: __m256i) {
            unsafe { _mm256_maskstore_ps(p, m, self) }
        }
        #[inline(always)]
        unsafe fn fma(self, v: Self, x: Self) -> Self {
            _mm256_fmadd_ps(v, x, self)
        }
    }

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn panel_avx512(
        rows: Rows<'_>,
        src: Strided,
        dst: Strided,
        cols: usize,
        how: How,
    ) {
        // SAFETY: forwarded contract (see `super::panel`).
        unsafe { dispatch::<__m512>(rows, src, dst, cols, how) }
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn panel_avx2(
        rows: Rows<'_>,
        src: Strided,
        dst: Strided,
        cols: usize,
        how: How,
    ) {
        // SAFETY: forwarded contract (see `super::panel`).
        unsafe { dispatch::<__m256>(rows, src, dst, cols, how) }
    }

    /// The row loop for this panel's vector count, with masked loads only when the source
    /// is read in place and its last vector is partial.
    #[inline(always)]
    unsafe fn dispatch<V: Vector>(
        rows: Rows<'_>,
        src: Strided,
        dst: Strided,
        cols: usize,
        how: How,
    ) {
        let vectors = cols.div_ceil(V::LANES);
        let last = cols - (vectors - 1) * V::LANES;
        let partial = !how.packed && last < V::LANES;
        macro_rules! go {
            ($($c:literal)*) => {
                match vectors {
                    $($c => match (partial, how.prefetch) {
                        (false, false) => row_loop::<V, $c, false, false>(rows, src, dst, last, how.accumulate),
                        (true, false) => row_loop::<V, $c, true, false>(rows, src, dst, last, how.accumulate),
                        (false, true) => row_loop::<V, $c, false, true>(rows, src, dst, last, how.accumulate),
                        (true, true) => row_loop::<V, $c, true, true>(rows, src, dst, last, how.accumulate),
                    },)*
                    _ => unreachable!("a panel is at most {PANEL} columns"),
                }
            };
        }
        // SAFETY: forwarded contract; `vectors` covers `cols`, the last one `last` lanes.
        unsafe {
            if V::LANES == 16 {
                go!(1 2 3 4)
            } else {
                go!(1 2 3 4 5 6 7 8)
            }
        }
    }

    /// Every row of the panel: C vectors of accumulators for a whole row, one fused
    /// multiply-add per vector and entry, in CSR order (the order of `panel_plain`);
    /// `accumulate`: the accumulators start from out's row instead of zero.
    #[inline(always)]
    unsafe fn row_loop<V: Vector, const C: usize, const PARTIAL: bool, const PF: bool>(
        rows: Rows<'_>,
        src: Strided,
        dst: Strided,
        last: usize,
        accumulate: bool,
    ) {
        // SAFETY: the caller's contract (see `super::panel`): offsets are validated and
        // monotone, indices name source rows, the last vector of a source row is read
        // masked when it is partial, and out rows are ours.
        unsafe {
            let m = V::mask(last);
            let nnz = rows.indices.len();
            for i in 0..rows.offsets.len() - 1 {
                let mut acc = [V::zero(); C];
                if accumulate {
                    let o = dst.ptr.add(i * dst.stride);
                    for (ch, acc) in acc.iter_mut().enumerate() {
                        *acc = if ch == C - 1 && last < V::LANES {
                            V::load_masked(o.add(ch * V::LANES), m)
                        } else {
                            V::load(o.add(ch * V::LANES))
                        };
                    }
                }
                let lo = *rows.offsets.get_unchecked(i) as usize;
                let hi = *rows.offsets.get_unchecked(i + 1) as usize;
                for k in lo..hi {
                    if PF && k + PREFETCH < nnz {
                        let jn = *rows.indices.get_unchecked(k + PREFETCH) as usize;
                        let p = src.ptr.wrapping_add(jn * src.stride) as *const i8;
                        for l in 0..C * V::LANES / 16 {
                            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(64 * l));
                        }
                    }
                    let j = *rows.indices.get_unchecked(k) as usize;
                    let v = V::splat(*rows.values.get_unchecked(k * rows.value_step));
                    let xr = src.ptr.add(j * src.stride);
                    for (ch, acc) in acc.iter_mut().enumerate() {
                        let xv = if PARTIAL && ch == C - 1 {
                            V::load_masked(xr.add(ch * V::LANES), m)
                        } else {
                            V::load(xr.add(ch * V::LANES))
                        };
                        *acc = acc.fma(v, xv);
                    }
                }
                let o = dst.ptr.add(i * dst.stride);
                for (ch, acc) in acc.iter().enumerate() {
                    if ch == C - 1 && last < V::LANES {
                        acc.store_masked(o.add(ch * V::LANES), m);
                    } else {
                        acc.store(o.add(ch * V::LANES));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
