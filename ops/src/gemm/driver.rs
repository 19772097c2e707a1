//! The loops around the tile routines (BLIS's macro-kernel): for each NC block of columns
//! and KC block of k, op(B)'s block packed once and the MR-row panels of op(A) swept
//! across it by the pool's threads; a long k as two halves side by side; the calling
//! thread's scratch buffers.

use super::*;

/// A strided matrix: element (i, j) at `ptr + i·rs + j·cs`. Serves op(A) and op(B) (a
/// transposed operand is the same storage with the strides swapped; they are only read,
/// through `at(..).cast_const()`) and C (row-major C has cs 1, the transposed problem's Cᵀ
/// rs 1).
#[derive(Clone, Copy)]
pub(super) struct Strided {
    pub(super) ptr: *mut f32,
    pub(super) rs: usize,
    pub(super) cs: usize,
}

impl Strided {
    /// Element (i, j). A method, so closures capture the whole (Sync) value.
    ///
    /// # Safety
    /// (i, j) is inside the matrix.
    pub(super) unsafe fn at(&self, i: usize, j: usize) -> *mut f32 {
        // SAFETY: the caller's contract.
        unsafe { self.ptr.add(i * self.rs + j * self.cs) }
    }

    /// The transpose: the same storage, strides swapped.
    pub(super) fn t(self) -> Strided {
        Strided {
            rs: self.cs,
            cs: self.rs,
            ..self
        }
    }
}

// SAFETY: the operands are borrowed (MatRef) and only read, C is borrowed uniquely
// (MatMut) and the threads write disjoint tiles of it (see `block`), all for the call's
// duration.
unsafe impl Send for Strided {}
unsafe impl Sync for Strided {}

/// Shape and operand of op(X) for a stored view X.
pub(super) fn operand(x: MatRef<'_>, t: Trans) -> (usize, usize, Strided) {
    let (ptr, rs) = (x.as_ptr().cast_mut(), x.row_stride());
    let stored = Strided { ptr, rs, cs: 1 };
    match t {
        Trans::N => (x.n_rows(), x.n_cols(), stored),
        Trans::T => (x.n_cols(), x.n_rows(), stored.t()),
    }
}

/// C as a strided target once C's shape is checked against (m, n): `None` when nothing
/// is left to do (an empty C, or k = 0, which zeroes C unless accumulating).
pub(super) fn target(
    kernel: &'static str,
    what_cols: &'static str,
    (m, n, k): (usize, usize, usize),
    c: &mut MatMut<'_>,
    accumulate: bool,
) -> Result<Option<Strided>, KernelError> {
    check_len(kernel, "rows of C (rows of op(A))", m, c.n_rows())?;
    check_len(kernel, what_cols, n, c.n_cols())?;
    if m == 0 || n == 0 {
        return Ok(None);
    }
    if k == 0 {
        if !accumulate {
            c.fill(0.0);
        }
        return Ok(None);
    }
    Ok(Some(Strided {
        ptr: c.as_mut_ptr(),
        rs: c.row_stride(),
        cs: 1,
    }))
}

thread_local! {
    /// The calling thread's B-block buffer, kept between calls (up to KC·NC floats). A
    /// worker that steals another product while it waits finds it borrowed and allocates.
    static B_PACK: RefCell<AlignedVec> = const { RefCell::new(AlignedVec::new()) };
    /// The calling thread's buffer for the panels of op(A) it packs when it sweeps every
    /// row panel itself ([`block`]), kept between blocks and calls (up to 8·KC·MR floats):
    /// a block used to allocate and zero its own.
    static A_PACK: RefCell<AlignedVec> = const { RefCell::new(AlignedVec::new()) };
}

/// Scratch buffers up to this many floats (16 MiB) stay with their thread between calls;
/// a larger one (the second half of a long-k product with a large C) is freed after use.
pub(super) const SCRATCH_KEPT_MAX: usize = 1 << 22;

