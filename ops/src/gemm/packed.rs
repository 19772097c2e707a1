//! op(B) packed once for several products that share it ([`PackedB`]), and the products
//! on it.

use super::*;

/// op(B) packed once, for several products that share it: the row parts of one GEMM,
/// which the executor runs as separate tasks (issue 33: each part re-packed all of B, and
/// for ∇W = Xᵀ·∇Y that is all of ∇Y, per part). Holds every (NC, KC) block in the layout
/// the tile routine of `isa` reads; [`gemm_packed`] gives the same bits as [`gemm_view`]
/// (or [`gemm_view_with`] at the precision it was packed for).
pub struct PackedB {
    kern: Kern,
    k: usize,
    n: usize,
    nc_max: usize,
    /// Elements of k per block ([`k_blocks_of`] of k); the last block holds the rest.
    kc: usize,
    data: AlignedVec,
}

impl std::fmt::Debug for PackedB {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedB")
            .field("kern", &self.kern)
            .field("k", &self.k)
            .field("n", &self.n)
            .finish()
    }
}

impl PackedB {
    /// Packs op(B) for products on `isa` (an error if the CPU lacks it); parallel on the
    /// current rayon pool.
    pub fn new(isa: Isa, b: MatRef<'_>, tb: Trans) -> Result<PackedB, KernelError> {
        require(isa, "PackedB::new")?;
        // SAFETY: the CPU has `isa` (checked).
        Ok(unsafe { PackedB::pack(Kern::F32(isa), b, tb) })
    }

    /// Packs op(B) for products on `isa` at `precision` (the caller passes the path
    /// [`plan`] chose, as a row-split GEMM does); an error if the CPU lacks either.
    pub fn new_with(
        precision: Precision,
        isa: Isa,
        b: MatRef<'_>,
        tb: Trans,
    ) -> Result<PackedB, KernelError> {
        require(isa, "PackedB::new_with")?;
        require_precision(precision, "PackedB::new_with")?;
        // SAFETY: the CPU has `isa`, and bf16 if asked (checked).
        let k = if tb == Trans::N {
            b.n_rows()
        } else {
            b.n_cols()
        };
        Ok(unsafe { PackedB::pack(Kern::of(precision, isa, None, k), b, tb) })
    }

    /// # Safety
    /// The CPU runs `kern`.
    unsafe fn pack(kern: Kern, b: MatRef<'_>, tb: Trans) -> PackedB {
        let (k, n, op) = operand(b, tb);
        let nc_max = nc_block();
        let (nr, k_step) = with_kernel!(kern, K => (K::NR, K::K_STEP));
        let kc_max = k_blocks_of(k, k_step).0;
        let column_steps = k_steps(kern, k, kc_max);
        let mut data = AlignedVec::zeroed(column_steps * n.div_ceil(nr) * nr);
        let parallel = k * n >= PARALLEL_MIN_MACS / 64 && rayon::current_num_threads() > 1;
        let mut rest = data.as_mut_slice();
        for jc in (0..n).step_by(nc_max) {
            let nc = nc_max.min(n - jc);
            for pc in (0..k).step_by(kc_max) {
                let kc = kc_max.min(k - pc);
                let len = with_kernel!(kern, K => K::steps(kc)) * nc.div_ceil(nr) * nr;
                let (dst, tail) = rest.split_at_mut(len);
                // SAFETY: the block is inside op(B) (its view's bounds), dst holds it; the
                // CPU runs `kern` (the caller's contract).
                unsafe {
                    with_kernel!(kern, K => pack_b_block::<K>(op, (jc, nc), (pc, kc), dst, parallel))
                };
                rest = tail;
            }
        }
        PackedB {
            kern,
            k,
            n,
            nc_max,
            kc: kc_max,
            data,
        }
    }

    /// Rows of op(B) (the product's k).
    pub fn rows(&self) -> usize {
        self.k
    }

    /// Columns of op(B) (the product's n).
    pub fn cols(&self) -> usize {
        self.n
    }

    /// Whether a product on this B runs as two halves of k (k of at least 16 KC blocks),
    /// which [`gemm_packed_half`] computes one at a time.
    pub fn splits_k(&self) -> bool {
        let k_step = with_kernel!(self.kern, K => K::K_STEP);
        k_blocks_of(self.k, k_step).1.is_some()
    }

