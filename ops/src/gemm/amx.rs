//! The bf16 product on Intel's AMX tiles (Sapphire Rapids and later Xeons): the same
//! arithmetic as [`super::bf16`] — op(A) and op(B) rounded to bfloat16 as they are packed,
//! products accumulated in f32, C and everything outside the product f32 — with
//! `tdpbf16ps`, which multiplies a 16×32 bf16 tile by a 32×16 one into a 16×16 f32 tile:
//! 16,384 multiply-adds an instruction against `vdpbf16ps`'s 32. oneDNN (PyTorch's bf16
//! matmul) runs there, at about ten times the f32 rate (issue 53, BENCHMARKS.md).
//!
//! The tile, 32×32: C's four 16×16 quarters in tmm0–3, two A tiles (16 rows × 16 pairs)
//! in tmm4–5, two B tiles (16 pairs × 16 columns) in tmm6–7; each chunk of 16 pairs loads
//! the four and issues four `tdpbf16ps`, each A and B tile used twice. Layouts:
//! * B's panel is the bf16 path's (`pack_pairs`: step s, lane j at s·32 + j, a pair of
//!   k per 32 bits), which is a B tile as stored: row s of the tile is step s, the 16
//!   columns of one half 64 bytes, the halves 64 bytes apart (stride 128).
//! * A's panel is row-major instead (`MicroKernel::pack_a`): row i's steps contiguous,
//!   `steps` pairs apart, since a row of an A tile is 16 consecutive pairs of one row.
//! * Each panel's steps are padded with zeros to a multiple of 16 (`MicroKernel::steps`),
//!   so every chunk is whole (a pair of zeros adds 0·0).
//!
//! Arithmetic: each element starts from C (or zero when overwriting) and adds its k
//! chunks in order, each chunk its pairs in order (`tdpbf16ps` as the SDM writes it: the
//! low product, then the high one, each sum rounded to f32 with subnormals flushed); a
//! tile at C's edge computes on a copy of its corner the same way. So the bits depend on
//! neither the thread count, the split, nor where a tile falls. They are not the
//! `vdpbf16ps` tiles' (which sum a block from zero before adding it to C, and add a
//! pair's high product first).
//!
//! Using the tiles needs the kernel's leave once per process (`arch_prctl
//! (ARCH_REQ_XCOMP_PERM, XTILEDATA)`, Linux 5.16 and later) and a tile configuration per
//! use: each row of tiles loads its configuration and releases the tiles at its end, so
//! neither another library's configuration nor a context switch's save of 8 KiB of tile
//! state is left behind. `SAINTFLOW_AMX=off` keeps bf16 on the AVX512_BF16 tiles (to
//! compare the two, or where tiles are unwanted).

use std::sync::OnceLock;

use super::bf16::Avx512Bf16;
#[cfg(target_arch = "x86_64")]
use super::bf16::{lane_pairs, low_mask, run_pairs};
use super::kernel::{ARows, CTile, MicroKernel};

/// The environment variable that turns the AMX tiles off (`off` or `0`).
pub const AMX_ENV: &str = "SAINTFLOW_AMX";

/// Whether this CPU and kernel run the AMX bf16 tiles (AMX-TILE, AMX-BF16, the kernel's
/// leave to use them, and the AVX512_BF16 the packing converts with). Asked once.
pub fn available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| cpu_has_amx() && super::bf16::available() && permitted())
}

/// Whether bf16 products run on the AMX tiles: [`available`], and not turned off by
/// `SAINTFLOW_AMX`. Read once per process; a value [`from_env`] refuses leaves them on
/// (the command line refuses it first).
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| from_env().unwrap_or(None) != Some(false) && available())
}

/// What `SAINTFLOW_AMX` asks: `Ok(None)` when unset or empty, `Some(true)` for `on`
/// (`1`, `yes`: where the CPU has them, the default anyway), `Some(false)` for `off` (`0`,
/// `no`); an error naming the accepted values otherwise.
pub fn from_env() -> Result<Option<bool>, String> {
    let v = match std::env::var(AMX_ENV) {
        Err(std::env::VarError::NotPresent) => return Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => {
            return Err(format!("{AMX_ENV}: not UTF-8: {v:?}; expected on or off"))
        }
        Ok(v) => v,
    };
    match v.trim().to_ascii_lowercase().as_str() {
        "" => Ok(None),
        "on" | "1" | "yes" => Ok(Some(true)),
        "off" | "0" | "no" => Ok(Some(false)),
        _ => Err(format!(
            "{AMX_ENV}: unknown value {v:?}; expected on or off"
        )),
    }
}