/// Runs `f` on the calling thread's buffer `key`, grown to at least `len` floats (its
/// contents are whatever the last user left), or on a fresh one where this thread holds it
/// already (a worker that stole another product while it waits inside one) or where `len`
/// exceeds [`SCRATCH_KEPT_MAX`].
pub(super) fn with_scratch<R>(
    key: &'static std::thread::LocalKey<RefCell<AlignedVec>>,
    len: usize,
    f: impl FnOnce(&mut AlignedVec) -> R,
) -> R {
    key.with(|cell| {
        let mut owned = AlignedVec::new();
        let mut borrowed = cell.try_borrow_mut();
        let buf = match borrowed.as_deref_mut() {
            Ok(buf) if len <= SCRATCH_KEPT_MAX => buf,
            _ => &mut owned,
        };
        if buf.len() < len {
            *buf = AlignedVec::zeroed(len);
        }
        f(buf)
    })
}

/// Where a product's packed op(B) blocks come from.
#[derive(Clone, Copy)]
pub(super) enum BSource<'b> {
    /// Packed block by block into the calling thread's buffer.
    Strided(Strided),
    /// Packed beforehand ([`PackedB`]), shared by the products that use it.
    Packed(&'b PackedB),
}

thread_local! {
    /// The calling thread's buffer for the second half of a k-split product ([`run`]),
    /// kept between calls (m·n floats, up to [`SCRATCH_KEPT_MAX`]).
    static K_HALF: RefCell<AlignedVec> = const { RefCell::new(AlignedVec::new()) };
}

/// The blocked product on tile routine `K`.
///
/// A product of long k (∇W = Xᵀ·∇Y: 512×512 over k = 8000) runs as two halves of k, the
/// first into C and the second into a buffer added to C at the end, side by side on two
/// threads. Each half packs its own rows of op(B) and its own panels of op(A), so the
/// threads meet once, where one sweep of row panels per KC block met 31 times (a barrier
/// per block, with op(B)'s next block packed between): on the forced AVX2 path of a Zen 4
/// those products were 90–93 % of OpenBLAS at 2 threads (BENCHMARKS.md). Where the split
/// falls depends on k alone ([`k_blocks`]), so one thread computes the same bits. On two
/// threads the one done first then helps with the other's remaining blocks
/// ([`run_halves`]); on more, each half forks inside. The buffer is m·n floats, C's size
/// again, for the call.
///
/// # Safety
/// `a` addresses op(A) (m×k) in bounds, and `b` op(B) (k×n) (a `PackedB` for `K`'s NR, of
/// k×n); `c.at(i, j)` is valid for writes for i < m, j < n and aliases neither; the CPU
/// runs `K`.
pub(super) unsafe fn run<K: MicroKernel>(
    shape: (usize, usize, usize),
    a: Strided,
    b: BSource<'_>,
    c: Strided,
    accumulate: bool,
    parallel: bool,
) {
    let (m, n, k) = shape;
    let (kc, split) = k_blocks_of(k, K::K_STEP);
    let Some(split) = split else {
        // SAFETY: forwarded contract.
        unsafe { run_k::<K>(shape, a, b, c, accumulate, parallel, (0..k, kc)) };
        return;
    };
    with_scratch(&K_HALF, m * n, |buf| {
        let half = Strided {
            ptr: buf.as_mut_slice().as_mut_ptr(),
            rs: n,
            cs: 1,
        };
        // Each half forks inside only when there are threads beyond the two halves.
        let inner = parallel && rayon::current_num_threads() > 2;
        // SAFETY (both halves): forwarded contract for k ranges of op(A) and op(B); the
        // buffer holds m·n floats, written by the second half only, C by the first only.
        let first = || unsafe { run_k::<K>(shape, a, b, c, accumulate, inner, (0..split, kc)) };
        let second = || unsafe { run_k::<K>(shape, a, b, half, false, inner, (split..k, kc)) };
        if inner {
            rayon::join(first, second);
        } else if parallel {
            let halves = [(c, accumulate, 0..split), (half, false, split..k)];
            // SAFETY: as above.
            unsafe { run_halves::<K>(shape, a, b, halves, kc) };
        } else {
            first();
            second();
        }
        let add_rows = |rows: std::ops::Range<usize>| {
            for i in rows {
                // SAFETY: row i < m of the buffer, n floats.
                let h = unsafe { std::slice::from_raw_parts(half.at(i, 0), n) };
                if c.cs == 1 {
                    // SAFETY: row i of C, n contiguous floats (cs 1), this task's only.
                    let row = unsafe { std::slice::from_raw_parts_mut(c.at(i, 0), n) };
                    add_row(row, h);
                } else {
                    for (j, y) in h.iter().enumerate() {
                        // SAFETY: i < m, j < n: inside C.
                        unsafe { *c.at(i, j) += y };
                    }
                }
            }
        };
        if parallel {
            let per = m.div_ceil(4 * rayon::current_num_threads()).max(1);
            (0..m.div_ceil(per))
                .into_par_iter()
                .for_each(|p| add_rows(p * per..m.min((p + 1) * per)));
        } else {
            add_rows(0..m);
        }
    });
}

