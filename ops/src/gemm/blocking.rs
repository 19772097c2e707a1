//! How a product is blocked: KC steps of k and NC columns of op(B) per packed block (sized
//! to the caches), when it forks, and how a long k splits into two halves.

use super::*;

/// Below this many multiply-adds a product runs on the calling thread: forking costs more.
pub(super) const PARALLEL_MIN_MACS: usize = 1 << 18;

/// Steps of k per packed block. A's panel is MR·KC floats (6·256·4 = 6 KiB, in L1) while
/// B's panels stream from L2 in memory order; a C tile is read and written once per KC
/// steps (24 vector loads and stores per 6144 vector FMAs on AVX-512). The same on every
/// path, so the two x86 paths round alike.
pub(super) const KC: usize = 256;

/// Columns of op(B) per packed block: KC·NC floats in half the L2 (the other half for the
/// A panels and C tiles passing through), a multiple of every NR (64), at least one panel.
/// 1 MiB of L2 (Zen 4) gives 512; 2 MiB (Sapphire/Emerald Rapids) 1024.
pub(super) fn nc_block() -> usize {
    let l2 = crate::cache::l2_bytes();
    let nc = (l2 / 2) / (KC * 4);
    (nc / 64 * 64).clamp(64, 4096)
}

/// Whether an m×n×k product forks: below this many multiply-adds, or on one thread, it
/// runs on the calling thread.
pub(super) fn forks(m: usize, n: usize, k: usize) -> bool {
    m * n * k >= PARALLEL_MIN_MACS && rayon::current_num_threads() > 1
}

/// Products with at least this many packed steps of k run as two halves of k, the second
/// into a buffer then added to C (see [`run`]): 16 KC blocks, which ∇W = Xᵀ·∇Y of a
/// sampled subgraph (k = its 6–8 thousand nodes) passes and no product over features does.
pub(super) const K_SPLIT_STEPS: usize = 16 * KC;

/// How [`run`] blocks k, in packed steps: (steps per block, the split). Below
/// [`K_SPLIT_STEPS`], blocks of [`KC`] and no split. From there k runs as two halves, each
/// in equal blocks of at most KC: half = ⌈steps/2⌉ in nb = ⌈half/KC⌉ blocks of
/// ⌈half/nb⌉, the split after the first nb. The halves then differ by at most 2·nb steps
/// (k = 8000: 4000 and 4000 in blocks of 250; at a KC-block boundary they were 4096 and
/// 3904, and the thread of the first half set the pace at 2 threads). A function of k
/// alone, so a product's row and column parts (which the executor runs apart) and a
/// [`PackedB`] block k where the whole would, and the thread count never changes a bit.
pub(super) fn k_blocks(steps: usize) -> (usize, Option<usize>) {
    if steps < K_SPLIT_STEPS {
        return (KC, None);
    }
    let half = steps.div_ceil(2);
    let nb = half.div_ceil(KC);
    let kc = half.div_ceil(nb);
    (kc, Some(nb * kc))
}

/// [`k_blocks`] in elements of k for a tile routine that packs `k_step` elements a step:
/// (elements per block, the split).
pub(super) fn k_blocks_of(k: usize, k_step: usize) -> (usize, Option<usize>) {
    let (kc, split) = k_blocks(k.div_ceil(k_step));
    (kc * k_step, split.map(|s| s * k_step))
}

/// The range of k that `half` covers in [`k_blocks_of`]'s blocking of k (packing `k_step`
/// elements a step), with the block length: an error naming `kernel` when k does not split.
pub(super) fn half_range(
    kernel: &'static str,
    k: usize,
    k_step: usize,
    half: KHalf,
) -> Result<(std::ops::Range<usize>, usize), KernelError> {
    let (kc, split) = k_blocks_of(k, k_step);
    let Some(split) = split else {
        return Err(KernelError::View {
            kernel,
            what: format!("k = {k} is below the split ({K_SPLIT_STEPS} packed steps)"),
        });
    };
    let ks = match half {
        KHalf::First => 0..split,
        KHalf::Second => split..k,
    };
    Ok((ks, kc))
}

/// Rows of a row-contiguous operand packed at a time across its panels (op(B)'s block in
/// `pack_b_block`, a group of op(A)ᵀ's panels in `block`) for a tile routine packing
/// `k_step` elements a step: 8 for f32 (16 KiB of a 512-column block, kept in L1), 32 for
/// bf16 pairs (a part then fills whole chunks of an AMX tile's 16 pairs, so its padding
/// ends where the panel's does).
pub(super) const fn rows_per_part(k_step: usize) -> usize {
    if k_step == 1 {
        8
    } else {
        32
    }
}

/// Row panels of op(A) packed together where op(A) is transposed (see [`block`]); also the
/// row panels that a thread claims at a time in a shared half of k ([`run_halves`]), so a
/// claim packs as one thread's sweep would. 32 panels are 192 columns of X (12 lines of
/// each row, read in order), where 8 (3 lines) left the forced AVX2 path's ∇W at 87–95 %
/// of OpenBLAS's Haswell kernels and 32 brought it to 96–103 % (tn 8000×512 and
/// 8000×1024, 1 and 2 threads, an AMX Xeon; AVX-512 unchanged or better). The group's
/// packed panels are 32·KC·MR floats (192 KiB at MR 6), beside a B block of half the L2.
pub(super) const GROUP: usize = 32;