/// CPUID leaf 7: AMX-BF16 (EDX bit 22) and AMX-TILE (bit 24).
fn cpu_has_amx() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid_count;
        // Leaf 7 only where the CPU has it.
        if __cpuid_count(0, 0).eax < 7 {
            return false;
        }
        let edx = __cpuid_count(7, 0).edx;
        edx & (1 << 22) != 0 && edx & (1 << 24) != 0
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Asks Linux for the tile data state (once per process; every thread may then use it).
fn permitted() -> bool {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
        const XFEATURE_XTILEDATA: libc::c_long = 18;
        // SAFETY: arch_prctl with this request only changes the process's permitted
        // extended state; it reads no memory of ours.
        let r = unsafe {
            libc::syscall(
                libc::SYS_arch_prctl,
                ARCH_REQ_XCOMP_PERM,
                XFEATURE_XTILEDATA,
            )
        };
        r == 0
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    false
}

/// Pairs per tile row (64 bytes).
const CHUNK: usize = 16;

/// The shortest k whose bf16 products run on these tiles by default (one whole chunk of
/// 16 pairs). A shorter one — ∇H = ∇Y·W_outᵀ of a classifier, k = its classes —
/// padded every row to a chunk of 16 pairs: its panels of op(B) 16 times the pairs, packed
/// per row block of the chain that holds it (12–14 ms a JPDC step against the f32 path's
/// 9.5); it runs on the AVX512_BF16 tiles, whose steps are single pairs.
pub const K_MIN: usize = 2 * CHUNK;

/// How many chunks ahead the tile prefetches B.
const PREFETCH_CHUNKS: usize = 2;

/// The AMX tile, 32×32.
pub(crate) struct AmxBf16;

impl MicroKernel for AmxBf16 {
    const MR: usize = 32;
    const NR: usize = 32;
    const K_STEP: usize = 2;

    const PREFETCH_NEXT_A: bool = false;

    #[inline(always)]
    fn steps(kc: usize) -> usize {
        kc.div_ceil(2).next_multiple_of(CHUNK)
    }

    unsafe fn pack(
        dst: &mut [f32],
        src: *const f32,
        lane_stride: usize,
        k_stride: usize,
        lanes: usize,
        kc: usize,
        width: usize,
    ) {
        // The bf16 tiles' pairs, then the padding steps zeroed: dst holds steps(kc)·width
        // slots, of which the pairs fill the first ⌈kc/2⌉·width.
        // SAFETY: forwarded contract (the CPU has AVX512_BF16: `available`).
        unsafe { Avx512Bf16::pack(dst, src, lane_stride, k_stride, lanes, kc, width) };
        dst[kc.div_ceil(2) * width..Self::steps(kc) * width].fill(0.0);
    }

    unsafe fn pack_a(
        dst: &mut [f32],
        src: *const f32,
        lane_stride: usize,
        k_stride: usize,
        lanes: usize,
        kc: usize,
        width: usize,
    ) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: forwarded contract (the CPU has AVX512_BF16: `available`); a whole
        // panel: rows steps(kc) apart.
        unsafe {
            let steps = Self::steps(kc);
            pack_rows(
                dst,
                (steps, 0),
                src,
                lane_stride,
                k_stride,
                lanes,
                kc,
                width,
            )
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (dst, src, lane_stride, k_stride, lanes, kc, width);
    }