/// The two halves of k of [`run`] on two threads, each half's blocks in order by its own
/// thread, and each block's row panels claimed [`GROUP`] at a time, so that the thread
/// that finishes its half first computes groups of the other's remaining blocks. Static
/// halves finished apart whenever a neighbour slowed one core: on the forced AVX2 path of
/// a Zen 4, 23–26 ms against 29.4 ms for ∇W of 512×512 over k = 8000, where a quiet
/// minute gave 21.5–22.6 each (BENCHMARKS.md). The owner packs a block's op(B) only after
/// every group of the previous block is done, and a group adds its k block to its rows of
/// C after the previous block's, so each element sums its k blocks in the same order
/// whoever computes them: the same bits as one thread.
///
/// # Safety
/// As [`run`]; each half's C (its (c, accumulate, k range)) is m×n, written by that half
/// only, and its k range starts on a block of `kc_max`.
pub(super) unsafe fn run_halves<K: MicroKernel>(
    (m, n, _): (usize, usize, usize),
    a: Strided,
    b: BSource<'_>,
    halves: [(Strided, bool, std::ops::Range<usize>); 2],
    kc_max: usize,
) {
    use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering::*};
    /// A half's claims: (block + 1) << 32 | the next unclaimed group of that block; 0
    /// before its first block, `DONE` after its last.
    struct Claims {
        state: AtomicU64,
        /// Groups of the current block finished.
        finished: AtomicUsize,
        /// The current block's packed op(B).
        b_blk: AtomicPtr<f32>,
    }
    const DONE: u64 = (u32::MAX as u64) << 32;
    const GROUPS: u64 = u32::MAX as u64;
    let nc_max = nc_block();
    let m_panels = m.div_ceil(K::MR);
    let groups = m_panels.div_ceil(GROUP);
    let claims = [(); 2].map(|()| Claims {
        state: AtomicU64::new(0),
        finished: AtomicUsize::new(0),
        b_blk: AtomicPtr::new(std::ptr::null_mut()),
    });
    let per_column_block = |h: usize| halves[h].2.len().div_ceil(kc_max);
    let blocks = |h: usize| n.div_ceil(nc_max) * per_column_block(h);
    // Block i of half h: (column block index, its columns), its k range.
    let geometry = |h: usize, i: usize| {
        let ks = &halves[h].2;
        let (jb, pc) = (
            i / per_column_block(h),
            ks.start + i % per_column_block(h) * kc_max,
        );
        let jc = jb * nc_max;
        ((jb, jc, nc_max.min(n - jc)), (pc, kc_max.min(ks.end - pc)))
    };
    // Group g of block i of half h against its packed op(B) at `b_blk`.
    let group = |h: usize, i: usize, g: usize, b_blk: *const f32| {
        let ((_, jc, nc), (pc, kc)) = geometry(h, i);
        let len = K::steps(kc) * nc.div_ceil(K::NR) * K::NR;
        let (c, accumulate, ks) = &halves[h];
        // SAFETY: b_blk is the owner's block i, len floats, unchanged until every group of
        // it is finished (the owner waits); the rows of group g are this claim's alone
        // (forwarded contract otherwise).
        unsafe {
            let b_blk = std::slice::from_raw_parts(b_blk, len);
            let ps = g * GROUP..m_panels.min((g + 1) * GROUP);
            let overwrite = pc == ks.start && !accumulate;
            block::<K>(
                m,
                a,
                (jc, nc),
                (pc, kc),
                b_blk,
                *c,
                overwrite,
                Rows::Own(ps),
            )
        }
    };
    // Half h by its owner: each block packed, published, its groups claimed and computed,
    // then every group awaited (the other thread may hold some).
    let own = |h: usize| {
        let sh = &claims[h];
        let b_len = b_scratch_len::<K>(b, halves[h].2.len(), kc_max, n.min(nc_max));
        with_scratch(&B_PACK, b_len, |buf| {
            for i in 0..blocks(h) {
                let ((jb, jc, nc), (pc, kc)) = geometry(h, i);
                // SAFETY: forwarded contract.
                let b_blk = unsafe { b_block::<K>(b, buf, (jb, jc, nc), (pc, kc), kc_max, false) };
                sh.b_blk.store(b_blk.as_ptr().cast_mut(), Relaxed);
                sh.finished.store(0, Relaxed);
                sh.state.store((i as u64 + 1) << 32, Release);
                loop {
                    let g = (sh.state.fetch_add(1, AcqRel) & GROUPS) as usize;
                    if g >= groups {
                        break;
                    }
                    group(h, i, g, b_blk.as_ptr());
                    sh.finished.fetch_add(1, Release);
                }
                while sh.finished.load(Acquire) < groups {
                    std::hint::spin_loop();
                }
            }
            sh.state.store(DONE, Release);
        });
    };
    // Groups of half h by the other thread, while its owner has blocks to come; nothing
    // when it has not started (then it runs on this thread after, `rayon::join`).
    let help = |h: usize| {
        let sh = &claims[h];
        loop {
            let v = sh.state.load(Acquire);
            let i = (v >> 32) as usize;
            if i == 0 || v >= DONE {
                return;
            }
            if (v & GROUPS) as usize >= groups {
                if i == blocks(h) {
                    return;
                }
                std::hint::spin_loop();
                continue;
            }
            let v = sh.state.fetch_add(1, AcqRel);
            let (i, g) = ((v >> 32) as usize, (v & GROUPS) as usize);
            if i == 0 || v >= DONE || g >= groups {
                continue;
            }
            group(h, i - 1, g, sh.b_blk.load(Relaxed));
            #[cfg(test)]
            super::tests::HELPED.fetch_add(1, Relaxed);
            sh.finished.fetch_add(1, Release);
        }
    };
    rayon::join(
        || {
            own(0);
            help(1)
        },
        || {
            own(1);
            help(0)
        },
    );
}

