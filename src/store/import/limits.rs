//! Sizes checked before allocating (issue 55): every count an importer reads from a header
//! or an argument is held against the input's real length and the memory this process may
//! use before anything in proportion to it is allocated, and the large tables are
//! allocated fallibly, so that a lying count is an error naming the file, never an abort
//! (`memory allocation of N bytes failed`, exit 134).
//!
//! * [`max_gzip_lines`]: deflate expands at most [`DEFLATE_MAX_RATIO`]:1, so a gzip file of
//!   `len` bytes decodes to at most `len × 1032` bytes, and holds at most that many lines.
//! * [`check_memory`]: an estimate against [`crate::machine::allocatable`], the smallest of
//!   the machine's memory ([`crate::machine::MemoryLimit::Detect`], which
//!   `SAINTFLOW_MEMORY_LIMIT` overrides) and what this process's address-space limit
//!   (`ulimit -v`) leaves beside what it has mapped.
//! * [`filled`]: a `Vec` of `n` copies through `try_reserve_exact`: a size that passed the
//!   checks but still does not fit is an error too.

use std::path::Path;

use crate::machine::{allocatable, human};
use crate::store::StoreError;

/// Longest line an importer reads (64 MiB): a feature row of a million columns written
/// by pandas (`%.18g`, up to 25 bytes a value) fits twice; a longer line is an error, so
/// a hostile file (a 2 GiB line inside a 2 MB gzip) cannot make a reader hold more.
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// Deflate's largest expansion: one 258-byte match per two bits of input (zlib's
/// technical notes give 1032:1).
pub const DEFLATE_MAX_RATIO: u64 = 1032;

/// The length of an npz member's NPY stream, vetted: its declared uncompressed `size` can
/// be no more than [`DEFLATE_MAX_RATIO`] × its compressed size (numpy writes members
/// stored or deflated), which can be no more than the archive's `archive_len`. Checked
/// before the member's header is trusted (see [`crate::npy::open_npy`]'s `total`).
pub fn npz_member_len(size: u64, compressed: u64, archive_len: u64) -> Result<u64, String> {
    if compressed > archive_len {
        return Err(format!(
            "declares {compressed} compressed bytes, expected at most the archive's {archive_len}"
        ));
    }
    let most = compressed
        .saturating_mul(DEFLATE_MAX_RATIO)
        .saturating_add(DEFLATE_MAX_RATIO);
    if size > most {
        return Err(format!(
            "declares {size} bytes uncompressed from {compressed} compressed, expected at most {most} (deflate expands at most {DEFLATE_MAX_RATIO}:1)"
        ));
    }
    Ok(size)
}

/// Bytes per node of the tables an importer holds in memory: a role (1), a single label
/// held twice while it is written (8), the training set's bit and a flag (≤ 2), rounded
/// up. Multi-label rows add ⌈C/8⌉ each, checked once C is known.
pub const TABLE_BYTES_PER_NODE: u128 = 12;

/// The most lines a gzip file of `len` bytes can decode to (each at least one byte, its
/// newline; the last may lack it).
pub fn max_gzip_lines(len: u64) -> u64 {
    len.saturating_mul(DEFLATE_MAX_RATIO).saturating_add(1)
}

/// Refuses an import whose tables (`bytes`, described by `what`) would not fit in
/// [`allocatable`]; the error names `path`, the input whose count asked for them.
pub fn check_memory(path: &Path, what: &str, bytes: u128) -> Result<(), StoreError> {
    if let Some((limit, source)) = allocatable() {
        if bytes > u128::from(limit) {
            return Err(StoreError::input(
                path,
                format!(
                    "{what} need {} of memory, expected at most {} ({source}): a count in the input too large?",
                    human(bytes),
                    human(u128::from(limit))
                ),
            ));
        }
    }
    Ok(())
}

/// `n` copies of `x`, allocated fallibly: an allocation that fails is an error naming
/// `path` and `what`, not an abort.
pub fn filled<T: Clone>(path: &Path, what: &str, n: u64, x: T) -> Result<Vec<T>, StoreError> {
    let bytes = u128::from(n) * std::mem::size_of::<T>() as u128;
    let fail = || {
        StoreError::input(
            path,
            format!("{what}: cannot allocate {} for {n} entries", human(bytes)),
        )
    };
    let n = usize::try_from(n).map_err(|_| fail())?;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| fail())?;
    v.resize(n, x);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue55_filled_fails_cleanly_beyond_memory() {
        let p = Path::new("x.csv.gz");
        assert_eq!(filled(p, "roles", 3, 7u8).unwrap(), [7, 7, 7]);
        let e = filled(p, "labels", u64::MAX / 2, 0u32)
            .unwrap_err()
            .to_string();
        assert!(e.contains("x.csv.gz: labels: cannot allocate"), "{e}");
    }

    #[test]
    fn issue55_memory_check_names_the_file() {
        let p = Path::new("num-node-list.csv.gz");
        check_memory(p, "tables", 1).unwrap();
        let e = check_memory(p, "tables of 4e9 nodes", u128::MAX)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("num-node-list.csv.gz: tables of 4e9 nodes need"),
            "{e}"
        );
    }

    #[test]
    fn gzip_line_bound_is_the_deflate_ratio() {
        assert_eq!(max_gzip_lines(0), 1);
        assert_eq!(max_gzip_lines(100), 103_201);
        assert_eq!(max_gzip_lines(u64::MAX), u64::MAX);
    }
}