    unsafe fn pack_a_part(
        panel: &mut [f32],
        steps: usize,
        t0: usize,
        src: *const f32,
        lane_stride: usize,
        k_stride: usize,
        lanes: usize,
        t_n: usize,
        width: usize,
    ) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: forwarded contract (t0 a multiple of 32, so the part's padded pairs end
        // by the panel's `steps`).
        unsafe {
            let at = (steps, t0 / 2);
            pack_rows(panel, at, src, lane_stride, k_stride, lanes, t_n, width)
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (
            panel,
            steps,
            t0,
            src,
            lane_stride,
            k_stride,
            lanes,
            t_n,
            width,
        );
    }

    unsafe fn tile(steps: usize, a: ARows, b: *const f32, c: CTile) {
        // SAFETY: forwarded contract.
        unsafe { Self::row(steps, a, b, 0, c, |_| {}) }
    }

    unsafe fn row<F: FnMut(usize)>(
        steps: usize,
        a: ARows,
        b: *const f32,
        panel_b: usize,
        c: CTile,
        mut each: F,
    ) {
        let ARows::Packed(a) = a else {
            unreachable!("the bf16 path always packs op(A)")
        };
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU runs the tiles (`available`, checked by the caller's choice of
        // this routine); each tile's panels and C corner as the contract states.
        unsafe {
            configure();
            let tiles = c.cols.div_ceil(Self::NR);
            for q in 0..tiles {
                each(q);
                // The next tile's rows of C, which it loads first when accumulating.
                if q + 1 < tiles {
                    super::kernel::prefetch_c(&c.nth(q + 1, Self::NR));
                }
                tile_32x32(
                    steps,
                    a.cast(),
                    b.add(q * panel_b).cast(),
                    c.nth(q, Self::NR),
                );
            }
            release();
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (steps, a, b, panel_b, c, &mut each);
    }
}

/// The tile configuration (palette 1): eight tiles of 16 rows × 64 bytes.
#[repr(C, align(64))]
struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    colsb: [u16; 16],
    rows: [u8; 16],
}

/// Loads the configuration every tile routine here uses.
///
/// # Safety
/// The CPU has AMX and the process the kernel's leave ([`available`]).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn configure() {
    static CONFIG: TileConfig = TileConfig {
        palette: 1,
        start_row: 0,
        reserved: [0; 14],
        colsb: [64, 64, 64, 64, 64, 64, 64, 64, 0, 0, 0, 0, 0, 0, 0, 0],
        rows: [16, 16, 16, 16, 16, 16, 16, 16, 0, 0, 0, 0, 0, 0, 0, 0],
    };
    // SAFETY: the caller's contract; CONFIG is 64 readable bytes.
    unsafe {
        std::arch::asm!(
            "ldtilecfg [{cfg}]",
            cfg = in(reg) &CONFIG,
            options(nostack, readonly, preserves_flags)
        )
    }
}

/// Returns the tiles to their initial state.
///
/// # Safety
/// As [`configure`].
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn release() {
    // SAFETY: the caller's contract.
    unsafe { std::arch::asm!("tilerelease", options(nostack, nomem, preserves_flags)) }
}

/// One 32×32 tile over `steps` pairs (a multiple of 16): `a` is the row-major A panel
/// (32 rows of `steps` pairs), `b` the B panel (`steps` rows of 32 pairs, 64-byte
/// aligned). C's quarters are loaded into the accumulators (zeroed when overwriting),
/// the chunks added in order, and stored back: a whole tile straight from and to C, a
/// tile at C's edge through a 32×32 copy of its corner (zeros around it), so that every
/// element is the same sum wherever its tile falls.
///
/// # Safety
/// The tiles are configured ([`configure`]); the panels hold what is stated; the tile's
/// corner of C is valid for reads and writes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile_32x32(steps: usize, a: *const u32, b: *const u32, c: CTile) {
    use std::arch::asm;
    use std::arch::x86_64::*;
    debug_assert_eq!(steps % CHUNK, 0);
    #[repr(align(64))]
    struct Staged([f32; 32 * 32]);
    let whole = c.rows == 32 && c.cols == 32 && c.cs == 1;
    // Zeroed only at C's edge (4 KiB per tile was 15 % of a whole tile's time).
    let mut staged = std::mem::MaybeUninit::<Staged>::uninit();
    let (base, rs) = if whole {
        (c.ptr, c.rs)
    } else {
        let staged = staged.write(Staged([0.0; 32 * 32]));
        if !c.overwrite {
            for i in 0..c.rows {
                for j in 0..c.cols {
                    // SAFETY: i < rows, j < cols: inside the corner (the contract).
                    staged.0[i * 32 + j] = unsafe { *c.ptr.add(i * c.rs + j * c.cs) };
                }
            }
        }
        (staged.0.as_mut_ptr(), 32)
    };
    let quarters = [
        base,
        base.wrapping_add(16),
        base.wrapping_add(16 * rs),
        base.wrapping_add(16 * rs + 16),
    ];
    let rs_bytes = rs * 4;
    // SAFETY: the quarters are 16 rows of 16 floats, rs floats apart, inside the corner
    // of C or the staged copy.
    unsafe {
        if c.overwrite {
            asm!(
                "tilezero tmm0",
                "tilezero tmm1",
                "tilezero tmm2",
                "tilezero tmm3",
                out("tmm0") _, out("tmm1") _, out("tmm2") _, out("tmm3") _,
                options(nostack, nomem, preserves_flags)
            );
        } else {
            asm!(
                "tileloadd tmm0, [{c0} + {rs}]",
                "tileloadd tmm1, [{c1} + {rs}]",
                "tileloadd tmm2, [{c2} + {rs}]",
                "tileloadd tmm3, [{c3} + {rs}]",
                c0 = in(reg) quarters[0],
                c1 = in(reg) quarters[1],
                c2 = in(reg) quarters[2],
                c3 = in(reg) quarters[3],
                rs = in(reg) rs_bytes,
                out("tmm0") _, out("tmm1") _, out("tmm2") _, out("tmm3") _,
                options(nostack, readonly, preserves_flags)
            );
        }
    }
    let sa = steps * 4;
    let sb = AmxBf16::NR * 4;
    // SAFETY: each chunk reads A rows 0–15 and 16–31 at pairs s0..s0+16 (inside the
    // panel: s0 + 16 ≤ steps) and B rows s0..s0+16, both halves; prefetches never fault.
    unsafe {
        for s0 in (0..steps).step_by(CHUNK) {
            // B's chunk after next (2 KiB, 32 lines) towards L1: a tile load from L2
            // waits on its lines, and without renaming of tile registers the next loads
            // wait on it (+20–25 % on the step's shapes). Past the panel's end it is the
            // next panel's start, which the next tile reads.
            let ahead = b
                .wrapping_add((s0 + PREFETCH_CHUNKS * CHUNK) * AmxBf16::NR)
                .cast::<i8>();
            for line in 0..32 {
                _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(64 * line));
            }
            let a0 = a.add(s0);
            let a1 = a.add(16 * steps + s0);
            let b0 = b.add(s0 * AmxBf16::NR);
            let b1 = b0.add(16);
            asm!(
                "tileloadd tmm4, [{a0} + {sa}]",
                "tileloadd tmm6, [{b0} + {sb}]",
                "tileloadd tmm7, [{b1} + {sb}]",
                "tdpbf16ps tmm0, tmm4, tmm6",
                "tileloadd tmm5, [{a1} + {sa}]",
                "tdpbf16ps tmm1, tmm4, tmm7",
                "tdpbf16ps tmm2, tmm5, tmm6",
                "tdpbf16ps tmm3, tmm5, tmm7",
                a0 = in(reg) a0,
                a1 = in(reg) a1,
                b0 = in(reg) b0,
                b1 = in(reg) b1,
                sa = in(reg) sa,
                sb = in(reg) sb,
                out("tmm0") _, out("tmm1") _, out("tmm2") _, out("tmm3") _,
                out("tmm4") _, out("tmm5") _, out("tmm6") _, out("tmm7") _,
                options(nostack, readonly, preserves_flags)
            );
        }
        asm!(
            "tilestored [{c0} + {rs}], tmm0",
            "tilestored [{c1} + {rs}], tmm1",
            "tilestored [{c2} + {rs}], tmm2",
            "tilestored [{c3} + {rs}], tmm3",
            c0 = in(reg) quarters[0],
            c1 = in(reg) quarters[1],
            c2 = in(reg) quarters[2],
            c3 = in(reg) quarters[3],
            rs = in(reg) rs_bytes,
            options(nostack, preserves_flags)
        );
    }
    if !whole {
        // SAFETY: written above (not whole); forwarded contract; the staged tile already
        // holds C's part.
        unsafe {
            let staged = staged.assume_init_ref();
            super::kernel::store_partial(
                &staged.0,
                32,
                CTile {
                    overwrite: true,
                    ..c
                },
            )
        }
    }
}