/// Floats of the B-block buffer that [`b_block`] packs into for `k_len` rows of op(B) in
/// blocks of `kc_max` and blocks of `nc` columns; none for a prepacked op(B).
pub(super) fn b_scratch_len<K: MicroKernel>(
    b: BSource<'_>,
    k_len: usize,
    kc_max: usize,
    nc: usize,
) -> usize {
    match b {
        BSource::Strided(_) => K::steps(kc_max.min(k_len)) * nc.div_ceil(K::NR) * K::NR,
        BSource::Packed(_) => 0,
    }
}

/// Block (jc, pc) of op(B) for tile routine `K` (column block jb): packed into `buf` (by
/// the pool's threads with `parallel`), or the prepacked one.
///
/// # Safety
/// The block is inside op(B); `buf` holds its packing; pc is a multiple of `kc_max`.
pub(super) unsafe fn b_block<'a, K: MicroKernel>(
    b: BSource<'a>,
    buf: &'a mut AlignedVec,
    (jb, jc, nc): (usize, usize, usize),
    (pc, kc): (usize, usize),
    kc_max: usize,
    parallel: bool,
) -> &'a [f32] {
    match b {
        BSource::Strided(b) => {
            let len = K::steps(kc) * nc.div_ceil(K::NR) * K::NR;
            let dst = &mut buf.as_mut_slice()[..len];
            // SAFETY: the block is inside op(B) (the caller's contract).
            unsafe { pack_b_block::<K>(b, (jc, nc), (pc, kc), dst, parallel) };
            dst
        }
        BSource::Packed(p) => p.block(jb, pc / kc_max),
    }
}

