//! A store's section files as memory maps: [`Backing`] (a mapping, or nothing for an empty
//! file), [`map_section`] (length checked against the header before mapping) and
//! [`check_offsets`] (a CSR's offsets). The leaf under `GraphStore` (mmap.rs) and the typed
//! sections (typed_maps.rs): it names neither.

use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

use crate::store::format::SectionEntry;
use crate::store::StoreError;

/// A mapped section, or nothing for an empty one (zero-length files cannot be mapped).
pub(super) enum Backing {
    Empty,
    Map(Mmap),
}

impl Backing {
    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            Backing::Empty => &[],
            Backing::Map(m) => m,
        }
    }
}

/// Checks CSR offsets: N+1 ≥ 1 entries, first 0, monotone, last = `nnz`.
pub(crate) fn check_offsets(offsets: &[u64], nnz: u64) -> Result<(), String> {
    let Some(&first) = offsets.first() else {
        return Err("offsets are empty, expected N+1 entries".into());
    };
    if first != 0 {
        return Err(format!("offsets[0] expected 0, got {first}"));
    }
    if let Some(i) = offsets.windows(2).position(|w| w[1] < w[0]) {
        return Err(format!(
            "offsets not monotone at row {i}: offsets[{i}] = {}, offsets[{}] = {}",
            offsets[i],
            i + 1,
            offsets[i + 1]
        ));
    }
    let last = offsets[offsets.len() - 1];
    if last != nnz {
        return Err(format!("offsets[N] expected nnz = {nnz}, got {last}"));
    }
    Ok(())
}

/// Maps section `name` (file `file_name` in `dir`), its length checked against `entry`.
pub(super) fn map_section(
    dir: &Path,
    entry: &SectionEntry,
    name: &str,
    file_name: &str,
) -> Result<Backing, StoreError> {
    let path = dir.join(file_name);
    let file = File::open(&path).map_err(|e| StoreError::io(&path, "open section", e))?;
    let len = file
        .metadata()
        .map_err(|e| StoreError::io(&path, "stat", e))?
        .len();
    if len != entry.bytes {
        return Err(StoreError::corrupt(
            &path,
            name,
            format!(
                "file length expected {} bytes, got {len} ({})",
                entry.bytes,
                if len < entry.bytes {
                    "truncated"
                } else {
                    "extended"
                }
            ),
        ));
    }
    if len == 0 {
        return Ok(Backing::Empty);
    }
    if usize::try_from(len).is_err() {
        return Err(StoreError::corrupt(
            &path,
            name,
            "section larger than the address space",
        ));
    }
    // SAFETY: the file is opened read-only and the mapping is read-only. Its length was
    // checked above; saintflow never writes to a committed store. See mmap.rs's module
    // comment for what another process truncating the file would do.
    let map = unsafe { Mmap::map(&file) }.map_err(|e| StoreError::io(&path, "mmap", e))?;
    if map.len() as u64 != len {
        return Err(StoreError::corrupt(
            &path,
            name,
            "file changed size while being mapped",
        ));
    }
    Ok(Backing::Map(map))
}