/// Packs `lanes` rows × `kc` elements of k into `width` rows of `steps(kc)` pairs each:
/// row l's pair s at `l·stride + first + s` (a whole panel: `stride` = `steps(kc)`,
/// `first` 0; a part of k of a panel packed part by part: the panel's steps and the part's
/// first pair). What an A tile reads. Rows past `lanes` and pairs past ⌈kc/2⌉ are zero;
/// each pair rounds as [`super::bf16::round`].
///
/// # Safety
/// The CPU has AVX512_BF16; the elements named are readable (element (l, t) at
/// `src + l·lane_stride + t·k_stride`); `dst` holds `(width − 1)·stride + first +
/// steps(kc)` slots; `first + steps(kc)` ≤ `stride`; `lanes` ≤ `width`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16,avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn pack_rows(
    dst: &mut [f32],
    (stride, first): (usize, usize),
    src: *const f32,
    lane_stride: usize,
    k_stride: usize,
    lanes: usize,
    kc: usize,
    width: usize,
) {
    use std::arch::x86_64::*;
    let steps = AmxBf16::steps(kc);
    assert!(
        width > 0
            && first + steps <= stride
            && dst.len() >= (width - 1) * stride + first + steps
            && lanes <= width
    );
    for l in lanes..width {
        dst[l * stride + first..l * stride + first + steps].fill(0.0);
    }
    let d = dst.as_mut_ptr().cast::<u32>().wrapping_add(first);
    let pairs = kc.div_ceil(2);
    if k_stride == 1 {
        // A row's k run is contiguous: 32 elements (16 pairs) converted at a time, in
        // order, straight into the row.
        for l in 0..lanes {
            // SAFETY: row l < lanes (the contract); the masked loads read elements
            // t..t+n of the run only; the stores write pairs t/2.. of row l, inside dst.
            unsafe {
                let row = src.add(l * lane_stride);
                let out = d.add(l * stride);
                let mut t = 0;
                while t < kc {
                    let n = (kc - t).min(32);
                    let h = run_pairs(row.add(t), n);
                    _mm512_mask_storeu_epi32(out.add(t / 2).cast(), low_mask(n.div_ceil(2)), h);
                    t += 32;
                }
                std::ptr::write_bytes(out.add(pairs), 0, steps - pairs);
            }
        }
    } else if lane_stride == 1 {
        // Rows contiguous (op(A) transposed: Xᵀ of ∇W = Xᵀ·∇Y): per block of 16 rows and
        // 16 pairs, each pair's 16 rows converted together (as `pack_pairs` does), then
        // the 16×16 block of pairs transposed into the rows.
        for s0 in (0..steps).step_by(CHUNK) {
            // The next chunk's 32 rows towards L1 meanwhile (the loads waited on them one
            // by one: each row's lanes are lines of their own, k_stride apart). Past kc
            // the addresses are only computed, never read.
            for t in 2 * (s0 + CHUNK)..2 * (s0 + 2 * CHUNK) {
                let row = src.wrapping_add(t * k_stride).cast::<i8>();
                for off in (0..4 * lanes).step_by(64) {
                    _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(off));
                }
            }
            // Both 16-lane halves of a row while its lines are at hand.
            for l0 in (0..lanes).step_by(16) {
                let m = low_mask((lanes - l0).min(16));
                let mut block = [_mm512_setzero_si512(); 16];
                for (j, v) in block.iter_mut().enumerate() {
                    let t = 2 * (s0 + j);
                    if t >= kc {
                        break;
                    }
                    // SAFETY: rows l0.. (masked to lanes) of elements t and t + 1 < kc.
                    unsafe {
                        let r0 = src.add(t * k_stride + l0);
                        *v = lane_pairs(r0, (t + 1 < kc).then(|| r0.add(k_stride)), m);
                    }
                }
                let rows = transpose16(block);
                for (l, r) in rows.iter().enumerate().take(width.min(l0 + 16) - l0) {
                    // SAFETY: row l0 + l < width, pairs s0..s0+16 ≤ steps: inside dst.
                    // Rows past `lanes` store the zeros their masked loads gave.
                    unsafe { _mm512_storeu_si512(d.add((l0 + l) * stride + s0).cast(), *r) };
                }
            }
        }
    } else {
        for l in 0..lanes {
            for s in 0..steps {
                let at = |t: usize| {
                    if t < kc {
                        // SAFETY: l < lanes, t < kc (the contract).
                        super::bf16::round(unsafe { *src.add(l * lane_stride + t * k_stride) })
                            as u32
                    } else {
                        0
                    }
                };
                // SAFETY: l < width, s < steps.
                unsafe { *d.add(l * stride + s) = at(2 * s) | (at(2 * s + 1) << 16) };
            }
        }
    }
}