/// [`run`] over the rows `ks` of op(B) (columns of op(A)), in blocks of `kc_max` elements
/// from a range that starts on one ([`k_blocks`]): C = (or +=) op(A)[:, ks]·op(B)[ks, :],
/// the blocks added in order.
///
/// # Safety
/// As [`run`].
pub(super) unsafe fn run_k<K: MicroKernel>(
    (m, n, _): (usize, usize, usize),
    a: Strided,
    b: BSource<'_>,
    c: Strided,
    accumulate: bool,
    parallel: bool,
    (ks, kc_max): (std::ops::Range<usize>, usize),
) {
    let nc_max = nc_block();
    debug_assert_eq!(ks.start % kc_max, 0);
    let b_len = b_scratch_len::<K>(b, ks.len(), kc_max, n.min(nc_max));
    let rows = || match parallel {
        true => Rows::Shared,
        false => Rows::Own(0..m.div_ceil(K::MR)),
    };
    with_scratch(&B_PACK, b_len, |buf| {
        for (jb, jc) in (0..n).step_by(nc_max).enumerate() {
            let nc = nc_max.min(n - jc);
            for pc in ks.clone().step_by(kc_max) {
                let kc = kc_max.min(ks.end - pc);
                // SAFETY: forwarded contract.
                let b_blk =
                    unsafe { b_block::<K>(b, buf, (jb, jc, nc), (pc, kc), kc_max, parallel) };
                // SAFETY: forwarded contract; b_blk is the (jc, pc) block for K's NR.
                unsafe {
                    block::<K>(
                        m,
                        a,
                        (jc, nc),
                        (pc, kc),
                        b_blk,
                        c,
                        pc == ks.start && !accumulate,
                        rows(),
                    )
                };
            }
        }
    });
}

/// Which row panels of a block [`block`] computes, and on which threads.
pub(super) enum Rows {
    /// Every one, shared by the threads of the pool.
    Shared,
    /// These, on the calling thread alone.
    Own(std::ops::Range<usize>),
}

