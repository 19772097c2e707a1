//! The binary layout's `.npz` archives: a member opened and vetted (`npz_member`), streamed
//! as f64 (`for_each_f64`), a one-element count (`npz_count`).

use std::fs::File;
use std::io::{BufReader, Read, Seek};
use std::path::Path;

use crate::npy::{open_npy, plain_dtype, VettedNpy};
use crate::store::import::limits;
use crate::store::StoreError;

/// Opens member `name` of an npz archive, its NPY header vetted; None if absent.
pub(super) fn npz_member<'a, R: Read + Seek>(
    npz: &'a mut npyz::npz::NpzArchive<R>,
    path: &Path,
    name: &str,
) -> Result<Option<VettedNpy<impl Read + 'a>>, StoreError> {
    if !npz.array_names().any(|n| n == name) {
        return Ok(None);
    }
    let archive_len = std::fs::metadata(path)
        .map_err(|e| StoreError::io(path, "stat", e))?
        .len();
    let file = npz
        .zip_archive()
        .by_name(&npyz::npz::file_name_from_array_name(name))
        .map_err(|e| StoreError::input(path, format!("member {name}: {e}")))?;
    let bad = |e: String| StoreError::input(path, format!("member {name}: {e}"));
    let total =
        limits::npz_member_len(file.size(), file.compressed_size(), archive_len).map_err(bad)?;
    let npy = open_npy(file, Some(total)).map_err(bad)?;
    if npy.order() != npyz::Order::C {
        return Err(StoreError::input(
            path,
            format!("member {name}: Fortran order, expected C order"),
        ));
    }
    Ok(Some(npy))
}

pub(super) fn open_npz(path: &Path) -> Result<npyz::npz::NpzArchive<BufReader<File>>, StoreError> {
    npyz::npz::NpzArchive::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => StoreError::io(path, "open", e),
        _ => StoreError::input(path, format!("not a valid npz (zip) archive: {e}")),
    })
}

pub(super) fn required<T>(x: Option<T>, path: &Path, name: &str) -> Result<T, StoreError> {
    x.ok_or_else(|| StoreError::input(path, format!("missing member {name}.npy")))
}

/// Streams a member's elements as f64, calling `each(index, x)` in order.
pub(super) fn for_each_f64<R: Read>(
    npy: VettedNpy<R>,
    path: &Path,
    name: &str,
    mut each: impl FnMut(u64, f64) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let bad = |e: std::io::Error| StoreError::input(path, format!("member {name}: {e}"));
    let t =
        plain_dtype(&npy).map_err(|e| StoreError::input(path, format!("member {name}: {e}")))?;
    macro_rules! stream {
        ($t:ty) => {{
            let data = npy
                .data::<$t>()
                .map_err(|e| StoreError::input(path, format!("member {name}: {e}")))?;
            for (i, x) in data.enumerate() {
                each(i as u64, x.map_err(bad)? as f64)?;
            }
        }};
    }
    match t.as_str() {
        "<f4" => stream!(f32),
        "<f8" => stream!(f64),
        "<i4" => stream!(i32),
        "<i8" => stream!(i64),
        "<u4" => stream!(u32),
        "|u1" | "<u1" => stream!(u8),
        "|i1" | "<i1" => stream!(i8),
        t => {
            return Err(StoreError::input(
                path,
                format!("member {name}: dtype {t}, expected little-endian float or integer"),
            ))
        }
    }
    Ok(())
}

/// A 1-element count array (`num_nodes_list`, `num_edges_list`).
pub(super) fn npz_count<R: Read + Seek>(
    npz: &mut npyz::npz::NpzArchive<R>,
    path: &Path,
    name: &str,
) -> Result<u64, StoreError> {
    let npy = required(npz_member(npz, path, name)?, path, name)?;
    // Judged by the shape, before any element is read: several counts are refused
    // without reading (or holding) them.
    let k: u64 = npy.shape().iter().product();
    if k != 1 {
        return Err(StoreError::input(
            path,
            match k {
                0 => format!("member {name}: empty, expected one count"),
                k => format!(
                    "member {name}: {k} counts: a graph-property dataset of several graphs; import ogb reads node-property datasets (one graph)"
                ),
            },
        ));
    }
    let mut count = None;
    for_each_f64(npy, path, name, |_, x| {
        count = Some(x);
        Ok(())
    })?;
    match count {
        Some(c) if c >= 0.0 && c.fract() == 0.0 => Ok(c as u64),
        Some(c) => Err(StoreError::input(
            path,
            format!("member {name}: {c} is not a count, expected a non-negative integer"),
        )),
        None => Err(StoreError::input(
            path,
            format!("member {name}: empty, expected one count"),
        )),
    }
}