/// The transpose of a 16×16 block of 32-bit lanes (`r[i]` lane j → result `[j]` lane i):
/// pairs of rows interleaved by 32 bits, then by 64, then 128-bit lanes gathered.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn transpose16(r: [std::arch::x86_64::__m512i; 16]) -> [std::arch::x86_64::__m512i; 16] {
    use std::arch::x86_64::*;
    let mut t = [_mm512_setzero_si512(); 16];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    // u[4i + j], 128-bit lane g: column 4g + j of rows 4i..4i+4.
    let mut u = [_mm512_setzero_si512(); 16];
    for i in 0..4 {
        u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    let mut out = [_mm512_setzero_si512(); 16];
    for j in 0..4 {
        let x0 = _mm512_shuffle_i32x4::<0x44>(u[j], u[4 + j]);
        let x1 = _mm512_shuffle_i32x4::<0xee>(u[j], u[4 + j]);
        let y0 = _mm512_shuffle_i32x4::<0x44>(u[8 + j], u[12 + j]);
        let y1 = _mm512_shuffle_i32x4::<0xee>(u[8 + j], u[12 + j]);
        out[j] = _mm512_shuffle_i32x4::<0x88>(x0, y0);
        out[4 + j] = _mm512_shuffle_i32x4::<0xdd>(x0, y0);
        out[8 + j] = _mm512_shuffle_i32x4::<0x88>(x1, y1);
        out[12 + j] = _mm512_shuffle_i32x4::<0xdd>(x1, y1);
    }
    out
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::super::bf16::pair_of;
    use super::*;

    /// The row-major A panel from each source layout (k contiguous, rows contiguous —
    /// the transposing path —, neither) against the scalar definition: 21 rows of 45
    /// elements (odd k: a half-empty last pair, and pairs 23..32 of padding) into 32 rows.
    #[test]
    fn every_layout_packs_the_same_rows() {
        if !crate::gemm::bf16::available() {
            eprintln!("no AVX512_BF16 here: the packer cannot run");
            return;
        }
        let (lanes, kc, width) = (21usize, 45usize, 32usize);
        let steps = AmxBf16::steps(kc);
        assert_eq!(steps, 32);
        let x: Vec<f32> = (0..lanes * kc)
            .map(|i| (i as f32 * 0.37).sin() * 3.0)
            .collect();
        let want: Vec<u32> = (0..steps * width)
            .map(|i| pair_of(&x, (lanes, kc), i / steps, i % steps))
            .collect();
        let xt: Vec<f32> = (0..kc * lanes)
            .map(|i| x[(i % lanes) * kc + i / lanes])
            .collect();
        let spread: Vec<f32> = x.iter().flat_map(|&v| [v, f32::NAN]).collect();
        for (what, src, ls, ks) in [
            ("k contiguous", &x, kc, 1),
            ("rows contiguous", &xt, 1, lanes),
            ("strided", &spread, 2 * kc, 2),
        ] {
            let mut dst = vec![f32::NAN; steps * width];
            // SAFETY: the CPU has AVX512_BF16; every (l, t) is inside src; dst's size.
            unsafe { pack_rows(&mut dst, (steps, 0), src.as_ptr(), ls, ks, lanes, kc, width) };
            let got: Vec<u32> = dst.iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want, "{what}");
        }
    }

    /// The transpose of a 16×16 block, lane by lane.
    #[test]
    fn transpose16_transposes() {
        if !crate::isa::Isa::Avx512.available() {
            eprintln!("no AVX-512 here");
            return;
        }
        use std::arch::x86_64::*;
        let m: Vec<u32> = (0..256).collect();
        // SAFETY: the CPU has AVX-512F; each row is 16 u32.
        let out = unsafe {
            let rows: [__m512i; 16] =
                std::array::from_fn(|i| _mm512_loadu_si512(m[16 * i..].as_ptr().cast()));
            transpose16(rows)
        };
        for (j, v) in out.iter().enumerate() {
            let mut lanes = [0u32; 16];
            // SAFETY: 16 u32 of room.
            unsafe { _mm512_storeu_si512(lanes.as_mut_ptr().cast(), *v) };
            let want: Vec<u32> = (0..16).map(|i| m[16 * i + j]).collect();
            assert_eq!(lanes.to_vec(), want, "column {j}");
        }
    }
}