/// One (jc, pc) block: MR-row panels of op(A) (`rows`) against every packed B panel.
///
/// # Safety
/// As [`run`]; `b_blk` holds the block's ⌈nc/NR⌉ panels of kc·NR floats, 64-byte aligned;
/// the panels of `Rows::Own` are below ⌈m/MR⌉.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn block<K: MicroKernel>(
    m: usize,
    a: Strided,
    (jc, nc): (usize, usize),
    (pc, kc): (usize, usize),
    b_blk: &[f32],
    c: Strided,
    overwrite: bool,
    rows: Rows,
) {
    let steps = K::steps(kc);
    let panel_b = steps * K::NR;
    let n_panels = nc.div_ceil(K::NR);
    let b_blk = &b_blk[..n_panels * panel_b];
    // A C of one or two B panels (a few-column classifier) reads a row-major op(A) in
    // place: packing it would gather all of X for that handful of panels (5935×1024·
    // 1024×7: the pack, not the tiles, was the time; BENCHMARKS.md). Not in bf16 pairs.
    let direct = a.cs == 1 && n_panels <= 2 && K::K_STEP == 1;
    // Row panel p of op(A), its rows given as `a_rows`, against B panels `qs`; with
    // `next`, the lines of the next rows of op(A) to pack, brought towards L1 meanwhile
    // (part q of them before tile q).
    let sweep =
        |a_rows: ARows, p: usize, qs: std::ops::Range<usize>, next: Option<(*const f32, usize)>| {
            let i0 = p * K::MR;
            let rows = K::MR.min(m - i0);
            let (first, count) = (qs.start, qs.len());
            let j0 = first * K::NR;
            let tiles = CTile {
                // SAFETY: (i0, jc + j0) is inside C.
                ptr: unsafe { c.at(i0, jc + j0) },
                rs: c.rs,
                cs: c.cs,
                rows,
                cols: (nc - j0).min(count * K::NR),
                overwrite,
            };
            let each = |q: usize| {
                if let Some((src, lanes)) = next {
                    prefetch_part(src, a.rs, a.cs, lanes, kc, q, count);
                }
            };
            // SAFETY: the tiles' rows i0..i0+rows, columns jc+j0.. jc+nc are in C and in
            // this panel's rows only; A's rows are a packed kc·MR panel or op(A) in place
            // (row-major: a.cs is 1); each B panel holds kc·NR floats, 64-byte aligned
            // (AlignedVec, panel_b a multiple of 16 floats); the CPU runs K (the caller's
            // contract).
            unsafe {
                K::row(
                    steps,
                    a_rows,
                    b_blk[first * panel_b..].as_ptr(),
                    panel_b,
                    tiles,
                    each,
                )
            }
        };
    // Row panel p of op(A), packed into `a_buf` (or read in place), against B panels `qs`.
    let row_panel = |a_buf: &mut AlignedVec, p: usize, qs: std::ops::Range<usize>| {
        let i0 = p * K::MR;
        let rows = K::MR.min(m - i0);
        // SAFETY: rows i0..i0+rows, columns pc..pc+kc of op(A) are in bounds.
        let src = unsafe { a.at(i0, pc) }.cast_const();
        let a_rows = if direct {
            ARows::InPlace {
                ptr: src,
                lda: a.rs,
            }
        } else {
            let a_pan = &mut a_buf.as_mut_slice()[..steps * K::MR];
            // SAFETY: as above; the CPU runs K (the caller's contract).
            unsafe { K::pack_a(a_pan, src, a.rs, a.cs, rows, kc, K::MR) };
            ARows::Packed(a_pan.as_ptr())
        };
        // The next panel's rows, brought towards L1 while this one computes (its packing
        // otherwise waits on memory: X is read once, from DRAM).
        let next = (K::PREFETCH_NEXT_A && !direct && i0 + K::MR < m).then(|| {
            let rows = K::MR.min(m - i0 - K::MR);
            // SAFETY: row i0 + MR < m, column pc < k of op(A).
            (unsafe { a.at(i0 + K::MR, pc) }.cast_const(), rows)
        });
        sweep(a_rows, p, qs, next)
    };
    let m_panels = m.div_ceil(K::MR);
    let threads = rayon::current_num_threads();
    let a_buf = || AlignedVec::zeroed(K::steps(KC * K::K_STEP) * K::MR);
    let own = match rows {
        Rows::Shared if m_panels >= 2 * threads => {
            (0..m_panels)
                .into_par_iter()
                .for_each_init(a_buf, |buf, p| row_panel(buf, p, 0..n_panels));
            return;
        }
        Rows::Shared => None,
        Rows::Own(ps) => Some(ps),
    };
    let Some(ps) = own else {
        // Few row panels (a transposed narrow C: 7 rows are 2 panels): the threads split
        // the B panels instead, each packing the row panels itself (MR·KC floats per
        // group, against MR·NR·KC multiply-adds per tile). 1024×7 over k 5935 on 2
        // threads: 7.0 ms with 2 row-panel tasks, one of 1 row.
        let groups = (2 * threads).min(n_panels);
        (0..groups).into_par_iter().for_each_init(a_buf, |buf, g| {
            for p in 0..m_panels {
                row_panel(buf, p, g * n_panels / groups..(g + 1) * n_panels / groups);
            }
        });
        return;
    };
    if a.rs == 1 && K::K_STEP <= 2 {
        // op(A) transposed (Xᵀ of ∇W = Xᵀ·∇Y): a step of a panel is MR floats of one row
        // of X, 24 bytes of a line, and X's rows lie a power of two apart (2 or 4 KiB), so
        // the lines of one panel's 256 rows share a few L1 sets and are gone by the next
        // panel, which reads them again. Panels are packed GROUP at a time instead (192
        // columns of X, twelve whole lines of each row), 8 rows of X at a time (32 for bf16)
        // across the group, then swept one by one. A pack went from 6 % of a 512×512
        // product over k = 8000 to 3 % (perf, AVX2 path, one thread) with groups of 8,
        // and the product from 89 to 97 % of OpenBLAS's with groups of 32 (blocking.rs).
        // Only where one thread sweeps every row panel (one thread, or each half of a split
        // k, `run`) or claims them a group at a time (`run_halves`): threads that share the
        // row panels take them one by one (a group would leave one a group short).
        let rows_at = rows_per_part(K::K_STEP);
        with_scratch(&A_PACK, GROUP * steps * K::MR, |group| {
            for p0 in ps.clone().step_by(GROUP) {
                let panels = GROUP.min(ps.end - p0);
                for t0 in (0..kc).step_by(rows_at) {
                    let t_n = rows_at.min(kc - t0);
                    let bufs = group.as_mut_slice().chunks_exact_mut(steps * K::MR);
                    for (g, a_pan) in bufs.take(panels).enumerate() {
                        let i0 = (p0 + g) * K::MR;
                        let rows = K::MR.min(m - i0);
                        // SAFETY: rows i0..i0+rows, columns pc+t0..+t_n of op(A) are in
                        // bounds; the CPU runs K (the caller's contract).
                        unsafe {
                            K::pack_a_part(
                                a_pan,
                                steps,
                                t0,
                                a.at(i0, pc + t0).cast_const(),
                                a.rs,
                                a.cs,
                                rows,
                                t_n,
                                K::MR,
                            )
                        };
                    }
                }
                // The next group's rows, brought towards L1 while this group's last panel
                // computes, a few lines before each tile. Spread over the whole group they
                // read 1.5–3 points lower (forced AVX2, tn 8000×512, 1 thread; BENCHMARKS.md),
                // probably because the first lines left L2 before their pack: X's rows lie
                // 2 KiB apart, in a few sets, beside the B block.
                let next_i0 = (p0 + panels) * K::MR;
                let next = (K::PREFETCH_NEXT_A && p0 + panels < ps.end).then(|| {
                    // SAFETY: row next_i0 < m, column pc < k of op(A).
                    let src = unsafe { a.at(next_i0, pc) }.cast_const();
                    (src, (GROUP * K::MR).min(m - next_i0))
                });
                let bufs = group.as_slice().chunks_exact(steps * K::MR);
                for (g, a_pan) in bufs.take(panels).enumerate() {
                    let next = next.filter(|_| g + 1 == panels);
                    sweep(ARows::Packed(a_pan.as_ptr()), p0 + g, 0..n_panels, next);
                }
            }
        });
    } else {
        with_scratch(&A_PACK, K::steps(KC * K::K_STEP) * K::MR, |buf| {
            ps.for_each(|p| row_panel(buf, p, 0..n_panels))
        });
    }
}