    /// The block of column block `jb` and k block `pb`, as `run` packs it. Blocks lie in
    /// (jc, pc) order; every column block but the last is `nc_max` wide and every k block
    /// but the last `kc` elements deep, so earlier blocks have full sizes.
    pub(super) fn block(&self, jb: usize, pb: usize) -> &[f32] {
        let (nr, full, last) = with_kernel!(self.kern, K => (
            K::NR,
            K::steps(self.kc),
            K::steps(self.kc.min(self.k - pb * self.kc)),
        ));
        let jc = jb * self.nc_max;
        let nc = self.nc_max.min(self.n - jc);
        let panels = nc.div_ceil(nr) * nr;
        let column_block = k_steps(self.kern, self.k, self.kc) * (self.nc_max.div_ceil(nr) * nr);
        let start = jb * column_block + pb * full * panels;
        &self.data.as_slice()[start..start + last * panels]
    }
}

/// Packed steps of all of k in blocks of `kc` elements (the last the rest) for `kern`:
/// each block padded as its tile routine reads it ([`MicroKernel::steps`]).
fn k_steps(kern: Kern, k: usize, kc: usize) -> usize {
    with_kernel!(kern, K => (k / kc) * K::steps(kc) + K::steps(k % kc))
}

/// C = op(A)·B, or C += it, with B packed beforehand: the same bits as [`gemm_view`] on
/// the B it was packed from, on the packed B's instruction set.
pub fn gemm_packed(
    a: MatRef<'_>,
    ta: Trans,
    b: &PackedB,
    mut c: MatMut<'_>,
    accumulate: bool,
) -> Result<(), KernelError> {
    let kernel = "gemm_packed";
    let (m, k, a) = operand(a, ta);
    check_len(kernel, "rows of packed B (columns of op(A))", k, b.k)?;
    let what = "columns of C (columns of packed B)";
    let Some(out) = target(kernel, what, (m, b.n, k), &mut c, accumulate)? else {
        return Ok(());
    };
    let (shape, src) = ((m, b.n, k), BSource::Packed(b));
    let parallel = forks(m, b.n, k);
    // SAFETY: as in `product`; b was packed for b.kern, which the CPU runs (checked when
    // it was packed), in that kernel's layout.
    unsafe { with_kernel!(b.kern, K => run::<K>(shape, a, src, out, accumulate, parallel)) };
    Ok(())
}

/// Which half of k [`gemm_packed_half`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KHalf {
    /// The first half, which [`gemm_packed`] computes into C.
    First,
    /// The second half, which [`gemm_packed`] computes into a buffer of C's size and then
    /// adds to C.
    Second,
}

/// One half of k of C = op(A)·B, B packed beforehand and of long k ([`PackedB::splits_k`]),
/// written into C (overwritten), on the calling thread. [`gemm_packed`] computes the first
/// half into C and the second into a buffer, then adds the buffer to C element by element;
/// so the two halves computed apart and added by [`add_half`] give its bits. What lets a
/// caller run the halves as separate tasks (the executor's ∇W parts: each reads half of
/// the packed B, and a step's last part is half as long). An error when B's k does not
/// split.
pub fn gemm_packed_half(
    a: MatRef<'_>,
    ta: Trans,
    b: &PackedB,
    half: KHalf,
    mut c: MatMut<'_>,
) -> Result<(), KernelError> {
    let kernel = "gemm_packed_half";
    let (m, k, a) = operand(a, ta);
    check_len(kernel, "rows of packed B (columns of op(A))", k, b.k)?;
    let (ks, kc) = half_range(kernel, k, with_kernel!(b.kern, K => K::K_STEP), half)?;
    let what = "columns of C (columns of packed B)";
    let Some(out) = target(kernel, what, (m, b.n, k), &mut c, false)? else {
        return Ok(());
    };
    // SAFETY: as in `gemm_packed`; `ks` starts on a block of the whole's blocking (the
    // split is a multiple of kc).
    unsafe {
        with_kernel!(b.kern, K => run_k::<K>((m, b.n, k), a, BSource::Packed(b), out, false, false, (ks, kc)))
    };
    Ok(())
}
